//! The canonical printer. Layout: 4-space indentation, one statement per line, tag sets
//! first, then functions in module order, items separated by a blank line; shared
//! declarations first in a body; `else if` chains; the fewest parentheses precedence allows;
//! compound assignment where the value re-reads the place.
//!
//! Literal suffixes are omitted exactly where the parser would infer the same type: the
//! printer runs the lowering's rules (see `lower`'s module doc) backwards. Each expression is
//! printed in a context: `Expect(E)` (the parser will give a flexible expression here the
//! scalar `E`) or `Determined` (it must print non-flexibly, so its own text fixes its type).
//! For a peer group it picks which members print flexibly so that the parser's anchor (the
//! first non-flexible member) has the type those members need.
//!
//! Names: parameters, functions and tag sets print as they are. Locals, shared arrays and
//! template parameters are renamed (`x_1`) only where the parser's scoping would otherwise
//! resolve a reference to something else, or where a name is not a valid identifier.

use std::collections::HashSet;
use std::fmt::Write;

use super::lexer::{is_plain_ident, quote};
use super::literal::{format_float, format_literal_value, int_value};
use super::lower::{is_arith, wave_takes_lane};
use super::{infer_literal, is_reserved, scalar_of};
use crate::ir::text::run::{ArgInit, Expect, RunSpec, Value};
use crate::ir::typeck;
use crate::ir::{
    Base, BinaryOp, Block, Builtin, ConstBinOp, ConstExpr, ConstUnOp, ElemType, Expr, ExprId,
    Function, FunctionKind, Handle, Len, Literal, LoopKind, MemoryOrder, Module, Place, Scalar,
    Stmt, StmtKind, Type, UnaryOp, WaveOp,
};

/// The canonical text of `module`.
pub fn print(module: &Module) -> String {
    let mut out = String::new();
    for (_, t) in module.tag_sets.iter() {
        let members: Vec<&str> = t
            .members
            .iter()
            .map(|f| {
                module
                    .functions
                    .try_get(*f)
                    .map_or("?", |f| f.name.as_str())
            })
            .collect();
        let _ = writeln!(out, "tagset {} = [{}];", t.name, members.join(", "));
    }
    for (_, f) in module.functions.iter() {
        if !out.is_empty() {
            out.push('\n');
        }
        FnPrinter::new(module, f).function(&mut out);
    }
    for fam in &module.families {
        if !out.is_empty() {
            out.push('\n');
        }
        family(&mut out, module, fam);
    }
    out
}

/// `family NAME = Template(key = expr, ...);` with the keys in canonical order.
fn family(out: &mut String, module: &Module, fam: &crate::ir::family::FamilyDecl) {
    let params = module
        .function(&fam.template)
        .and_then(|h| module.functions[h].template.as_ref())
        .map(|t| t.params.clone())
        .unwrap_or_default();
    let mut scratch = Function::new(fam.name.clone(), crate::ir::FunctionKind::Kernel);
    scratch.template = Some(crate::ir::TemplateInfo {
        params,
        requires: Vec::new(),
        instantiate: Vec::new(),
        max: None,
    });
    scratch.consts = fam.consts.clone();
    let p = FnPrinter::new(module, &scratch);
    let mut keys = fam.keys.clone();
    keys.sort_by_key(|(k, _, _)| *k);
    let keys: Vec<String> = keys
        .iter()
        .map(|(k, h, _)| format!("{} = {}", k.name(), p.cexpr(*h, 0, 0).0))
        .collect();
    let _ = writeln!(
        out,
        "family {} = {}({});",
        fam.name,
        fam.template,
        keys.join(", ")
    );
}

/// The canonical text of a test file: the module, then its run blocks.
pub fn print_file(module: &Module, runs: &[RunSpec]) -> String {
    let mut out = print(module);
    for r in runs {
        if !out.is_empty() {
            out.push('\n');
        }
        run_block(&mut out, r);
    }
    out
}

// ---- run blocks ----

fn value(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format_float(f, Scalar::F64),
        Value::Bool(b) => b.to_string(),
    }
}

fn init(i: &ArgInit) -> String {
    match i {
        ArgInit::Scalar(v) => value(*v),
        ArgInit::List(vs) => {
            let vs: Vec<String> = vs.iter().map(|v| value(*v)).collect();
            format!("[{}]", vs.join(", "))
        }
        ArgInit::Fill { len, value: v } => format!("fill({len}, {})", value(*v)),
        ArgInit::Iota { len, start, step } => {
            if *start == Value::Int(0) && *step == Value::Int(1) {
                format!("iota({len})")
            } else {
                format!("iota({len}, {}, {})", value(*start), value(*step))
            }
        }
        ArgInit::Random { len, lo, hi, seed } => {
            format!("random({len}, {}, {}, seed {seed})", value(*lo), value(*hi))
        }
        ArgInit::Uninit { len } => format!("uninit({len})"),
    }
}

/// A code or kind bare when it reads back as one (`XPU-REF01`, `out_of_bounds`), else quoted.
fn code_word(s: &str) -> String {
    let mut parts = s.split('-');
    let first_ok = parts.next().is_some_and(is_plain_ident);
    let rest_ok = parts.all(|p| {
        !p.is_empty()
            && (is_plain_ident(p)
                || p.bytes().all(|b| b.is_ascii_digit()) && (p == "0" || !p.starts_with('0')))
    });
    if first_ok && rest_ok {
        s.to_string()
    } else {
        quote(s)
    }
}

