//! Function bodies: expression trees (single use, reachability, type errors from
//! [`typeck`](crate::ir::typeck)), statements (places, conditions, loops, returns), local
//! scopes and loop labels.

use super::{codes, Sink};
use crate::ir::typeck::{self, base_name, base_writable, type_name, FunctionTypes};
use crate::ir::{
    Base, Block, Expr, ExprId, Function, FunctionKind, Handle, Literal, Local, LoopKind, Module,
    Place, Scalar, Span, Stmt, StmtKind, Type,
};

pub(super) fn check(module: &Module, f: &Function, typed: &FunctionTypes, sink: &mut Sink) {
    uses(f, sink);
    dims(f, sink);
    super::memcall::check(module, f, sink);
    for (e, err) in typed.errors() {
        sink.at(f, err.code, f.expr_span(e), err.message.clone());
    }
    let mut w = Walker {
        module,
        f,
        typed,
        sink,
        in_scope: vec![false; f.locals.len()],
        declared: vec![false; f.locals.len()],
        loops: Vec::new(),
    };
    w.block(&f.body);
    if f.kind == FunctionKind::Device && f.ret.is_some() && !always_returns(&f.body) {
        sink.at(
            f,
            codes::RETURN,
            f.span,
            format!(
                "helper `{}` may reach its end without returning a value",
                f.name
            ),
        );
    }
}

/// Multi-dimensional arrays: each names a private array local or a fixed-length shared
/// array once, with two or more lengths whose product is its element count.
fn dims(f: &Function, sink: &mut Sink) {
    for (i, (base, dims)) in f.array_dims.iter().enumerate() {
        let (len, span, name) = match *base {
            Base::Local(l) => match f.locals.try_get(l) {
                Some(Local {
                    ty: Type::Array { len, .. },
                    span,
                    name,
                }) => (Some(*len), *span, name.clone()),
                Some(l) => (None, l.span, l.name.clone()),
                None => (None, f.span, format!("{l:?}")),
            },
            Base::Shared(h) => match f.shared.try_get(h) {
                Some(s) => (s.len, s.span, s.name.clone()),
                None => (None, f.span, format!("{h:?}")),
            },
            Base::Param(p) => (None, f.span, format!("parameter {p}")),
        };
        let product = dims.iter().try_fold(1u32, |a, &d| a.checked_mul(d));
        let problem = if f.array_dims[..i].iter().any(|(b, _)| b == base) {
            Some("is given dimensions twice".to_string())
        } else if dims.len() < 2 {
            Some(format!(
                "has {} dimension(s); a shape has two or more",
                dims.len()
            ))
        } else {
            match len {
                Some(crate::ir::Len::Fixed(n)) if product == Some(n) => None,
                Some(crate::ir::Len::Fixed(n)) => Some(format!(
                    "has {n} elements, not the {} of its dimensions {dims:?}",
                    product.map_or_else(|| "over 2^32".to_string(), |p| p.to_string())
                )),
                _ => Some("is not a fixed-length private or shared array".to_string()),
            }
        };
        if let Some(p) = problem {
            sink.at(
                f,
                codes::ARRAY_DIMS,
                span,
                format!("multi-dimensional array `{name}` {p}"),
            );
        }
    }
}

/// Every expression handle a statement refers to directly, in evaluation order.
pub(crate) fn stmt_roots(s: &Stmt, out: &mut Vec<ExprId>) {
    match &s.kind {
        StmtKind::Let { init, .. } => out.extend(init),
        StmtKind::Assign { place, value } => {
            if let Place::Element { index, .. } = place {
                out.push(*index);
            }
            out.push(*value);
        }
        StmtKind::If { cond, .. } => out.push(*cond),
        StmtKind::Loop { kind, .. } => match kind {
            LoopKind::Infinite => {}
            LoopKind::While(c) => out.push(*c),
            LoopKind::For {
                start, end, step, ..
            } => {
                out.push(*start);
                out.push(*end);
                out.extend(step);
            }
            LoopKind::Cond {
                init, cond, update, ..
            } => {
                out.push(*init);
                out.push(*cond);
                out.push(*update);
            }
        },
        StmtKind::Return(e) => out.extend(e),
        StmtKind::Expr(e) => out.push(*e),
        StmtKind::VStore { index, value, .. } => {
            out.push(*index);
            out.push(*value);
        }
        StmtKind::MatrixStore {
            value,
            offset,
            stride,
            ..
        } => {
            out.push(*value);
            out.push(*offset);
            out.push(*stride);
        }
        StmtKind::Print { args, .. } => out.extend(args),
        StmtKind::Assert { cond, .. } => out.push(*cond),
        StmtKind::Break(_)
        | StmtKind::Continue(_)
        | StmtKind::Barrier
        | StmtKind::WaveBarrier
        | StmtKind::Fence(_)
        | StmtKind::Block(_) => {}
    }
}

