//! Diagnostics: every user-visible error prints `path:line:col: error[CODE]: message`.

use super::Span;
use std::fmt;

/// One problem found in a source or a module, with a stable code and a location.
/// Serialises as `{"code", "message", "span": {"line", "col"}}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// A stable code: `XPU-Pnnn` for the parser, `XPU-Vnnn` for the verifier, or one of the
    /// contract's codes (`CAJETA_ERROR_TEMPLATE_REQUIREMENT`, ...).
    pub code: &'static str,
    /// What is wrong, in one sentence.
    pub message: String,
    /// Where it is wrong.
    pub span: Span,
}

impl Diagnostic {
    /// A diagnostic `code` at `span`.
    pub fn new(code: &'static str, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            span,
        }
    }

    /// The diagnostic as `path:line:col: error[CODE]: message`.
    pub fn render(&self, path: &str) -> String {
        format!(
            "{path}:{}:{}: error[{}]: {}",
            self.span.line, self.span.col, self.code, self.message
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error[{}]: {}", self.span, self.code, self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// A non-empty list of diagnostics, in source order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Every diagnostic as [`Diagnostic::render`] gives it, one per line.
    pub fn render(&self, path: &str) -> String {
        self.0
            .iter()
            .map(|d| d.render(path))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
