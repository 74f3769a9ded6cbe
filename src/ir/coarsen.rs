//! Work-item coarsening: a kernel rewritten so that each work-item of a launch does the work
//! of `F` work-items of `F` consecutive workgroups (along x) of the original launch.
//!
//! GPU backends use it for large launches of simple kernels (`crate::runtime::coarse`): a
//! streaming kernel that moves one element per work-item keeps too few bytes in flight per
//! multiprocessor and asks the block scheduler for one workgroup per few hundred elements
//! (on an H200, `saxpy` at one element per thread reaches 0.82 of a device copy's bandwidth;
//! with two to four elements per thread and every load before any store, 1.01 to 1.03).
//!
//! **Why it is sound.** Work-items of different workgroups are unordered (docs/semantics.md):
//! nothing but atomics may pass values between them within a launch, and two conflicting
//! plain accesses by different work-items are a race, undefined. So running the `F` copies
//! interleaved statement by statement in one work-item is one of the schedules the original
//! launch allows, provided the kernel has nothing that ties a work-item to its own workgroup
//! or wave: no barrier, shared memory, wave verb, fragment or fence. Loops must be `for`
//! loops whose bounds are the same in every copy, with no `break`/`continue`: such a loop
//! runs once for all copies with its body under the copies' masks (copies leaving a loop
//! apart would need per-copy iteration masks; those kernels keep the one-work-item shape).
//!
//! **Shape.** Copy `c` of physical workgroup `p` is logical workgroup `p·F + c`; its
//! `group_id.x`, `global_id.x` and `num_groups.x` are rewritten to the logical ones (the
//! logical grid's x extent arrives as one extra `u32` parameter), and a copy past the logical
//! grid is inactive from the start. Control flow is flattened to per-copy *masks* (bool
//! locals): a divergent `if` computes each copy's branch mask, and every statement inside
//! runs once per copy under its mask. Pure expressions run for every copy without a branch,
//! so every per-copy local starts as zero (none is read uninitialised). A statement's loads
//! are read into per-copy locals first, every copy's before any copy's arithmetic or store
//! (`hoist_loads`); what is left of an assignment whose operands still read memory (a call,
//! an atomic) runs in two phases, operands then stores. That is the memory-level
//! parallelism the pass exists for. A `return` clears the copy's masks at every enclosing
//! level.

use super::{
    Base, BinaryOp, Builtin, Dim, Expr, ExprId, Function, Handle, Literal, Local, LoopKind, Param,
    Place, Scalar, Span, Stmt, StmtKind, Type, UnaryOp, VerifiedModule,
};
use std::collections::{HashMap, HashSet};

/// Why a kernel keeps its one-work-item shape.
pub type Ineligible = &'static str;

/// The coarsened variant's name: not an identifier of the text format, so it cannot clash.
pub fn variant_name(kernel: &str, factor: u32) -> String {
    format!("{kernel}.x{factor}")
}

/// Whether `kernel` can be coarsened, and if not, why.
pub fn eligible(vm: &VerifiedModule, kernel: Handle<Function>) -> Result<(), Ineligible> {
    let f = vm.function(kernel);
    if !f.is_kernel() || f.template.is_some() {
        return Err("not a concrete kernel");
    }
    if !f.shared.is_empty() {
        return Err("uses shared memory");
    }
    let mut seen = HashSet::new();
    check_block(&f.body)?;
    check_exprs(vm, f, true, &mut seen)?;
    let uniform = uniform_locals(f);
    check_loops(f, &f.body, &uniform)
}

