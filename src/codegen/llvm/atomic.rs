//! Atomics on buffers and shared memory.

use super::*;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    pub(super) fn atomic(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        place: &Place,
        value: ExprId,
        compare: Option<ExprId>,
        e: ExprId,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use llvm_sys::LLVMAtomicRMWBinOp as R;
        let Place::Element { base, index } = place else {
            return self.err(
                codes::INPUT,
                "an atomic on something other than a buffer or shared element",
            );
        };
        if matches!(base, Base::Local(_)) {
            return self.err(codes::INPUT, "an atomic on a private array");
        }
        let (ptr, elem) = self.element_ptr(*base, *index)?;
        // Checked mode: out of bounds, the atomic acts on scratch and yields 0.
        let ok = self.last_ok.take();
        let cmp = match compare {
            Some(c) => Some(self.value(c)?),
            None => None,
        };
        let v = self.value(value)?;
        let s = self.ty(e)?.scalar().unwrap_or(elem.scalar);
        let scope = if matches!(base, Base::Shared(_)) {
            FenceScope::Workgroup
        } else {
            FenceScope::Device
        };
        // Orders are fences around a relaxed read-modify-write at the element's scope:
        // release before, acquire after (LLVM 19's C API cannot set a sync scope).
        if matches!(
            order,
            MemoryOrder::Release | MemoryOrder::AcqRel | MemoryOrder::SeqCst
        ) {
            self.t.fence(self.cx, scope)?;
        }
        let mono = llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic;
        let out: BasicValueEnum = if op == AtomicOp::CompareExchange {
            let Some(cmp) = cmp else {
                return self.err(codes::INPUT, "compare-exchange without an expected value");
            };
            // SAFETY: ptr points to an element of the value's type; orders are valid.
            let pair = unsafe {
                llvm_sys::core::LLVMBuildAtomicCmpXchg(
                    self.b().as_mut_ptr(),
                    ptr.as_value_ref(),
                    cmp.as_value_ref(),
                    v.as_value_ref(),
                    mono,
                    mono,
                    0,
                )
            };
            // SAFETY: cmpxchg yields {T, i1}; field 0 is the old value.
            unsafe {
                BasicValueEnum::new(llvm_sys::core::LLVMBuildExtractValue(
                    self.b().as_mut_ptr(),
                    pair,
                    0,
                    c"".as_ptr(),
                ))
            }
        } else {
            let f = s.is_float();
            let sg = s.is_signed();
            let rop = match op {
                AtomicOp::Add if f => R::LLVMAtomicRMWBinOpFAdd,
                AtomicOp::Add => R::LLVMAtomicRMWBinOpAdd,
                AtomicOp::Sub if f => R::LLVMAtomicRMWBinOpFSub,
                AtomicOp::Sub => R::LLVMAtomicRMWBinOpSub,
                AtomicOp::Min if f => R::LLVMAtomicRMWBinOpFMin,
                AtomicOp::Min if sg => R::LLVMAtomicRMWBinOpMin,
                AtomicOp::Min => R::LLVMAtomicRMWBinOpUMin,
                AtomicOp::Max if f => R::LLVMAtomicRMWBinOpFMax,
                AtomicOp::Max if sg => R::LLVMAtomicRMWBinOpMax,
                AtomicOp::Max => R::LLVMAtomicRMWBinOpUMax,
                AtomicOp::And => R::LLVMAtomicRMWBinOpAnd,
                AtomicOp::Or => R::LLVMAtomicRMWBinOpOr,
                AtomicOp::Xor => R::LLVMAtomicRMWBinOpXor,
                AtomicOp::Exchange => R::LLVMAtomicRMWBinOpXchg,
                // CUDA's atomicInc/atomicDec exactly (`atom.inc`/`atom.dec` on NVPTX).
                AtomicOp::Inc => R::LLVMAtomicRMWBinOpUIncWrap,
                AtomicOp::Dec => R::LLVMAtomicRMWBinOpUDecWrap,
                AtomicOp::CompareExchange => unreachable!("handled above"),
            };
            // SAFETY: ptr points to an element of v's type; the op suits the type.
            unsafe {
                BasicValueEnum::new(llvm_sys::core::LLVMBuildAtomicRMW(
                    self.b().as_mut_ptr(),
                    rop,
                    ptr.as_value_ref(),
                    v.as_value_ref(),
                    mono,
                    0,
                ))
            }
        };
        if matches!(
            order,
            MemoryOrder::Acquire | MemoryOrder::AcqRel | MemoryOrder::SeqCst
        ) {
            self.t.fence(self.cx, scope)?;
        }
        self.zero_unless(out, ok)
    }
}
