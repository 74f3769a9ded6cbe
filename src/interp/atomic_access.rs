//! `atomic_load` and `atomic_store` (issue #23, item 2): element accesses that the race
//! model records as atomic (docs/semantics.md, "Atomics and memory orders").

use super::{refuse, FnCompiler, Inst, InterpError, Mem, Opnd, Slot};
use crate::ir::{ExprId, Place, Scalar, Span};

impl FnCompiler<'_, '_> {
    /// The buffer or shared element an atomic access addresses, checked as the type rules
    /// say.
    fn atomic_mem(&self, place: Place, span: Span) -> Result<(Mem, ExprId), InterpError> {
        let Place::Element { base, index } = place else {
            return refuse(span, "an atomic access to something other than an element");
        };
        let mem = self.mem(base, span)?;
        let ok = !matches!(mem, Mem::Private { .. })
            && mem.lanes() == 1
            && matches!(
                mem.scalar(),
                Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32 | Scalar::F64
            );
        if !ok {
            return refuse(span, "an atomic access to private memory or a bad element");
        }
        Ok((mem, index))
    }

    pub(super) fn atomic_load(
        &mut self,
        place: Place,
        want: Option<Slot>,
        span: Span,
    ) -> Result<Opnd, InterpError> {
        let (mem, index) = self.atomic_mem(place, span)?;
        let dst = self.dst(want, 1);
        let idx = self.expr(index)?.slot;
        self.emit(Inst::AtomicLoad {
            mem,
            dst,
            idx,
            span,
        });
        Ok(Opnd { slot: dst, n: 1 })
    }

    pub(super) fn atomic_store(
        &mut self,
        place: Place,
        value: ExprId,
        span: Span,
    ) -> Result<(), InterpError> {
        let (mem, index) = self.atomic_mem(place, span)?;
        let mark = self.top;
        let idx = self.expr(index)?.slot;
        let src = self.expr(value)?.slot;
        self.emit(Inst::AtomicStore {
            mem,
            src,
            idx,
            span,
        });
        self.top = mark;
        Ok(())
    }
}
