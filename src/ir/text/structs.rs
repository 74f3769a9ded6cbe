//! `struct` types (issue 23 item 5, `docs/text-format.md` "Structs", `docs/semantics.md`
//! "Structs"), lowered away on the syntax tree before the lowering to IR: the IR, the
//! verifier and every backend see only scalars, vectors and `buf<u32>` words at std430
//! offsets ([`crate::ir::layout`]).
//!
//! - A struct local or helper parameter is one local (parameter) per scalar or vector it
//!   holds, named `local_field` (made unique in its function).
//! - A `buf<S>` parameter is a `buf<u32>` of the struct's words; `b[i].f` reads the field's
//!   words at `i * stride + offset` (`bitcast`, `vload`), a store writes them (`vstore`).
//! - A helper returning a struct returns its fields packed into a `vecN<u32>` (`u32` for one
//!   word), which the caller unpacks.
//! - A run block's value for a `buf<S>` lists each element's fields' scalars in declaration
//!   order (a vector field's lanes in order, no padding); it becomes the buffer's words.
//!
//! The rules are type rules, so their codes are the verifier's range (`XPU-V140`..): the IR
//! holds no struct for the verifier to check.

use std::collections::{HashMap, HashSet};

use super::ast::*;
use super::codes as pcodes;
use super::lexer::Number;
use crate::ir::struct_layout::{FieldType, StructLayout};
use crate::ir::text::run::{ArgInit, Expect, RunSpec, Value};
use crate::ir::{BinaryOp, Diagnostic, ElemType, Scalar, Span};

/// The codes of the struct rules.
pub mod codes {
    /// A field that the struct does not have (`p.nope`, a literal's `nope: 1.0`).
    pub const UNKNOWN_FIELD: &str = "XPU-V140";
    /// A struct that declares a field twice.
    pub const DUPLICATE_FIELD: &str = "XPU-V141";
    /// A struct that contains itself, directly or through other structs.
    pub const RECURSIVE: &str = "XPU-V142";
    /// A field type structs cannot hold (`bool`, 8- and 16-bit scalars, `vec8`/`vec16`,
    /// arrays, buffers, matrix fragments, tags), or a struct with no fields.
    pub const FIELD_TYPE: &str = "XPU-V143";
    /// A struct where it cannot go: an operand of an operator, a cast, a built-in's argument
    /// (atomics, wave verbs, `print`, ...), an `if` expression's arm, a compound assignment,
    /// a kernel's by-value parameter, an array or shared array element.
    pub const MISPLACED: &str = "XPU-V144";
    /// A struct literal whose fields are missing, repeated or not in declaration order.
    pub const LITERAL: &str = "XPU-V145";
    /// A value of another type where a struct is expected, or the reverse.
    pub const MISMATCH: &str = "XPU-V146";
    /// A struct value that must be bound to a local first: a struct-returning helper call
    /// or a field of a literal or call, or a buffer element whose index has side effects
    /// where it would be evaluated more than once.
    pub const BIND_FIRST: &str = "XPU-V147";
    /// A helper returning a struct of more than 16 words.
    pub const RETURN_SIZE: &str = "XPU-V148";
    /// A struct name defined twice or the same as a type or tag set.
    pub const DUPLICATE_STRUCT: &str = "XPU-P050";
    /// A run block value for a `buf<S>` that does not fit the struct: a scalar count that is
    /// not a multiple of the struct's, a value of the wrong kind or range for its field, or
    /// a form other than a list, `fill` or `uninit`.
    pub const RUN_VALUE: &str = "XPU-P051";
}

/// The most words a run block's `fill` of a `buf<S>` may write (64 MiB).
pub const MAX_FILL_WORDS: u64 = 1 << 24;

/// The largest struct a helper may return, in 32-bit words.
pub const MAX_RETURN_WORDS: u32 = 16;

type R<T> = Result<T, ()>;

/// One scalar or vector of a struct.
#[derive(Clone, Debug)]
struct LeafInfo {
    path: Vec<String>,
    offset: u32,
    elem: ElemType,
}

#[derive(Clone, Debug)]
enum FieldTy {
    Leaf(ElemType),
    Struct(usize),
}

#[derive(Clone, Debug)]
struct SInfo {
    name: String,
    fields: Vec<(String, FieldTy)>,
    /// The start of each field's leaves in `leaves`.
    field_leaf: Vec<usize>,
    leaves: Vec<LeafInfo>,
    layout: StructLayout,
}

impl SInfo {
    fn stride_words(&self) -> u32 {
        self.layout.size() / 4
    }
    /// The field's type and its leaves' range.
    fn field(&self, name: &str) -> Option<(FieldTy, std::ops::Range<usize>)> {
        let i = self.fields.iter().position(|(n, _)| n == name)?;
        let end = self
            .field_leaf
            .get(i + 1)
            .copied()
            .unwrap_or(self.leaves.len());
        Some((self.fields[i].1.clone(), self.field_leaf[i]..end))
    }
    fn words(&self) -> u32 {
        self.leaves.iter().map(|l| l.elem.size() / 4).sum()
    }
}

#[derive(Clone, Debug)]
enum Bind {
    /// A struct local or parameter: one name per leaf of struct `sid`.
    Struct { sid: usize, names: Vec<String> },
    /// A `buf<S>` parameter.
    Buf { sid: usize },
    /// Anything else (hides an outer struct name).
    Plain,
}

#[derive(Clone, Debug)]
struct Sig {
    params: Vec<Option<usize>>,
    ret: Option<usize>,
}

/// A struct-typed place: leaves `range` of the struct `root` that `kind` names.
#[derive(Clone, Debug)]
struct SRef {
    root: usize,
    range: std::ops::Range<usize>,
    kind: SRefKind,
}

#[derive(Clone, Debug)]
enum SRefKind {
    Var(Vec<String>),
    /// A buffer element: the buffer's name and the element index (evaluated once per use).
    Buf(String, Box<Expr>),
}

fn num(v: u64, span: Span) -> Expr {
    Expr::new(
        ExprKind::Num {
            num: Number::Int {
                value: v,
                hex: false,
                suffix: None,
            },
            neg: false,
        },
        span,
    )
}

fn name(n: &str, span: Span) -> Expr {
    Expr::new(ExprKind::Name(n.to_string()), span)
}

fn call(n: &str, generics: Option<Vec<Generic>>, args: Vec<Expr>, span: Span) -> Expr {
    Expr::new(
        ExprKind::Call {
            name: n.to_string(),
            generics,
            args: args.into_iter().map(Arg::Pos).collect(),
        },
        span,
    )
}

fn elem_type(e: ElemType, span: Span) -> Type {
    Type {
        kind: if e.lanes == 1 {
            TypeKind::Scalar(e.scalar)
        } else {
            TypeKind::Vector(e.scalar, e.lanes)
        },
        span,
    }
}

fn bitcast(to: ElemType, e: Expr, span: Span) -> Expr {
    call(
        "bitcast",
        Some(vec![Generic::Type(elem_type(to, span))]),
        vec![e],
        span,
    )
}

fn lane_name(i: usize) -> &'static str {
    ["x", "y", "z", "w"][i]
}

fn binary(op: BinaryOp, a: Expr, b: Expr, span: Span) -> Expr {
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
}

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

/// Whether evaluating `e` twice is the same as once: no calls but pure built-ins.
fn is_pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Num { .. } | ExprKind::Bool(_) | ExprKind::Name(_) | ExprKind::TagPath { .. } => {
            true
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a, _) | ExprKind::Field(a, _, _) => is_pure(a),
        ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => is_pure(a) && is_pure(b),
        ExprKind::IfElse(c, a, b) => is_pure(c) && is_pure(a) && is_pure(b),
        ExprKind::StructLit { fields, .. } => fields.iter().all(|(_, _, e)| is_pure(e)),
        ExprKind::Call { .. } => false,
    }
}

/// The words `(N, lanes)` of the packed return value of a struct of `words` words: `u32`
/// for one, else the smallest vector that holds them.
fn pack_lanes(words: u32) -> u8 {
    match words {
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5..=8 => 8,
        _ => 16,
    }
}

struct Desugar<'d> {
    diags: &'d mut Vec<Diagnostic>,
    structs: Vec<SInfo>,
    /// Structs whose definition has an error (reported); a function using one is dropped.
    broken: Vec<bool>,
    by_name: HashMap<String, usize>,
    sigs: HashMap<String, Sig>,
    // Per function:
    scopes: Vec<HashMap<String, Bind>>,
    used: HashSet<String>,
    ret: Option<usize>,
}

