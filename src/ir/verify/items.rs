//! Module-level rules: unique names, tag sets, and the call graph (no recursion among
//! device helpers).

use super::{codes, Sink};
use crate::ir::{Expr, FunctionKind, Handle, Module, Type};
use crate::ir::{Function, TagSet};
use std::collections::{HashMap, VecDeque};

pub(super) fn check(module: &Module, sink: &mut Sink) {
    unique_names(module, sink);
    tag_sets(module, sink);
    let graph = call_graph(module);
    let comps = components(&graph);
    recursion(module, &graph, &comps, sink);
}

/// The call-chain limits ([`MAX_CALL_DEPTH`], [`MAX_INLINED_SIZE`]), checked once the
/// templates' instances are in the module.
pub(super) fn check_call_limits(module: &Module, sink: &mut Sink) {
    let graph = call_graph(module);
    let comps = components(&graph);
    let costs = call_costs(module, &graph, &comps);
    call_limits(module, &graph, &costs, sink);
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
            if let Some(p) = f.params.iter().find(|p| p.ty.is_memory()) {
                sink.push(
                    codes::MEMORY_TAG,
                    p.span,
                    format!(
                        "tag set `{}` member `{}` takes `{}` by reference; tags dispatch to \
                         helpers that take values only (call it directly)",
                        set.name, f.name, p.name
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

/// The call graph: per function (by handle index), the helpers it calls directly.
fn call_graph(module: &Module) -> Vec<Vec<Handle<Function>>> {
    module
        .functions
        .iter()
        .map(|(_, f)| callees(module, f))
        .collect()
}

/// The strongly connected components of `graph`, each a list of node indices, callees'
/// components before their callers' (Tarjan's algorithm, iterative: a deep call chain must
/// not overflow the verifier's own stack).
fn components(graph: &[Vec<Handle<Function>>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = graph.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut next = 0usize;
    // (node, position in its edge list)
    let mut work: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        work.push((root, 0));
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if let Some(w) = graph[v].get(*pos).map(|h| h.index()) {
                *pos += 1;
                if w >= n {
                    continue;
                }
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("on the stack");
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

/// How many members of one cycle get the shortest cycle through them spelled out; the rest
/// of a larger cycle are named with its size (a search per member is quadratic in it).
const CYCLES_SPELLED: usize = 64;

fn recursion(
    module: &Module,
    graph: &[Vec<Handle<Function>>],
    comps: &[Vec<usize>],
    sink: &mut Sink,
) {
    let handles: Vec<Handle<Function>> = module.functions.iter().map(|(h, _)| h).collect();
    let mut comp_of = vec![usize::MAX; graph.len()];
    for (c, members) in comps.iter().enumerate() {
        for &m in members {
            comp_of[m] = c;
        }
    }
    for (c, members) in comps.iter().enumerate() {
        let cyclic = members.len() > 1 || graph[members[0]].iter().any(|h| h.index() == members[0]);
        if !cyclic {
            continue;
        }
        let mut members = members.clone();
        members.sort_unstable();
        for (k, &m) in members.iter().enumerate() {
            let h = handles[m];
            let f = &module.functions[h];
            if f.kind != FunctionKind::Device {
                continue;
            }
            if k >= CYCLES_SPELLED {
                sink.push(
                    codes::RECURSION,
                    f.span,
                    format!(
                        "device helper `{}` is recursive (one of {} helpers that call each other)",
                        f.name,
                        members.len()
                    ),
                );
                continue;
            }
            // Breadth-first from f's callees back to f, inside its component, gives the
            // shortest cycle through f.
            let mut parent: HashMap<Handle<Function>, Handle<Function>> = HashMap::new();
            let mut queue: VecDeque<Handle<Function>> = VecDeque::new();
            queue.push_back(h);
            let mut found = false;
            'bfs: while let Some(cur) = queue.pop_front() {
                for &next in &graph[cur.index()] {
                    if comp_of.get(next.index()) != Some(&c) {
                        continue;
                    }
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
}

/// The deepest nesting a function may reach with its helper calls inlined: the nesting at
/// each call site plus the callee's own, down the deepest chain. Deeper ones are refused
/// ([`codes::CALL_DEPTH`]), so that no backend's inlining, nor the interpreter's frames, needs
/// stack in proportion to the input (a chain of 4,000 helpers overflowed the SPIR-V
/// emitter's). A helper chain whose calls sit in a `return h(x) + 1;` costs 3 levels a link.
pub const MAX_CALL_DEPTH: u32 = 1024;

/// The most expression nodes a function may hold once every helper call is inlined
/// (counted per call site, so a helper called twice counts twice, and a dispatch counts every
/// member of its set): larger ones are refused ([`codes::INLINED_SIZE`]), since helpers that
/// each call the previous one twice double the inlined code at every level. Every backend
/// inlines helpers into one function, and the CPU's code generator (Cranelift's register
/// allocator) is super-linear in its size: about 7,200 expressions compile in 1.6 s, 28,700
/// took over 100 s on this machine. The largest shipped kernel is far below the limit.
pub const MAX_INLINED_SIZE: u64 = 1 << 14;

/// Per function (by handle index): its nesting with helpers inlined and its inlined size,
/// computed once, bottom-up over the call graph's components with saturating arithmetic.
/// Functions in a cycle (refused by [`recursion`]) count their cycle once.
struct CallCosts {
    depth: Vec<u32>,
    size: Vec<u64>,
}

fn call_costs(module: &Module, graph: &[Vec<Handle<Function>>], comps: &[Vec<usize>]) -> CallCosts {
    let n = graph.len();
    let mut depth = vec![0u32; n];
    let mut size = vec![0u64; n];
    let fs: Vec<&Function> = module.functions.iter().map(|(_, f)| f).collect();
    let mut comp_of = vec![usize::MAX; n];
    for (c, members) in comps.iter().enumerate() {
        for &m in members {
            comp_of[m] = c;
        }
    }
    // Components come callees first: every callee outside a function's component is done.
    for (c, members) in comps.iter().enumerate() {
        for &m in members {
            let f = fs[m];
            let nest = super::nesting::measure(module, f);
            let mut d = nest.depth;
            let mut sz = f.exprs.len() as u64 + 1;
            for (targets, at) in &nest.sites {
                for t in targets {
                    let t = t.index();
                    if t >= n || comp_of[t] == c {
                        continue;
                    }
                    d = d.max(at.saturating_add(depth[t]));
                    sz = sz.saturating_add(size[t]);
                }
            }
            depth[m] = d;
            size[m] = sz;
        }
    }
    CallCosts { depth, size }
}

/// Refuses functions whose call chains are too deep or whose inlined size is too large.
/// Only the functions no other function calls are reported (kernels, and helpers nothing
/// calls), so that one long chain is one diagnostic, not one per link.
fn call_limits(
    module: &Module,
    graph: &[Vec<Handle<Function>>],
    costs: &CallCosts,
    sink: &mut Sink,
) {
    let mut called = vec![false; graph.len()];
    for (i, callees) in graph.iter().enumerate() {
        for h in callees {
            if h.index() != i && h.index() < called.len() {
                called[h.index()] = true;
            }
        }
    }
    for (i, (_, f)) in module.functions.iter().enumerate() {
        if called[i] {
            continue;
        }
        report_limits(f, costs.depth[i], costs.size[i], sink);
    }
}

/// The limit rules for one function, given its depth and inlined size.
fn report_limits(f: &Function, depth: u32, size: u64, sink: &mut Sink) {
    if depth > MAX_CALL_DEPTH {
        sink.push(
            codes::CALL_DEPTH,
            f.span,
            format!(
                "`{}` nests {depth} levels deep with its helper calls inlined, more than the limit of {MAX_CALL_DEPTH}",
                f.name
            ),
        );
    }
    if size > MAX_INLINED_SIZE {
        let shown = if size == u64::MAX {
            "more than 2^64".to_string()
        } else {
            size.to_string()
        };
        sink.push(
            codes::INLINED_SIZE,
            f.span,
            format!(
                "`{}` is {shown} expressions with its helper calls inlined, more than the limit of {MAX_INLINED_SIZE}",
                f.name
            ),
        );
    }
}
