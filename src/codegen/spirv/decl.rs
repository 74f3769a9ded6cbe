//! Declarations: buffers, push constants, shared memory.

use super::*;

impl Emitter<'_> {
    pub(super) fn carrier(s: Scalar) -> Scalar {
        match s {
            Scalar::Bool | Scalar::U8 | Scalar::U16 => Scalar::U32,
            Scalar::I8 | Scalar::I16 => Scalar::I32,
            Scalar::F16 => Scalar::F32,
            s => s,
        }
    }

    /// The `Block` struct of one buffer parameter: a struct of its own for every buffer, never
    /// one shared by parameters of the same element type. NVIDIA's Vulkan driver (580.159 on
    /// an H200, issue 14) applies the `NonWritable` of the first variable declared with a
    /// struct type to every variable of that type: `(b: buf<f32>, y: buf<f32, rw>)` sharing
    /// one struct had `y`'s loads treated as invariant (hoisted out of an accumulating loop),
    /// so `y[i] += ...` kept only its last term. glslang and DXC never emit a read-only and a
    /// writable block of one type; a struct per buffer (read-only ones also decorated on
    /// their member, as glslang does) keeps every driver on the path it is tested on.
    pub(super) fn buffer_struct(&mut self, ss: Scalar, read_only: bool) -> SpirvResult<Word> {
        match ss.bits() {
            8 => {
                if !self.caps.storage8 {
                    return refuse("8-bit buffer elements (storageBuffer8BitAccess)");
                }
                self.cap(Capability::StorageBuffer8BitAccess);
                self.ext("SPV_KHR_8bit_storage");
            }
            16 => {
                if !self.caps.storage16 {
                    return refuse("16-bit buffer elements (storageBuffer16BitAccess)");
                }
                self.cap(Capability::StorageBuffer16BitAccess);
                self.ext("SPV_KHR_16bit_storage");
            }
            64 => {
                if !self.caps.int64 {
                    return refuse("64-bit buffer elements (shaderInt64)");
                }
                self.cap(Capability::Int64);
            }
            _ => {}
        }
        let st = self.scalar_ty_raw(ss);
        let rt = self.tk(TyKey::Runtime(st));
        if self.decorated.insert(rt) {
            self.b.decorate(
                rt,
                spirv::Decoration::ArrayStride,
                vec![Operand::LiteralBit32(ss.size())],
            );
        }
        // A fresh id: `type_struct` would hand back an identical struct already declared.
        let id = self.b.id();
        let s = self.b.type_struct_id(Some(id), vec![rt]);
        self.b.decorate(s, spirv::Decoration::Block, vec![]);
        self.b.member_decorate(
            s,
            0,
            spirv::Decoration::Offset,
            vec![Operand::LiteralBit32(0)],
        );
        if read_only {
            self.b
                .member_decorate(s, 0, spirv::Decoration::NonWritable, vec![]);
        }
        Ok(s)
    }

    pub(super) fn declare_params(&mut self, f: &Function) -> SpirvResult<()> {
        let mut binding = 0u32;
        let mut members: Vec<(Word, u32)> = Vec::new();
        let mut offset = 0u32;
        let mut push_member = vec![None; f.params.len()];
        let mut len_member = vec![None; f.params.len()];
        let mut slots = Vec::new();
        let mut add_member = |em: &mut Emitter, ty: Word, size: u32, align: u32| -> (u32, u32) {
            offset = offset.div_ceil(align) * align;
            let at = offset;
            offset += size;
            members.push((ty, at));
            let _ = em;
            (members.len() as u32 - 1, at)
        };
        for p in &f.params {
            match p.ty {
                Type::Buffer {
                    elem,
                    access: crate::ir::Access::Constant,
                } => {
                    let st = self.constant_block();
                    let ptr = self.tk(TyKey::Ptr(StorageClass::Uniform, st));
                    let var = self.b.variable(ptr, None, StorageClass::Uniform, None);
                    self.b.decorate(
                        var,
                        spirv::Decoration::DescriptorSet,
                        vec![Operand::LiteralBit32(0)],
                    );
                    self.b.decorate(
                        var,
                        spirv::Decoration::Binding,
                        vec![Operand::LiteralBit32(binding)],
                    );
                    let ss = Self::storage_scalar(elem.scalar);
                    let storage = self.scalar_ty_raw(ss);
                    self.buffers.push(Some(BufferVar {
                        var,
                        storage,
                        scalar: ss,
                        elem,
                        uniform: true,
                    }));
                    slots.push(ParamSlot::Buffer {
                        binding,
                        len_offset: 0,
                    });
                    binding += 1;
                }
                Type::Buffer { elem, access } => {
                    let ss = Self::storage_scalar(elem.scalar);
                    let read_only = access == crate::ir::Access::Read;
                    let st = self.buffer_struct(ss, read_only)?;
                    let storage = self.scalar_ty_raw(ss);
                    let ptr = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, st));
                    let var = self
                        .b
                        .variable(ptr, None, StorageClass::StorageBuffer, None);
                    self.b.decorate(
                        var,
                        spirv::Decoration::DescriptorSet,
                        vec![Operand::LiteralBit32(0)],
                    );
                    self.b.decorate(
                        var,
                        spirv::Decoration::Binding,
                        vec![Operand::LiteralBit32(binding)],
                    );
                    if read_only {
                        self.b.decorate(var, spirv::Decoration::NonWritable, vec![]);
                    }
                    self.buffers.push(Some(BufferVar {
                        var,
                        storage,
                        scalar: ss,
                        elem,
                        uniform: false,
                    }));
                    slots.push(ParamSlot::Buffer {
                        binding,
                        len_offset: 0,
                    });
                    binding += 1;
                }
                Type::Scalar(_) | Type::Vector(..) | Type::Tag(_) => {
                    self.buffers.push(None);
                    let (s, n) = match p.ty {
                        Type::Scalar(s) => (s, 1),
                        Type::Vector(s, n) => (s, n),
                        _ => (Scalar::U32, 1),
                    };
                    let c = Self::carrier(s);
                    if n > 4 {
                        // A wide vector travels as its lanes, one member each (consecutive,
                        // as the runtime writes them); `load_params` gathers them.
                        let st = self.scalar_ty(c)?;
                        let mut first = None;
                        for _ in 0..n {
                            let m = add_member(self, st, c.size(), c.size());
                            first.get_or_insert(m);
                        }
                        let (idx, at0) = first.expect("a wide vector has lanes");
                        push_member[slots.len()] = Some(idx);
                        slots.push(ParamSlot::Value {
                            offset: at0,
                            carrier: ElemType::vector(c, n),
                        });
                        continue;
                    }
                    let ty = self.vec_ty(c, n)?;
                    let size = c.size() * n as u32;
                    let align = c.size()
                        * if n == 1 {
                            1
                        } else if n == 2 {
                            2
                        } else {
                            4
                        };
                    let (idx, at) = add_member(self, ty, size, align);
                    push_member[slots.len()] = Some(idx);
                    slots.push(ParamSlot::Value {
                        offset: at,
                        carrier: ElemType::vector(c, n),
                    });
                }
                _ => return refuse(format!("a kernel parameter of type {:?}", p.ty)),
            }
        }
        let u = self.u32t();
        for (i, p) in f.params.iter().enumerate() {
            if matches!(p.ty, Type::Buffer { .. }) {
                let (idx, at) = add_member(self, u, 4, 4);
                len_member[i] = Some(idx);
                if let ParamSlot::Buffer { len_offset, .. } = &mut slots[i] {
                    *len_offset = at;
                }
            }
        }
        self.push_bytes = offset.div_ceil(4) * 4;
        if !members.is_empty() {
            let st = self
                .b
                .type_struct(members.iter().map(|m| m.0).collect::<Vec<_>>());
            self.b.decorate(st, spirv::Decoration::Block, vec![]);
            for (i, (_, at)) in members.iter().enumerate() {
                self.b.member_decorate(
                    st,
                    i as u32,
                    spirv::Decoration::Offset,
                    vec![Operand::LiteralBit32(*at)],
                );
            }
            let ptr = self.tk(TyKey::Ptr(StorageClass::PushConstant, st));
            self.push_var = self.b.variable(ptr, None, StorageClass::PushConstant, None);
            self.push_members = members.iter().map(|m| m.0).collect();
        }
        self.push_member = push_member;
        self.len_member = len_member;
        self.slots = slots;
        Ok(())
    }

    pub(super) fn shared_storage(&mut self, elem: ElemType) -> SpirvResult<(Word, ElemType)> {
        let s = match elem.scalar {
            Scalar::F32 => Scalar::U32,
            Scalar::F64 => Scalar::U64,
            s => s,
        };
        let e = ElemType::vector(s, elem.lanes);
        Ok((self.elem_ty(e)?, e))
    }

    pub(super) fn declare_shared(&mut self, f: &Function) -> SpirvResult<()> {
        for (_, d) in f.shared.iter() {
            let (et, _) = self.shared_storage(d.elem)?;
            let u = self.u32t();
            let len = match d.len {
                Some(Len::Fixed(n)) => self.konst(u, n.max(1) as u64),
                Some(Len::Const(_)) => {
                    return refuse("a template-sized shared array left uninstantiated")
                }
                None => {
                    let c = self.b.spec_constant_bit32(u, 1);
                    self.b.decorate(
                        c,
                        spirv::Decoration::SpecId,
                        vec![Operand::LiteralBit32(SPEC_SHARED_LEN)],
                    );
                    self.dyn_shared_elem = Some(d.elem.size());
                    c
                }
            };
            let at = self.tk(TyKey::Array(et, len));
            let ptr = self.tk(TyKey::Ptr(StorageClass::Workgroup, at));
            let var = self.b.variable(ptr, None, StorageClass::Workgroup, None);
            self.shared.push((var, d.elem));
            self.shared_len.push(len);
        }
        Ok(())
    }

    pub(super) fn push_load(&mut self, member: u32) -> Word {
        let ty = self.push_members[member as usize];
        let ptr = self.tk(TyKey::Ptr(StorageClass::PushConstant, ty));
        let c = self.cu32(member);
        let p = self.opi(Op::AccessChain, ptr, &[self.push_var, c]);
        self.load(ty, p)
    }

    /// The kernel's value parameters, loaded once in the entry block.
    pub(super) fn load_params(&mut self, f: &Function) -> SpirvResult<Vec<Word>> {
        let mut out = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            let Some(member) = self.push_member[i] else {
                out.push(0);
                continue;
            };
            let (s, n) = match p.ty {
                Type::Scalar(s) => (s, 1),
                Type::Vector(s, n) => (s, n),
                _ => (Scalar::U32, 1),
            };
            let c = Self::carrier(s);
            let v = if n > 4 {
                let lanes: Vec<Word> = (0..n as u32).map(|k| self.push_load(member + k)).collect();
                let t = self.vec_ty(c, n)?;
                self.opi(Op::CompositeConstruct, t, &lanes)
            } else {
                self.push_load(member)
            };
            let v = if c == s { v } else { self.cast(v, c, s, n)? };
            out.push(v);
        }
        Ok(out)
    }
}
