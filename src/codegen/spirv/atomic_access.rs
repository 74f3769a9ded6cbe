//! `atomic_load` and `atomic_store` (issue #23, item 2): `OpAtomicLoad`/`OpAtomicStore` on the
//! element's storage type (floats are stored as integers of their width and bitcast), with
//! the order's memory semantics as the read-modify-writes give them (`wave.rs`).

use super::*;

impl Emitter<'_> {
    /// `atomic_load(place)` (`value` `None`, yields the element) or `atomic_store(place,
    /// value)` (yields `None`).
    pub(super) fn atomic_access(
        &mut self,
        order: MemoryOrder,
        place: Place,
        value: Option<ExprId>,
        ty: Option<Type>,
    ) -> SpirvResult<Option<Word>> {
        let Place::Element { base, index } = place else {
            return refuse("an atomic access to a local");
        };
        let s = match (value, ty) {
            (Some(v), _) => self.sl(v).0,
            (None, Some(Type::Scalar(s))) => s,
            _ => return refuse("an atomic load of something other than a scalar"),
        };
        if !matches!(
            s,
            Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32 | Scalar::F64
        ) {
            return refuse(format!("an atomic access to {}", s.name()));
        }
        if s.bits() == 64 {
            if !self.caps.int64_atomics {
                return refuse("64-bit atomics (shaderBufferInt64Atomics)");
            }
            self.cap(Capability::Int64Atomics);
        }
        let i = self.expr_u32(index)?;
        let v = match value {
            Some(v) => Some(self.expr(v)?),
            None => None,
        };
        let (ptr, st, scope, storage_bits) = match base {
            Base::Param(p) => {
                let (ptr, st, _) = self.buffer_ptr(p, i);
                (ptr, st, SCOPE_DEVICE, SEM_UNIFORM)
            }
            Base::Shared(_) => {
                let (ptr, st, _) = self.elem_ptr_other(base, i)?;
                (ptr, st, SCOPE_WORKGROUP, SEM_WORKGROUP)
            }
            Base::Local(_) => return refuse("an atomic access to a private array"),
        };
        let order_bits = match order {
            MemoryOrder::Relaxed => 0,
            MemoryOrder::Acquire => SEM_ACQUIRE,
            MemoryOrder::Release => SEM_RELEASE,
            // A load or store has one side: seq_cst is acquire for a load, release for a
            // store (SPIR-V forbids AcquireRelease on them).
            MemoryOrder::AcqRel | MemoryOrder::SeqCst => {
                if value.is_some() {
                    SEM_RELEASE
                } else {
                    SEM_ACQUIRE
                }
            }
        };
        let sem_bits = if order_bits == 0 || self.caps.barrier_suspends {
            0
        } else {
            order_bits | storage_bits
        };
        let scope_c = self.cu32(scope);
        let sem = self.cu32(sem_bits);
        let t = self.scalar_ty(s)?;
        match v {
            Some(v) => {
                let raw = if s.is_float() {
                    self.opi(Op::Bitcast, st, &[v])
                } else {
                    v
                };
                self.op_void(
                    Op::AtomicStore,
                    vec![
                        Operand::IdRef(ptr),
                        Operand::IdScope(scope_c),
                        Operand::IdMemorySemantics(sem),
                        Operand::IdRef(raw),
                    ],
                );
                Ok(None)
            }
            None => {
                let raw = self.op(
                    Op::AtomicLoad,
                    st,
                    vec![
                        Operand::IdRef(ptr),
                        Operand::IdScope(scope_c),
                        Operand::IdMemorySemantics(sem),
                    ],
                );
                Ok(Some(if s.is_float() {
                    self.opi(Op::Bitcast, t, &[raw])
                } else {
                    raw
                }))
            }
        }
    }
}
