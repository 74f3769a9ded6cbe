//! What a launch on the interpreter can end with besides success: a refusal before running
//! (`XPU-REF01`), undefined behaviour observed while running (`XPU-REF02`), a launch whose
//! arguments or geometry do not fit the kernel, or an exhausted step budget.

use crate::ir::{Diagnostic, Span};
use std::fmt;

/// The contract's code for a construct the interpreter refuses to run.
pub const REFUSED: &str = "XPU-REF01";
/// The contract's code for undefined behaviour the interpreter observed.
pub const UB: &str = "XPU-REF02";

/// The kinds of undefined behaviour the interpreter detects. The names are those of `expect
/// ub KIND;` in run blocks (docs/text-format.md) and of docs/semantics.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UbKind {
    /// An index outside a buffer, shared array or private array, or a wave verb naming a
    /// lane that is outside the wave or inactive.
    OutOfBounds,
    /// Two work-items touch a byte, at least one writes, not both atomically, and no barrier
    /// orders them.
    DataRace,
    /// A barrier (or a cooperative-matrix verb, which is a wave barrier) not reached by every
    /// work-item that must reach it, or reached at different barriers.
    BarrierDivergence,
    /// A read of memory or a local nothing wrote.
    UninitRead,
    /// An `align = N` promise broken by the index.
    Misaligned,
    /// Integer division or remainder by zero.
    DivByZero,
    /// An operand that must be the same in every active lane of a wave (a broadcast lane, a
    /// cooperative-matrix operand) differs between lanes.
    NonUniform,
}

impl UbKind {
    /// Every kind, in declaration order.
    pub const ALL: [UbKind; 7] = [
        UbKind::OutOfBounds,
        UbKind::DataRace,
        UbKind::BarrierDivergence,
        UbKind::UninitRead,
        UbKind::Misaligned,
        UbKind::DivByZero,
        UbKind::NonUniform,
    ];

    /// The name used by `expect ub KIND;`.
    pub const fn name(self) -> &'static str {
        match self {
            UbKind::OutOfBounds => "out_of_bounds",
            UbKind::DataRace => "data_race",
            UbKind::BarrierDivergence => "barrier_divergence",
            UbKind::UninitRead => "uninit_read",
            UbKind::Misaligned => "misaligned",
            UbKind::DivByZero => "div_by_zero",
            UbKind::NonUniform => "non_uniform",
        }
    }

    /// The kind named `name` (as `expect ub NAME` writes it), if any.
    pub fn from_name(name: &str) -> Option<UbKind> {
        UbKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for UbKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One work-item of a launch, by its coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// The workgroup's coordinates in the grid.
    pub group: [u32; 3],
    /// The work-item's coordinates in its workgroup.
    pub local: [u32; 3],
    /// `group * block + local`, per dimension.
    pub global: [u32; 3],
}

impl fmt::Display for WorkItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.global;
        let [wx, wy, wz] = self.group;
        let [lx, ly, lz] = self.local;
        write!(
            f,
            "work-item global ({gx}, {gy}, {gz}) = group ({wx}, {wy}, {wz}) local ({lx}, {ly}, {lz})"
        )
    }
}

/// Undefined behaviour observed while running (`XPU-REF02`). A launch stops at the first;
/// buffers keep what was written before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UbReport {
    /// What kind of undefined behaviour it was.
    pub kind: UbKind,
    /// The launched kernel.
    pub kernel: String,
    /// The function the offending statement or expression is in (the kernel or a helper).
    pub function: String,
    /// The statement's or expression's location.
    pub span: Span,
    /// The work-item that did it.
    pub item: WorkItem,
    /// What happened, in words (the buffer and index, the other work-item of a race, ...).
    pub detail: String,
    /// Work-item steps executed before the launch stopped.
    pub steps: u64,
}

impl UbReport {
    /// As a diagnostic with code `XPU-REF02`, located at the span.
    pub fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::new(UB, self.span, self.message())
    }

    fn message(&self) -> String {
        let place = if self.function == self.kernel {
            format!("kernel `{}`", self.kernel)
        } else {
            format!("`{}` called from kernel `{}`", self.function, self.kernel)
        };
        format!(
            "undefined behaviour ({}) in {place}, {}: {}",
            self.kind, self.item, self.detail
        )
    }
}

impl fmt::Display for UbReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error[{UB}]: {}", self.span, self.message())
    }
}

/// Why a launch on the interpreter did not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    /// A construct the interpreter gives no meaning to, refused before anything ran
    /// (`XPU-REF01`, naming the construct).
    #[error("{0}")]
    Refused(Diagnostic),
    /// Undefined behaviour observed (`XPU-REF02`).
    #[error("{0}")]
    Ub(Box<UbReport>),
    /// The kernel, arguments or geometry of the launch do not fit (no such kernel, a missing
    /// argument, a buffer whose size is not a whole number of elements, ...).
    #[error("launch refused: {0}")]
    BadLaunch(String),
    /// Memory the launch needs that the interpreter does not hold: `space` is `shared`
    /// (a workgroup's shared arrays), `private` (a workgroup's frames) or `race` (the race
    /// shadow of writable buffers, 24 bytes per byte), refused before anything ran.
    #[error("launch refused: {space} memory of {need} bytes: {limit}")]
    Memory {
        /// `shared`, `private` or `race`.
        space: &'static str,
        /// Bytes the launch needs.
        need: u64,
        /// The limit it passes, and how to raise it.
        limit: String,
    },
    /// The step budget (`Options::max_steps`) ran out: the launch may not terminate.
    #[error("step budget of {limit} work-item steps exhausted in kernel `{kernel}`")]
    StepLimit {
        /// The launched kernel.
        kernel: String,
        /// The budget, in work-item steps.
        limit: u64,
    },
    /// The launch's cancellation flag was set (`Options::cancel`: its deadline passed).
    #[error("kernel `{kernel}` cancelled: its deadline passed")]
    Cancelled {
        /// The launched kernel.
        kernel: String,
    },
}

impl InterpError {
    pub(crate) fn refused(span: Span, message: impl Into<String>) -> Self {
        InterpError::Refused(Diagnostic::new(REFUSED, span, message))
    }

    /// The UB report, if this is one.
    pub fn ub(&self) -> Option<&UbReport> {
        match self {
            InterpError::Ub(u) => Some(u),
            _ => None,
        }
    }
}
