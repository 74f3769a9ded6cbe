//! Bit operations (issue #23, item 1) on integer scalars, shared by NVPTX and AMDGPU:
//! `llvm.ctpop`, `llvm.ctlz`/`llvm.cttz` (zero defined: the width), `llvm.bitreverse`,
//! `llvm.fshl`/`llvm.fshr` for rotations, a double-width multiply for `mul_hi`, and the clamped
//! shift sequences of `docs/semantics.md` ("Bit operations") for the bit fields.

use super::*;

impl<'ctx> FunctionContext<'_, 'ctx> {
    /// `op` on `args` (values of `s`, amounts `i32`).
    pub(super) fn bits(
        &self,
        op: BitOp,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if args.len() != op.arity() || !s.is_int() {
            return self.err(codes::INPUT, format!("`{}` malformed", op.name()));
        }
        let t = args[0].get_type();
        let it = t.into_int_type();
        let w = u64::from(s.bits());
        let b = self.b();
        let no_poison = self.cx.context.bool_type().const_zero().into();
        // A u32 amount as a value of the operand's type (exact: amounts here are <= 64, or
        // taken modulo a power-of-two width).
        let amount = |v: BasicValueEnum<'ctx>| -> LowerResult<IntValue<'ctx>> {
            let v = v.into_int_value();
            Ok(match w.cmp(&32) {
                std::cmp::Ordering::Less => b.build_int_truncate(v, it, "")?,
                std::cmp::Ordering::Greater => b.build_int_z_extend(v, it, "")?,
                std::cmp::Ordering::Equal => v,
            })
        };
        let k = |v: u64| it.const_int(v, false);
        match op {
            BitOp::Popcount => self.cx.call_value("llvm.ctpop", &[t], &[args[0]]),
            BitOp::Clz => self.cx.call_value("llvm.ctlz", &[t], &[args[0], no_poison]),
            BitOp::Ctz => self.cx.call_value("llvm.cttz", &[t], &[args[0], no_poison]),
            BitOp::BitReverse => self.cx.call_value("llvm.bitreverse", &[t], &[args[0]]),
            BitOp::RotateLeft | BitOp::RotateRight => {
                let n = amount(args[1])?.into();
                let name = if op == BitOp::RotateLeft {
                    "llvm.fshl"
                } else {
                    "llvm.fshr"
                };
                self.cx.call_value(name, &[t], &[args[0], args[0], n])
            }
            BitOp::MulHi => {
                let c = self.cx.context;
                let wide = match w {
                    8 => c.i16_type(),
                    16 => c.i32_type(),
                    32 => c.i64_type(),
                    _ => c.i128_type(),
                };
                let (x, y) = (args[0].into_int_value(), args[1].into_int_value());
                let (x, y) = if s.is_signed() {
                    (
                        b.build_int_s_extend(x, wide, "")?,
                        b.build_int_s_extend(y, wide, "")?,
                    )
                } else {
                    (
                        b.build_int_z_extend(x, wide, "")?,
                        b.build_int_z_extend(y, wide, "")?,
                    )
                };
                let p = b.build_int_mul(x, y, "")?;
                let hi = b.build_right_shift(p, wide.const_int(w, false), false, "")?;
                Ok(b.build_int_truncate(hi, it, "")?.into())
            }
            BitOp::BitfieldExtract | BitOp::BitfieldInsert => {
                let first = if op == BitOp::BitfieldExtract { 1 } else { 2 };
                let i32t = self.cx.context.i32_type();
                let wv = i32t.const_int(w, false);
                let umin = |a: IntValue<'ctx>, c: IntValue<'ctx>| -> LowerResult<IntValue<'ctx>> {
                    Ok(self
                        .cx
                        .call_value("llvm.umin", &[i32t.into()], &[a.into(), c.into()])?
                        .into_int_value())
                };
                let off = umin(args[first].into_int_value(), wv)?;
                let room = b.build_int_sub(wv, off, "")?;
                let cnt = umin(args[first + 1].into_int_value(), room)?;
                let empty = b.build_int_compare(IntPredicate::EQ, cnt, i32t.const_zero(), "")?;
                // Every shift amount is masked to the width: the arm that a zero count
                // would make out of range is discarded by the select.
                let masked = |v: IntValue<'ctx>| -> LowerResult<IntValue<'ctx>> {
                    let v = amount(v.into())?;
                    Ok(b.build_and(v, k(w - 1), "")?)
                };
                let right = masked(b.build_int_sub(wv, cnt, "")?)?;
                let offv = masked(off)?;
                if op == BitOp::BitfieldExtract {
                    let left = masked(b.build_int_sub(room, cnt, "")?)?;
                    let l = b.build_left_shift(args[0].into_int_value(), left, "")?;
                    let r = b.build_right_shift(l, right, s.is_signed(), "")?;
                    Ok(b.build_select(empty, k(0), r, "")?)
                } else {
                    let low = b.build_right_shift(it.const_all_ones(), right, false, "")?;
                    let m = b.build_left_shift(low, offv, "")?;
                    let m = b.build_select(empty, k(0), m, "")?.into_int_value();
                    let keep = b.build_and(args[0].into_int_value(), b.build_not(m, "")?, "")?;
                    let ins = b.build_left_shift(args[1].into_int_value(), offv, "")?;
                    let ins = b.build_and(ins, m, "")?;
                    Ok(b.build_or(keep, ins, "")?.into())
                }
            }
        }
    }
}
