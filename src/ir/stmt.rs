//! Statements: structured control flow only (DESIGN.md, Decisions 1). Blocks nest directly;
//! expressions are referenced by handle into the owning function's expression arena.

use super::{Base, ExprId, Handle, Local, Place, Span};

/// A sequence of statements.
pub type Block = Vec<Stmt>;

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

/// The memory a fence orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceScope {
    /// Shared and global accesses as seen by the work-items of one workgroup.
    Workgroup,
    /// Global accesses as seen by every work-item of the launch.
    Device,
}

impl FenceScope {
    pub const fn name(self) -> &'static str {
        match self {
            FenceScope::Workgroup => "workgroup",
            FenceScope::Device => "device",
        }
    }
}

/// How a loop decides whether to run another iteration.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopKind {
    /// `loop { }`: runs until a `break` or `return`.
    Infinite,
    /// `while cond { }`: tests `cond` before each iteration.
    While(ExprId),
    /// `for var in start..end step step { }` over an integer local: `start`, `end` and `step`
    /// are evaluated once on entry; the body runs while `var < end` (while `var > end` when
    /// `var` is signed and `step` is negative), and `var += step` runs after each iteration,
    /// `continue` included. A literal `step` is not zero, and negative only when signed.
    For {
        var: Handle<Local>,
        start: ExprId,
        end: ExprId,
        step: Option<ExprId>,
    },
    /// `for var = init; cond; var = update { }`, the C `for (i = n; i > 0; i >>= 1)`: `init`
    /// is assigned to the loop's own local `var` on entry; `cond` is tested before each
    /// iteration; `var = update` runs after each iteration, `continue` included.
    Cond {
        var: Handle<Local>,
        init: ExprId,
        cond: ExprId,
        update: ExprId,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// Declares `local`, optionally initialised. A local without an initialiser is poison
    /// until assigned (reading it is undefined behaviour the interpreter reports).
    Let {
        local: Handle<Local>,
        init: Option<ExprId>,
    },
    Assign {
        place: Place,
        value: ExprId,
    },
    If {
        cond: ExprId,
        then_block: Block,
        else_block: Block,
    },
    Loop {
        label: Option<String>,
        kind: LoopKind,
        body: Block,
    },
    /// Leaves the innermost loop, or the loop labelled so.
    Break(Option<String>),
    /// Starts the next iteration of the innermost loop, or of the loop labelled so.
    Continue(Option<String>),
    Return(Option<ExprId>),
    /// An expression evaluated for its effect (a call, an atomic).
    Expr(ExprId),
    /// `barrier()`: every work-item of the workgroup arrives before any proceeds; orders
    /// shared and global memory accesses within the workgroup.
    Barrier,
    Fence(FenceScope),
    /// `vstore(buffer, index, value)`: the lanes of `value` to consecutive scalars of a scalar
    /// buffer starting at `index`.
    VStore {
        base: Base,
        index: ExprId,
        value: ExprId,
        align: Option<u8>,
    },
    /// `{ ... }`: a bare scope. Its statements run in order; its locals die at its end.
    Block(Block),
    /// `matrix_store(fragment, base, offset, stride)`: row-major, rows `stride` apart.
    MatrixStore {
        value: ExprId,
        base: Base,
        offset: ExprId,
        stride: ExprId,
    },
}

impl StmtKind {
    /// The expressions a `let`, an assignment or a `vstore` evaluates, in evaluation order
    /// (an element's index before the value); empty for every other statement.
    pub fn value_roots(&self) -> Vec<ExprId> {
        match self {
            StmtKind::Let { init, .. } => init.iter().copied().collect(),
            StmtKind::Assign { place, value } => match place {
                Place::Element { index, .. } => vec![*index, *value],
                _ => vec![*value],
            },
            StmtKind::VStore { index, value, .. } => vec![*index, *value],
            _ => Vec::new(),
        }
    }

    /// The nested blocks of this statement.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            StmtKind::If {
                then_block,
                else_block,
                ..
            } => vec![then_block, else_block],
            StmtKind::Loop { body, .. } => vec![body],
            StmtKind::Block(b) => vec![b],
            _ => vec![],
        }
    }
}
