//! Inlining the calls of helpers that take memory (issue 23 item 4).
//!
//! A `device fn` may take a buffer (`buf<E>`, `buf<E, rw>`), a shared array (`shared [E; N]`,
//! `shared [E]`) or a private array (`[E; N]`) by reference. No backend passes such a
//! reference: SPIR-V's `Shader` capability has no pointer to a storage buffer as a function
//! parameter, and a CPU wave would pass a base and a length per lane. The verifier instead
//! inlines every call of such a helper, in every concrete function, before any backend or
//! the facts ([`crate::ir::analysis::FunctionInfo`]) see the module: the callee's body is
//! copied in place of the call with its memory parameters replaced by the caller's memory
//! (transitively, through a helper's own memory parameter), so each access names the
//! kernel's own buffer, shared array or private array, at the helper's source line.
//!
//! A call stands as a statement, as the whole value of a `let` or an assignment, or as the
//! whole value of a `return` (`XPU-V132`, [`crate::ir::verify::memcall`]); it becomes:
//!
//! ```text
//! let result;                  // the helper's return value, if it has one
//! {                            // a bare scope for the helper's locals
//!     let x = arg;             // each value parameter, in order
//!     body                     // with `return v` as `result = v`
//! }
//! let y = result;              // (or `place = result`, `return result`)
//! ```
//!
//! A helper that returns anywhere but at its end runs inside a one-iteration loop with a
//! label of its own (`'inline_<helper>_<n>`), and each `return` is `result = v; break 'label`. An assignment
//! to an element evaluates its index into a local first, as the index is evaluated before
//! the value.

use super::verify::memcall::takes_memory;
use super::{
    Base, Block, Expr, ExprId, Function, Handle, Literal, Local, LoopKind, Module, Place, Scalar,
    Span, Stmt, StmtKind, Type,
};

/// Inlines every call of a helper that takes memory, in every concrete function of
/// `module`; the functions it changed, whose expression types must be computed again.
pub fn inline_memory_calls(module: &mut Module) -> Vec<Handle<Function>> {
    let handles: Vec<Handle<Function>> = module.functions.handles().collect();
    let mut changed = Vec::new();
    for h in handles {
        if module.functions[h].template.is_some() {
            continue;
        }
        let mut f = std::mem::replace(
            &mut module.functions[h],
            Function::new("", super::FunctionKind::Device),
        );
        let mut any = false;
        // Each round inlines the calls in the body as it stands; a callee's own calls come
        // in with its body and go in the next round (no recursion: the verifier refused it,
        // and `XPU-V061`/`XPU-V062` bound the depth and the size).
        for _ in 0..=super::verify::MAX_CALL_DEPTH {
            let mut cx = Inliner {
                module: &*module,
                f: &mut f,
                count: 0,
            };
            let body = std::mem::take(&mut cx.f.body);
            let body = cx.block(body);
            let n = cx.count;
            f.body = body;
            if n == 0 {
                break;
            }
            any = true;
        }
        if any {
            compact(&mut f);
            changed.push(h);
        }
        module.functions[h] = f;
    }
    changed
}

struct Inliner<'a> {
    module: &'a Module,
    f: &'a mut Function,
    /// Calls inlined this round.
    count: usize,
}

/// What a call's result becomes once the body has run.
enum Sink {
    /// `f(...);`: nothing.
    Drop,
    /// `let local = f(...)`.
    Let(Handle<Local>),
    /// `place = f(...)`.
    Assign(Place),
    /// `return f(...)`.
    Return,
}