/// The locals whose value is the same in every copy: each assignment to them is outside
/// every `if` (so no copy skips it) and assigns a copy-uniform value.
fn uniform_locals(f: &Function) -> HashSet<usize> {
    // Every assignment: (local, value, under an if?). A `for` variable is assigned by its
    // loop (uniform when its start and step are).
    fn collect(block: &[Stmt], under_if: bool, out: &mut Vec<(usize, Option<ExprId>, bool)>) {
        for s in block {
            match &s.kind {
                StmtKind::Let { local, init } => out.push((local.index(), *init, under_if)),
                StmtKind::Assign { place, value } => match place {
                    Place::Local(l) | Place::Lane { local: l, .. } => {
                        out.push((l.index(), Some(*value), under_if))
                    }
                    Place::Element {
                        base: Base::Local(l),
                        ..
                    } => out.push((l.index(), None, true)),
                    Place::Element { .. } => {}
                },
                StmtKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    collect(then_block, true, out);
                    collect(else_block, true, out);
                }
                StmtKind::Loop { kind, body, .. } => {
                    if let LoopKind::For {
                        var, start, step, ..
                    } = kind
                    {
                        out.push((var.index(), Some(*start), under_if));
                        if let Some(st) = step {
                            out.push((var.index(), Some(*st), under_if));
                        }
                    }
                    collect(body, under_if, out);
                }
                _ => {}
            }
        }
    }
    let mut writes = Vec::new();
    collect(&f.body, false, &mut writes);
    // An atomic on a private array element writes it too.
    for (_, e) in f.exprs.iter() {
        if let Expr::Atomic {
            place:
                Place::Element {
                    base: Base::Local(l),
                    ..
                },
            ..
        } = e
        {
            writes.push((l.index(), None, true));
        }
    }
    let mut uniform: HashSet<usize> = (0..f.locals.len()).collect();
    loop {
        let before = uniform.len();
        for &(l, value, under_if) in &writes {
            let ok = !under_if && value.is_none_or(|v| uniform_expr(f, v, &uniform));
            if !ok {
                uniform.remove(&l);
            }
        }
        if uniform.len() == before {
            return uniform;
        }
    }
}

/// Whether `e` computes the same value in every copy: pure, and reading only literals,
/// parameters, coordinates other than the x ones the pass rewrites, and uniform locals.
fn uniform_expr(f: &Function, e: ExprId, uniform: &HashSet<usize>) -> bool {
    let ok = match &f.exprs[e] {
        Expr::Local(l) => uniform.contains(&l.index()),
        Expr::Builtin(Builtin::GroupId(Dim::X) | Builtin::GlobalId(Dim::X)) => false,
        Expr::Index { .. }
        | Expr::VLoad { .. }
        | Expr::Call { .. }
        | Expr::Dispatch { .. }
        | Expr::Atomic { .. }
        | Expr::AtomicLoad { .. }
        | Expr::AtomicStore { .. } => false,
        _ => true,
    };
    ok && f.exprs[e]
        .operands()
        .into_iter()
        .all(|o| uniform_expr(f, o, uniform))
}

