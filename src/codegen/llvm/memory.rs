//! Memory: pointers into buffers, shared and private arrays, vector accesses and their
//! alignment; the comparison, select and constant helpers over any value type.

use super::*;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    pub(super) fn base_info(&self, base: Base) -> LowerResult<(PointerValue<'ctx>, ElemType)> {
        match base {
            Base::Param(i) => match (self.params.get(i as usize), self.f.params.get(i as usize)) {
                (Some(ParamVal::Buffer { ptr, .. }), Some(p)) => match p.ty {
                    Type::Buffer { elem, .. } => Ok((*ptr, elem)),
                    _ => self.err(codes::INPUT, "an indexed parameter that is not a buffer"),
                },
                _ => self.err(codes::INPUT, "an indexed parameter that is not a buffer"),
            },
            Base::Shared(h) => match (
                self.shared.get(h.index()).copied().flatten(),
                self.f.shared.try_get(h),
            ) {
                (Some(p), Some(d)) => Ok((p, d.elem)),
                _ => self.err(codes::INPUT, "a shared array outside a kernel"),
            },
            Base::Local(l) => match self.f.locals.try_get(l).map(|x| x.ty) {
                Some(Type::Array { elem, .. }) => Ok((self.local_slot(l)?, elem)),
                _ => self.err(codes::INPUT, "an indexed local that is not an array"),
            },
        }
    }

    /// The address of scalar `scalar_index` of `base` (`index` is an `i32`, unsigned).
    pub(super) fn scalar_ptr(
        &self,
        base: Base,
        scalar_index: IntValue<'ctx>,
    ) -> LowerResult<PointerValue<'ctx>> {
        let (ptr, elem) = self.base_info(base)?;
        let i64t = self.cx.context.i64_type();
        let idx = self.b().build_int_z_extend(scalar_index, i64t, "")?;
        let ty = mem_scalar_type(self.cx, elem.scalar);
        // SAFETY: an in-bounds GEP over the base's scalar type; bounds are the program's
        // promise on a GPU (DESIGN.md, Decisions 8), and the index is 64-bit so it does not wrap.
        Ok(unsafe { self.b().build_gep(ty, ptr, &[idx], "")? })
    }

    /// The address of element `index` of `base`.
    pub(super) fn element_ptr(
        &mut self,
        base: Base,
        index: ExprId,
    ) -> LowerResult<(PointerValue<'ctx>, ElemType)> {
        let (_, elem) = self.base_info(base)?;
        let i = self.value(index)?.into_int_value();
        let i64t = self.cx.context.i64_type();
        let mut idx = self.b().build_int_z_extend(i, i64t, "")?;
        if elem.lanes > 1 {
            idx = self
                .b()
                .build_int_mul(idx, i64t.const_int(elem.lanes as u64, false), "")?;
        }
        let (ptr, _) = self.base_info(base)?;
        let ty = mem_scalar_type(self.cx, elem.scalar);
        // SAFETY: as in `scalar_ptr`.
        let p = unsafe { self.b().build_gep(ty, ptr, &[idx], "")? };
        if let Base::Param(pi) = base {
            let a = natural_align(elem.size());
            if let Some(x) = self.base_align.get_mut(pi as usize) {
                *x = (*x).max(a);
            }
        }
        // Checked mode: out of bounds, the scratch area instead (`checked.rs`).
        let (p, ok) = self.checked_ptr(base, p, i, 1)?;
        self.last_ok = ok;
        Ok((p, elem))
    }

    /// The address of scalar `index` of a scalar `base` (vload/vstore of `lanes`), with the
    /// `align` statement's trap under ub-traps and the bounds test in checked mode
    /// (`checked.rs`; the test's outcome in `last_ok`).
    pub(super) fn vector_ptr(
        &mut self,
        base: Base,
        index: ExprId,
        lanes: u32,
        stated: Option<u8>,
    ) -> LowerResult<(PointerValue<'ctx>, ElemType)> {
        let (_, elem) = self.base_info(base)?;
        let i = self.value(index)?.into_int_value();
        let i = self.align_trap(index, i, elem.scalar, stated)?;
        let p = self.scalar_ptr(base, i)?;
        let (p, ok) = self.checked_ptr(base, p, i, lanes)?;
        self.last_ok = ok;
        Ok((p, elem))
    }

    /// The alignment of a `lanes`-wide access at scalar `index`: the larger of what the
    /// index's arithmetic proves (assuming a 16-byte aligned base, which the launch checks)
    /// and the stated `align`, capped at the access width.
    pub(super) fn vector_align(
        &mut self,
        base: Base,
        index: ExprId,
        scalar: Scalar,
        lanes: u32,
        stated: Option<u8>,
    ) -> u32 {
        let width = natural_align(scalar.size() * lanes.next_power_of_two()).max(1);
        let proven =
            (known_multiple(self.f, index, self.args, 0) * scalar.size() as u64).min(16) as u32;
        let a = proven
            .max(stated.unwrap_or(1) as u32)
            .max(scalar.size())
            .min(width)
            .min(16);
        if let Base::Param(pi) = base {
            if let Some(x) = self.base_align.get_mut(pi as usize) {
                *x = (*x).max(a);
            }
        }
        a
    }

    /// A value as stored in memory (`bool` lanes as `i8`).
    pub(super) fn value_to_mem(
        &self,
        v: BasicValueEnum<'ctx>,
        s: Scalar,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if s != Scalar::Bool {
            return Ok(v);
        }
        let t = match v {
            BasicValueEnum::VectorValue(vv) => {
                vector_of(self.cx.context.i8_type().into(), vv.get_type().get_size())
            }
            _ => self.cx.context.i8_type().into(),
        };
        Ok(self
            .b()
            .build_cast(inkwell::values::InstructionOpcode::ZExt, v, t, "")?)
    }

    /// A value loaded from memory as a value (`i8` lanes back to `bool`).
    pub(super) fn mem_to_value(
        &self,
        v: BasicValueEnum<'ctx>,
        s: Scalar,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if s != Scalar::Bool {
            return Ok(v);
        }
        let z = v.get_type().const_zero();
        self.icmp(IntPredicate::NE, v, z)
    }

    /// Marks `load` (a load from `base`) `!invariant.load` where `base` is a constant buffer
    /// (`buf<_, const>`): nothing writes it during the launch, so NVPTX selects
    /// `ld.global.nc` and AMDGPU may keep it in scalar registers.
    pub(super) fn mark_constant(&self, base: Base, load: BasicValueEnum<'ctx>) -> LowerResult<()> {
        let Base::Param(i) = base else { return Ok(()) };
        let constant = matches!(
            self.f.params.get(i as usize).map(|p| p.ty),
            Some(Type::Buffer {
                access: ir::Access::Constant,
                ..
            })
        );
        if !constant {
            return Ok(());
        }
        if let Some(inst) = load.as_instruction_value() {
            let ctx = self.cx.context;
            let kind = ctx.get_kind_id("invariant.load");
            inst.set_metadata(ctx.metadata_node(&[]), kind)
                .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
        }
        Ok(())
    }

    pub(super) fn load_elem(
        &self,
        ptr: PointerValue<'ctx>,
        elem: ElemType,
        align: u32,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        self.load_elem_of(None, ptr, elem, align)
    }

    /// [`Self::load_elem`] of an element of `base` (marked invariant where it is constant).
    pub(super) fn load_elem_of(
        &self,
        base: Option<Base>,
        ptr: PointerValue<'ctx>,
        elem: ElemType,
        align: u32,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let st = mem_scalar_type(self.cx, elem.scalar);
        let ty = if elem.lanes > 1 {
            vector_of(st, elem.lanes as u32)
        } else {
            st
        };
        let v = self.b().build_load(ty, ptr, "")?;
        if let Some(i) = v.as_instruction_value() {
            i.set_alignment(align)
                .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
        }
        if let Some(base) = base {
            self.mark_constant(base, v)?;
        }
        self.mem_to_value(v, elem.scalar)
    }

    pub(super) fn icmp(
        &self,
        p: IntPredicate,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        // SAFETY: both operands are integer (or integer vector) values of one type, built
        // by this walk; LLVMBuildICmp returns a valid value of the matching i1 type.
        unsafe {
            let r = llvm_sys::core::LLVMBuildICmp(
                self.b().as_mut_ptr(),
                p.into(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    pub(super) fn fcmp(
        &self,
        p: inkwell::FloatPredicate,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        // SAFETY: as in `icmp`, for float operands.
        unsafe {
            let r = llvm_sys::core::LLVMBuildFCmp(
                self.b().as_mut_ptr(),
                p.into(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    pub(super) fn select(
        &self,
        c: BasicValueEnum<'ctx>,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        // SAFETY: `c` is i1 or a vector of i1 matching `a` and `b`, which share a type.
        unsafe {
            let r = llvm_sys::core::LLVMBuildSelect(
                self.b().as_mut_ptr(),
                c.as_value_ref(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    pub(super) fn binop(
        &self,
        op: inkwell::values::InstructionOpcode,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        Ok(self.b().build_binop(op, a, b, "")?)
    }

    /// A constant of `ty` (scalar or vector) holding `bits` (integers) in every lane.
    pub(super) fn const_int(
        &self,
        ty: BasicTypeEnum<'ctx>,
        bits: u64,
        signed: bool,
    ) -> BasicValueEnum<'ctx> {
        match ty {
            BasicTypeEnum::IntType(t) => t.const_int(bits, signed).into(),
            BasicTypeEnum::VectorType(v) => {
                let e = v.get_element_type().into_int_type().const_int(bits, signed);
                let lanes: Vec<IntValue> = (0..v.get_size()).map(|_| e).collect();
                inkwell::types::VectorType::const_vector(&lanes).into()
            }
            other => other.const_zero(),
        }
    }

    pub(super) fn const_float(&self, ty: BasicTypeEnum<'ctx>, x: f64) -> BasicValueEnum<'ctx> {
        match ty {
            BasicTypeEnum::FloatType(t) => t.const_float(x).into(),
            BasicTypeEnum::VectorType(v) => {
                let e = v.get_element_type().into_float_type().const_float(x);
                let lanes: Vec<_> = (0..v.get_size()).map(|_| e).collect();
                inkwell::types::VectorType::const_vector(&lanes).into()
            }
            other => other.const_zero(),
        }
    }
}