fn all_stmts<'b>(block: &'b Block, out: &mut Vec<&'b Stmt>) {
    for s in block {
        out.push(s);
        for b in s.kind.blocks() {
            all_stmts(b, out);
        }
    }
}

/// Expressions form trees: each has exactly one parent (a statement or an expression).
fn uses(f: &Function, sink: &mut Sink) {
    let mut count = vec![0u32; f.exprs.len()];
    let mut stmts = Vec::new();
    all_stmts(&f.body, &mut stmts);
    let mut roots = Vec::new();
    for s in stmts {
        roots.clear();
        stmt_roots(s, &mut roots);
        for &r in &roots {
            match count.get_mut(r.index()) {
                Some(c) => *c += 1,
                None => sink.at(
                    f,
                    codes::HANDLE,
                    s.span,
                    format!("expression {r:?} does not exist"),
                ),
            }
        }
    }
    for (_, e) in f.exprs.iter() {
        e.for_each_operand(|op| {
            if let Some(c) = count.get_mut(op.index()) {
                *c += 1;
            }
        });
    }
    for (i, &c) in count.iter().enumerate() {
        let e = ExprId::from_index(i);
        if c > 1 {
            sink.at(
                f,
                codes::EXPR_REUSED,
                f.expr_span(e),
                format!("expression {e:?} is used {c} times; expressions are trees"),
            );
        } else if c == 0 {
            sink.at(
                f,
                codes::EXPR_UNUSED,
                f.expr_span(e),
                format!("expression {e:?} is not used by any statement"),
            );
        }
    }
}

/// Whether control cannot fall off the end of `block`.
fn always_returns(block: &Block) -> bool {
    block.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If {
            then_block,
            else_block,
            ..
        } => always_returns(then_block) && always_returns(else_block),
        StmtKind::Loop {
            label,
            kind: LoopKind::Infinite,
            body,
        } => !breaks_out(body, label.as_deref(), 0),
        StmtKind::Block(b) => always_returns(b),
        _ => false,
    })
}

/// Whether `body` (of a loop labelled `label`) holds a `break` that leaves that loop.
fn breaks_out(body: &Block, label: Option<&str>, depth: usize) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::Break(None) => depth == 0,
        StmtKind::Break(Some(l)) => Some(l.as_str()) == label,
        StmtKind::If {
            then_block,
            else_block,
            ..
        } => breaks_out(then_block, label, depth) || breaks_out(else_block, label, depth),
        StmtKind::Loop { body, .. } => breaks_out(body, label, depth + 1),
        StmtKind::Block(b) => breaks_out(b, label, depth),
        _ => false,
    })
}

struct Walker<'a, 's> {
    module: &'a Module,
    f: &'a Function,
    typed: &'a FunctionTypes,
    sink: &'s mut Sink,
    /// Per local: whether a `let` (or `for`) declaring it encloses the current point.
    in_scope: Vec<bool>,
    /// Per local: whether some `let` declared it already.
    declared: Vec<bool>,
    /// The enclosing loops' labels, innermost last.
    loops: Vec<Option<String>>,
}

impl Walker<'_, '_> {
    fn err(&mut self, code: &'static str, span: Span, message: impl Into<String>) {
        self.sink.at(self.f, code, span, message);
    }

    /// The value type of a well-typed expression; `None` where it is ill-typed (reported
    /// already) or void.
    fn ty(&self, e: ExprId) -> Option<Type> {
        self.typed.get(e).as_ref().ok().copied().flatten()
    }

