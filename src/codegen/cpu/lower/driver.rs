//! The driver: the work-item loop over waves, barrier regions, and the fast and flat loops.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    /// Lowers the kernel body inside the region/wave driver and finishes the function.
    pub fn run(mut self, kernel: Handle<Function>) -> Result<Lowered, Error> {
        let f = &self.m.functions[kernel];
        // A kernel without barriers whose bounds-test `if` may restart a wave runs its full
        // waves in a loop of their own first; the ordinary loop below takes over at the first
        // wave whose test fails. It loads the launch's values again, so that nothing but the
        // context and the wave counter is live from the fast loop into it (values live into
        // the masked code were what the register allocator spilled in the fast loop).
        let restarts = !self.has_barrier && restartable(f);
        // The blocks of the ordinary loop when it only takes over: laid out after the fast
        // loop (cold).
        let mut slow_blocks = None;
        if restarts {
            let (volume_v, waves_v, state_base) = self.launch_values();
            let flat_lin = self.fast_loop(kernel, waves_v, state_base, volume_v)?;
            slow_blocks = Some(self.b.func.dfg.num_blocks());
            let restart = self.b.current_block().expect("the restart block");
            self.b.set_cold_block(restart);
            // The wave, from its first linear id, which the failing test's branch passes:
            // any use of the loop's counter out here made the register allocator keep the
            // counter on the stack in the fast loop (about 6 % of the triad's throughput).
            // Through memory, read back by an atomic load (which the optimiser does not
            // forward a store to), or it folds `lin / n` back into the counter.
            let lin = flat_lin.unwrap_or_else(|| self.b.block_params(restart)[0]);
            let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                4,
                2,
            ));
            let addr = self.b.ins().stack_addr(types::I64, slot, 0);
            self.b.ins().store(notrap(), lin, addr, 0);
            let lin = self.b.ins().atomic_load(types::I32, notrap(), addr);
            let w = self.b.ins().udiv_imm_u(lin, self.n as i64);
            self.b.def_var(self.drv_wave, w);
            self.kparams.clear();
            self.shared_offsets.clear();
            self.shared_lens.clear();
            self.prologue(f);
        }
        let (volume_v, waves_v, state_base) = self.launch_values();
        let state_stride = if self.has_barrier {
            Some(
                self.b
                    .ins()
                    .load(types::I64, notrap(), self.ctx, ctx_off::STATE_STRIDE),
            )
        } else {
            None
        };
        let region_head = self.b.create_block();
        let wave_head = self.b.create_block();
        let wave_body = self.b.create_block();
        let start = self.b.create_block();
        let wave_next = self.b.create_block();
        let region_end = self.b.create_block();
        self.wave_next = wave_next;
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.def_var(self.drv_resume, zero);
        if !restarts {
            self.b.def_var(self.drv_wave, zero);
        }
        self.b.ins().jump(region_head, &[]);

        self.b.switch_to_block(region_head);
        let none = self.b.ins().iconst(types::I32, NONE);
        if self.has_barrier {
            let zero = self.b.ins().iconst(types::I32, 0);
            self.b.def_var(self.drv_wave, zero);
        }
        self.b.def_var(self.drv_next, none);
        self.b.ins().jump(wave_head, &[]);

        self.b.switch_to_block(wave_head);
        let w = self.b.use_var(self.drv_wave);
        let done = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, w, waves_v);
        self.b.ins().brif(done, region_end, &[], wave_body, &[]);

        self.b.switch_to_block(wave_body);
        let w = self.b.use_var(self.drv_wave);
        self.state = match state_stride {
            Some(stride) => {
                let w64 = self.b.ins().uextend(types::I64, w);
                let off = self.b.ins().imul(w64, stride);
                self.b.ins().iadd(state_base, off)
            }
            None => state_base,
        };
        let whole_waves = self.wave_setup(w, volume_v);
        let resume = self.b.use_var(self.drv_resume);

        // The exec mask: declared first, so it is in scope (spilled) at every barrier.
        let nmask = chunks(Scalar::Bool, self.n);
        self.exec = (0..nmask).map(|_| self.new_var(types::I32X4)).collect();
        let dispatch_block = self.b.create_block();
        self.b.ins().jump(dispatch_block, &[]);

        self.b.switch_to_block(start);
        if self.has_barrier {
            // Spilled at every barrier: a full wave's is a constant.
            let full_b = self.b.create_block();
            let part_b = self.b.create_block();
            let body_b = self.b.create_block();
            self.b.ins().brif(self.wave_full, full_b, &[], part_b, &[]);
            self.b.switch_to_block(full_b);
            let ones = self.full_chunk();
            self.set_exec(&vec![ones; nmask as usize]);
            self.b.ins().jump(body_b, &[]);
            self.b.switch_to_block(part_b);
            let init_mask = self.initial_mask(volume_v);
            self.set_exec(&init_mask);
            self.b.ins().jump(body_b, &[]);
            self.b.switch_to_block(body_b);
        } else {
            // Usually dead: while the mask is known (`Known`), `exec` computes it.
            let init_mask = self.initial_mask(volume_v);
            self.set_exec(&init_mask);
        }
        self.known = if whole_waves {
            Known::Full
        } else {
            Known::Initial
        };
        let types = (self.types_of)(kernel);
        let an = self
            .an
            .analyse(kernel, vec![Class::Uniform; f.params.len()]);
        self.frames.push(Frame {
            func: kernel,
            f,
            an,
            types,
            params: Vec::new(),
            locals: vec![None; f.locals.len()],
            ret: None,
            exit: None,
            loop_base: 0,
            is_kernel: true,
        });
        let kernel_end = self.b.create_block();
        self.frames[0].exit = Some(kernel_end);
        self.regions.push(kernel_end);
        if self.block(&f.body)? {
            self.b.ins().jump(kernel_end, &[]);
        }
        self.b.switch_to_block(kernel_end);
        if self.has_barrier {
            self.record(FINISHED);
        }
        self.b.ins().jump(wave_next, &[]);

        // Dispatch: the first region starts every wave; later ones resume at the barrier.
        self.b.switch_to_block(dispatch_block);
        if self.resumes.is_empty() {
            self.b.ins().jump(start, &[]);
        } else {
            let mut sw = Switch::new();
            sw.set_entry(0, start);
            for (i, &r) in self.resumes.iter().enumerate() {
                sw.set_entry(i as u128 + 1, r);
            }
            sw.emit(&mut self.b, resume, start);
        }

        self.b.switch_to_block(wave_next);
        let w = self.b.use_var(self.drv_wave);
        let w1 = self.b.ins().iadd_imm_s(w, 1);
        self.b.def_var(self.drv_wave, w1);
        self.b.ins().jump(wave_head, &[]);

        self.b.switch_to_block(region_end);
        if self.has_barrier {
            // Every wave finished, or all stopped at one barrier: the next region resumes
            // there.
            let next = self.b.use_var(self.drv_next);
            let fin = self.b.ins().icmp_imm_s(IntCC::Equal, next, FINISHED);
            let ret = self.b.create_block();
            let again = self.b.create_block();
            self.b.ins().brif(fin, ret, &[], again, &[]);
            self.b.switch_to_block(ret);
            let z = self.b.ins().iconst(types::I32, 0);
            self.b.ins().return_(&[z]);
            self.b.switch_to_block(again);
            self.b.def_var(self.drv_resume, next);
            self.b.ins().jump(region_head, &[]);
        } else {
            // Without barriers there is one region, which every wave finishes.
            let z = self.b.ins().iconst(types::I32, 0);
            self.b.ins().return_(&[z]);
        }

        if let Some(first) = slow_blocks {
            for i in first..self.b.func.dfg.num_blocks() {
                self.b.set_cold_block(Block::from_u32(i as u32));
            }
        }
        self.b.seal_all_blocks();
        let barriers = self.resumes.len() as u32;
        let state_bytes = self.state_size.div_ceil(16) * 16;
        if state_bytes > MAX_STATE_BYTES {
            return Err(Error {
                private: Some((state_bytes, MAX_STATE_BYTES)),
                ..Error::new(
                    crate::codegen::codes::PRIVATE_MEMORY,
                    format!(
                        "a wave's private arrays and state need {state_bytes} bytes, more than \
                         the {MAX_STATE_BYTES} the CPU backend addresses per wave"
                    ),
                )
                .in_function(&self.frames[0].f.name)
            });
        }
        let state_bytes = state_bytes as u32;
        let static_shared = *self.shared_offsets.last().unwrap_or(&0);
        let sites = std::mem::take(&mut self.sites);
        let debug_sites = std::mem::take(&mut self.debug_sites);
        let tc = self.jm.target_config();
        self.b.finalize(tc);
        Ok(Lowered {
            sites,
            debug_sites,
            state_bytes,
            static_shared,
            barriers,
            can_stream: self.can_stream,
        })
    }

    /// The block's volume, its number of waves and the waves' state area (one area for all
    /// waves without barriers, else one per wave, `STATE_STRIDE` apart).
    pub(super) fn launch_values(&mut self) -> (Value, Value, Value) {
        let volume_v = self.bdim[3];
        let waves_v = {
            let v = self.b.ins().iadd_imm_s(volume_v, self.n as i64 - 1);
            self.b.ins().udiv_imm_u(v, self.n as i64)
        };
        let state_base = self
            .b
            .ins()
            .load(types::I64, notrap(), self.ctx, ctx_off::STATE);
        (volume_v, waves_v, state_base)
    }

    /// The values of wave `w`: its first linear id, local ids and whether it is full; returns
    /// whether every wave of the block is full (known at compile time).
    pub(super) fn wave_setup(&mut self, w: Value, volume_v: Value) -> bool {
        self.wave_lin = self.b.ins().imul_imm_s(w, self.n as i64);
        self.local_ids_for_wave();
        // A full wave (every lane inside the block) starts with the all-ones mask; only a
        // partial last wave computes its mask.
        let rem = self.b.ins().isub(volume_v, self.wave_lin);
        // A fixed block of whole waves has only full waves.
        let whole_waves = self.cfg.whole_waves
            || (self.cfg.block[0] != 0 && self.cfg.block.iter().product::<u32>() % self.n == 0);
        self.wave_full = if whole_waves {
            self.b.ins().iconst(types::I8, 1)
        } else {
            self.b
                .ins()
                .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, rem, self.n as i64)
        };
        whole_waves
    }

    /// The full-wave loop of a kernel without barriers (see `restartable`): waves `0..` run
    /// the body with its first bounds-test `if` on the fast side only; a wave whose test fails
    /// jumps, with `drv_wave` still naming it, to the block this leaves current, where the
    /// ordinary wave loop (masked code) runs it and the rest of the workgroup. Nothing before
    /// that `if` has effects, so running the wave again from its start is unobservable. The
    /// masked code is then outside this loop, so the register allocator has nothing in it to
    /// spill the loop's long-lived values (buffer table, parameters, wave counter) for.
    pub(super) fn fast_loop(
        &mut self,
        kernel: Handle<Function>,
        waves_v: Value,
        state_base: Value,
        volume_v: Value,
    ) -> Result<Option<Value>, Error> {
        let f = &self.m.functions[kernel];
        let head = self.b.create_block();
        let body = self.b.create_block();
        let next = self.b.create_block();
        let done = self.b.create_block();
        let restart = self.b.create_block();
        self.b.append_block_param(restart, types::I32);
        let an = self
            .an
            .analyse(kernel, vec![Class::Uniform; f.params.len()]);
        self.fast_bufs = fast_bufs(f, &an);
        self.fast_least = self.fast_lens();
        // The flat loop (see `flat_loop_ok`): the workgroups `group.x .. group.w` of a 1-D
        // grid (a run of consecutive groups, see `CompiledKernel::launch`; at least the one
        // named) as one loop over the global index of each wave's first lane. A loop per
        // workgroup costs a mispredicted exit branch per workgroup (4 % of a streaming
        // kernel's throughput at 16 waves per group), and a (group, wave) pair of counters
        // costs registers the loop needs to stay free of spills.
        let flat = flat_loop_ok(f)
            && self.cfg.block[1] == 1
            && self.cfg.block[2] == 1
            && (self.cfg.whole_waves
                || (self.cfg.block[0] != 0 && self.cfg.block[0] % self.n == 0));
        // Streams: the flat loop's buffers at the wave's own index, split into those the
        // kernel reads anywhere (prefetched) and those it only writes (non-temporal).
        self.can_stream = stream::AVAILABLE && flat && streamable(f) && !self.fast_bufs.is_empty();
        if self.can_stream && self.cfg.streaming {
            (self.stream_reads, self.stream_writes) =
                self.fast_bufs.iter().partition(|&&p| reads_buffer(f, p));
        }
        let flat_end = if flat {
            let bx = self.b.ins().uextend(types::I64, self.bdim[0]);
            let end = self
                .b
                .ins()
                .load(types::I32, notrap(), self.ctx, ctx_off::GROUP + 12);
            let first = self.group[0];
            let one_more = self.b.ins().iadd_imm_s(first, 1);
            let end = self.b.ins().umax(end, one_more);
            let first = self.b.ins().uextend(types::I64, first);
            let start = self.b.ins().imul(first, bx);
            let end64 = self.b.ins().uextend(types::I64, end);
            let stop = self.b.ins().imul(end64, bx);
            self.b.def_var(self.drv_flat, start);
            self.flat_bx = Some(bx);
            Some((end, stop))
        } else {
            None
        };
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.def_var(self.drv_wave, zero);
        self.b.ins().jump(head, &[]);

        self.b.switch_to_block(head);
        let end = match flat_end {
            Some((_, stop)) => {
                let i = self.b.use_var(self.drv_flat);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, i, stop)
            }
            None => {
                let w = self.b.use_var(self.drv_wave);
                self.b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, w, waves_v)
            }
        };
        self.b.ins().brif(end, done, &[], body, &[]);

        self.b.switch_to_block(body);
        let w = self.b.use_var(self.drv_wave);
        self.state = state_base;
        let whole_waves = self.wave_setup(w, volume_v);
        if flat {
            // The wave counter stays 0 here: `wave_setup` only says the wave is whole, and
            // `global_id.x` comes from the flat index (the kernel reads no local id).
            let i = self.b.use_var(self.drv_flat);
            self.flat_base = Some(self.b.ins().ireduce(types::I32, i));
        }
        let nmask = chunks(Scalar::Bool, self.n);
        self.exec = (0..nmask).map(|_| self.new_var(types::I32X4)).collect();
        let init_mask = self.initial_mask(volume_v);
        self.set_exec(&init_mask);
        self.known = if whole_waves {
            Known::Full
        } else {
            Known::Initial
        };
        let kernel_end = self.b.create_block();
        self.frames.push(Frame {
            func: kernel,
            f,
            an,
            types: (self.types_of)(kernel),
            params: Vec::new(),
            locals: vec![None; f.locals.len()],
            ret: None,
            exit: Some(kernel_end),
            loop_base: 0,
            is_kernel: true,
        });
        self.regions.push(kernel_end);
        self.wave_next = next;
        self.restart = Some(restart);
        let mark = self.scope.len();
        let mut open = true;
        for (i, st) in f.body.iter().enumerate() {
            self.restart_ok = match &st.kind {
                StmtKind::If { cond, .. } => {
                    pure_expr(f, *cond) && f.body[..i].iter().all(|p| pure_let(f, p))
                }
                _ => false,
            };
            if !self.stmt(st)? {
                open = false;
                break;
            }
        }
        self.restart_ok = false;
        self.restart = None;
        self.fast_bufs.clear();
        self.fast_least = None;
        self.fast_ptrs.clear();
        self.stream_reads.clear();
        self.stream_writes.clear();
        self.scope.truncate(mark);
        if open {
            self.b.ins().jump(kernel_end, &[]);
        }
        self.b.switch_to_block(kernel_end);
        self.b.ins().jump(next, &[]);
        self.flat_base = None;
        self.b.switch_to_block(next);
        if let Some((_, stop)) = flat_end {
            // Rotated: the test at the bottom, one branch per wave.
            let i = self.b.use_var(self.drv_flat);
            let i1 = self.b.ins().iadd_imm_s(i, self.n as i64);
            self.b.def_var(self.drv_flat, i1);
            let more = self.b.ins().icmp(IntCC::UnsignedLessThan, i1, stop);
            self.b.ins().brif(more, body, &[], done, &[]);
        } else {
            let w = self.b.use_var(self.drv_wave);
            let w1 = self.b.ins().iadd_imm_s(w, 1);
            self.b.def_var(self.drv_wave, w1);
            self.b.ins().jump(head, &[]);
        }
        self.b.switch_to_block(done);
        if let Some((end, _)) = flat_end {
            let last = self.b.ins().iadd_imm_s(end, -1);
            self.b.ins().store(notrap(), last, self.ctx, ctx_off::GROUP);
        }
        let z = self.b.ins().iconst(types::I32, 0);
        self.b.ins().return_(&[z]);
        self.frames.pop();
        self.regions.pop();
        self.b.switch_to_block(restart);
        if flat {
            // The ordinary loop runs the rest of this group from the failing wave: its group
            // goes to `group.x` (which that loop reads), its first local id is the restart's.
            let lin = self.flat_group_store();
            self.flat_bx = None;
            return Ok(Some(lin));
        }
        Ok(None)
    }

    /// In the flat loop, at an exit: writes the current wave's group to `group.x` and returns
    /// the wave's first linear local id (`u32`).
    pub(super) fn flat_group_store(&mut self) -> Value {
        let bx = self.flat_bx.expect("in the flat loop");
        let i = self.b.use_var(self.drv_flat);
        let g = self.b.ins().udiv(i, bx);
        let g32 = self.b.ins().ireduce(types::I32, g);
        self.b.ins().store(notrap(), g32, self.ctx, ctx_off::GROUP);
        let start = self.b.ins().imul(g, bx);
        let lin = self.b.ins().isub(i, start);
        self.b.ins().ireduce(types::I32, lin)
    }

    /// Records that this wave stopped at `id` (a barrier, or `FINISHED`); every wave of a
    /// region must stop at the same one.
    pub(super) fn record(&mut self, id: i64) {
        let next = self.b.use_var(self.drv_next);
        let is_none = self.b.ins().icmp_imm_s(IntCC::Equal, next, NONE);
        let same = self.b.ins().icmp_imm_s(IntCC::Equal, next, id);
        let ok = self.b.ins().bor(is_none, same);
        let bad = self.b.create_block();
        let good = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(ok, good, &[], bad, &[]);
        self.b.switch_to_block(bad);
        let site = self.add_site(Span::UNKNOWN, "barrier".into());
        let zero = self.b.ins().iconst(types::I64, 0);
        self.fail(err::BARRIER, site, zero, zero);
        self.b.switch_to_block(good);
        let idv = self.b.ins().iconst(types::I32, id);
        self.b.def_var(self.drv_next, idv);
    }

    pub(super) fn local_ids_for_wave(&mut self) {
        let [bx, by, bz] = self.cfg.block;
        let g = GeometryClass::new(self.cfg.block, self.n);
        let lin = self.wave_lin;
        for d in 0..3 {
            self.local_ids[d] = match g.local[d] {
                Class::Affine(_) => {
                    // x: the wave starts at `lin % bx` and runs along the row.
                    let base = if by * bz == 1 {
                        lin
                    } else {
                        self.b.ins().urem_imm_u(lin, bx as i64)
                    };
                    Val::A(base, 1)
                }
                Class::Uniform => {
                    let v = match d {
                        1 if by > 1 => {
                            let q = self.b.ins().udiv_imm_u(lin, bx as i64);
                            self.b.ins().urem_imm_u(q, by as i64)
                        }
                        2 if bz > 1 => self.b.ins().udiv_imm_u(lin, (bx * by) as i64),
                        _ => self.b.ins().iconst(types::I32, 0),
                    };
                    Val::U(v)
                }
                Class::Varying => {
                    let mut lanes = Vec::new();
                    for l in 0..self.n {
                        let li = self.b.ins().iadd_imm_s(lin, l as i64);
                        let v = match d {
                            0 => self.b.ins().urem_imm_u(li, bx as i64),
                            1 => {
                                let q = self.b.ins().udiv_imm_u(li, bx as i64);
                                self.b.ins().urem_imm_u(q, by as i64)
                            }
                            _ => self.b.ins().udiv_imm_u(li, (bx * by) as i64),
                        };
                        lanes.push(v);
                    }
                    Val::V(self.pack_lanes(Scalar::U32, &lanes))
                }
            };
        }
    }

    /// Lanes whose linear id is inside the block.
    pub(super) fn initial_mask(&mut self, volume: Value) -> Vec<Value> {
        let rem = self.b.ins().isub(volume, self.wave_lin);
        let rem = self.b.ins().splat(types::I32X4, rem);
        (0..chunks(Scalar::Bool, self.n))
            .map(|c| {
                let iota: Vec<u64> = (0..4)
                    .map(|j| {
                        let l = c * 4 + j;
                        if l < self.n {
                            l as u64
                        } else {
                            u32::MAX as u64
                        }
                    })
                    .collect();
                let iota = self.const_vec(types::I32X4, &iota);
                self.b.ins().icmp(IntCC::UnsignedLessThan, iota, rem)
            })
            .collect()
    }
}
