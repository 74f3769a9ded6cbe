//! The typed kernel IR (DESIGN.md, Decisions 1–4): the data model, the builder a front end
//! uses, the text format, and the verifier that alone makes a [`VerifiedModule`].
//!
//! A [`Module`] holds [`Function`]s (kernels, device helpers, kernel templates) and
//! [`TagSet`]s. Each function owns arenas of locals, shared arrays, constant expressions and
//! expressions; statements nest as [`Block`]s. Every node carries a [`Span`].

pub mod analysis;
mod arena;
mod bits;
pub mod builder;
pub mod coarsen;
pub mod debug;
mod diag;
mod expr;
pub mod family;
mod function;
pub mod inline;
pub mod layout;
mod module;
mod span;
mod stmt;
pub mod struct_layout;
pub mod template;
pub mod text;
pub mod typeck;
mod types;
pub mod verify;

pub use analysis::FunctionInfo;
pub use arena::{Arena, Handle};
pub use bits::BitOp;
pub use diag::{Diagnostic, Diagnostics};
pub use expr::*;
pub use function::*;
pub use module::*;
pub use span::Span;
pub use stmt::*;
pub use struct_layout::StructLayout;
pub use text::{parse, parse_file, print, print_file};
pub use types::*;
pub use verify::{verify, VerifiedModule};