fn dims(d: &[u32; 3]) -> String {
    let n = if d[2] != 1 {
        3
    } else if d[1] != 1 {
        2
    } else {
        1
    };
    let v: Vec<String> = d[..n].iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn run_block(out: &mut String, r: &RunSpec) {
    let _ = writeln!(out, "run {} {{", r.kernel);
    let _ = writeln!(out, "    grid = {};", dims(&r.grid));
    let _ = writeln!(out, "    block = {};", dims(&r.block));
    if r.shared_bytes != 0 {
        let _ = writeln!(out, "    shared = {};", r.shared_bytes);
    }
    if let Some(w) = r.wave {
        let _ = writeln!(out, "    wave = {w};");
    }
    if r.ulps != 0 {
        let _ = writeln!(out, "    ulps = {};", r.ulps);
    }
    if let Some(d) = r.deadline {
        let _ = writeln!(
            out,
            "    deadline = {};",
            crate::deadline::format_seconds(d)
        );
    }
    if r.allow_races {
        out.push_str("    allow_races;\n");
    }
    if let Some(s) = r.shuffle_seed {
        let _ = writeln!(out, "    shuffle = {s};");
    }
    if let Some(s) = r.max_steps {
        let _ = writeln!(out, "    max_steps = {s};");
    }
    for a in &r.args {
        let _ = writeln!(out, "    arg {} = {};", a.name, init(&a.init));
    }
    for e in &r.expects {
        let _ = match e {
            Expect::Buffer { name, value, .. } => {
                writeln!(out, "    expect {name} = {};", init(value))
            }
            Expect::Interp { name, .. } => writeln!(out, "    expect {name} = interp;"),
            Expect::Ub { kind, .. } => writeln!(out, "    expect ub {};", code_word(kind)),
            Expect::Refused { code, backends, .. } if backends.is_empty() => {
                writeln!(out, "    expect refused {};", code_word(code))
            }
            Expect::Refused { code, backends, .. } => writeln!(
                out,
                "    expect refused {} on {};",
                code_word(code),
                backends.join(", ")
            ),
        };
    }
    out.push_str("}\n");
}

// ---- types ----

/// `[[E; C]; R]` for lengths `[R, C]`.
fn nested_ty(e: ElemType, dims: &[u32]) -> String {
    let mut t = elem(e);
    for d in dims.iter().rev() {
        t = format!("[{t}; {d}]");
    }
    t
}

fn elem(e: ElemType) -> String {
    if e.lanes == 1 {
        e.scalar.name().to_string()
    } else {
        format!("vec{}<{}>", e.lanes, e.scalar.name())
    }
}

fn suffix_needed(lit: Literal) -> bool {
    !matches!(lit, Literal::Bool(_))
}

/// `T` reproduces under context `E` when an unsuffixed literal of `T`'s kind gets `T`.
fn reproduces(t: Scalar, expect: Option<Scalar>) -> bool {
    infer_literal(expect, t.is_float()) == t
}

#[derive(Clone, Copy)]
enum Ctx {
    Expect(Option<Scalar>),
    Determined,
}

const PREC_AS: u8 = 10;
const PREC_UNARY: u8 = 11;
const PREC_POSTFIX: u8 = 12;

fn bin_info(op: BinaryOp) -> (&'static str, u8) {
    match op {
        BinaryOp::LogicalOr => ("||", 1),
        BinaryOp::LogicalAnd => ("&&", 2),
        BinaryOp::Eq => ("==", 3),
        BinaryOp::Ne => ("!=", 3),
        BinaryOp::Lt => ("<", 3),
        BinaryOp::Le => ("<=", 3),
        BinaryOp::Gt => (">", 3),
        BinaryOp::Ge => (">=", 3),
        BinaryOp::BitOr => ("|", 4),
        BinaryOp::BitXor => ("^", 5),
        BinaryOp::BitAnd => ("&", 6),
        BinaryOp::Shl => ("<<", 7),
        BinaryOp::Shr => (">>", 7),
        BinaryOp::Add => ("+", 8),
        BinaryOp::Sub => ("-", 8),
        BinaryOp::Mul => ("*", 9),
        BinaryOp::Div => ("/", 9),
        BinaryOp::Rem => ("%", 9),
    }
}

fn wave_name(op: WaveOp) -> String {
    match op {
        WaveOp::Reduce(r) => format!("wave_reduce_{}", r.name()),
        WaveOp::InclusiveScan(r) => format!("wave_inclusive_scan_{}", r.name()),
        WaveOp::ExclusiveScan(r) => format!("wave_exclusive_scan_{}", r.name()),
        WaveOp::Broadcast => "wave_broadcast".into(),
        WaveOp::Shuffle => "wave_shuffle".into(),
        WaveOp::ShuffleXor => "wave_shuffle_xor".into(),
        WaveOp::ShuffleUp => "wave_shuffle_up".into(),
        WaveOp::ShuffleDown => "wave_shuffle_down".into(),
        WaveOp::Rotate => "wave_rotate".into(),
        WaveOp::Ballot => "wave_ballot".into(),
        WaveOp::Any => "wave_any".into(),
        WaveOp::All => "wave_all".into(),
        WaveOp::Elect => "wave_elect".into(),
    }
}

fn builtin(b: Builtin) -> String {
    match b {
        Builtin::GlobalId(d) => format!("global_id.{}", d.name()),
        Builtin::LocalId(d) => format!("local_id.{}", d.name()),
        Builtin::GroupId(d) => format!("group_id.{}", d.name()),
        Builtin::GroupSize(d) => format!("group_size.{}", d.name()),
        Builtin::NumGroups(d) => format!("num_groups.{}", d.name()),
        Builtin::WaveWidth => "wave_width".into(),
        Builtin::LaneId => "lane_id".into(),
    }
}

const LANE_LETTERS: [char; 4] = ['x', 'y', 'z', 'w'];

/// The deepest expression tree the printer follows; deeper (or cyclic, in a malformed
/// module) prints `?`.
const MAX_PRINT_DEPTH: u32 = 2000;

/// A valid identifier for `name`: itself if it is one, else with bad characters replaced
/// and `_` appended until it reads as a plain, unreserved name.
fn sanitize(name: &str) -> String {
    if is_plain_ident(name) && !is_reserved(name) {
        return name.to_string();
    }
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "v_");
    }
    while !is_plain_ident(&s) || is_reserved(&s) {
        s.push('_');
    }
    s
}

/// What a name refers to in the scoping simulation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ent {
    Local(usize),
    Param(usize),
    Shared(usize),
    TParam(usize),
}

struct FnPrinter<'m> {
    m: &'m Module,
    f: &'m Function,
    locals: Vec<String>,
    shared: Vec<String>,
    tparams: Vec<String>,
}

impl<'m> FnPrinter<'m> {
    fn new(m: &'m Module, f: &'m Function) -> Self {
        let mut p = FnPrinter {
            m,
            f,
            locals: f.locals.iter().map(|(_, l)| sanitize(&l.name)).collect(),
            shared: f.shared.iter().map(|(_, s)| sanitize(&s.name)).collect(),
            tparams: f
                .template
                .as_ref()
                .map(|t| t.params.iter().map(|n| sanitize(n)).collect())
                .unwrap_or_default(),
        };
        p.assign_names();
        p
    }

    // ---- names ----

    fn used_names(&self) -> HashSet<String> {
        let mut used: HashSet<String> = HashSet::new();
        used.extend(self.f.params.iter().map(|p| p.name.clone()));
        used.extend(self.locals.iter().cloned());
        used.extend(self.shared.iter().cloned());
        used.extend(self.tparams.iter().cloned());
        used
    }

    fn fresh(&self, base: &str, used: &mut HashSet<String>) -> String {
        let mut k = 1;
        loop {
            let cand = format!("{base}_{k}");
            if !used.contains(&cand) && is_plain_ident(&cand) && !is_reserved(&cand) {
                used.insert(cand.clone());
                return cand;
            }
            k += 1;
        }
    }