impl Inliner<'_> {
    /// The memory helper `e` calls, if it is such a call.
    fn memory_call(&self, e: ExprId) -> Option<(Handle<Function>, Vec<ExprId>)> {
        match self.f.exprs.try_get(e)? {
            Expr::Call { function, args }
                if self
                    .module
                    .functions
                    .try_get(*function)
                    .is_some_and(takes_memory) =>
            {
                Some((*function, args.clone()))
            }
            _ => None,
        }
    }

    fn block(&mut self, b: Block) -> Block {
        let mut out = Vec::with_capacity(b.len());
        for s in b {
            self.stmt(s, &mut out);
        }
        out
    }

    fn stmt(&mut self, s: Stmt, out: &mut Block) {
        let span = s.span;
        let call = match &s.kind {
            StmtKind::Expr(e) => self.memory_call(*e).map(|c| (c, Sink::Drop, *e)),
            StmtKind::Let {
                local,
                init: Some(e),
            } => self.memory_call(*e).map(|c| (c, Sink::Let(*local), *e)),
            StmtKind::Assign { place, value } => self
                .memory_call(*value)
                .map(|c| (c, Sink::Assign(*place), *value)),
            StmtKind::Return(Some(e)) => self.memory_call(*e).map(|c| (c, Sink::Return, *e)),
            _ => None,
        };
        if let Some(((callee, args), sink, call)) = call {
            self.count += 1;
            self.inline(callee, &args, sink, call, span, out);
            return;
        }
        let kind = match s.kind {
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => StmtKind::If {
                cond,
                then_block: self.block(then_block),
                else_block: self.block(else_block),
            },
            StmtKind::Loop { label, kind, body } => StmtKind::Loop {
                label,
                kind,
                body: self.block(body),
            },
            StmtKind::Block(b) => StmtKind::Block(self.block(b)),
            k => k,
        };
        out.push(Stmt { kind, span });
    }

    fn lit_u32(&mut self, v: u32, span: Span) -> ExprId {
        self.f.add_expr(
            Expr::Literal(Literal::Int {
                bits: v as u64,
                ty: Scalar::U32,
            }),
            span,
        )
    }

    fn new_local(&mut self, name: String, ty: Type, span: Span) -> Handle<Local> {
        self.f.locals.append(Local { name, ty, span })
    }

    /// Replaces the call `call` of `callee` (arguments `args`) by the callee's body.
    fn inline(
        &mut self,
        callee: Handle<Function>,
        args: &[ExprId],
        sink: Sink,
        call: ExprId,
        span: Span,
        out: &mut Block,
    ) {
        let module = self.module;
        let g: &Function = &module.functions[callee];
        // An element's index is evaluated before the value: into a local first.
        let sink = match sink {
            Sink::Assign(Place::Element { base, index }) => {
                let l = self.new_local(format!("{}.index", g.name), Type::U32, span);
                out.push(Stmt {
                    kind: StmtKind::Let {
                        local: l,
                        init: Some(index),
                    },
                    span,
                });
                let index = self.f.add_expr(Expr::Local(l), span);
                Sink::Assign(Place::Element { base, index })
            }
            s => s,
        };
        let result = g.ret.map(|t| {
            let l = self.new_local(format!("{}.result", g.name), t, span);
            out.push(Stmt {
                kind: StmtKind::Let {
                    local: l,
                    init: None,
                },
                span,
            });
            l
        });
        // The callee's locals, then its value parameters as locals of their own.
        let locals: Vec<Handle<Local>> = g
            .locals
            .iter()
            .map(|(_, l)| self.f.locals.append(l.clone()))
            .collect();
        let mut params: Vec<Actual> = Vec::with_capacity(g.params.len());
        let mut scope = Vec::new();
        for (p, &a) in g.params.iter().zip(args) {
            if p.ty.is_memory() {
                let base = match self.f.exprs.try_get(a) {
                    Some(Expr::Ref(b)) => *b,
                    // The verifier refused anything else (XPU-V130).
                    _ => Base::Param(u32::MAX),
                };
                params.push(Actual::Memory(base));
                self.orphan(a);
            } else {
                let l = self.new_local(p.name.clone(), p.ty, p.span);
                scope.push(Stmt {
                    kind: StmtKind::Let {
                        local: l,
                        init: Some(a),
                    },
                    span,
                });
                params.push(Actual::Value(l));
            }
        }
        for (base, dims) in &g.array_dims {
            if let Base::Local(l) = base {
                let b = Base::Local(locals[l.index()]);
                self.f.array_dims.push((b, dims.clone()));
            }
        }
        // The callee's expressions, all of them, operands renumbered.
        let first = self.f.exprs.len();
        let map = |e: ExprId| ExprId::from_index(first + e.index());
        let m = Map {
            locals: &locals,
            params: &params,
        };
        for (e, x) in g.exprs.iter() {
            let mut x = x.clone();
            for op in x.operands_mut() {
                *op = map(*op);
            }
            let x = m.expr(x);
            self.f.add_expr(x, g.expr_span(e));
        }
        let wrapped = returns_early(&g.body);
        // A label of the text's form, so that the printed (inlined) kernel parses back.
        let label = format!("inline_{}_{}", g.name, self.f.exprs.len());
        let exit = Exit {
            result,
            label: wrapped.then(|| label.clone()),
        };
        let body = m.block(&g.body, &map, &exit);
        if wrapped {
            let var = self.new_local(format!("{}.once", g.name), Type::U32, span);
            let start = self.lit_u32(0, span);
            let end = self.lit_u32(1, span);
            scope.push(Stmt {
                kind: StmtKind::Loop {
                    label: Some(label),
                    kind: LoopKind::For {
                        var,
                        start,
                        end,
                        step: None,
                    },
                    body,
                },
                span,
            });
        } else {
            scope.extend(body);
        }
        out.push(Stmt {
            kind: StmtKind::Block(scope),
            span,
        });
        self.orphan(call);
        let value = result.map(|r| self.f.add_expr(Expr::Local(r), span));
        let kind = match (sink, value) {
            (Sink::Drop, _) => None,
            (Sink::Let(local), Some(v)) => Some(StmtKind::Let {
                local,
                init: Some(v),
            }),
            (Sink::Assign(place), Some(v)) => Some(StmtKind::Assign { place, value: v }),
            (Sink::Return, v) => Some(StmtKind::Return(v)),
            // A void call's value: the verifier refused it.
            (_, None) => None,
        };
        if let Some(kind) = kind {
            out.push(Stmt { kind, span });
        }
    }

    /// Makes `e` (a call or reference no tree reaches any more) an inert literal, so that a
    /// consumer that scans the arena sees no call of a memory helper.
    fn orphan(&mut self, e: ExprId) {
        if let Some(x) = self.f.exprs.try_get(e) {
            if matches!(x, Expr::Call { .. } | Expr::Ref(_)) {
                self.f.exprs[e] = Expr::Literal(Literal::Bool(false));
            }
        }
    }
}