    fn tn(&self, t: Type) -> String {
        type_name(self.module, t)
    }

    fn local_name(&self, h: Handle<Local>) -> String {
        self.f
            .locals
            .try_get(h)
            .map(|l| l.name.clone())
            .unwrap_or_else(|| format!("{h:?}"))
    }

    fn use_local(&mut self, h: Handle<Local>, span: Span) {
        if self.in_scope.get(h.index()) == Some(&false) {
            let name = self.local_name(h);
            self.err(
                codes::LOCAL_SCOPE,
                span,
                format!("local `{name}` is used outside the scope of its declaration"),
            );
        }
    }

    fn use_base(&mut self, base: Base, span: Span) {
        if let Base::Local(h) = base {
            self.use_local(h, span);
        }
    }

    /// Checks that every local an expression tree reads is in scope.
    fn expr(&mut self, root: ExprId) {
        let mut stack = vec![root];
        let mut seen = 0usize;
        while let Some(e) = stack.pop() {
            // A cyclic tree is reported by the use count; do not walk it forever.
            seen += 1;
            if seen > self.f.exprs.len() {
                break;
            }
            let Some(expr) = self.f.exprs.try_get(e) else {
                continue;
            };
            let span = self.f.expr_span(e);
            match expr {
                Expr::Local(h) => self.use_local(*h, span),
                Expr::Index { base, .. }
                | Expr::VLoad { base, .. }
                | Expr::MatrixLoad { base, .. }
                | Expr::Ref(base) => self.use_base(*base, span),
                Expr::Atomic { place, .. }
                | Expr::AtomicLoad { place, .. }
                | Expr::AtomicStore { place, .. } => self.place_scope(place, span),
                _ => {}
            }
            expr.for_each_operand(|op| stack.push(op));
        }
    }

    fn place_scope(&mut self, place: &Place, span: Span) {
        match *place {
            Place::Local(h) | Place::Lane { local: h, .. } => self.use_local(h, span),
            Place::Element { base, .. } => self.use_base(base, span),
        }
    }

    fn declare(&mut self, h: Handle<Local>, span: Span) {
        let Some(&declared) = self.declared.get(h.index()) else {
            self.err(codes::HANDLE, span, format!("local {h:?} does not exist"));
            return;
        };
        if declared {
            let name = self.local_name(h);
            self.err(
                codes::LOCAL_SCOPE,
                span,
                format!("local `{name}` is declared twice"),
            );
        }
        self.declared[h.index()] = true;
        self.in_scope[h.index()] = true;
    }

    fn block(&mut self, block: &Block) {
        let before = self.in_scope.clone();
        for s in block {
            self.stmt(s);
        }
        // Locals declared in this block go out of scope at its end.
        self.in_scope = before;
    }

