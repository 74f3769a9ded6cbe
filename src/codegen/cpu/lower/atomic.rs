//! Atomics.

use super::*;

impl<'a, 'm> Lower<'a, 'm> {
    pub(super) fn atomic(
        &mut self,
        op: AtomicOp,
        place: &Place,
        value: ExprId,
        compare: Option<ExprId>,
        ty: Type,
        span: Span,
    ) -> Result<Val, Error> {
        let Place::Element { base, index } = *place else {
            return Err(self.internal("an atomic on a local"));
        };
        let mut list = vec![index];
        list.extend(compare);
        list.push(value);
        let mut ops = self
            .eval_ops(&list)?
            .into_iter()
            .map(|e| e.vals().remove(0));
        let idx = ops.next().expect("index");
        let cmp = if compare.is_some() { ops.next() } else { None };
        let v = ops.next().expect("value");
        let s = scalar_of(ty);
        let (ptr, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        self.bounds(&idx, 1, len, site);
        let size = s.size() as i64;
        let t = uty(s);
        let flags = MemFlagsData::new().with_notrap().with_aligned();
        let rmw = |me: &mut Self, addr: Value, x: Value, c: Option<Value>| -> Value {
            let aop = match op {
                AtomicOp::Add => AtomicRmwOp::Add,
                AtomicOp::Sub => AtomicRmwOp::Sub,
                AtomicOp::And => AtomicRmwOp::And,
                AtomicOp::Or => AtomicRmwOp::Or,
                AtomicOp::Xor => AtomicRmwOp::Xor,
                AtomicOp::Exchange => AtomicRmwOp::Xchg,
                AtomicOp::Min => {
                    if s.is_signed() {
                        AtomicRmwOp::Smin
                    } else {
                        AtomicRmwOp::Umin
                    }
                }
                AtomicOp::Max => {
                    if s.is_signed() {
                        AtomicRmwOp::Smax
                    } else {
                        AtomicRmwOp::Umax
                    }
                }
                AtomicOp::CompareExchange => {
                    return me.b.ins().atomic_cas(flags, addr, c.expect("expected"), x);
                }
                // Below, by a compare-and-swap loop.
                AtomicOp::Inc | AtomicOp::Dec => AtomicRmwOp::Xchg,
            };
            if s.is_float() || matches!(op, AtomicOp::Inc | AtomicOp::Dec) {
                return me.cas_loop(op, s, flags, addr, x);
            }
            me.b.ins().atomic_rmw(t, flags, aop, addr, x)
        };
        // Each active lane in lane order (a uniform index and value still update once per
        // lane, as separate work-items would).
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let il = self.lanes(Scalar::U32, &idx);
        let vl = self.lanes(s, &v);
        let cl = cmp.as_ref().map(|c| self.lanes(s, c));
        let mut outs = Vec::new();
        for l in 0..self.n as usize {
            let bit = self.b.ins().ushr_imm_u(bits, l as i64);
            let bit = self.b.ins().band_imm_u(bit, 1);
            let doit = self.b.create_block();
            let join = self.b.create_block();
            self.b.append_block_param(join, t);
            let zero = self.uconst(s, 0);
            self.b.ins().brif(bit, doit, &[], join, &[zero.into()]);
            self.b.switch_to_block(doit);
            let i64v = self.b.ins().uextend(types::I64, il[l]);
            let o = self.b.ins().imul_imm_s(i64v, size);
            let addr = self.b.ins().iadd(ptr, o);
            let r = rmw(self, addr, vl[l], cl.as_ref().map(|c| c[l]));
            self.b.ins().jump(join, &[r.into()]);
            self.b.switch_to_block(join);
            outs.push(self.b.block_params(join)[0]);
        }
        Ok(Val::V(self.pack_lanes(s, &outs)))
    }

    /// An atomic that Cranelift has no instruction for, as a compare-and-swap loop on the
    /// element's bits: float `add`/`min`/`max` (the operators of `docs/semantics.md`) and
    /// CUDA's wrapping `inc`/`dec`. Yields the old value.
    fn cas_loop(
        &mut self,
        op: AtomicOp,
        s: Scalar,
        flags: MemFlagsData,
        addr: Value,
        x: Value,
    ) -> Value {
        let it = match s.bits() {
            16 => types::I16,
            32 => types::I32,
            _ => types::I64,
        };
        // f16 lanes are already their bits; f32 and f64 are bitcast.
        let cast = matches!(s, Scalar::F32 | Scalar::F64);
        let head = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(head, it);
        self.b.append_block_param(done, it);
        let old0 = self.b.ins().atomic_load(it, flags, addr);
        self.b.ins().jump(head, &[old0.into()]);
        self.b.switch_to_block(head);
        let old = self.b.block_params(head)[0];
        let of = if cast {
            self.b.ins().bitcast(uty(s), le(), old)
        } else {
            old
        };
        let nf = match op {
            AtomicOp::Min if s.is_float() => self.scalar_math(MathFn::Min, s, &[of, x]),
            AtomicOp::Max if s.is_float() => self.scalar_math(MathFn::Max, s, &[of, x]),
            AtomicOp::Inc => {
                let ge = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, of, x);
                let up = self.b.ins().iadd_imm_s(of, 1);
                let zero = self.b.ins().iconst(it, 0);
                self.b.ins().select(ge, zero, up)
            }
            AtomicOp::Dec => {
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, of, 0);
                let gt = self.b.ins().icmp(IntCC::UnsignedGreaterThan, of, x);
                let wrap = self.b.ins().bor(z, gt);
                let down = self.b.ins().iadd_imm_s(of, -1);
                self.b.ins().select(wrap, x, down)
            }
            _ => self.scalar_bin(BinaryOp::Add, s, of, x),
        };
        let ni = if cast {
            self.b.ins().bitcast(it, le(), nf)
        } else {
            nf
        };
        let seen = self.b.ins().atomic_cas(flags, addr, old, ni);
        let ok = self.b.ins().icmp(IntCC::Equal, seen, old);
        self.b
            .ins()
            .brif(ok, done, &[old.into()], head, &[seen.into()]);
        self.b.switch_to_block(done);
        let r = self.b.block_params(done)[0];
        if cast {
            self.b.ins().bitcast(uty(s), le(), r)
        } else {
            r
        }
    }
}