/// Lowers every struct in `items` away (see the module documentation). Without a `struct`
/// item the items are returned as they are (a struct name then is an unknown type, which
/// the lowering reports).
pub(crate) fn desugar(items: Vec<Item>, diags: &mut Vec<Diagnostic>) -> Vec<Item> {
    if !items.iter().any(|i| matches!(i, Item::Struct(_))) {
        return items;
    }
    let mut d = Desugar {
        diags,
        structs: Vec::new(),
        broken: Vec::new(),
        by_name: HashMap::new(),
        sigs: HashMap::new(),
        scopes: Vec::new(),
        used: HashSet::new(),
        ret: None,
    };
    d.collect_structs(&items);
    d.collect_sigs(&items);
    let mut kernels: HashMap<String, Vec<(String, usize)>> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Item::Struct(_) => {}
            Item::Function(f) => {
                if f.kernel {
                    let bufs = f
                        .params
                        .iter()
                        .filter_map(|p| match &p.ty.kind {
                            TypeKind::Buffer { elem, .. } => match &elem.kind {
                                TypeKind::Named(n) => {
                                    d.by_name.get(n).map(|&sid| (p.name.clone(), sid))
                                }
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect();
                    kernels.insert(f.name.clone(), bufs);
                }
                if let Ok(f) = d.function(f) {
                    out.push(Item::Function(f));
                }
            }
            Item::Run(r) => {
                let base = r.kernel.split('<').next().unwrap_or("").to_string();
                match kernels.get(&base) {
                    Some(bufs) if !bufs.is_empty() => {
                        let bufs = bufs.clone();
                        if let Ok(r) = d.run_block(r, &bufs) {
                            out.push(Item::Run(r));
                        }
                    }
                    _ => out.push(Item::Run(r)),
                }
            }
            other => out.push(other),
        }
    }
    out
}

impl Desugar<'_> {
    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    // ---- structs ----

    fn collect_structs(&mut self, items: &[Item]) {
        let defs: Vec<&StructDef> = items
            .iter()
            .filter_map(|i| match i {
                Item::Struct(s) => Some(s),
                _ => None,
            })
            .collect();
        let tagsets: HashSet<&str> = items
            .iter()
            .filter_map(|i| match i {
                Item::TagSet(t) => Some(t.name.as_str()),
                _ => None,
            })
            .collect();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut ok_defs = Vec::new();
        for s in defs {
            let builtin = Scalar::from_name(&s.name).is_some()
                || matches!(
                    s.name.as_str(),
                    "vec2" | "vec3" | "vec4" | "vec8" | "vec16" | "buf" | "matrix" | "tag"
                );
            if builtin {
                self.error(
                    pcodes::RESERVED,
                    s.name_span,
                    format!(
                        "`{}` is a built-in type name and cannot name a struct",
                        s.name
                    ),
                );
            } else if index.contains_key(&s.name) {
                self.error(
                    codes::DUPLICATE_STRUCT,
                    s.name_span,
                    format!("struct `{}` defined twice", s.name),
                );
            } else if tagsets.contains(s.name.as_str()) {
                self.error(
                    codes::DUPLICATE_STRUCT,
                    s.name_span,
                    format!("`{}` names both a struct and a tag set", s.name),
                );
            } else {
                index.insert(s.name.clone(), ok_defs.len());
                ok_defs.push(s);
            }
        }
        // Field types by struct index, checking each field.
        let mut ftys: Vec<Option<Vec<(String, FieldTy)>>> = Vec::new();
        for s in &ok_defs {
            let mut fields: Vec<(String, FieldTy)> = Vec::new();
            let mut ok = true;
            if s.fields.is_empty() {
                self.error(
                    codes::FIELD_TYPE,
                    s.name_span,
                    format!("struct `{}` has no fields", s.name),
                );
                ok = false;
            }
            for (fname, fspan, ty) in &s.fields {
                if fields.iter().any(|(n, _)| n == fname) {
                    self.error(
                        codes::DUPLICATE_FIELD,
                        *fspan,
                        format!("struct `{}` declares field `{fname}` twice", s.name),
                    );
                    ok = false;
                    continue;
                }
                let ft = match &ty.kind {
                    TypeKind::Scalar(sc) => Some(ElemType::scalar(*sc)),
                    TypeKind::Vector(sc, n) => Some(ElemType::vector(*sc, *n)),
                    TypeKind::Named(n) => match index.get(n) {
                        Some(&i) => {
                            fields.push((fname.clone(), FieldTy::Struct(i)));
                            continue;
                        }
                        None => {
                            self.error(
                                pcodes::UNKNOWN_TYPE,
                                ty.span,
                                format!("unknown type `{n}`"),
                            );
                            ok = false;
                            continue;
                        }
                    },
                    _ => None,
                };
                match ft {
                    Some(e) if crate::ir::struct_layout::elem_align(e).is_some() => {
                        fields.push((fname.clone(), FieldTy::Leaf(e)))
                    }
                    _ => {
                        self.error(
                            codes::FIELD_TYPE,
                            ty.span,
                            format!(
                                "field `{fname}` of struct `{}`: struct fields are 32- or 64-bit \
                                 scalars (i32 u32 f32 i64 u64 f64), vectors of 2 to 4 of them, \
                                 or structs",
                                s.name
                            ),
                        );
                        ok = false;
                    }
                }
            }
            ftys.push(ok.then_some(fields));
        }
        // Recursion: depth-first over struct fields.
        let n = ok_defs.len();
        let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
        let mut recursive = vec![false; n];
        fn visit(
            i: usize,
            ftys: &[Option<Vec<(String, FieldTy)>>],
            state: &mut [u8],
            recursive: &mut [bool],
        ) -> bool {
            if state[i] == 1 {
                return true;
            }
            if state[i] == 2 {
                return recursive[i];
            }
            state[i] = 1;
            let mut rec = false;
            if let Some(fs) = &ftys[i] {
                for (_, f) in fs {
                    if let FieldTy::Struct(j) = f {
                        rec |= visit(*j, ftys, state, recursive);
                    }
                }
            }
            state[i] = 2;
            recursive[i] = rec;
            rec
        }
        for i in 0..n {
            if visit(i, &ftys, &mut state, &mut recursive) && ftys[i].is_some() {
                self.error(
                    codes::RECURSIVE,
                    ok_defs[i].name_span,
                    format!(
                        "struct `{}` contains itself (through its fields); a struct holds \
                         its fields by value",
                        ok_defs[i].name
                    ),
                );
            }
        }
        // Layouts, in dependency order (memoised).
        let mut infos: Vec<Option<SInfo>> = vec![None; n];
        fn build(
            i: usize,
            defs: &[&StructDef],
            ftys: &[Option<Vec<(String, FieldTy)>>],
            recursive: &[bool],
            infos: &mut Vec<Option<SInfo>>,
        ) -> Option<()> {
            if infos[i].is_some() {
                return Some(());
            }
            if recursive[i] {
                return None;
            }
            let fs = ftys[i].as_ref()?;
            let mut lfields = Vec::new();
            let mut leaves = Vec::new();
            let mut field_leaf = Vec::new();
            for (fname, f) in fs {
                match f {
                    FieldTy::Leaf(e) => lfields.push((fname.clone(), FieldType::Elem(*e))),
                    FieldTy::Struct(j) => {
                        build(*j, defs, ftys, recursive, infos)?;
                        let inner = infos[*j].as_ref()?;
                        lfields.push((fname.clone(), FieldType::Struct(inner.layout.clone())));
                    }
                }
            }
            let layout = StructLayout::new(&defs[i].name, lfields).ok()?;
            for (k, (fname, f)) in fs.iter().enumerate() {
                field_leaf.push(leaves.len());
                let off = layout.fields()[k].offset;
                match f {
                    FieldTy::Leaf(e) => leaves.push(LeafInfo {
                        path: vec![fname.clone()],
                        offset: off,
                        elem: *e,
                    }),
                    FieldTy::Struct(j) => {
                        let inner = infos[*j].as_ref()?;
                        for l in &inner.leaves {
                            let mut path = vec![fname.clone()];
                            path.extend(l.path.iter().cloned());
                            leaves.push(LeafInfo {
                                path,
                                offset: off + l.offset,
                                elem: l.elem,
                            });
                        }
                    }
                }
            }
            infos[i] = Some(SInfo {
                name: defs[i].name.clone(),
                fields: fs.clone(),
                field_leaf,
                leaves,
                layout,
            });
            Some(())
        }
        for i in 0..n {
            let _ = build(i, &ok_defs, &ftys, &recursive, &mut infos);
        }
        // Structs without a layout (errors reported above) stay known by name so that their
        // uses do not add "unknown type" errors; their uses are dropped with the function.
        for (i, s) in ok_defs.iter().enumerate() {
            self.by_name.insert(s.name.clone(), i);
        }
        self.structs = infos
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                s.unwrap_or_else(|| SInfo {
                    name: ok_defs[i].name.clone(),
                    fields: Vec::new(),
                    field_leaf: Vec::new(),
                    leaves: Vec::new(),
                    layout: StructLayout::new(
                        "",
                        vec![("_".into(), FieldType::Elem(ElemType::scalar(Scalar::U32)))],
                    )
                    .expect("one u32 field has a layout"),
                })
            })
            .collect();
        self.broken = (0..n).map(|i| ftys[i].is_none() || recursive[i]).collect();
    }
}

