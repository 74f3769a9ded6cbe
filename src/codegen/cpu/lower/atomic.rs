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
    ) -> Result<Val, JitError> {
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
            };
            if s == Scalar::F32 {
                // f32 add: a compare-and-swap loop on the bits.
                let head = me.b.create_block();
                let done = me.b.create_block();
                me.b.append_block_param(head, types::I32);
                me.b.append_block_param(done, types::I32);
                let old0 = me.b.ins().atomic_load(types::I32, flags, addr);
                me.b.ins().jump(head, &[old0.into()]);
                me.b.switch_to_block(head);
                let old = me.b.block_params(head)[0];
                let of = me.b.ins().bitcast(types::F32, le(), old);
                let nf = me.b.ins().fadd(of, x);
                let ni = me.b.ins().bitcast(types::I32, le(), nf);
                let seen = me.b.ins().atomic_cas(flags, addr, old, ni);
                let ok = me.b.ins().icmp(IntCC::Equal, seen, old);
                me.b.ins()
                    .brif(ok, done, &[old.into()], head, &[seen.into()]);
                me.b.switch_to_block(done);
                let r = me.b.block_params(done)[0];
                return me.b.ins().bitcast(types::F32, le(), r);
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
}
