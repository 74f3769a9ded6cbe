//! Bit operations (issue #23, item 1) on integer scalars, lane by lane: Cranelift's own
//! `popcnt`, `clz`, `ctz`, `bitrev`, `rotl`, `rotr`, `umulhi`/`smulhi`, and shift sequences for
//! the clamped bit fields of `docs/semantics.md` ("Bit operations").

use super::*;

impl Lower<'_, '_> {
    /// `op` over the operands `vs` (each one component) of a bit operation on `s`.
    pub(super) fn bits(&mut self, op: BitOp, s: Scalar, vs: &[Val]) -> Val {
        let refs: Vec<(Scalar, &Val)> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| (if op.is_amount(i) { Scalar::U32 } else { s }, v))
            .collect();
        if vs.iter().all(|v| matches!(v, Val::U(_))) {
            let xs: Vec<Value> = vs
                .iter()
                .filter_map(|v| match v {
                    Val::U(x) => Some(*x),
                    _ => None,
                })
                .collect();
            return Val::U(self.scalar_bits(op, s, &xs));
        }
        self.map_lanes(s, &refs, |me, a| me.scalar_bits(op, s, a))
    }

    /// One lane: values of `uty(s)`, amounts `i32`.
    fn scalar_bits(&mut self, op: BitOp, s: Scalar, a: &[Value]) -> Value {
        let t = uty(s);
        let w = i64::from(s.bits());
        match op {
            BitOp::Popcount => self.b.ins().popcnt(a[0]),
            BitOp::Clz => self.b.ins().clz(a[0]),
            BitOp::Ctz => self.b.ins().ctz(a[0]),
            BitOp::BitReverse => self.b.ins().bitrev(a[0]),
            // Cranelift rotates by the amount modulo the width, as the semantics say.
            BitOp::RotateLeft => self.b.ins().rotl(a[0], a[1]),
            BitOp::RotateRight => self.b.ins().rotr(a[0], a[1]),
            BitOp::MulHi => {
                if w == 64 {
                    if s.is_signed() {
                        self.b.ins().smulhi(a[0], a[1])
                    } else {
                        self.b.ins().umulhi(a[0], a[1])
                    }
                } else {
                    let (x, y) = if s.is_signed() {
                        (
                            self.b.ins().sextend(types::I64, a[0]),
                            self.b.ins().sextend(types::I64, a[1]),
                        )
                    } else {
                        (
                            self.b.ins().uextend(types::I64, a[0]),
                            self.b.ins().uextend(types::I64, a[1]),
                        )
                    };
                    let p = self.b.ins().imul(x, y);
                    let hi = self.b.ins().ushr_imm_u(p, w);
                    self.b.ins().ireduce(t, hi)
                }
            }
            BitOp::BitfieldExtract => {
                let (off, cnt) = self.clamp_field(w, a[1], a[2]);
                // x << (w - off - cnt) >> (w - cnt): exact when cnt >= 1.
                let wv = self.b.ins().iconst(types::I32, w);
                let top = self.b.ins().isub(wv, off);
                let left = self.b.ins().isub(top, cnt);
                let right = self.b.ins().isub(wv, cnt);
                let l = self.b.ins().ishl(a[0], left);
                let r = if s.is_signed() {
                    self.b.ins().sshr(l, right)
                } else {
                    self.b.ins().ushr(l, right)
                };
                let zero = self.b.ins().iconst(t, 0);
                self.b.ins().select(cnt, r, zero)
            }
            BitOp::BitfieldInsert => {
                let (off, cnt) = self.clamp_field(w, a[2], a[3]);
                let wv = self.b.ins().iconst(types::I32, w);
                let right = self.b.ins().isub(wv, cnt);
                let ones = self.b.ins().iconst(t, -1);
                let low = self.b.ins().ushr(ones, right);
                let m = self.b.ins().ishl(low, off);
                let zero = self.b.ins().iconst(t, 0);
                let m = self.b.ins().select(cnt, m, zero);
                let keep = self.b.ins().band_not(a[0], m);
                let ins = self.b.ins().ishl(a[1], off);
                let ins = self.b.ins().band(ins, m);
                self.b.ins().bor(keep, ins)
            }
        }
    }

    /// The clamped field of a `w`-bit value: `off = min(offset, w)`,
    /// `cnt = min(count, w - off)`, both `i32`.
    fn clamp_field(&mut self, w: i64, offset: Value, count: Value) -> (Value, Value) {
        let wv = self.b.ins().iconst(types::I32, w);
        let off = self.b.ins().umin(offset, wv);
        let room = self.b.ins().isub(wv, off);
        let cnt = self.b.ins().umin(count, room);
        (off, cnt)
    }
}
