//! The verifier: the only way to make a [`VerifiedModule`](crate::ir::VerifiedModule).
//! It collects every problem in a module as a [`Diagnostic`](crate::ir::Diagnostic) with a
//! stable code (listed in [`codes`] and `docs/verifier.md`).

pub mod codes;