    fn expect(&mut self, e: ExprId, want: Type, code: &'static str, what: &str, span: Span) {
        if let Some(t) = self.ty(e) {
            if t != want {
                let msg = format!("{what} must be {}, not {}", self.tn(want), self.tn(t));
                self.err(code, span, msg);
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        let span = s.span;
        let mut roots = Vec::new();
        stmt_roots(s, &mut roots);
        if let StmtKind::Loop {
            kind: LoopKind::Cond { init, .. },
            ..
        } = &s.kind
        {
            // The condition and update see the loop variable: checked after its declaration.
            roots = vec![*init];
        }
        for r in roots {
            self.expr(r);
        }
        match &s.kind {
            StmtKind::Let { local, init } => {
                let Some(l) = self.f.locals.try_get(*local) else {
                    self.err(
                        codes::HANDLE,
                        span,
                        format!("local {local:?} does not exist"),
                    );
                    return;
                };
                let (name, ty) = (l.name.clone(), l.ty);
                if let Some(init) = init {
                    if matches!(ty, Type::Array { .. }) {
                        self.err(
                            codes::ASSIGN_TYPE,
                            span,
                            format!("array `{name}` cannot be initialised whole"),
                        );
                    } else {
                        self.expect(
                            *init,
                            ty,
                            codes::ASSIGN_TYPE,
                            &format!("the initialiser of `{name}`"),
                            span,
                        );
                    }
                }
                self.declare(*local, span);
            }
            StmtKind::Assign { place, value } => {
                self.place_scope(place, span);
                self.assign(place, *value, span);
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                self.expect(*cond, Type::BOOL, codes::COND_TYPE, "an if condition", span);
                self.block(then_block);
                self.block(else_block);
            }
            StmtKind::Loop { label, kind, body } => {
                if let Some(l) = label {
                    if self.loops.iter().any(|o| o.as_deref() == Some(l.as_str())) {
                        self.err(
                            codes::LABEL,
                            span,
                            format!("label '{l} repeats an enclosing loop's label"),
                        );
                    }
                }
                let before = self.in_scope.clone();
                match kind {
                    LoopKind::Infinite => {}
                    LoopKind::While(c) => {
                        self.expect(*c, Type::BOOL, codes::COND_TYPE, "a while condition", span)
                    }
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                    } => self.for_header(*var, *start, *end, *step, span),
                    LoopKind::Cond {
                        var,
                        init,
                        cond,
                        update,
                    } => self.cond_for_header(*var, *init, *cond, *update, span),
                }
                self.loops.push(label.clone());
                self.block(body);
                self.loops.pop();
                self.in_scope = before;
            }
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let verb = if matches!(s.kind, StmtKind::Break(_)) {
                    "break"
                } else {
                    "continue"
                };
                if self.loops.is_empty() {
                    self.err(
                        codes::OUTSIDE_LOOP,
                        span,
                        format!("`{verb}` outside a loop"),
                    );
                } else if let Some(l) = label {
                    if !self.loops.iter().any(|o| o.as_deref() == Some(l.as_str())) {
                        self.err(
                            codes::LABEL,
                            span,
                            format!("`{verb} '{l}`: no enclosing loop is labelled '{l}"),
                        );
                    }
                }
            }
            StmtKind::Block(b) => self.block(b),
            StmtKind::Return(value) => self.ret(*value, span),
            StmtKind::Expr(_) | StmtKind::Barrier | StmtKind::WaveBarrier | StmtKind::Fence(_) => {}
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                self.use_base(*base, span);
                let lanes = self.ty(*value).and_then(Type::lanes).unwrap_or(0);
                if let Some(Type::Scalar(_)) = self.ty(*value) {
                    self.err(
                        codes::VLOAD,
                        span,
                        "vstore of a scalar; it stores a vector".to_string(),
                    );
                    return;
                }
                if self.ty(*value).is_some_and(|t| !t.is_value()) {
                    let msg = format!(
                        "vstore of {}; it stores a vector",
                        self.tn(self.ty(*value).unwrap_or(Type::BOOL))
                    );
                    self.err(codes::VLOAD, span, msg);
                    return;
                }
                if lanes == 0 {
                    return; // the value is ill-typed, reported at it
                }
                match typeck::vector_access(self.f, *base, lanes, *align, "vstore") {
                    Err(typeck::Failure::Here(e)) => self.err(e.code, span, e.message),
                    Err(typeck::Failure::Operand) => {}
                    Ok(s) => {
                        let vt = self.ty(*value);
                        if vt.and_then(Type::scalar) != Some(s) {
                            let msg = format!(
                                "vstore of {} to `{}` of {}",
                                self.tn(vt.unwrap_or(Type::BOOL)),
                                base_name(self.f, *base),
                                s.name()
                            );
                            self.err(codes::VLOAD, span, msg);
                        }
                        self.expect(*index, Type::U32, codes::INDEX, "a vstore index", span);
                        self.writable(*base, "vstore to", span);
                    }
                }
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                self.use_base(*base, span);
                self.matrix_store(*value, *base, *offset, *stride, span);
            }
            StmtKind::Print { format, args } => self.print(format, args, span),
            StmtKind::Assert { cond, .. } => {
                self.expect(
                    *cond,
                    Type::BOOL,
                    codes::ASSERT_COND,
                    "an assert condition",
                    span,
                );
            }
        }
    }

    /// `print`: a well-formed format with one `{}` per value, at most
    /// [`MAX_PRINT_VALUES`](crate::ir::debug::MAX_PRINT_VALUES) values, each a scalar.
    fn print(&mut self, format: &str, args: &[ExprId], span: Span) {
        match crate::ir::debug::placeholders(format) {
            Err(msg) => self.err(codes::PRINT_FORMAT, span, msg),
            Ok(n) if n != args.len() => self.err(
                codes::PRINT_FORMAT,
                span,
                format!(
                    "the format has {n} `{{}}` but print is given {} value(s)",
                    args.len()
                ),
            ),
            Ok(_) => {}
        }
        if args.len() > crate::ir::debug::MAX_PRINT_VALUES {
            self.err(
                codes::PRINT_VALUE,
                span,
                format!(
                    "print of {} values; at most {} per print",
                    args.len(),
                    crate::ir::debug::MAX_PRINT_VALUES
                ),
            );
        }
        for &a in args {
            match self.ty(a) {
                Some(Type::Scalar(_)) | None => {}
                Some(t) => {
                    let msg = format!("print of {}; print takes scalars", self.tn(t));
                    self.err(codes::PRINT_VALUE, span, msg);
                }
            }
        }
    }

    fn writable(&mut self, base: Base, verb: &str, span: Span) {
        if base_writable(self.f, base) == Some(false) {
            let name = base_name(self.f, base);
            if super::spaces::is_constant(self.f, base) {
                self.err(
                    codes::CONSTANT_WRITE,
                    span,
                    format!("{verb} constant buffer `{name}`: constant data is read-only"),
                );
                return;
            }
            self.err(
                codes::READ_ONLY,
                span,
                format!("{verb} read-only buffer `{name}` (declare it `buf<_, rw>`)"),
            );
        }
    }

    fn assign(&mut self, place: &Place, value: ExprId, span: Span) {
        let place_ty = match *place {
            Place::Element { base, .. } => match typeck::base_elem_checked(self.f, base) {
                Err(e) => {
                    self.err(e.code, span, e.message);
                    return;
                }
                Ok(elem) => {
                    self.writable(base, "assignment to", span);
                    // The index's type is an operand rule, like an indexed read.
                    if let Place::Element { index, .. } = *place {
                        self.expect(index, Type::U32, codes::INDEX, "an index", span);
                    }
                    elem.value_type()
                }
            },
            _ => match typeck::place_type(self.module, self.f, place) {
                Some(t) => t,
                None => {
                    let msg = match *place {
                        Place::Lane { local, lane } => match self.f.locals.try_get(local) {
                            Some(l) => (
                                codes::LANE_INDEX,
                                format!("lane {lane} of `{}`, which is {}", l.name, self.tn(l.ty)),
                            ),
                            None => (codes::HANDLE, format!("local {local:?} does not exist")),
                        },
                        Place::Local(h) => (codes::HANDLE, format!("local {h:?} does not exist")),
                        Place::Element { .. } => unreachable_place(),
                    };
                    self.err(msg.0, span, msg.1);
                    return;
                }
            },
        };
        if matches!(place_ty, Type::Array { .. } | Type::Buffer { .. }) {
            let msg = format!("{} cannot be assigned whole", self.tn(place_ty));
            self.err(codes::ASSIGN_TYPE, span, msg);
            return;
        }
        self.expect(
            value,
            place_ty,
            codes::ASSIGN_TYPE,
            "the assigned value",
            span,
        );
    }

    fn for_header(
        &mut self,
        var: Handle<Local>,
        start: ExprId,
        end: ExprId,
        step: Option<ExprId>,
        span: Span,
    ) {
        let Some(l) = self.f.locals.try_get(var) else {
            self.err(codes::HANDLE, span, format!("local {var:?} does not exist"));
            return;
        };
        let (name, ty) = (l.name.clone(), l.ty);
        if !matches!(ty, Type::Scalar(s) if s.is_int()) {
            let msg = format!(
                "for variable `{name}` is {}; it must be an integer",
                self.tn(ty)
            );
            self.err(codes::FOR_LOOP, span, msg);
        } else {
            for (e, what) in [
                (Some(start), "the start"),
                (Some(end), "the end"),
                (step, "the step"),
            ] {
                if let Some(e) = e {
                    self.expect(
                        e,
                        ty,
                        codes::FOR_LOOP,
                        &format!("{what} of `for {name}`"),
                        span,
                    );
                }
            }
            if let Some(step) = step {
                if let Some(Expr::Literal(Literal::Int { bits, ty })) = self.f.exprs.try_get(step) {
                    // A negative step (signed variables only) counts down.
                    if *bits == 0 {
                        let _ = ty;
                        self.err(
                            codes::FOR_LOOP,
                            self.f.expr_span(step),
                            format!("the step of `for {name}` must not be zero"),
                        );
                    }
                }
            }
        }
        // The variable is in scope in the body only; the bounds were checked before.
        self.declare(var, span);
    }

    fn cond_for_header(
        &mut self,
        var: Handle<Local>,
        init: ExprId,
        cond: ExprId,
        update: ExprId,
        span: Span,
    ) {
        let Some(l) = self.f.locals.try_get(var) else {
            self.err(codes::HANDLE, span, format!("local {var:?} does not exist"));
            return;
        };
        let (name, ty) = (l.name.clone(), l.ty);
        if !matches!(ty, Type::Scalar(s) if s != Scalar::Bool) {
            let msg = format!(
                "for variable `{name}` is {}; it must be a numeric scalar",
                self.tn(ty)
            );
            self.err(codes::COND_FOR, span, msg);
        } else {
            self.expect(
                init,
                ty,
                codes::COND_FOR,
                &format!("the initial value of `for {name}`"),
                span,
            );
            self.expect(
                update,
                ty,
                codes::COND_FOR,
                &format!("the update of `for {name}`"),
                span,
            );
        }
        self.expect(
            cond,
            Type::BOOL,
            codes::COND_FOR,
            &format!("the condition of `for {name}`"),
            span,
        );
        self.declare(var, span);
        self.expr(cond);
        self.expr(update);
    }

    fn ret(&mut self, value: Option<ExprId>, span: Span) {
        match (self.f.kind, self.f.ret, value) {
            (FunctionKind::Kernel, _, Some(_)) => {
                self.err(codes::RETURN, span, "a kernel returns no value".to_string())
            }
            (FunctionKind::Device, None, Some(_)) => {
                let msg = format!("`{}` returns nothing; `return` takes no value", self.f.name);
                self.err(codes::RETURN, span, msg)
            }
            (FunctionKind::Device, Some(t), None) => {
                let msg = format!(
                    "`{}` returns {}; `return` needs a value",
                    self.f.name,
                    self.tn(t)
                );
                self.err(codes::RETURN, span, msg)
            }
            (FunctionKind::Device, Some(t), Some(e)) => {
                self.expect(e, t, codes::RETURN, "the returned value", span)
            }
            _ => {}
        }
    }

    fn matrix_store(
        &mut self,
        value: ExprId,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        span: Span,
    ) {
        let Some(vt) = self.ty(value) else { return };
        let Type::Matrix { scalar, .. } = vt else {
            let msg = format!("matrix_store of {}, which is not a fragment", self.tn(vt));
            self.err(codes::MATRIX_STORE, span, msg);
            return;
        };
        if typeck::base_is_private(self.f, base) {
            let msg = format!(
                "matrix_store to private array `{}`; it stores to a buffer or shared array",
                base_name(self.f, base)
            );
            self.err(codes::MATRIX_STORE, span, msg);
            return;
        }
        match typeck::base_elem_checked(self.f, base) {
            Err(e) => self.err(e.code, span, e.message),
            Ok(elem) => {
                if elem.lanes != 1 || elem.scalar != scalar {
                    let msg = format!(
                        "matrix_store of a {} fragment to `{}` of {}",
                        scalar.name(),
                        base_name(self.f, base),
                        self.tn(elem.value_type())
                    );
                    self.err(codes::MATRIX_STORE, span, msg);
                }
                self.writable(base, "matrix_store to", span);
            }
        }
        self.expect(
            offset,
            Type::U32,
            codes::MATRIX_STORE,
            "a matrix_store offset",
            span,
        );
        self.expect(
            stride,
            Type::U32,
            codes::MATRIX_STORE,
            "a matrix_store stride",
            span,
        );
    }
}

/// `Place::Element` is handled before `place_type` is asked.
fn unreachable_place() -> (&'static str, String) {
    (codes::HANDLE, "malformed place".to_string())
}