/// Where a struct value's buffer index may go: into a `let` before the statement, or used
/// as written (more than once only when it is pure).
enum Ctx<'a> {
    Hoist(&'a mut Vec<Stmt>),
    Dup,
    Once,
}

fn collect_idents_expr(e: &Expr, out: &mut HashSet<String>) {
    match &e.kind {
        ExprKind::Name(n) => {
            out.insert(n.clone());
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a, _) | ExprKind::Field(a, _, _) => {
            collect_idents_expr(a, out)
        }
        ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => {
            collect_idents_expr(a, out);
            collect_idents_expr(b, out);
        }
        ExprKind::IfElse(c, a, b) => {
            collect_idents_expr(c, out);
            collect_idents_expr(a, out);
            collect_idents_expr(b, out);
        }
        ExprKind::StructLit { fields, .. } => fields
            .iter()
            .for_each(|(_, _, e)| collect_idents_expr(e, out)),
        ExprKind::Call { args, .. } => args.iter().for_each(|a| match a {
            Arg::Pos(e) | Arg::Named(_, _, e) => collect_idents_expr(e, out),
        }),
        ExprKind::Num { .. } | ExprKind::Bool(_) | ExprKind::TagPath { .. } => {}
    }
}

fn collect_idents(stmts: &[Stmt], out: &mut HashSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Let { name, init, .. } => {
                out.insert(name.clone());
                if let Some(e) = init {
                    collect_idents_expr(e, out);
                }
            }
            StmtKind::Shared { name, .. } => {
                out.insert(name.clone());
            }
            StmtKind::Assign { place, value, .. } => {
                collect_idents_expr(place, out);
                collect_idents_expr(value, out);
            }
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                collect_idents_expr(cond, out);
                collect_idents(then_block, out);
                collect_idents(else_block, out);
            }
            StmtKind::Loop { kind, body, .. } => {
                match kind {
                    LoopKind::Infinite => {}
                    LoopKind::While(c) => collect_idents_expr(c, out),
                    LoopKind::For {
                        var,
                        start,
                        end,
                        step,
                        ..
                    } => {
                        out.insert(var.clone());
                        collect_idents_expr(start, out);
                        collect_idents_expr(end, out);
                        if let Some(s) = step {
                            collect_idents_expr(s, out);
                        }
                    }
                    LoopKind::Cond {
                        var,
                        init,
                        cond,
                        update_place,
                        update_value,
                        ..
                    } => {
                        out.insert(var.clone());
                        collect_idents_expr(init, out);
                        collect_idents_expr(cond, out);
                        collect_idents_expr(update_place, out);
                        collect_idents_expr(update_value, out);
                    }
                }
                collect_idents(body, out);
            }
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => collect_idents_expr(e, out),
            StmtKind::Print { args, .. } => args.iter().for_each(|e| collect_idents_expr(e, out)),
            StmtKind::Assert { cond, .. } => collect_idents_expr(cond, out),
            StmtKind::Block(b) => collect_idents(b, out),
            StmtKind::Return(None)
            | StmtKind::Break(_)
            | StmtKind::Continue(_)
            | StmtKind::Fence(..) => {}
        }
    }
}

