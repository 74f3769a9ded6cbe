//! Functions (kernels and device helpers), their locals, shared arrays, attributes and
//! template parameters.

use super::{Arena, Base, BinaryOp, Block, ElemType, Expr, ExprId, Handle, Len, Span, Type};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// Whether a function is launched or called.
pub enum FunctionKind {
    /// An entry point launched over a grid.
    Kernel,
    /// A helper callable from kernels and other helpers (no recursion).
    Device,
}

#[derive(Clone, Debug, PartialEq)]
/// A function parameter.
pub struct Param {
    /// The name as written.
    pub name: String,
    /// Its type (buffers for kernels only).
    pub ty: Type,
    /// Where it was declared.
    pub span: Span,
}

/// A local variable (mutable; scalars, vectors, private arrays, fragments and tags).
#[derive(Clone, Debug, PartialEq)]
pub struct Local {
    /// The name as written.
    pub name: String,
    /// Its type.
    pub ty: Type,
    /// Where it was declared.
    pub span: Span,
}

/// A workgroup (shared) array declared in a kernel. `len: None` is sized at launch from the
/// dynamic shared bytes (`bytes / elem.size()` elements).
#[derive(Clone, Debug, PartialEq)]
pub struct SharedDecl {
    /// The name as written.
    pub name: String,
    /// The element type.
    pub elem: ElemType,
    /// The element count; `None` for a launch-sized array.
    pub len: Option<Len>,
    /// Where it was declared.
    pub span: Span,
}

/// A compile-time integer expression over a template's parameters: array lengths, attribute
/// arguments and `requires` clauses. Comparisons and `&&`/`||` yield 0 or 1.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstExpr {
    /// A literal (evaluated as `u32`).
    Lit(u64),
    /// A template parameter, by index.
    Param(u32),
    /// `op x`.
    Unary(ConstUnOp, Handle<ConstExpr>),
    /// `x op y`; `&&` and `||` short-circuit.
    Binary(ConstBinOp, Handle<ConstExpr>, Handle<ConstExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// A unary operator of constant expressions.
pub enum ConstUnOp {
    /// `!x`: 1 when `x` is 0, else 0.
    Not,
    /// `-x`.
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// A binary operator of constant expressions (on `u32`; overflow and division by zero are
/// errors of the instantiation).
pub enum ConstBinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `&&`, short-circuit.
    And,
    /// `||`, short-circuit.
    Or,
}

/// `@occupancy(...)`: the block the kernel is budgeted for (contract §3.4).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Occupancy {
    /// `maxThreads`: work-items per block at most.
    pub max_threads: Option<Handle<ConstExpr>>,
    /// `maxWaves`: the same ceiling in waves (exclusive with `max_threads`).
    pub max_waves: Option<Handle<ConstExpr>>,
    /// `minResident`: blocks to keep resident per multiprocessor.
    pub min_resident: Option<Handle<ConstExpr>>,
    /// `maxRegisters`: a register pin per work-item.
    pub max_registers: Option<Handle<ConstExpr>>,
    /// Where the attribute was written.
    pub span: Span,
}

/// `@unlowered(...)`: a tracked hold of the skip gate for one backend (contract §3.6).
#[derive(Clone, Debug, PartialEq)]
pub struct Unlowered {
    /// The backend it holds on (`cpu`, `cuda`, `hip`, `vulkan`).
    pub backend: String,
    /// The plan item that tracks the condition.
    pub tracked: String,
    /// `may_lower = true`: the hold is per template instance (no stale detection).
    pub may_lower: bool,
    /// `hold = true`: the lowering is not attempted.
    pub hold: bool,
    /// `host_wave_below = N`: holds on the CPU only on a host narrower than `N` lanes.
    pub host_wave_below: Option<u32>,
    /// Where the attribute was written.
    pub span: Span,
}

impl Unlowered {
    /// Whether this hold applies on `backend` (as `@unlowered` names it: `cpu`, `cuda`, `hip`,
    /// `vulkan`) on a host whose wave is `host_wave` lanes: `host_wave_below = N` holds on
    /// the CPU only where the host is narrower than `N` (contract §3.6).
    pub fn active(&self, backend: &str, host_wave: u32) -> bool {
        self.backend == backend
            && (backend != "cpu" || self.host_wave_below.is_none_or(|n| host_wave < n))
    }
}

/// A kernel's declarations (contract §3.2–3.6).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attributes {
    /// `@wave(N)`: the wave width the body assumes.
    pub wave: Option<(u32, Span)>,
    /// `@occupancy(...)`: the block the kernel is budgeted for.
    pub occupancy: Option<Occupancy>,
    /// `@block(X, Y, Z)`: the one block the kernel is launched with (contract §3.4). Backends
    /// lower it as their bound, the manifest records it, and a launch with another block is
    /// refused (`XPU-L008`). Missing dimensions are 1.
    pub block: Option<([u32; 3], Span)>,
    /// `@unlowered(...)` holds, one per backend.
    pub unlowered: Vec<Unlowered>,
    /// `@unbounded(tracked = "...")`.
    pub unbounded: Option<(String, Span)>,
}

/// What makes a kernel a template (contract §3.5).
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateInfo {
    /// The constant parameters' names (each a `u32`).
    pub params: Vec<String>,
    /// `requires` clauses, each evaluated per instantiation.
    pub requires: Vec<(Handle<ConstExpr>, Span)>,
    /// The argument lists to instantiate.
    pub instantiate: Vec<(Vec<u32>, Span)>,
    /// The instantiation cap (`max N`); the default is [`TemplateInfo::DEFAULT_MAX`].
    pub max: Option<u32>,
}

