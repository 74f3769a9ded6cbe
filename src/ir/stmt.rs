//! Statements: structured control flow only (DESIGN.md, Decisions 1). Blocks nest directly;
//! expressions are referenced by handle into the owning function's expression arena.

use super::{Base, ExprId, Handle, Local, Place, Span};

/// A sequence of statements.
pub type Block = Vec<Stmt>;

#[derive(Clone, Debug, PartialEq)]
/// A statement and where it came from.
pub struct Stmt {
    /// What the statement does.
    pub kind: StmtKind,
    /// Its source location.
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
    /// The scope's name in the text format: `workgroup` or `device`.
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
        /// The loop's integer local.
        var: Handle<Local>,
        /// The first value of `var`.
        start: ExprId,
        /// The bound `var` runs up to (exclusive).
        end: ExprId,
        /// The increment; `None` is 1.
        step: Option<ExprId>,
    },
    /// `for var = init; cond; var = update { }`, the C `for (i = n; i > 0; i >>= 1)`: `init`
    /// is assigned to the loop's own local `var` on entry; `cond` is tested before each
    /// iteration; `var = update` runs after each iteration, `continue` included.
    Cond {
        /// The loop's own local.
        var: Handle<Local>,
        /// The value assigned to `var` on entry.
        init: ExprId,
        /// The `bool` tested before each iteration.
        cond: ExprId,
        /// The value assigned to `var` after each iteration.
        update: ExprId,
    },
}

#[derive(Clone, Debug, PartialEq)]
/// What a statement does.
pub enum StmtKind {
    /// Declares `local`, optionally initialised. A local without an initialiser is poison
    /// until assigned (reading it is undefined behaviour the interpreter reports).
    Let {
        /// The local declared.
        local: Handle<Local>,
        /// Its initial value, if any.
        init: Option<ExprId>,
    },
    /// `place = value`.
    Assign {
        /// The local, lane or element written.
        place: Place,
        /// The value stored.
        value: ExprId,
    },
    /// `if cond { then } else { else }`.
    If {
        /// The `bool` condition.
        cond: ExprId,
        /// Runs when `cond` is true.
        then_block: Block,
        /// Runs when `cond` is false (empty without `else`).
        else_block: Block,
    },
    /// A loop.
    Loop {
        /// The label `break` and `continue` may name.
        label: Option<String>,
        /// How the loop iterates.
        kind: LoopKind,
        /// The statements run each iteration.
        body: Block,
    },
    /// Leaves the innermost loop, or the loop labelled so.
    Break(Option<String>),
    /// Starts the next iteration of the innermost loop, or of the loop labelled so.
    Continue(Option<String>),
    /// Leaves the function, with the helper's return value if it has one.
    Return(Option<ExprId>),
    /// An expression evaluated for its effect (a call, an atomic).
    Expr(ExprId),
    /// `barrier()`: every work-item of the workgroup arrives before any proceeds; orders
    /// shared and global memory accesses within the workgroup.
    Barrier,
    /// `wave_barrier()` (CUDA's `__syncwarp()`): the active lanes of the work-item's wave
    /// arrive before any proceeds; orders their shared and global memory accesses
    /// (docs/semantics.md, "Wave barrier").
    WaveBarrier,
    /// `fence(scope)`: orders the work-item's memory accesses of `scope` without a rendezvous.
    Fence(FenceScope),
    /// `vstore(buffer, index, value)`: the lanes of `value` to consecutive scalars of a scalar
    /// buffer starting at `index`.
    VStore {
        /// The scalar buffer written (a buffer parameter).
        base: Base,
        /// The first scalar's index (`u32`).
        index: ExprId,
        /// The vector stored.
        value: ExprId,
        /// The promised alignment in bytes, if any.
        align: Option<u8>,
    },
    /// `{ ... }`: a bare scope. Its statements run in order; its locals die at its end.
    Block(Block),
    /// `matrix_store(fragment, base, offset, stride)`: row-major, rows `stride` apart.
    MatrixStore {
        /// The fragment stored.
        value: ExprId,
        /// The buffer or shared array written.
        base: Base,
        /// The element index of the first element (`u32`).
        offset: ExprId,
        /// Elements between the starts of two rows (`u32`).
        stride: ExprId,
    },
    /// `print("fmt {}", values...)`: one line of text, each `{}` replaced by the next value
    /// (scalars only; `{{` and `}}` are literal braces). Tagged with the kernel, the work-item
    /// and the source line; dropped before lowering when `ProgramOptions::print` is off.
    Print {
        /// The format, its `{}` one per value.
        format: String,
        /// The values, scalars.
        args: Vec<ExprId>,
    },
    /// `assert(cond, "message")`: a work-item where `cond` is false records a failure and
    /// goes on; the launch then fails with `XPU-L035` naming the first failure
    /// (docs/semantics.md, "Print and assert").
    Assert {
        /// The condition, a `bool`.
        cond: ExprId,
        /// What the failure says.
        message: String,
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
            StmtKind::Print { args, .. } => args.clone(),
            StmtKind::Assert { cond, .. } => vec![*cond],
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