impl Desugar<'_> {
    fn collect_sigs(&mut self, items: &[Item]) {
        for item in items {
            if let Item::Function(f) = item {
                if f.kernel {
                    continue;
                }
                let sid = |t: &Type| match &t.kind {
                    TypeKind::Named(n) => self.by_name.get(n).copied(),
                    _ => None,
                };
                let sig = Sig {
                    params: f.params.iter().map(|p| sid(&p.ty)).collect(),
                    ret: f.ret.as_ref().and_then(sid),
                };
                self.sigs.insert(f.name.clone(), sig);
            }
        }
    }

    fn fresh(&mut self, base: &str) -> String {
        let mut n = base.to_string();
        let mut k = 1;
        while self.used.contains(&n) {
            n = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(n.clone());
        n
    }

    fn lookup(&self, n: &str) -> Option<&Bind> {
        self.scopes.iter().rev().find_map(|s| s.get(n))
    }

    fn declare(&mut self, n: &str, b: Bind) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(n.to_string(), b);
        }
    }

    /// The struct a type names, `Ok(None)` for any other type; an unknown name is `XPU-P006`.
    fn struct_of_type(&mut self, t: &Type) -> R<Option<usize>> {
        match &t.kind {
            TypeKind::Named(n) => match self.by_name.get(n).copied() {
                Some(sid) if self.broken[sid] => Err(()),
                Some(sid) => Ok(Some(sid)),
                None => {
                    self.error(pcodes::UNKNOWN_TYPE, t.span, format!("unknown type `{n}`"));
                    Err(())
                }
            },
            _ => Ok(None),
        }
    }

    /// A type that may not hold a struct (`let` of an array, `shared`, casts, `for`).
    fn plain_ty(&mut self, t: &Type) -> R<Type> {
        match &t.kind {
            TypeKind::Named(_) => {
                if let Some(sid) = self.struct_of_type(t)? {
                    let n = self.structs[sid].name.clone();
                    self.error(
                        codes::MISPLACED,
                        t.span,
                        format!(
                            "struct `{n}` cannot be here: structs are locals, helper parameters \
                             and results, and `buf<{n}>` kernel parameters (arrays and shared \
                             arrays of structs are not supported)"
                        ),
                    );
                }
                Err(())
            }
            TypeKind::Array { elem, .. } | TypeKind::Buffer { elem, .. } => {
                self.plain_ty(elem)?;
                Ok(t.clone())
            }
            _ => Ok(t.clone()),
        }
    }

    fn function(&mut self, mut f: Function) -> R<Function> {
        self.scopes = vec![HashMap::new()];
        self.used = HashSet::new();
        for p in &f.params {
            self.used.insert(p.name.clone());
        }
        if let Some(t) = &f.template {
            for (n, _) in &t.params {
                self.used.insert(n.clone());
            }
        }
        if let Some(b) = &f.body {
            collect_idents(b, &mut self.used);
        }
        self.ret = None;
        let before = self.diags.len();
        let mut params = Vec::with_capacity(f.params.len());
        for p in std::mem::take(&mut f.params) {
            match &p.ty.kind {
                TypeKind::Named(_) => {
                    let Ok(Some(sid)) = self.struct_of_type(&p.ty) else {
                        continue;
                    };
                    if f.kernel {
                        let n = self.structs[sid].name.clone();
                        self.error(
                            codes::MISPLACED,
                            p.ty.span,
                            format!(
                                "kernel parameter `{}` is a struct `{n}`: a kernel takes structs \
                                 in a `buf<{n}>`",
                                p.name
                            ),
                        );
                        continue;
                    }
                    let leaves = self.structs[sid].leaves.clone();
                    let mut names = Vec::new();
                    for l in &leaves {
                        let n = self.fresh(&format!("{}_{}", p.name, l.path.join("_")));
                        params.push(Param {
                            name: n.clone(),
                            span: p.span,
                            ty: elem_type(l.elem, p.ty.span),
                        });
                        names.push(n);
                    }
                    self.declare(&p.name, Bind::Struct { sid, names });
                }
                TypeKind::Buffer { elem, access } if matches!(elem.kind, TypeKind::Named(_)) => {
                    let access = *access;
                    let Ok(Some(sid)) = self.struct_of_type(elem) else {
                        continue;
                    };
                    params.push(Param {
                        name: p.name.clone(),
                        span: p.span,
                        ty: Type {
                            kind: TypeKind::Buffer {
                                elem: Box::new(elem_type(ElemType::scalar(Scalar::U32), elem.span)),
                                access,
                            },
                            span: p.ty.span,
                        },
                    });
                    self.declare(&p.name, Bind::Buf { sid });
                }
                _ => {
                    let _ = self.plain_ty(&p.ty);
                    self.declare(&p.name, Bind::Plain);
                    params.push(p);
                }
            }
        }
        f.params = params;
        if let Some(rt) = f.ret.take() {
            match self.struct_of_type(&rt) {
                Ok(Some(sid)) => {
                    let words = self.structs[sid].words();
                    if words > MAX_RETURN_WORDS {
                        self.error(
                            codes::RETURN_SIZE,
                            rt.span,
                            format!(
                                "`{}` returns struct `{}` of {words} words; a helper returns at \
                                 most {MAX_RETURN_WORDS} words of struct",
                                f.name, self.structs[sid].name
                            ),
                        );
                    }
                    self.ret = Some(sid);
                    let lanes = pack_lanes(words);
                    f.ret = Some(elem_type(ElemType::vector(Scalar::U32, lanes), rt.span));
                }
                Ok(None) => {
                    let _ = self.plain_ty(&rt);
                    f.ret = Some(rt);
                }
                Err(()) => {}
            }
        }
        if let Some(body) = f.body.take() {
            let b = self.block(body);
            f.body = b.ok();
        }
        if self.diags.len() > before {
            // Lower the signature only: the body's errors are reported.
            f.body = None;
        }
        Ok(f)
    }

    fn block(&mut self, stmts: Vec<Stmt>) -> R<Vec<Stmt>> {
        self.scopes.push(HashMap::new());
        let mut out = Vec::with_capacity(stmts.len());
        let mut ok = true;
        for s in stmts {
            if self.stmt(s, &mut out).is_err() {
                ok = false;
            }
        }
        self.scopes.pop();
        if ok {
            Ok(out)
        } else {
            Err(())
        }
    }

    fn sname(&self, sid: usize) -> String {
        self.structs[sid].name.clone()
    }

    fn stmt(&mut self, s: Stmt, out: &mut Vec<Stmt>) -> R<()> {
        let span = s.span;
        match s.kind {
            StmtKind::Let {
                name,
                name_span,
                ty,
                init,
            } => {
                let declared = match &ty {
                    Some(t) => self.struct_of_type_or_plain(t)?,
                    None => None,
                };
                // A declared type decides; without one, the initialiser's.
                let sid = match &ty {
                    Some(_) => declared,
                    None => init.as_ref().and_then(|e| self.stype(e)),
                };
                let Some(sid) = sid else {
                    let init = init.map(|e| self.expr(&e)).transpose()?;
                    let ty = ty.map(|t| self.plain_ty(&t)).transpose()?;
                    self.declare(&name, Bind::Plain);
                    out.push(stmt(
                        StmtKind::Let {
                            name,
                            name_span,
                            ty,
                            init,
                        },
                        span,
                    ));
                    return Ok(());
                };
                let leaves = self.structs[sid].leaves.clone();
                let values = match &init {
                    Some(e) => Some(self.sval(e, sid, Ctx::Hoist(out))?),
                    None => None,
                };
                let mut names = Vec::with_capacity(leaves.len());
                for (k, l) in leaves.iter().enumerate() {
                    let n = self.fresh(&format!("{name}_{}", l.path.join("_")));
                    out.push(stmt(
                        StmtKind::Let {
                            name: n.clone(),
                            name_span,
                            ty: Some(elem_type(l.elem, span)),
                            init: values.as_ref().map(|v| v[k].clone()),
                        },
                        span,
                    ));
                    names.push(n);
                }
                self.declare(&name, Bind::Struct { sid, names });
                Ok(())
            }
            StmtKind::Shared {
                name,
                name_span,
                ty,
            } => {
                let ty = self.plain_ty(&ty)?;
                self.declare(&name, Bind::Plain);
                out.push(stmt(
                    StmtKind::Shared {
                        name,
                        name_span,
                        ty,
                    },
                    span,
                ));
                Ok(())
            }
            StmtKind::Assign { place, op, value } => self.assign(place, op, value, span, out),
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let cond = self.expr(&cond);
                let t = self.block(then_block);
                let e = self.block(else_block);
                out.push(stmt(
                    StmtKind::If {
                        cond: cond?,
                        then_block: t?,
                        else_block: e?,
                    },
                    span,
                ));
                Ok(())
            }
            StmtKind::Loop { label, kind, body } => {
                self.scopes.push(HashMap::new());
                let r = self.loop_stmt(label, kind, body, span);
                self.scopes.pop();
                out.push(r?);
                Ok(())
            }
            StmtKind::Return(Some(e)) if self.ret.is_some() => {
                let sid = self.ret.unwrap_or(0);
                let values = self.sval(&e, sid, Ctx::Hoist(out))?;
                let temps = self.materialise(sid, values, "ret", span, out);
                let packed = self.pack(sid, &temps, span);
                out.push(stmt(StmtKind::Return(Some(packed)), span));
                Ok(())
            }
            StmtKind::Return(e) => {
                let e = e.map(|e| self.expr(&e)).transpose()?;
                out.push(stmt(StmtKind::Return(e), span));
                Ok(())
            }
            StmtKind::Print {
                format,
                format_span,
                args,
            } => {
                let args = args.iter().map(|a| self.expr(a)).collect::<Vec<_>>();
                let args = args.into_iter().collect::<R<Vec<_>>>()?;
                out.push(stmt(
                    StmtKind::Print {
                        format,
                        format_span,
                        args,
                    },
                    span,
                ));
                Ok(())
            }
            StmtKind::Assert { cond, message } => {
                let cond = self.expr(&cond)?;
                out.push(stmt(StmtKind::Assert { cond, message }, span));
                Ok(())
            }
            StmtKind::Block(b) => {
                let b = self.block(b)?;
                out.push(stmt(StmtKind::Block(b), span));
                Ok(())
            }
            StmtKind::Expr(e) => {
                // A struct-returning helper called for its effects: the packed value is
                // dropped.
                let e = match &e.kind {
                    ExprKind::Call { name, args, .. }
                        if self.sigs.get(name).is_some_and(|s| s.ret.is_some()) =>
                    {
                        let args = self.call_args(name, args)?;
                        Expr::new(
                            ExprKind::Call {
                                name: name.clone(),
                                generics: None,
                                args,
                            },
                            e.span,
                        )
                    }
                    _ => self.expr(&e)?,
                };
                out.push(stmt(StmtKind::Expr(e), span));
                Ok(())
            }
            k @ (StmtKind::Break(_) | StmtKind::Continue(_) | StmtKind::Fence(..)) => {
                out.push(stmt(k, span));
                Ok(())
            }
        }
    }

    fn struct_of_type_or_plain(&mut self, t: &Type) -> R<Option<usize>> {
        match &t.kind {
            TypeKind::Named(_) => self.struct_of_type(t),
            _ => Ok(None),
        }
    }

    fn loop_stmt(
        &mut self,
        label: Option<(String, Span)>,
        kind: LoopKind,
        body: Vec<Stmt>,
        span: Span,
    ) -> R<Stmt> {
        let kind = match kind {
            LoopKind::Infinite => LoopKind::Infinite,
            LoopKind::While(c) => LoopKind::While(self.expr(&c)?),
            LoopKind::For {
                var,
                var_span,
                ty,
                start,
                end,
                step,
            } => {
                let start = self.expr(&start)?;
                let end = self.expr(&end)?;
                let step = step.map(|s| self.expr(&s)).transpose()?;
                let ty = ty.map(|t| self.plain_ty(&t)).transpose()?;
                self.declare(&var, Bind::Plain);
                LoopKind::For {
                    var,
                    var_span,
                    ty,
                    start,
                    end,
                    step,
                }
            }
            LoopKind::Cond {
                var,
                var_span,
                ty,
                init,
                cond,
                update_place,
                update_op,
                update_value,
            } => {
                let init = self.expr(&init)?;
                let ty = ty.map(|t| self.plain_ty(&t)).transpose()?;
                self.declare(&var, Bind::Plain);
                LoopKind::Cond {
                    var,
                    var_span,
                    ty,
                    init,
                    cond: self.expr(&cond)?,
                    update_place: self.expr(&update_place)?,
                    update_op,
                    update_value: self.expr(&update_value)?,
                }
            }
        };
        let body = self.block(body)?;
        Ok(stmt(StmtKind::Loop { label, kind, body }, span))
    }

    /// `let t: T = v;` for each leaf value; the temporaries' names.
    fn materialise(
        &mut self,
        sid: usize,
        values: Vec<Expr>,
        base: &str,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> Vec<String> {
        let leaves = self.structs[sid].leaves.clone();
        let mut names = Vec::with_capacity(values.len());
        for (l, v) in leaves.iter().zip(values) {
            let n = self.fresh(&format!("{base}_{}", l.path.join("_")));
            out.push(stmt(
                StmtKind::Let {
                    name: n.clone(),
                    name_span: span,
                    ty: Some(elem_type(l.elem, span)),
                    init: Some(v),
                },
                span,
            ));
            names.push(n);
        }
        names
    }

    fn assign(
        &mut self,
        place: Expr,
        op: Option<BinaryOp>,
        value: Expr,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        // A whole struct: every leaf from a temporary, so that the value may read the place.
        if let Some(sid) = self.stype(&place) {
            if op.is_some() {
                self.error(
                    codes::MISPLACED,
                    span,
                    format!("a compound assignment to a struct `{}`", self.sname(sid)),
                );
                return Err(());
            }
            let Some(r) = self.sref(&place, Ctx::Hoist(out))? else {
                self.error(
                    pcodes::PLACE,
                    place.span,
                    "the target of an assignment must be a place",
                );
                return Err(());
            };
            let values = self.sval(&value, sid, Ctx::Hoist(out))?;
            let temps = self.materialise(sid, values, "new", span, out);
            for (k, t) in r.range.clone().zip(temps) {
                let s = self.write_leaf(&r, k, None, name(&t, span), span);
                out.extend(s);
            }
            return Ok(());
        }
        // A field (or one lane of a vector field) of a buffer element.
        if let Some((r, k, lane)) = self.buf_leaf_place(&place, out)? {
            let elem = self.leaf_elem(&r, k, lane);
            let value = self.expr(&value)?;
            let value = match op {
                Some(op) => binary(op, self.read_leaf(&r, k, lane, span), value, span),
                None => value,
            };
            let t = self.fresh("field");
            out.push(stmt(
                StmtKind::Let {
                    name: t.clone(),
                    name_span: span,
                    ty: Some(elem_type(elem, span)),
                    init: Some(value),
                },
                span,
            ));
            let s = self.write_leaf(&r, k, lane, name(&t, span), span);
            out.extend(s);
            return Ok(());
        }
        let place = self.expr(&place)?;
        let value = self.expr(&value)?;
        out.push(stmt(StmtKind::Assign { place, op, value }, span));
        Ok(())
    }

    /// `b[i].f` or `b[i].f.x` of a `buf<S>`: the element (index hoisted), the leaf, the lane.
    #[allow(clippy::type_complexity)]
    fn buf_leaf_place(
        &mut self,
        place: &Expr,
        out: &mut Vec<Stmt>,
    ) -> R<Option<(SRef, usize, Option<usize>)>> {
        let ExprKind::Field(base, f, fspan) = &place.kind else {
            return Ok(None);
        };
        // One lane of a vector field.
        if let ExprKind::Field(inner, f2, _) = &base.kind {
            let lane = ["x", "y", "z", "w"].iter().position(|l| l == f);
            if let (Some(lane), Some(sid)) = (lane, self.stype(inner)) {
                if self.is_buf_ref(inner) {
                    let (fty, range) = self.field_or_err(sid, f2, base.span)?;
                    if let FieldTy::Leaf(e) = fty {
                        if lane < e.lanes as usize {
                            let Some(r) = self.sref(inner, Ctx::Hoist(out))? else {
                                return Ok(None);
                            };
                            let k = r.range.start + range.start;
                            return Ok(Some((r, k, Some(lane))));
                        }
                    }
                }
            }
        }
        let Some(sid) = self.stype(base) else {
            return Ok(None);
        };
        if !self.is_buf_ref(base) {
            return Ok(None);
        }
        let (fty, range) = self.field_or_err(sid, f, *fspan)?;
        if let FieldTy::Struct(_) = fty {
            return Ok(None);
        }
        let Some(r) = self.sref(base, Ctx::Hoist(out))? else {
            return Ok(None);
        };
        let k = r.range.start + range.start;
        Ok(Some((r, k, None)))
    }

    fn is_buf_ref(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Index(b, _) => {
                matches!(&b.kind, ExprKind::Name(n) if matches!(self.lookup(n), Some(Bind::Buf { .. })))
            }
            ExprKind::Field(b, _, _) => self.is_buf_ref(b),
            _ => false,
        }
    }

    fn field_or_err(
        &mut self,
        sid: usize,
        f: &str,
        span: Span,
    ) -> R<(FieldTy, std::ops::Range<usize>)> {
        match self.structs[sid].field(f) {
            Some(x) => Ok(x),
            None => {
                self.error(
                    codes::UNKNOWN_FIELD,
                    span,
                    format!("struct `{}` has no field `{f}`", self.sname(sid)),
                );
                Err(())
            }
        }
    }

    /// The struct an expression's value is, if it is one (no diagnostics).
    fn stype(&self, e: &Expr) -> Option<usize> {
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Bind::Struct { sid, .. }) => Some(*sid),
                _ => None,
            },
            ExprKind::Index(b, _) => match &b.kind {
                ExprKind::Name(n) => match self.lookup(n) {
                    Some(Bind::Buf { sid }) => Some(*sid),
                    _ => None,
                },
                _ => None,
            },
            ExprKind::Field(b, f, _) => {
                let sid = self.stype(b)?;
                match self.structs[sid].field(f)? {
                    (FieldTy::Struct(j), _) => Some(j),
                    _ => None,
                }
            }
            ExprKind::StructLit { name, .. } => self.by_name.get(name).copied(),
            ExprKind::Call { name, .. } => self.sigs.get(name).and_then(|s| s.ret),
            _ => None,
        }
    }

    /// The place a struct-valued expression names: a struct local or parameter, a buffer
    /// element, or a struct field of one. `Ok(None)` for a literal or a call.
    fn sref(&mut self, e: &Expr, mut ctx: Ctx<'_>) -> R<Option<SRef>> {
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Bind::Struct { sid, names }) => Ok(Some(SRef {
                    root: sid,
                    range: 0..names.len(),
                    kind: SRefKind::Var(names),
                })),
                _ => Ok(None),
            },
            ExprKind::Index(b, i) => {
                let ExprKind::Name(bn) = &b.kind else {
                    return Ok(None);
                };
                let Some(Bind::Buf { sid }) = self.lookup(bn).cloned() else {
                    return Ok(None);
                };
                let idx = self.expr(i)?;
                let idx = match &mut ctx {
                    Ctx::Hoist(out) => {
                        let t = self.fresh(&format!("{bn}_i"));
                        out.push(stmt(
                            StmtKind::Let {
                                name: t.clone(),
                                name_span: i.span,
                                ty: Some(elem_type(ElemType::scalar(Scalar::U32), i.span)),
                                init: Some(idx),
                            },
                            i.span,
                        ));
                        name(&t, i.span)
                    }
                    Ctx::Dup if !is_pure(&idx) => {
                        self.error(
                            codes::BIND_FIRST,
                            i.span,
                            format!(
                                "the index of `{bn}[..]` would be evaluated once per field: \
                                 bind the element to a local first (`let e = {bn}[..];`)"
                            ),
                        );
                        return Err(());
                    }
                    _ => idx,
                };
                let n = self.structs[sid].leaves.len();
                Ok(Some(SRef {
                    root: sid,
                    range: 0..n,
                    kind: SRefKind::Buf(bn.clone(), Box::new(idx)),
                }))
            }
            ExprKind::Field(b, f, fspan) => {
                let Some(sid) = self.stype(b) else {
                    return Ok(None);
                };
                let (fty, range) = self.field_or_err(sid, f, *fspan)?;
                let FieldTy::Struct(_) = fty else {
                    return Ok(None);
                };
                let Some(r) = self.sref(b, ctx)? else {
                    return Ok(None);
                };
                let start = r.range.start + range.start;
                Ok(Some(SRef {
                    root: r.root,
                    range: start..r.range.start + range.end,
                    kind: r.kind,
                }))
            }
            _ => Ok(None),
        }
    }

    fn leaf_elem(&self, r: &SRef, k: usize, lane: Option<usize>) -> ElemType {
        let e = self.structs[r.root].leaves[k].elem;
        match lane {
            Some(_) => ElemType::scalar(e.scalar),
            None => e,
        }
    }

    /// The word index of leaf `k` (lane `lane`) of a buffer element.
    fn word(&self, r: &SRef, idx: &Expr, k: usize, lane: Option<usize>, span: Span) -> Expr {
        let info = &self.structs[r.root];
        let l = &info.leaves[k];
        let off = (l.offset + lane.unwrap_or(0) as u32 * l.elem.scalar.size()) / 4;
        let stride = info.stride_words();
        let base = if stride == 1 {
            idx.clone()
        } else {
            binary(BinaryOp::Mul, idx.clone(), num(stride as u64, span), span)
        };
        if off == 0 {
            base
        } else {
            binary(BinaryOp::Add, base, num(off as u64, span), span)
        }
    }

    fn read_leaf(&self, r: &SRef, k: usize, lane: Option<usize>, span: Span) -> Expr {
        match &r.kind {
            SRefKind::Var(names) => {
                let v = name(&names[k], span);
                match lane {
                    Some(j) => Expr::new(
                        ExprKind::Field(Box::new(v), lane_name(j).into(), span),
                        span,
                    ),
                    None => v,
                }
            }
            SRefKind::Buf(b, idx) => {
                let w = self.word(r, idx, k, lane, span);
                read_elem(b, w, self.leaf_elem(r, k, lane), span)
            }
        }
    }

    /// Stores `v` (a name of the leaf's type) into leaf `k` (lane `lane`).
    fn write_leaf(
        &self,
        r: &SRef,
        k: usize,
        lane: Option<usize>,
        v: Expr,
        span: Span,
    ) -> Vec<Stmt> {
        match &r.kind {
            SRefKind::Var(names) => {
                let mut place = name(&names[k], span);
                if let Some(j) = lane {
                    place = Expr::new(
                        ExprKind::Field(Box::new(place), lane_name(j).into(), span),
                        span,
                    );
                }
                vec![stmt(
                    StmtKind::Assign {
                        place,
                        op: None,
                        value: v,
                    },
                    span,
                )]
            }
            SRefKind::Buf(b, idx) => {
                let e = self.leaf_elem(r, k, lane);
                let w = self.word(r, idx, k, lane, span);
                write_elem(b, w, e, v, span)
            }
        }
    }

    /// The leaves of a value of struct `sid`.
    fn sval(&mut self, e: &Expr, sid: usize, mut ctx: Ctx<'_>) -> R<Vec<Expr>> {
        let mismatch = |d: &mut Self, found: &str| {
            let msg = format!("expected a struct `{}`, found {found}", d.sname(sid));
            d.error(codes::MISMATCH, e.span, msg);
        };
        match &e.kind {
            ExprKind::StructLit { name: sn, fields } => {
                let Some(&lid) = self.by_name.get(sn) else {
                    self.error(
                        pcodes::UNKNOWN_TYPE,
                        e.span,
                        format!("unknown struct `{sn}`"),
                    );
                    return Err(());
                };
                if lid != sid {
                    mismatch(self, &format!("a struct `{sn}`"));
                    return Err(());
                }
                if self.broken[sid] {
                    return Err(());
                }
                let decl = self.structs[sid].fields.clone();
                for (i, (fname, fspan, _)) in fields.iter().enumerate() {
                    if !decl.iter().any(|(n, _)| n == fname) {
                        self.error(
                            codes::UNKNOWN_FIELD,
                            *fspan,
                            format!("struct `{sn}` has no field `{fname}`"),
                        );
                        return Err(());
                    }
                    if fields[..i].iter().any(|(n, _, _)| n == fname) {
                        self.error(
                            codes::LITERAL,
                            *fspan,
                            format!("field `{fname}` is given twice"),
                        );
                        return Err(());
                    }
                }
                for (i, (dname, _)) in decl.iter().enumerate() {
                    match fields.get(i) {
                        Some((n, _, _)) if n == dname => {}
                        Some((n, fspan, _)) if fields.iter().any(|(m, _, _)| m == dname) => {
                            self.error(
                                codes::LITERAL,
                                *fspan,
                                format!(
                                    "a `{sn}` literal gives its fields in declaration order: \
                                     `{dname}` before `{n}`"
                                ),
                            );
                            return Err(());
                        }
                        _ => {
                            self.error(
                                codes::LITERAL,
                                e.span,
                                format!("the `{sn}` literal has no field `{dname}`"),
                            );
                            return Err(());
                        }
                    }
                }
                let mut out = Vec::new();
                for ((_, fty), (_, _, v)) in decl.iter().zip(fields) {
                    match fty {
                        FieldTy::Leaf(_) => out.push(self.expr(v)?),
                        FieldTy::Struct(j) => out.extend(self.sval(v, *j, Ctx::Dup)?),
                    }
                }
                Ok(out)
            }
            ExprKind::Call { name: cn, args, .. }
                if self.sigs.get(cn).is_some_and(|s| s.ret.is_some()) =>
            {
                let rsid = self.sigs[cn].ret.unwrap_or(0);
                if rsid != sid {
                    mismatch(self, &format!("a struct `{}`", self.sname(rsid)));
                    return Err(());
                }
                let Ctx::Hoist(out) = &mut ctx else {
                    self.error(
                        codes::BIND_FIRST,
                        e.span,
                        format!(
                            "`{cn}` returns a struct: call it as a `let` initialiser, an \
                             assignment's value or a `return` value"
                        ),
                    );
                    return Err(());
                };
                let args = self.call_args(cn, args)?;
                let lanes = pack_lanes(self.structs[sid].words());
                let t = self.fresh(&format!("{cn}_ret"));
                out.push(stmt(
                    StmtKind::Let {
                        name: t.clone(),
                        name_span: e.span,
                        ty: Some(elem_type(ElemType::vector(Scalar::U32, lanes), e.span)),
                        init: Some(Expr::new(
                            ExprKind::Call {
                                name: cn.clone(),
                                generics: None,
                                args,
                            },
                            e.span,
                        )),
                    },
                    e.span,
                ));
                Ok(self.unpack(sid, &t, e.span))
            }
            ExprKind::IfElse(..) if self.if_has_struct(e) => {
                self.error(
                    codes::MISPLACED,
                    e.span,
                    "an `if` expression of structs: use an `if` statement that assigns a struct local",
                );
                Err(())
            }
            _ => {
                let Some(found) = self.stype(e) else {
                    mismatch(self, "a value that is not a struct");
                    return Err(());
                };
                if found != sid {
                    mismatch(self, &format!("a struct `{}`", self.sname(found)));
                    return Err(());
                }
                let many = self.structs[sid].leaves.len() > 1
                    || self.structs[sid].leaves.iter().any(|l| needs_dup(l.elem));
                let c = match ctx {
                    Ctx::Hoist(out) => Ctx::Hoist(out),
                    _ if many => Ctx::Dup,
                    _ => Ctx::Once,
                };
                let Some(r) = self.sref(e, c)? else {
                    self.error(
                        codes::BIND_FIRST,
                        e.span,
                        "take fields of a struct local, parameter or buffer element: bind this \
                         struct to a local first",
                    );
                    return Err(());
                };
                Ok(r.range
                    .clone()
                    .map(|k| self.read_leaf(&r, k, None, e.span))
                    .collect())
            }
        }
    }

    fn if_has_struct(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::IfElse(_, a, b) => {
                self.stype(a).is_some()
                    || self.stype(b).is_some()
                    || self.if_has_struct(a)
                    || self.if_has_struct(b)
            }
            _ => false,
        }
    }

    /// The packed return value: the leaves' words in order, then zeros.
    fn pack(&self, sid: usize, temps: &[String], span: Span) -> Expr {
        let leaves = &self.structs[sid].leaves;
        let words = self.structs[sid].words();
        let lanes = pack_lanes(words);
        let u32e = |n: u8| ElemType::vector(Scalar::U32, n);
        let mut parts = Vec::new();
        for (l, t) in leaves.iter().zip(temps) {
            let v = name(t, span);
            let e = l.elem;
            if e.scalar.size() == 4 {
                parts.push(if e.scalar == Scalar::U32 {
                    v
                } else {
                    bitcast(u32e(e.lanes), v, span)
                });
            } else if e.lanes == 1 {
                parts.push(bitcast(u32e(2), v, span));
            } else {
                for j in 0..e.lanes as usize {
                    let lane = Expr::new(
                        ExprKind::Field(Box::new(v.clone()), lane_name(j).into(), span),
                        span,
                    );
                    parts.push(bitcast(u32e(2), lane, span));
                }
            }
        }
        if lanes == 1 {
            return parts.pop().unwrap_or_else(|| num(0, span));
        }
        for _ in words..lanes as u32 {
            parts.push(num(0, span));
        }
        vector_ctor(ElemType::vector(Scalar::U32, lanes), parts, span)
    }

    /// The leaves of a packed return value held in the local `t`.
    fn unpack(&self, sid: usize, t: &str, span: Span) -> Vec<Expr> {
        let leaves = &self.structs[sid].leaves;
        let lanes = pack_lanes(self.structs[sid].words());
        let tv = name(t, span);
        let lane = |p: u32| {
            Expr::new(
                ExprKind::Index(Box::new(tv.clone()), Box::new(num(p as u64, span))),
                span,
            )
        };
        let swz = |p: u32, n: u32| {
            let mut args = vec![tv.clone()];
            args.extend((p..p + n).map(|q| num(q as u64, span)));
            call("swizzle", None, args, span)
        };
        let mut out = Vec::new();
        let mut p = 0u32;
        for l in leaves {
            let e = l.elem;
            let v = if lanes == 1 {
                if e.scalar == Scalar::U32 {
                    tv.clone()
                } else {
                    bitcast(e, tv.clone(), span)
                }
            } else if e.scalar.size() == 4 {
                let w = if e.lanes == 1 {
                    lane(p)
                } else {
                    swz(p, e.lanes as u32)
                };
                if e.scalar == Scalar::U32 {
                    w
                } else {
                    bitcast(e, w, span)
                }
            } else if e.lanes == 1 {
                bitcast(e, swz(p, 2), span)
            } else {
                let parts = (0..e.lanes as u32)
                    .map(|j| bitcast(ElemType::scalar(e.scalar), swz(p + 2 * j, 2), span))
                    .collect();
                vector_ctor(e, parts, span)
            };
            p += e.size() / 4;
            out.push(v);
        }
        out
    }

    /// A helper call's arguments, a struct argument expanded to its leaves.
    fn call_args(&mut self, cn: &str, args: &[Arg]) -> R<Vec<Arg>> {
        let params = self
            .sigs
            .get(cn)
            .map(|s| s.params.clone())
            .unwrap_or_default();
        let mut out = Vec::new();
        let mut ok = true;
        for (i, a) in args.iter().enumerate() {
            match (a, params.get(i).copied().flatten()) {
                (Arg::Pos(e), Some(sid)) if params.len() == args.len() => {
                    match self.sval(e, sid, Ctx::Dup) {
                        Ok(v) => out.extend(v.into_iter().map(Arg::Pos)),
                        Err(()) => ok = false,
                    }
                }
                (Arg::Pos(e), _) => match self.expr(e) {
                    Ok(v) => out.push(Arg::Pos(v)),
                    Err(()) => ok = false,
                },
                (Arg::Named(k, s, e), _) => match self.expr(e) {
                    Ok(v) => out.push(Arg::Named(k.clone(), *s, v)),
                    Err(()) => ok = false,
                },
            }
        }
        if ok {
            Ok(out)
        } else {
            Err(())
        }
    }

    /// An expression whose value is not a struct, its struct parts lowered.
    fn expr(&mut self, e: &Expr) -> R<Expr> {
        let span = e.span;
        let kind = match &e.kind {
            ExprKind::Name(n) => {
                if let Some(Bind::Struct { sid, .. }) = self.lookup(n) {
                    let sn = self.sname(*sid);
                    self.error(
                        codes::MISPLACED,
                        span,
                        format!(
                            "`{n}` is a struct `{sn}` where a scalar or vector is needed: use \
                             its fields (`{n}.field`)"
                        ),
                    );
                    return Err(());
                }
                return Ok(e.clone());
            }
            ExprKind::Field(base, f, fspan) => {
                if let Some(sid) = self.stype(base) {
                    let (fty, range) = self.field_or_err(sid, f, *fspan)?;
                    if let FieldTy::Struct(j) = fty {
                        self.error(
                            codes::MISPLACED,
                            span,
                            format!(
                                "field `{f}` is a struct `{}` where a scalar or vector is needed",
                                self.sname(j)
                            ),
                        );
                        return Err(());
                    }
                    let elem = self.structs[sid].leaves[range.start].elem;
                    let ctx = if needs_dup(elem) { Ctx::Dup } else { Ctx::Once };
                    let Some(r) = self.sref(base, ctx)? else {
                        self.error(
                            codes::BIND_FIRST,
                            base.span,
                            "take fields of a struct local, parameter or buffer element: bind \
                             this struct to a local first",
                        );
                        return Err(());
                    };
                    let k = r.range.start + range.start;
                    return Ok(self.read_leaf(&r, k, None, span));
                }
                ExprKind::Field(Box::new(self.expr(base)?), f.clone(), *fspan)
            }
            ExprKind::Index(b, i) => {
                if self.stype(e).is_some() {
                    self.misplaced_struct(e);
                    return Err(());
                }
                ExprKind::Index(Box::new(self.expr(b)?), Box::new(self.expr(i)?))
            }
            ExprKind::StructLit { .. } => {
                self.misplaced_struct(e);
                return Err(());
            }
            ExprKind::Call {
                name: cn,
                generics,
                args,
            } => {
                if let Some(sig) = self.sigs.get(cn) {
                    if sig.ret.is_some() {
                        self.error(
                            codes::BIND_FIRST,
                            span,
                            format!(
                                "`{cn}` returns a struct: call it as a `let` initialiser, an \
                                 assignment's value or a `return` value"
                            ),
                        );
                        return Err(());
                    }
                    let args = self.call_args(cn, args)?;
                    return Ok(Expr::new(
                        ExprKind::Call {
                            name: cn.clone(),
                            generics: generics.clone(),
                            args,
                        },
                        span,
                    ));
                }
                self.builtin_call(cn, generics, args, span)?
            }
            ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(self.expr(a)?)),
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a);
                let b = self.expr(b);
                ExprKind::Binary(*op, Box::new(a?), Box::new(b?))
            }
            ExprKind::Cast(a, t) => ExprKind::Cast(Box::new(self.expr(a)?), self.plain_ty(t)?),
            ExprKind::IfElse(c, a, b) => {
                let c = self.expr(c);
                let a = self.expr(a);
                let b = self.expr(b);
                ExprKind::IfElse(Box::new(c?), Box::new(a?), Box::new(b?))
            }
            ExprKind::Num { .. } | ExprKind::Bool(_) | ExprKind::TagPath { .. } => {
                return Ok(e.clone())
            }
        };
        Ok(Expr::new(kind, span))
    }

    fn misplaced_struct(&mut self, e: &Expr) {
        let sid = self.stype(e).unwrap_or(0);
        self.error(
            codes::MISPLACED,
            e.span,
            format!(
                "a struct `{}` where a scalar or vector is needed: use its fields",
                self.sname(sid)
            ),
        );
    }

    fn builtin_call(
        &mut self,
        cn: &str,
        generics: &Option<Vec<Generic>>,
        args: &[Arg],
        span: Span,
    ) -> R<ExprKind> {
        let pos: Vec<&Expr> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Pos(e) => Some(e),
                _ => None,
            })
            .collect();
        // `len(b)` of a `buf<S>` counts structs.
        if cn == "len" && pos.len() == 1 {
            if let ExprKind::Name(n) = &pos[0].kind {
                if let Some(Bind::Buf { sid }) = self.lookup(n) {
                    let stride = self.structs[*sid].stride_words();
                    let l = call("len", None, vec![pos[0].clone()], span);
                    return Ok(if stride == 1 {
                        l.kind
                    } else {
                        ExprKind::Binary(
                            BinaryOp::Div,
                            Box::new(l),
                            Box::new(num(stride as u64, span)),
                        )
                    });
                }
            }
        }
        for a in &pos {
            if self.stype(a).is_some() || matches!(a.kind, ExprKind::StructLit { .. }) {
                self.error(
                    codes::MISPLACED,
                    a.span,
                    format!("a struct cannot be an argument of `{cn}`"),
                );
                return Err(());
            }
            if let ExprKind::Name(n) = &a.kind {
                if let Some(Bind::Buf { sid }) = self.lookup(n) {
                    let sn = self.sname(*sid);
                    self.error(
                        codes::MISPLACED,
                        a.span,
                        format!("`{cn}` of `{n}`, a `buf<{sn}>`: access its elements' fields"),
                    );
                    return Err(());
                }
            }
        }
        // Atomics on a field of a struct buffer element: `u32` fields only (the buffer's
        // words are `u32`, and an atomic is one indivisible access of one word).
        if cn.starts_with("atomic_") {
            if let Some(ExprKind::Field(base, f, _)) = pos.first().map(|e| &e.kind) {
                if let Some(sid) = self.stype(base) {
                    if let Some((FieldTy::Leaf(el), _)) = self.structs[sid].field(f) {
                        if el != ElemType::scalar(Scalar::U32) || !self.is_buf_ref(base) {
                            self.error(
                                codes::MISPLACED,
                                pos[0].span,
                                format!(
                                    "`{cn}` on a struct field: atomics take `u32` fields of \
                                     buffer elements only"
                                ),
                            );
                            return Err(());
                        }
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(args.len());
        let mut ok = true;
        for a in args {
            match a {
                Arg::Pos(e) => match self.expr(e) {
                    Ok(v) => out.push(Arg::Pos(v)),
                    Err(()) => ok = false,
                },
                Arg::Named(k, s, e) => match self.expr(e) {
                    Ok(v) => out.push(Arg::Named(k.clone(), *s, v)),
                    Err(()) => ok = false,
                },
            }
        }
        if !ok {
            return Err(());
        }
        let generics = match generics {
            Some(gs) => {
                let mut v = Vec::new();
                for g in gs {
                    v.push(match g {
                        Generic::Type(t) => Generic::Type(self.plain_ty(t)?),
                        g => g.clone(),
                    });
                }
                Some(v)
            }
            None => None,
        };
        Ok(ExprKind::Call {
            name: cn.to_string(),
            generics,
            args: out,
        })
    }

    // ---- run blocks ----

    fn run_block(&mut self, mut r: RunSpec, bufs: &[(String, usize)]) -> R<RunSpec> {
        let mut ok = true;
        for a in &mut r.args {
            if let Some((_, sid)) = bufs.iter().find(|(n, _)| *n == a.name) {
                match self.run_value(&a.name, &a.init, *sid, a.span) {
                    Ok(v) => a.init = v,
                    Err(()) => ok = false,
                }
            }
        }
        for x in &mut r.expects {
            if let Expect::Buffer { name, value, span } = x {
                if let Some((_, sid)) = bufs.iter().find(|(n, _)| n == name) {
                    match self.run_value(name, value, *sid, *span) {
                        Ok(v) => *value = v,
                        Err(()) => ok = false,
                    }
                }
            }
        }
        if ok {
            Ok(r)
        } else {
            Err(())
        }
    }

    fn run_value(&mut self, pname: &str, init: &ArgInit, sid: usize, span: Span) -> R<ArgInit> {
        if self.broken[sid] {
            return Err(());
        }
        let info = self.structs[sid].clone();
        let per: usize = info.leaves.iter().map(|l| l.elem.lanes as usize).sum();
        let stride = info.stride_words() as usize;
        let values: Vec<Value> = match init {
            ArgInit::List(v) => {
                if v.len() % per != 0 {
                    self.error(
                        codes::RUN_VALUE,
                        span,
                        format!(
                            "`{pname}` holds `{}` structs of {per} scalars each; the list has {}",
                            info.name,
                            v.len()
                        ),
                    );
                    return Err(());
                }
                v.clone()
            }
            ArgInit::Fill { len, value } => {
                // The words are written here, so a `fill` is bounded (64 MiB of words).
                if *len as u64 * stride as u64 > MAX_FILL_WORDS {
                    self.error(
                        codes::RUN_VALUE,
                        span,
                        format!(
                            "`{pname}`: `fill({len}, ..)` of `{}` structs is more than \
                             {MAX_FILL_WORDS} words",
                            info.name
                        ),
                    );
                    return Err(());
                }
                vec![*value; *len as usize * per]
            }
            ArgInit::Uninit { len } => {
                return Ok(ArgInit::Uninit {
                    len: len.saturating_mul(stride as u32),
                })
            }
            _ => {
                self.error(
                    codes::RUN_VALUE,
                    span,
                    format!(
                        "`{pname}` holds `{}` structs: give a list of their fields' scalars, \
                         `fill(len, value)` or `uninit(len)`",
                        info.name
                    ),
                );
                return Err(());
            }
        };
        let count = values.len() / per;
        let mut words = vec![0u32; count * stride];
        let mut it = values.iter();
        for e in 0..count {
            for l in &info.leaves {
                let ss = l.elem.scalar.size();
                for j in 0..l.elem.lanes as u32 {
                    let v = *it.next().unwrap_or(&Value::Int(0));
                    let Some(bits) = leaf_bits(l.elem.scalar, v) else {
                        let shown = match v {
                            Value::Int(i) => i.to_string(),
                            Value::Float(f) => format!("{f:?}"),
                            Value::Bool(b) => b.to_string(),
                        };
                        self.error(
                            codes::RUN_VALUE,
                            span,
                            format!(
                                "`{pname}`: field `{}` of element {e} is `{}`, which `{shown}` \
                                 is not (a float for f32/f64, an integer in range otherwise)",
                                l.path.join("."),
                                l.elem.scalar.name()
                            ),
                        );
                        return Err(());
                    };
                    let w = e * stride + ((l.offset + j * ss) / 4) as usize;
                    words[w] = bits as u32;
                    if ss == 8 {
                        words[w + 1] = (bits >> 32) as u32;
                    }
                }
            }
        }
        Ok(ArgInit::List(
            words.into_iter().map(|w| Value::Int(w as i128)).collect(),
        ))
    }
}

/// The bits of a run-block value stored in a field of scalar `s` (little-endian words).
fn leaf_bits(s: Scalar, v: Value) -> Option<u64> {
    match (s, v) {
        (Scalar::F32, Value::Float(f)) => Some((f as f32).to_bits() as u64),
        (Scalar::F64, Value::Float(f)) => Some(f.to_bits()),
        (Scalar::I32, Value::Int(i)) => i32::try_from(i).ok().map(|i| i as u32 as u64),
        (Scalar::U32, Value::Int(i)) => u32::try_from(i).ok().map(|i| i as u64),
        (Scalar::I64, Value::Int(i)) => i64::try_from(i).ok().map(|i| i as u64),
        (Scalar::U64, Value::Int(i)) => u64::try_from(i).ok(),
        _ => None,
    }
}

/// Whether reading `e` from words takes the index more than once (a vector of 64-bit lanes).
fn needs_dup(e: ElemType) -> bool {
    e.scalar.size() == 8 && e.lanes > 1
}

fn vector_ctor(e: ElemType, parts: Vec<Expr>, span: Span) -> Expr {
    let vname = format!("vec{}", e.lanes);
    call(
        &vname,
        Some(vec![Generic::Type(elem_type(
            ElemType::scalar(e.scalar),
            span,
        ))]),
        parts,
        span,
    )
}

fn index(b: &str, w: Expr, span: Span) -> Expr {
    Expr::new(ExprKind::Index(Box::new(name(b, span)), Box::new(w)), span)
}

fn vload(b: &str, w: Expr, n: u8, span: Span) -> Expr {
    call(
        "vload",
        Some(vec![Generic::Int(n as u64, span)]),
        vec![name(b, span), w],
        span,
    )
}

/// A scalar or vector read from the `u32` words of buffer `b` from word `w`.
fn read_elem(b: &str, w: Expr, e: ElemType, span: Span) -> Expr {
    let u = e.scalar == Scalar::U32;
    if e.scalar.size() == 4 {
        let raw = if e.lanes == 1 {
            index(b, w, span)
        } else {
            vload(b, w, e.lanes, span)
        };
        return if u { raw } else { bitcast(e, raw, span) };
    }
    let lane = |j: u32| {
        let wj = if j == 0 {
            w.clone()
        } else {
            binary(BinaryOp::Add, w.clone(), num(2 * j as u64, span), span)
        };
        bitcast(ElemType::scalar(e.scalar), vload(b, wj, 2, span), span)
    };
    if e.lanes == 1 {
        lane(0)
    } else {
        vector_ctor(e, (0..e.lanes as u32).map(lane).collect(), span)
    }
}

/// Statements storing `v` (a local of type `e`) into the words of `b` from word `w`.
fn write_elem(b: &str, w: Expr, e: ElemType, v: Expr, span: Span) -> Vec<Stmt> {
    let u32v = |n: u8| ElemType::vector(Scalar::U32, n);
    let vstore = |w: Expr, x: Expr| {
        stmt(
            StmtKind::Expr(call("vstore", None, vec![name(b, span), w, x], span)),
            span,
        )
    };
    if e.scalar.size() == 4 {
        let x = if e.scalar == Scalar::U32 {
            v
        } else {
            bitcast(u32v(e.lanes), v, span)
        };
        if e.lanes == 1 {
            return vec![stmt(
                StmtKind::Assign {
                    place: index(b, w, span),
                    op: None,
                    value: x,
                },
                span,
            )];
        }
        return vec![vstore(w, x)];
    }
    if e.lanes == 1 {
        return vec![vstore(w, bitcast(u32v(2), v, span))];
    }
    (0..e.lanes as usize)
        .map(|j| {
            let wj = if j == 0 {
                w.clone()
            } else {
                binary(BinaryOp::Add, w.clone(), num(2 * j as u64, span), span)
            };
            let lane = Expr::new(
                ExprKind::Field(Box::new(v.clone()), lane_name(j).into(), span),
                span,
            );
            vstore(wj, bitcast(u32v(2), lane, span))
        })
        .collect()
}
