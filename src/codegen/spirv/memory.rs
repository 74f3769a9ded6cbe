//! Memory access.

use super::*;

impl Emitter<'_> {
    pub(super) fn base_elem(&self, base: Base) -> SpirvResult<ElemType> {
        match base {
            Base::Param(p) => match self.buffers.get(p as usize) {
                Some(Some(b)) => Ok(b.elem),
                _ => refuse("an index into a parameter that is not a buffer"),
            },
            Base::Shared(h) => Ok(self.shared[h.index()].1),
            Base::Local(h) => match self.local_ty(h) {
                Type::Array { elem, .. } => Ok(elem),
                _ => refuse("an index into a local that is not an array"),
            },
        }
    }

    /// A pointer to scalar `k` of a buffer (a runtime array of storage scalars).
    pub(super) fn buffer_ptr(&mut self, p: u32, scalar_index: Word) -> (Word, Word, Scalar) {
        let (var, storage, scalar) = {
            let b = self.buffers[p as usize]
                .as_ref()
                .expect("a buffer parameter");
            (b.var, b.storage, b.scalar)
        };
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, storage));
        let z = self.cu32(0);
        let ptr = self.opi(Op::AccessChain, pt, &[var, z, scalar_index]);
        (ptr, storage, scalar)
    }

    /// Storage bits → value of scalar `s` (floats are stored as unsigned integers, `bool` as
    /// a byte in buffers).
    pub(super) fn stored_to_value(
        &mut self,
        v: Word,
        stored: Scalar,
        s: Scalar,
        lanes: u8,
    ) -> SpirvResult<Word> {
        if stored == s {
            return Ok(v);
        }
        let t = self.vec_ty(s, lanes)?;
        if lanes > 4 {
            let mut ls = Vec::new();
            for k in 0..lanes {
                let x = self.lane_of_raw(v, stored, k);
                ls.push(self.stored_to_value(x, stored, s, 1)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        if s == Scalar::Bool {
            let u = if lanes == 1 {
                self.u32t()
            } else {
                let u = self.u32t();
                self.tk(TyKey::Vec(u, lanes as u32))
            };
            let w = self.opi(Op::UConvert, u, &[v]);
            let z = self.konst(u, 0);
            return Ok(self.opi(Op::INotEqual, t, &[w, z]));
        }
        Ok(self.opi(Op::Bitcast, t, &[v]))
    }

    pub(super) fn value_to_stored(
        &mut self,
        v: Word,
        s: Scalar,
        stored: Scalar,
        stored_ty: Word,
    ) -> Word {
        if stored == s {
            return v;
        }
        if let Some(&(lane_ty, n)) = self.wide.get(&stored_ty) {
            let ls: Vec<Word> = (0..n)
                .map(|k| {
                    let x = self.lane_of_raw(v, s, k);
                    self.value_to_stored(x, s, stored, lane_ty)
                })
                .collect();
            return self.opi(Op::CompositeConstruct, stored_ty, &ls);
        }
        if s == Scalar::Bool {
            let u = self.u32t();
            let one = self.konst(u, 1);
            let zero = self.konst(u, 0);
            let w = self.opi(Op::Select, u, &[v, one, zero]);
            return self.opi(Op::UConvert, stored_ty, &[w]);
        }
        self.opi(Op::Bitcast, stored_ty, &[v])
    }

    /// Lane `k` of a wide value of scalar `s` (its type already made).
    pub(super) fn lane_of_raw(&mut self, v: Word, s: Scalar, k: u8) -> Word {
        let st = self.scalar_ty_raw(s);
        self.op(
            Op::CompositeExtract,
            st,
            vec![Operand::IdRef(v), Operand::LiteralBit32(k as u32)],
        )
    }

    /// `min(index, len - 1)` where the device runs in the host ([`Caps::clamp_indices`]),
    /// `len` at least 1; otherwise `index`.
    pub(super) fn clamped(&mut self, index: Word, len: Word) -> Word {
        if !self.caps.clamp_indices {
            return index;
        }
        let u = self.u32t();
        let one = self.cu32(1);
        let last = self.opi(Op::ISub, u, &[len, one]);
        self.ext_inst(u, glsl::UMIN, &[index, last])
    }

    pub(super) fn elem_ptr_other(
        &mut self,
        base: Base,
        index: Word,
    ) -> SpirvResult<(Word, Word, ElemType)> {
        match base {
            Base::Shared(h) => {
                let len = self.shared_len[h.index()];
                let index = self.clamped(index, len);
                let (var, elem) = self.shared[h.index()];
                let (st, se) = self.shared_storage(elem)?;
                let pt = self.tk(TyKey::Ptr(StorageClass::Workgroup, st));
                Ok((self.opi(Op::AccessChain, pt, &[var, index]), st, se))
            }
            Base::Local(h) => {
                let index = match self.local_ty(h) {
                    Type::Array {
                        len: Len::Fixed(n), ..
                    } if self.caps.clamp_indices => {
                        let len = self.cu32(n.max(1));
                        self.clamped(index, len)
                    }
                    _ => index,
                };
                let var = self.local_var(h)?;
                let elem = self.base_elem(base)?;
                let et = self.elem_ty(elem)?;
                let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
                Ok((self.opi(Op::AccessChain, pt, &[var, index]), et, elem))
            }
            Base::Param(_) => unreachable!("buffers take buffer_ptr"),
        }
    }

    /// Element `index` of `base`, whose elements are `elem` (for `vload`, the scalar); in
    /// checked mode 0 where `index` is out of bounds (reported, `checked.rs`).
    pub(super) fn load_elem(
        &mut self,
        base: Base,
        elem: ElemType,
        index: Word,
    ) -> SpirvResult<Word> {
        if !self.checks.bounds {
            return self.load_elem_raw(base, elem, index);
        }
        let t = self.elem_ty(elem)?;
        self.checked_value(base, index, t, |em| em.load_elem_raw(base, elem, index))
    }

    pub(super) fn load_elem_raw(
        &mut self,
        base: Base,
        elem: ElemType,
        index: Word,
    ) -> SpirvResult<Word> {
        match base {
            Base::Param(p) => {
                let mut lanes = Vec::new();
                let u = self.u32t();
                let first = if elem.lanes == 1 {
                    index
                } else {
                    let n = self.cu32(elem.lanes as u32);
                    self.opi(Op::IMul, u, &[index, n])
                };
                let uniform = self.buffers[p as usize].as_ref().is_some_and(|b| b.uniform);
                for k in 0..elem.lanes {
                    let at = if k == 0 {
                        first
                    } else {
                        let kk = self.cu32(k as u32);
                        self.opi(Op::IAdd, u, &[first, kk])
                    };
                    if uniform {
                        lanes.push(self.constant_scalar(p, at, elem.scalar)?);
                        continue;
                    }
                    let (ptr, st, ss) = self.buffer_ptr(p, at);
                    let raw = self.load(st, ptr);
                    lanes.push(self.stored_to_value(raw, ss, elem.scalar, 1)?);
                }
                if elem.lanes == 1 {
                    Ok(lanes[0])
                } else {
                    let t = self.elem_ty(elem)?;
                    Ok(self.opi(Op::CompositeConstruct, t, &lanes))
                }
            }
            _ => {
                let (ptr, st, se) = self.elem_ptr_other(base, index)?;
                let raw = self.load(st, ptr);
                self.stored_to_value(raw, se.scalar, elem.scalar, elem.lanes)
            }
        }
    }

    /// Stores `value` at element `index` of `base`; in checked mode skipped where `index` is
    /// out of bounds (reported, `checked.rs`).
    pub(super) fn store_elem(
        &mut self,
        base: Base,
        elem: ElemType,
        index: Word,
        value: Word,
    ) -> SpirvResult<()> {
        self.checked_effect(base, index, |em| {
            em.store_elem_raw(base, elem, index, value)
        })
    }

    pub(super) fn store_elem_raw(
        &mut self,
        base: Base,
        elem: ElemType,
        index: Word,
        value: Word,
    ) -> SpirvResult<()> {
        match base {
            Base::Param(p) => {
                let u = self.u32t();
                let first = if elem.lanes == 1 {
                    index
                } else {
                    let n = self.cu32(elem.lanes as u32);
                    self.opi(Op::IMul, u, &[index, n])
                };
                for k in 0..elem.lanes {
                    let at = if k == 0 {
                        first
                    } else {
                        let kk = self.cu32(k as u32);
                        self.opi(Op::IAdd, u, &[first, kk])
                    };
                    let lane = if elem.lanes == 1 {
                        value
                    } else {
                        let st = self.scalar_ty(elem.scalar)?;
                        self.op(
                            Op::CompositeExtract,
                            st,
                            vec![Operand::IdRef(value), Operand::LiteralBit32(k as u32)],
                        )
                    };
                    let (ptr, st, ss) = self.buffer_ptr(p, at);
                    let w = self.value_to_stored(lane, elem.scalar, ss, st);
                    self.store(ptr, w);
                }
                Ok(())
            }
            _ => {
                let (ptr, st, se) = self.elem_ptr_other(base, index)?;
                let w = self.value_to_stored(value, elem.scalar, se.scalar, st);
                self.store(ptr, w);
                Ok(())
            }
        }
    }
}