/// What a callee parameter stands for at one call.
#[derive(Clone, Copy)]
enum Actual {
    /// The caller's memory.
    Memory(Base),
    /// The local the value was copied to.
    Value(Handle<Local>),
}

/// How a callee's `return` leaves the inlined body.
struct Exit {
    /// The local the value goes to.
    result: Option<Handle<Local>>,
    /// The one-iteration loop to break out of; `None` when the only `return` is last.
    label: Option<String>,
}

/// The renaming of a callee's locals and parameters into the caller.
struct Map<'a> {
    locals: &'a [Handle<Local>],
    params: &'a [Actual],
}

impl Map<'_> {
    fn local(&self, l: Handle<Local>) -> Handle<Local> {
        self.locals.get(l.index()).copied().unwrap_or(l)
    }

    fn base(&self, b: Base) -> Base {
        match b {
            Base::Param(i) => match self.params.get(i as usize) {
                Some(Actual::Memory(b)) => *b,
                _ => b,
            },
            Base::Local(l) => Base::Local(self.local(l)),
            Base::Shared(_) => b,
        }
    }

    fn place(&self, p: Place) -> Place {
        match p {
            Place::Local(l) => Place::Local(self.local(l)),
            Place::Lane { local, lane } => Place::Lane {
                local: self.local(local),
                lane,
            },
            Place::Element { base, index } => Place::Element {
                base: self.base(base),
                index,
            },
        }
    }

    /// One callee expression in the caller (operands already renumbered).
    fn expr(&self, x: Expr) -> Expr {
        match x {
            Expr::Param(i) => match self.params.get(i as usize) {
                Some(Actual::Value(l)) => Expr::Local(*l),
                Some(Actual::Memory(b)) => Expr::Ref(*b),
                None => Expr::Param(i),
            },
            Expr::Local(l) => Expr::Local(self.local(l)),
            Expr::Len(i) => match self.params.get(i as usize) {
                Some(Actual::Memory(Base::Param(k))) => Expr::Len(*k),
                _ => Expr::Len(i),
            },
            Expr::Ref(b) => Expr::Ref(self.base(b)),
            Expr::Index { base, index } => Expr::Index {
                base: self.base(base),
                index,
            },
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => Expr::VLoad {
                base: self.base(base),
                index,
                lanes,
                align,
            },
            Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
            } => Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base: self.base(base),
                offset,
                stride,
            },
            Expr::Atomic {
                op,
                place,
                value,
                compare,
                order,
            } => Expr::Atomic {
                op,
                place: self.place(place),
                value,
                compare,
                order,
            },
            Expr::AtomicLoad { place, order } => Expr::AtomicLoad {
                place: self.place(place),
                order,
            },
            Expr::AtomicStore {
                place,
                value,
                order,
            } => Expr::AtomicStore {
                place: self.place(place),
                value,
                order,
            },
            x => x,
        }
    }

    /// The callee's statements in the caller.
    fn block(&self, b: &Block, map: &dyn Fn(ExprId) -> ExprId, exit: &Exit) -> Block {
        let mut out = Vec::with_capacity(b.len());
        for s in b {
            let span = s.span;
            let push = |out: &mut Block, kind| out.push(Stmt { kind, span });
            let kind = match &s.kind {
                StmtKind::Let { local, init } => StmtKind::Let {
                    local: self.local(*local),
                    init: init.map(map),
                },
                StmtKind::Assign { place, value } => StmtKind::Assign {
                    place: self.place(remap_place(*place, map)),
                    value: map(*value),
                },
                StmtKind::If {
                    cond,
                    then_block,
                    else_block,
                } => StmtKind::If {
                    cond: map(*cond),
                    then_block: self.block(then_block, map, exit),
                    else_block: self.block(else_block, map, exit),
                },
                StmtKind::Loop { label, kind, body } => StmtKind::Loop {
                    label: label.clone(),
                    kind: match kind {
                        LoopKind::Infinite => LoopKind::Infinite,
                        LoopKind::While(c) => LoopKind::While(map(*c)),
                        LoopKind::For {
                            var,
                            start,
                            end,
                            step,
                        } => LoopKind::For {
                            var: self.local(*var),
                            start: map(*start),
                            end: map(*end),
                            step: step.map(map),
                        },
                        LoopKind::Cond {
                            var,
                            init,
                            cond,
                            update,
                        } => LoopKind::Cond {
                            var: self.local(*var),
                            init: map(*init),
                            cond: map(*cond),
                            update: map(*update),
                        },
                    },
                    body: self.block(body, map, exit),
                },
                StmtKind::Break(l) => StmtKind::Break(l.clone()),
                StmtKind::Continue(l) => StmtKind::Continue(l.clone()),
                StmtKind::Return(v) => {
                    if let (Some(v), Some(r)) = (v, exit.result) {
                        push(
                            &mut out,
                            StmtKind::Assign {
                                place: Place::Local(r),
                                value: map(*v),
                            },
                        );
                    }
                    match &exit.label {
                        Some(l) => StmtKind::Break(Some(l.clone())),
                        None => continue,
                    }
                }
                StmtKind::Expr(e) => StmtKind::Expr(map(*e)),
                StmtKind::Barrier => StmtKind::Barrier,
                StmtKind::WaveBarrier => StmtKind::WaveBarrier,
                StmtKind::Fence(s) => StmtKind::Fence(*s),
                StmtKind::VStore {
                    base,
                    index,
                    value,
                    align,
                } => StmtKind::VStore {
                    base: self.base(*base),
                    index: map(*index),
                    value: map(*value),
                    align: *align,
                },
                StmtKind::Block(b) => StmtKind::Block(self.block(b, map, exit)),
                StmtKind::MatrixStore {
                    value,
                    base,
                    offset,
                    stride,
                } => StmtKind::MatrixStore {
                    value: map(*value),
                    base: self.base(*base),
                    offset: map(*offset),
                    stride: map(*stride),
                },
                StmtKind::Print { format, args } => StmtKind::Print {
                    format: format.clone(),
                    args: args.iter().copied().map(map).collect(),
                },
                StmtKind::Assert { cond, message } => StmtKind::Assert {
                    cond: map(*cond),
                    message: message.clone(),
                },
            };
            push(&mut out, kind);
        }
        out
    }
}