    fn assign_names(&mut self) {
        let mut used = self.used_names();
        // Function-level names are distinct: parameters keep theirs.
        let mut taken: HashSet<String> = self.f.params.iter().map(|p| p.name.clone()).collect();
        for i in 0..self.tparams.len() {
            if taken.contains(&self.tparams[i]) {
                self.tparams[i] = self.fresh(&self.tparams[i].clone(), &mut used);
            }
            taken.insert(self.tparams[i].clone());
        }
        for i in 0..self.shared.len() {
            if taken.contains(&self.shared[i]) {
                self.shared[i] = self.fresh(&self.shared[i].clone(), &mut used);
            }
            taken.insert(self.shared[i].clone());
        }
        // Locals: simulate the parser's scoping; rename a local that captures a reference
        // meant for something else. Each local is renamed at most once, to a unique name.
        let mut renamed = vec![false; self.locals.len()];
        loop {
            let mut sim = Sim {
                p: self,
                scopes: vec![Vec::new()],
                conflicts: Vec::new(),
                depth: 0,
            };
            sim.block(&self.f.body);
            let conflicts = sim.conflicts;
            let mut any = false;
            for l in conflicts {
                if l < renamed.len() && !renamed[l] {
                    renamed[l] = true;
                    self.locals[l] = self.fresh(&self.locals[l].clone(), &mut used);
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
    }

    fn local(&self, h: Handle<crate::ir::Local>) -> String {
        self.locals
            .get(h.index())
            .cloned()
            .unwrap_or_else(|| "?".into())
    }

    fn param(&self, i: u32) -> String {
        self.f
            .params
            .get(i as usize)
            .map_or_else(|| "?".into(), |p| p.name.clone())
    }

    fn base(&self, b: Base) -> String {
        match b {
            Base::Param(i) => self.param(i),
            Base::Shared(h) => self
                .shared
                .get(h.index())
                .cloned()
                .unwrap_or_else(|| "?".into()),
            Base::Local(h) => self.local(h),
        }
    }

    // ---- items ----

    fn ty(&self, t: Type) -> String {
        match t {
            Type::Scalar(s) => s.name().into(),
            Type::Vector(s, n) => format!("vec{n}<{}>", s.name()),
            Type::Buffer { elem: e, access } => access.buffer_name(&elem(e)),
            Type::Array { elem: e, len } => format!("[{}; {}]", elem(e), self.len(len)),
            Type::Matrix {
                role,
                scalar,
                rows,
                cols,
            } => format!("matrix<{}, {}, {rows}, {cols}>", role.name(), scalar.name()),
            Type::Tag(h) => format!(
                "tag<{}>",
                self.m.tag_sets.try_get(h).map_or("?", |t| t.name.as_str())
            ),
            Type::Shared { elem: e, len } => match len {
                Some(l) => format!("shared [{}; {}]", elem(e), self.len(l)),
                None => format!("shared [{}]", elem(e)),
            },
        }
    }

    fn len(&self, l: Len) -> String {
        match l {
            Len::Fixed(n) => n.to_string(),
            Len::Const(c) => self.cexpr(c, 0, 0).0,
        }
    }

    fn cexpr(&self, h: Handle<ConstExpr>, min: u8, depth: u32) -> (String, u8) {
        let (s, p) = self.cexpr_inner(h, depth);
        if p < min {
            (format!("({s})"), PREC_POSTFIX)
        } else {
            (s, p)
        }
    }

    fn cexpr_inner(&self, h: Handle<ConstExpr>, depth: u32) -> (String, u8) {
        let Some(c) = self.f.consts.try_get(h).filter(|_| depth < MAX_PRINT_DEPTH) else {
            return ("?".into(), PREC_POSTFIX);
        };
        match c {
            ConstExpr::Lit(v) => (v.to_string(), PREC_POSTFIX),
            ConstExpr::Param(i) => (
                self.tparams
                    .get(*i as usize)
                    .cloned()
                    .unwrap_or_else(|| "?".into()),
                PREC_POSTFIX,
            ),
            ConstExpr::Unary(op, a) => {
                let op = match op {
                    ConstUnOp::Neg => "-",
                    ConstUnOp::Not => "!",
                };
                let (a, _) = self.cexpr(*a, PREC_UNARY, depth + 1);
                (format!("{op}{a}"), PREC_UNARY)
            }
            ConstExpr::Binary(op, a, b) => {
                let (sym, prec) = match op {
                    ConstBinOp::Or => ("||", 1),
                    ConstBinOp::And => ("&&", 2),
                    ConstBinOp::Eq => ("==", 3),
                    ConstBinOp::Ne => ("!=", 3),
                    ConstBinOp::Lt => ("<", 3),
                    ConstBinOp::Le => ("<=", 3),
                    ConstBinOp::Gt => (">", 3),
                    ConstBinOp::Ge => (">=", 3),
                    ConstBinOp::Add => ("+", 8),
                    ConstBinOp::Sub => ("-", 8),
                    ConstBinOp::Mul => ("*", 9),
                    ConstBinOp::Div => ("/", 9),
                    ConstBinOp::Rem => ("%", 9),
                };
                let (lmin, rmin) = if prec == 3 { (4, 4) } else { (prec, prec + 1) };
                let (a, _) = self.cexpr(*a, lmin, depth + 1);
                let (b, _) = self.cexpr(*b, rmin, depth + 1);
                (format!("{a} {sym} {b}"), prec)
            }
        }
    }

    fn function(&self, out: &mut String) {
        let f = self.f;
        let a = &f.attrs;
        if let Some((w, _)) = a.wave {
            let _ = writeln!(out, "@wave({w})");
        }
        if let Some(o) = &a.occupancy {
            let mut parts = Vec::new();
            for (key, v) in [
                ("max_threads", o.max_threads),
                ("max_waves", o.max_waves),
                ("min_resident", o.min_resident),
                ("max_registers", o.max_registers),
            ] {
                if let Some(c) = v {
                    parts.push(format!("{key} = {}", self.cexpr(c, 0, 0).0));
                }
            }
            let _ = writeln!(out, "@occupancy({})", parts.join(", "));
        }
        if let Some(([x, y, z], _)) = a.block {
            let _ = match (y, z) {
                (1, 1) => writeln!(out, "@block({x})"),
                (_, 1) => writeln!(out, "@block({x}, {y})"),
                _ => writeln!(out, "@block({x}, {y}, {z})"),
            };
        }
        for u in &a.unlowered {
            let mut parts = vec![
                format!("backend = {}", quote(&u.backend)),
                format!("tracked = {}", quote(&u.tracked)),
            ];
            if u.may_lower {
                parts.push("may_lower = true".into());
            }
            if u.hold {
                parts.push("hold = true".into());
            }
            if let Some(n) = u.host_wave_below {
                parts.push(format!("host_wave_below = {n}"));
            }
            let _ = writeln!(out, "@unlowered({})", parts.join(", "));
        }
        if let Some((t, _)) = &a.unbounded {
            let _ = writeln!(out, "@unbounded(tracked = {})", quote(t));
        }
        out.push_str(match f.kind {
            FunctionKind::Kernel => "kernel ",
            FunctionKind::Device => "device fn ",
        });
        out.push_str(&f.name);
        if f.template.is_some() {
            let _ = write!(out, "<{}>", self.tparams.join(", "));
        }
        let params: Vec<String> = f
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, self.ty(p.ty)))
            .collect();
        let _ = write!(out, "({})", params.join(", "));
        if let Some(r) = f.ret {
            let _ = write!(out, " -> {}", self.ty(r));
        }
        if let Some(t) = &f.template {
            out.push('\n');
            if !t.requires.is_empty() {
                let rs: Vec<String> = t
                    .requires
                    .iter()
                    .map(|(c, _)| self.cexpr(*c, 0, 0).0)
                    .collect();
                let _ = writeln!(out, "    requires {}", rs.join(", "));
            }
            if !t.instantiate.is_empty() {
                let is: Vec<String> = t
                    .instantiate
                    .iter()
                    .map(|(args, _)| {
                        let a: Vec<String> = args.iter().map(|v| v.to_string()).collect();
                        format!("<{}>", a.join(", "))
                    })
                    .collect();
                let _ = writeln!(out, "    instantiate {}", is.join(", "));
            }
            if let Some(m) = t.max {
                let _ = writeln!(out, "    max {m}");
            }
            out.push_str("{\n");
        } else {
            out.push_str(" {\n");
        }
        for (h, s) in f.shared.iter() {
            let name = &self.shared[h.index()];
            let ty = match (self.f.dims_of(Base::Shared(h)), s.len) {
                (Some(dims), _) => nested_ty(s.elem, dims),
                (None, Some(l)) => format!("[{}; {}]", elem(s.elem), self.len(l)),
                (None, None) => format!("[{}]", elem(s.elem)),
            };
            let ty = match self.f.layout_of(h) {
                Some(layout) => layout.spell(&ty),
                None => ty,
            };
            let _ = writeln!(out, "    shared {name}: {ty};");
        }
        self.block(out, &f.body, 1);
        out.push_str("}\n");
    }

    // ---- statements ----

    fn block(&self, out: &mut String, b: &Block, indent: usize) {
        for s in b {
            self.stmt(out, s, indent);
        }
    }

    fn stmt(&self, out: &mut String, s: &Stmt, indent: usize) {
        let pad = "    ".repeat(indent);
        out.push_str(&pad);
        match &s.kind {
            StmtKind::Let { local, init } => {
                let ty = self.f.locals.try_get(*local).map(|l| l.ty);
                let ty_text = match (ty, self.f.dims_of(Base::Local(*local))) {
                    (Some(Type::Array { elem, .. }), Some(dims)) => nested_ty(elem, dims),
                    _ => ty.map_or_else(|| "?".into(), |t| self.ty(t)),
                };
                let _ = write!(out, "let {}: {ty_text}", self.local(*local));
                if let Some(i) = init {
                    let _ = write!(out, " = {}", self.top(*i, Ctx::Expect(scalar_of(ty))));
                }
                out.push_str(";\n");
            }
            StmtKind::Assign { place, value } => {
                let target = self.place(place);
                if let Some((op, rhs)) = self.compound(place, *value) {
                    let _ = writeln!(out, "{target} {}= {rhs};", bin_info(op).0);
                } else {
                    let pty = typeck::place_type(self.m, self.f, place);
                    let v = self.top(*value, Ctx::Expect(scalar_of(pty)));
                    let _ = writeln!(out, "{target} = {v};");
                }
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                self.if_chain(out, *cond, then_block, else_block, indent);
            }
            StmtKind::Loop { label, kind, body } => {
                if let Some(l) = label {
                    let _ = write!(out, "'{l}: ");
                }
                match kind {
                    LoopKind::Infinite => out.push_str("loop {\n"),
                    LoopKind::While(c) => {
                        let _ = writeln!(out, "while {} {{", self.top(*c, Ctx::Expect(None)));
                    }
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                    } => {
                        let ty = self.f.locals.try_get(*var).map(|l| l.ty);
                        let e = Ctx::Expect(scalar_of(ty));
                        let _ = write!(
                            out,
                            "for {}: {} in {}..{}",
                            self.local(*var),
                            ty.map_or_else(|| "?".into(), |t| self.ty(t)),
                            self.top(*start, e),
                            self.top(*end, e)
                        );
                        if let Some(st) = step {
                            let _ = write!(out, " step {}", self.top(*st, e));
                        }
                        out.push_str(" {\n");
                    }
                    LoopKind::Cond {
                        var,
                        init,
                        cond,
                        update,
                    } => {
                        let ty = self.f.locals.try_get(*var).map(|l| l.ty);
                        let e = Ctx::Expect(scalar_of(ty));
                        let name = self.local(*var);
                        let _ = write!(
                            out,
                            "for {name}: {} = {}; {}; ",
                            ty.map_or_else(|| "?".into(), |t| self.ty(t)),
                            self.top(*init, e),
                            self.top(*cond, Ctx::Expect(None)),
                        );
                        if let Some((op, rhs)) = self.compound(&Place::Local(*var), *update) {
                            let _ = write!(out, "{name} {}= {rhs}", bin_info(op).0);
                        } else {
                            let _ = write!(out, "{name} = {}", self.top(*update, e));
                        }
                        out.push_str(" {\n");
                    }
                }
                self.block(out, body, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            StmtKind::Break(l) => match l {
                Some(l) => {
                    let _ = writeln!(out, "break '{l};");
                }
                None => out.push_str("break;\n"),
            },
            StmtKind::Continue(l) => match l {
                Some(l) => {
                    let _ = writeln!(out, "continue '{l};");
                }
                None => out.push_str("continue;\n"),
            },
            StmtKind::Return(v) => match v {
                Some(v) => {
                    let _ = writeln!(
                        out,
                        "return {};",
                        self.top(*v, Ctx::Expect(scalar_of(self.f.ret)))
                    );
                }
                None => out.push_str("return;\n"),
            },
            StmtKind::Expr(e) => {
                let text = self.top(*e, Ctx::Expect(None));
                // A statement starting with `if` would read back as an `if` statement.
                if text.starts_with("if ") {
                    let _ = writeln!(out, "({text});");
                } else {
                    let _ = writeln!(out, "{text};");
                }
            }
            StmtKind::Block(b) => {
                out.push_str("{\n");
                self.block(out, b, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            StmtKind::Barrier => out.push_str("barrier();\n"),
            StmtKind::WaveBarrier => out.push_str("wave_barrier();\n"),
            StmtKind::Fence(scope) => {
                let _ = writeln!(out, "fence({});", scope.name());
            }
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let el = typeck::base_elem(self.m, self.f, *base).map(|e| e.scalar);
                let _ = write!(
                    out,
                    "vstore({}, {}, {}",
                    self.base(*base),
                    self.top(*index, Ctx::Expect(Some(Scalar::U32))),
                    self.top(*value, Ctx::Expect(el))
                );
                if let Some(a) = align {
                    let _ = write!(out, ", align = {a}");
                }
                out.push_str(");\n");
            }
            StmtKind::Print { format, args } => {
                out.push_str("print(");
                out.push_str(&quote(format));
                for a in args {
                    out.push_str(", ");
                    out.push_str(&self.top(*a, Ctx::Expect(None)));
                }
                out.push_str(");\n");
            }
            StmtKind::Assert { cond, message } => {
                let _ = writeln!(
                    out,
                    "assert({}, {});",
                    self.top(*cond, Ctx::Expect(None)),
                    quote(message)
                );
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                let u = Ctx::Expect(Some(Scalar::U32));
                let _ = writeln!(
                    out,
                    "matrix_store({}, {}, {}, {});",
                    self.top(*value, Ctx::Expect(None)),
                    self.base(*base),
                    self.top(*offset, u),
                    self.top(*stride, u)
                );
            }
        }
    }

    fn if_chain(
        &self,
        out: &mut String,
        cond: ExprId,
        then_b: &Block,
        else_b: &Block,
        indent: usize,
    ) {
        let pad = "    ".repeat(indent);
        let _ = writeln!(out, "if {} {{", self.top(cond, Ctx::Expect(None)));
        self.block(out, then_b, indent + 1);
        match else_b.as_slice() {
            [] => {
                let _ = writeln!(out, "{pad}}}");
            }
            [Stmt {
                kind:
                    StmtKind::If {
                        cond,
                        then_block,
                        else_block,
                    },
                ..
            }] => {
                let _ = write!(out, "{pad}}} else ");
                self.if_chain(out, *cond, then_block, else_block, indent);
            }
            _ => {
                let _ = writeln!(out, "{pad}}} else {{");
                self.block(out, else_b, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
        }
    }

    /// `Some((op, rhs text))` when `value` is `place op rhs` re-reading the place exactly.
    fn compound(&self, place: &Place, value: ExprId) -> Option<(BinaryOp, String)> {
        let Some(Expr::Binary { op, lhs, rhs }) = self.f.exprs.try_get(value) else {
            return None;
        };
        if !is_arith(*op) {
            return None;
        }
        let reread = match (place, self.f.exprs.try_get(*lhs)?) {
            (Place::Local(l), Expr::Local(m)) => l == m,
            (Place::Lane { local, lane }, Expr::Extract { vector, lane: k }) => {
                lane == k
                    && matches!(self.f.exprs.try_get(*vector), Some(Expr::Local(m)) if m == local)
            }
            (Place::Element { base, index }, Expr::Index { base: b, index: i }) => {
                base == b && self.same_tree(*index, *i, 0)
            }
            _ => false,
        };
        if !reread {
            return None;
        }
        let anchor = scalar_of(typeck::expr_type(self.m, self.f, *lhs));
        Some((*op, self.top(*rhs, Ctx::Expect(anchor))))
    }

    /// Whether two expression trees are the same (literals bit for bit).
    fn same_tree(&self, a: ExprId, b: ExprId, depth: u32) -> bool {
        if depth > MAX_PRINT_DEPTH {
            return false;
        }
        let (Some(x), Some(y)) = (self.f.exprs.try_get(a), self.f.exprs.try_get(b)) else {
            return false;
        };
        let lit_eq = |p: &Literal, q: &Literal| match (p, q) {
            (Literal::Float { value: v, ty: t }, Literal::Float { value: w, ty: u }) => {
                t == u && v.to_bits() == w.to_bits()
            }
            _ => p == q,
        };
        let same_shallow = match (x, y) {
            (Expr::Literal(p), Expr::Literal(q)) => lit_eq(p, q),
            (Expr::Atomic { .. }, _) | (_, Expr::Atomic { .. }) => false,
            (Expr::AtomicLoad { .. }, _) | (_, Expr::AtomicLoad { .. }) => false,
            (Expr::AtomicStore { .. }, _) | (_, Expr::AtomicStore { .. }) => false,
            (Expr::Call { .. }, _) | (_, Expr::Call { .. }) => false,
            (Expr::Dispatch { .. }, _) | (_, Expr::Dispatch { .. }) => false,
            _ => {
                // Compare everything but operand handles by clearing them.
                let strip = |e: &Expr| {
                    let mut e = e.clone();
                    let zero = ExprId::from_index(0);
                    match &mut e {
                        Expr::Unary { arg, .. }
                        | Expr::Cast { arg, .. }
                        | Expr::Bitcast { arg, .. } => *arg = zero,
                        Expr::Binary { lhs, rhs, .. } => {
                            *lhs = zero;
                            *rhs = zero;
                        }
                        Expr::Select {
                            cond,
                            accept,
                            reject,
                        }
                        | Expr::IfElse {
                            cond,
                            accept,
                            reject,
                        } => {
                            *cond = zero;
                            *accept = zero;
                            *reject = zero;
                        }
                        Expr::Compose { parts, .. } => parts.iter_mut().for_each(|p| *p = zero),
                        Expr::Splat { value, .. } | Expr::MatrixFill { value, .. } => *value = zero,
                        Expr::Extract { vector, .. } | Expr::Swizzle { vector, .. } => {
                            *vector = zero
                        }
                        Expr::Index { index, .. } | Expr::VLoad { index, .. } => *index = zero,
                        Expr::Math { args, .. }
                        | Expr::Wave { args, .. }
                        | Expr::Bits { args, .. } => args.iter_mut().for_each(|p| *p = zero),
                        Expr::MatrixLoad { offset, stride, .. } => {
                            *offset = zero;
                            *stride = zero;
                        }
                        Expr::MatrixMma { a, b, c } => {
                            *a = zero;
                            *b = zero;
                            *c = zero;
                        }
                        _ => {}
                    }
                    e
                };
                strip(x) == strip(y)
            }
        };
        if !same_shallow {
            return false;
        }
        let (xs, ys) = (x.operands(), y.operands());
        xs.len() == ys.len()
            && xs
                .iter()
                .zip(&ys)
                .all(|(p, q)| self.same_tree(*p, *q, depth + 1))
    }

    /// `b[i]`; for a multi-dimensional array `b[i][j]`, the subscripts read back from the
    /// row-major index `i * C + j` the parser builds (an index of another shape prints as
    /// `b[0][k]`, the same element).
    fn element(&self, base: Base, index: ExprId, depth: u32) -> String {
        let u32c = Ctx::Expect(Some(Scalar::U32));
        let Some(dims) = self.f.dims_of(base) else {
            return format!("{}[{}]", self.base(base), self.expr(index, u32c, depth).0);
        };
        let mut subs = Vec::new();
        let mut cur = index;
        for k in (1..dims.len()).rev() {
            let step = match self.f.exprs.try_get(cur) {
                Some(Expr::Binary {
                    op: BinaryOp::Add,
                    lhs,
                    rhs,
                }) => match self.f.exprs.try_get(*lhs) {
                    Some(Expr::Binary {
                        op: BinaryOp::Mul,
                        lhs: a,
                        rhs: d,
                    }) if matches!(
                        self.f.exprs.try_get(*d),
                        Some(Expr::Literal(Literal::Int { bits, ty: Scalar::U32 }))
                            if *bits == u64::from(dims[k])
                    ) =>
                    {
                        Some((*a, *rhs))
                    }
                    _ => None,
                },
                _ => None,
            };
            match step {
                Some((a, i)) => {
                    subs.push(i);
                    cur = a;
                }
                None => {
                    let zeros = "[0]".repeat(dims.len() - 1);
                    return format!(
                        "{}{zeros}[{}]",
                        self.base(base),
                        self.expr(index, u32c, depth).0
                    );
                }
            }
        }
        subs.push(cur);
        let mut out = self.base(base);
        for &i in subs.iter().rev() {
            let _ = write!(out, "[{}]", self.expr(i, u32c, depth).0);
        }
        out
    }

    fn place(&self, p: &Place) -> String {
        match *p {
            Place::Local(l) => self.local(l),
            Place::Lane { local, lane } => {
                if (lane as usize) < 4 {
                    format!("{}.{}", self.local(local), LANE_LETTERS[lane as usize])
                } else {
                    format!("{}[{lane}]", self.local(local))
                }
            }
            Place::Element { base, index } => self.element(base, index, 0),
        }
    }

    // ---- expressions ----

    fn top(&self, e: ExprId, ctx: Ctx) -> String {
        self.expr(e, ctx, 0).0
    }

    /// The scalar of `e` if it is flexible-shaped with every literal of one type: it can
    /// print without suffixes and take that type from context.
    fn flexible_ty(&self, e: ExprId, depth: u32) -> Option<Scalar> {
        if depth > MAX_PRINT_DEPTH {
            return None;
        }
        let same = |a: Option<Scalar>, b: Option<Scalar>| match (a, b) {
            (Some(x), Some(y)) if x == y => Some(x),
            _ => None,
        };
        match self.f.exprs.try_get(e)? {
            Expr::Literal(Literal::Int { ty, .. }) if ty.is_int() => Some(*ty),
            Expr::Literal(Literal::Float { ty, .. }) if ty.is_float() => Some(*ty),
            Expr::Unary { arg, .. } => self.flexible_ty(*arg, depth + 1),
            Expr::Binary { op, lhs, rhs } if is_arith(*op) => same(
                self.flexible_ty(*lhs, depth + 1),
                self.flexible_ty(*rhs, depth + 1),
            ),
            Expr::Select { accept, reject, .. } | Expr::IfElse { accept, reject, .. } => same(
                self.flexible_ty(*accept, depth + 1),
                self.flexible_ty(*reject, depth + 1),
            ),
            Expr::Math { args, .. } => {
                let first = self.flexible_ty(*args.first()?, depth + 1)?;
                args[1..]
                    .iter()
                    .all(|a| self.flexible_ty(*a, depth + 1) == Some(first))
                    .then_some(first)
            }
            Expr::Bits { op, args } => {
                let values: Vec<ExprId> = (0..args.len())
                    .filter(|&i| !op.is_amount(i))
                    .map(|i| args[i])
                    .collect();
                let first = self.flexible_ty(*values.first()?, depth + 1)?;
                values[1..]
                    .iter()
                    .all(|a| self.flexible_ty(*a, depth + 1) == Some(first))
                    .then_some(first)
            }
            _ => None,
        }
    }

    /// Whether `e` prints starting with an unsigned number (so a `-` before it would join it).
    fn starts_with_number(&self, e: ExprId, depth: u32) -> bool {
        if depth > MAX_PRINT_DEPTH {
            return false;
        }
        match self.f.exprs.try_get(e) {
            Some(Expr::Literal(Literal::Int { bits, ty })) => int_value(*bits, *ty) >= 0,
            Some(Expr::Literal(Literal::Float { value, ty })) => {
                !format_float(*value, *ty).starts_with('-')
            }
            Some(Expr::Extract { vector, .. }) | Some(Expr::Swizzle { vector, .. }) => {
                self.starts_with_number(*vector, depth + 1)
            }
            _ => false,
        }
    }

    /// Prints a peer group; `force`: at least one member must print non-flexibly.
    fn peers(
        &self,
        members: &[ExprId],
        group: Option<Scalar>,
        force: bool,
        depth: u32,
    ) -> Vec<String> {
        let n = members.len();
        if n == 0 {
            return Vec::new();
        }
        let fts: Vec<Option<Scalar>> = members
            .iter()
            .map(|m| self.flexible_ty(*m, depth))
            .collect();
        let common = fts[0].filter(|t| fts.iter().all(|f| *f == Some(*t)));
        if !force && common.is_some_and(|t| reproduces(t, group)) {
            return members
                .iter()
                .map(|m| self.expr(*m, Ctx::Expect(group), depth).0)
                .collect();
        }
        let mut det = vec![false; n];
        let anchor = match fts.iter().position(|f| f.is_none()) {
            Some(i) => i,
            None => {
                det[0] = true;
                0
            }
        };
        let ty_of = |i: usize| scalar_of(typeck::expr_type(self.m, self.f, members[i]));
        let a = ty_of(anchor);
        for i in 0..n {
            if let Some(t) = fts[i] {
                if !reproduces(t, a) {
                    det[i] = true;
                }
            }
        }
        let first = (0..n)
            .find(|i| fts[*i].is_none() || det[*i])
            .unwrap_or(anchor);
        if ty_of(first) != a {
            for i in 0..n {
                det[i] = fts[i].is_some();
            }
        }
        (0..n)
            .map(|i| {
                let ctx = if fts[i].is_none() {
                    Ctx::Expect(None)
                } else if det[i] {
                    Ctx::Determined
                } else {
                    Ctx::Expect(a)
                };
                self.expr(members[i], ctx, depth).0
            })
            .collect()
    }

    /// `e` printed, with parentheses if its precedence is below `min`.
    fn operand(&self, e: ExprId, ctx: Ctx, min: u8, depth: u32) -> String {
        let (s, p) = self.expr(e, ctx, depth);
        if p < min {
            format!("({s})")
        } else {
            s
        }
    }

    fn expr(&self, e: ExprId, ctx: Ctx, depth: u32) -> (String, u8) {
        let depth = depth + 1;
        let Some(x) = self.f.exprs.try_get(e).filter(|_| depth < MAX_PRINT_DEPTH) else {
            return ("?".into(), PREC_POSTFIX);
        };
        let ft = self.flexible_ty(e, depth);
        let flex_mode = match ctx {
            Ctx::Expect(exp) => ft.is_some_and(|t| reproduces(t, exp)),
            Ctx::Determined => false,
        };
        let group = match ctx {
            Ctx::Expect(exp) => exp,
            Ctx::Determined => None,
        };
        // Members of a flexible-shaped node: flexible under the context, or forced.
        let force = ft.is_some() && !flex_mode;
        let sub = if flex_mode {
            Ctx::Expect(group)
        } else if ft.is_some() {
            Ctx::Determined
        } else {
            Ctx::Expect(None)
        };
        let u32c = Ctx::Expect(Some(Scalar::U32));
        let none = Ctx::Expect(None);
        let args = |ids: &[ExprId], ctxs: &dyn Fn(usize) -> Ctx| -> String {
            ids.iter()
                .enumerate()
                .map(|(i, a)| self.expr(*a, ctxs(i), depth).0)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let post = |s: String| (s, PREC_POSTFIX);
        match x {
            Expr::Literal(lit) => {
                let text = format_literal_value(*lit);
                if flex_mode || !suffix_needed(*lit) {
                    post(text)
                } else {
                    let ty = lit.scalar();
                    if matches!(lit, Literal::Float { value, .. } if value.is_nan() || value.is_infinite())
                    {
                        post(format!("{text}_{}", ty.name()))
                    } else {
                        post(format!("{text}{}", ty.name()))
                    }
                }
            }
            Expr::Param(i) => post(self.param(*i)),
            Expr::Local(l) => post(self.local(*l)),
            Expr::TemplateParam(i) => post(
                self.tparams
                    .get(*i as usize)
                    .cloned()
                    .unwrap_or_else(|| "?".into()),
            ),
            Expr::Builtin(b) => post(builtin(*b)),
            Expr::Unary { op, arg } => {
                let sym = match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                };
                let (s, p) = self.expr(*arg, sub, depth);
                let wrap =
                    p < PREC_UNARY || (*op == UnaryOp::Neg && self.starts_with_number(*arg, depth));
                let s = if wrap { format!("({s})") } else { s };
                (format!("{sym}{s}"), PREC_UNARY)
            }
            Expr::Binary { op, lhs, rhs } => {
                let (sym, prec) = bin_info(*op);
                let (l, r) = if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
                    (self.expr(*lhs, none, depth), self.expr(*rhs, none, depth))
                } else {
                    let group = if is_arith(*op) { group } else { None };
                    let texts = self.peers(&[*lhs, *rhs], group, force, depth);
                    // Precedence of each member, recomputed cheaply from its text's shape.
                    let lp = self.prec_of(*lhs);
                    let rp = self.prec_of(*rhs);
                    ((texts[0].clone(), lp), (texts[1].clone(), rp))
                };
                let (lmin, rmin) = if prec == 3 { (4, 4) } else { (prec, prec + 1) };
                let l = if l.1 < lmin {
                    format!("({})", l.0)
                } else {
                    l.0
                };
                let r = if r.1 < rmin {
                    format!("({})", r.0)
                } else {
                    r.0
                };
                (format!("{l} {sym} {r}"), prec)
            }
            Expr::Cast { to, arg } => {
                let s = self.operand(*arg, none, PREC_AS, depth);
                (format!("{s} as {}", to.name()), PREC_AS)
            }
            Expr::Bitcast { to, arg } => post(format!(
                "bitcast<{}>({})",
                self.ty(*to),
                self.expr(*arg, none, depth).0
            )),
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.expr(*cond, none, depth).0;
                let arms = self.peers(&[*accept, *reject], group, force, depth);
                post(format!("select({c}, {}, {})", arms[0], arms[1]))
            }
            Expr::IfElse {
                cond,
                accept,
                reject,
            } => {
                let c = self.expr(*cond, none, depth).0;
                let arms = self.peers(&[*accept, *reject], group, force, depth);
                let tail = if matches!(self.f.exprs.try_get(*reject), Some(Expr::IfElse { .. })) {
                    arms[1].clone()
                } else {
                    format!("{{ {} }}", arms[1])
                };
                post(format!("if {c} {{ {} }} else {tail}", arms[0]))
            }
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => post(format!(
                "vec{lanes}<{}>({})",
                scalar.name(),
                args(parts, &|_| Ctx::Expect(Some(*scalar)))
            )),
            Expr::Splat { lanes, value } => {
                let s = scalar_of(typeck::expr_type(self.m, self.f, *value)).unwrap_or(Scalar::F32);
                post(format!(
                    "vec{lanes}<{}>({})",
                    s.name(),
                    self.expr(*value, Ctx::Expect(Some(s)), depth).0
                ))
            }
            Expr::Extract { vector, lane } => {
                let v = self.operand(*vector, none, PREC_POSTFIX, depth);
                if (*lane as usize) < 4 {
                    post(format!("{v}.{}", LANE_LETTERS[*lane as usize]))
                } else {
                    post(format!("{v}[{lane}]"))
                }
            }
            Expr::Swizzle { vector, lanes } => {
                if lanes.len() >= 2 && lanes.len() <= 16 && lanes.iter().all(|l| *l < 4) {
                    let v = self.operand(*vector, none, PREC_POSTFIX, depth);
                    let letters: String = lanes.iter().map(|l| LANE_LETTERS[*l as usize]).collect();
                    post(format!("{v}.{letters}"))
                } else {
                    let ls: Vec<String> = lanes.iter().map(|l| l.to_string()).collect();
                    post(format!(
                        "swizzle({}, {})",
                        self.expr(*vector, none, depth).0,
                        ls.join(", ")
                    ))
                }
            }
            Expr::Index { base, index } => post(self.element(*base, *index, depth)),
            Expr::Len(i) => post(format!("len({})", self.param(*i))),
            Expr::Ref(b) => post(self.base(*b)),
            Expr::Call { function, args: a } => {
                let callee = self.m.functions.try_get(*function);
                let name = callee.map_or("?", |f| f.name.as_str());
                let params: Vec<Type> = callee
                    .map(|f| f.params.iter().map(|p| p.ty).collect())
                    .unwrap_or_default();
                post(format!(
                    "{name}({})",
                    args(a, &|i| Ctx::Expect(scalar_of(params.get(i).copied())))
                ))
            }
            Expr::Tag { set, index } => {
                let s = self.m.tag_sets.try_get(*set);
                let member = s
                    .and_then(|s| s.members.get(*index as usize))
                    .and_then(|f| self.m.functions.try_get(*f))
                    .map_or("?", |f| f.name.as_str());
                post(format!("{}::{member}", s.map_or("?", |s| s.name.as_str())))
            }
            Expr::Dispatch { tag, args: a } => {
                let params: Vec<Type> = match typeck::expr_type(self.m, self.f, *tag) {
                    Some(Type::Tag(set)) => self
                        .m
                        .tag_sets
                        .try_get(set)
                        .and_then(|s| s.members.first())
                        .and_then(|f| self.m.functions.try_get(*f))
                        .map(|f| f.params.iter().map(|p| p.ty).collect())
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                let t = self.expr(*tag, none, depth).0;
                if a.is_empty() {
                    post(format!("dispatch({t})"))
                } else {
                    post(format!(
                        "dispatch({t}, {})",
                        args(a, &|i| Ctx::Expect(scalar_of(params.get(i).copied())))
                    ))
                }
            }
            Expr::Math { fun, args: a } => {
                let texts = self.peers(a, group, force, depth);
                post(format!("{}({})", fun.name(), texts.join(", ")))
            }
            Expr::Bits { op, args: a } => {
                let values: Vec<ExprId> = (0..a.len())
                    .filter(|&i| !op.is_amount(i))
                    .map(|i| a[i])
                    .collect();
                let mut texts = self.peers(&values, group, force, depth).into_iter();
                let parts: Vec<String> = (0..a.len())
                    .map(|i| {
                        if op.is_amount(i) {
                            self.expr(a[i], u32c, depth).0
                        } else {
                            texts.next().unwrap_or_default()
                        }
                    })
                    .collect();
                post(format!("{}({})", op.name(), parts.join(", ")))
            }
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => {
                let el = Ctx::Expect(scalar_of(typeck::place_type(self.m, self.f, place)));
                let mut parts = vec![self.place(place)];
                if let Some(c) = compare {
                    parts.push(self.expr(*c, el, depth).0);
                }
                parts.push(self.expr(*value, el, depth).0);
                if *order != MemoryOrder::Relaxed {
                    parts.push(order.name().into());
                }
                post(format!("{}({})", op.name(), parts.join(", ")))
            }
            Expr::AtomicLoad { order, place } => {
                let mut parts = vec![self.place(place)];
                if *order != MemoryOrder::Relaxed {
                    parts.push(order.name().into());
                }
                post(format!("atomic_load({})", parts.join(", ")))
            }
            Expr::AtomicStore {
                order,
                place,
                value,
            } => {
                let el = Ctx::Expect(scalar_of(typeck::place_type(self.m, self.f, place)));
                let mut parts = vec![self.place(place), self.expr(*value, el, depth).0];
                if *order != MemoryOrder::Relaxed {
                    parts.push(order.name().into());
                }
                post(format!("atomic_store({})", parts.join(", ")))
            }
            Expr::Wave { op, args: a, width } => {
                let mut list = args(a, &|i| {
                    if i == 1 && wave_takes_lane(*op) {
                        u32c
                    } else {
                        none
                    }
                });
                if let Some(w) = width {
                    list.push_str(&format!(", width = {w}"));
                }
                post(format!("{}({list})", wave_name(*op)))
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let al = align.map_or(String::new(), |a| format!(", align = {a}"));
                post(format!(
                    "vload<{lanes}>({}, {}{al})",
                    self.base(*base),
                    self.expr(*index, u32c, depth).0
                ))
            }
            Expr::MatrixFill {
                role,
                scalar,
                rows,
                cols,
                value,
            } => post(format!(
                "matrix_fill<{}, {}, {rows}, {cols}>({})",
                role.name(),
                scalar.name(),
                self.expr(*value, Ctx::Expect(Some(*scalar)), depth).0
            )),
            Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
            } => post(format!(
                "matrix_load<{}, {}, {rows}, {cols}>({}, {}, {})",
                role.name(),
                scalar.name(),
                self.base(*base),
                self.expr(*offset, u32c, depth).0,
                self.expr(*stride, u32c, depth).0
            )),
            Expr::MatrixMma { a, b, c } => post(format!(
                "matrix_mma({}, {}, {})",
                self.expr(*a, none, depth).0,
                self.expr(*b, none, depth).0,
                self.expr(*c, none, depth).0
            )),
        }
    }

    /// The precedence an expression prints at (independent of its context).
    fn prec_of(&self, e: ExprId) -> u8 {
        match self.f.exprs.try_get(e) {
            Some(Expr::Binary { op, .. }) => bin_info(*op).1,
            Some(Expr::Cast { .. }) => PREC_AS,
            Some(Expr::Unary { .. }) => PREC_UNARY,
            _ => PREC_POSTFIX,
        }
    }
}

/// The parser's scoping, replayed over the IR with the current display names, to find
/// locals that would capture a reference meant for something else.
struct Sim<'p, 'm> {
    p: &'p FnPrinter<'m>,
    scopes: Vec<Vec<(String, usize)>>,
    conflicts: Vec<usize>,
    depth: u32,
}

impl Sim<'_, '_> {
    fn lookup(&self, name: &str) -> Option<Ent> {
        for scope in self.scopes.iter().rev() {
            if let Some((_, l)) = scope.iter().rev().find(|(n, _)| n == name) {
                return Some(Ent::Local(*l));
            }
        }
        let f = self.p.f;
        if let Some(i) = f.params.iter().position(|p| p.name == name) {
            return Some(Ent::Param(i));
        }
        if let Some(i) = self.p.shared.iter().position(|s| s == name) {
            return Some(Ent::Shared(i));
        }
        self.p
            .tparams
            .iter()
            .position(|s| s == name)
            .map(Ent::TParam)
    }

    fn name_of(&self, e: Ent) -> Option<String> {
        match e {
            Ent::Local(i) => self.p.locals.get(i).cloned(),
            Ent::Param(i) => self.p.f.params.get(i).map(|p| p.name.clone()),
            Ent::Shared(i) => self.p.shared.get(i).cloned(),
            Ent::TParam(i) => self.p.tparams.get(i).cloned(),
        }
    }

    /// A reference to `want`: if its name finds another local, that local must be renamed.
    fn refer(&mut self, want: Ent) {
        let Some(name) = self.name_of(want) else {
            return;
        };
        if let Some(Ent::Local(l)) = self.lookup(&name) {
            if Ent::Local(l) != want {
                self.conflicts.push(l);
            }
        }
    }

    fn declare(&mut self, l: Handle<crate::ir::Local>) {
        if let (Some(name), Some(scope)) = (self.p.locals.get(l.index()), self.scopes.last_mut()) {
            scope.push((name.clone(), l.index()));
        }
    }

    fn base(&mut self, b: Base) {
        match b {
            Base::Param(i) => self.refer(Ent::Param(i as usize)),
            Base::Shared(h) => self.refer(Ent::Shared(h.index())),
            Base::Local(h) => self.refer(Ent::Local(h.index())),
        }
    }

    fn place(&mut self, p: &Place) {
        match p {
            Place::Local(l) | Place::Lane { local: l, .. } => self.refer(Ent::Local(l.index())),
            Place::Element { base, index } => {
                self.base(*base);
                self.expr(*index);
            }
        }
    }

    fn expr(&mut self, e: ExprId) {
        self.depth += 1;
        if self.depth < MAX_PRINT_DEPTH {
            if let Some(x) = self.p.f.exprs.try_get(e) {
                match x {
                    Expr::Local(l) => self.refer(Ent::Local(l.index())),
                    Expr::Param(i) | Expr::Len(i) => self.refer(Ent::Param(*i as usize)),
                    Expr::TemplateParam(i) => self.refer(Ent::TParam(*i as usize)),
                    Expr::Index { base, .. }
                    | Expr::VLoad { base, .. }
                    | Expr::MatrixLoad { base, .. }
                    | Expr::Ref(base) => self.base(*base),
                    Expr::Atomic { place, .. }
                    | Expr::AtomicLoad { place, .. }
                    | Expr::AtomicStore { place, .. } => {
                        if let Place::Local(l) | Place::Lane { local: l, .. } = place {
                            self.refer(Ent::Local(l.index()));
                        }
                        if let Place::Element { base, .. } = place {
                            self.base(*base);
                        }
                    }
                    _ => {}
                }
                for op in x.operands() {
                    self.expr(op);
                }
            }
        }
        self.depth -= 1;
    }

    fn block(&mut self, b: &Block) {
        for s in b {
            self.stmt(s);
        }
    }

    fn scoped(&mut self, b: &Block) {
        self.scopes.push(Vec::new());
        self.block(b);
        self.scopes.pop();
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { local, init } => {
                if let Some(i) = init {
                    self.expr(*i);
                }
                self.declare(*local);
            }
            StmtKind::Assign { place, value } => {
                self.place(place);
                self.expr(*value);
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                self.expr(*cond);
                self.scoped(then_block);
                self.scoped(else_block);
            }
            StmtKind::Loop { kind, body, .. } => {
                self.scopes.push(Vec::new());
                match kind {
                    LoopKind::Infinite => {}
                    LoopKind::While(c) => self.expr(*c),
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                    } => {
                        self.expr(*start);
                        self.expr(*end);
                        if let Some(st) = step {
                            self.expr(*st);
                        }
                        self.declare(*var);
                    }
                    LoopKind::Cond {
                        var,
                        init,
                        cond,
                        update,
                    } => {
                        self.expr(*init);
                        self.declare(*var);
                        self.expr(*cond);
                        self.expr(*update);
                    }
                }
                self.block(body);
                self.scopes.pop();
            }
            StmtKind::Block(b) => self.scoped(b),
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => self.expr(*e),
            StmtKind::Print { args, .. } => {
                for a in args {
                    self.expr(*a);
                }
            }
            StmtKind::Assert { cond, .. } => self.expr(*cond),
            StmtKind::VStore {
                base, index, value, ..
            } => {
                self.base(*base);
                self.expr(*index);
                self.expr(*value);
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                self.expr(*value);
                self.base(*base);
                self.expr(*offset);
                self.expr(*stride);
            }
            _ => {}
        }
    }
}
