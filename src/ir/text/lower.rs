//! The lowering: syntax tree to IR. It resolves names (functions and tag sets by a first
//! pass, so forward references work; locals by lexical scope with shadowing; then
//! parameters, shared arrays, template parameters, built-ins), gives unsuffixed literals
//! their type from context, and desugars compound assignment.
//!
//! Only what it needs to build the IR is checked here (unknown names, malformed built-in
//! calls, literals out of range); type rules are the verifier's. An ill-typed program still
//! lowers whenever the IR can represent it.
//!
//! Literal typing (docs/text-format.md, "Unsuffixed literals"): an expression is *flexible*
//! when its type comes from context: an unsuffixed number, a unary operator on a flexible
//! operand, an arithmetic/bitwise/shift operator, `select`, or a math function whose operands
//! are all flexible. A *peer group* (the operands of a binary operator or comparison, the two
//! arms of `select`, the arguments of a math function) takes the type of its first
//! non-flexible member; a group that is all flexible takes the context's (nothing, for a
//! comparison). The printer ([`super::printer`]) applies the same rules in reverse.

use super::ast::{self, Arg, ExprKind, Generic, StmtKind, TypeKind};
use super::lexer::Number;
use super::{codes, infer_literal, is_builtin_function, is_reserved, literal, scalar_of};
use crate::ir::typeck;
use crate::ir::{
    AtomicOp, Attributes, Base, BinaryOp, BitOp, Block, Builtin, ConstBinOp, ConstExpr, ConstUnOp,
    Diagnostic, Dim, ElemType, Expr, ExprId, FenceScope, Function, FunctionKind, Handle, Len,
    Literal, Local, LoopKind, MathFn, MemoryOrder, Module, Occupancy, Param, Place, ReduceOp,
    Scalar, SharedDecl, Span, Stmt, TagSet, TemplateInfo, Type, UnaryOp, Unlowered, WaveOp,
};
use std::collections::HashMap;

type LResult<T> = Result<T, ()>;

mod expr;

/// Lowers the items of one file into a module, adding diagnostics to `diags`.
pub fn lower(items: &[ast::Item], diags: &mut Vec<Diagnostic>) -> Module {
    let mut lw = Lowerer {
        module: Module::new(),
        diags,
        fn_names: HashMap::new(),
        set_names: HashMap::new(),
    };
    lw.run(items);
    lw.module
}

struct Lowerer<'d> {
    module: Module,
    diags: &'d mut Vec<Diagnostic>,
    /// Functions and tag sets by name (the first of a name), so that resolving a name is
    /// not a scan of the module (which made lowering quadratic in their number).
    fn_names: HashMap<String, Handle<Function>>,
    set_names: HashMap<String, Handle<TagSet>>,
}

/// Whether an operator's operands form a peer group whose type is the result's
/// (arithmetic, bitwise, shifts).
pub fn is_arith(op: BinaryOp) -> bool {
    !op.is_comparison() && !matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr)
}

/// Whether `e` is flexible: its type comes from context (see the module doc).
pub fn is_flex(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Num { num, .. } => num.suffix().is_none(),
        ExprKind::Unary(_, a) => is_flex(a),
        ExprKind::Binary(op, a, b) => is_arith(*op) && is_flex(a) && is_flex(b),
        ExprKind::IfElse(_, a, b) => is_flex(a) && is_flex(b),
        ExprKind::Call {
            name,
            generics: None,
            args,
        } => {
            let pos: Vec<&ast::Expr> = args
                .iter()
                .filter_map(|a| match a {
                    Arg::Pos(e) => Some(e),
                    Arg::Named(..) => None,
                })
                .collect();
            if pos.len() != args.len() {
                return false;
            }
            if name == "select" {
                pos.len() == 3 && is_flex(pos[1]) && is_flex(pos[2])
            } else if MathFn::from_name(name).is_some() {
                !pos.is_empty() && pos.iter().all(|a| is_flex(a))
            } else if let Some(op) = BitOp::from_name(name) {
                let mut values = (0..pos.len()).filter(|&i| !op.is_amount(i)).peekable();
                values.peek().is_some() && values.all(|i| is_flex(pos[i]))
            } else {
                false
            }
        }
        _ => false,
    }
}

/// The lengths of a nested array type `[[E; C]; R]` with literal lengths, outermost first;
/// `None` for anything else (a flat array included).
fn literal_dims(t: &ast::Type) -> Option<Vec<u32>> {
    let mut dims = Vec::new();
    let mut cur = t;
    while let TypeKind::Array { elem, len } = &cur.kind {
        match len.as_deref().map(|e| &e.kind) {
            Some(ExprKind::Num {
                num:
                    Number::Int {
                        value,
                        suffix: None,
                        ..
                    },
                neg: false,
            }) => dims.push(u32::try_from(*value).ok()?),
            _ => return None,
        }
        cur = elem;
    }
    (dims.len() >= 2).then_some(dims)
}

/// What a value name resolves to.
#[derive(Clone, Copy)]
enum Resolved {
    Local(Handle<Local>),
    Param(u32),
    Shared(Handle<SharedDecl>),
    TParam(u32),
}

fn coordinate(name: &str, dim: Dim) -> Option<Builtin> {
    Some(match name {
        "global_id" => Builtin::GlobalId(dim),
        "local_id" => Builtin::LocalId(dim),
        "group_id" => Builtin::GroupId(dim),
        "group_size" => Builtin::GroupSize(dim),
        "num_groups" => Builtin::NumGroups(dim),
        _ => return None,
    })
}

fn lane_of(c: char) -> Option<u8> {
    match c {
        'x' => Some(0),
        'y' => Some(1),
        'z' => Some(2),
        'w' => Some(3),
        _ => None,
    }
}

/// The wave verb a name calls.
pub fn wave_op(name: &str) -> Option<WaveOp> {
    let reduce = |s: &str| ReduceOp::ALL.into_iter().find(|r| r.name() == s);
    if let Some(r) = name.strip_prefix("wave_reduce_") {
        return reduce(r).map(WaveOp::Reduce);
    }
    if let Some(r) = name.strip_prefix("wave_inclusive_scan_") {
        return reduce(r).map(WaveOp::InclusiveScan);
    }
    if let Some(r) = name.strip_prefix("wave_exclusive_scan_") {
        return reduce(r).map(WaveOp::ExclusiveScan);
    }
    Some(match name {
        "wave_broadcast" => WaveOp::Broadcast,
        "wave_shuffle" => WaveOp::Shuffle,
        "wave_shuffle_xor" => WaveOp::ShuffleXor,
        "wave_shuffle_up" => WaveOp::ShuffleUp,
        "wave_shuffle_down" => WaveOp::ShuffleDown,
        "wave_rotate" => WaveOp::Rotate,
        "wave_ballot" => WaveOp::Ballot,
        "wave_any" => WaveOp::Any,
        "wave_all" => WaveOp::All,
        "wave_elect" => WaveOp::Elect,
        _ => return None,
    })
}

/// Whether a wave verb's second argument is a lane, delta or mask (`u32`).
pub fn wave_takes_lane(op: WaveOp) -> bool {
    matches!(
        op,
        WaveOp::Broadcast
            | WaveOp::Shuffle
            | WaveOp::ShuffleXor
            | WaveOp::ShuffleUp
            | WaveOp::ShuffleDown
            | WaveOp::Rotate
    )
}