fn remap_place(p: Place, map: &dyn Fn(ExprId) -> ExprId) -> Place {
    match p {
        Place::Element { base, index } => Place::Element {
            base,
            index: map(index),
        },
        p => p,
    }
}

/// Whether a body has a `return` anywhere but as its last top-level statement.
fn returns_early(body: &Block) -> bool {
    fn any_return(b: &[Stmt]) -> bool {
        b.iter().any(|s| {
            matches!(s.kind, StmtKind::Return(_))
                || s.kind.blocks().into_iter().any(|b| any_return(b))
        })
    }
    match body.split_last() {
        None => false,
        Some((last, rest)) => {
            any_return(rest)
                || (!matches!(last.kind, StmtKind::Return(_))
                    && last.kind.blocks().into_iter().any(|b| any_return(b)))
        }
    }
}

/// Drops the expressions no statement reaches (the calls and references inlining replaced),
/// renumbering the rest in their order, so that every expression has one parent again.
fn compact(f: &mut Function) {
    let mut live = vec![false; f.exprs.len()];
    let mut stack = Vec::new();
    let mut pending: Vec<&Block> = vec![&f.body];
    while let Some(b) = pending.pop() {
        for s in b {
            super::verify::stmt_roots(s, &mut stack);
            pending.extend(s.kind.blocks());
        }
    }
    while let Some(e) = stack.pop() {
        match live.get_mut(e.index()) {
            Some(l) if !*l => *l = true,
            _ => continue,
        }
        if let Some(x) = f.exprs.try_get(e) {
            x.for_each_operand(|o| stack.push(o));
        }
    }
    if live.iter().all(|&l| l) {
        return;
    }
    let mut new_index = vec![usize::MAX; live.len()];
    let mut exprs = super::Arena::new();
    let mut spans = Vec::new();
    let old = std::mem::take(&mut f.exprs);
    for (e, x) in old.iter() {
        if live[e.index()] {
            new_index[e.index()] = exprs.len();
            exprs.append(x.clone());
            spans.push(f.expr_span(e));
        }
    }
    let map = |e: &mut ExprId| {
        if let Some(&n) = new_index.get(e.index()) {
            if n != usize::MAX {
                *e = ExprId::from_index(n);
            }
        }
    };
    for h in exprs.handles().collect::<Vec<_>>() {
        for op in exprs[h].operands_mut() {
            map(op);
        }
    }
    f.exprs = exprs;
    f.expr_spans = spans;
    let mut pending: Vec<&mut Block> = vec![&mut f.body];
    while let Some(b) = pending.pop() {
        for s in b.iter_mut() {
            stmt_exprs_mut(&mut s.kind, &map);
            match &mut s.kind {
                StmtKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    pending.push(then_block);
                    pending.push(else_block);
                }
                StmtKind::Loop { body, .. } => pending.push(body),
                StmtKind::Block(b) => pending.push(b),
                _ => {}
            }
        }
    }
}

