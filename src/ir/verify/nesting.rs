//! How deeply a function nests: blocks inside blocks, operands inside expressions, and, with
//! its helper calls inlined, both through every callee. Every backend (and the verifier's own
//! statement walk) lowers these recursively, so each depth is bounded before anything
//! recursive runs ([`codes::NESTING`], [`codes::CALL_DEPTH`]). Computed iteratively: a deep
//! input must not overflow the stack of the code that measures it.

use super::{codes, Sink};
use crate::ir::{Block, Expr, ExprId, Function, Handle, Module, Type};

/// The deepest nesting a function may have in itself: blocks (the body is 1) plus the operands
/// of the expression tree inside the innermost (twice the text parser's limit of 128, so that
/// only a module built in Rust can reach it).
pub const MAX_NESTING: u32 = 256;

/// What [`measure`] finds in one function.
pub(crate) struct Nesting {
    /// The deepest block (the body is 1) plus the deepest expression in it.
    pub depth: u32,
    /// Each call site: the helpers it may call (a dispatch: every member of its tag set) and
    /// the nesting at the call (block depth plus expression depth, the call itself included).
    pub sites: Vec<(Vec<Handle<Function>>, u32)>,
}

/// Measures `f`'s nesting and its call sites, iteratively. Each expression is visited once
/// (a shared or cyclic operand, which other rules refuse, is not followed twice).
pub(crate) fn measure(module: &Module, f: &Function) -> Nesting {
    let mut seen = vec![false; f.exprs.len()];
    let mut depth = 0u32;
    let mut sites = Vec::new();
    let mut blocks: Vec<(&Block, u32)> = vec![(&f.body, 1)];
    let mut exprs: Vec<(ExprId, u32)> = Vec::new();
    let mut rs = Vec::new();
    while let Some((block, bd)) = blocks.pop() {
        depth = depth.max(bd);
        for s in block {
            for b in s.kind.blocks() {
                blocks.push((b, bd.saturating_add(1)));
            }
            rs.clear();
            super::body::stmt_roots(s, &mut rs);
            exprs.extend(rs.iter().map(|&e| (e, bd.saturating_add(1))));
            while let Some((e, d)) = exprs.pop() {
                let Some(slot) = seen.get_mut(e.index()) else {
                    continue;
                };
                if *slot {
                    continue;
                }
                *slot = true;
                depth = depth.max(d);
                let Some(x) = f.exprs.try_get(e) else {
                    continue;
                };
                match x {
                    Expr::Call { function, .. } => sites.push((vec![*function], d)),
                    Expr::Dispatch { tag, .. } => {
                        if let Some(Type::Tag(set)) = crate::ir::typeck::expr_type(module, f, *tag)
                        {
                            if let Some(s) = module.tag_sets.try_get(set) {
                                sites.push((s.members.clone(), d));
                            }
                        }
                    }
                    _ => {}
                }
                x.for_each_operand(|op| exprs.push((op, d.saturating_add(1))));
            }
        }
    }
    Nesting { depth, sites }
}

/// Refuses a function nested deeper than [`MAX_NESTING`] in itself; `false` when it is (its
/// statements must then not be walked recursively).
pub(crate) fn check_local(f: &Function, n: &Nesting, sink: &mut Sink) -> bool {
    if n.depth > MAX_NESTING {
        sink.at(
            f,
            codes::NESTING,
            f.span,
            format!(
                "`{}` nests blocks and expressions {} levels deep, more than the limit of {}",
                f.name, n.depth, MAX_NESTING
            ),
        );
        return false;
    }
    true
}
