//! Variables, spilling and errors, and the lane primitives the masked code is built from.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    pub(super) fn new_var(&mut self, ty: types::Type) -> Variable {
        let v = self.b.declare_var(ty);
        let slot = if self.has_barrier {
            let size = ty.bytes() as u64;
            let off = self.state_size.div_ceil(size.min(16)) * size.min(16);
            self.state_size = off.saturating_add(size);
            // Past `MAX_STATE_BYTES` the kernel is refused (`run`), so the offset is unused.
            off as u32
        } else {
            0
        };
        self.scope.push((v, ty, slot));
        v
    }

    pub(super) fn alloc_state(&mut self, bytes: u64) -> u32 {
        let off = self.state_size.div_ceil(16) * 16;
        // A 16-byte tail so that a chunk load at the last element stays inside.
        self.state_size = off
            .saturating_add(bytes.div_ceil(16) * 16)
            .saturating_add(16);
        // Past `MAX_STATE_BYTES` the kernel is refused (`run`), so the offset is unused.
        off as u32
    }

    pub(super) fn add_site(&mut self, span: Span, what: String) -> u32 {
        self.sites.push(Site {
            line: span.line,
            col: span.col,
            what,
        });
        (self.sites.len() - 1) as u32
    }

    /// Records an error in the context and returns from the function.
    pub(super) fn fail(&mut self, code: u32, site: u32, index: Value, len: Value) {
        if self.flat_bx.is_some() {
            self.flat_group_store();
        }
        let c = self.b.ins().iconst(types::I32, code as i64);
        let s = self.b.ins().iconst(types::I32, site as i64);
        self.b.ins().store(notrap(), c, self.ctx, ctx_off::ERR_CODE);
        self.b.ins().store(notrap(), s, self.ctx, ctx_off::ERR_SITE);
        self.b
            .ins()
            .store(notrap(), index, self.ctx, ctx_off::ERR_INDEX);
        self.b
            .ins()
            .store(notrap(), len, self.ctx, ctx_off::ERR_LEN);
        let one = self.b.ins().iconst(types::I32, 1);
        self.b.ins().return_(&[one]);
    }

    /// A loop back-edge's deadline check: one load of the launch's cancellation flag (through
    /// the context's pointer to it, itself a load the optimiser may share) and a branch to a
    /// cold exit with `err::CANCELLED` when it is set. An atomic load, so that it is never
    /// merged with an earlier one or hoisted out of the loop.
    pub(super) fn cancel_check(&mut self, span: Span) {
        let p = self
            .b
            .ins()
            .load(types::I64, notrap(), self.ctx, ctx_off::CANCEL);
        let flag = self.b.ins().atomic_load(types::I32, notrap(), p);
        let site = self.add_site(span, "deadline".into());
        let zero = self.b.ins().iconst(types::I64, 0);
        self.check(flag, err::CANCELLED, site, |_| zero, zero);
    }

    /// Branches to a cold error exit when `cond` (i8) holds; `index` is computed there.
    pub(super) fn check(
        &mut self,
        cond: Value,
        code: u32,
        site: u32,
        index: impl FnOnce(&mut Self) -> Value,
        len: Value,
    ) {
        let bad = self.b.create_block();
        let good = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(cond, bad, &[], good, &[]);
        // Both have their one predecessor: sealed now, a variable read after the check is
        // the value read before it (see `unmasked`).
        self.b.seal_block(bad);
        self.b.seal_block(good);
        self.b.switch_to_block(bad);
        let i = index(self);
        self.fail(code, site, i, len);
        self.b.switch_to_block(good);
    }

    // -----------------------------------------------------------------------------------
    // Lane primitives

    pub(super) fn const_vec(&mut self, ty: types::Type, lanes: &[u64]) -> Value {
        let lb = ty.lane_bits() as usize / 8;
        let mut bytes = Vec::with_capacity(16);
        for &l in lanes.iter().take(ty.lane_count() as usize) {
            bytes.extend_from_slice(&l.to_le_bytes()[..lb]);
        }
        bytes.resize(16, 0);
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, c)
    }

    pub(super) fn uconst(&mut self, s: Scalar, bits: u64) -> Value {
        match s {
            Scalar::F32 => self.b.ins().f32const(f32::from_bits(bits as u32)),
            Scalar::F64 => self.b.ins().f64const(f64::from_bits(bits)),
            _ => self.b.ins().iconst(uty(s), bits as i64),
        }
    }

    pub(super) fn splat(&mut self, s: Scalar, v: Value) -> Vec<Value> {
        let v = if s == Scalar::Bool {
            let w = self.b.ins().uextend(types::I32, v);
            self.b.ins().ineg(w)
        } else {
            v
        };
        let one = self.b.ins().splat(vty(s), v);
        vec![one; chunks(s, self.n) as usize]
    }

    pub(super) fn materialize(&mut self, s: Scalar, v: &Val) -> Vec<Value> {
        match v {
            Val::U(x) => self.splat(s, *x),
            Val::V(c) => c.clone(),
            Val::A(base, stride) => {
                let vt = vty(s);
                let pc = per_chunk(s);
                let b = self.b.ins().splat(vt, *base);
                (0..chunks(s, self.n))
                    .map(|c| {
                        let offs: Vec<u64> = (0..pc)
                            .map(|j| ((c * pc + j) as i64).wrapping_mul(*stride) as u64)
                            .collect();
                        let o = self.const_vec(vt, &offs);
                        self.b.ins().iadd(b, o)
                    })
                    .collect()
            }
        }
    }

    /// Lane `l` of `v` as a uniform scalar (`bool`: i8 0/1).
    pub(super) fn lane(&mut self, s: Scalar, v: &Val, l: u32) -> Value {
        match v {
            Val::U(x) => *x,
            Val::A(base, stride) => {
                let k = (l as i64).wrapping_mul(*stride);
                self.b.ins().iadd_imm_s(*base, k)
            }
            Val::V(c) => {
                let pc = per_chunk(s);
                let x = self
                    .b
                    .ins()
                    .extractlane(c[(l / pc) as usize], (l % pc) as u8);
                if s == Scalar::Bool {
                    let t = self.b.ins().ireduce(types::I8, x);
                    self.b.ins().band_imm_u(t, 1)
                } else {
                    x
                }
            }
        }
    }

    pub(super) fn lanes(&mut self, s: Scalar, v: &Val) -> Vec<Value> {
        (0..self.n).map(|l| self.lane(s, v, l)).collect()
    }

    pub(super) fn pack_lanes(&mut self, s: Scalar, lanes: &[Value]) -> Vec<Value> {
        let pc = per_chunk(s);
        let nc = chunks(s, self.n);
        let mut out = Vec::new();
        for c in 0..nc {
            let mut acc = self.const_vec(vty(s), &[]);
            for j in 0..pc {
                let l = c * pc + j;
                if l >= self.n {
                    break;
                }
                let mut x = lanes[l as usize];
                if s == Scalar::Bool {
                    let w = self.b.ins().uextend(types::I32, x);
                    x = self.b.ins().ineg(w);
                }
                acc = self.b.ins().insertlane(acc, x, j as u8);
            }
            out.push(acc);
        }
        out
    }

    pub(super) fn map_lanes(
        &mut self,
        s_out: Scalar,
        n_in: &[(Scalar, &Val)],
        mut f: impl FnMut(&mut Self, &[Value]) -> Value,
    ) -> Val {
        let ins: Vec<Vec<Value>> = n_in.iter().map(|(s, v)| self.lanes(*s, v)).collect();
        let mut outs = Vec::new();
        for l in 0..self.n as usize {
            let args: Vec<Value> = ins.iter().map(|x| x[l]).collect();
            outs.push(f(self, &args));
        }
        Val::V(self.pack_lanes(s_out, &outs))
    }

    pub(super) fn exec(&mut self) -> Vec<Value> {
        // A known mask is computed where it is needed, so that the variables (which hold the
        // same lanes) are not kept live through code that does not read them.
        match self.known {
            Known::Full => {
                let ones = self.full_chunk();
                vec![ones; self.exec.len()]
            }
            Known::Initial => {
                let volume = self.bdim[3];
                self.initial_mask(volume)
            }
            Known::Unknown => self
                .exec
                .clone()
                .iter()
                .map(|&v| self.b.use_var(v))
                .collect(),
        }
    }

    /// A mask chunk with every lane of the wave on (lanes past a wave of fewer than 4 off).
    pub(super) fn full_chunk(&mut self) -> Value {
        let ones: Vec<u64> = (0..4)
            .map(|j| if j < self.n { u32::MAX as u64 } else { 0 })
            .collect();
        self.const_vec(types::I32X4, &ones)
    }

    pub(super) fn set_exec(&mut self, m: &[Value]) {
        // Whoever knows the new mask to be the initial one again says so afterwards.
        self.known = Known::Unknown;
        for (v, x) in self.exec.clone().into_iter().zip(m) {
            self.b.def_var(v, *x);
        }
    }

    pub(super) fn use_vars(&mut self, vs: &[Variable]) -> Vec<Value> {
        vs.iter().map(|&v| self.b.use_var(v)).collect()
    }

    pub(super) fn def_vars(&mut self, vs: &[Variable], xs: &[Value]) {
        for (v, x) in vs.iter().zip(xs) {
            self.b.def_var(*v, *x);
        }
    }

    pub(super) fn mask_vars(&mut self) -> Vec<Variable> {
        (0..chunks(Scalar::Bool, self.n))
            .map(|_| self.new_var(types::I32X4))
            .collect()
    }

    pub(super) fn zero_mask(&mut self) -> Vec<Value> {
        let z = self.const_vec(types::I32X4, &[]);
        vec![z; chunks(Scalar::Bool, self.n) as usize]
    }

    pub(super) fn mask_and(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().band(x, y))
            .collect()
    }
    pub(super) fn mask_or(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().bor(x, y))
            .collect()
    }
    pub(super) fn mask_andnot(&mut self, a: &[Value], b: &[Value]) -> Vec<Value> {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.b.ins().band_not(x, y))
            .collect()
    }

    /// The mask as an `i64` bit set (bit `l` = lane `l`).
    pub(super) fn mask_bits(&mut self, m: &[Value]) -> Value {
        let mut acc = self.b.ins().iconst(types::I64, 0);
        for (c, &x) in m.iter().enumerate() {
            let bits = self.b.ins().vhigh_bits(types::I64, x);
            let sh = if c == 0 {
                bits
            } else {
                self.b.ins().ishl_imm_u(bits, (c * 4) as i64)
            };
            acc = self.b.ins().bor(acc, sh);
        }
        if self.n < 64 {
            acc = self.b.ins().band_imm_u(acc, ((1u64 << self.n) - 1) as i64);
        }
        acc
    }

    pub(super) fn mask_any(&mut self, m: &[Value]) -> Value {
        let bits = self.mask_bits(m);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, bits, 0)
    }

    /// A varying bool (mask geometry) as `s`'s geometry: lanes of all ones / zero.
    pub(super) fn mask_geom(&mut self, s: Scalar, m: &[Value]) -> Vec<Value> {
        match vty(s) {
            types::I32X4 => m.to_vec(),
            types::F32X4 => m
                .iter()
                .map(|&x| self.b.ins().bitcast(types::F32X4, le(), x))
                .collect(),
            types::I64X2 | types::F64X2 => {
                let mut out = Vec::new();
                for &x in m {
                    let lo = self.b.ins().swiden_low(x);
                    let hi = self.b.ins().swiden_high(x);
                    out.push(lo);
                    out.push(hi);
                }
                out.truncate(chunks(s, self.n) as usize);
                if vty(s) == types::F64X2 {
                    out = out
                        .iter()
                        .map(|&x| self.b.ins().bitcast(types::F64X2, le(), x))
                        .collect();
                }
                out
            }
            types::I16X8 => {
                let mut out = Vec::new();
                for pair in m.chunks(2) {
                    let b = if pair.len() > 1 { pair[1] } else { pair[0] };
                    out.push(self.b.ins().snarrow(pair[0], b));
                }
                out
            }
            _ => {
                let h = self.mask_geom(Scalar::I16, m);
                let mut out = Vec::new();
                for pair in h.chunks(2) {
                    let b = if pair.len() > 1 { pair[1] } else { pair[0] };
                    out.push(self.b.ins().snarrow(pair[0], b));
                }
                out
            }
        }
    }

    /// Lanes of all ones / zero in `s`'s geometry (a comparison's result) as a mask.
    pub(super) fn geom_mask(&mut self, s: Scalar, v: &[Value]) -> Vec<Value> {
        let n = chunks(Scalar::Bool, self.n) as usize;
        match vty(s) {
            types::I32X4 => v.to_vec(),
            types::F32X4 => v
                .iter()
                .map(|&x| self.b.ins().bitcast(types::I32X4, le(), x))
                .collect(),
            types::I64X2 | types::F64X2 => {
                let ints: Vec<Value> = v
                    .iter()
                    .map(|&x| {
                        if vty(s) == types::F64X2 {
                            self.b.ins().bitcast(types::I64X2, le(), x)
                        } else {
                            x
                        }
                    })
                    .collect();
                let mut out = Vec::new();
                for pair in ints.chunks(2) {
                    let a = self.b.ins().bitcast(types::I32X4, le(), pair[0]);
                    let b = if pair.len() > 1 {
                        self.b.ins().bitcast(types::I32X4, le(), pair[1])
                    } else {
                        a
                    };
                    // Low 32 bits of each 64-bit lane: i32 lanes 0, 2 of a and of b.
                    let a8 = self.b.ins().bitcast(types::I8X16, le(), a);
                    let b8 = self.b.ins().bitcast(types::I8X16, le(), b);
                    let idx: Vec<u8> =
                        [0u8, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27].to_vec();
                    let imm = self.b.func.dfg.immediates.push(ConstantData::from(idx));
                    let sh = self.b.ins().shuffle(a8, b8, imm);
                    out.push(self.b.ins().bitcast(types::I32X4, le(), sh));
                }
                out.truncate(n);
                out
            }
            types::I16X8 => {
                let mut out = Vec::new();
                for &x in v {
                    out.push(self.b.ins().swiden_low(x));
                    out.push(self.b.ins().swiden_high(x));
                }
                out.truncate(n);
                out
            }
            _ => {
                let mut h = Vec::new();
                for &x in v {
                    h.push(self.b.ins().swiden_low(x));
                    h.push(self.b.ins().swiden_high(x));
                }
                h.truncate(chunks(Scalar::I16, self.n) as usize);
                self.geom_mask(Scalar::I16, &h)
            }
        }
    }

    /// A `bool` value as a mask.
    pub(super) fn bool_mask(&mut self, v: &Val) -> Vec<Value> {
        match v {
            Val::V(c) => c.clone(),
            _ => self.materialize(Scalar::Bool, v),
        }
    }

    pub(super) fn blend(
        &mut self,
        s: Scalar,
        mask: &[Value],
        new: &[Value],
        old: &[Value],
    ) -> Vec<Value> {
        let m = self.mask_geom(s, mask);
        let mut out = Vec::new();
        for i in 0..new.len() {
            out.push(self.b.ins().bitselect(m[i], new[i], old[i]));
        }
        out
    }
}