/// Applies `map` to every expression a statement holds directly (not its nested blocks').
fn stmt_exprs_mut(k: &mut StmtKind, map: &dyn Fn(&mut ExprId)) {
    match k {
        StmtKind::Let { init, .. } => {
            if let Some(e) = init {
                map(e)
            }
        }
        StmtKind::Assign { place, value } => {
            if let Place::Element { index, .. } = place {
                map(index);
            }
            map(value);
        }
        StmtKind::If { cond, .. } => map(cond),
        StmtKind::Loop { kind, .. } => match kind {
            LoopKind::Infinite => {}
            LoopKind::While(c) => map(c),
            LoopKind::For {
                start, end, step, ..
            } => {
                map(start);
                map(end);
                if let Some(s) = step {
                    map(s);
                }
            }
            LoopKind::Cond {
                init, cond, update, ..
            } => {
                map(init);
                map(cond);
                map(update);
            }
        },
        StmtKind::Return(Some(e)) | StmtKind::Expr(e) => map(e),
        StmtKind::VStore { index, value, .. } => {
            map(index);
            map(value);
        }
        StmtKind::MatrixStore {
            value,
            offset,
            stride,
            ..
        } => {
            map(value);
            map(offset);
            map(stride);
        }
        StmtKind::Print { args, .. } => args.iter_mut().for_each(map),
        StmtKind::Assert { cond, .. } => map(cond),
        StmtKind::Return(None)
        | StmtKind::Break(_)
        | StmtKind::Continue(_)
        | StmtKind::Barrier
        | StmtKind::WaveBarrier
        | StmtKind::Fence(_)
        | StmtKind::Block(_) => {}
    }
}
