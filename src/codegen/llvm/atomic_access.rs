//! `atomic_load` and `atomic_store` (issue #23, item 2), for NVPTX and AMDGPU: a monotonic
//! (relaxed) `load atomic`/`store atomic` at the element's natural alignment, with the
//! order made of fences around it at the element's scope, as the read-modify-writes do
//! (`atomic.rs`): release (and seq_cst) before, acquire (and seq_cst) after.

use super::*;

impl<'ctx> FunctionContext<'_, 'ctx> {
    /// `atomic_load(place)` (`value` `None`) or `atomic_store(place, value)`.
    pub(super) fn atomic_access(
        &mut self,
        order: MemoryOrder,
        place: &Place,
        value: Option<ExprId>,
    ) -> LowerResult<Option<BasicValueEnum<'ctx>>> {
        let Place::Element { base, index } = place else {
            return self.err(
                codes::INPUT,
                "an atomic access to something other than an element",
            );
        };
        if matches!(base, Base::Local(_)) {
            return self.err(codes::INPUT, "an atomic access to a private array");
        }
        let (ptr, elem) = self.element_ptr(*base, *index)?;
        let v = match value {
            Some(v) => Some(self.value(v)?),
            None => None,
        };
        let scope = if matches!(base, Base::Shared(_)) {
            FenceScope::Workgroup
        } else {
            FenceScope::Device
        };
        if matches!(order, MemoryOrder::Release | MemoryOrder::SeqCst) {
            self.t.fence(self.cx, scope)?;
        }
        let align = elem.scalar.size();
        let bad =
            |e: inkwell::values::InstructionValueError| Error::new(codes::INTERNAL, e.to_string());
        let mono = inkwell::AtomicOrdering::Monotonic;
        let out = match v {
            Some(v) => {
                let st = self.b().build_store(ptr, v)?;
                st.set_alignment(align).map_err(bad)?;
                st.set_atomic_ordering(mono).map_err(bad)?;
                None
            }
            None => {
                let ty = mem_scalar_type(self.cx, elem.scalar);
                let l = self.b().build_load(ty, ptr, "")?;
                if let Some(i) = l.as_instruction_value() {
                    i.set_alignment(align).map_err(bad)?;
                    i.set_atomic_ordering(mono).map_err(bad)?;
                }
                Some(l)
            }
        };
        if matches!(order, MemoryOrder::Acquire | MemoryOrder::SeqCst) {
            self.t.fence(self.cx, scope)?;
        }
        Ok(out)
    }
}