/// Loops run once for all copies, so each must be a `for` whose bounds are the same in
/// every copy, with no `break`/`continue` and no assignment to its variable in the body.
fn check_loops(f: &Function, block: &[Stmt], uniform: &HashSet<usize>) -> Result<(), Ineligible> {
    for s in block {
        match &s.kind {
            StmtKind::Loop { kind, body, .. } => {
                let LoopKind::For {
                    var,
                    start,
                    end,
                    step,
                } = kind
                else {
                    return Err(
                        "has a `while` or `loop` (its trip count may differ between copies)",
                    );
                };
                let bounds = [Some(*start), Some(*end), *step];
                if !bounds
                    .into_iter()
                    .flatten()
                    .all(|b| uniform_expr(f, b, uniform))
                {
                    return Err("has a loop whose bounds may differ between copies");
                }
                if assigns(body, *var) {
                    return Err("assigns a `for` variable in its loop");
                }
                check_loops(f, body, uniform)?;
            }
            StmtKind::Break(_) | StmtKind::Continue(_) => {
                return Err("has a `break` or `continue` (copies would leave a loop apart)")
            }
            StmtKind::If {
                then_block,
                else_block,
                ..
            } => {
                check_loops(f, then_block, uniform)?;
                check_loops(f, else_block, uniform)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `block` assigns `local` (whole or a lane).
fn assigns(block: &[Stmt], local: Handle<Local>) -> bool {
    block.iter().any(|s| match &s.kind {
        StmtKind::Assign {
            place: Place::Local(l) | Place::Lane { local: l, .. },
            ..
        } => *l == local,
        StmtKind::If {
            then_block,
            else_block,
            ..
        } => assigns(then_block, local) || assigns(else_block, local),
        StmtKind::Loop { body, .. } => assigns(body, local),
        _ => false,
    })
}

fn check_block(block: &[Stmt]) -> Result<(), Ineligible> {
    for s in block {
        match &s.kind {
            StmtKind::Barrier => return Err("has a barrier"),
            StmtKind::WaveBarrier => return Err("has a wave barrier"),
            StmtKind::Fence(_) => return Err("has a fence"),
            StmtKind::MatrixStore { .. } => return Err("uses matrix fragments"),
            // Their records name the work-item, which coarsening changes.
            StmtKind::Print { .. } | StmtKind::Assert { .. } => return Err("has print or assert"),
            StmtKind::Block(_) => return Err("has a bare `{ }` block"),
            StmtKind::If {
                then_block,
                else_block,
                ..
            } => {
                check_block(then_block)?;
                check_block(else_block)?;
            }
            StmtKind::Loop { body, .. } => check_block(body)?,
            _ => {}
        }
    }
    Ok(())
}

/// Every expression of `f` (and, transitively, of the helpers it calls): no wave verbs,
/// fragments or shared memory; helpers may not read the coordinates the pass rewrites.
fn check_exprs(
    vm: &VerifiedModule,
    f: &Function,
    kernel: bool,
    seen: &mut HashSet<usize>,
) -> Result<(), Ineligible> {
    let module = vm.module();
    for (_, e) in f.exprs.iter() {
        match e {
            Expr::Wave { .. } => return Err("uses a wave verb"),
            Expr::MatrixFill { .. } | Expr::MatrixLoad { .. } | Expr::MatrixMma { .. } => {
                return Err("uses matrix fragments")
            }
            Expr::Index {
                base: Base::Shared(_),
                ..
            }
            | Expr::VLoad {
                base: Base::Shared(_),
                ..
            }
            | Expr::Atomic {
                place:
                    Place::Element {
                        base: Base::Shared(_),
                        ..
                    },
                ..
            }
            | Expr::AtomicLoad {
                place:
                    Place::Element {
                        base: Base::Shared(_),
                        ..
                    },
                ..
            }
            | Expr::AtomicStore {
                place:
                    Place::Element {
                        base: Base::Shared(_),
                        ..
                    },
                ..
            } => return Err("uses shared memory"),
            Expr::Builtin(Builtin::GroupId(Dim::X))
            | Expr::Builtin(Builtin::GlobalId(Dim::X))
            | Expr::Builtin(Builtin::NumGroups(Dim::X))
                if !kernel =>
            {
                return Err("a helper reads the x coordinates")
            }
            Expr::Call { function, .. } if seen.insert(function.index()) => {
                let g = &module.functions[*function];
                check_block(&g.body)?;
                check_exprs(vm, g, false, seen)?;
            }
            Expr::Dispatch { .. } | Expr::Tag { .. } => {
                // Every member of every tag set the module has: a dispatch may reach any.
                for (_, set) in module.tag_sets.iter() {
                    for &m in &set.members {
                        if seen.insert(m.index()) {
                            let g = &module.functions[m];
                            check_block(&g.body)?;
                            check_exprs(vm, g, false, seen)?;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The kernel `kernel` coarsened by `factor` (≥ 2), named [`variant_name`], with one more
/// parameter: the logical grid's x extent. Launch it over `ceil(grid.x / factor)` workgroups
/// (the other dimensions and the block unchanged).
pub fn coarsen(
    vm: &VerifiedModule,
    kernel: Handle<Function>,
    factor: u32,
) -> Result<Function, Ineligible> {
    eligible(vm, kernel)?;
    if factor < 2 {
        return Err("a factor below 2");
    }
    let src = vm.function(kernel);
    let mut out = Function::new(variant_name(&src.name, factor), src.kind);
    out.params = src.params.clone();
    out.attrs = src.attrs.clone();
    out.consts = src.consts.clone();
    out.span = src.span;
    let groups_param = out.params.len() as u32;
    let mut pname = "xpu_logical_groups_x".to_string();
    while src.params.iter().any(|p| p.name == pname) {
        pname.push('_');
    }
    out.params.push(Param {
        name: pname,
        ty: Type::U32,
        span: Span::UNKNOWN,
    });
    let mut pass = Pass {
        vm,
        kernel,
        src,
        out,
        factor: factor as usize,
        locals: vec![vec![None; src.locals.len()]; factor as usize],
        group_x: Vec::new(),
        global_x: Vec::new(),
        groups_param,
        masks: Vec::new(),
        hoisted: HashMap::new(),
        span: src.span,
    };
    let mut body = pass.prologue();
    let rest = pass.block(&src.body);
    body.extend(rest);
    pass.out.body = body;
    Ok(pass.out)
}

struct Pass<'a> {
    vm: &'a VerifiedModule,
    kernel: Handle<Function>,
    src: &'a Function,
    out: Function,
    factor: usize,
    /// `[copy][source local]`: the copy's local, made at the source local's `let`.
    locals: Vec<Vec<Option<Handle<Local>>>>,
    group_x: Vec<Handle<Local>>,
    global_x: Vec<Handle<Local>>,
    groups_param: u32,
    /// The mask levels in scope, innermost last; each holds one bool local per copy.
    masks: Vec<Vec<Handle<Local>>>,
    /// The loads of the statement being rewritten, already read into one local per copy
    /// (`hoist_loads`): `[(copy, source expression)]`.
    hoisted: HashMap<(usize, ExprId), Handle<Local>>,
    /// The source statement being rewritten: what it becomes keeps its span, so a fault
    /// in the variant names the line of the kernel as written.
    span: Span,
}

impl Pass<'_> {
    fn stmt(&self, kind: StmtKind) -> Stmt {
        Stmt {
            kind,
            span: self.span,
        }
    }

    fn expr(&mut self, e: Expr) -> ExprId {
        self.out.add_expr(e, Span::UNKNOWN)
    }

    fn u32(&mut self, v: u64) -> ExprId {
        self.expr(Expr::Literal(Literal::Int {
            bits: v,
            ty: Scalar::U32,
        }))
    }

    fn bool(&mut self, v: bool) -> ExprId {
        self.expr(Expr::Literal(Literal::Bool(v)))
    }

    /// A zero of a scalar or vector type (`None` for arrays, fragments and tags, which pure
    /// code never reads whole: their elements are loads, which run under the copy's mask).
    fn zero(&mut self, ty: Type) -> Option<ExprId> {
        let (scalar, lanes) = match ty {
            Type::Scalar(s) => (s, 1),
            Type::Vector(s, n) => (s, n),
            _ => return None,
        };
        let lit = if scalar == Scalar::Bool {
            Literal::Bool(false)
        } else if scalar.is_float() {
            Literal::Float {
                value: 0.0,
                ty: scalar,
            }
        } else {
            Literal::Int {
                bits: 0,
                ty: scalar,
            }
        };
        let value = self.expr(Expr::Literal(lit));
        Some(if lanes == 1 {
            value
        } else {
            self.expr(Expr::Splat { lanes, value })
        })
    }

    fn local(&mut self, name: String, ty: Type) -> Handle<Local> {
        self.out.locals.append(Local {
            name,
            ty,
            span: Span::UNKNOWN,
        })
    }

    fn binary(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> ExprId {
        self.expr(Expr::Binary { op, lhs, rhs })
    }

    fn read(&mut self, l: Handle<Local>) -> ExprId {
        self.expr(Expr::Local(l))
    }

    fn let_(&self, local: Handle<Local>, init: Option<ExprId>) -> Stmt {
        self.stmt(StmtKind::Let { local, init })
    }

    fn assign(&self, local: Handle<Local>, value: ExprId) -> Stmt {
        self.stmt(StmtKind::Assign {
            place: Place::Local(local),
            value,
        })
    }

    /// `if mask_c { body }` for the innermost mask of copy `c`.
    fn guarded(&mut self, c: usize, body: Vec<Stmt>) -> Stmt {
        let mask = self
            .masks
            .last()
            .expect("the prologue's level is never popped")[c];
        let cond = self.read(mask);
        self.stmt(StmtKind::If {
            cond,
            then_block: body,
            else_block: Vec::new(),
        })
    }

    /// Each copy's logical `group_id.x`, `global_id.x` and liveness.
    fn prologue(&mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        let mut alive = Vec::new();
        for c in 0..self.factor {
            let gx = self.local(format!("xpu_group_x_{c}"), Type::U32);
            let phys = self.expr(Expr::Builtin(Builtin::GroupId(Dim::X)));
            let f = self.u32(self.factor as u64);
            let scaled = self.binary(BinaryOp::Mul, phys, f);
            let cc = self.u32(c as u64);
            let v = self.binary(BinaryOp::Add, scaled, cc);
            out.push(self.let_(gx, Some(v)));

            let gid = self.local(format!("xpu_global_x_{c}"), Type::U32);
            let g = self.read(gx);
            let size = self.expr(Expr::Builtin(Builtin::GroupSize(Dim::X)));
            let base = self.binary(BinaryOp::Mul, g, size);
            let lid = self.expr(Expr::Builtin(Builtin::LocalId(Dim::X)));
            let v = self.binary(BinaryOp::Add, base, lid);
            out.push(self.let_(gid, Some(v)));

            let live = self.local(format!("xpu_alive_{c}"), Type::BOOL);
            let g = self.read(gx);
            let n = self.expr(Expr::Param(self.groups_param));
            let v = self.binary(BinaryOp::Lt, g, n);
            out.push(self.let_(live, Some(v)));

            self.group_x.push(gx);
            self.global_x.push(gid);
            alive.push(live);
        }
        self.masks.push(alive);
        out
    }

    fn block(&mut self, block: &[Stmt]) -> Vec<Stmt> {
        let outer = self.span;
        let mut out = Vec::new();
        for s in block {
            self.statement(s, &mut out);
        }
        self.span = outer;
        out
    }

    fn statement(&mut self, s: &Stmt, out: &mut Vec<Stmt>) {
        self.span = s.span;
        let roots = s.kind.value_roots();
        self.hoist_loads(&roots, out);
        self.statement_body(s, out);
        self.hoisted.clear();
    }

    /// Reads the loads of a statement (those that run whatever happens: not in a `&&`/`||`
    /// right operand, and none in a statement with a call or atomic) into per-copy locals,
    /// every copy's before any copy's arithmetic: a device compiler that will not move a
    /// load above a branch (Vulkan on NVIDIA, whose f32 arithmetic branches on subnormals)
    /// still gets every load in flight at once.
    fn hoist_loads(&mut self, roots: &[ExprId], out: &mut Vec<Stmt>) {
        let Some(loads) = self.src.unconditional_loads(roots) else {
            return;
        };
        for c in 0..self.factor {
            for &e in &loads {
                let Some(ty) = self.vm.expr_type(self.kernel, e) else {
                    continue;
                };
                let t = self.local(format!("xpu_load_{c}_{}", self.out.locals.len()), ty);
                let zero = self.zero(ty);
                out.push(self.let_(t, zero));
                let v = self.copy(e, c);
                let set = self.assign(t, v);
                let g = self.guarded(c, vec![set]);
                out.push(g);
                self.hoisted.insert((c, e), t);
            }
        }
    }

    fn statement_body(&mut self, s: &Stmt, out: &mut Vec<Stmt>) {
        match &s.kind {
            StmtKind::Let { local, init } => {
                let decl = &self.src.locals[*local];
                let (name, ty) = (decl.name.clone(), decl.ty);
                for c in 0..self.factor {
                    let l = self.local(format!("{name}_c{c}_{}", local.index()), ty);
                    self.locals[c][local.index()] = Some(l);
                    match init {
                        // Pure: computed for every copy (an inactive copy's value is unused).
                        Some(e) if self.pure(*e) => {
                            let v = self.copy(*e, c);
                            out.push(self.let_(l, Some(v)));
                        }
                        // Zero first: pure code reads every copy's locals, so none may be
                        // left uninitialised for a copy the guard skips.
                        Some(e) => {
                            let zero = self.zero(ty);
                            out.push(self.let_(l, zero));
                            let v = self.copy(*e, c);
                            let set = self.assign(l, v);
                            let g = self.guarded(c, vec![set]);
                            out.push(g);
                        }
                        None => {
                            let zero = self.zero(ty);
                            out.push(self.let_(l, zero));
                        }
                    }
                }
            }
            StmtKind::Assign { place, value } => {
                let index = match place {
                    Place::Element { index, .. } => Some(*index),
                    _ => None,
                };
                self.two_phase(index, *value, out, |pass, c, index, value| {
                    let place = pass.place(place, c, index);
                    pass.stmt(StmtKind::Assign { place, value })
                });
            }
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                self.two_phase(Some(*index), *value, out, |pass, c, index, value| {
                    pass.stmt(StmtKind::VStore {
                        base: pass.base(*base, c),
                        index: index.expect("vstore has an index"),
                        value,
                        align: *align,
                    })
                });
            }
            StmtKind::Expr(e) => {
                for c in 0..self.factor {
                    let v = self.copy(*e, c);
                    let st = self.stmt(StmtKind::Expr(v));
                    let g = self.guarded(c, vec![st]);
                    out.push(g);
                }
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let mut taken = Vec::new();
                let mut other = Vec::new();
                for c in 0..self.factor {
                    let t = self.local(
                        format!("xpu_then_{c}_{}", self.out.locals.len()),
                        Type::BOOL,
                    );
                    let f = self.bool(false);
                    out.push(self.let_(t, Some(f)));
                    let v = self.copy(*cond, c);
                    let mut inner = vec![self.assign(t, v)];
                    if !else_block.is_empty() {
                        let e = self.local(
                            format!("xpu_else_{c}_{}", self.out.locals.len()),
                            Type::BOOL,
                        );
                        let f = self.bool(false);
                        out.push(self.let_(e, Some(f)));
                        let r = self.read(t);
                        let not = self.expr(Expr::Unary {
                            op: UnaryOp::Not,
                            arg: r,
                        });
                        inner.push(self.assign(e, not));
                        other.push(e);
                    }
                    let g = self.guarded(c, inner);
                    out.push(g);
                    taken.push(t);
                }
                self.masks.push(taken);
                let t = self.block(then_block);
                out.extend(t);
                self.masks.pop();
                if !else_block.is_empty() {
                    self.masks.push(other);
                    let e = self.block(else_block);
                    out.extend(e);
                    self.masks.pop();
                }
            }
            StmtKind::Return(_) => {
                // The copy is done: clear it at every level, so nothing after runs for it.
                for c in 0..self.factor {
                    let levels: Vec<Handle<Local>> = self.masks.iter().map(|m| m[c]).collect();
                    let clears = levels
                        .into_iter()
                        .map(|m| {
                            let f = self.bool(false);
                            self.assign(m, f)
                        })
                        .collect();
                    let g = self.guarded(c, clears);
                    out.push(g);
                }
            }
            StmtKind::Loop {
                label,
                kind:
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                    },
                body,
            } => {
                // One loop for every copy (its bounds are copy-uniform, `eligible` checked),
                // its variable shared; the body runs per copy under the enclosing masks.
                let decl = &self.src.locals[*var];
                let (name, ty) = (decl.name.clone(), decl.ty);
                let shared = self.local(format!("{name}_{}", var.index()), ty);
                for c in 0..self.factor {
                    self.locals[c][var.index()] = Some(shared);
                }
                let start = self.copy(*start, 0);
                let end = self.copy(*end, 0);
                let step = step.map(|st| self.copy(st, 0));
                let body = self.block(body);
                out.push(self.stmt(StmtKind::Loop {
                    label: label.clone(),
                    kind: LoopKind::For {
                        var: shared,
                        start,
                        end,
                        step,
                    },
                    body,
                }));
            }
            // `eligible` refused kernels with these.
            StmtKind::Loop { .. }
            | StmtKind::Break(_)
            | StmtKind::Continue(_)
            | StmtKind::Barrier
            | StmtKind::WaveBarrier
            | StmtKind::Fence(_)
            | StmtKind::Print { .. }
            | StmtKind::Assert { .. }
            | StmtKind::Block(_)
            | StmtKind::MatrixStore { .. } => unreachable!("refused by `eligible`"),
        }
    }

    /// A store-like statement: when its index or value reads memory, every copy's operands
    /// are evaluated (under its mask) before any copy's store; otherwise one guarded
    /// statement per copy.
    fn two_phase(
        &mut self,
        index: Option<ExprId>,
        value: ExprId,
        out: &mut Vec<Stmt>,
        store: impl Fn(&mut Self, usize, Option<ExprId>, ExprId) -> Stmt,
    ) {
        let pure = index.is_none_or(|i| self.pure(i)) && self.pure(value);
        if pure {
            for c in 0..self.factor {
                let i = index.map(|i| self.copy(i, c));
                let v = self.copy(value, c);
                let st = store(self, c, i, v);
                let g = self.guarded(c, vec![st]);
                out.push(g);
            }
            return;
        }
        let mut temps = Vec::new();
        for c in 0..self.factor {
            let mut inner = Vec::new();
            let ti = index.map(|i| {
                let ty = self.vm.expr_type(self.kernel, i).expect("a typed index");
                let t = self.local(format!("xpu_index_{c}_{}", self.out.locals.len()), ty);
                out.push(self.let_(t, None));
                let v = self.copy(i, c);
                inner.push(self.assign(t, v));
                t
            });
            let ty = self
                .vm
                .expr_type(self.kernel, value)
                .expect("a typed value");
            let tv = self.local(format!("xpu_value_{c}_{}", self.out.locals.len()), ty);
            out.push(self.let_(tv, None));
            let v = self.copy(value, c);
            inner.push(self.assign(tv, v));
            let g = self.guarded(c, inner);
            out.push(g);
            temps.push((ti, tv));
        }
        for (c, (ti, tv)) in temps.into_iter().enumerate() {
            let i = ti.map(|t| self.read(t));
            let v = self.read(tv);
            let st = store(self, c, i, v);
            let g = self.guarded(c, vec![st]);
            out.push(g);
        }
    }

    /// Whether evaluating `e` can only compute (no memory read, call or atomic), so that it
    /// may run for a copy whose mask is clear.
    fn pure(&self, e: ExprId) -> bool {
        if self.hoisted.contains_key(&(0, e)) {
            return true;
        }
        let ok = !matches!(
            self.src.exprs[e],
            Expr::Index { .. }
                | Expr::VLoad { .. }
                | Expr::Call { .. }
                | Expr::Dispatch { .. }
                | Expr::Atomic { .. }
                | Expr::AtomicLoad { .. }
                | Expr::AtomicStore { .. }
        );
        ok && self.src.exprs[e]
            .operands()
            .into_iter()
            .all(|o| self.pure(o))
    }

    fn map_local(&self, l: Handle<Local>, c: usize) -> Handle<Local> {
        self.locals[c][l.index()].expect("a local is declared before use")
    }

    fn base(&self, b: Base, c: usize) -> Base {
        match b {
            Base::Local(l) => Base::Local(self.map_local(l, c)),
            other => other,
        }
    }

    fn place(&self, p: &Place, c: usize, index: Option<ExprId>) -> Place {
        match *p {
            Place::Local(l) => Place::Local(self.map_local(l, c)),
            Place::Lane { local, lane } => Place::Lane {
                local: self.map_local(local, c),
                lane,
            },
            Place::Element { base, .. } => Place::Element {
                base: self.base(base, c),
                index: index.expect("an element place has an index"),
            },
        }
    }

    /// A copy of the tree `e` for copy `c` in the output function.
    fn copy(&mut self, e: ExprId, c: usize) -> ExprId {
        if let Some(&l) = self.hoisted.get(&(c, e)) {
            return self.out.add_expr(Expr::Local(l), self.src.expr_span(e));
        }
        let mut x = self.src.exprs[e].clone();
        for op in x.operands_mut() {
            *op = self.copy(*op, c);
        }
        let x = match x {
            Expr::Local(l) => Expr::Local(self.map_local(l, c)),
            Expr::Builtin(Builtin::GroupId(Dim::X)) => Expr::Local(self.group_x[c]),
            Expr::Builtin(Builtin::GlobalId(Dim::X)) => Expr::Local(self.global_x[c]),
            Expr::Builtin(Builtin::NumGroups(Dim::X)) => Expr::Param(self.groups_param),
            Expr::Index { base, index } => Expr::Index {
                base: self.base(base, c),
                index,
            },
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => Expr::VLoad {
                base: self.base(base, c),
                index,
                lanes,
                align,
            },
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => {
                let index = match place {
                    Place::Element { index, .. } => Some(index),
                    _ => None,
                };
                Expr::Atomic {
                    op,
                    order,
                    place: self.place(&place, c, index),
                    value,
                    compare,
                }
            }
            Expr::AtomicLoad { order, place } => {
                let index = match place {
                    Place::Element { index, .. } => Some(index),
                    _ => None,
                };
                Expr::AtomicLoad {
                    order,
                    place: self.place(&place, c, index),
                }
            }
            Expr::AtomicStore {
                order,
                place,
                value,
            } => {
                let index = match place {
                    Place::Element { index, .. } => Some(index),
                    _ => None,
                };
                Expr::AtomicStore {
                    order,
                    place: self.place(&place, c, index),
                    value,
                }
            }
            other => other,
        };
        let span = self.src.expr_span(e);
        self.out.add_expr(x, span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{args, Backend, Device, KernelStream, Launch};

    fn verified(src: &str) -> VerifiedModule {
        crate::ir::parse(src).unwrap().verify().unwrap()
    }

    const KERNELS: &str = r#"
device fn twice(v: f32) -> f32 {
    return v + v;
}

kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i >= n {
        return;
    }
    let t: f32 = x[i];
    if t < 0.0 {
        y[i] = twice(t);
    } else {
        y[i] = a * t + y[i];
    }
    for k: u32 in 0..n step 97 {
        if (i + k) % 3 == 0 {
            y[i] += x[(i + k) % n];
        }
    }
    let g: u32 = group_id.x;
    if local_id.x == 3 {
        y[i] = (num_groups.x as f32) * 1000.0 + (g as f32);
    }
}

kernel looped(y: buf<f32, rw>) {
    let i: u32 = global_id.x;
    while y[i] < 10.0 {
        y[i] += 1.0;
    }
}

kernel bounded(y: buf<f32, rw>) {
    for k: u32 in 0..global_id.x {
        y[global_id.x] += 1.0;
    }
}

kernel waves(y: buf<f32, rw>) {
    y[global_id.x] = wave_reduce_sum(y[global_id.x]);
}
"#;

    #[test]
    fn refuses_what_ties_a_work_item_to_its_group() {
        let vm = verified(KERNELS);
        assert_eq!(eligible(&vm, vm.kernel("saxpy").unwrap()), Ok(()));
        assert!(eligible(&vm, vm.kernel("looped").unwrap())
            .unwrap_err()
            .contains("`while`"));
        assert_eq!(
            eligible(&vm, vm.kernel("bounded").unwrap()),
            Err("has a loop whose bounds may differ between copies")
        );
        assert_eq!(
            eligible(&vm, vm.kernel("waves").unwrap()),
            Err("uses a wave verb")
        );
    }

    /// The variant, launched directly over the physical grid on the interpreter, computes
    /// what the original does over the logical one, for grids that are and are not a
    /// multiple of the factor.
    #[test]
    fn variant_matches_the_original_on_the_interpreter() {
        let vm = verified(KERNELS);
        let f = coarsen(&vm, vm.kernel("saxpy").unwrap(), 4).unwrap();
        let (extended, _) = vm.with_function(f).unwrap();
        let device = Device::open(Backend::Interp).unwrap();
        let program = device.load(extended).unwrap();
        let stream = KernelStream::current(&device);
        for groups in [1u32, 5, 8, 9] {
            let n = groups * 32 - 7;
            let xs: Vec<f32> = (0..groups * 32).map(|i| i as f32 - 40.0).collect();
            let run = |name: &str, grid: u32, extra: Option<u32>| {
                let mut y = device.upload(&vec![1.5f32; xs.len()]).unwrap();
                let x = device.upload(&xs).unwrap();
                let k = program.kernel(name).unwrap();
                let launch = Launch::grid([grid]).block([32]);
                match extra {
                    None => k.launch(&stream, launch, args![&mut y, &x, 3.0f32, n]),
                    Some(g) => k.launch(&stream, launch, args![&mut y, &x, 3.0f32, n, g]),
                }
                .unwrap();
                y.download().unwrap()
            };
            let want = run("saxpy", groups, None);
            let got = run("saxpy.x4", groups.div_ceil(4), Some(groups));
            assert_eq!(got, want, "{groups} groups");
        }
    }
}