/// Whether `op` takes a tile (`width = T`): the lane exchanges, reductions and scans; the
/// votes and `wave_elect` do not.
pub fn wave_takes_width(op: WaveOp) -> bool {
    !matches!(
        op,
        WaveOp::Ballot | WaveOp::Any | WaveOp::All | WaveOp::Elect
    )
}

/// The per-function state of the lowering.
struct FunctionScope {
    func: Function,
    /// Visible locals, innermost block last; later entries shadow earlier ones.
    scopes: Vec<HashMap<String, Handle<Local>>>,
    /// The labels of the enclosing loops (innermost last).
    labels: Vec<Option<String>>,
    /// Parameters, shared arrays and template parameters by name (the first of a name), so
    /// that resolving a name does not scan them (quadratic in their number otherwise).
    params: HashMap<String, u32>,
    shared: HashMap<String, Handle<SharedDecl>>,
    tparams: HashMap<String, u32>,
}

impl FunctionScope {
    fn resolve(&self, name: &str) -> Option<Resolved> {
        for scope in self.scopes.iter().rev() {
            if let Some(l) = scope.get(name) {
                return Some(Resolved::Local(*l));
            }
        }
        if let Some(&i) = self.params.get(name) {
            return Some(Resolved::Param(i));
        }
        if let Some(&h) = self.shared.get(name) {
            return Some(Resolved::Shared(h));
        }
        if let Some(&i) = self.tparams.get(name) {
            return Some(Resolved::TParam(i));
        }
        None
    }

    fn declare(&mut self, name: &str, ty: Type, span: Span) -> Handle<Local> {
        let h = self.func.locals.append(Local {
            name: name.to_string(),
            ty,
            span,
        });
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), h);
        }
        h
    }
}

