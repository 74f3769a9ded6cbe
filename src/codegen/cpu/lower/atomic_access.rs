//! `atomic_load` and `atomic_store` (issue #23, item 2): Cranelift's sequentially consistent
//! `atomic_load`/`atomic_store` (at least as strong as any order the IR names), one active
//! lane at a time, on the element's bits (floats are moved as integers of their width).

use super::*;

impl Lower<'_, '_> {
    /// `atomic_load(place)` (`value` `None`) or `atomic_store(place, value)`; the loaded
    /// value, or `None` for a store.
    pub(super) fn atomic_access(
        &mut self,
        place: &Place,
        value: Option<ExprId>,
        ty: Scalar,
        span: Span,
    ) -> Result<Option<Val>, Error> {
        let Place::Element { base, index } = *place else {
            return Err(self.internal("an atomic access to a local"));
        };
        let mut list = vec![index];
        list.extend(value);
        let mut ops = self
            .eval_ops(&list)?
            .into_iter()
            .map(|e| e.vals().remove(0));
        let idx = ops.next().expect("index");
        let v = ops.next();
        let s = ty;
        let (ptr, len, _, what, _) = self.object(base);
        let site = self.add_site(span, what);
        self.bounds(&idx, 1, len, site);
        let size = s.size() as i64;
        let t = uty(s);
        let it = match s.bits() {
            32 => types::I32,
            _ => types::I64,
        };
        let cast = s.is_float();
        let flags = MemFlagsData::new().with_notrap().with_aligned();
        let e = self.exec();
        let bits = self.mask_bits(&e);
        let il = self.lanes(Scalar::U32, &idx);
        let vl = v.as_ref().map(|v| self.lanes(s, v));
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
            let r = match &vl {
                None => {
                    let raw = self.b.ins().atomic_load(it, flags, addr);
                    if cast {
                        self.b.ins().bitcast(t, le(), raw)
                    } else {
                        raw
                    }
                }
                Some(vl) => {
                    let raw = if cast {
                        self.b.ins().bitcast(it, le(), vl[l])
                    } else {
                        vl[l]
                    };
                    self.b.ins().atomic_store(flags, raw, addr);
                    zero
                }
            };
            self.b.ins().jump(join, &[r.into()]);
            self.b.switch_to_block(join);
            outs.push(self.b.block_params(join)[0]);
        }
        Ok(match value {
            None => Some(Val::V(self.pack_lanes(s, &outs))),
            Some(_) => None,
        })
    }
}
