//! Expressions: the dispatcher, builtins, operators, casts, tag dispatch and math.

use super::*;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    pub(super) fn value(&mut self, e: ExprId) -> LowerResult<BasicValueEnum<'ctx>> {
        match self.expr(e)? {
            Some(v) => Ok(v),
            None => self.err(codes::INPUT, "a call that returns nothing used as a value"),
        }
    }

    pub(super) fn expr(&mut self, e: ExprId) -> LowerResult<Option<BasicValueEnum<'ctx>>> {
        let Some(x) = self.f.exprs.try_get(e) else {
            return self.err(codes::INPUT, "a dangling expression handle");
        };
        let span = self.f.expr_span(e);
        if span.is_known() {
            self.span = span;
        }
        let ctx = self.cx.context;
        let v: BasicValueEnum = match x {
            Expr::Literal(l) => match *l {
                Literal::Bool(b) => ctx.bool_type().const_int(b as u64, false).into(),
                Literal::Int { bits, ty } => scalar_type(self.cx, ty)
                    .into_int_type()
                    .const_int(bits, false)
                    .into(),
                Literal::Float { value, ty } => scalar_type(self.cx, ty)
                    .into_float_type()
                    .const_float(value)
                    .into(),
            },
            Expr::Param(i) => match self.params.get(*i as usize) {
                Some(ParamVal::Value(v)) => *v,
                _ => return self.err(codes::INPUT, "a buffer parameter used as a value"),
            },
            Expr::Local(l) => {
                let slot = self.local_slot(*l)?;
                let t = self.vt(self.f.locals[*l].ty)?;
                self.b().build_load(t, slot, "")?
            }
            Expr::TemplateParam(i) => match self.args.get(*i as usize) {
                Some(v) => self.cx.i32(*v as u64).into(),
                None => return self.err(codes::INPUT, "a template parameter without an argument"),
            },
            Expr::Builtin(b) => self.builtin(*b)?.into(),
            Expr::Unary { op, arg } => {
                let a = self.value(*arg)?;
                let ty = self.ty(*arg)?;
                let s = ty.scalar().unwrap_or(Scalar::Bool);
                match op {
                    UnaryOp::Neg if s.is_float() => {
                        // SAFETY: `a` is a float or float vector value.
                        unsafe {
                            BasicValueEnum::new(llvm_sys::core::LLVMBuildFNeg(
                                self.b().as_mut_ptr(),
                                a.as_value_ref(),
                                c"".as_ptr(),
                            ))
                        }
                    }
                    UnaryOp::Neg => {
                        let z = a.get_type().const_zero();
                        self.binop(inkwell::values::InstructionOpcode::Sub, z, a)?
                    }
                    UnaryOp::Not => {
                        let ones = self.const_int(a.get_type(), u64::MAX, true);
                        self.binop(inkwell::values::InstructionOpcode::Xor, a, ones)?
                    }
                }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs)?,
            Expr::Cast { to, arg } => {
                let a = self.value(*arg)?;
                let from = self.ty(*arg)?;
                self.cast(a, from, *to)?
            }
            Expr::Bitcast { to, arg } => {
                let a = self.value(*arg)?;
                let t = self.vt(*to)?;
                self.b().build_bit_cast(a, t, "")?
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.value(*cond)?;
                let a = self.value(*accept)?;
                let r = self.value(*reject)?;
                self.select(c, a, r)?
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => self.if_else(*cond, *accept, *reject)?,
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => {
                let ty = vector_of(scalar_type(self.cx, *scalar), *lanes as u32);
                let mut v = ty.into_vector_type().get_undef();
                let mut k = 0u64;
                for p in parts.clone() {
                    let pv = self.value(p)?;
                    match pv {
                        BasicValueEnum::VectorValue(pvv) => {
                            for j in 0..pvv.get_type().get_size() {
                                let x = self.b().build_extract_element(
                                    pvv,
                                    self.cx.i32(j as u64),
                                    "",
                                )?;
                                v = self.b().build_insert_element(v, x, self.cx.i32(k), "")?;
                                k += 1;
                            }
                        }
                        s => {
                            v = self.b().build_insert_element(v, s, self.cx.i32(k), "")?;
                            k += 1;
                        }
                    }
                }
                v.into()
            }
            Expr::Splat { lanes, value } => {
                let s = self.value(*value)?;
                self.splat(s, *lanes as u32)?
            }
            Expr::Extract { vector, lane } => {
                let v = self.value(*vector)?.into_vector_value();
                self.b()
                    .build_extract_element(v, self.cx.i32(*lane as u64), "")?
            }
            Expr::Swizzle { vector, lanes } => {
                let v = self.value(*vector)?.into_vector_value();
                let mask: Vec<IntValue> = lanes.iter().map(|l| self.cx.i32(*l as u64)).collect();
                let mask = inkwell::types::VectorType::const_vector(&mask);
                let undef = v.get_type().get_undef();
                // SAFETY: a shuffle of one vector with constant in-range lane indices.
                unsafe {
                    BasicValueEnum::new(llvm_sys::core::LLVMBuildShuffleVector(
                        self.b().as_mut_ptr(),
                        v.as_value_ref(),
                        undef.as_value_ref(),
                        mask.as_value_ref(),
                        c"".as_ptr(),
                    ))
                }
            }
            Expr::Index { base, index } => {
                let (ptr, elem) = self.element_ptr(*base, *index)?;
                let ok = self.last_ok.take();
                let align = natural_align(elem.size()).max(natural_align(elem.scalar.size()));
                let v = self.load_elem_of(Some(*base), ptr, elem, align)?;
                self.zero_unless(v, ok)?
            }
            // The verifier inlines every call that passes memory.
            Expr::Ref(_) => {
                return self.err(
                    codes::INPUT,
                    "a buffer or array by reference outside an inlined helper call",
                )
            }
            Expr::Len(i) => match self.params.get(*i as usize) {
                Some(ParamVal::Buffer { len, .. }) => (*len).into(),
                _ => return self.err(codes::INPUT, "`len` of a parameter that is not a buffer"),
            },
            Expr::Call { function, args } => {
                let Some(&callee) = self.helpers.get(function) else {
                    return self.err(
                        codes::INPUT,
                        "a call to a function that is not a device helper",
                    );
                };
                let mut vals: Vec<BasicMetadataValueEnum> = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?.into());
                }
                if self.passes_lanes(*function) {
                    vals.push(self.lanes()?.into());
                }
                let call = self.b().build_call(callee, &vals, "")?;
                return Ok(call.try_as_basic_value().basic());
            }
            Expr::Tag { index, .. } => self.cx.i32(*index as u64).into(),
            Expr::Dispatch { tag, args } => return self.dispatch(*tag, args.clone(), e),
            Expr::Math { fun, args } => {
                let mut vals = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?);
                }
                let ty = self.ty(e)?;
                self.math(*fun, ty, &vals)?
            }
            Expr::AtomicLoad { order, place } => {
                match self.atomic_access(*order, &place.clone(), None)? {
                    Some(v) => v,
                    None => return self.err(codes::INPUT, "an atomic load without a value"),
                }
            }
            Expr::AtomicStore {
                order,
                place,
                value,
            } => {
                let (order, place, value) = (*order, *place, *value);
                self.atomic_access(order, &place, Some(value))?;
                return Ok(None);
            }
            Expr::Bits { op, args } => {
                let mut vals = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?);
                }
                let s = self.ty(e)?.scalar().unwrap_or(Scalar::Bool);
                self.bits(*op, s, &vals)?
            }
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => self.atomic(*op, *order, place, *value, *compare, e)?,
            Expr::Wave { op, args, width } => {
                let mut vals = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?);
                }
                let ty = match args.first() {
                    Some(a) => Some(self.ty(*a)?),
                    None => None,
                };
                let w = self.t.wave_width();
                match width.map(|t| t.min(w)) {
                    Some(t) if t < w => self.wave_tile(*op, ty, &vals, t)?,
                    _ => self.wave(*op, ty, &vals)?,
                }
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let (ptr, elem) = self.vector_ptr(*base, *index, *lanes as u32, *align)?;
                let ok = self.last_ok.take();
                let a = self.vector_align(*base, *index, elem.scalar, *lanes as u32, *align);
                let st = mem_scalar_type(self.cx, elem.scalar);
                let v = self.b().build_load(vector_of(st, *lanes as u32), ptr, "")?;
                if let Some(i) = v.as_instruction_value() {
                    i.set_alignment(a)
                        .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
                }
                self.mark_constant(*base, v)?;
                let v = self.zero_unless(v, ok)?;
                self.mem_to_value(v, elem.scalar)?
            }
            Expr::MatrixFill {
                role,
                scalar,
                rows,
                cols,
                value,
            } => {
                let v = self.value(*value)?;
                use super::matrix::Verb;
                self.note_matrix(Verb::Fill, *role, *scalar, *rows, *cols, 0, *scalar);
                if self.cx.software_matrices.get() {
                    self.sw_fill(*scalar, *rows, *cols, v)?
                } else {
                    self.t
                        .matrix_fill(self.cx, *role, *scalar, *rows, *cols, v)?
                }
            }
            Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
            } => {
                let off = self.value(*offset)?.into_int_value();
                let st = self.value(*stride)?.into_int_value();
                if matches!(base, Base::Local(_)) {
                    return self.err(codes::UNSUPPORTED, "matrix_load from a private array");
                }
                use super::matrix::Verb;
                self.note_matrix(Verb::Load, *role, *scalar, *rows, *cols, 0, *scalar);
                if self.cx.software_matrices.get() {
                    self.sw_load(*scalar, *rows, *cols, *base, off, st)?
                } else {
                    let ptr = self.scalar_ptr(*base, off)?;
                    self.t
                        .matrix_load(self.cx, *role, *scalar, *rows, *cols, ptr, st)?
                }
            }
            Expr::MatrixMma { a, b, c } => {
                let (
                    Type::Matrix {
                        scalar: ab,
                        rows,
                        cols: inner,
                        ..
                    },
                    Type::Matrix {
                        scalar: acc, cols, ..
                    },
                ) = (self.ty(*a)?, self.ty(*c)?)
                else {
                    return self.err(codes::INPUT, "matrix_mma of non-fragments");
                };
                let av = self.value(*a)?;
                let bv = self.value(*b)?;
                let cv = self.value(*c)?;
                use super::matrix::Verb;
                self.note_matrix(Verb::Mma, ir::MatrixRole::Acc, ab, rows, cols, inner, acc);
                if self.cx.software_matrices.get() {
                    self.sw_mma((ab, rows, inner), (acc, cols), av, bv, cv)?
                } else {
                    self.t.matrix_mma(self.cx, ab, acc, av, bv, cv)?
                }
            }
        };
        Ok(Some(v))
    }

    pub(super) fn splat(
        &self,
        s: BasicValueEnum<'ctx>,
        lanes: u32,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let vt = vector_of(s.get_type(), lanes).into_vector_type();
        let mut v = vt.get_undef();
        for k in 0..lanes {
            v = self
                .b()
                .build_insert_element(v, s, self.cx.i32(k as u64), "")?;
        }
        Ok(v.into())
    }

    pub(super) fn builtin(&self, b: Builtin) -> LowerResult<IntValue<'ctx>> {
        let t = self.t;
        Ok(match b {
            Builtin::GlobalId(d) => {
                let g = t.coord(self.cx, Coord::GroupId(d.index()))?;
                let n = t.coord(self.cx, Coord::GroupSize(d.index()))?;
                let l = t.coord(self.cx, Coord::LocalId(d.index()))?;
                let m = self.b().build_int_mul(g, n, "")?;
                self.b().build_int_add(m, l, "")?
            }
            Builtin::LocalId(d) => t.coord(self.cx, Coord::LocalId(d.index()))?,
            Builtin::GroupId(d) => t.coord(self.cx, Coord::GroupId(d.index()))?,
            Builtin::GroupSize(d) => t.coord(self.cx, Coord::GroupSize(d.index()))?,
            Builtin::NumGroups(d) => t.coord(self.cx, Coord::NumGroups(d.index()))?,
            Builtin::WaveWidth => self.cx.i32(t.wave_width() as u64),
            Builtin::LaneId => t.coord(self.cx, Coord::LaneId)?,
        })
    }

    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        lhs: ExprId,
        rhs: ExprId,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            return self.short_circuit(op == BinaryOp::LogicalAnd, lhs, rhs);
        }
        let ty = self.ty(lhs)?;
        let a = self.value(lhs)?;
        let b = self.value(rhs)?;
        let s = ty.scalar().unwrap_or(Scalar::Bool);
        if op.is_comparison() {
            if s.is_float() {
                use inkwell::FloatPredicate as F;
                let p = match op {
                    BinaryOp::Eq => F::OEQ,
                    BinaryOp::Ne => F::UNE,
                    BinaryOp::Lt => F::OLT,
                    BinaryOp::Le => F::OLE,
                    BinaryOp::Gt => F::OGT,
                    _ => F::OGE,
                };
                return self.fcmp(p, a, b);
            }
            return self.icmp(int_pred(op, s.is_signed()), a, b);
        }
        let f = s.is_float();
        Ok(match op {
            BinaryOp::Add => self.binop(if f { O::FAdd } else { O::Add }, a, b)?,
            BinaryOp::Sub => self.binop(if f { O::FSub } else { O::Sub }, a, b)?,
            BinaryOp::Mul => self.binop(if f { O::FMul } else { O::Mul }, a, b)?,
            BinaryOp::Div if f => self.binop(O::FDiv, a, b)?,
            BinaryOp::Rem if f => self.fmod(s, a, b)?,
            BinaryOp::Div | BinaryOp::Rem => self.int_div(op == BinaryOp::Div, s, a, b)?,
            BinaryOp::BitAnd => self.binop(O::And, a, b)?,
            BinaryOp::BitOr => self.binop(O::Or, a, b)?,
            BinaryOp::BitXor => self.binop(O::Xor, a, b)?,
            BinaryOp::Shl | BinaryOp::Shr => {
                // The amount is taken modulo the width (docs/semantics.md).
                let mask = self.const_int(b.get_type(), (s.bits() - 1) as u64, false);
                let amt = self.binop(O::And, b, mask)?;
                let amt = if amt.get_type() != a.get_type() {
                    let opc = if b.get_type().into_int_type_or_vector_bits() > s.bits() {
                        O::Trunc
                    } else {
                        O::ZExt
                    };
                    self.b().build_cast(opc, amt, a.get_type(), "")?
                } else {
                    amt
                };
                let opc = match (op, s.is_signed()) {
                    (BinaryOp::Shl, _) => O::Shl,
                    (_, true) => O::AShr,
                    _ => O::LShr,
                };
                self.binop(opc, a, amt)?
            }
            _ => return self.err(codes::INPUT, "an operator on the wrong types"),
        })
    }

    /// Integer division and remainder that never trap. `MIN / -1` wraps to `MIN` and
    /// `MIN % -1` is 0 (docs/semantics.md); division by zero is UB there, which the
    /// interpreter reports, and here gives `x / 0 = 0` and `x % 0 = x` rather than a fault.
    pub(super) fn int_div(
        &self,
        div: bool,
        s: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let t = a.get_type();
        let zero = t.const_zero();
        let one = self.const_int(t, 1, false);
        let is_zero = self.icmp(IntPredicate::EQ, b, zero)?;
        let mut bad = is_zero;
        if s.is_signed() {
            // MIN / -1 overflows: divide by 1 instead (MIN / 1 = MIN = the wrapped quotient;
            // MIN % 1 = 0 = the remainder).
            let min = self.const_int(t, 1u64 << (s.bits() - 1), false);
            let m1 = self.const_int(t, u64::MAX, true);
            let a_min = self.icmp(IntPredicate::EQ, a, min)?;
            let b_m1 = self.icmp(IntPredicate::EQ, b, m1)?;
            let ovf = self.binop(O::And, a_min, b_m1)?;
            bad = self.binop(O::Or, is_zero, ovf)?;
        }
        let safe_b = self.select(bad, one, b)?;
        let q = match (div, s.is_signed()) {
            (true, true) => self.binop(O::SDiv, a, safe_b)?,
            (true, false) => self.binop(O::UDiv, a, safe_b)?,
            (false, true) => self.binop(O::SRem, a, safe_b)?,
            (false, false) => self.binop(O::URem, a, safe_b)?,
        };
        // By zero: quotient 0, remainder the dividend.
        let by_zero = if div { zero } else { a };
        self.select(is_zero, by_zero, q)
    }

    /// `if cond { accept } else { reject }`: a branch and a phi, only the taken arm
    /// evaluated; lanes reconverge at the merge like an `if` statement's.
    pub(super) fn if_else(
        &mut self,
        cond: ExprId,
        accept: ExprId,
        reject: ExprId,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let c = self.value(cond)?.into_int_value();
        let sync = self.converge_begin()?;
        let (then_lanes, else_lanes) = self.split_lanes(sync, c)?;
        let then_bb = ctx.append_basic_block(self.llfn, "ifx.then");
        let else_bb = ctx.append_basic_block(self.llfn, "ifx.else");
        let merge = ctx.append_basic_block(self.llfn, "ifx.end");
        self.b().build_conditional_branch(c, then_bb, else_bb)?;
        self.enter_sync(sync, merge);
        self.b().position_at_end(then_bb);
        self.set_lanes(then_lanes)?;
        let a = self.value(accept);
        let a_end = self.b().get_insert_block().expect("positioned");
        if a.is_ok() {
            self.b().build_unconditional_branch(merge)?;
        }
        self.b().position_at_end(else_bb);
        self.set_lanes(else_lanes)?;
        let r = self.value(reject);
        let r_end = self.b().get_insert_block().expect("positioned");
        if r.is_ok() {
            self.b().build_unconditional_branch(merge)?;
        }
        self.leave_sync(sync);
        let (a, r) = (a?, r?);
        self.b().position_at_end(merge);
        let phi = self.b().build_phi(a.get_type(), "")?;
        phi.add_incoming(&[(&a, a_end), (&r, r_end)]);
        let v = phi.as_basic_value();
        self.converge_end(sync, false)?;
        Ok(v)
    }

    pub(super) fn short_circuit(
        &mut self,
        and: bool,
        lhs: ExprId,
        rhs: ExprId,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let a = self.value(lhs)?.into_int_value();
        let lhs_bb = self.b().get_insert_block().expect("positioned");
        let rhs_bb = ctx.append_basic_block(self.llfn, if and { "and.rhs" } else { "or.rhs" });
        let merge = ctx.append_basic_block(self.llfn, "sc.end");
        // The lanes that evaluate the right-hand side wait for the others at the merge, as
        // at the end of an IR `if`.
        let sync = self.converge_begin()?;
        let (when_a, unless_a) = self.split_lanes(sync, a)?;
        if and {
            self.b().build_conditional_branch(a, rhs_bb, merge)?;
        } else {
            self.b().build_conditional_branch(a, merge, rhs_bb)?;
        }
        self.b().position_at_end(rhs_bb);
        self.set_lanes(if and { when_a } else { unless_a })?;
        let b = self.value(rhs)?.into_int_value();
        let rhs_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(merge)?;
        self.b().position_at_end(merge);
        let phi = self.b().build_phi(ctx.bool_type(), "")?;
        let short = ctx.bool_type().const_int(!and as u64, false);
        phi.add_incoming(&[(&short, lhs_bb), (&b, rhs_end)]);
        self.converge_end(sync, false)?;
        Ok(phi.as_basic_value())
    }

    /// A value conversion (docs/semantics.md): integers truncate or extend by the source's
    /// signedness, floats → integers saturate with NaN → 0, `bool` is 0 or 1, a number → `bool`
    /// is `!= 0`.
    pub(super) fn cast(
        &self,
        a: BasicValueEnum<'ctx>,
        from: Type,
        to: Scalar,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let Some(fs) = from.scalar() else {
            return self.err(codes::INPUT, "a cast of a non-number");
        };
        let lanes = from.lanes().unwrap_or(1) as u32;
        let st = scalar_type(self.cx, to);
        let tt = if lanes > 1 { vector_of(st, lanes) } else { st };
        if fs == to {
            return Ok(a);
        }
        Ok(match (fs, to) {
            (_, Scalar::Bool) => {
                let z = a.get_type().const_zero();
                if fs.is_float() {
                    self.fcmp(inkwell::FloatPredicate::UNE, a, z)?
                } else {
                    self.icmp(IntPredicate::NE, a, z)?
                }
            }
            (Scalar::Bool, t) if t.is_float() => self.b().build_cast(O::UIToFP, a, tt, "")?,
            (Scalar::Bool, _) => self.b().build_cast(O::ZExt, a, tt, "")?,
            (f, t) if f.is_int() && t.is_int() => {
                let op = if t.bits() < f.bits() {
                    O::Trunc
                } else if t.bits() == f.bits() {
                    return Ok(a);
                } else if f.is_signed() {
                    O::SExt
                } else {
                    O::ZExt
                };
                self.b().build_cast(op, a, tt, "")?
            }
            (f, t) if f.is_int() && t.is_float() => {
                self.b()
                    .build_cast(if f.is_signed() { O::SIToFP } else { O::UIToFP }, a, tt, "")?
            }
            (f, t) if f.is_float() && t.is_int() => {
                let name = if t.is_signed() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                self.cx.call_value(name, &[tt, a.get_type()], &[a])?
            }
            (f, t) => {
                let op = if t.bits() > f.bits() {
                    O::FPExt
                } else {
                    O::FPTrunc
                };
                self.b().build_cast(op, a, tt, "")?
            }
        })
    }

    pub(super) fn dispatch(
        &mut self,
        tag: ExprId,
        args: Vec<ExprId>,
        e: ExprId,
    ) -> LowerResult<Option<BasicValueEnum<'ctx>>> {
        let Type::Tag(set) = self.ty(tag)? else {
            return self.err(codes::INPUT, "a dispatch through a non-tag");
        };
        let t = self.value(tag)?.into_int_value();
        let mut vals: Vec<BasicMetadataValueEnum> = Vec::new();
        for a in args {
            vals.push(self.value(a)?.into());
        }
        let members = match self.module.tag_sets.try_get(set) {
            Some(ts) => ts.members.clone(),
            None => return self.err(codes::INPUT, "a dangling tag set"),
        };
        let ret = self.types.get(e.index()).copied().flatten();
        let slot = match ret {
            Some(rt) => {
                let ty = self.vt(rt)?;
                let s = self.entry_alloca(ty, "dispatch")?;
                self.b().build_store(s, ty.const_zero())?;
                Some((s, ty))
            }
            None => None,
        };
        let ctx = self.cx.context;
        let end = ctx.append_basic_block(self.llfn, "dispatch.end");
        let mut cases = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let Some(&callee) = self.helpers.get(m) else {
                return self.err(codes::INPUT, "a tag member that is not a device helper");
            };
            let bb = ctx.append_basic_block(self.llfn, "dispatch.case");
            cases.push((self.cx.i32(i as u64), bb, callee));
        }
        let switch_cases: Vec<_> = cases.iter().map(|(v, bb, _)| (*v, *bb)).collect();
        // Lanes calling different members wait for each other at `end` when the function
        // uses wave verbs, as at the end of an IR `if`: without it a wave scan after the
        // dispatch saw each member's lanes alone on the H200 (fuzz case 961, a partial sum).
        let sync = self.converge_begin()?;
        // Each member is called with the lanes that picked it (a vote per member, before
        // the lanes part).
        let parent = match (sync, members.iter().any(|m| self.passes_lanes(*m))) {
            (Some(p), _) => Some(p),
            (None, true) => Some(self.lanes()?),
            (None, false) => None,
        };
        let mut member_lanes = Vec::new();
        for (i, m) in members.iter().enumerate() {
            member_lanes.push(match parent {
                Some(parent) if self.passes_lanes(*m) => {
                    let picked = self.b().build_int_compare(
                        IntPredicate::EQ,
                        t,
                        self.cx.i32(i as u64),
                        "",
                    )?;
                    Some(self.t.ballot(self.cx, parent, picked)?)
                }
                _ => None,
            });
        }
        self.b().build_switch(t, end, &switch_cases)?;
        for ((_, bb, callee), lanes) in cases.into_iter().zip(member_lanes) {
            self.b().position_at_end(bb);
            let mut vals = vals.clone();
            if let Some(l) = lanes {
                vals.push(l.into());
            }
            let call = self.b().build_call(callee, &vals, "")?;
            if let (Some((s, _)), Some(v)) = (slot, call.try_as_basic_value().basic()) {
                self.b().build_store(s, v)?;
            }
            self.b().build_unconditional_branch(end)?;
        }
        self.b().position_at_end(end);
        self.converge_end(sync, false)?;
        match slot {
            Some((s, ty)) => Ok(Some(self.b().build_load(ty, s, "")?)),
            None => Ok(None),
        }
    }

    pub(super) fn math(
        &self,
        fun: MathFn,
        ty: Type,
        args: &[BasicValueEnum<'ctx>],
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let Some(s) = ty.scalar() else {
            return self.err(codes::INPUT, "math on a non-number");
        };
        // Integer min/max/abs/clamp work on whole vectors.
        if !s.is_float() {
            return self.int_math(fun, s, args);
        }
        match ty {
            Type::Vector(_, n) => {
                let vt = self.vt(ty)?.into_vector_type();
                let mut out = vt.get_undef();
                for k in 0..n as u64 {
                    let lane: Vec<BasicValueEnum> = args
                        .iter()
                        .map(|a| {
                            self.b().build_extract_element(
                                a.into_vector_value(),
                                self.cx.i32(k),
                                "",
                            )
                        })
                        .collect::<Result<_, _>>()?;
                    let r = self.float_math(fun, s, &lane)?;
                    out = self.b().build_insert_element(out, r, self.cx.i32(k), "")?;
                }
                Ok(out.into())
            }
            _ => self.float_math(fun, s, args),
        }
    }

    pub(super) fn int_math(
        &self,
        fun: MathFn,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = args[0].get_type();
        let sg = s.is_signed();
        let min = |a, b| {
            self.cx
                .call_value(if sg { "llvm.smin" } else { "llvm.umin" }, &[t], &[a, b])
        };
        let max = |a, b| {
            self.cx
                .call_value(if sg { "llvm.smax" } else { "llvm.umax" }, &[t], &[a, b])
        };
        match fun {
            MathFn::Min => min(args[0], args[1]),
            MathFn::Max => max(args[0], args[1]),
            MathFn::Clamp => {
                let m = max(args[0], args[1])?;
                min(m, args[2])
            }
            MathFn::Abs if sg => {
                // abs(MIN) wraps to MIN.
                let f = self.cx.context.bool_type().const_zero();
                self.cx.call_value("llvm.abs", &[t], &[args[0], f.into()])
            }
            MathFn::Abs => Ok(args[0]),
            _ => self.err(codes::INPUT, format!("`{}` of an integer", fun.name())),
        }
    }

    /// One float math function on scalars of type `s`.
    pub(super) fn float_math(
        &self,
        fun: MathFn,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        if s == Scalar::F16 && !matches!(fun, MathFn::Abs | MathFn::Min | MathFn::Max) {
            // Compute in f32 and round once to f16.
            let f32t = self.cx.context.f32_type();
            let wide: Vec<BasicValueEnum> = args
                .iter()
                .map(|a| self.b().build_cast(O::FPExt, *a, f32t, ""))
                .collect::<Result<_, _>>()?;
            let r = self.float_math(fun, Scalar::F32, &wide)?;
            return Ok(self
                .b()
                .build_cast(O::FPTrunc, r, self.cx.context.f16_type(), "")?);
        }
        let t = args[0].get_type();
        let one = |name: &str| self.cx.call_value(name, &[t], &[args[0]]);
        match fun {
            MathFn::Sqrt => one("llvm.sqrt"),
            MathFn::Rsqrt => self.rsqrt(s, args[0]),
            MathFn::Fma => self.cx.call_value("llvm.fma", &[t], args),
            MathFn::Min => self.cx.call_value("llvm.minnum", &[t], &[args[0], args[1]]),
            MathFn::Max => self.cx.call_value("llvm.maxnum", &[t], &[args[0], args[1]]),
            MathFn::Clamp => {
                let m = self
                    .cx
                    .call_value("llvm.maxnum", &[t], &[args[0], args[1]])?;
                self.cx.call_value("llvm.minnum", &[t], &[m, args[2]])
            }
            MathFn::Abs => one("llvm.fabs"),
            MathFn::Floor => one("llvm.floor"),
            MathFn::Ceil => one("llvm.ceil"),
            MathFn::Trunc => one("llvm.trunc"),
            MathFn::Round => one("llvm.round"),
            MathFn::Exp
            | MathFn::Exp2
            | MathFn::Log
            | MathFn::Log2
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Tanh
            | MathFn::Pow => self.transcendental(fun, s, args),
        }
    }
}
