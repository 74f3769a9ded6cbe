//! The interpreter's bit operations (issue #23, item 1): compiled to one [`Inst::Bits`] that
//! runs [`BitOp::eval`], the normative definition in `crate::ir::bits`.

use super::{refuse, FnCompiler, Inst, InterpError, Opnd, Slot, NONE};
use crate::ir::{BitOp, ExprId, Scalar, Span};

impl FnCompiler<'_, '_> {
    pub(super) fn bits(
        &mut self,
        op: BitOp,
        args: &[ExprId],
        want: Option<Slot>,
        span: Span,
    ) -> Result<Opnd, InterpError> {
        if args.len() != op.arity() {
            return refuse(
                span,
                format!("`{}` with {} arguments", op.name(), args.len()),
            );
        }
        let (s, n) = self.scalar_of(args[0])?;
        if !s.is_int() || n != 1 {
            return refuse(span, format!("`{}` of {}", op.name(), s.name()));
        }
        let dst = self.dst(want, 1);
        let mut a = [NONE; 4];
        for (i, &e) in args.iter().enumerate() {
            let o = self.expr(e)?;
            let want_s = if op.is_amount(i) { Scalar::U32 } else { s };
            if o.n != 1 || self.scalar_of(e)?.0 != want_s {
                return refuse(span, format!("`{}` with a mistyped argument", op.name()));
            }
            a[i] = o.slot;
        }
        self.emit(Inst::Bits { op, s, dst, a });
        Ok(Opnd { slot: dst, n: 1 })
    }
}
