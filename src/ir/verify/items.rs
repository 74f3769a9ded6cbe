//! Module-level rules: unique names, tag sets, and the call graph (no recursion among
//! device helpers).

use super::{codes, Sink};
use crate::ir::{Expr, FunctionKind, Handle, Module, Type};
use crate::ir::{Function, TagSet};
use std::collections::{HashMap, VecDeque};

pub(super) fn check(module: &Module, sink: &mut Sink) {
    unique_names(module, sink);
    tag_sets(module, sink);
    recursion(module, sink);
}

fn unique_names(module: &Module, sink: &mut Sink) {
    let mut seen: HashMap<&str, &Function> = HashMap::new();
    for (_, f) in module.functions.iter() {
        if let Some(first) = seen.get(f.name.as_str()) {
            sink.push(
                codes::DUPLICATE_NAME,
                f.span,
                format!(
                    "function `{}` is already defined (at {})",
                    f.name, first.span
                ),
            );
        } else {
            seen.insert(&f.name, f);
        }
    }
    let mut sets: HashMap<&str, &TagSet> = HashMap::new();
    for (_, t) in module.tag_sets.iter() {
        if let Some(first) = sets.get(t.name.as_str()) {
            sink.push(
                codes::DUPLICATE_NAME,
                t.span,
                format!(
                    "tag set `{}` is already defined (at {})",
                    t.name, first.span
                ),
            );
        } else {
            sets.insert(&t.name, t);
        }
    }
}

/// After instantiation: an instance's name must not collide with a function of the module.
pub(super) fn check_instance_names(module: &Module, sink: &mut Sink) {
    let mut seen: HashMap<&str, ()> = HashMap::new();
    for (_, f) in module.functions.iter() {
        if seen.insert(&f.name, ()).is_some() && f.name.contains('<') {
            sink.push(
                codes::DUPLICATE_NAME,
                f.span,
                format!("instance `{}` has the name of another function", f.name),
            );
        }
    }
}

fn tag_sets(module: &Module, sink: &mut Sink) {
    for (_, set) in module.tag_sets.iter() {
        if set.members.is_empty() {
            sink.push(
                codes::TAG_SET,
                set.span,
                format!("tag set `{}` has no members", set.name),
            );
            continue;
        }
        let mut first: Option<&Function> = None;
        for &m in &set.members {
            let Some(f) = module.functions.try_get(m) else {
                sink.push(
                    codes::HANDLE,
                    set.span,
                    format!(
                        "tag set `{}` names function {m:?}, which does not exist",
                        set.name
                    ),
                );
                continue;
            };
            if f.kind != FunctionKind::Device || f.template.is_some() {
                sink.push(
                    codes::TAG_SET,
                    set.span,
                    format!(
                        "tag set `{}` member `{}` is not a device helper",
                        set.name, f.name
                    ),
                );
                continue;
            }
            match first {
                None => first = Some(f),
                Some(g) => {
                    let same = g.ret == f.ret
                        && g.params.len() == f.params.len()
                        && g.params.iter().zip(&f.params).all(|(a, b)| a.ty == b.ty);
                    if !same {
                        sink.push(
                            codes::TAG_SET,
                            set.span,
                            format!(
                                "tag set `{}` members `{}` and `{}` have different signatures",
                                set.name, g.name, f.name
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// The helpers `f` calls directly: call targets and every member of a dispatched tag set.
fn callees(module: &Module, f: &Function) -> Vec<Handle<Function>> {
    let mut out = Vec::new();
    for (_, e) in f.exprs.iter() {
        match e {
            Expr::Call { function, .. } => out.push(*function),
            Expr::Dispatch { tag, .. } => {
                // The tag's set, from the tag expression's own type where it is simple;
                // every set the function names is a conservative superset otherwise.
                let ty = crate::ir::typeck::expr_type(module, f, *tag);
                if let Some(Type::Tag(set)) = ty {
                    if let Some(s) = module.tag_sets.try_get(set) {
                        out.extend(s.members.iter().copied());
                    }
                }
            }
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out.retain(|&h| module.functions.contains(h));
    out
}

fn recursion(module: &Module, sink: &mut Sink) {
    let graph: Vec<Vec<Handle<Function>>> = module
        .functions
        .iter()
        .map(|(_, f)| callees(module, f))
        .collect();
    for (h, f) in module.functions.iter() {
        if f.kind != FunctionKind::Device {
            continue;
        }
        // Breadth-first from f's callees back to f gives the shortest cycle through f.
        let mut parent: HashMap<Handle<Function>, Handle<Function>> = HashMap::new();
        let mut queue: VecDeque<Handle<Function>> = VecDeque::new();
        queue.push_back(h);
        let mut found = false;
        'bfs: while let Some(cur) = queue.pop_front() {
            for &next in &graph[cur.index()] {
                if next == h {
                    parent.insert(h, cur);
                    found = true;
                    break 'bfs;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(next) {
                    e.insert(cur);
                    queue.push_back(next);
                }
            }
        }
        if !found {
            continue;
        }
        let mut path = vec![h];
        let mut cur = parent[&h];
        while cur != h && path.len() <= module.functions.len() {
            path.push(cur);
            cur = parent[&cur];
        }
        path.push(h);
        path.reverse();
        let names: Vec<&str> = path
            .iter()
            .map(|&p| module.functions[p].name.as_str())
            .collect();
        sink.push(
            codes::RECURSION,
            f.span,
            format!(
                "device helper `{}` is recursive ({})",
                f.name,
                names.join(" → ")
            ),
        );
    }
}
