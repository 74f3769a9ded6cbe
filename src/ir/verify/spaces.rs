//! Address spaces and layouts (contract §2.2; issue 23 item 8): what a constant buffer
//! (`buf<E, const>`) and a laid-out shared array (`swizzled<...>`, `block_padded<...>`) may
//! be used for. Writes to a constant buffer are refused where every write is checked
//! (`typeck` and `body`, `XPU-V160`); this module checks the rest.

use super::{codes, Sink};
use crate::ir::layout::{is_pure, shape_error};
use crate::ir::{Access, Base, Block, Expr, Function, Place, Span, StmtKind, Type};

/// Whether `base` is a constant buffer parameter of `f`.
pub(crate) fn is_constant(f: &Function, base: Base) -> bool {
    match base {
        Base::Param(i) => matches!(
            f.params.get(i as usize).map(|p| p.ty),
            Some(Type::Buffer {
                access: Access::Constant,
                ..
            })
        ),
        _ => false,
    }
}

fn laid_out(f: &Function, base: Base) -> bool {
    matches!(base, Base::Shared(h) if f.layout_of(h).is_some())
}

fn name(f: &Function, base: Base) -> String {
    crate::ir::typeck::base_name(f, base)
}

pub(super) fn check(f: &Function, sink: &mut Sink) {
    for &(h, layout) in &f.layouts {
        if let Some(why) = shape_error(f, h, layout) {
            let span = f.shared.try_get(h).map_or(Span::UNKNOWN, |d| d.span);
            sink.at(f, codes::LAYOUT_SHAPE, span, why);
        }
    }
    for (e, expr) in f.exprs.iter() {
        let span = f.expr_span(e);
        match expr {
            Expr::AtomicLoad {
                place: Place::Element { base, .. },
                ..
            } if is_constant(f, *base) => sink.at(
                f,
                codes::CONSTANT_ACCESS,
                span,
                format!(
                    "`atomic_load` of constant buffer `{}`: constant data is read with plain loads",
                    name(f, *base)
                ),
            ),
            Expr::MatrixLoad { base, .. } if is_constant(f, *base) => sink.at(
                f,
                codes::CONSTANT_ACCESS,
                span,
                format!(
                    "`matrix_load` from constant buffer `{}`: fragments load from `buf<_>` or shared memory",
                    name(f, *base)
                ),
            ),
            Expr::MatrixLoad { base, .. } if laid_out(f, *base) => {
                sink.at(f, codes::LAYOUT_ACCESS, span, contiguous(f, *base))
            }
            Expr::Index { base, index }
            | Expr::Atomic {
                place: Place::Element { base, index },
                ..
            }
            | Expr::AtomicLoad {
                place: Place::Element { base, index },
                ..
            }
            | Expr::AtomicStore {
                place: Place::Element { base, index },
                ..
            } if laid_out(f, *base) && !is_pure(f, *index) => {
                sink.at(f, codes::LAYOUT_INDEX, span, impure(f, *base))
            }
            _ => {}
        }
    }
    stmts(f, &f.body, sink);
}

fn contiguous(f: &Function, base: Base) -> String {
    format!(
        "a fragment access to `{}`, whose layout does not keep elements contiguous; read and write it element by element",
        name(f, base)
    )
}

fn impure(f: &Function, base: Base) -> String {
    format!(
        "an index into laid-out `{}` with a call or an atomic in it (the layout evaluates the index more than once): compute it into a `let` first",
        name(f, base)
    )
}

fn stmts(f: &Function, b: &Block, sink: &mut Sink) {
    for s in b {
        match &s.kind {
            StmtKind::MatrixStore { base, .. } if laid_out(f, *base) => {
                sink.at(f, codes::LAYOUT_ACCESS, s.span, contiguous(f, *base))
            }
            StmtKind::Assign {
                place: Place::Element { base, index },
                ..
            } if laid_out(f, *base) && !is_pure(f, *index) => {
                sink.at(f, codes::LAYOUT_INDEX, s.span, impure(f, *base))
            }
            _ => {}
        }
        for inner in s.kind.blocks() {
            stmts(f, inner, sink);
        }
    }
}
