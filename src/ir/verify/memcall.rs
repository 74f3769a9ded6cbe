//! Helpers that take memory (issue 23 item 4): where a call of one may stand, and where a
//! reference to memory ([`Expr::Ref`]) may.
//!
//! A call of a helper with a buffer, shared-array or private-array parameter is inlined by
//! the verifier ([`crate::ir::inline`]), so it stands where its body can run as statements
//! in its place: as a statement of its own, as the whole value of a `let` or an assignment,
//! or as the whole value of a `return` (`XPU-V132` elsewhere). A reference is only an
//! argument of a call, for a parameter of a memory type (`XPU-V134` elsewhere; the call's
//! own rule checks the kind, element type, length and access, `XPU-V130`/`XPU-V131`).

use super::{codes, Sink};
use crate::ir::{Block, Expr, ExprId, Function, Module, StmtKind};
use std::collections::HashSet;

/// Whether `f` takes memory by reference (a helper whose calls are inlined).
pub fn takes_memory(f: &Function) -> bool {
    f.params.iter().any(|p| p.ty.is_memory()) && !f.is_kernel()
}

pub(super) fn check(module: &Module, f: &Function, sink: &mut Sink) {
    let mut roots = HashSet::new();
    statement_roots(&f.body, &mut roots);
    // The expressions that are a call's argument for a memory parameter.
    let mut ref_args = HashSet::new();
    for (e, x) in f.exprs.iter() {
        match x {
            Expr::Call { function, args } => {
                let Some(callee) = module.functions.try_get(*function) else {
                    continue;
                };
                for (p, &a) in callee.params.iter().zip(args) {
                    if p.ty.is_memory() {
                        ref_args.insert(a);
                    }
                }
                if takes_memory(callee) && !roots.contains(&e) {
                    sink.at(
                        f,
                        codes::MEMORY_CALL_SITE,
                        f.expr_span(e),
                        format!(
                            "`{}` takes memory by reference, so a call of it stands as a \
                             statement, or as the whole value of a `let`, an assignment or a \
                             `return` (give its result a local first)",
                            callee.name
                        ),
                    );
                }
            }
            _ => continue,
        }
    }
    for (e, x) in f.exprs.iter() {
        if let Expr::Ref(_) = x {
            if !ref_args.contains(&e) {
                sink.at(
                    f,
                    codes::MEMORY_REF,
                    f.expr_span(e),
                    "a buffer or array by reference is only an argument of a helper call, \
                     for a parameter of that memory type",
                );
            }
        }
    }
}

/// The expressions that are a whole statement, `let` value, assigned value or returned
/// value: where a call of a helper that takes memory may stand.
fn statement_roots(b: &Block, out: &mut HashSet<ExprId>) {
    for s in b {
        match &s.kind {
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) => {
                out.insert(*e);
            }
            StmtKind::Let { init: Some(e), .. } => {
                out.insert(*e);
            }
            StmtKind::Assign { value, .. } => {
                out.insert(*value);
            }
            _ => {}
        }
        for inner in s.kind.blocks() {
            statement_roots(inner, out);
        }
    }
}
