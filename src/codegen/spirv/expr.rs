//! Expressions.

use super::*;

impl Emitter<'_> {
    pub(super) fn ty_of(&self, e: ExprId) -> Option<Type> {
        if let Some(&t) = self.lane_tys.get(&(self.frames.len(), e)) {
            return Some(t);
        }
        self.m.expr_type(self.frame().func, e)
    }

    /// The lane count of `e`'s type when it is a wide (8- or 16-lane) vector.
    pub(super) fn wide_lanes(&self, e: ExprId) -> Option<u8> {
        match self.ty_of(e) {
            Some(Type::Vector(_, n)) if n > 4 => Some(n),
            _ => None,
        }
    }

    /// Lane `k` of a vector value of `lanes` lanes of `s` (a SPIR-V vector or, wide, an
    /// array).
    pub(super) fn lane_of(&mut self, v: Word, s: Scalar, lanes: u8, k: u8) -> SpirvResult<Word> {
        if lanes == 1 {
            return Ok(v);
        }
        let st = self.scalar_ty(s)?;
        Ok(self.op(
            Op::CompositeExtract,
            st,
            vec![Operand::IdRef(v), Operand::LiteralBit32(k as u32)],
        ))
    }

    /// A lane-wise operation (arithmetic, comparison, cast, math, select, lane-wise bitcast)
    /// whose result or an operand is a wide vector: the operands are evaluated
    /// once, then the operation is emitted once per lane with each wide operand replaced by
    /// its lane (and the expression typed as a scalar), and the lanes are gathered.
    pub(super) fn scalarise(&mut self, e: ExprId, n: u8) -> SpirvResult<Word> {
        let depth = self.frames.len();
        let expr = self.func().exprs[e].clone();
        let out_ty = self.ty_of(e);
        let mut operands = Vec::new();
        for o in expr.operands() {
            let t = self.ty_of(o);
            let v = self.expr(o)?;
            operands.push((o, v, t));
        }
        let mut lanes = Vec::new();
        for k in 0..n {
            for &(o, v, t) in &operands {
                let lane = match t {
                    Some(Type::Vector(s, m)) if m == n => {
                        self.lane_tys.insert((depth, o), Type::Scalar(s));
                        self.lane_of(v, s, m, k)?
                    }
                    _ => v,
                };
                self.lane_vals.insert((depth, o), lane);
            }
            if let Some(Type::Vector(s, _)) = out_ty {
                self.lane_tys.insert((depth, e), Type::Scalar(s));
            }
            let r = self.expr(e);
            for &(o, _, _) in &operands {
                self.lane_vals.remove(&(depth, o));
                self.lane_tys.remove(&(depth, o));
            }
            self.lane_tys.remove(&(depth, e));
            lanes.push(r?);
        }
        match out_ty {
            Some(Type::Vector(s, m)) if m == n => {
                let t = self.vec_ty(s, n)?;
                Ok(self.opi(Op::CompositeConstruct, t, &lanes))
            }
            _ => refuse(format!(
                "an operation mixing {n}-lane vectors with other shapes"
            )),
        }
    }

    /// Whether `e` is a lane-wise operation on wide vectors that [`Self::scalarise`] lowers;
    /// its lane count.
    pub(super) fn needs_scalarising(&self, e: ExprId) -> SpirvResult<Option<u8>> {
        let expr = &self.func().exprs[e];
        let lanewise = matches!(
            expr,
            Expr::Unary { .. }
                | Expr::Binary { .. }
                | Expr::Cast { .. }
                | Expr::Bitcast { .. }
                | Expr::Select { .. }
                | Expr::Math { .. }
        );
        if !lanewise {
            return Ok(None);
        }
        let n = self
            .wide_lanes(e)
            .or_else(|| expr.operands().into_iter().find_map(|o| self.wide_lanes(o)));
        let Some(n) = n else { return Ok(None) };
        if let Expr::Bitcast { arg, .. } = expr {
            if self.wide_lanes(*arg) != Some(n) || self.wide_lanes(e) != Some(n) {
                return refuse(format!(
                    "a bitcast between a {n}-lane vector and a value of another lane count"
                ));
            }
        }
        Ok(Some(n))
    }

    pub(super) fn sl(&self, e: ExprId) -> (Scalar, u8) {
        match self.ty_of(e) {
            Some(Type::Scalar(s)) => (s, 1),
            Some(Type::Vector(s, n)) => (s, n),
            _ => (Scalar::U32, 1),
        }
    }

    pub(super) fn expr_void(&mut self, e: ExprId) -> SpirvResult<()> {
        let fh = self.frame().func;
        let expr = &self.m.function(fh).exprs[e];
        if let Expr::Call { function, args } = expr {
            let vals = args
                .iter()
                .map(|a| self.expr(*a))
                .collect::<SpirvResult<Vec<_>>>()?;
            self.inline_call(*function, vals)?;
            return Ok(());
        }
        if let Expr::Dispatch { tag, args } = expr {
            self.dispatch(*tag, args, None)?;
            return Ok(());
        }
        if let Expr::AtomicStore {
            order,
            place,
            value,
        } = expr
        {
            let (order, place, value) = (*order, *place, *value);
            self.atomic_access(order, place, Some(value), None)?;
            return Ok(());
        }
        self.expr(e)?;
        Ok(())
    }

    /// An integer expression as a `u32` (an index, a lane).
    pub(super) fn expr_u32(&mut self, e: ExprId) -> SpirvResult<Word> {
        let (s, _) = self.sl(e);
        let v = self.expr(e)?;
        self.cast(v, s, Scalar::U32, 1)
    }

    pub(super) fn builtin_vec(&mut self, bi: spirv::BuiltIn, d: Dim) -> Word {
        let u = self.u32t();
        let uv3 = self.tk(TyKey::Vec(u, 3));
        let var = self.builtin(bi, uv3);
        let v = self.load(uv3, var);
        self.op(
            Op::CompositeExtract,
            u,
            vec![Operand::IdRef(v), Operand::LiteralBit32(d.index() as u32)],
        )
    }

    pub(super) fn subgroup_scalar(&mut self, bi: spirv::BuiltIn) -> SpirvResult<Word> {
        if !self.caps.subgroup_basic {
            return refuse("subgroup operations (VK_SUBGROUP_FEATURE_BASIC)");
        }
        self.cap(Capability::GroupNonUniform);
        let u = self.u32t();
        let var = self.builtin(bi, u);
        Ok(self.load(u, var))
    }

    pub(super) fn expr(&mut self, e: ExprId) -> SpirvResult<Word> {
        if let Some(&v) = self.lane_vals.get(&(self.frames.len(), e)) {
            return Ok(v);
        }
        if let Some(&v) = self.prefetched.get(&(self.frames.len(), e)) {
            return Ok(v);
        }
        if let Some(n) = self.needs_scalarising(e)? {
            return self.scalarise(e, n);
        }
        let fh = self.frame().func;
        let f = self.m.function(fh);
        let ty = self.ty_of(e);
        let expr = f.exprs[e].clone();
        Ok(match expr {
            Expr::Literal(l) => match l {
                Literal::Bool(b) => {
                    let t = self.boolt();
                    self.konst(t, b as u64)
                }
                Literal::Int { bits, ty } => self.const_of(ty, 1, bits)?,
                Literal::Float { value, ty } => {
                    self.const_of(ty, 1, Self::float_bits(ty, value))?
                }
            },
            Expr::Param(i) => self.frame().params[i as usize],
            Expr::Local(h) => {
                let v = self.local_var(h)?;
                let t = self.value_ty(self.local_ty(h))?;
                self.load(t, v)
            }
            Expr::TemplateParam(_) => return refuse("a template parameter left uninstantiated"),
            Expr::Builtin(b) => match b {
                Builtin::GlobalId(d) => self.builtin_vec(spirv::BuiltIn::GlobalInvocationId, d),
                Builtin::LocalId(d) => self.builtin_vec(spirv::BuiltIn::LocalInvocationId, d),
                Builtin::GroupId(d) => self.builtin_vec(spirv::BuiltIn::WorkgroupId, d),
                Builtin::NumGroups(d) => self.builtin_vec(spirv::BuiltIn::NumWorkgroups, d),
                Builtin::GroupSize(d) => {
                    let u = self.u32t();
                    let wg = self.workgroup_size;
                    self.op(
                        Op::CompositeExtract,
                        u,
                        vec![Operand::IdRef(wg), Operand::LiteralBit32(d.index() as u32)],
                    )
                }
                Builtin::WaveWidth => match self.mode {
                    WaveMode::Native => self.subgroup_scalar(spirv::BuiltIn::SubgroupSize)?,
                    _ => self.cu32(self.wave_w),
                },
                Builtin::LaneId => {
                    // linear_local_id % W, as the semantics define it, in every mode: even
                    // with W = S, `SubgroupLocalInvocationId` is not that where the driver
                    // does not pack subgroups in linear order (lavapipe makes each row of a
                    // 1x2 block its own subgroup, so both invocations were lane 0). Where
                    // wave verbs depend on the packing, such blocks are refused (L007).
                    let u = self.u32t();
                    let var = self.builtin(spirv::BuiltIn::LocalInvocationIndex, u);
                    let l = self.load(u, var);
                    let m = self.cu32(self.wave_w - 1);
                    self.opi(Op::BitwiseAnd, u, &[l, m])
                }
            },
            Expr::Unary { op, arg } => {
                let (s, n) = self.sl(arg);
                let t = self.vec_ty(s, n)?;
                let a = self.expr(arg)?;
                match (op, s) {
                    (UnaryOp::Neg, Scalar::F32) => self.sign_bit_op(a, n, Op::BitwiseXor)?,
                    (UnaryOp::Neg, s) if s.is_float() => self.fop(Op::FNegate, t, &[a]),
                    (UnaryOp::Neg, _) => self.opi(Op::SNegate, t, &[a]),
                    (UnaryOp::Not, Scalar::Bool) => self.opi(Op::LogicalNot, t, &[a]),
                    (UnaryOp::Not, _) => self.opi(Op::Not, t, &[a]),
                }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(op, lhs, rhs)?,
            Expr::Cast { to, arg } => {
                let (s, n) = self.sl(arg);
                let a = self.expr(arg)?;
                self.cast(a, s, to, n)?
            }
            Expr::Bitcast { to, arg } => {
                let (s, _) = self.sl(arg);
                if s == Scalar::Bool || to.scalar() == Some(Scalar::Bool) {
                    return refuse("bitcast of bool");
                }
                let a = self.expr(arg)?;
                // The expression's type: a scalar while a wide bitcast is scalarised.
                let t = self.value_ty(ty.unwrap_or(to))?;
                self.opi(Op::Bitcast, t, &[a])
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                // A selection construct and a phi: only the taken arm runs.
                let c = self.expr(cond)?;
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                let (tb, eb, m) = (self.b.id(), self.b.id(), self.b.id());
                self.sel_merge(m);
                self.branch_cond(c, tb, eb);
                self.block(tb);
                let a = self.expr(accept)?;
                let a_end = self.cur_label;
                self.branch(m);
                self.block(eb);
                let r = self.expr(reject)?;
                let r_end = self.cur_label;
                self.branch(m);
                self.block(m);
                let (s, lanes) = self.sl(accept);
                match self.zero_sign_split(s, lanes, c, a, r)? {
                    Some(v) => v,
                    None => self.op(Op::Phi, t, ids(&[a, a_end, r, r_end])),
                }
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.expr(cond)?;
                let (_, cn) = self.sl(cond);
                let a = self.expr(accept)?;
                let r = self.expr(reject)?;
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                let lanes = ty.and_then(|t| t.lanes()).unwrap_or(1);
                let c = if cn == 1 && lanes > 1 {
                    let bt = self.boolt();
                    let bv = self.tk(TyKey::Vec(bt, lanes as u32));
                    self.opi(Op::CompositeConstruct, bv, &vec![c; lanes as usize])
                } else {
                    c
                };
                let (s, _) = self.sl(accept);
                match self.zero_sign_split(s, lanes, c, a, r)? {
                    Some(v) => v,
                    None => self.opi(Op::Select, t, &[c, a, r]),
                }
            }
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => {
                let mut vs = Vec::new();
                for &p in &parts {
                    let (ps, pn) = self.sl(p);
                    let v = self.expr(p)?;
                    if lanes > 4 && pn > 1 {
                        // An array is made of scalars only: take the part apart.
                        for k in 0..pn {
                            vs.push(self.lane_of(v, ps, pn, k)?);
                        }
                    } else {
                        vs.push(v);
                    }
                }
                let t = self.vec_ty(scalar, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vs)
            }
            Expr::Splat { lanes, value } => {
                let (s, _) = self.sl(value);
                let v = self.expr(value)?;
                let t = self.vec_ty(s, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vec![v; lanes as usize])
            }
            Expr::Extract { vector, lane } => {
                let (s, _) = self.sl(vector);
                let v = self.expr(vector)?;
                let t = self.scalar_ty(s)?;
                self.op(
                    Op::CompositeExtract,
                    t,
                    vec![Operand::IdRef(v), Operand::LiteralBit32(lane as u32)],
                )
            }
            Expr::Swizzle { vector, lanes } => {
                let (s, n) = self.sl(vector);
                let v = self.expr(vector)?;
                let t = self.vec_ty(s, lanes.len() as u8)?;
                if n > 4 || lanes.len() > 4 {
                    // OpVectorShuffle takes SPIR-V vectors only: gather the lanes.
                    let mut ls = Vec::new();
                    for &l in &lanes {
                        ls.push(self.lane_of(v, s, n, l)?);
                    }
                    return Ok(self.opi(Op::CompositeConstruct, t, &ls));
                }
                let mut ops = ids(&[v, v]);
                ops.extend(lanes.iter().map(|&l| Operand::LiteralBit32(l as u32)));
                self.op(Op::VectorShuffle, t, ops)
            }
            Expr::Index { base, index } => {
                let i = self.expr_u32(index)?;
                let elem = self.base_elem(base)?;
                self.load_elem(base, elem, i)?
            }
            // The verifier inlines every call that passes memory.
            Expr::Ref(_) => {
                return refuse("a buffer or array by reference outside an inlined helper call")
            }
            Expr::Len(p) => match self.len_member.get(p as usize).copied().flatten() {
                Some(m) => self.push_load(m),
                None => return refuse("len of a parameter that is not a buffer"),
            },
            Expr::Call { function, args } => {
                let vals = args
                    .iter()
                    .map(|a| self.expr(*a))
                    .collect::<SpirvResult<Vec<_>>>()?;
                match self.inline_call(function, vals)? {
                    Some(v) => v,
                    None => return refuse("the value of a helper that returns nothing"),
                }
            }
            Expr::Tag { index, .. } => self.cu32(index),
            Expr::Dispatch { tag, args } => {
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                self.dispatch(tag, &args, Some(t))?
                    .expect("a typed dispatch yields a value")
            }
            Expr::Math { fun, args } => self.math(fun, &args, ty)?,
            Expr::Bits { op, args } => self.bits(op, &args)?,
            Expr::AtomicLoad { order, place } => {
                match self.atomic_access(order, place, None, ty)? {
                    Some(v) => v,
                    None => return refuse("an atomic load without a value"),
                }
            }
            Expr::AtomicStore { .. } => return refuse("atomic_store used as a value"),
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => self.atomic(op, order, place, value, compare)?,
            Expr::Wave { op, args, width } => self.wave(op, &args, width, ty)?,
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let i = self.expr_u32(index)?;
                let elem = self.base_elem(base)?;
                let i = self.align_trap(index, i, elem.scalar, align);
                let se = ElemType::scalar(elem.scalar);
                let u = self.u32t();
                let mut vs = Vec::new();
                for k in 0..lanes {
                    let kk = self.cu32(k as u32);
                    let ik = self.opi(Op::IAdd, u, &[i, kk]);
                    vs.push(self.load_elem(base, se, ik)?);
                }
                let t = self.vec_ty(elem.scalar, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vs)
            }
            Expr::MatrixFill {
                scalar,
                rows,
                cols,
                value,
                ..
            } => {
                let v = self.expr(value)?;
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                let n = rows as usize * cols as usize;
                let _ = scalar;
                self.opi(Op::CompositeConstruct, t, &vec![v; n])
            }
            Expr::MatrixLoad {
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
                ..
            } => self.matrix_load(scalar, rows, cols, base, offset, stride, ty)?,
            Expr::MatrixMma { a, b, c } => self.matrix_mma(a, b, c)?,
        })
    }

    /// `dispatch(tag, args)`: one selection per member; an out-of-range tag leaves the zero.
    pub(super) fn dispatch(
        &mut self,
        tag: ExprId,
        args: &[ExprId],
        ty: Option<Word>,
    ) -> SpirvResult<Option<Word>> {
        let set = match self.ty_of(tag) {
            Some(Type::Tag(s)) => s,
            _ => return refuse("dispatch through a value that is not a tag"),
        };
        let t = self.expr(tag)?;
        let vals = args
            .iter()
            .map(|a| self.expr(*a))
            .collect::<SpirvResult<Vec<_>>>()?;
        let res = ty.map(|ty| {
            let v = self.fn_var(ty);
            let z = self.b.constant_null(ty);
            self.store(v, z);
            v
        });
        let members = self.m.module().tag_sets[set].members.clone();
        let bt = self.boolt();
        for (k, h) in members.into_iter().enumerate() {
            let kk = self.cu32(k as u32);
            let c = self.opi(Op::IEqual, bt, &[t, kk]);
            let (then, m) = (self.b.id(), self.b.id());
            self.sel_merge(m);
            self.branch_cond(c, then, m);
            self.block(then);
            let r = self.inline_call(h, vals.clone())?;
            if let (Some(v), Some(r)) = (res, r) {
                self.store(v, r);
            }
            self.branch(m);
            self.block(m);
        }
        Ok(match (res, ty) {
            (Some(v), Some(ty)) => Some(self.load(ty, v)),
            _ => None,
        })
    }

    pub(super) fn binary(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> SpirvResult<Word> {
        let (s, n) = self.sl(lhs);
        let bt = self.boolt();
        let bty = if n == 1 {
            bt
        } else {
            self.tk(TyKey::Vec(bt, n as u32))
        };
        if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            let a = self.expr(lhs)?;
            if n > 1 {
                let b = self.expr(rhs)?;
                let o = if op == BinaryOp::LogicalAnd {
                    Op::LogicalAnd
                } else {
                    Op::LogicalOr
                };
                return Ok(self.opi(o, bty, &[a, b]));
            }
            // Short circuit: the right operand runs only when it decides the result.
            let from = self.cur_label;
            let (rb, m) = (self.b.id(), self.b.id());
            self.sel_merge(m);
            if op == BinaryOp::LogicalAnd {
                self.branch_cond(a, rb, m);
            } else {
                self.branch_cond(a, m, rb);
            }
            self.block(rb);
            let b = self.expr(rhs)?;
            let rend = self.cur_label;
            self.branch(m);
            self.block(m);
            return Ok(self.op(Op::Phi, bt, ids(&[a, from, b, rend])));
        }
        let t = self.vec_ty(s, n)?;
        let a = self.expr(lhs)?;
        let mut b = self.expr(rhs)?;
        let (rs, _) = self.sl(rhs);
        let float = s.is_float();
        let signed = s.is_signed();
        Ok(match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul if float => {
                let o = match op {
                    BinaryOp::Add => Op::FAdd,
                    BinaryOp::Sub => Op::FSub,
                    _ => Op::FMul,
                };
                let r = if s == Scalar::F32 && self.f32_in_f64() {
                    self.f32_unflushed(o, n, t, bty, a, b)?
                } else {
                    self.fop(o, t, &[a, b])
                };
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Add => self.opi(Op::IAdd, t, &[a, b]),
            BinaryOp::Sub => self.opi(Op::ISub, t, &[a, b]),
            BinaryOp::Mul => self.opi(Op::IMul, t, &[a, b]),
            BinaryOp::Div if float && s == Scalar::F32 && self.caps.float64 => {
                // Correctly rounded: Vulkan allows 2.5 ulp for f32 `FDiv` and nothing for
                // |y| > 2^126, and NVIDIA divides by x·rcp(y) with rcp flushing its subnormal
                // result (3e38 / 3e38 gave 0). The f64 quotient (within 2.5 f64 ulps) is
                // nearer than any f32 quotient comes to an f32 rounding midpoint, so one
                // rounding to f32 gives the correctly rounded result.
                self.cap(Capability::Float64);
                let dt = self.vec_ty(Scalar::F64, n)?;
                let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
                let q = self.fop(Op::FDiv, dt, &[da, db]);
                let r = self.f64_to_f32(q, n)?;
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Div if float => {
                let r = self.fop(Op::FDiv, t, &[a, b]);
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Rem if float && s == Scalar::F32 && self.caps.float64 => {
                // C fmod, computed in f64 where drivers' `x - y * trunc(x / y)` is exact for
                // every f32 pair whose quotient fits 29 bits.
                self.cap(Capability::Float64);
                let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
                let r = self.fmod_f64_of_f32(da, db, n)?;
                let r = self.f64_to_f32(r, n)?;
                // The result has the dividend's sign, zeros included.
                let ut = self.vec_ty(Scalar::U32, n)?;
                let (ru, au) = (
                    self.opi(Op::Bitcast, ut, &[r]),
                    self.opi(Op::Bitcast, ut, &[a]),
                );
                let mag = self.konst(ut, 0x7fff_ffff);
                let sign = self.konst(ut, 0x8000_0000);
                let m = self.opi(Op::BitwiseAnd, ut, &[ru, mag]);
                let sg = self.opi(Op::BitwiseAnd, ut, &[au, sign]);
                let o = self.opi(Op::BitwiseOr, ut, &[m, sg]);
                let r = self.opi(Op::Bitcast, t, &[o]);
                self.frem_edges(s, n, t, bty, a, b, r)?
            }
            BinaryOp::Rem if float && s == Scalar::F16 && self.caps.float64 => {
                // C fmod of two f16 values (which are f32 values) by the f32 reduction in f64:
                // f16 `FRem` is `x - y·trunc(x / y)` rounded in f16 (lavapipe: 0.30005 %
                // 0.099976 gave 2^-12, not 2^-13). The exact result is an f16 value, so the
                // conversions are exact; the sign is the dividend's.
                self.cap(Capability::Float64);
                let dt = self.vec_ty(Scalar::F64, n)?;
                let (da, db) = (
                    self.opi(Op::FConvert, dt, &[a]),
                    self.opi(Op::FConvert, dt, &[b]),
                );
                let m = self.fmod_f64_of_f32(da, db, n)?;
                let m = self.opi(Op::FConvert, t, &[m]);
                let neg = self.negative(s, t, bty, a);
                let nm = self.fop(Op::FNegate, t, &[m]);
                let r = self.opi(Op::Select, t, &[neg, nm, m]);
                self.frem_edges(s, n, t, bty, a, b, r)?
            }
            BinaryOp::Rem if float => {
                let r = if s == Scalar::F64 {
                    self.frem_f64(t, a, b)
                } else {
                    self.fop(Op::FRem, t, &[a, b])
                };
                // C fmod's result has the dividend's sign, zeros included: lavapipe's f16
                // `FRem` gave -0.0 % 1.0 = +0.0 (tests/filetests/math/host_functions.xk).
                let ra = self.negative(s, t, bty, a);
                let rr = self.negative(s, t, bty, r);
                let flip = self.opi(Op::LogicalNotEqual, bty, &[ra, rr]);
                let nr = self.fop(Op::FNegate, t, &[r]);
                let r = self.opi(Op::Select, t, &[flip, nr, r]);
                self.frem_edges(s, n, t, bty, a, b, r)?
            }
            BinaryOp::Div | BinaryOp::Rem => {
                // Division by zero is UB but must not hang or fault: divide by 1 instead.
                // `MIN / -1` wraps to `MIN` and `MIN % -1` is 0 (SPIR-V leaves both undefined).
                let zero = self.konst(t, 0);
                let one = self.konst(t, 1);
                let bz = self.opi(Op::IEqual, bty, &[b, zero]);
                if signed {
                    let m1 = self.konst(t, u64::MAX);
                    let bm = self.opi(Op::IEqual, bty, &[b, m1]);
                    let bad = self.opi(Op::LogicalOr, bty, &[bz, bm]);
                    let safe = self.opi(Op::Select, t, &[bad, one, b]);
                    if op == BinaryOp::Div {
                        let q = self.opi(Op::SDiv, t, &[a, safe]);
                        let neg = self.opi(Op::SNegate, t, &[a]);
                        self.opi(Op::Select, t, &[bm, neg, q])
                    } else {
                        // `a - trunc(a / b) * b`, not `OpSRem`: NVIDIA's driver (580, on an
                        // H200) computes `OpSRem` on the operands' unsigned bit patterns
                        // (-7 % 2 gave 1, -301i16 % 7 gave 2), while its `OpSDiv` truncates
                        // as specified. With `safe` = 1 for `b` = -1 this is 0 (`MIN % -1`).
                        let q = self.opi(Op::SDiv, t, &[a, safe]);
                        let qb = self.opi(Op::IMul, t, &[q, safe]);
                        self.opi(Op::ISub, t, &[a, qb])
                    }
                } else {
                    let safe = self.opi(Op::Select, t, &[bz, one, b]);
                    let o = if op == BinaryOp::Div {
                        Op::UDiv
                    } else {
                        Op::UMod
                    };
                    self.opi(o, t, &[a, safe])
                }
            }
            BinaryOp::BitAnd if s == Scalar::Bool => self.opi(Op::LogicalAnd, t, &[a, b]),
            BinaryOp::BitOr if s == Scalar::Bool => self.opi(Op::LogicalOr, t, &[a, b]),
            BinaryOp::BitXor if s == Scalar::Bool => self.opi(Op::LogicalNotEqual, t, &[a, b]),
            BinaryOp::BitAnd => self.opi(Op::BitwiseAnd, t, &[a, b]),
            BinaryOp::BitOr => self.opi(Op::BitwiseOr, t, &[a, b]),
            BinaryOp::BitXor => self.opi(Op::BitwiseXor, t, &[a, b]),
            BinaryOp::Shl | BinaryOp::Shr => {
                if rs != s {
                    b = self.cast(b, rs, s, n)?;
                }
                // The amount is taken modulo the width (semantics.md, Integers).
                let mask = self.konst(t, (s.bits() - 1) as u64);
                let amt = self.opi(Op::BitwiseAnd, t, &[b, mask]);
                let o = match (op, signed) {
                    (BinaryOp::Shl, _) => Op::ShiftLeftLogical,
                    (_, true) => Op::ShiftRightArithmetic,
                    _ => Op::ShiftRightLogical,
                };
                self.opi(o, t, &[a, amt])
            }
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => {
                let o = match (op, s) {
                    (BinaryOp::Eq, Scalar::Bool) => Op::LogicalEqual,
                    (BinaryOp::Ne, Scalar::Bool) => Op::LogicalNotEqual,
                    (BinaryOp::Eq, s) if s.is_float() => Op::FOrdEqual,
                    (BinaryOp::Ne, s) if s.is_float() => Op::FUnordNotEqual,
                    (BinaryOp::Lt, s) if s.is_float() => Op::FOrdLessThan,
                    (BinaryOp::Le, s) if s.is_float() => Op::FOrdLessThanEqual,
                    (BinaryOp::Gt, s) if s.is_float() => Op::FOrdGreaterThan,
                    (BinaryOp::Ge, s) if s.is_float() => Op::FOrdGreaterThanEqual,
                    (BinaryOp::Eq, _) => Op::IEqual,
                    (BinaryOp::Ne, _) => Op::INotEqual,
                    (BinaryOp::Lt, s) if s.is_signed() => Op::SLessThan,
                    (BinaryOp::Le, s) if s.is_signed() => Op::SLessThanEqual,
                    (BinaryOp::Gt, s) if s.is_signed() => Op::SGreaterThan,
                    (BinaryOp::Ge, s) if s.is_signed() => Op::SGreaterThanEqual,
                    (BinaryOp::Lt, _) => Op::ULessThan,
                    (BinaryOp::Le, _) => Op::ULessThanEqual,
                    (BinaryOp::Gt, _) => Op::UGreaterThan,
                    _ => Op::UGreaterThanEqual,
                };
                if s == Scalar::Bool && !matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
                    return refuse("ordering comparison of bool");
                }
                if s == Scalar::F32 && self.f32_in_f64() && n <= 4 {
                    // A flushing f32 comparison finds a subnormal equal to 0 (the NVIDIA
                    // driver: `1e-40 != 0.0` was false): compared in f64, widened from the
                    // bits, where every f32 is normal.
                    let (wa, wb) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
                    return Ok(self.opi(o, bty, &[wa, wb]));
                }
                self.opi(o, bty, &[a, b])
            }
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => unreachable!("handled above"),
        })
    }

    /// `v` (signed, narrower than 64 bits, `n` lanes) sign-extended to `i64`, built from its
    /// two 32-bit halves (the high half the low one shifted right arithmetically by 31) rather
    /// than by `OpSConvert`: lavapipe (Mesa 22.3) compares an `OpSConvert`ed 32-to-64-bit value
    /// as if it were zero-extended (`x as i64 < 0` is false for x = -8), though it stores it
    /// right.
    fn sext_to_i64(&mut self, v: Word, from: Scalar, n: u8) -> SpirvResult<Word> {
        let v32 = if from.bits() < 32 {
            let t = self.vec_ty(Scalar::I32, n)?;
            self.opi(Op::SConvert, t, &[v])
        } else {
            v
        };
        let it = self.vec_ty(Scalar::I32, n)?;
        let ut = self.vec_ty(Scalar::U32, n)?;
        let sh = self.const_of(Scalar::U32, n, 31)?;
        let hi = self.opi(Op::ShiftRightArithmetic, it, &[v32, sh]);
        let (lo, hi) = (
            self.opi(Op::Bitcast, ut, &[v32]),
            self.opi(Op::Bitcast, ut, &[hi]),
        );
        let t = self.vec_ty(Scalar::I64, n)?;
        if n == 1 {
            let pair = self.vec_ty(Scalar::U32, 2)?;
            let p = self.opi(Op::CompositeConstruct, pair, &[lo, hi]);
            return Ok(self.opi(Op::Bitcast, t, &[p]));
        }
        let pair = self.vec_ty(Scalar::U32, 2)?;
        let i64t = self.vec_ty(Scalar::I64, 1)?;
        let mut ls = Vec::new();
        for k in 0..n {
            let (l, h) = (
                self.lane_of(lo, Scalar::U32, n, k)?,
                self.lane_of(hi, Scalar::U32, n, k)?,
            );
            let p = self.opi(Op::CompositeConstruct, pair, &[l, h]);
            ls.push(self.opi(Op::Bitcast, i64t, &[p]));
        }
        Ok(self.opi(Op::CompositeConstruct, t, &ls))
    }

    /// `c ? a : r` for float constants `a` and `r` of which one is a zero whose sign differs
    /// from the other's, built as a select of magnitudes OR a select of sign bits; `None` for
    /// any other pair. lavapipe (Mesa 22.3) matches its `bcsel(c, 0.0, 1.0) -> b2f(!c)` family
    /// by float value, so -0.0 passes for 0.0 there: `c ? -0.0 : 1.0` came out +0.0 (and
    /// `c ? 0.0 : -1.0` as -0.0), both from `select` and from an `if` expression's phi.
    fn zero_sign_split(
        &mut self,
        s: Scalar,
        lanes: u8,
        c: Word,
        a: Word,
        r: Word,
    ) -> SpirvResult<Option<Word>> {
        let (ut, w) = match s {
            Scalar::F32 => (Scalar::U32, 32),
            Scalar::F64 => (Scalar::U64, 64),
            _ => return Ok(None),
        };
        let bits_of = |em: &Self, v: Word| {
            em.consts
                .iter()
                .find(|(_, &id)| id == v)
                .map(|(&(_, bits), _)| bits)
        };
        let (Some(ba), Some(br)) = (bits_of(self, a), bits_of(self, r)) else {
            return Ok(None);
        };
        let sign = 1u64 << (w - 1);
        let zero = |b: u64| b & !sign == 0;
        if !(zero(ba) || zero(br)) || (ba & sign) == (br & sign) {
            return Ok(None);
        }
        let ft = self.vec_ty(s, lanes)?;
        let uvt = self.vec_ty(ut, lanes)?;
        let (ma, mr) = (
            self.const_of(s, lanes, ba & !sign)?,
            self.const_of(s, lanes, br & !sign)?,
        );
        let mag = self.opi(Op::Select, ft, &[c, ma, mr]);
        let (sa, sr) = (
            self.const_of(ut, lanes, ba & sign)?,
            self.const_of(ut, lanes, br & sign)?,
        );
        let sg = self.opi(Op::Select, uvt, &[c, sa, sr]);
        let mb = self.opi(Op::Bitcast, uvt, &[mag]);
        let v = self.opi(Op::BitwiseOr, uvt, &[mb, sg]);
        Ok(Some(self.opi(Op::Bitcast, ft, &[v])))
    }

    /// A value conversion per semantics.md (Conversions).
    pub(super) fn cast(&mut self, v: Word, from: Scalar, to: Scalar, n: u8) -> SpirvResult<Word> {
        if from == to {
            return Ok(v);
        }
        let t = self.vec_ty(to, n)?;
        if n > 4 {
            let mut ls = Vec::new();
            for k in 0..n {
                let x = self.lane_of(v, from, n, k)?;
                ls.push(self.cast(x, from, to, 1)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        let bt = self.boolt();
        let bty = if n == 1 {
            bt
        } else {
            self.tk(TyKey::Vec(bt, n as u32))
        };
        if from == Scalar::Bool {
            let one_bits = if to.is_float() {
                Self::float_bits(to, 1.0)
            } else {
                1
            };
            let one = self.konst(t, one_bits);
            let zero = self.konst(t, 0);
            return Ok(self.opi(Op::Select, t, &[v, one, zero]));
        }
        let ft = self.vec_ty(from, n)?;
        if to == Scalar::Bool {
            if from == Scalar::F32 && self.caps.flushes_f32_subnormals {
                // On the bits (NaN and subnormals are true, both zeros false): a flushing
                // `FUnordNotEqual` finds a subnormal equal to 0.
                let ut = self.vec_ty(Scalar::U32, n)?;
                let (mag, uz) = (self.konst(ut, 0x7fff_ffff), self.konst(ut, 0));
                let bits = self.opi(Op::Bitcast, ut, &[v]);
                let m = self.opi(Op::BitwiseAnd, ut, &[bits, mag]);
                return Ok(self.opi(Op::INotEqual, bty, &[m, uz]));
            }
            let zero = self.konst(ft, 0);
            let o = if from.is_float() {
                Op::FUnordNotEqual
            } else {
                Op::INotEqual
            };
            return Ok(self.opi(o, bty, &[v, zero]));
        }
        Ok(match (from.is_float(), to.is_float()) {
            (false, false) => {
                if from.bits() == to.bits() {
                    self.opi(Op::Bitcast, t, &[v])
                } else if from.bits() < to.bits() && from.is_signed() {
                    // Sign-extend by the source's signedness, then reinterpret.
                    let wide = match to.bits() {
                        16 => Scalar::I16,
                        32 => Scalar::I32,
                        _ => Scalar::I64,
                    };
                    let wt = self.vec_ty(wide, n)?;
                    let w = if wide == Scalar::I64 {
                        self.sext_to_i64(v, from, n)?
                    } else {
                        self.opi(Op::SConvert, wt, &[v])
                    };
                    if wide == to {
                        w
                    } else {
                        self.opi(Op::Bitcast, t, &[w])
                    }
                } else {
                    let unsigned = match to.bits() {
                        8 => Scalar::U8,
                        16 => Scalar::U16,
                        32 => Scalar::U32,
                        _ => Scalar::U64,
                    };
                    let src = if from.is_signed() {
                        let us = match from.bits() {
                            8 => Scalar::U8,
                            16 => Scalar::U16,
                            32 => Scalar::U32,
                            _ => Scalar::U64,
                        };
                        let ut = self.vec_ty(us, n)?;
                        self.opi(Op::Bitcast, ut, &[v])
                    } else {
                        v
                    };
                    let ut = self.vec_ty(unsigned, n)?;
                    let w = self.opi(Op::UConvert, ut, &[src]);
                    if unsigned == to {
                        w
                    } else {
                        self.opi(Op::Bitcast, t, &[w])
                    }
                }
            }
            (false, true) => {
                let o = if from.is_signed() {
                    Op::ConvertSToF
                } else {
                    Op::ConvertUToF
                };
                self.opi(o, t, &[v])
            }
            (true, true)
                if self.caps.flushes_f32_subnormals && from == Scalar::F32 && to == Scalar::F64 =>
            {
                self.widen_f32(v, n)?
            }
            (true, true)
                if self.caps.flushes_f32_subnormals && from == Scalar::F64 && to == Scalar::F32 =>
            {
                self.f64_to_f32(v, n)?
            }
            (true, true) => self.opi(Op::FConvert, t, &[v]),
            (true, false) => {
                // Saturating, NaN → 0: clamp into range, convert, then fix the top end (the
                // bound itself is often not representable in the source type) and NaN.
                let bits = to.bits();
                let (lo, hi) = if to.is_signed() {
                    (-(2f64.powi(bits as i32 - 1)), 2f64.powi(bits as i32 - 1))
                } else {
                    (0.0, 2f64.powi(bits as i32))
                };
                let below = |s: Scalar, x: f64| -> u64 {
                    match s {
                        Scalar::F16 => {
                            let h = half::f16::from_f64(x);
                            let h = if h.to_f64() >= x {
                                half::f16::from_bits(h.to_bits() - 1)
                            } else {
                                h
                            };
                            h.to_bits() as u64
                        }
                        Scalar::F32 => {
                            let f = x as f32;
                            let f = if f as f64 >= x {
                                f32::from_bits(f.to_bits() - 1)
                            } else {
                                f
                            };
                            f.to_bits() as u64
                        }
                        _ => {
                            // A power of two: the float just below it.
                            let f = f64::from_bits(x.to_bits() - 1);
                            f.to_bits()
                        }
                    }
                };
                let lo_c = {
                    let lo_v = match from {
                        Scalar::F16 => lo.max(-65504.0),
                        _ => lo,
                    };
                    self.konst(ft, Self::float_bits(from, lo_v))
                };
                let hi_below = self.konst(ft, below(from, hi));
                let hi_c = self.konst(ft, Self::float_bits(from, hi));
                let c1 = self.ext_inst(ft, glsl::NMAX, &[v, lo_c]);
                let c2 = self.ext_inst(ft, glsl::NMIN, &[c1, hi_below]);
                let o = if to.is_signed() {
                    Op::ConvertFToS
                } else {
                    Op::ConvertFToU
                };
                let r = self.opi(o, t, &[c2]);
                let max = if to.is_signed() {
                    (1u64 << (bits - 1)) - 1
                } else if bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                let maxc = self.konst(t, max);
                let over = self.opi(Op::FOrdGreaterThanEqual, bty, &[v, hi_c]);
                let r = self.opi(Op::Select, t, &[over, maxc, r]);
                let r = if to.is_signed() {
                    // Below a bound the source type cannot hold (f16 → i32): the minimum.
                    let under = self.opi(Op::FOrdLessThan, bty, &[v, lo_c]);
                    let minc = self.konst(t, 1u64 << (bits - 1));
                    self.opi(Op::Select, t, &[under, minc, r])
                } else {
                    r
                };
                let nan = self.opi(Op::IsNan, bty, &[v]);
                let zero = self.konst(t, 0);
                self.opi(Op::Select, t, &[nan, zero, r])
            }
        })
    }

    pub(super) fn math(
        &mut self,
        fun: MathFn,
        args: &[ExprId],
        ty: Option<Type>,
    ) -> SpirvResult<Word> {
        let (s, _) = self.sl(args[0]);
        let vs = args
            .iter()
            .map(|a| self.expr(*a))
            .collect::<SpirvResult<Vec<_>>>()?;
        let t = self.value_ty(ty.unwrap_or(Type::F32))?;
        let g = |em: &mut Self, i: u32, a: &[Word]| em.ext_inst(t, i, a);
        let lanes = ty.and_then(|t| t.lanes()).unwrap_or(1);
        // GLSL.std.450 has no 64-bit transcendental functions and leaves 64-bit `Sqrt` and
        // `InverseSqrt` loose: they are built from arithmetic (`math.rs`).
        if s == Scalar::F64
            && (fun.is_transcendental() || matches!(fun, MathFn::Sqrt | MathFn::Rsqrt))
        {
            return self.math_f64(fun, &vs, lanes);
        }
        // Vulkan allows `Fma` to round twice and `Sqrt` 3 ulps; f32 ones are computed in f64
        // where the device has it (the f64 product is exact; one more rounding to f32).
        if s == Scalar::F32
            && self.caps.float64
            && matches!(fun, MathFn::Fma | MathFn::Sqrt | MathFn::Rsqrt)
        {
            self.cap(Capability::Float64);
            let dt = self.vec_ty(Scalar::F64, lanes)?;
            let mut ds = Vec::with_capacity(vs.len());
            for &v in vs.iter() {
                ds.push(self.widen_f32(v, lanes)?);
            }
            let r = match fun {
                MathFn::Fma => {
                    let p = self.fop(Op::FMul, dt, &[ds[0], ds[1]]);
                    self.fop(Op::FAdd, dt, &[p, ds[2]])
                }
                MathFn::Sqrt => self.ext_inst(dt, glsl::SQRT, &ds),
                _ => {
                    let q = self.ext_inst(dt, glsl::SQRT, &ds);
                    let one = self.konst(dt, 1f64.to_bits());
                    self.fop(Op::FDiv, dt, &[one, q])
                }
            };
            return if self.caps.flushes_f32_subnormals {
                self.f64_to_f32(r, lanes)
            } else {
                Ok(self.opi(Op::FConvert, t, &[r]))
            };
        }
        if s == Scalar::F32 && self.caps.float64 && fun.is_transcendental() {
            return self.transcendental_f32(fun, &vs, t, lanes);
        }
        Ok(match fun {
            MathFn::Sqrt => g(self, glsl::SQRT, &vs),
            MathFn::Rsqrt => g(self, glsl::INVERSE_SQRT, &vs),
            MathFn::Exp => g(self, glsl::EXP, &vs),
            MathFn::Exp2 => g(self, glsl::EXP2, &vs),
            MathFn::Log => g(self, glsl::LOG, &vs),
            MathFn::Log2 => g(self, glsl::LOG2, &vs),
            MathFn::Sin => g(self, glsl::SIN, &vs),
            MathFn::Cos => g(self, glsl::COS, &vs),
            MathFn::Tanh => g(self, glsl::TANH, &vs),
            MathFn::Pow => g(self, glsl::POW, &vs),
            MathFn::Fma => g(self, glsl::FMA, &vs),
            MathFn::Floor => g(self, glsl::FLOOR, &vs),
            MathFn::Ceil => g(self, glsl::CEIL, &vs),
            MathFn::Trunc => g(self, glsl::TRUNC, &vs),
            MathFn::Round => {
                // Half-way cases away from zero (GLSL Round leaves ties to the driver).
                let tr = g(self, glsl::TRUNC, &vs);
                let d = self.fop(Op::FSub, t, &[vs[0], tr]);
                let ad = g(self, glsl::FABS, &[d]);
                let half = self.konst(t, Self::float_bits(s, 0.5));
                let bty = self.bool_like(ty)?;
                let ge = self.opi(Op::FOrdGreaterThanEqual, bty, &[ad, half]);
                let sg = g(self, glsl::FSIGN, &vs);
                let up = self.fop(Op::FAdd, t, &[tr, sg]);
                let _ = glsl::ROUND_EVEN;
                self.opi(Op::Select, t, &[ge, up, tr])
            }
            MathFn::Min | MathFn::Max | MathFn::Clamp => {
                let (mn, mx) = if s.is_float() {
                    (glsl::NMIN, glsl::NMAX)
                } else if s.is_signed() {
                    (glsl::SMIN, glsl::SMAX)
                } else {
                    (glsl::UMIN, glsl::UMAX)
                };
                if s.is_float() {
                    let bty = self.bool_like(ty)?;
                    match fun {
                        MathFn::Min => self.fminmax(s, lanes, true, t, bty, vs[0], vs[1])?,
                        MathFn::Max => self.fminmax(s, lanes, false, t, bty, vs[0], vs[1])?,
                        _ => {
                            let a = self.fminmax(s, lanes, false, t, bty, vs[0], vs[1])?;
                            self.fminmax(s, lanes, true, t, bty, a, vs[2])?
                        }
                    }
                } else {
                    match fun {
                        MathFn::Min => g(self, mn, &vs),
                        MathFn::Max => g(self, mx, &vs),
                        _ => {
                            let a = g(self, mx, &[vs[0], vs[1]]);
                            g(self, mn, &[a, vs[2]])
                        }
                    }
                }
            }
            MathFn::Abs => {
                if s == Scalar::F32 {
                    self.sign_bit_op(vs[0], lanes, Op::BitwiseAnd)?
                } else if s.is_float() {
                    g(self, glsl::FABS, &vs)
                } else if s.is_signed() {
                    // Not GLSL.std.450's SAbs: the NVIDIA driver's compiler takes its result
                    // as non-negative, so `(abs(x) as u64) as f32` of `i32::MIN` became a
                    // signed conversion (H200, driver 580; the same fault as ptxas's
                    // `abs.s32`, see codegen/llvm/nvptx.rs). `x < 0 ? 0 - x : x` wraps at
                    // `MIN` and is read as written.
                    let zero = self.const_of(s, lanes, 0)?;
                    let neg = self.opi(Op::ISub, t, &[zero, vs[0]]);
                    let bty = self.bool_of(t);
                    let below = self.opi(Op::SLessThan, bty, &[vs[0], zero]);
                    self.opi(Op::Select, t, &[below, neg, vs[0]])
                } else {
                    vs[0]
                }
            }
        })
    }

    /// Float `min`/`max` as `NMin`/`NMax` (a NaN operand yields the other), with the
    /// interpreter's `-0 < +0`, which GLSL.std.450 leaves open (lavapipe gave
    /// `max(-0.0, 0.0) == -0.0`): for two zeros, min ORs the bit patterns and max ANDs them
    /// (on bits, which lavapipe's folding of `0.0 + x` cannot touch); without an integer
    /// type of the width, min is `-((-a) + (-b))` and max `a + b`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fminmax(
        &mut self,
        s: Scalar,
        n: u8,
        min: bool,
        t: Word,
        bty: Word,
        a: Word,
        b: Word,
    ) -> SpirvResult<Word> {
        let i = if min { glsl::NMIN } else { glsl::NMAX };
        let (r, az, bz) = if s == Scalar::F32 && self.f32_in_f64() {
            // In f64, where no operand is flushed; the result is one of them, exact.
            self.cap(Capability::Float64);
            let dt = self.vec_ty(Scalar::F64, n)?;
            let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
            let r = self.ext_inst(dt, i, &[da, db]);
            let r = self.f64_to_f32(r, n)?;
            let zero = self.fconst(dt, 0.0);
            let az = self.opi(Op::FOrdEqual, bty, &[da, zero]);
            let bz = self.opi(Op::FOrdEqual, bty, &[db, zero]);
            (r, az, bz)
        } else {
            let r = self.ext_inst(t, i, &[a, b]);
            let zero = self.konst(t, 0);
            let az = self.opi(Op::FOrdEqual, bty, &[a, zero]);
            let bz = self.opi(Op::FOrdEqual, bty, &[b, zero]);
            (r, az, bz)
        };
        let both = self.opi(Op::LogicalAnd, bty, &[az, bz]);
        let us = match s {
            Scalar::F16 if self.caps.int16 => Some(Scalar::U16),
            Scalar::F32 => Some(Scalar::U32),
            Scalar::F64 if self.caps.int64 => Some(Scalar::U64),
            _ => None,
        };
        let z = if let Some(us) = us {
            let ut = self.vec_ty(us, n)?;
            let ab = self.opi(Op::Bitcast, ut, &[a]);
            let bb = self.opi(Op::Bitcast, ut, &[b]);
            let o = if min { Op::BitwiseOr } else { Op::BitwiseAnd };
            let z = self.opi(o, ut, &[ab, bb]);
            self.opi(Op::Bitcast, t, &[z])
        } else if min {
            let na = self.fop(Op::FNegate, t, &[a]);
            let nb = self.fop(Op::FNegate, t, &[b]);
            let s = self.fop(Op::FAdd, t, &[na, nb]);
            self.fop(Op::FNegate, t, &[s])
        } else {
            self.fop(Op::FAdd, t, &[a, b])
        };
        Ok(self.opi(Op::Select, t, &[both, z, r]))
    }

    /// f32 negation (`BitwiseXor`) or `abs` (`BitwiseAnd`) on the bit pattern: exact for
    /// subnormals and NaNs, where NVIDIA's `FAbs` flushes a subnormal to 0 even under
    /// `DenormPreserve` (H200, driver 580: abs(1e-40) gave 0).
    pub(super) fn sign_bit_op(&mut self, a: Word, n: u8, op: Op) -> SpirvResult<Word> {
        let ft = self.vec_ty(Scalar::F32, n)?;
        let ut = self.vec_ty(Scalar::U32, n)?;
        let mask = match op {
            Op::BitwiseXor => 0x8000_0000,
            _ => 0x7fff_ffff,
        };
        let m = self.konst(ut, mask);
        let bits = self.opi(Op::Bitcast, ut, &[a]);
        let r = self.opi(op, ut, &[bits, m]);
        Ok(self.opi(Op::Bitcast, ft, &[r]))
    }

    /// `r = a <op> b` (`+ - *` on floats) made exact where a compiler folded it to an
    /// operand or to `+0.0` ([`Caps::folds_float_identities`]): a zero result gets the sign
    /// IEEE gives it (a sum: negative only when both addends are -0; a product: the XOR of
    /// the signs), and a zero product of an infinite or NaN operand becomes NaN. The tests are
    /// on the bit patterns, which no float folding touches.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn zero_sign_fixup(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        n: u8,
        bty: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> SpirvResult<Word> {
        let t = self.vec_ty(s, n)?;
        let (us, sign_bit, exp_mask, nan_bits) = match s {
            Scalar::F16 => (Scalar::U16, 0x8000u64, 0x7c00u64, 0x7e00u64),
            Scalar::F64 => (
                Scalar::U64,
                0x8000_0000_0000_0000,
                0x7ff0_0000_0000_0000,
                0x7ff8_0000_0000_0000,
            ),
            _ => (Scalar::U32, 0x8000_0000, 0x7f80_0000, 0x7fc0_0000),
        };
        let ut = self.vec_ty(us, n)?;
        let sign = self.konst(ut, sign_bit);
        let mag = self.konst(ut, sign_bit - 1);
        let uzero = self.konst(ut, 0);
        let (ab, bb, rb) = (
            self.opi(Op::Bitcast, ut, &[a]),
            self.opi(Op::Bitcast, ut, &[b]),
            self.opi(Op::Bitcast, ut, &[r]),
        );
        let rmag = self.opi(Op::BitwiseAnd, ut, &[rb, mag]);
        let rzero = self.opi(Op::IEqual, bty, &[rmag, uzero]);
        let (sa, sb) = (
            self.opi(Op::BitwiseAnd, ut, &[ab, sign]),
            self.opi(Op::BitwiseAnd, ut, &[bb, sign]),
        );
        let zbits = match op {
            BinaryOp::Add => self.opi(Op::BitwiseAnd, ut, &[sa, sb]),
            BinaryOp::Div => {
                // A zero quotient has the XOR of the signs, but 0/0 and a NaN operand give
                // NaN (lavapipe folded `0.0 / x` to +0.0 whatever x was) and x / ±0 is ±inf
                // (lavapipe gave 0.0 for `x / 0.0` with the zero a constant).
                let x = self.opi(Op::BitwiseXor, ut, &[sa, sb]);
                let exp = self.konst(ut, exp_mask);
                let amag = self.opi(Op::BitwiseAnd, ut, &[ab, mag]);
                let bmag = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
                let azero = self.opi(Op::IEqual, bty, &[amag, uzero]);
                let bzero = self.opi(Op::IEqual, bty, &[bmag, uzero]);
                let anan = self.opi(Op::UGreaterThan, bty, &[amag, exp]);
                let bnan = self.opi(Op::UGreaterThan, bty, &[bmag, exp]);
                let b_bad = self.opi(Op::LogicalOr, bty, &[bzero, bnan]);
                let zero_bad = self.opi(Op::LogicalAnd, bty, &[azero, b_bad]);
                let bad = self.opi(Op::LogicalOr, bty, &[zero_bad, anan]);
                let inf = self.opi(Op::BitwiseOr, ut, &[x, exp]);
                let by_zero = self.opi(Op::Select, ut, &[bzero, inf, x]);
                let nan = self.konst(ut, nan_bits);
                self.opi(Op::Select, ut, &[bad, nan, by_zero])
            }
            BinaryOp::Sub => {
                let nsb = self.opi(Op::BitwiseXor, ut, &[sb, sign]);
                self.opi(Op::BitwiseAnd, ut, &[sa, nsb])
            }
            _ => {
                let x = self.opi(Op::BitwiseXor, ut, &[sa, sb]);
                let exp = self.konst(ut, exp_mask);
                let amag = self.opi(Op::BitwiseAnd, ut, &[ab, mag]);
                let bmag = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
                let ainf = self.opi(Op::UGreaterThanEqual, bty, &[amag, exp]);
                let binf = self.opi(Op::UGreaterThanEqual, bty, &[bmag, exp]);
                let bad = self.opi(Op::LogicalOr, bty, &[ainf, binf]);
                let nan = self.konst(ut, nan_bits);
                self.opi(Op::Select, ut, &[bad, nan, x])
            }
        };
        let o = self.opi(Op::Select, ut, &[rzero, zbits, rb]);
        Ok(self.opi(Op::Bitcast, t, &[o]))
    }

    /// A float `+ - * /` result made exact where the compiler folds float identities
    /// ([`Caps::folds_float_identities`]: `zero_sign_fixup`, where an integer type of the
    /// width exists); unchanged elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn identity_fixup(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        n: u8,
        bty: Word,
        t: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> SpirvResult<Word> {
        let ok_int = match s {
            Scalar::F16 => self.caps.int16,
            Scalar::F64 => self.caps.int64,
            _ => true,
        };
        if self.caps.folds_float_identities && ok_int && !self.wide.contains_key(&t) {
            self.zero_sign_fixup(op, s, n, bty, a, b, r)
        } else {
            Ok(r)
        }
    }

    /// Exact C `fmod(|x|, |y|)` of two `f32` values held in `f64` (the caller restores the
    /// sign and the special cases). Drivers lower `FRem` to `x - y·trunc(x / y)`, exact only
    /// while the quotient fits about 29 bits (lavapipe: `7.0 % 1e-40` gave 0), so the
    /// dividend is first reduced by `y·2^k` with `k` = the quotient's binary exponent - 25:
    /// each step is exact (every value stays a 24-bit multiple of y's ulp) and removes 25
    /// bits of quotient; 12 steps cover the f32 range (quotients up to 2^277).
    pub(super) fn fmod_f64_of_f32(&mut self, x: Word, y: Word, n: u8) -> SpirvResult<Word> {
        let dt = self.vec_ty(Scalar::F64, n)?;
        let it = self.vec_ty(Scalar::I32, n)?;
        let mut x = self.ext_inst(dt, glsl::FABS, &[x]);
        let y = self.ext_inst(dt, glsl::FABS, &[y]);
        let zero = self.konst(it, 0);
        let bias = self.konst(it, 25);
        for _ in 0..12 {
            let q = self.fop(Op::FDiv, dt, &[x, y]);
            let (_, e) = self.frexp(dt, it, q);
            let k = self.opi(Op::ISub, it, &[e, bias]);
            let k = self.ext_inst(it, glsl::SMAX, &[k, zero]);
            let ys = self.ext_inst(dt, glsl::LDEXP, &[y, k]);
            x = self.frem_f64(dt, x, ys);
        }
        Ok(x)
    }

    /// An `f64` (of `n` lanes) rounded to `f32` with subnormal results kept: where the
    /// result is below 2^-126 its bits are built as the integer `round(|r| · 2^149)` (exact in
    /// f64) under the sign, since `FConvert` flushes subnormal results on drivers without
    /// `DenormPreserve` for f32 (lavapipe: `7.0 % 1e-40` gave 0).
    pub(super) fn f64_to_f32(&mut self, r: Word, n: u8) -> SpirvResult<Word> {
        let flushes = self.caps.flushes_f32_subnormals;
        let t = self.vec_ty(Scalar::F32, n)?;
        let dt = self.vec_ty(Scalar::F64, n)?;
        let ut = self.vec_ty(Scalar::U32, n)?;
        let bt = self.boolt();
        let bty = if n > 1 {
            self.tk(TyKey::Vec(bt, n as u32))
        } else {
            bt
        };
        let c = self.opi(Op::FConvert, t, &[r]);
        let cb = self.opi(Op::Bitcast, ut, &[c]);
        let ar = self.ext_inst(dt, glsl::FABS, &[r]);
        let lim = self.fconst(dt, f64::from(f32::MIN_POSITIVE));
        let small = self.opi(Op::FOrdLessThan, bty, &[ar, lim]);
        let scale = self.fconst(dt, 2f64.powi(149));
        let sc = self.fop(Op::FMul, dt, &[ar, scale]);
        let sc = self.ext_inst(dt, glsl::ROUND_EVEN, &[sc]);
        let m = self.opi(Op::ConvertFToU, ut, &[sc]);
        let sign = self.konst(ut, 0x8000_0000);
        let sb = self.opi(Op::BitwiseAnd, ut, &[cb, sign]);
        // A flushing `FConvert` may also drop the sign of what it flushed; a negative `r`
        // says it (a zero `r` converts exactly, its sign included).
        let sb = if flushes {
            let dz = self.fconst(dt, 0.0);
            let neg = self.opi(Op::FOrdLessThan, bty, &[r, dz]);
            self.opi(Op::Select, ut, &[neg, sign, sb])
        } else {
            sb
        };
        let sub = self.opi(Op::BitwiseOr, ut, &[m, sb]);
        let bits = self.opi(Op::Select, ut, &[small, sub, cb]);
        Ok(self.opi(Op::Bitcast, t, &[bits]))
    }

    /// f32 `a <o> b` (`+ - *`) on a device that flushes f32 subnormals: the f32 operation,
    /// and the exact f64 path (exact in f64 for two f32 operands, one rounding to f32 from
    /// the bits) behind a branch taken only where a flush may have changed the result. One
    /// test of the result decides (an `FSETP` with an abs modifier): a flushed result or
    /// product is zero; a flushed subnormal operand changes a sum only if the other addend
    /// is below 2^-101 (at or above it, its ulp is at least 2^-124, four times any
    /// subnormal, so the exact sum rounds to it anyway), where the result is below 2^-101
    /// too; a flushed operand times an infinity is NaN. So: `|r| < 2^-126` for a product,
    /// `|r| < 2^-101` for a sum, or NaN. (Testing operands and result bit by bit cost saxpy
    /// on the H200 40 % of its time in integer work; the f64 path on every operation, 30 %.)
    #[allow(clippy::too_many_arguments)]
    pub(super) fn f32_unflushed(
        &mut self,
        o: Op,
        n: u8,
        t: Word,
        bty: Word,
        a: Word,
        b: Word,
    ) -> SpirvResult<Word> {
        let fast = self.fop(o, t, &[a, b]);
        let limit = if o == Op::FMul {
            f32::MIN_POSITIVE
        } else {
            2f32.powi(-101)
        };
        let limit = self.konst(t, limit.to_bits() as u64);
        let mag = self.ext_inst(t, glsl::FABS, &[fast]);
        let lanes = self.opi(Op::FUnordLessThan, bty, &[mag, limit]);
        let bt = self.boolt();
        let any = if n > 1 {
            self.opi(Op::Any, bt, &[lanes])
        } else {
            lanes
        };
        let from = self.cur_label;
        let (slow_bb, merge) = (self.b.id(), self.b.id());
        self.sel_merge(merge);
        self.branch_cond(any, slow_bb, merge);
        self.block(slow_bb);
        self.cap(Capability::Float64);
        let dt = self.vec_ty(Scalar::F64, n)?;
        let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
        let r = self.fop(o, dt, &[da, db]);
        let slow = self.f64_to_f32(r, n)?;
        let slow = if n > 1 {
            self.opi(Op::Select, t, &[lanes, slow, fast])
        } else {
            slow
        };
        let slow_end = self.cur_label;
        self.branch(merge);
        self.block(merge);
        Ok(self.op(Op::Phi, t, ids(&[fast, from, slow, slow_end])))
    }

    /// Whether f32 `+ - *` are computed in f64 ([`Caps::flushes_f32_subnormals`]).
    pub(super) fn f32_in_f64(&self) -> bool {
        self.caps.flushes_f32_subnormals && self.caps.float64
    }

    /// An `f32` (of `n` lanes) widened to `f64` exactly. `FConvert` normally; on a device
    /// that flushes f32 subnormals ([`Caps::flushes_f32_subnormals`]) an operand with a zero
    /// exponent field is built from its bits instead, as `±mantissa · 2^-149` (normal and
    /// exact in f64), since the flush may happen on `FConvert`'s f32 operand.
    pub(super) fn widen_f32(&mut self, v: Word, n: u8) -> SpirvResult<Word> {
        let dt = self.vec_ty(Scalar::F64, n)?;
        let c = self.opi(Op::FConvert, dt, &[v]);
        if !self.caps.flushes_f32_subnormals {
            return Ok(c);
        }
        let ut = self.vec_ty(Scalar::U32, n)?;
        let bt = self.boolt();
        let bty = if n > 1 {
            self.tk(TyKey::Vec(bt, n as u32))
        } else {
            bt
        };
        let bits = self.opi(Op::Bitcast, ut, &[v]);
        let (expm, mantm, signm, zero) = (
            self.konst(ut, 0x7f80_0000),
            self.konst(ut, 0x007f_ffff),
            self.konst(ut, 0x8000_0000),
            self.konst(ut, 0),
        );
        let e = self.opi(Op::BitwiseAnd, ut, &[bits, expm]);
        let tiny = self.opi(Op::IEqual, bty, &[e, zero]);
        let m = self.opi(Op::BitwiseAnd, ut, &[bits, mantm]);
        let mf = self.opi(Op::ConvertUToF, dt, &[m]);
        let scale = self.fconst(dt, 2f64.powi(-149));
        let mag = self.fop(Op::FMul, dt, &[mf, scale]);
        let neg_mag = self.fop(Op::FNegate, dt, &[mag]);
        let sb = self.opi(Op::BitwiseAnd, ut, &[bits, signm]);
        let neg = self.opi(Op::INotEqual, bty, &[sb, zero]);
        let built = self.opi(Op::Select, dt, &[neg, neg_mag, mag]);
        Ok(self.opi(Op::Select, dt, &[tiny, built, c]))
    }

    /// Whether the float `x` has its sign bit set (`-0.0` included, NaN not): `x < 0`, or
    /// `x == 0` with `1 / x < 0`.
    pub(super) fn negative(&mut self, s: Scalar, t: Word, bty: Word, x: Word) -> Word {
        let zero = self.konst(t, 0);
        let lt = self.opi(Op::FOrdLessThan, bty, &[x, zero]);
        let eq = self.opi(Op::FOrdEqual, bty, &[x, zero]);
        let one_bits = match s {
            Scalar::F16 => 0x3c00,
            Scalar::F64 => 1.0f64.to_bits(),
            _ => 1.0f32.to_bits() as u64,
        };
        let one = self.konst(t, one_bits);
        let inv = self.fop(Op::FDiv, t, &[one, x]);
        let ilt = self.opi(Op::FOrdLessThan, bty, &[inv, zero]);
        let negzero = self.opi(Op::LogicalAnd, bty, &[eq, ilt]);
        self.opi(Op::LogicalOr, bty, &[lt, negzero])
    }

    /// C `fmod`'s special cases over a computed `r = a % b`, which SPIR-V leaves undefined
    /// (lavapipe gave `0.0 % 0.0 == 0`): NaN when either operand is NaN, `a` is infinite or
    /// `b` is zero; `a` itself when `b` is infinite and `a` finite.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn frem_edges(
        &mut self,
        s: Scalar,
        n: u8,
        t: Word,
        bty: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> SpirvResult<Word> {
        let nan_bits = match s {
            Scalar::F16 => 0x7e00,
            Scalar::F64 => 0x7ff8_0000_0000_0000,
            _ => 0x7fc0_0000,
        };
        let nan = self.konst(t, nan_bits);
        let zero = self.konst(t, 0);
        let an = self.opi(Op::IsNan, bty, &[a]);
        let bn = self.opi(Op::IsNan, bty, &[b]);
        let ai = self.opi(Op::IsInf, bty, &[a]);
        let bi = self.opi(Op::IsInf, bty, &[b]);
        let bz = if s == Scalar::F32 && self.caps.flushes_f32_subnormals {
            // On the bits: a flushing `FOrdEqual` finds a subnormal divisor equal to 0.
            let ut = self.vec_ty(Scalar::U32, n)?;
            let mag = self.konst(ut, 0x7fff_ffff);
            let uz = self.konst(ut, 0);
            let bb = self.opi(Op::Bitcast, ut, &[b]);
            let bm = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
            self.opi(Op::IEqual, bty, &[bm, uz])
        } else {
            self.opi(Op::FOrdEqual, bty, &[b, zero])
        };
        let bad = self.opi(Op::LogicalOr, bty, &[an, bn]);
        let bad = self.opi(Op::LogicalOr, bty, &[bad, ai]);
        let bad = self.opi(Op::LogicalOr, bty, &[bad, bz]);
        let r = self.opi(Op::Select, t, &[bi, a, r]);
        Ok(self.opi(Op::Select, t, &[bad, nan, r]))
    }

    /// An `f64` constant of type `dt` (splatted across its lanes).
    pub(super) fn fconst(&mut self, dt: Word, v: f64) -> Word {
        self.konst(dt, v.to_bits())
    }

    pub(super) fn bool_like(&mut self, ty: Option<Type>) -> SpirvResult<Word> {
        let bt = self.boolt();
        Ok(match ty.and_then(|t| t.lanes()) {
            Some(n) if n > 1 => self.tk(TyKey::Vec(bt, n as u32)),
            _ => bt,
        })
    }
}