impl Lowerer<'_> {
    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn check_name(&mut self, name: &str, span: Span, what: &str) {
        if is_reserved(name) {
            self.error(
                codes::RESERVED,
                span,
                format!("`{name}` is a built-in name and cannot name a {what}"),
            );
        }
    }

    fn run(&mut self, items: &[ast::Item]) {
        // Pass 1: tag set names, so types and tag values can refer to them.
        for item in items {
            if let ast::Item::TagSet(t) = item {
                self.check_name(&t.name, t.name_span, "tag set");
                if self.set_names.contains_key(&t.name) {
                    self.error(
                        codes::DUPLICATE,
                        t.name_span,
                        format!("tag set `{}` defined twice", t.name),
                    );
                    continue;
                }
                let h = self.module.tag_sets.append(TagSet {
                    name: t.name.clone(),
                    members: Vec::new(),
                    span: t.span,
                });
                self.set_names.insert(t.name.clone(), h);
            }
        }
        // Pass 2: function signatures, so calls can come before the callee.
        let mut bodies = Vec::new();
        for item in items {
            if let ast::Item::Function(f) = item {
                if let Some(func) = self.signature(f) {
                    let name = func.name.clone();
                    let h = self.module.functions.append(func);
                    self.fn_names.insert(name, h);
                    bodies.push((h, f));
                }
            }
        }
        // Pass 3: tag set members (of each set's first definition).
        for item in items {
            if let ast::Item::TagSet(t) = item {
                let Some(&set) = self.set_names.get(&t.name) else {
                    continue;
                };
                if self.module.tag_sets[set].span != t.span {
                    continue;
                }
                let mut members = Vec::new();
                for (m, span) in &t.members {
                    match self.fn_names.get(m) {
                        Some(&h) => members.push(h),
                        None => self.error(
                            codes::UNKNOWN_FUNCTION,
                            *span,
                            format!("unknown function `{m}` in tag set `{}`", t.name),
                        ),
                    }
                }
                self.module.tag_sets[set].members = members;
            }
        }
        // Families: their keys are constant expressions over the template's parameters.
        for item in items {
            if let ast::Item::Family(f) = item {
                self.family(f);
            }
        }
        // Pass 4: bodies.
        for (h, f) in bodies {
            if let Some(body) = &f.body {
                let func = self.module.functions[h].clone();
                let mut params = HashMap::new();
                for (i, p) in func.params.iter().enumerate() {
                    params.entry(p.name.clone()).or_insert(i as u32);
                }
                let mut tparams = HashMap::new();
                for (i, p) in func
                    .template
                    .iter()
                    .flat_map(|t| t.params.iter())
                    .enumerate()
                {
                    tparams.entry(p.clone()).or_insert(i as u32);
                }
                let mut cx = FunctionScope {
                    func,
                    scopes: vec![HashMap::new()],
                    labels: Vec::new(),
                    params,
                    shared: HashMap::new(),
                    tparams,
                };
                // Shared arrays are visible in the whole body.
                for s in body {
                    if let StmtKind::Shared {
                        name,
                        name_span,
                        ty,
                    } = &s.kind
                    {
                        self.shared_decl(&mut cx, name, *name_span, ty);
                    }
                }
                let block = self.block(&mut cx, body, true);
                cx.func.body = block;
                self.module.functions[h] = cx.func;
            }
        }
    }

    // ---- signatures ----

    fn signature(&mut self, f: &ast::Function) -> Option<Function> {
        let base_name = f.name.split('<').next().unwrap_or(&f.name);
        if is_builtin_function(base_name) || is_reserved(base_name) {
            self.error(
                codes::RESERVED,
                f.name_span,
                format!("`{base_name}` is a built-in name and cannot name a function"),
            );
        }
        if self.fn_names.contains_key(&f.name) {
            self.error(
                codes::DUPLICATE,
                f.name_span,
                format!("function `{}` defined twice", f.name),
            );
            return None;
        }
        let kind = if f.kernel {
            FunctionKind::Kernel
        } else {
            FunctionKind::Device
        };
        let mut func = Function::new(f.name.clone(), kind);
        func.span = f.span;
        if let Some(t) = &f.template {
            let mut params: Vec<String> = Vec::new();
            let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
            for (p, span) in &t.params {
                self.check_name(p, *span, "template parameter");
                if !seen.insert(p.as_str()) {
                    self.error(
                        codes::DUPLICATE,
                        *span,
                        format!("template parameter `{p}` declared twice"),
                    );
                }
                params.push(p.clone());
            }
            func.template = Some(TemplateInfo {
                params,
                requires: Vec::new(),
                instantiate: Vec::new(),
                max: None,
            });
            let mut requires = Vec::new();
            for r in &t.requires {
                if let Ok(c) = self.const_expr(&mut func, r) {
                    requires.push((c, r.span));
                }
            }
            let mut instantiate = Vec::new();
            for (args, span) in &t.instantiate {
                let mut vals = Vec::new();
                for a in args {
                    match u32::try_from(*a) {
                        Ok(v) => vals.push(v),
                        Err(_) => self.error(codes::RANGE, *span, format!("{a} does not fit u32")),
                    }
                }
                instantiate.push((vals, *span));
            }
            let max = t.max.and_then(|(m, span)| match u32::try_from(m) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.error(codes::RANGE, span, format!("{m} does not fit u32"));
                    None
                }
            });
            if let Some(info) = &mut func.template {
                info.requires = requires;
                info.instantiate = instantiate;
                info.max = max;
            }
        }
        let tparams: std::collections::HashSet<String> = func
            .template
            .iter()
            .flat_map(|t| t.params.iter().cloned())
            .collect();
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        for p in &f.params {
            self.check_name(&p.name, p.span, "parameter");
            if !seen.insert(p.name.clone()) || tparams.contains(&p.name) {
                self.error(
                    codes::DUPLICATE,
                    p.span,
                    format!("`{}` declared twice", p.name),
                );
            }
            let ty = self.ty(&mut func, &p.ty).unwrap_or(Type::I32);
            func.params.push(Param {
                name: p.name.clone(),
                ty,
                span: p.span,
            });
        }
        if let Some(r) = &f.ret {
            func.ret = self.ty(&mut func, r).ok();
        }
        func.attrs = self.attributes(&mut func, &f.attrs);
        Some(func)
    }

    fn attributes(&mut self, func: &mut Function, attrs: &[ast::Attr]) -> Attributes {
        let mut out = Attributes::default();
        for a in attrs {
            match a.name.as_str() {
                "wave" => {
                    if out.wave.is_some() {
                        self.error(codes::ATTRIBUTE, a.span, "`@wave` given twice");
                    }
                    match a.args.as_slice() {
                        [ast::AttrArg::Pos(e)] => {
                            if let Some(n) = self.u32_of(e) {
                                out.wave = Some((n, a.span));
                            }
                        }
                        _ => self.error(
                            codes::ATTRIBUTE,
                            a.span,
                            "`@wave` takes one width: `@wave(32)`",
                        ),
                    }
                }
                "occupancy" => {
                    if out.occupancy.is_some() {
                        self.error(codes::ATTRIBUTE, a.span, "`@occupancy` given twice");
                    }
                    let mut occ = Occupancy {
                        span: a.span,
                        ..Default::default()
                    };
                    for arg in &a.args {
                        let ast::AttrArg::Named { key, span, value } = arg else {
                            self.error(
                                codes::ATTRIBUTE,
                                a.span,
                                "`@occupancy` takes `key = value` arguments",
                            );
                            continue;
                        };
                        let ast::AttrValue::Expr(e) = value else {
                            self.error(codes::ATTRIBUTE, *span, format!("`{key}` takes a number"));
                            continue;
                        };
                        let slot = match key.as_str() {
                            "max_threads" => &mut occ.max_threads,
                            "max_waves" => &mut occ.max_waves,
                            "min_resident" => &mut occ.min_resident,
                            "max_registers" => &mut occ.max_registers,
                            _ => {
                                self.error(
                                    codes::ATTRIBUTE,
                                    *span,
                                    format!("unknown `@occupancy` key `{key}` (max_threads, max_waves, min_resident, max_registers)"),
                                );
                                continue;
                            }
                        };
                        if slot.is_some() {
                            self.error(codes::ATTRIBUTE, *span, format!("`{key}` given twice"));
                            continue;
                        }
                        if let Ok(c) = self.const_expr(func, e) {
                            *slot = Some(c);
                        }
                    }
                    out.occupancy = Some(occ);
                }
                "block" => {
                    if out.block.is_some() {
                        self.error(codes::ATTRIBUTE, a.span, "`@block` given twice");
                    }
                    let mut dims = [1u32; 3];
                    let ok = (1..=3).contains(&a.args.len())
                        && a.args.iter().enumerate().all(|(d, arg)| match arg {
                            ast::AttrArg::Pos(e) => match self.u32_of(e) {
                                Some(n) => {
                                    dims[d] = n;
                                    true
                                }
                                None => false,
                            },
                            _ => false,
                        });
                    if ok {
                        out.block = Some((dims, a.span));
                    } else {
                        self.error(
                            codes::ATTRIBUTE,
                            a.span,
                            "`@block` takes one to three sizes: `@block(256)`, `@block(16, 16)`",
                        );
                    }
                }
                "unlowered" => {
                    let mut backend = None;
                    let mut tracked = None;
                    let mut may_lower = false;
                    let mut hold = false;
                    let mut host_wave_below = None;
                    let mut seen: Vec<&str> = Vec::new();
                    for arg in &a.args {
                        let ast::AttrArg::Named { key, span, value } = arg else {
                            self.error(
                                codes::ATTRIBUTE,
                                a.span,
                                "`@unlowered` takes `key = value` arguments",
                            );
                            continue;
                        };
                        if seen.contains(&key.as_str()) {
                            self.error(codes::ATTRIBUTE, *span, format!("`{key}` given twice"));
                            continue;
                        }
                        seen.push(key);
                        match (key.as_str(), value) {
                            ("backend", ast::AttrValue::Str(s)) => backend = Some(s.clone()),
                            ("tracked", ast::AttrValue::Str(s)) => tracked = Some(s.clone()),
                            ("may_lower" | "hold", ast::AttrValue::Expr(e)) => {
                                let ExprKind::Bool(b) = e.kind else {
                                    self.error(codes::ATTRIBUTE, *span, format!("`{key}` takes `true` or `false`"));
                                    continue;
                                };
                                if key == "hold" {
                                    hold = b;
                                } else {
                                    may_lower = b;
                                }
                            }
                            ("host_wave_below", ast::AttrValue::Expr(e)) => {
                                host_wave_below = self.u32_of(e);
                            }
                            ("backend" | "tracked" | "may_lower" | "hold" | "host_wave_below", _) => {
                                self.error(codes::ATTRIBUTE, *span, format!("wrong kind of value for `{key}`"));
                            }
                            _ => self.error(
                                codes::ATTRIBUTE,
                                *span,
                                format!("unknown `@unlowered` key `{key}` (backend, tracked, may_lower, hold, host_wave_below)"),
                            ),
                        }
                    }
                    match (backend, tracked) {
                        (Some(backend), Some(tracked)) => out.unlowered.push(Unlowered {
                            backend,
                            tracked,
                            may_lower,
                            hold,
                            host_wave_below,
                            span: a.span,
                        }),
                        _ => self.error(
                            codes::ATTRIBUTE,
                            a.span,
                            "`@unlowered` needs `backend = \"...\"` and `tracked = \"...\"`",
                        ),
                    }
                }
                "unbounded" => {
                    if out.unbounded.is_some() {
                        self.error(codes::ATTRIBUTE, a.span, "`@unbounded` given twice");
                    }
                    match a.args.as_slice() {
                        [ast::AttrArg::Named {
                            key,
                            value: ast::AttrValue::Str(s),
                            ..
                        }] if key == "tracked" => out.unbounded = Some((s.clone(), a.span)),
                        _ => self.error(
                            codes::ATTRIBUTE,
                            a.span,
                            "`@unbounded` takes `tracked = \"...\"`",
                        ),
                    }
                }
                other => self.error(
                    codes::ATTRIBUTE,
                    a.span,
                    format!("unknown attribute `@{other}` (wave, occupancy, block, unlowered, unbounded)"),
                ),
            }
        }
        out
    }

    fn u32_of(&mut self, e: &ast::Expr) -> Option<u32> {
        match &e.kind {
            ExprKind::Num {
                num:
                    Number::Int {
                        value,
                        suffix: None,
                        ..
                    },
                neg: false,
            } => match u32::try_from(*value) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.error(codes::RANGE, e.span, format!("{value} does not fit u32"));
                    None
                }
            },
            _ => {
                self.error(codes::SYNTAX, e.span, "expected an unsuffixed integer");
                None
            }
        }
    }

    /// A family declaration (`crate::ir::family`): each key lowered into the family's own
    /// constant arena over the template's parameters. A family over something that is not a
    /// template keeps no keys; the verifier reports it (`XPU-S001`).
    fn family(&mut self, f: &ast::Family) {
        use crate::ir::family::{codes as fcodes, FamilyDecl, FamilyKey};
        let params = self
            .fn_names
            .get(&f.template)
            .and_then(|&h| self.module.functions[h].template.as_ref())
            .map(|t| t.params.clone());
        let mut decl = FamilyDecl {
            name: f.name.clone(),
            template: f.template.clone(),
            keys: Vec::new(),
            consts: Default::default(),
            span: f.span,
        };
        if let Some(params) = params {
            let mut scratch = Function::new(f.name.clone(), crate::ir::FunctionKind::Kernel);
            scratch.template = Some(TemplateInfo {
                params,
                requires: Vec::new(),
                instantiate: Vec::new(),
                max: None,
            });
            for (key, span, e) in &f.keys {
                let Some(k) = FamilyKey::from_name(key) else {
                    let known: Vec<&str> = FamilyKey::ALL.iter().map(|k| k.name()).collect();
                    self.error(
                        fcodes::BAD_KEY,
                        *span,
                        format!("unknown family key `{key}` (expected {})", known.join(", ")),
                    );
                    continue;
                };
                if let Ok(h) = self.const_expr(&mut scratch, e) {
                    decl.keys.push((k, h, *span));
                }
            }
            decl.consts = scratch.consts;
        }
        self.module.families.push(decl);
    }

    /// A constant expression over the function's template parameters.
    fn const_expr(&mut self, func: &mut Function, e: &ast::Expr) -> LResult<Handle<ConstExpr>> {
        let c = match &e.kind {
            ExprKind::Num {
                num:
                    Number::Int {
                        value,
                        suffix: None,
                        ..
                    },
                neg,
            } => {
                let lit = func.consts.append(ConstExpr::Lit(*value));
                if *neg {
                    ConstExpr::Unary(ConstUnOp::Neg, lit)
                } else {
                    return Ok(lit);
                }
            }
            ExprKind::Name(n) => {
                let i = func
                    .template
                    .as_ref()
                    .and_then(|t| t.params.iter().position(|p| p == n));
                match i {
                    Some(i) => ConstExpr::Param(i as u32),
                    None => {
                        self.error(
                            codes::UNKNOWN_NAME,
                            e.span,
                            format!("unknown template parameter `{n}`"),
                        );
                        return Err(());
                    }
                }
            }
            ExprKind::Unary(op, a) => {
                let a = self.const_expr(func, a)?;
                let op = match op {
                    UnaryOp::Neg => ConstUnOp::Neg,
                    UnaryOp::Not => ConstUnOp::Not,
                };
                ConstExpr::Unary(op, a)
            }
            ExprKind::Binary(op, a, b) => {
                let op = match op {
                    BinaryOp::Add => ConstBinOp::Add,
                    BinaryOp::Sub => ConstBinOp::Sub,
                    BinaryOp::Mul => ConstBinOp::Mul,
                    BinaryOp::Div => ConstBinOp::Div,
                    BinaryOp::Rem => ConstBinOp::Rem,
                    BinaryOp::Eq => ConstBinOp::Eq,
                    BinaryOp::Ne => ConstBinOp::Ne,
                    BinaryOp::Lt => ConstBinOp::Lt,
                    BinaryOp::Le => ConstBinOp::Le,
                    BinaryOp::Gt => ConstBinOp::Gt,
                    BinaryOp::Ge => ConstBinOp::Ge,
                    BinaryOp::LogicalAnd => ConstBinOp::And,
                    BinaryOp::LogicalOr => ConstBinOp::Or,
                    _ => {
                        self.error(
                            codes::CONST,
                            e.span,
                            "constant expressions use + - * / % comparisons && || ! and parentheses",
                        );
                        return Err(());
                    }
                };
                let a = self.const_expr(func, a);
                let b = self.const_expr(func, b);
                ConstExpr::Binary(op, a?, b?)
            }
            _ => {
                self.error(
                    codes::CONST,
                    e.span,
                    "not a constant expression: use unsuffixed integers, template parameters and operators",
                );
                return Err(());
            }
        };
        Ok(func.consts.append(c))
    }

    // ---- types ----

    fn elem(&mut self, func: &mut Function, t: &ast::Type) -> LResult<ElemType> {
        match self.ty(func, t)? {
            Type::Scalar(s) => Ok(ElemType::scalar(s)),
            Type::Vector(s, n) => Ok(ElemType::vector(s, n)),
            _ => {
                self.error(
                    codes::UNKNOWN_TYPE,
                    t.span,
                    "an element type is a scalar or a vector",
                );
                Err(())
            }
        }
    }

    /// An array length: a literal that fits `u32` is fixed; anything else (an expression, or
    /// a literal too large, which the verifier reports) is a constant expression.
    fn len(&mut self, func: &mut Function, e: &ast::Expr) -> LResult<Len> {
        if let ExprKind::Num {
            num:
                Number::Int {
                    value,
                    suffix: None,
                    ..
                },
            neg: false,
        } = &e.kind
        {
            if let Ok(v) = u32::try_from(*value) {
                return Ok(Len::Fixed(v));
            }
        }
        Ok(Len::Const(self.const_expr(func, e)?))
    }

    fn ty(&mut self, func: &mut Function, t: &ast::Type) -> LResult<Type> {
        Ok(match &t.kind {
            TypeKind::Scalar(s) => Type::Scalar(*s),
            TypeKind::Vector(s, n) => Type::Vector(*s, *n),
            TypeKind::Buffer { elem, access } => Type::Buffer {
                elem: self.elem(func, elem)?,
                access: *access,
            },
            TypeKind::Array { elem: inner, .. } if matches!(inner.kind, TypeKind::Array { .. }) => {
                let (elem, dims) = self.array_dims(func, t)?;
                Type::Array {
                    elem,
                    len: Len::Fixed(self.flat_len(&dims, t.span)?),
                }
            }
            TypeKind::Array { elem, len } => {
                let elem = self.elem(func, elem)?;
                let Some(len) = len else {
                    self.error(
                        codes::MISPLACED,
                        t.span,
                        "an array without a length is only for `shared` declarations",
                    );
                    return Err(());
                };
                Type::Array {
                    elem,
                    len: self.len(func, len)?,
                }
            }
            TypeKind::Matrix {
                role,
                scalar,
                rows,
                cols,
            } => Type::Matrix {
                role: *role,
                scalar: *scalar,
                rows: *rows,
                cols: *cols,
            },
            TypeKind::Named(name) => {
                // Only without any `struct` item (`super::structs` lowers structs away).
                self.error(
                    codes::UNKNOWN_TYPE,
                    t.span,
                    format!("unknown type `{name}`"),
                );
                return Err(());
            }
            TypeKind::Shared(inner) => match &inner.kind {
                TypeKind::Array { elem, len } if !matches!(elem.kind, TypeKind::Array { .. }) => {
                    Type::Shared {
                        elem: self.elem(func, elem)?,
                        len: match len {
                            Some(l) => Some(self.len(func, l)?),
                            None => None,
                        },
                    }
                }
                _ => {
                    self.error(
                        codes::MEMORY_PARAM_TYPE,
                        t.span,
                        "`shared` in a type is followed by a one-dimensional array type \
                         (`shared [E; N]` or `shared [E]`)",
                    );
                    return Err(());
                }
            },
            TypeKind::Layout { .. } => {
                self.error(
                    codes::LAYOUT_PLACE,
                    t.span,
                    "a layout type (`swizzled`, `block_padded`) is for `shared` arrays only",
                );
                return Err(());
            }
            TypeKind::Tag(set) => match self.set_names.get(set).copied() {
                Some(h) => Type::Tag(h),
                None => {
                    self.error(
                        codes::UNKNOWN_TYPE,
                        t.span,
                        format!("unknown tag set `{set}`"),
                    );
                    return Err(());
                }
            },
        })
    }

    /// `[[E; C]; R]`, nested to any depth: the element type and the lengths, outermost
    /// first. Every length is an integer literal (`XPU-P031`).
    fn array_dims(&mut self, func: &mut Function, t: &ast::Type) -> LResult<(ElemType, Vec<u32>)> {
        let mut dims = Vec::new();
        let mut cur = t;
        while let TypeKind::Array { elem, len } = &cur.kind {
            let n = match len.as_deref() {
                Some(ast::Expr {
                    kind:
                        ExprKind::Num {
                            num:
                                Number::Int {
                                    value,
                                    suffix: None,
                                    ..
                                },
                            neg: false,
                        },
                    ..
                }) => u32::try_from(*value).ok(),
                _ => None,
            };
            let Some(n) = n else {
                self.error(
                    codes::DIMS,
                    cur.span,
                    "the lengths of a multi-dimensional array are integer literals (`[[f32; 17]; 16]`)",
                );
                return Err(());
            };
            dims.push(n);
            cur = elem;
        }
        Ok((self.elem(func, cur)?, dims))
    }

    /// The element count of an array of lengths `dims`.
    fn flat_len(&mut self, dims: &[u32], span: Span) -> LResult<u32> {
        match dims.iter().try_fold(1u32, |a, &d| a.checked_mul(d)) {
            Some(n) => Ok(n),
            None => {
                self.error(
                    codes::RANGE,
                    span,
                    "a multi-dimensional array of more than 2^32 - 1 elements",
                );
                Err(())
            }
        }
    }

    /// `a[i][j]...` where `a` names a multi-dimensional array: its base, lengths and every
    /// subscript of the chain (outermost first; those past the array's dimensions are lanes).
    fn nd_chain<'e>(
        &self,
        cx: &FunctionScope,
        e: &'e ast::Expr,
    ) -> Option<(Base, Vec<u32>, Vec<&'e ast::Expr>)> {
        let mut idx = Vec::new();
        let mut cur = e;
        while let ExprKind::Index(b, i) = &cur.kind {
            idx.push(&**i);
            cur = b;
        }
        let ExprKind::Name(n) = &cur.kind else {
            return None;
        };
        let base = match cx.resolve(n)? {
            Resolved::Local(l) => Base::Local(l),
            Resolved::Shared(h) => Base::Shared(h),
            _ => return None,
        };
        let dims = cx.func.dims_of(base)?.to_vec();
        idx.reverse();
        Some((base, dims, idx))
    }

    /// The row-major element index of subscripts `idx` of an array of lengths `dims`:
    /// `((i0 * d1 + i1) * d2 + i2) ...`; fewer subscripts than dimensions is `XPU-P031`.
    fn flat_index(
        &mut self,
        cx: &mut FunctionScope,
        dims: &[u32],
        idx: &[&ast::Expr],
        span: Span,
    ) -> LResult<ExprId> {
        if idx.len() < dims.len() {
            self.error(
                codes::DIMS,
                span,
                format!(
                    "an array of {} dimensions takes {} subscripts (`a[i][j]`)",
                    dims.len(),
                    dims.len()
                ),
            );
            return Err(());
        }
        let mut acc = self.expr(cx, idx[0], Some(Scalar::U32));
        for k in 1..dims.len() {
            let i = self.expr(cx, idx[k], Some(Scalar::U32));
            let (a, i) = (acc?, i?);
            let d = cx.func.add_expr(
                Expr::Literal(Literal::Int {
                    bits: u64::from(dims[k]),
                    ty: Scalar::U32,
                }),
                idx[k].span,
            );
            let m = cx.func.add_expr(
                Expr::Binary {
                    op: BinaryOp::Mul,
                    lhs: a,
                    rhs: d,
                },
                idx[k].span,
            );
            acc = Ok(cx.func.add_expr(
                Expr::Binary {
                    op: BinaryOp::Add,
                    lhs: m,
                    rhs: i,
                },
                idx[k].span,
            ));
        }
        acc
    }

    fn shared_decl(&mut self, cx: &mut FunctionScope, name: &str, span: Span, ty: &ast::Type) {
        if let TypeKind::Layout { array, layout } = &ty.kind {
            self.shared_decl(cx, name, span, array);
            if let Some(&h) = cx.shared.get(name) {
                if !cx.func.layouts.iter().any(|(s, _)| *s == h) {
                    cx.func.layouts.push((h, *layout));
                }
            }
            return;
        }
        self.check_name(name, span, "shared array");
        let taken = cx.params.contains_key(name)
            || cx.shared.contains_key(name)
            || cx.tparams.contains_key(name);
        if taken {
            self.error(codes::DUPLICATE, span, format!("`{name}` declared twice"));
            return;
        }
        if let TypeKind::Array { elem: inner, .. } = &ty.kind {
            if matches!(inner.kind, TypeKind::Array { .. }) {
                let Ok((elem, dims)) = self.array_dims(&mut cx.func, ty) else {
                    return;
                };
                let Ok(n) = self.flat_len(&dims, ty.span) else {
                    return;
                };
                let h = cx.func.shared.append(SharedDecl {
                    name: name.to_string(),
                    elem,
                    len: Some(Len::Fixed(n)),
                    span,
                });
                cx.func.array_dims.push((Base::Shared(h), dims));
                cx.shared.insert(name.to_string(), h);
                return;
            }
        }
        let TypeKind::Array { elem, len } = &ty.kind else {
            self.error(
                codes::MISPLACED,
                ty.span,
                "a shared declaration takes an array type: `[E; N]` or `[E]`",
            );
            return;
        };
        let Ok(elem) = self.elem(&mut cx.func, elem) else {
            return;
        };
        let len = match len {
            None => None,
            Some(l) => match self.len(&mut cx.func, l) {
                Ok(l) => Some(l),
                Err(()) => return,
            },
        };
        let h = cx.func.shared.append(SharedDecl {
            name: name.to_string(),
            elem,
            len,
            span,
        });
        cx.shared.insert(name.to_string(), h);
    }

    // ---- statements ----

    fn block(&mut self, cx: &mut FunctionScope, stmts: &[ast::Stmt], top: bool) -> Block {
        let mut out = Vec::new();
        for s in stmts {
            if let Ok(Some(s)) = self.stmt(cx, s, top) {
                out.push(s);
            }
        }
        out
    }

    fn scoped_block(&mut self, cx: &mut FunctionScope, stmts: &[ast::Stmt]) -> Block {
        cx.scopes.push(HashMap::new());
        let b = self.block(cx, stmts, false);
        cx.scopes.pop();
        b
    }

    fn stmt(&mut self, cx: &mut FunctionScope, s: &ast::Stmt, top: bool) -> LResult<Option<Stmt>> {
        use crate::ir::StmtKind as K;
        let kind = match &s.kind {
            StmtKind::Let {
                name,
                name_span,
                ty,
                init,
            } => {
                let ty_ast = ty.as_ref();
                self.check_name(name, *name_span, "local");
                let declared = match ty {
                    Some(t) => Some(self.ty(&mut cx.func, t)),
                    None => None,
                };
                let init_id = match init {
                    Some(e) => {
                        let expect = declared.and_then(|t| scalar_of(t.ok()));
                        self.expr(cx, e, expect).ok()
                    }
                    None => None,
                };
                let ty = match declared {
                    Some(t) => t.ok(),
                    None => match init_id {
                        Some(id) => {
                            let t = typeck::expr_type(&self.module, &cx.func, id);
                            if t.is_none() {
                                self.error(
                                    codes::INFER,
                                    *name_span,
                                    format!("cannot infer the type of `{name}`: write `let {name}: T = ...`"),
                                );
                            }
                            t
                        }
                        None => {
                            if init.is_none() {
                                self.error(
                                    codes::INFER,
                                    *name_span,
                                    format!("`let {name};` needs a type: `let {name}: T;`"),
                                );
                            }
                            None
                        }
                    },
                };
                // Declare even after an error, so later uses do not cascade.
                let local = cx.declare(name, ty.unwrap_or(Type::I32), *name_span);
                if let (Some(Type::Array { .. }), Some(dims)) = (ty, ty_ast.and_then(literal_dims))
                {
                    cx.func.array_dims.push((Base::Local(local), dims));
                }
                match (ty, init, init_id) {
                    (Some(_), None, _) => K::Let { local, init: None },
                    (Some(_), Some(_), Some(id)) => K::Let {
                        local,
                        init: Some(id),
                    },
                    _ => return Err(()),
                }
            }
            StmtKind::Shared { name_span, .. } => {
                if !top {
                    self.error(
                        codes::MISPLACED,
                        *name_span,
                        "`shared` declarations belong at the top level of a kernel body",
                    );
                    return Err(());
                }
                return Ok(None);
            }
            StmtKind::Assign { place, op, value } => {
                let p = self.place(cx, place)?;
                let pty = typeck::place_type(&self.module, &cx.func, &p);
                let value = match op {
                    None => self.expr(cx, value, scalar_of(pty))?,
                    Some(op) => {
                        let read = self.place_read(cx, place, &p)?;
                        let anchor = scalar_of(typeck::expr_type(&self.module, &cx.func, read));
                        let rhs = if is_flex(value) {
                            self.expr(cx, value, anchor)?
                        } else {
                            self.expr(cx, value, None)?
                        };
                        cx.func.add_expr(
                            Expr::Binary {
                                op: *op,
                                lhs: read,
                                rhs,
                            },
                            place.span,
                        )
                    }
                };
                K::Assign { place: p, value }
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let cond = self.expr(cx, cond, None);
                let then_block = self.scoped_block(cx, then_block);
                let else_block = self.scoped_block(cx, else_block);
                K::If {
                    cond: cond?,
                    then_block,
                    else_block,
                }
            }
            StmtKind::Loop { label, kind, body } => {
                let label_name = label.as_ref().map(|(l, _)| l.clone());
                cx.scopes.push(HashMap::new());
                let kind = match kind {
                    ast::LoopKind::Infinite => Ok(LoopKind::Infinite),
                    ast::LoopKind::While(c) => self.expr(cx, c, None).map(LoopKind::While),
                    ast::LoopKind::For {
                        var,
                        var_span,
                        ty,
                        start,
                        end,
                        step,
                    } => {
                        self.for_header(cx, var, *var_span, ty.as_ref(), start, end, step.as_ref())
                    }
                    ast::LoopKind::Cond {
                        var,
                        var_span,
                        ty,
                        init,
                        cond,
                        update_place,
                        update_op,
                        update_value,
                    } => self.cond_for_header(
                        cx,
                        var,
                        *var_span,
                        ty.as_ref(),
                        init,
                        cond,
                        (update_place, *update_op, update_value),
                    ),
                };
                cx.labels.push(label_name.clone());
                let body = self.block(cx, body, false);
                cx.labels.pop();
                cx.scopes.pop();
                K::Loop {
                    label: label_name,
                    kind: kind?,
                    body,
                }
            }
            StmtKind::Block(b) => K::Block(self.scoped_block(cx, b)),
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                if let Some((l, span)) = label {
                    if !cx.labels.iter().any(|x| x.as_deref() == Some(l.as_str())) {
                        self.error(
                            codes::LABEL,
                            *span,
                            format!("no enclosing loop is labelled `'{l}`"),
                        );
                        return Err(());
                    }
                }
                let label = label.as_ref().map(|(l, _)| l.clone());
                if matches!(s.kind, StmtKind::Break(_)) {
                    K::Break(label)
                } else {
                    K::Continue(label)
                }
            }
            StmtKind::Return(value) => {
                let expect = scalar_of(cx.func.ret);
                match value {
                    Some(v) => K::Return(Some(self.expr(cx, v, expect)?)),
                    None => K::Return(None),
                }
            }
            StmtKind::Fence(scope, span) => match scope.as_str() {
                "workgroup" => K::Fence(FenceScope::Workgroup),
                "device" => K::Fence(FenceScope::Device),
                other => {
                    self.error(
                        codes::BUILTIN,
                        *span,
                        format!("unknown fence scope `{other}`: `workgroup` or `device`"),
                    );
                    return Err(());
                }
            },
            StmtKind::Print {
                format,
                format_span,
                args,
            } => {
                let placeholders = crate::ir::debug::placeholders(format);
                match placeholders {
                    Err(msg) => {
                        self.error(codes::PRINT_FORMAT, *format_span, msg);
                        return Err(());
                    }
                    Ok(n) if n != args.len() => {
                        self.error(
                            codes::PRINT_FORMAT,
                            *format_span,
                            format!(
                                "the format has {n} `{{}}` but print is given {} value(s)",
                                args.len()
                            ),
                        );
                        return Err(());
                    }
                    Ok(_) => {}
                }
                let ids: Vec<LResult<ExprId>> =
                    args.iter().map(|a| self.expr(cx, a, None)).collect();
                K::Print {
                    format: format.clone(),
                    args: ids.into_iter().collect::<LResult<Vec<_>>>()?,
                }
            }
            StmtKind::Assert { cond, message } => K::Assert {
                cond: self.expr(cx, cond, None)?,
                message: message.clone(),
            },
            StmtKind::Expr(e) => match &e.kind {
                ExprKind::Call {
                    name,
                    generics: None,
                    args,
                } if matches!(
                    name.as_str(),
                    "barrier" | "wave_barrier" | "vstore" | "matrix_store"
                ) =>
                {
                    self.stmt_builtin(cx, name, args, e.span)?
                }
                _ => K::Expr(self.expr(cx, e, None)?),
            },
        };
        Ok(Some(Stmt { kind, span: s.span }))
    }

    #[allow(clippy::too_many_arguments)]
    fn for_header(
        &mut self,
        cx: &mut FunctionScope,
        var: &str,
        var_span: Span,
        ty: Option<&ast::Type>,
        start: &ast::Expr,
        end: &ast::Expr,
        step: Option<&ast::Expr>,
    ) -> LResult<LoopKind> {
        self.check_name(var, var_span, "loop variable");
        let (ty, start, end) = match ty {
            Some(t) => {
                let ty = self.ty(&mut cx.func, t);
                let expect = ty.ok().and_then(|t| scalar_of(Some(t)));
                let s = self.expr(cx, start, expect);
                let e = self.expr(cx, end, expect);
                (ty.ok(), s, e)
            }
            None => {
                let ids = self.peers(cx, &[start, end], None);
                let ty = ids
                    .as_ref()
                    .ok()
                    .and_then(|ids| typeck::expr_type(&self.module, &cx.func, ids[0]));
                if ty.is_none() && ids.is_ok() {
                    self.error(
                        codes::INFER,
                        var_span,
                        format!("cannot infer the type of `{var}`: write `for {var}: T in ...`"),
                    );
                }
                match ids {
                    Ok(ids) => (ty, Ok(ids[0]), Ok(ids[1])),
                    Err(()) => (ty, Err(()), Err(())),
                }
            }
        };
        let step = step.map(|s| self.expr(cx, s, scalar_of(ty)));
        let var = cx.declare(var, ty.unwrap_or(Type::I32), var_span);
        let step = step.transpose()?;
        ty.ok_or(())?;
        Ok(LoopKind::For {
            var,
            start: start?,
            end: end?,
            step,
        })
    }

    /// `for var: T = init; cond; var op= value`: `init` is lowered before `var` is in scope
    /// (as a `let`'s initialiser), `cond` and the update after.
    #[allow(clippy::too_many_arguments)]
    fn cond_for_header(
        &mut self,
        cx: &mut FunctionScope,
        var: &str,
        var_span: Span,
        ty: Option<&ast::Type>,
        init: &ast::Expr,
        cond: &ast::Expr,
        update: (&ast::Expr, Option<BinaryOp>, &ast::Expr),
    ) -> LResult<LoopKind> {
        self.check_name(var, var_span, "loop variable");
        let declared = ty.map(|t| self.ty(&mut cx.func, t));
        let expect = declared.and_then(|t| scalar_of(t.ok()));
        let init = self.expr(cx, init, expect);
        let ty = match declared {
            Some(t) => t.ok(),
            None => {
                let t = init
                    .as_ref()
                    .ok()
                    .and_then(|id| typeck::expr_type(&self.module, &cx.func, *id));
                if t.is_none() && init.is_ok() {
                    self.error(
                        codes::INFER,
                        var_span,
                        format!("cannot infer the type of `{var}`: write `for {var}: T = ...`"),
                    );
                }
                t
            }
        };
        let local = cx.declare(var, ty.unwrap_or(Type::I32), var_span);
        let cond = self.expr(cx, cond, None);
        let (place, op, value) = update;
        let names_var = matches!(&place.kind, ExprKind::Name(n) if n == var);
        if !names_var {
            self.error(
                codes::FOR_UPDATE,
                place.span,
                format!(
                    "the update of a `for` assigns its variable: `{var} = ...` or `{var} op= ...`"
                ),
            );
            return Err(());
        }
        let update = match op {
            None => self.expr(cx, value, scalar_of(ty)),
            Some(op) => {
                let read = cx.func.add_expr(Expr::Local(local), place.span);
                let rhs = if is_flex(value) {
                    self.expr(cx, value, scalar_of(ty))
                } else {
                    self.expr(cx, value, None)
                };
                rhs.map(|rhs| {
                    cx.func
                        .add_expr(Expr::Binary { op, lhs: read, rhs }, place.span)
                })
            }
        };
        ty.ok_or(())?;
        Ok(LoopKind::Cond {
            var: local,
            init: init?,
            cond: cond?,
            update: update?,
        })
    }

    fn stmt_builtin(
        &mut self,
        cx: &mut FunctionScope,
        name: &str,
        args: &[Arg],
        span: Span,
    ) -> LResult<crate::ir::StmtKind> {
        use crate::ir::StmtKind as K;
        let (pos, align) = self.split_args(args, name == "vstore", span)?;
        match name {
            "barrier" => {
                self.arity(name, &pos, 0, span)?;
                Ok(K::Barrier)
            }
            "wave_barrier" => {
                self.arity(name, &pos, 0, span)?;
                Ok(K::WaveBarrier)
            }
            "vstore" => {
                self.arity(name, &pos, 3, span)?;
                let base = self.base(cx, pos[0])?;
                let elem = typeck::base_elem(&self.module, &cx.func, base).map(|e| e.scalar);
                let index = self.expr(cx, pos[1], Some(Scalar::U32));
                let value = self.expr(cx, pos[2], elem);
                Ok(K::VStore {
                    base,
                    index: index?,
                    value: value?,
                    align,
                })
            }
            _ => {
                self.arity(name, &pos, 4, span)?;
                let value = self.expr(cx, pos[0], None);
                let base = self.base(cx, pos[1]);
                let offset = self.expr(cx, pos[2], Some(Scalar::U32));
                let stride = self.expr(cx, pos[3], Some(Scalar::U32));
                Ok(K::MatrixStore {
                    value: value?,
                    base: base?,
                    offset: offset?,
                    stride: stride?,
                })
            }
        }
    }

    /// Positional arguments and an optional `align = N` (where `align_ok`).
    fn split_args<'a>(
        &mut self,
        args: &'a [Arg],
        align_ok: bool,
        span: Span,
    ) -> LResult<(Vec<&'a ast::Expr>, Option<u8>)> {
        let mut pos = Vec::new();
        let mut align = None;
        for a in args {
            match a {
                Arg::Pos(e) => pos.push(e),
                Arg::Named(key, kspan, e) if key == "align" && align_ok && align.is_none() => {
                    let v = self.u32_of(e).ok_or(())?;
                    match u8::try_from(v) {
                        Ok(v) => align = Some(v),
                        Err(_) => {
                            self.error(codes::RANGE, *kspan, format!("alignment {v} too large"));
                            return Err(());
                        }
                    }
                }
                Arg::Named(key, kspan, _) => {
                    let _ = span;
                    self.error(
                        codes::BUILTIN,
                        *kspan,
                        format!("unexpected argument `{key} =`"),
                    );
                    return Err(());
                }
            }
        }
        Ok((pos, align))
    }

    /// A wave verb: positional arguments, then `width = T` on the verbs that take a tile
    /// (`XPU-P040` for a `width` anywhere else, given twice or not an unsuffixed integer).
    fn wave_call(
        &mut self,
        cx: &mut FunctionScope,
        op: WaveOp,
        name: &str,
        args: &[Arg],
    ) -> LResult<Expr> {
        let mut out = Vec::new();
        let mut ok = true;
        let mut width = None;
        let mut i = 0;
        for a in args {
            match a {
                Arg::Pos(e) => {
                    let expect = (i == 1 && wave_takes_lane(op)).then_some(Scalar::U32);
                    i += 1;
                    match self.expr(cx, e, expect) {
                        Ok(id) => out.push(id),
                        Err(()) => ok = false,
                    }
                }
                Arg::Named(key, kspan, e) if key == "width" => {
                    if !wave_takes_width(op) {
                        self.error(
                            codes::TILE,
                            *kspan,
                            format!(
                                "`{name}` takes no `width`; the lane exchanges, reductions and \
                                 scans do"
                            ),
                        );
                        ok = false;
                    } else if width.is_some() {
                        self.error(codes::TILE, *kspan, "`width =` given twice");
                        ok = false;
                    } else {
                        match &e.kind {
                            ExprKind::Num {
                                num:
                                    Number::Int {
                                        value,
                                        suffix: None,
                                        ..
                                    },
                                neg: false,
                            } => match u32::try_from(*value) {
                                Ok(v) => width = Some(v),
                                Err(_) => {
                                    self.error(
                                        codes::TILE,
                                        e.span,
                                        format!("tile width {value} does not fit u32"),
                                    );
                                    ok = false;
                                }
                            },
                            _ => {
                                self.error(
                                    codes::TILE,
                                    e.span,
                                    "a tile width is an unsuffixed integer literal: `width = 16`",
                                );
                                ok = false;
                            }
                        }
                    }
                }
                Arg::Named(key, kspan, _) => {
                    self.error(
                        codes::BUILTIN,
                        *kspan,
                        format!("unexpected argument `{key} =`"),
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return Err(());
        }
        Ok(Expr::Wave {
            op,
            args: out,
            width,
        })
    }

    fn arity(&mut self, name: &str, pos: &[&ast::Expr], n: usize, span: Span) -> LResult<()> {
        if pos.len() != n {
            self.error(
                codes::BUILTIN,
                span,
                format!(
                    "`{name}` takes {n} argument{}, found {}",
                    if n == 1 { "" } else { "s" },
                    pos.len()
                ),
            );
            return Err(());
        }
        Ok(())
    }

    /// A buffer parameter, shared array or private array named by `e`.
    fn base(&mut self, cx: &mut FunctionScope, e: &ast::Expr) -> LResult<Base> {
        if let ExprKind::Name(n) = &e.kind {
            match cx.resolve(n) {
                Some(Resolved::Param(i)) => return Ok(Base::Param(i)),
                Some(Resolved::Shared(h)) => return Ok(Base::Shared(h)),
                Some(Resolved::Local(l)) => return Ok(Base::Local(l)),
                Some(Resolved::TParam(_)) => {}
                None => {
                    self.error(codes::UNKNOWN_NAME, e.span, format!("unknown name `{n}`"));
                    return Err(());
                }
            }
        }
        self.error(
            codes::BUILTIN,
            e.span,
            "expected the name of a buffer, shared array or private array",
        );
        Err(())
    }

    /// The target of an assignment or an atomic.
    fn place(&mut self, cx: &mut FunctionScope, e: &ast::Expr) -> LResult<Place> {
        match &e.kind {
            ExprKind::Name(n) => match cx.resolve(n) {
                Some(Resolved::Local(l)) => return Ok(Place::Local(l)),
                None => {
                    self.error(codes::UNKNOWN_NAME, e.span, format!("unknown name `{n}`"));
                    return Err(());
                }
                Some(_) => {}
            },
            ExprKind::Field(base, field, fspan) => {
                if let ExprKind::Name(n) = &base.kind {
                    if let Some(Resolved::Local(l)) = cx.resolve(n) {
                        let mut chars = field.chars();
                        if let (Some(c), None) = (chars.next(), chars.next()) {
                            if let Some(lane) = lane_of(c) {
                                return Ok(Place::Lane { local: l, lane });
                            }
                        }
                        self.error(
                            codes::PLACE,
                            *fspan,
                            "only one lane (`.x`, `.y`, `.z`, `.w`) of a local can be assigned",
                        );
                        return Err(());
                    }
                }
            }
            ExprKind::Index(..) if self.nd_chain(cx, e).is_some() => {
                let (base, dims, idx) = self.nd_chain(cx, e).expect("an nd chain");
                if idx.len() <= dims.len() {
                    let index = self.flat_index(cx, &dims, &idx, e.span)?;
                    return Ok(Place::Element { base, index });
                }
            }
            ExprKind::Index(base, index) => {
                if let ExprKind::Name(n) = &base.kind {
                    let resolved = cx.resolve(n);
                    let b = match resolved {
                        Some(Resolved::Param(i)) => Some(Base::Param(i)),
                        Some(Resolved::Shared(h)) => Some(Base::Shared(h)),
                        Some(Resolved::Local(l)) => {
                            let is_array = matches!(cx.func.locals[l].ty, Type::Array { .. });
                            if !is_array {
                                if let Some(lane) = self.lane_literal(index) {
                                    return Ok(Place::Lane {
                                        local: l,
                                        lane: lane?,
                                    });
                                }
                            }
                            Some(Base::Local(l))
                        }
                        Some(Resolved::TParam(_)) => None,
                        None => {
                            self.error(
                                codes::UNKNOWN_NAME,
                                base.span,
                                format!("unknown name `{n}`"),
                            );
                            return Err(());
                        }
                    };
                    if let Some(b) = b {
                        let index = self.expr(cx, index, Some(Scalar::U32))?;
                        return Ok(Place::Element { base: b, index });
                    }
                }
            }
            _ => {}
        }
        self.error(
            codes::PLACE,
            e.span,
            "cannot assign to this: assign a local, a lane `v.x`, or an element `b[i]`",
        );
        Err(())
    }

    /// The value a place holds, read again (compound assignment): the index is lowered a
    /// second time, so both trees have one parent each.
    fn place_read(&mut self, cx: &mut FunctionScope, e: &ast::Expr, p: &Place) -> LResult<ExprId> {
        let expr = match *p {
            Place::Local(l) => Expr::Local(l),
            Place::Lane { local, lane } => {
                let v = cx.func.add_expr(Expr::Local(local), e.span);
                Expr::Extract { vector: v, lane }
            }
            Place::Element { base, .. } => {
                let ExprKind::Index(_, index) = &e.kind else {
                    return Err(());
                };
                let index = match self.nd_chain(cx, e) {
                    Some((_, dims, idx)) => self.flat_index(cx, &dims, &idx, e.span)?,
                    None => self.expr(cx, index, Some(Scalar::U32))?,
                };
                Expr::Index { base, index }
            }
        };
        Ok(cx.func.add_expr(expr, e.span))
    }

    /// `Some(lane)` if `e` is an integer literal (a lane index), with its range checked.
    fn lane_literal(&mut self, e: &ast::Expr) -> Option<LResult<u8>> {
        match &e.kind {
            ExprKind::Num {
                num: Number::Int { value, .. },
                neg: false,
            } => Some(match u8::try_from(*value) {
                Ok(v) => Ok(v),
                Err(_) => {
                    self.error(codes::RANGE, e.span, format!("lane {value} out of range"));
                    Err(())
                }
            }),
            _ => None,
        }
    }
}