impl TemplateInfo {
    /// The instantiation cap when no `max N` is given.
    pub const DEFAULT_MAX: u32 = 8;
}

/// A kernel, a device helper, or a kernel template.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// The name, unique in its module.
    pub name: String,
    /// Kernel or device helper.
    pub kind: FunctionKind,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The return type (helpers only); `None` for none.
    pub ret: Option<Type>,
    /// The kernel's declarations.
    pub attrs: Attributes,
    /// `Some` for a template.
    pub template: Option<TemplateInfo>,
    /// The local variables.
    pub locals: Arena<Local>,
    /// The workgroup arrays (kernels only).
    pub shared: Arena<SharedDecl>,
    /// Constant expressions over the template parameters.
    pub consts: Arena<ConstExpr>,
    /// Every expression of the body; statements refer to them by handle.
    pub exprs: Arena<Expr>,
    /// The span of each expression, parallel to `exprs`.
    pub expr_spans: Vec<Span>,
    /// The statements, in order.
    pub body: Block,
    /// Where the function was declared.
    pub span: Span,
    /// Multi-dimensional arrays: a private (`Base::Local`) or shared (`Base::Shared`) array
    /// declared `[[E; C]; R]` with its lengths, outermost first (`[R, C]`). The array itself
    /// is the flat row-major array of `R * C` elements its type or declaration gives; the
    /// shape is how the text writes it (`a[i][j]` is `a[i * C + j]`). Backends ignore it.
    pub array_dims: Vec<(Base, Vec<u32>)>,
    /// Shared arrays declared with a layout (`swizzled<...>`, `block_padded<...>`; contract
    /// §2.2): the placement [`crate::ir::layout`] maps their indices to on the compiled
    /// backends. The array's type and indices stay logical here.
    pub layouts: Vec<(Handle<SharedDecl>, crate::ir::layout::Layout)>,
}

impl Function {
    /// The lengths of a multi-dimensional array, outermost first; `None` for a flat one.
    pub fn dims_of(&self, base: Base) -> Option<&[u32]> {
        self.array_dims
            .iter()
            .find(|(b, _)| *b == base)
            .map(|(_, d)| d.as_slice())
    }

    /// The layout shared array `h` was declared with, if any.
    pub fn layout_of(&self, h: Handle<SharedDecl>) -> Option<crate::ir::layout::Layout> {
        self.layouts.iter().find(|(s, _)| *s == h).map(|(_, l)| *l)
    }

    /// An empty function named `name`: no parameters, locals or body, unknown span.
    pub fn new(name: impl Into<String>, kind: FunctionKind) -> Self {
        Function {
            name: name.into(),
            kind,
            params: Vec::new(),
            ret: None,
            attrs: Attributes::default(),
            template: None,
            locals: Arena::new(),
            shared: Arena::new(),
            consts: Arena::new(),
            exprs: Arena::new(),
            expr_spans: Vec::new(),
            body: Vec::new(),
            span: Span::UNKNOWN,
            array_dims: Vec::new(),
            layouts: Vec::new(),
        }
    }

    /// Appends an expression with its span.
    pub fn add_expr(&mut self, expr: Expr, span: Span) -> Handle<Expr> {
        self.expr_spans.push(span);
        self.exprs.append(expr)
    }

    /// The span of `expr`, or unknown.
    pub fn expr_span(&self, expr: Handle<Expr>) -> Span {
        self.expr_spans
            .get(expr.index())
            .copied()
            .unwrap_or(Span::UNKNOWN)
    }

    /// Whether this is a kernel (an entry point).
    pub fn is_kernel(&self) -> bool {
        self.kind == FunctionKind::Kernel
    }

    /// The loads (`Index`, `VLoad`) that evaluating the expression trees `roots` performs
    /// whatever the values, in evaluation order (a load inside an index before the load it
    /// indexes); not those in a `&&`/`||` right operand or an `if` expression's arm. `None` where the trees hold a call,
    /// an atomic, a wave verb or a fragment operation: a load there may not move past it.
    /// Lowerings use it to issue a statement's loads before its arithmetic.
    pub fn unconditional_loads(&self, roots: &[ExprId]) -> Option<Vec<ExprId>> {
        fn walk(f: &Function, e: ExprId, out: &mut Vec<ExprId>) -> Option<()> {
            let x = &f.exprs[e];
            match x {
                Expr::Call { .. }
                | Expr::Dispatch { .. }
                | Expr::Atomic { .. }
                | Expr::AtomicLoad { .. }
                | Expr::AtomicStore { .. }
                | Expr::Wave { .. }
                | Expr::MatrixFill { .. }
                | Expr::MatrixLoad { .. }
                | Expr::MatrixMma { .. } => return None,
                Expr::Binary {
                    op: BinaryOp::LogicalAnd | BinaryOp::LogicalOr,
                    lhs,
                    ..
                } => walk(f, *lhs, out)?,
                // Only the condition of an `if` expression runs whatever the values.
                Expr::IfElse { cond, .. } => walk(f, *cond, out)?,
                Expr::Index { .. } | Expr::VLoad { .. } => {
                    for o in x.operands() {
                        walk(f, o, out)?;
                    }
                    out.push(e);
                }
                _ => {
                    for o in x.operands() {
                        walk(f, o, out)?;
                    }
                }
            }
            Some(())
        }
        let mut out = Vec::new();
        for &r in roots {
            walk(self, r, &mut out)?;
        }
        Some(out)
    }
}
