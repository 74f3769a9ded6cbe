//! Source locations. Every IR node carries a [`Span`]; nodes built in Rust without a source
//! carry [`Span::UNKNOWN`] unless the front end supplies its own line and column.

use std::fmt;

/// A 1-based line and column in the source a node came from; `0:0` means unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Span {
    /// The line, from 1; 0 when unknown.
    pub line: u32,
    /// The column, from 1; 0 when unknown.
    pub col: u32,
}

impl Span {
    /// No location: `0:0`.
    pub const UNKNOWN: Span = Span { line: 0, col: 0 };

    /// The location `line:col`.
    pub const fn new(line: u32, col: u32) -> Self {
        Span { line, col }
    }

    /// Whether the span names a real location (line is not 0).
    pub const fn is_known(self) -> bool {
        self.line != 0
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}
