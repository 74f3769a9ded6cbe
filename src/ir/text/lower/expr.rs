//! Expressions: the peer groups of literal typing, built-in calls, wave verbs and operators
//! (the `Lowerer`'s expression half; statements, types and signatures are in `lower.rs`).

use super::*;

impl Lowerer<'_> {
    /// Lowers a peer group (see the module doc): all flexible members take `expect`;
    /// otherwise flexible members take the type of the first non-flexible one.
    pub(super) fn peers(
        &mut self,
        cx: &mut FunctionScope,
        members: &[&ast::Expr],
        expect: Option<Scalar>,
    ) -> LResult<Vec<ExprId>> {
        let flex: Vec<bool> = members.iter().map(|e| is_flex(e)).collect();
        let mut ids: Vec<LResult<ExprId>> = vec![Err(()); members.len()];
        if flex.iter().all(|f| *f) {
            for (i, m) in members.iter().enumerate() {
                ids[i] = self.expr(cx, m, expect);
            }
        } else {
            for (i, m) in members.iter().enumerate() {
                if !flex[i] {
                    ids[i] = self.expr(cx, m, None);
                }
            }
            let anchor = flex.iter().position(|f| !*f).and_then(|i| ids[i].ok());
            let ty = anchor.and_then(|a| scalar_of(typeck::expr_type(&self.module, &cx.func, a)));
            for (i, m) in members.iter().enumerate() {
                if flex[i] {
                    ids[i] = self.expr(cx, m, ty);
                }
            }
        }
        ids.into_iter().collect()
    }

    pub(super) fn literal(
        &mut self,
        num: &Number,
        neg: bool,
        expect: Option<Scalar>,
        span: Span,
    ) -> LResult<Literal> {
        match num {
            Number::Int { value, hex, suffix } => {
                let ty = suffix.unwrap_or_else(|| infer_literal(expect, false));
                let v = if neg {
                    -(*value as i128)
                } else {
                    *value as i128
                };
                literal::int_literal(v, *hex, ty).ok_or_else(|| {
                    self.error(
                        codes::RANGE,
                        span,
                        format!("integer literal {v} does not fit {}", ty.name()),
                    )
                })
            }
            Number::Float { text, suffix } => {
                let ty = suffix.unwrap_or_else(|| infer_literal(expect, true));
                let Some(v) = literal::parse_float(text, ty) else {
                    self.error(codes::LITERAL, span, "malformed float literal");
                    return Err(());
                };
                if v.is_infinite() && text != "inf" {
                    self.error(
                        codes::RANGE,
                        span,
                        format!("float literal out of range for {}", ty.name()),
                    );
                    return Err(());
                }
                Ok(Literal::Float {
                    value: if neg { -v } else { v },
                    ty,
                })
            }
        }
    }

    pub(super) fn expr(
        &mut self,
        cx: &mut FunctionScope,
        e: &ast::Expr,
        expect: Option<Scalar>,
    ) -> LResult<ExprId> {
        let expr = self.expr_kind(cx, e, expect)?;
        Ok(cx.func.add_expr(expr, e.span))
    }

    pub(super) fn expr_kind(
        &mut self,
        cx: &mut FunctionScope,
        e: &ast::Expr,
        expect: Option<Scalar>,
    ) -> LResult<Expr> {
        Ok(match &e.kind {
            ExprKind::Num { num, neg } => Expr::Literal(self.literal(num, *neg, expect, e.span)?),
            ExprKind::Bool(b) => Expr::Literal(Literal::Bool(*b)),
            ExprKind::Name(n) => match cx.resolve(n) {
                Some(Resolved::Local(l)) => Expr::Local(l),
                Some(Resolved::Param(i)) => Expr::Param(i),
                Some(Resolved::TParam(i)) => Expr::TemplateParam(i),
                Some(Resolved::Shared(_)) => {
                    self.error(
                        codes::BUILTIN,
                        e.span,
                        format!("`{n}` is a shared array: read an element `{n}[i]`"),
                    );
                    return Err(());
                }
                None => match n.as_str() {
                    "wave_width" => Expr::Builtin(Builtin::WaveWidth),
                    "lane_id" => Expr::Builtin(Builtin::LaneId),
                    _ if coordinate(n, Dim::X).is_some() => {
                        self.error(
                            codes::BUILTIN,
                            e.span,
                            format!("`{n}` needs a dimension: `{n}.x`, `{n}.y` or `{n}.z`"),
                        );
                        return Err(());
                    }
                    _ => {
                        self.error(codes::UNKNOWN_NAME, e.span, format!("unknown name `{n}`"));
                        return Err(());
                    }
                },
            },
            ExprKind::StructLit { name, .. } => {
                // Only without any `struct` item (`super::structs` lowers literals away).
                self.error(
                    codes::UNKNOWN_TYPE,
                    e.span,
                    format!("unknown struct `{name}`"),
                );
                return Err(());
            }
            ExprKind::TagPath { set, member } => {
                let Some(h) = self.set_names.get(set).copied() else {
                    self.error(
                        codes::UNKNOWN_TYPE,
                        e.span,
                        format!("unknown tag set `{set}`"),
                    );
                    return Err(());
                };
                let index = self.module.tag_sets[h]
                    .members
                    .iter()
                    .position(|f| self.module.functions[*f].name == *member);
                match index {
                    Some(i) => Expr::Tag {
                        set: h,
                        index: i as u32,
                    },
                    None => {
                        self.error(
                            codes::UNKNOWN_FUNCTION,
                            e.span,
                            format!("`{member}` is not a member of tag set `{set}`"),
                        );
                        return Err(());
                    }
                }
            }
            ExprKind::Unary(op, a) => Expr::Unary {
                op: *op,
                arg: self.expr(cx, a, expect)?,
            },
            ExprKind::Binary(op, a, b) => {
                let group_expect = if is_arith(*op) { expect } else { None };
                let ids = if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
                    let l = self.expr(cx, a, None);
                    let r = self.expr(cx, b, None);
                    vec![l?, r?]
                } else {
                    self.peers(cx, &[a, b], group_expect)?
                };
                Expr::Binary {
                    op: *op,
                    lhs: ids[0],
                    rhs: ids[1],
                }
            }
            ExprKind::IfElse(c, a, b) => {
                let cond = self.expr(cx, c, None);
                let arms = self.peers(cx, &[a, b], expect)?;
                Expr::IfElse {
                    cond: cond?,
                    accept: arms[0],
                    reject: arms[1],
                }
            }
            ExprKind::Cast(a, t) => {
                let TypeKind::Scalar(to) = t.kind else {
                    self.error(
                        codes::BUILTIN,
                        t.span,
                        "`as` converts to a scalar type (the lane count is kept)",
                    );
                    return Err(());
                };
                Expr::Cast {
                    to,
                    arg: self.expr(cx, a, None)?,
                }
            }
            ExprKind::Field(base, field, fspan) => {
                if let ExprKind::Name(n) = &base.kind {
                    if cx.resolve(n).is_none() && coordinate(n, Dim::X).is_some() {
                        let dim = match field.as_str() {
                            "x" => Dim::X,
                            "y" => Dim::Y,
                            "z" => Dim::Z,
                            _ => {
                                self.error(
                                    codes::BUILTIN,
                                    *fspan,
                                    format!("`{n}` has dimensions `.x`, `.y` and `.z`"),
                                );
                                return Err(());
                            }
                        };
                        return Ok(Expr::Builtin(coordinate(n, dim).unwrap_or(Builtin::LaneId)));
                    }
                }
                let lanes: Option<Vec<u8>> = field.chars().map(lane_of).collect();
                let lanes = match lanes {
                    Some(l) if !l.is_empty() && l.len() <= 16 => l,
                    _ => {
                        self.error(
                            codes::BUILTIN,
                            *fspan,
                            format!("unknown lane `.{field}`: lanes are `x`, `y`, `z`, `w`"),
                        );
                        return Err(());
                    }
                };
                let vector = self.expr(cx, base, None)?;
                if lanes.len() == 1 {
                    Expr::Extract {
                        vector,
                        lane: lanes[0],
                    }
                } else {
                    Expr::Swizzle { vector, lanes }
                }
            }
            ExprKind::Index(..)
                if self
                    .nd_chain(cx, e)
                    .is_some_and(|(_, dims, idx)| idx.len() <= dims.len()) =>
            {
                let (base, dims, idx) = self.nd_chain(cx, e).expect("an nd chain");
                let index = self.flat_index(cx, &dims, &idx, e.span)?;
                Expr::Index { base, index }
            }
            ExprKind::Index(base, index) => {
                if let ExprKind::Name(n) = &base.kind {
                    let b = match cx.resolve(n) {
                        Some(Resolved::Param(i)) => {
                            let addressable = cx.func.params[i as usize].ty.is_memory();
                            Some((Base::Param(i), addressable))
                        }
                        Some(Resolved::Shared(h)) => Some((Base::Shared(h), true)),
                        Some(Resolved::Local(l)) => Some((
                            Base::Local(l),
                            matches!(cx.func.locals[l].ty, Type::Array { .. }),
                        )),
                        _ => None,
                    };
                    if let Some((b, addressable)) = b {
                        let is_lit = matches!(
                            index.kind,
                            ExprKind::Num {
                                num: Number::Int { .. },
                                neg: false
                            }
                        );
                        if addressable || !is_lit {
                            let index = self.expr(cx, index, Some(Scalar::U32))?;
                            return Ok(Expr::Index { base: b, index });
                        }
                    }
                }
                match self.lane_literal(index) {
                    Some(lane) => {
                        let lane = lane?;
                        Expr::Extract {
                            vector: self.expr(cx, base, None)?,
                            lane,
                        }
                    }
                    None => {
                        self.error(
                            codes::BUILTIN,
                            index.span,
                            "a vector lane index is an integer literal",
                        );
                        return Err(());
                    }
                }
            }
            ExprKind::Call {
                name,
                generics,
                args,
            } => self.call(cx, name, generics.as_deref(), args, expect, e.span)?,
        })
    }

    pub(super) fn generic_shape(
        &mut self,
        name: &str,
        generics: &[Generic],
        span: Span,
    ) -> LResult<(crate::ir::MatrixRole, Scalar, u8, u8)> {
        if let [Generic::Name(r, rspan), Generic::Type(t), Generic::Int(m, mspan), Generic::Int(n, nspan)] =
            generics
        {
            let Some(role) = super::super::parser::role_from_name(r) else {
                self.error(
                    codes::BUILTIN,
                    *rspan,
                    format!("unknown matrix role `{r}`: a, b or acc"),
                );
                return Err(());
            };
            let TypeKind::Scalar(s) = t.kind else {
                self.error(codes::BUILTIN, t.span, "a matrix element is a scalar type");
                return Err(());
            };
            let m = u8::try_from(*m)
                .map_err(|_| self.error(codes::RANGE, *mspan, "dimension too large"))?;
            let n = u8::try_from(*n)
                .map_err(|_| self.error(codes::RANGE, *nspan, "dimension too large"))?;
            return Ok((role, s, m, n));
        }
        self.error(
            codes::BUILTIN,
            span,
            format!("`{name}` takes `<role, scalar, rows, cols>`: `{name}<acc, f32, 16, 16>`"),
        );
        Err(())
    }

    pub(super) fn call(
        &mut self,
        cx: &mut FunctionScope,
        name: &str,
        generics: Option<&[Generic]>,
        args: &[Arg],
        expect: Option<Scalar>,
        span: Span,
    ) -> LResult<Expr> {
        if let Some(op) = wave_op(name) {
            return self.wave_call(cx, op, name, args);
        }
        let (pos, align) = self.split_args(args, name == "vload", span)?;
        if let Some(g) = generics {
            return self.generic_call(cx, name, g, &pos, align, span);
        }
        if name.starts_with("vec") && super::super::parser::GENERIC_CALLS.contains(&name)
            || matches!(name, "bitcast" | "vload" | "matrix_fill" | "matrix_load")
        {
            self.error(
                codes::BUILTIN,
                span,
                format!("`{name}` needs generic arguments: `{name}<...>(...)`"),
            );
            return Err(());
        }
        if let Some(fun) = MathFn::from_name(name) {
            let args = self.peers(cx, &pos, expect)?;
            return Ok(Expr::Math { fun, args });
        }
        if let Some(op) = AtomicOp::from_name(name) {
            return self.atomic(cx, op, &pos, span);
        }
        if let Some(op) = BitOp::from_name(name) {
            return self.bits(cx, op, &pos, expect);
        }
        if matches!(name, "atomic_load" | "atomic_store") {
            return self.atomic_access(cx, name == "atomic_store", &pos, span);
        }
        match name {
            "select" => {
                self.arity(name, &pos, 3, span)?;
                let cond = self.expr(cx, pos[0], None);
                let arms = self.peers(cx, &pos[1..], expect)?;
                Ok(Expr::Select {
                    cond: cond?,
                    accept: arms[0],
                    reject: arms[1],
                })
            }
            "swizzle" => {
                if pos.len() < 2 {
                    self.error(
                        codes::BUILTIN,
                        span,
                        "`swizzle` takes a vector and lanes: `swizzle(v, 4, 5)`",
                    );
                    return Err(());
                }
                let mut lanes = Vec::new();
                for l in &pos[1..] {
                    match self.lane_literal(l) {
                        Some(lane) => lanes.push(lane?),
                        None => {
                            self.error(
                                codes::BUILTIN,
                                l.span,
                                "a swizzle lane is an integer literal",
                            );
                            return Err(());
                        }
                    }
                }
                let vector = self.expr(cx, pos[0], None)?;
                Ok(Expr::Swizzle { vector, lanes })
            }
            "len" => {
                self.arity(name, &pos, 1, span)?;
                match self.base(cx, pos[0])? {
                    Base::Param(i) => Ok(Expr::Len(i)),
                    _ => {
                        self.error(
                            codes::BUILTIN,
                            pos[0].span,
                            "`len` takes a buffer parameter",
                        );
                        Err(())
                    }
                }
            }
            "dispatch" => {
                if pos.is_empty() {
                    self.error(
                        codes::BUILTIN,
                        span,
                        "`dispatch` takes a tag and the arguments",
                    );
                    return Err(());
                }
                let tag = self.expr(cx, pos[0], None)?;
                let params: Vec<Type> = match typeck::expr_type(&self.module, &cx.func, tag) {
                    Some(Type::Tag(set)) => self
                        .module
                        .tag_sets
                        .try_get(set)
                        .and_then(|s| s.members.first())
                        .and_then(|f| self.module.functions.try_get(*f))
                        .map(|f| f.params.iter().map(|p| p.ty).collect())
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                let args = self.args(cx, &pos[1..], &params)?;
                Ok(Expr::Dispatch { tag, args })
            }
            "matrix_mma" => {
                self.arity(name, &pos, 3, span)?;
                let a = self.expr(cx, pos[0], None);
                let b = self.expr(cx, pos[1], None);
                let c = self.expr(cx, pos[2], None);
                Ok(Expr::MatrixMma {
                    a: a?,
                    b: b?,
                    c: c?,
                })
            }
            "barrier" | "wave_barrier" | "vstore" | "matrix_store" | "fence" => {
                self.error(
                    codes::BUILTIN,
                    span,
                    format!("`{name}(...)` is a statement, not a value"),
                );
                Err(())
            }
            _ => {
                let Some(f) = self.fn_names.get(name).copied() else {
                    self.error(
                        codes::UNKNOWN_FUNCTION,
                        span,
                        format!("unknown function `{name}`"),
                    );
                    return Err(());
                };
                let params: Vec<Type> = self.module.functions[f]
                    .params
                    .iter()
                    .map(|p| p.ty)
                    .collect();
                let args = self.args(cx, &pos, &params)?;
                Ok(Expr::Call { function: f, args })
            }
        }
    }

    /// Call arguments, each typed by its parameter; a memory parameter ([`Type::is_memory`])
    /// takes the name of a buffer, shared array or private array, passed by reference.
    pub(super) fn args(
        &mut self,
        cx: &mut FunctionScope,
        pos: &[&ast::Expr],
        params: &[Type],
    ) -> LResult<Vec<ExprId>> {
        let ids: Vec<LResult<ExprId>> = pos
            .iter()
            .enumerate()
            .map(|(i, a)| match params.get(i) {
                Some(t) if t.is_memory() => {
                    let ExprKind::Name(_) = &a.kind else {
                        self.error(
                            codes::MEMORY_ARG,
                            a.span,
                            "a helper's buffer or array parameter takes the name of a buffer, \
                             shared array or private array",
                        );
                        return Err(());
                    };
                    let base = self.base(cx, a)?;
                    Ok(cx.func.add_expr(Expr::Ref(base), a.span))
                }
                _ => {
                    let expect = scalar_of(params.get(i).copied());
                    self.expr(cx, a, expect)
                }
            })
            .collect();
        ids.into_iter().collect()
    }

    /// A bit operation: the value arguments are peers typed by the context, the amounts `u32`.
    pub(super) fn bits(
        &mut self,
        cx: &mut FunctionScope,
        op: BitOp,
        pos: &[&ast::Expr],
        expect: Option<Scalar>,
    ) -> LResult<Expr> {
        let values: Vec<&ast::Expr> = (0..pos.len())
            .filter(|&i| !op.is_amount(i))
            .map(|i| pos[i])
            .collect();
        let mut typed = self.peers(cx, &values, expect)?.into_iter();
        let mut args = Vec::with_capacity(pos.len());
        let mut ok = true;
        for (i, a) in pos.iter().enumerate() {
            if op.is_amount(i) {
                match self.expr(cx, a, Some(Scalar::U32)) {
                    Ok(id) => args.push(id),
                    Err(()) => ok = false,
                }
            } else if let Some(id) = typed.next() {
                args.push(id);
            }
        }
        if !ok {
            return Err(());
        }
        Ok(Expr::Bits { op, args })
    }

    /// `atomic_load(b[i] [, order])` or `atomic_store(b[i], value [, order])`.
    pub(super) fn atomic_access(
        &mut self,
        cx: &mut FunctionScope,
        store: bool,
        pos: &[&ast::Expr],
        span: Span,
    ) -> LResult<Expr> {
        let needed = if store { 2 } else { 1 };
        let name = if store { "atomic_store" } else { "atomic_load" };
        let order = match pos.len() {
            n if n == needed => MemoryOrder::Relaxed,
            n if n == needed + 1 => match &pos[needed].kind {
                ExprKind::Name(n) if MemoryOrder::from_name(n).is_some() => {
                    MemoryOrder::from_name(n).unwrap_or(MemoryOrder::Relaxed)
                }
                _ => {
                    self.error(
                        codes::ATOMIC_ORDER,
                        pos[needed].span,
                        "expected a memory order: relaxed, acquire, release, acq_rel, seq_cst",
                    );
                    return Err(());
                }
            },
            _ => {
                self.error(
                    codes::ATOMIC_ORDER,
                    span,
                    format!(
                        "`{name}` takes {needed} argument{} and an optional memory order",
                        if store { "s" } else { "" }
                    ),
                );
                return Err(());
            }
        };
        let place = self.place(cx, pos[0])?;
        if !store {
            return Ok(Expr::AtomicLoad { order, place });
        }
        let elem = scalar_of(typeck::place_type(&self.module, &cx.func, &place));
        let value = self.expr(cx, pos[1], elem)?;
        Ok(Expr::AtomicStore {
            order,
            place,
            value,
        })
    }

    pub(super) fn atomic(
        &mut self,
        cx: &mut FunctionScope,
        op: AtomicOp,
        pos: &[&ast::Expr],
        span: Span,
    ) -> LResult<Expr> {
        let needed = if op == AtomicOp::CompareExchange {
            3
        } else {
            2
        };
        let order = if pos.len() == needed + 1 {
            let last = pos[needed];
            match &last.kind {
                ExprKind::Name(n) if MemoryOrder::from_name(n).is_some() => {
                    MemoryOrder::from_name(n).unwrap_or(MemoryOrder::Relaxed)
                }
                _ => {
                    self.error(
                        codes::BUILTIN,
                        last.span,
                        "expected a memory order: relaxed, acquire, release, acq_rel, seq_cst",
                    );
                    return Err(());
                }
            }
        } else if pos.len() == needed {
            MemoryOrder::Relaxed
        } else {
            self.error(
                codes::BUILTIN,
                span,
                format!(
                    "`{}` takes {needed} arguments and an optional memory order",
                    op.name()
                ),
            );
            return Err(());
        };
        let place = self.place(cx, pos[0])?;
        let elem = scalar_of(typeck::place_type(&self.module, &cx.func, &place));
        let (compare, value) = if op == AtomicOp::CompareExchange {
            let c = self.expr(cx, pos[1], elem);
            let v = self.expr(cx, pos[2], elem);
            (Some(c?), v?)
        } else {
            (None, self.expr(cx, pos[1], elem)?)
        };
        Ok(Expr::Atomic {
            op,
            order,
            place,
            value,
            compare,
        })
    }

    pub(super) fn generic_call(
        &mut self,
        cx: &mut FunctionScope,
        name: &str,
        generics: &[Generic],
        pos: &[&ast::Expr],
        align: Option<u8>,
        span: Span,
    ) -> LResult<Expr> {
        match name {
            "vec2" | "vec3" | "vec4" | "vec8" | "vec16" => {
                let lanes: u8 = name[3..].parse().unwrap_or(0);
                let scalar = match generics {
                    [Generic::Type(ast::Type {
                        kind: TypeKind::Scalar(s),
                        ..
                    })] => *s,
                    _ => {
                        self.error(
                            codes::BUILTIN,
                            span,
                            format!("`{name}` takes a scalar type: `{name}<f32>(...)`"),
                        );
                        return Err(());
                    }
                };
                if pos.is_empty() {
                    self.error(
                        codes::BUILTIN,
                        span,
                        format!("`{name}<{}>` needs parts", scalar.name()),
                    );
                    return Err(());
                }
                let ids: Vec<LResult<ExprId>> =
                    pos.iter().map(|p| self.expr(cx, p, Some(scalar))).collect();
                let parts: Vec<ExprId> = ids.into_iter().collect::<LResult<_>>()?;
                if parts.len() == 1
                    && !matches!(
                        typeck::expr_type(&self.module, &cx.func, parts[0]),
                        Some(Type::Vector(..))
                    )
                {
                    return Ok(Expr::Splat {
                        lanes,
                        value: parts[0],
                    });
                }
                Ok(Expr::Compose {
                    scalar,
                    lanes,
                    parts,
                })
            }
            "bitcast" => {
                let [Generic::Type(t)] = generics else {
                    self.error(
                        codes::BUILTIN,
                        span,
                        "`bitcast` takes one type: `bitcast<u32>(x)`",
                    );
                    return Err(());
                };
                let to = self.ty(&mut cx.func, t)?;
                self.arity(name, pos, 1, span)?;
                Ok(Expr::Bitcast {
                    to,
                    arg: self.expr(cx, pos[0], None)?,
                })
            }
            "vload" => {
                let [Generic::Int(n, nspan)] = generics else {
                    self.error(
                        codes::BUILTIN,
                        span,
                        "`vload` takes a lane count: `vload<4>(b, i)`",
                    );
                    return Err(());
                };
                let lanes = u8::try_from(*n)
                    .map_err(|_| self.error(codes::RANGE, *nspan, "too many lanes"))?;
                self.arity(name, pos, 2, span)?;
                let base = self.base(cx, pos[0]);
                let index = self.expr(cx, pos[1], Some(Scalar::U32));
                Ok(Expr::VLoad {
                    base: base?,
                    index: index?,
                    lanes,
                    align,
                })
            }
            "matrix_fill" => {
                let (role, scalar, rows, cols) = self.generic_shape(name, generics, span)?;
                self.arity(name, pos, 1, span)?;
                Ok(Expr::MatrixFill {
                    role,
                    scalar,
                    rows,
                    cols,
                    value: self.expr(cx, pos[0], Some(scalar))?,
                })
            }
            "matrix_load" => {
                let (role, scalar, rows, cols) = self.generic_shape(name, generics, span)?;
                self.arity(name, pos, 3, span)?;
                let base = self.base(cx, pos[0]);
                let offset = self.expr(cx, pos[1], Some(Scalar::U32));
                let stride = self.expr(cx, pos[2], Some(Scalar::U32));
                Ok(Expr::MatrixLoad {
                    role,
                    scalar,
                    rows,
                    cols,
                    base: base?,
                    offset: offset?,
                    stride: stride?,
                })
            }
            _ => {
                self.error(
                    codes::BUILTIN,
                    span,
                    format!("`{name}` takes no generic arguments"),
                );
                Err(())
            }
        }
    }
}
