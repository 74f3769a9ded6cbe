//! Statements: blocks, assignments, loops, and the escape and reconvergence machinery of
//! structured control flow.

use super::*;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    pub(super) fn block(&mut self, stmts: &[Stmt]) -> LowerResult<()> {
        for s in stmts {
            self.span = s.span;
            self.stmt(s)?;
        }
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> LowerResult<()> {
        match &s.kind {
            StmtKind::Let { local, init } => {
                if let Some(init) = init {
                    let v = self.value(*init)?;
                    let slot = self.local_slot(*local)?;
                    self.b().build_store(slot, v)?;
                }
            }
            StmtKind::Assign { place, value } => self.assign(place, *value)?,
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.value(*cond)?.into_int_value();
                let sync = self.converge_begin()?;
                let (then_lanes, else_lanes) = self.split_lanes(sync, c)?;
                let then_bb = self.cx.context.append_basic_block(self.llfn, "then");
                let else_bb = self.cx.context.append_basic_block(self.llfn, "else");
                let merge = self.cx.context.append_basic_block(self.llfn, "endif");
                self.b().build_conditional_branch(c, then_bb, else_bb)?;
                self.enter_sync(sync, merge);
                self.b().position_at_end(then_bb);
                self.set_lanes(then_lanes)?;
                let r = self.block(then_block);
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.b().position_at_end(else_bb);
                self.set_lanes(else_lanes)?;
                let r = r.and_then(|()| self.block(else_block));
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.leave_sync(sync);
                r?;
                self.b().position_at_end(merge);
                self.converge_end(sync, Self::may_leave(&[then_block, else_block]))?;
                if sync.is_some() && self.escapes_from(&[then_block, else_block], None) {
                    self.dispatch_escape()?;
                }
            }
            StmtKind::Loop { label, kind, body } => self.loop_stmt(label, kind, body)?,
            StmtKind::Block(b) => self.block(b)?,
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let is_break = matches!(s.kind, StmtKind::Break(_));
                let frame = match label {
                    None => self.loops.last(),
                    Some(l) => self
                        .loops
                        .iter()
                        .rev()
                        .find(|f| f.label.as_deref() == Some(l)),
                };
                let Some(frame) = frame else {
                    return self.err(codes::INPUT, "`break`/`continue` outside its loop");
                };
                let to = if is_break { frame.brk } else { frame.cont };
                let k = self
                    .loops
                    .iter()
                    .rposition(|f| f.brk == frame.brk)
                    .expect("the frame is on the stack");
                match self.syncs.last() {
                    // A synced construct inside loop `k` is in the way: through its merge.
                    Some(sync) if sync.loops > k => {
                        let merge = sync.merge;
                        self.set_escape(1 + 2 * k as u64 + (!is_break) as u64)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_unconditional_branch(to)?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Return(v) => {
                let v = v.map(|e| self.value(e)).transpose()?;
                match self.syncs.last() {
                    // A helper's return inside synced constructs goes out through their
                    // merges (a kernel's return ends the lane, which holds up no wait).
                    Some(sync) if !self.is_kernel => {
                        let merge = sync.merge;
                        if let Some(v) = v {
                            let slot = self.return_slot(v.get_type())?;
                            self.b().build_store(slot, v)?;
                        }
                        self.set_escape(ESCAPE_RETURN)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_return(v.as_ref().map(|v| v as _))?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Expr(e) => {
                self.expr(*e)?;
            }
            StmtKind::Barrier => self.t.barrier(self.cx)?,
            StmtKind::WaveBarrier => {
                let mask = self.lanes()?;
                self.t.wave_barrier(self.cx, mask)?
            }
            StmtKind::Fence(scope) => self.t.fence(self.cx, *scope)?,
            StmtKind::Print { .. } | StmtKind::Assert { .. } => self.debug_stmt(&s.kind)?,
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let v = self.value(*value)?;
                let vty = self.ty(*value)?;
                let lanes = vty.lanes().unwrap_or(1) as u32;
                let (ptr, elem) = self.vector_ptr(*base, *index, lanes, *align)?;
                self.last_ok = None;
                let a = self.vector_align(*base, *index, elem.scalar, lanes, *align);
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(a)
                    .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                let v = self.value(*value)?;
                let Type::Matrix {
                    scalar, rows, cols, ..
                } = self.ty(*value)?
                else {
                    return self.err(codes::INPUT, "matrix_store of a non-fragment");
                };
                let off = self.value(*offset)?.into_int_value();
                let stride = self.value(*stride)?.into_int_value();
                self.note_matrix(
                    super::matrix::Verb::Store,
                    ir::MatrixRole::Acc,
                    scalar,
                    rows,
                    cols,
                    0,
                    scalar,
                );
                if self.cx.software_matrices.get() {
                    self.sw_store(scalar, v, *base, off, stride, rows, cols)?;
                } else {
                    let ptr = self.scalar_ptr(*base, off)?;
                    self.t.matrix_store(self.cx, scalar, v, ptr, stride)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn local_slot(&self, l: Handle<ir::Local>) -> LowerResult<PointerValue<'ctx>> {
        match self.locals.get(l.index()).copied().flatten() {
            Some(p) => Ok(p),
            None => self.err(codes::INPUT, "a local without a slot"),
        }
    }

    pub(super) fn assign(&mut self, place: &Place, value: ExprId) -> LowerResult<()> {
        match place {
            Place::Local(l) => {
                let v = self.value(value)?;
                let slot = self.local_slot(*l)?;
                self.b().build_store(slot, v)?;
            }
            Place::Lane { local, lane } => {
                let v = self.value(value)?;
                let slot = self.local_slot(*local)?;
                let lty = self.vt(self.f.locals[*local].ty)?;
                let cur = self.b().build_load(lty, slot, "")?.into_vector_value();
                let new = self
                    .b()
                    .build_insert_element(cur, v, self.cx.i32(*lane as u64), "")?;
                self.b().build_store(slot, new)?;
            }
            Place::Element { base, index } => {
                // Index first, then value: the printed source's order (`b[i] = v`).
                let (ptr, elem) = self.element_ptr(*base, *index)?;
                self.last_ok = None;
                let v = self.value(value)?;
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(natural_align(elem.size()).max(natural_align(elem.scalar.size())))
                    .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
            }
        }
        Ok(())
    }

    pub(super) fn loop_stmt(
        &mut self,
        label: &Option<String>,
        kind: &LoopKind,
        body: &[Stmt],
    ) -> LowerResult<()> {
        let ctx = self.cx.context;
        let header = ctx.append_basic_block(self.llfn, "loop");
        let body_bb = ctx.append_basic_block(self.llfn, "body");
        let latch = ctx.append_basic_block(self.llfn, "latch");
        let exit = ctx.append_basic_block(self.llfn, "endloop");
        let sync = self.converge_begin()?;
        let mut for_state = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = self.value(*start)?;
            let e = self.value(*end)?;
            let st = match step {
                Some(st) => self.value(*st)?,
                None => {
                    let t = self.vt(self.f.locals[*var].ty)?;
                    t.into_int_type().const_int(1, false).into()
                }
            };
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, s)?;
            let signed = self.f.locals[*var]
                .ty
                .scalar()
                .is_some_and(|s| s.is_signed());
            for_state = Some((slot, e.into_int_value(), st.into_int_value(), signed));
        }
        if let LoopKind::Cond { var, init, .. } = kind {
            let v = self.value(*init)?;
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, v)?;
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(header);
        // The lanes starting this iteration: all that entered, then those the latch let on.
        let at_header = self.converge_begin()?;
        let mut iteration = at_header;
        match kind {
            LoopKind::Infinite => {
                self.b().build_unconditional_branch(body_bb)?;
            }
            LoopKind::While(c) => {
                let c = self.value(*c)?.into_int_value();
                iteration = self.split_lanes(at_header, c)?.0;
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
            LoopKind::For { .. } => {
                let (slot, end, step_v, signed) = for_state.expect("for state");
                let v = self
                    .b()
                    .build_load(end.get_type(), slot, "")?
                    .into_int_value();
                let pred = if signed {
                    IntPredicate::SLT
                } else {
                    IntPredicate::ULT
                };
                let mut c = self.b().build_int_compare(pred, v, end, "")?;
                if let (LoopKind::For { step: Some(_), .. }, true) = (kind, signed) {
                    // A negative step counts down: while `var > end`.
                    let zero = step_v.get_type().const_zero();
                    let neg = self
                        .b()
                        .build_int_compare(IntPredicate::SLT, step_v, zero, "")?;
                    let gt = self.b().build_int_compare(IntPredicate::SGT, v, end, "")?;
                    c = self.b().build_select(neg, gt, c, "")?.into_int_value();
                }
                iteration = self.split_lanes(at_header, c)?.0;
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
            LoopKind::Cond { cond, .. } => {
                let c = self.value(*cond)?.into_int_value();
                iteration = self.split_lanes(at_header, c)?.0;
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
        }
        // Where lanes may leave an iteration early, the latch is the iteration's merge:
        // every lane of the iteration goes through it (a `break` or an escape with its code
        // set), so the next iteration's lanes can be voted there.
        let k = self.loops.len();
        let tracked_latch = iteration.is_some() && Self::may_leave(&[body]);
        match (tracked_latch, sync) {
            (true, _) => self.syncs.push(SyncFrame {
                merge: latch,
                loops: k + 1,
            }),
            (false, sync) => self.enter_sync(sync, exit),
        }
        self.loops.push(LoopFrame {
            label: label.clone(),
            brk: exit,
            cont: latch,
        });
        self.b().position_at_end(body_bb);
        self.set_lanes(iteration)?;
        let r = self.block(body);
        self.loops.pop();
        if tracked_latch {
            self.syncs.pop();
        } else {
            self.leave_sync(sync);
        }
        r?;
        if self.open() {
            self.b().build_unconditional_branch(latch)?;
        }
        self.b().position_at_end(latch);
        if let (true, Some(lanes)) = (tracked_latch, iteration) {
            self.latch_dispatch(k, lanes, exit)?;
        }
        if let Some((slot, end, step, _)) = for_state {
            let v = self
                .b()
                .build_load(end.get_type(), slot, "")?
                .into_int_value();
            let n = self.b().build_int_add(v, step, "")?;
            self.b().build_store(slot, n)?;
        }
        if let LoopKind::Cond { var, update, .. } = kind {
            let v = self.value(*update)?;
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, v)?;
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(exit);
        self.converge_end(sync, Self::may_leave(&[body]))?;
        if sync.is_some() && self.escapes_from(&[body], Some(label)) {
            self.dispatch_escape()?;
        }
        Ok(())
    }

    /// On entry to an if or a loop in a function that uses wave verbs: the mask of the lanes
    /// arriving together, which the target waits for again at the merge point
    /// (`converge_end`), since the IR's lanes reconverge at the end of every if/loop and wave
    /// verbs rely on it (NVIDIA's independent thread scheduling does not promise it). Lanes
    /// that leave the construct early pass through its merge too (`SyncFrame`), so all of
    /// them arrive. A kernel's `return` ends the lane, and ended lanes do not hold up a warp
    /// sync.
    ///
    /// The value is the logical lane mask on entry (the parent's lanes, `lane_mask`), or
    /// `None` where the target reconverges by itself or no wave verb is reached.
    pub(super) fn converge_begin(&self) -> LowerResult<Option<IntValue<'ctx>>> {
        match self.lane_mask {
            Some(slot) if self.open() => {
                let i64t = self.cx.context.i64_type();
                Ok(Some(
                    self.b().build_load(i64t, slot, "lanes")?.into_int_value(),
                ))
            }
            _ => Ok(None),
        }
    }

    /// The logical mask of the lanes running here, as an `i64`: the tracked one where the
    /// target needs it (`lane_mask`), else the hardware's.
    pub(super) fn lanes(&self) -> LowerResult<IntValue<'ctx>> {
        match self.lane_mask {
            Some(slot) => {
                let i64t = self.cx.context.i64_type();
                Ok(self.b().build_load(i64t, slot, "lanes")?.into_int_value())
            }
            None => self.t.active_mask(self.cx),
        }
    }

    /// Whether a call to helper `h` passes the lane mask (its hidden last parameter).
    pub(super) fn passes_lanes(&self, h: Handle<Function>) -> bool {
        self.lane_mask.is_some()
            && self
                .module
                .functions
                .try_get(h)
                .is_some_and(|g| takes_lane_mask(self.t, self.module, g))
    }

    /// Sets the tracked lane mask (a no-op where none is tracked).
    pub(super) fn set_lanes(&self, mask: Option<IntValue<'ctx>>) -> LowerResult<()> {
        if let (Some(slot), Some(m)) = (self.lane_mask, mask) {
            self.b().build_store(slot, m)?;
        }
        Ok(())
    }

    /// At a branch on `cond` taken by the lanes of `parent` (from `converge_begin`): the
    /// masks of the lanes going each way, `(taken, not taken)`. A vote, so every lane of
    /// `parent` must be here, which the tracking guarantees.
    pub(super) fn split_lanes(
        &self,
        parent: Option<IntValue<'ctx>>,
        cond: IntValue<'ctx>,
    ) -> LowerResult<(Option<IntValue<'ctx>>, Option<IntValue<'ctx>>)> {
        let Some(parent) = parent else {
            return Ok((None, None));
        };
        let taken = self.t.ballot(self.cx, parent, cond)?;
        let other = self.b().build_xor(parent, taken, "")?;
        Ok((Some(taken), Some(other)))
    }

    /// The latch of loop `k` (the `k`-th open loop) when it is the iteration's merge: the
    /// lanes of the iteration (`lanes`) are all here; those that finished the body or
    /// `continue`d go on to the next iteration, under a mask voted among them; those that
    /// `break` (code cleared) or escape further (code kept) go to `exit`.
    fn latch_dispatch(
        &mut self,
        k: usize,
        lanes: IntValue<'ctx>,
        exit: BasicBlock<'ctx>,
    ) -> LowerResult<()> {
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        let slot = self
            .escape_slot
            .ok_or_else(|| Error::new(codes::INTERNAL, "a tracked latch without its slot"))?;
        let code = self.b().build_load(i32t, slot, "escape")?.into_int_value();
        let is = |c: u64| {
            self.b()
                .build_int_compare(IntPredicate::EQ, code, i32t.const_int(c, false), "")
        };
        let (brk, cont) = (is(1 + 2 * k as u64)?, is(2 + 2 * k as u64)?);
        let stay = self.b().build_or(is(0)?, cont, "")?;
        let next = self.t.ballot(self.cx, lanes, stay)?;
        self.set_lanes(Some(next))?;
        let own = self.b().build_or(brk, cont, "")?;
        let left = self
            .b()
            .build_select(own, i32t.const_zero(), code, "")?
            .into_int_value();
        self.b().build_store(slot, left)?;
        let on = ctx.append_basic_block(self.llfn, "latch.on");
        self.b().build_conditional_branch(stay, on, exit)?;
        self.b().position_at_end(on);
        Ok(())
    }

    pub(super) fn enter_sync(&mut self, sync: Option<IntValue<'ctx>>, merge: BasicBlock<'ctx>) {
        if sync.is_some() {
            self.syncs.push(SyncFrame {
                merge,
                loops: self.loops.len(),
            });
        }
    }

    pub(super) fn leave_sync(&mut self, sync: Option<IntValue<'ctx>>) {
        if sync.is_some() {
            self.syncs.pop();
        }
    }

    /// Whether lanes can leave `blocks` (of a loop labelled `looping`, when it is one) other
    /// than by falling off their end.
    pub(super) fn escapes_from(
        &self,
        blocks: &[&[Stmt]],
        looping: Option<&Option<String>>,
    ) -> bool {
        let inner: Vec<Option<String>> = looping.into_iter().cloned().collect();
        blocks
            .iter()
            .any(|b| escapes(b, &mut inner.clone(), !self.is_kernel))
    }

    pub(super) fn set_escape(&mut self, code: u64) -> LowerResult<()> {
        let slot = self
            .escape_slot
            .ok_or_else(|| Error::new(codes::INTERNAL, "an escape without its slot"))?;
        let i32t = self.cx.context.i32_type();
        self.b().build_store(slot, i32t.const_int(code, false))?;
        Ok(())
    }

    pub(super) fn return_slot(
        &mut self,
        ty: BasicTypeEnum<'ctx>,
    ) -> LowerResult<PointerValue<'ctx>> {
        if let Some(s) = self.return_slot {
            return Ok(s);
        }
        let s = self.entry_alloca(ty, "ret")?;
        self.return_slot = Some(s);
        Ok(s)
    }

    /// After a synced construct's merge: a lane that came there escaping goes on, to the
    /// next synced construct's merge if one is in the way, else to its target (the loop's
    /// exit or latch, or the helper's return), clearing the slot.
    pub(super) fn dispatch_escape(&mut self) -> LowerResult<()> {
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        let slot = self
            .escape_slot
            .ok_or_else(|| Error::new(codes::INTERNAL, "an escape without its slot"))?;
        let code = self.b().build_load(i32t, slot, "escape")?.into_int_value();
        let on = ctx.append_basic_block(self.llfn, "noescape");
        let next = self.syncs.last().map(|s| (s.merge, s.loops));
        let mut cases = Vec::new();
        let mut targets = Vec::new();
        for (k, frame) in self.loops.iter().enumerate() {
            for (cont, to) in [(false, frame.brk), (true, frame.cont)] {
                targets.push((1 + 2 * k as u64 + cont as u64, next.filter(|n| n.1 > k), to));
            }
        }
        for (code, through, to) in targets {
            let bb = ctx.append_basic_block(self.llfn, "escape.to");
            cases.push((i32t.const_int(code, false), bb));
            self.b().position_at_end(bb);
            match through {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => {
                    self.b().build_store(slot, i32t.const_zero())?;
                    self.b().build_unconditional_branch(to)?;
                }
            }
        }
        if !self.is_kernel {
            let bb = ctx.append_basic_block(self.llfn, "escape.ret");
            cases.push((i32t.const_int(ESCAPE_RETURN, false), bb));
            self.b().position_at_end(bb);
            match next {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => match self.f.ret {
                    Some(t) => {
                        let ty = self.vt(t)?;
                        let slot = self.return_slot(ty)?;
                        let v = self.b().build_load(ty, slot, "ret")?;
                        self.b().build_return(Some(&v))?;
                    }
                    None => {
                        self.b().build_return(None)?;
                    }
                },
            }
        }
        // The switch goes in the merge block, which the builder left before the cases.
        let merge_end = code
            .as_instruction()
            .and_then(|i| i.get_parent())
            .ok_or_else(|| Error::new(codes::INTERNAL, "escape load without a block"))?;
        self.b().position_at_end(merge_end);
        self.b().build_switch(code, on, &cases)?;
        self.b().position_at_end(on);
        Ok(())
    }

    /// At the merge point of a construct entered with `converge_begin`'s `mask`: the lanes
    /// wait for each other and the lane mask is the parent's again. When lanes may have
    /// left the construct (`left`: a `break`, `continue` or `return` inside it), the mask
    /// is voted afresh over the lanes that arrived, without those passing through on their
    /// way out (an escape code set) and without those that ended.
    pub(super) fn converge_end(&self, mask: Option<IntValue<'ctx>>, left: bool) -> LowerResult<()> {
        let Some(parent) = mask else {
            return Ok(());
        };
        if left {
            let stay = self.not_escaping()?;
            let m = self.t.ballot(self.cx, parent, stay)?;
            self.set_lanes(Some(m))
        } else {
            self.t.converge_end(self.cx, parent)?;
            self.set_lanes(Some(parent))
        }
    }

    /// Whether this lane is not on its way out of a construct (its escape code is clear).
    fn not_escaping(&self) -> LowerResult<IntValue<'ctx>> {
        let i32t = self.cx.context.i32_type();
        Ok(match self.escape_slot {
            Some(slot) => {
                let code = self.b().build_load(i32t, slot, "escape")?.into_int_value();
                self.b()
                    .build_int_compare(IntPredicate::EQ, code, i32t.const_zero(), "")?
            }
            None => self.cx.context.bool_type().const_all_ones(),
        })
    }

    /// Whether lanes may leave `stmts` before their end, counting every `break`,
    /// `continue` and `return` inside them (a kernel's `return` too, which ends the lane:
    /// the merge's mask must drop it).
    pub(super) fn may_leave(stmts: &[&[Stmt]]) -> bool {
        stmts.iter().any(|b| escapes(b, &mut Vec::new(), true))
    }
}
