//! Why a lowering made no code: one error type for the CPU, LLVM and SPIR-V lowerings.
//!
//! Every lowering refuses by name what it cannot lower and never miscompiles it; the refusal
//! carries a code (the families below), the function it was lowering (the kernel, or the
//! helper it called), the source position where one is known, and the reason in words. The
//! backends wrap it, typed, as the source of [`LaunchError::NoCode`](crate::hal::LaunchError).

use crate::ir::{Diagnostic, Span};
use std::fmt;

/// The codes of lowering refusals.
pub mod codes {
    /// A construct this target does not lower (refused by name, never miscompiled).
    pub const UNSUPPORTED: &str = "XPU-L01";
    /// The code generator (LLVM, Cranelift) rejected the code or failed to emit it: a bug in
    /// the lowering.
    pub const INTERNAL: &str = "XPU-L02";
    /// `@wave(N)` with a width this target cannot build.
    pub const WAVE: &str = "XPU-L03";
    /// Input the lowering cannot use: an unverified module, a missing kernel, a template
    /// without arguments.
    pub const INPUT: &str = "XPU-L04";
    /// `CAJETA_GPU_MATRIX_IMPL=native` for a kernel whose fragments have no native lowering
    /// on this target (contract §3.3).
    pub const MATRIX_TIER: &str = "XPU-N03";
    /// A wave's private state (private arrays, fragments, spills) past what the code can
    /// address: the launch is refused as too much private memory.
    pub const PRIVATE_MEMORY: &str = "XPU-L017";
}

/// Why a kernel did not lower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The error's code (see [`codes`]).
    pub code: &'static str,
    /// The function being lowered: the kernel, or the helper it called (empty before the
    /// lowering reached one).
    pub kernel: String,
    /// Where in the source, [`Span::UNKNOWN`] when the lowering does not know.
    pub span: Span,
    /// The reason, in words.
    pub message: String,
    /// For [`codes::PRIVATE_MEMORY`]: the bytes of private state the kernel needs and the
    /// most the code addresses.
    pub private: Option<(u64, u64)>,
}

impl Error {
    /// A refusal `code` with `message`, not yet placed in a function or the source.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Error {
            code,
            kernel: String::new(),
            span: Span::UNKNOWN,
            message: message.into(),
            private: None,
        }
    }

    /// A construct the target does not lower ([`codes::UNSUPPORTED`]).
    pub fn unsupported(message: impl Into<String>) -> Self {
        Error::new(codes::UNSUPPORTED, message)
    }

    /// A code-generator failure ([`codes::INTERNAL`]).
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(codes::INTERNAL, message)
    }

    /// The error placed in `function`, unless it already names one (the innermost helper
    /// wins).
    pub fn in_function(mut self, function: &str) -> Self {
        if self.kernel.is_empty() {
            self.kernel = function.to_string();
        }
        self
    }

    /// The error placed at `span`, unless it already has a position.
    pub fn at(mut self, span: Span) -> Self {
        if self.span == Span::UNKNOWN {
            self.span = span;
        }
        self
    }

    /// The error as a diagnostic: `line:col: error[CODE]: in `f`: message`.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let message = if self.kernel.is_empty() {
            self.message.clone()
        } else {
            format!("in `{}`: {}", self.kernel, self.message)
        };
        Diagnostic::new(self.code, self.span, message)
    }

    /// The reason alone, with the helper it was in where that is not `kernel` (for a line
    /// that names the kernel, its position and the code already).
    pub fn reason_in(&self, kernel: &str) -> String {
        if self.kernel.is_empty() || self.kernel == kernel {
            self.message.clone()
        } else {
            format!("in `{}`: {}", self.kernel, self.message)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_diagnostic())
    }
}

impl std::error::Error for Error {}

/// A lowering's result.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_function_and_the_first_position_win() {
        let e = Error::unsupported("f16 atomics")
            .at(Span::new(3, 7))
            .in_function("helper")
            .in_function("kernel")
            .at(Span::new(9, 1));
        assert_eq!(e.kernel, "helper");
        assert_eq!(e.span, Span::new(3, 7));
        assert_eq!(
            e.to_string(),
            "3:7: error[XPU-L01]: in `helper`: f16 atomics"
        );
        assert_eq!(e.reason_in("kernel"), "in `helper`: f16 atomics");
        assert_eq!(e.reason_in("helper"), "f16 atomics");
    }
}
