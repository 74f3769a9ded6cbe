//! Memory: buffer, shared and private accesses with their bounds checks, gathers and scatters, streaming stores.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    /// The base address, element count (i64) and element type of an indexed object, and the
    /// name used in errors.
    pub(super) fn object(&mut self, base: Base) -> (Value, Value, ElemType, String, bool) {
        match base {
            Base::Param(i) => {
                let f = self.frames[0].f;
                let name = f
                    .params
                    .get(i as usize)
                    .map(|p| p.name.clone())
                    .unwrap_or_default();
                match self.kparams[i as usize] {
                    KernelParam::Buf { off, elem } => {
                        let (ptr, len) = self.buf_ref(off);
                        (ptr, len, elem, format!("buffer {name}"), false)
                    }
                    KernelParam::Val(_) => {
                        let z = self.b.ins().iconst(types::I64, 0);
                        (z, z, ElemType::scalar(Scalar::U32), name, false)
                    }
                }
            }
            Base::Shared(h) => {
                let f = self.frames[0].f;
                let sd = &f.shared[h];
                let off = self.shared_offsets[h.index()];
                let ptr = self.b.ins().iadd_imm_s(self.shared, off as i64);
                let len = match self.shared_lens[h.index()] {
                    Some(n) => self.b.ins().iconst(types::I64, n as i64),
                    None => self.dyn_len,
                };
                (ptr, len, sd.elem, format!("shared {}", sd.name), false)
            }
            Base::Local(l) => {
                let slot = self.local_slot(l);
                let name = self.frame().f.locals[l].name.clone();
                match slot {
                    Slot::Arr { off, elem, len } => {
                        let ptr = self.b.ins().iadd_imm_s(self.state, off as i64);
                        let len = self.b.ins().iconst(types::I64, len as i64);
                        (ptr, len, elem, format!("array {name}"), true)
                    }
                    _ => {
                        let z = self.b.ins().iconst(types::I64, 0);
                        (z, z, ElemType::scalar(Scalar::U32), name, true)
                    }
                }
            }
        }
    }

    /// Checks every active lane's `index + extra - 1 < len` (indices u32, lengths i64).
    pub(super) fn bounds(&mut self, idx: &Val, extra: u32, len: Value, site: u32) {
        match idx {
            Val::U(i) => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let last = self.b.ins().iadd_imm_s(i64v, extra as i64 - 1);
                let bad = self
                    .b
                    .ins()
                    .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
                self.check(bad, err::OOB, site, |_| last, len);
            }
            _ => {
                // Lane vectors: an active lane is bad when `index > len - extra` (u32 lanes;
                // a limit past u32 admits every index) or when `len < extra`.
                let lim = self.b.ins().iadd_imm_s(len, -(extra as i64));
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, lim, 0);
                let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
                let zero64 = self.b.ins().iconst(types::I64, 0);
                let lim = self.b.ins().umin(lim, max);
                let lim = self.b.ins().select(neg, zero64, lim);
                let lim32 = self.b.ins().ireduce(types::I32, lim);
                let limv = self.b.ins().splat(types::I32X4, lim32);
                let chunks = self.materialize(Scalar::U32, idx);
                let e = self.exec();
                let mut acc: Option<Value> = None;
                let mut bad_lanes = Vec::new();
                for (c, &x) in chunks.iter().enumerate() {
                    let gt = self.b.ins().icmp(IntCC::UnsignedGreaterThan, x, limv);
                    let b = self.b.ins().band(gt, e[c]);
                    bad_lanes.push(b);
                    acc = Some(match acc {
                        None => b,
                        Some(a) => self.b.ins().bor(a, b),
                    });
                }
                let acc = acc.expect("a chunk");
                let any_bad = self.b.ins().vany_true(acc);
                let any_exec = self.mask_any(&e);
                let short = self.b.ins().band(neg, any_exec);
                let bad = self.b.ins().bor(any_bad, short);
                let n = self.n;
                self.check(
                    bad,
                    err::OOB,
                    site,
                    |me| {
                        // The first bad lane's index (any active lane's when `len < extra`).
                        let bits = me.mask_bits(&bad_lanes);
                        let ebits = me.mask_bits(&e);
                        let none = me.b.ins().icmp_imm_s(IntCC::Equal, bits, 0);
                        let pick = me.b.ins().select(none, ebits, bits);
                        let lane = me.b.ins().ctz(pick);
                        let lane = me.b.ins().band_imm_u(lane, (n.max(1) - 1) as i64);
                        let i = me.lane_at(Scalar::U32, &Val::V(chunks), lane);
                        let i = me.b.ins().uextend(types::I64, i);
                        me.b.ins().iadd_imm_s(i, extra as i64 - 1)
                    },
                    len,
                );
            }
        }
    }

    /// Whether an element access at this index can take whole chunks: an affine stride-1
    /// index into a buffer or shared array of scalars filling whole chunks.
    pub(super) fn contiguous(&self, idx: &Val, s: Scalar, comps: u32, private: bool) -> bool {
        matches!(idx, Val::A(_, 1))
            && comps == 1
            && !private
            && s != Scalar::Bool
            && (self.n * s.size()) % 16 == 0
    }

    /// Whether lanes `base .. base + N` all index existing elements (no u32 wrap).
    pub(super) fn affine_in_bounds(&mut self, base: Value, len: Value) -> Value {
        let b64 = self.b.ins().uextend(types::I64, base);
        let last = self.b.ins().iadd_imm_s(b64, self.n as i64 - 1);
        let lt = self.b.ins().icmp(IntCC::SignedLessThan, last, len);
        let nowrap = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, last, u32::MAX as i64);
        self.b.ins().band(lt, nowrap)
    }

    /// Whether an access to `object` at the stride-1 index `base + lane` has every lane
    /// active and either no lane wrapping past `u32::MAX` or an object of fewer than 2³²
    /// elements (a shared array): then it is whole chunks or a fault, see
    /// [`Self::unmasked_addr`].
    pub(super) fn unmasked(&self, base: Value, object: Base) -> bool {
        self.known == Known::Full
            && (self.nowrap.contains(&base) || matches!(object, Base::Shared(_)))
    }

    /// The address of element `base` for a whole-wave access at `base + lane` (see
    /// [`Self::unmasked`]), after its bounds check. Lanes `base ..= base + N - 1` (in i64)
    /// are all active. Without wrapping they rise, so they are in bounds exactly when the last
    /// is, and otherwise the first bad lane (the one the lane-by-lane check reports) has
    /// index `max(base, len)`. With wrapping (`last > u32::MAX`, only when `len < 2³²`) the
    /// lane of index `u32::MAX` is out of bounds, so is the access, and the first bad lane is
    /// again `max(base, len)`, before the wrap. The failure leaves the function, so the fast
    /// path has no join.
    pub(super) fn unmasked_addr(
        &mut self,
        base: Value,
        object: Base,
        (ptr, len): (Value, Value),
        size: i64,
        site: u32,
    ) -> Value {
        let b64 = self.b.ins().uextend(types::I64, base);
        let checked = self.fast_base == Some(base)
            && matches!(object, Base::Param(p) if self.fast_bufs.contains(&p));
        if checked {
            // The fast test holds `base + N - 1 < len` already (see `if_affine`).
            let off = self.b.ins().imul_imm_s(b64, size);
            return self.b.ins().iadd(ptr, off);
        }
        let last = self.b.ins().iadd_imm_s(b64, self.n as i64 - 1);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
        self.check(
            bad,
            err::OOB,
            site,
            |me| {
                let past = me.b.ins().icmp(IntCC::SignedGreaterThan, len, b64);
                me.b.ins().select(past, len, b64)
            },
            len,
        );
        let off = self.b.ins().imul_imm_s(b64, size);
        self.b.ins().iadd(ptr, off)
    }

    /// Whether the exec mask covers every lane (`i8`).
    pub(super) fn mask_full(&mut self) -> Value {
        match self.known {
            Known::Full => return self.b.ins().iconst(types::I8, 1),
            Known::Initial => return self.wave_full,
            Known::Unknown => {}
        }
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let full = if self.n == 64 {
            -1i64
        } else {
            ((1u64 << self.n) - 1) as i64
        };
        self.b.ins().icmp_imm_s(IntCC::Equal, bits, full)
    }

    /// Reads element `idx` (component-wise) of an object.
    pub(super) fn load_elem(
        &mut self,
        base: Base,
        idx: &Val,
        span: Span,
        count: u32,
    ) -> Result<Vec<Val>, Error> {
        let (ptr, len, elem, what, private) = self.object(base);
        let s = elem.scalar;
        let size = s.size() as i64;
        let site = self.add_site(span, what);
        let comps = if count > 1 { count } else { elem.lanes as u32 };
        // vload: `count` consecutive scalars; else one element of `elem.lanes` components.
        let extra = if count > 1 { count } else { 1 };
        let contiguous = self.contiguous(idx, s, comps, private);
        if !contiguous {
            self.bounds(idx, extra, len, site);
        }
        if private {
            return Ok(self.private_load(ptr, elem, idx, comps));
        }
        let esize = if count > 1 {
            size
        } else {
            size * elem.lanes as i64
        };
        let mut out = Vec::new();
        match idx {
            Val::U(i) => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, esize);
                let addr = self.b.ins().iadd(ptr, off);
                for c in 0..comps {
                    let v = self.load_scalar(s, addr, (c as i64 * size) as i32);
                    out.push(Val::U(v));
                }
            }
            Val::A(bv, 1) if contiguous && self.unmasked(*bv, base) => {
                let addr = self.unmasked_addr(*bv, base, (ptr, len), size, site);
                let vs: Vec<Value> = (0..chunks(s, self.n))
                    .map(|c| self.b.ins().load(vty(s), notrap(), addr, (c * 16) as i32))
                    .collect();
                out.push(Val::V(vs));
            }
            Val::A(bv, 1) if contiguous => {
                // Contiguous: whole chunks when every lane's element exists (reading an
                // inactive lane's element is harmless then); else, out of line, the lanes are
                // checked and gathered one by one into a stack copy. Either way the chunks
                // are loaded at the join from one address, so the fast path carries a single
                // pointer through the join rather than the chunks.
                let full = self.affine_in_bounds(*bv, len);
                let i64v = self.b.ins().uextend(types::I64, *bv);
                let off = self.b.ins().imul_imm_s(i64v, size);
                let addr = self.b.ins().iadd(ptr, off);
                let lane_b = self.b.create_block();
                self.b.set_cold_block(lane_b);
                let join = self.b.create_block();
                let from = self.b.append_block_param(join, types::I64);
                self.b.ins().brif(full, join, &[addr.into()], lane_b, &[]);
                self.b.switch_to_block(lane_b);
                self.bounds(idx, extra, len, site);
                let nc = chunks(s, self.n);
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    nc * 16,
                    4,
                ));
                let copy = self.b.ins().stack_addr(types::I64, slot, 0);
                self.gather_to(s, ptr, esize, idx, copy);
                self.b.ins().jump(join, &[copy.into()]);
                self.b.switch_to_block(join);
                let vs: Vec<Value> = (0..nc)
                    .map(|c| self.b.ins().load(vty(s), notrap(), from, (c * 16) as i32))
                    .collect();
                out.push(Val::V(vs));
            }
            _ => {
                for c in 0..comps {
                    let vs = self.gather(s, ptr, esize, idx, (c as i64 * size) as i32);
                    out.push(Val::V(vs));
                }
            }
        }
        Ok(out)
    }

    /// Each lane's index of `idx`, with inactive lanes' set to element 0: the bounds check
    /// passed for an active lane (there always is one), so the object has that element.
    pub(super) fn safe_lanes(&mut self, idx: &Val) -> Vec<Value> {
        let chunks = self.materialize(Scalar::U32, idx);
        let e = self.exec();
        let safe: Vec<Value> = chunks
            .iter()
            .zip(&e)
            .map(|(&x, &m)| self.b.ins().band(x, m))
            .collect();
        self.lanes(Scalar::U32, &Val::V(safe))
    }

    /// One scalar per lane at `ptr + idx × esize + off`; inactive lanes read element 0.
    pub(super) fn gather(
        &mut self,
        s: Scalar,
        ptr: Value,
        esize: i64,
        idx: &Val,
        off: i32,
    ) -> Vec<Value> {
        let lanes = self.safe_lanes(idx);
        let mut vals = Vec::new();
        for &i in &lanes {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            vals.push(self.load_scalar(s, a, off));
        }
        self.pack_lanes(s, &vals)
    }

    /// Like [`Self::gather`], but the lanes' scalars are stored in lane order at `dst`.
    pub(super) fn gather_to(&mut self, s: Scalar, ptr: Value, esize: i64, idx: &Val, dst: Value) {
        let lanes = self.safe_lanes(idx);
        let size = s.size() as i32;
        for (l, &i) in lanes.iter().enumerate() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            let v = self.b.ins().load(uty(s), notrap(), a, 0);
            self.b.ins().store(notrap(), v, dst, l as i32 * size);
        }
    }

    pub(super) fn load_scalar(&mut self, s: Scalar, addr: Value, off: i32) -> Value {
        let v = self.b.ins().load(uty(s), notrap(), addr, off);
        if s == Scalar::Bool {
            self.b.ins().band_imm_u(v, 1)
        } else {
            v
        }
    }

    pub(super) fn store_elem(
        &mut self,
        base: Base,
        idx: &Val,
        vals: &[Val],
        span: Span,
        count: u32,
    ) -> Result<(), Error> {
        let (ptr, len, elem, what, private) = self.object(base);
        let s = elem.scalar;
        let size = s.size() as i64;
        let site = self.add_site(span, what);
        let comps = vals.len() as u32;
        let extra = if count > 1 { count } else { 1 };
        let contiguous = self.contiguous(idx, s, comps, private);
        let esize = if count > 1 {
            size
        } else {
            size * elem.lanes as i64
        };
        let all_uniform = vals.iter().all(|v| matches!(v, Val::U(_)));
        // A scatter under a mask that may hold a single lane (`if lane_id == 0 { ... }`):
        // that lane's store alone, when it is so.
        let join = if !contiguous
            && !private
            && self.known != Known::Full
            && s != Scalar::Bool
            && !(matches!(idx, Val::U(_)) && all_uniform)
        {
            let join = self.b.create_block();
            self.single_lane_store(s, ptr, esize, idx, vals, (len, extra, site), join);
            Some(join)
        } else {
            None
        };
        if !contiguous {
            self.bounds(idx, extra, len, site);
        }
        if private {
            self.private_store(ptr, elem, idx, vals);
            return Ok(());
        }
        match idx {
            Val::U(i) if all_uniform => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, esize);
                let addr = self.b.ins().iadd(ptr, off);
                for (c, v) in vals.iter().enumerate() {
                    if let Val::U(x) = v {
                        self.b
                            .ins()
                            .store(notrap(), *x, addr, (c as i64 * size) as i32);
                    }
                }
            }
            Val::A(bv, 1) if contiguous && self.unmasked(*bv, base) => {
                let addr = self.unmasked_addr(*bv, base, (ptr, len), size, site);
                let cs = self.materialize(s, &vals[0]);
                let streamed = self.fast_base == Some(*bv)
                    && matches!(base, Base::Param(p) if self.stream_writes.contains(&p));
                if streamed {
                    self.stream_store(addr, &cs);
                } else {
                    for (c, &x) in cs.iter().enumerate() {
                        self.b.ins().store(notrap(), x, addr, (c * 16) as i32);
                    }
                }
            }
            Val::A(bv, 1) if contiguous => {
                // One vector store per chunk when every lane is active and in bounds.
                let inb = self.affine_in_bounds(*bv, len);
                let full = self.mask_full();
                let full = self.b.ins().band(inb, full);
                let vec_b = self.b.create_block();
                let lane_b = self.b.create_block();
                // Out of line: partial waves and the ends of objects only.
                self.b.set_cold_block(lane_b);
                let join = self.b.create_block();
                self.b.ins().brif(full, vec_b, &[], lane_b, &[]);
                self.b.switch_to_block(vec_b);
                let i64v = self.b.ins().uextend(types::I64, *bv);
                let off = self.b.ins().imul_imm_s(i64v, size);
                let addr = self.b.ins().iadd(ptr, off);
                let cs = self.materialize(s, &vals[0]);
                for (c, &x) in cs.iter().enumerate() {
                    self.b.ins().store(notrap(), x, addr, (c * 16) as i32);
                }
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(lane_b);
                self.bounds(idx, extra, len, site);
                self.scatter(s, ptr, esize, idx, 0, &vals[0]);
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
            _ => {
                for (c, v) in vals.iter().enumerate() {
                    self.scatter(s, ptr, esize, idx, (c as i64 * size) as i32, v);
                }
            }
        }
        if let Some(join) = join {
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(join);
        }
        Ok(())
    }

    /// Tests whether the exec mask holds exactly one lane; if so, checks that lane's index
    /// (reporting it as the lane-vector check would: `index + extra - 1`), stores its
    /// components and jumps to `join`; else falls through (current block) to the general
    /// scatter.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn single_lane_store(
        &mut self,
        s: Scalar,
        ptr: Value,
        esize: i64,
        idx: &Val,
        vals: &[Val],
        (len, extra, site): (Value, u32, u32),
        join: Block,
    ) {
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let below = self.b.ins().iadd_imm_s(bits, -1);
        let rest = self.b.ins().band(bits, below);
        let one = self.b.ins().icmp_imm_s(IntCC::Equal, rest, 0);
        let some = self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0);
        let one = self.b.ins().band(one, some);
        let one_b = self.b.create_block();
        let many_b = self.b.create_block();
        self.b.ins().brif(one, one_b, &[], many_b, &[]);
        self.b.seal_block(one_b);
        self.b.seal_block(many_b);
        self.b.switch_to_block(one_b);
        let lane = self.b.ins().ctz(bits);
        let i = self.lane_at(Scalar::U32, idx, lane);
        let i64v = self.b.ins().uextend(types::I64, i);
        let last = self.b.ins().iadd_imm_s(i64v, extra as i64 - 1);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, last, len);
        self.check(bad, err::OOB, site, |_| last, len);
        let o = self.b.ins().imul_imm_s(i64v, esize);
        let addr = self.b.ins().iadd(ptr, o);
        for (c, v) in vals.iter().enumerate() {
            let x = self.lane_at(s, v, lane);
            self.b
                .ins()
                .store(notrap(), x, addr, c as i32 * s.size() as i32);
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(many_b);
    }

    /// Lane `lane` (an `i64` below the wave width, not a constant) of `v`.
    pub(super) fn lane_at(&mut self, s: Scalar, v: &Val, lane: Value) -> Value {
        match v {
            Val::U(x) => *x,
            Val::A(base, stride) => {
                let t = self.b.func.dfg.value_type(*base);
                let l = if t == types::I64 {
                    lane
                } else {
                    self.b.ins().ireduce(t, lane)
                };
                let k = self.b.ins().imul_imm_s(l, *stride);
                self.b.ins().iadd(*base, k)
            }
            Val::V(chunks) => {
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    chunks.len() as u32 * 16,
                    4,
                ));
                for (c, &x) in chunks.iter().enumerate() {
                    self.b
                        .ins()
                        .stack_store(types::I64, x, slot, (c * 16) as i32);
                }
                let base = self.b.ins().stack_addr(types::I64, slot, 0);
                let o = self.b.ins().imul_imm_s(lane, s.size() as i64);
                let a = self.b.ins().iadd(base, o);
                self.b.ins().load(uty(s), notrap(), a, 0)
            }
        }
    }

    /// A whole wave's chunks at `addr`, through the non-temporal store helpers (at most 8
    /// chunks a call: the vector registers the C calling convention passes them in).
    pub(super) fn stream_store(&mut self, addr: Value, cs: &[Value]) {
        for (g, group) in cs.chunks(8).enumerate() {
            let at = self.b.ins().iadd_imm_s(addr, g as i64 * 128);
            let mut args = vec![at];
            for &c in group {
                let c = if self.b.func.dfg.value_type(c) == types::I64X2 {
                    c
                } else {
                    self.b.ins().bitcast(types::I64X2, le(), c)
                };
                args.push(c);
            }
            let mut params = vec![types::I64];
            params.resize(args.len(), types::I64X2);
            self.call(stream::store_symbol(group.len()), &params, &[], &args);
        }
    }

    /// In a streaming flat loop, for the wave whose first index is `base`: prefetches the
    /// lines each read stream holds `PREFETCH_AHEAD` bytes past this wave's.
    pub(super) fn prefetch_streams(&mut self, base: Value) {
        let b64 = self.b.ins().uextend(types::I64, base);
        let mut addrs = Vec::new();
        let mut lines = 1;
        for p in self.stream_reads.clone() {
            let KernelParam::Buf { off, elem } = self.kparams[p as usize] else {
                continue;
            };
            let Some(&(_, ptr)) = self.fast_ptrs.iter().find(|&&(o, _)| o == off) else {
                continue;
            };
            let esize = elem.scalar.size() as i64 * elem.lanes as i64;
            lines = lines.max((self.n as u64 * esize as u64).div_ceil(stream::LINE as u64) as i64);
            let o = self.b.ins().imul_imm_s(b64, esize);
            let a = self.b.ins().iadd(ptr, o);
            addrs.push(self.b.ins().iadd_imm_s(a, stream::PREFETCH_AHEAD));
        }
        let lines = self.b.ins().iconst(types::I64, lines);
        for group in addrs.chunks(4) {
            let mut args = vec![lines];
            args.extend_from_slice(group);
            let params = vec![types::I64; args.len()];
            self.call(stream::prefetch_symbol(group.len()), &params, &[], &args);
        }
    }

    /// Per-lane stores in lane order; inactive lanes write the dummy.
    pub(super) fn scatter(
        &mut self,
        s: Scalar,
        ptr: Value,
        esize: i64,
        idx: &Val,
        off: i32,
        v: &Val,
    ) {
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let lanes = self.lanes(Scalar::U32, idx);
        let vl = self.lanes(s, v);
        let zero = self.b.ins().iconst(types::I64, 0);
        let offv = self.b.ins().iconst(types::I64, off as i64);
        for (l, &i) in lanes.iter().enumerate() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let o = self.b.ins().imul_imm_s(i64v, esize);
            let a = self.b.ins().iadd(ptr, o);
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let a = self.b.ins().select(bit, a, self.scratch);
            let o2 = self.b.ins().select(bit, offv, zero);
            let a = self.b.ins().iadd(a, o2);
            self.b.ins().store(notrap(), vl[l], a, 0);
        }
    }

    /// Private arrays: `[element][component][lane]`, each row padded to whole chunks.
    pub(super) fn private_row(&self, s: Scalar) -> i64 {
        (chunks(s, self.n) * per_chunk(s) * s.size()) as i64
    }

    pub(super) fn private_load(
        &mut self,
        ptr: Value,
        elem: ElemType,
        idx: &Val,
        comps: u32,
    ) -> Vec<Val> {
        let s = elem.scalar;
        let row = self.private_row(s);
        let k = elem.lanes as i64;
        let mut out = Vec::new();
        match idx {
            Val::U(i) if s != Scalar::Bool => {
                let i64v = self.b.ins().uextend(types::I64, *i);
                let off = self.b.ins().imul_imm_s(i64v, row * k);
                let addr = self.b.ins().iadd(ptr, off);
                for c in 0..comps as i64 {
                    let cs: Vec<Value> = (0..chunks(s, self.n) as i64)
                        .map(|j| {
                            self.b
                                .ins()
                                .load(vty(s), notrap(), addr, (c * row + j * 16) as i32)
                        })
                        .collect();
                    out.push(Val::V(cs));
                }
            }
            _ => {
                let lanes = self.lanes(Scalar::U32, idx);
                let e = self.exec();
                let bits = self.mask_bits(&e);
                for c in 0..comps as i64 {
                    let mut vals = Vec::new();
                    for (l, &i) in lanes.iter().enumerate() {
                        let i64v = self.b.ins().uextend(types::I64, i);
                        let o = self.b.ins().imul_imm_s(i64v, row * k);
                        let a = self.b.ins().iadd(ptr, o);
                        let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                        let bit = self.b.ins().band_imm_u(bit, 1);
                        let a = self.b.ins().select(bit, a, self.scratch);
                        let o2 = self
                            .b
                            .ins()
                            .iconst(types::I64, c * row + l as i64 * s.size() as i64);
                        let z = self.b.ins().iconst(types::I64, 0);
                        let o2 = self.b.ins().select(bit, o2, z);
                        let a = self.b.ins().iadd(a, o2);
                        vals.push(self.load_scalar(s, a, 0));
                    }
                    out.push(Val::V(self.pack_lanes(s, &vals)));
                }
            }
        }
        out
    }

    pub(super) fn private_store(&mut self, ptr: Value, elem: ElemType, idx: &Val, vals: &[Val]) {
        let s = elem.scalar;
        let row = self.private_row(s);
        let k = elem.lanes as i64;
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let lanes = self.lanes(Scalar::U32, idx);
        for (c, v) in vals.iter().enumerate() {
            let vl = self.lanes(s, v);
            for (l, &i) in lanes.iter().enumerate() {
                let i64v = self.b.ins().uextend(types::I64, i);
                let o = self.b.ins().imul_imm_s(i64v, row * k);
                let a = self.b.ins().iadd(ptr, o);
                let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                let bit = self.b.ins().band_imm_u(bit, 1);
                let a = self.b.ins().select(bit, a, self.scratch);
                let o2 = self
                    .b
                    .ins()
                    .iconst(types::I64, c as i64 * row + l as i64 * s.size() as i64);
                let z = self.b.ins().iconst(types::I64, 0);
                let o2 = self.b.ins().select(bit, o2, z);
                let a = self.b.ins().iadd(a, o2);
                self.b.ins().store(notrap(), vl[l], a, 0);
            }
        }
    }

    /// ub-traps (`Config::ub_traps`): tests `align = a` at scalar index `idx` (the value of
    /// `index`) unless the proof confirms it (`checks::align_confirmed`, no code then). A
    /// broken statement stops the launch with `XPU-L010` naming its line and the index.
    pub(super) fn check_align(
        &mut self,
        index: ExprId,
        idx: &Val,
        s: Scalar,
        align: Option<u8>,
        span: Span,
    ) {
        let Some(a) = align else { return };
        if a <= 1
            || !self.cfg.ub_traps
            || crate::codegen::checks::align_confirmed(self.frame().f, index, &[], s, a)
        {
            return;
        }
        let site = self.add_site(span, format!("align = {a}"));
        let lanes = self.lanes(Scalar::U32, idx);
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let mut bad_any = self.b.ins().iconst(types::I8, 0);
        let mut first = self.b.ins().iconst(types::I64, 0);
        for (l, &i) in lanes.iter().enumerate().rev() {
            let i64v = self.b.ins().uextend(types::I64, i);
            let bytes = self.b.ins().imul_imm_s(i64v, s.size() as i64);
            let r = self.b.ins().band_imm_u(bytes, a as i64 - 1);
            let mis = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let act = self.b.ins().ireduce(types::I8, bit);
            let bad = self.b.ins().band(mis, act);
            bad_any = self.b.ins().bor(bad_any, bad);
            first = self.b.ins().select(bad, i64v, first);
        }
        let av = self.b.ins().iconst(types::I64, a as i64);
        self.check(bad_any, err::ALIGN, site, |_| first, av);
    }

    pub(super) fn vstore(
        &mut self,
        base: Base,
        index: ExprId,
        value: ExprId,
        align: Option<u8>,
        span: Span,
    ) -> Result<(), Error> {
        let mut ops = self.eval_ops(&[index, value])?.into_iter();
        let idx = ops
            .next()
            .map(ExprValue::vals)
            .unwrap_or_default()
            .remove(0);
        let v = ops.next().map(ExprValue::vals).unwrap_or_default();
        let s = scalar_of(self.ty(value));
        self.check_align(index, &idx, s, align, span);
        // Component j at scalar index i + j.
        let n = v.len() as u32;
        let (_, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        self.bounds(&idx, n, len, site);
        for (j, x) in v.iter().enumerate() {
            let ij = self.add_const(&idx, j as i64);
            self.store_elem(base, &ij, std::slice::from_ref(x), span, 1)?;
        }
        Ok(())
    }

    pub(super) fn add_const(&mut self, v: &Val, k: i64) -> Val {
        match v {
            Val::U(x) => Val::U(self.b.ins().iadd_imm_s(*x, k)),
            Val::A(x, st) => Val::A(self.b.ins().iadd_imm_s(*x, k), *st),
            Val::V(c) => {
                let kk = self.b.ins().iconst(types::I32, k);
                let sp = self.b.ins().splat(types::I32X4, kk);
                Val::V(c.iter().map(|&x| self.b.ins().iadd(x, sp)).collect())
            }
        }
    }

    pub(super) fn matrix_access(
        &mut self,
        value: ExprId,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        store: bool,
        span: Span,
    ) -> Result<(), Error> {
        let frag = match self.expr(value)? {
            ExprValue::Mat(p) => p,
            _ => return Err(self.internal("matrix_store of a non-fragment")),
        };
        let t = self.ty(value);
        self.matrix_io(frag, t, base, offset, stride, store, span)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn matrix_io(
        &mut self,
        frag: Value,
        t: Type,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        store: bool,
        span: Span,
    ) -> Result<(), Error> {
        let Type::Matrix {
            scalar, rows, cols, ..
        } = t
        else {
            return Err(self.internal("a matrix access without a fragment type"));
        };
        let off = self.expr(offset)?.vals().remove(0);
        let st = self.expr(stride)?.vals().remove(0);
        // Operands are uniform over the wave (else UB): take the first active lane's.
        let off = self.first_active(Scalar::U32, &off);
        let st = self.first_active(Scalar::U32, &st);
        let (ptr, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        let off64 = self.b.ins().uextend(types::I64, off);
        let st64 = self.b.ins().uextend(types::I64, st);
        let shape = rows as u64
            | (cols as u64) << 16
            | (crate::codegen::cpu::rt::code_of(scalar) as u64) << 32
            | (store as u64) << 40;
        let shape = self.b.ins().iconst(types::I64, shape as i64);
        let r = self
            .call(
                "xpu_matrix_access",
                &[types::I64; 6],
                &[types::I64],
                &[frag, ptr, len, off64, st64, shape],
            )
            .expect("result");
        let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        self.check(bad, err::OOB, site, |s| s.b.ins().iadd_imm_s(r, -1), len);
        Ok(())
    }

    pub(super) fn first_active(&mut self, s: Scalar, v: &Val) -> Value {
        match v {
            Val::U(x) => *x,
            _ => {
                let e = self.exec();
                let bits = self.mask_bits(&e);
                let lanes = self.lanes(s, v);
                let mut acc = lanes[lanes.len() - 1];
                for l in (0..lanes.len()).rev() {
                    let bit = self.b.ins().ushr_imm_u(bits, l as i64);
                    let bit = self.b.ins().band_imm_u(bit, 1);
                    acc = self.b.ins().select(bit, lanes[l], acc);
                }
                acc
            }
        }
    }
}
