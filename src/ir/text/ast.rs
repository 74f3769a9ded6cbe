//! The syntax tree the parser builds and the lowering turns into IR. It keeps what the source
//! says (names as written, literals as written, spans) and nothing resolved.

use super::lexer::Number;
use crate::ir::text::run::RunSpec;
use crate::ir::{BinaryOp, Span, UnaryOp};

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// The height of this tree (a leaf is 1); the parser refuses trees that are too tall.
    pub depth: u32,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A number, `neg` when a `-` was written directly before it.
    Num {
        num: Number,
        neg: bool,
    },
    Bool(bool),
    Name(String),
    /// `Set::member`.
    TagPath {
        set: String,
        member: String,
    },
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `e as T`.
    Cast(Box<Expr>, Type),
    /// `e.name`: a lane, a swizzle, or a coordinate's dimension.
    Field(Box<Expr>, String, Span),
    /// `e[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// `if cond { accept } else { reject }`, evaluating only the arm `cond` picks.
    IfElse(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `Name { field: value, ... }`: a struct literal (lowered away by `super::structs`).
    StructLit {
        name: String,
        fields: Vec<(String, Span, Expr)>,
    },
    /// `name<generics>(args)`: built-ins, constructors and helper calls.
    Call {
        name: String,
        generics: Option<Vec<Generic>>,
        args: Vec<Arg>,
    },
}

/// A generic argument: `vec4<f32>`, `vload<4>`, `matrix_fill<acc, f32, 16, 16>`.
#[derive(Clone, Debug)]
pub enum Generic {
    Type(Type),
    Int(u64, Span),
    /// A bare word that is not a type: a matrix role (`acc`).
    Name(String, Span),
}

/// A call argument; `align = 16` is the only named one.
#[derive(Clone, Debug)]
pub enum Arg {
    Pos(Expr),
    Named(String, Span, Expr),
}

#[derive(Clone, Debug)]
pub struct Type {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum TypeKind {
    /// A scalar name, or `tag`-less names checked by the lowering.
    Scalar(crate::ir::Scalar),
    Vector(crate::ir::Scalar, u8),
    Buffer {
        elem: Box<Type>,
        /// `buf<E>`, `buf<E, rw>` or `buf<E, const>`.
        access: crate::ir::Access,
    },
    /// `[E; N]` (`len: Some`) or `[E]`.
    Array {
        elem: Box<Type>,
        len: Option<Box<Expr>>,
    },
    Matrix {
        role: crate::ir::MatrixRole,
        scalar: crate::ir::Scalar,
        rows: u8,
        cols: u8,
    },
    Tag(String),
    /// A name that is no built-in type: a `struct` item's (lowered away by `super::structs`).
    Named(String),
    /// `shared T`: a shared array by reference (`T` should be an array type).
    Shared(Box<Type>),
    /// `swizzled<T, S>` / `block_padded<T, B, P>` around an array type (shared only).
    Layout {
        array: Box<Type>,
        layout: crate::ir::layout::Layout,
    },
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

// Statements are built once and walked once; boxing the large variants buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum StmtKind {
    Let {
        name: String,
        name_span: Span,
        ty: Option<Type>,
        init: Option<Expr>,
    },
    Shared {
        name: String,
        name_span: Span,
        ty: Type,
    },
    /// `place = value`, or `place op= value` with `op`.
    Assign {
        place: Expr,
        op: Option<BinaryOp>,
        value: Expr,
    },
    If {
        cond: Expr,
        then_block: Vec<Stmt>,
        else_block: Vec<Stmt>,
    },
    Loop {
        label: Option<(String, Span)>,
        kind: LoopKind,
        body: Vec<Stmt>,
    },
    Break(Option<(String, Span)>),
    Continue(Option<(String, Span)>),
    Return(Option<Expr>),
    /// `fence(workgroup)` / `fence(device)`.
    Fence(String, Span),
    /// `print("format", values...)`.
    Print {
        format: String,
        format_span: Span,
        args: Vec<Expr>,
    },
    /// `assert(cond, "message")`.
    Assert {
        cond: Expr,
        message: String,
    },
    /// `{ ... }`: a bare scope.
    Block(Vec<Stmt>),
    /// An expression statement; `barrier()`, `vstore(..)` and `matrix_store(..)` are calls
    /// here and become their own statements in the lowering.
    Expr(Expr),
}

#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum LoopKind {
    Infinite,
    While(Expr),
    For {
        var: String,
        var_span: Span,
        ty: Option<Type>,
        start: Expr,
        end: Expr,
        step: Option<Expr>,
    },
    /// `for var: T = init; cond; place op= value { }`: `update_place` must name `var`.
    Cond {
        var: String,
        var_span: Span,
        ty: Option<Type>,
        init: Expr,
        cond: Expr,
        update_place: Expr,
        update_op: Option<BinaryOp>,
        update_value: Expr,
    },
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub span: Span,
    pub ty: Type,
}

/// `@name(args)`.
#[derive(Clone, Debug)]
pub struct Attr {
    pub name: String,
    pub span: Span,
    pub args: Vec<AttrArg>,
}

#[derive(Clone, Debug)]
pub enum AttrArg {
    Pos(Expr),
    Named {
        key: String,
        span: Span,
        value: AttrValue,
    },
}

#[derive(Clone, Debug)]
pub enum AttrValue {
    Expr(Expr),
    Str(String),
}

#[derive(Clone, Debug)]
pub struct Template {
    pub params: Vec<(String, Span)>,
    pub requires: Vec<Expr>,
    pub instantiate: Vec<(Vec<u64>, Span)>,
    pub max: Option<(u64, Span)>,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub attrs: Vec<Attr>,
    pub kernel: bool,
    pub name: String,
    pub name_span: Span,
    pub template: Option<Template>,
    pub params: Vec<Param>,
    pub ret: Option<Type>,
    /// `None` when the body had syntax errors (it is then not lowered, to avoid follow-on
    /// errors).
    pub body: Option<Vec<Stmt>>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct TagSet {
    pub name: String,
    pub name_span: Span,
    pub members: Vec<(String, Span)>,
    pub span: Span,
}

/// `struct Name { field: Type, ... }` (lowered away by `super::structs`).
#[derive(Clone, Debug)]
pub struct StructDef {
    pub name: String,
    pub name_span: Span,
    pub fields: Vec<(String, Span, Type)>,
}

#[derive(Clone, Debug)]
pub enum Item {
    Struct(StructDef),
    TagSet(TagSet),
    Function(Function),
    Run(RunSpec),
    Family(Family),
}

/// `family NAME = Template(key = expr, ...);` (see `crate::ir::family`).
#[derive(Clone, Debug)]
pub struct Family {
    pub name: String,
    pub template: String,
    pub keys: Vec<(String, Span, Expr)>,
    pub span: Span,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Self {
        let depth = 1 + match &kind {
            ExprKind::Unary(_, a) | ExprKind::Cast(a, _) | ExprKind::Field(a, _, _) => a.depth,
            ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => a.depth.max(b.depth),
            ExprKind::IfElse(c, a, b) => c.depth.max(a.depth).max(b.depth),
            ExprKind::StructLit { fields, .. } => {
                fields.iter().map(|(_, _, e)| e.depth).max().unwrap_or(0)
            }
            ExprKind::Call { args, .. } => args
                .iter()
                .map(|a| match a {
                    Arg::Pos(e) | Arg::Named(_, _, e) => e.depth,
                })
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        Expr { kind, span, depth }
    }
}
