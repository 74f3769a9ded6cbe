//! A function's declarations: parameter, return, local and shared types; attributes; and
//! the constant expressions they use (array lengths, attribute arguments, `requires`).

use super::{codes, Sink};
use crate::ir::template::{self, ConstError};
use crate::ir::typeck::type_name;
use crate::ir::{
    ConstExpr, ElemType, Function, FunctionKind, Handle, Len, Module, Span, Type, VECTOR_LANES,
};

/// The backends `@unlowered` may name.
pub const BACKENDS: [&str; 4] = ["cpu", "cuda", "hip", "vulkan"];

/// Where a declared type appears, which decides what it may be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Site {
    KernelParam,
    HelperParam,
    Return,
    Local,
}

pub(super) fn check(module: &Module, f: &Function, sink: &mut Sink) {
    super::spaces::check(f, sink);
    let is_kernel = f.kind == FunctionKind::Kernel;
    for p in &f.params {
        let site = if is_kernel {
            Site::KernelParam
        } else {
            Site::HelperParam
        };
        decl_type(
            module,
            f,
            p.ty,
            site,
            &format!("parameter `{}`", p.name),
            p.span,
            sink,
        );
    }
    if let Some(ret) = f.ret {
        if is_kernel {
            sink.at(
                f,
                codes::KERNEL_RETURN,
                f.span,
                format!(
                    "kernel `{}` returns {}; kernels return nothing",
                    f.name,
                    type_name(module, ret)
                ),
            );
        } else {
            decl_type(
                module,
                f,
                ret,
                Site::Return,
                "the return type",
                f.span,
                sink,
            );
        }
    }
    for (_, l) in f.locals.iter() {
        decl_type(
            module,
            f,
            l.ty,
            Site::Local,
            &format!("local `{}`", l.name),
            l.span,
            sink,
        );
    }
    shared(f, sink);
    attributes(f, sink);
    template_clauses(f, sink);
}

fn decl_type(
    module: &Module,
    f: &Function,
    ty: Type,
    site: Site,
    what: &str,
    span: Span,
    sink: &mut Sink,
) {
    let allowed = match ty {
        Type::Scalar(_) | Type::Vector(..) => true,
        // Helpers take memory by reference (issue 23 item 4).
        Type::Buffer { .. } => matches!(site, Site::KernelParam | Site::HelperParam),
        Type::Array { .. } => matches!(site, Site::Local | Site::HelperParam),
        Type::Shared { .. } => site == Site::HelperParam,
        Type::Matrix { .. } => site != Site::KernelParam,
        Type::Tag(set) => {
            if !module.tag_sets.contains(set) {
                sink.at(
                    f,
                    codes::HANDLE,
                    span,
                    format!("{what} names tag set {set:?}, which does not exist"),
                );
                return;
            }
            true
        }
    };
    if !allowed {
        let rule = match ty {
            Type::Buffer { .. } => "buffers are kernel and helper parameters only",
            Type::Array { .. } => "private arrays are locals and helper parameters only",
            Type::Shared { .. } => {
                "shared arrays by reference are helper parameters only (a kernel declares its own)"
            }
            _ => "fragments are not kernel parameters",
        };
        sink.at(
            f,
            codes::DECL_TYPE,
            span,
            format!("{what} has type {}; {rule}", type_name(module, ty)),
        );
        return;
    }
    match ty {
        Type::Vector(s, n) => {
            elem_ok(f, ElemType::vector(s, n), what, span, sink);
        }
        Type::Buffer { elem, .. } => {
            elem_ok(f, elem, what, span, sink);
        }
        Type::Array { elem, len } if elem_ok(f, elem, what, span, sink) => {
            length(f, len, what, span, sink);
        }
        Type::Shared { elem, len } => {
            let elem_fine = elem_ok(f, elem, what, span, sink);
            if let (true, Some(len)) = (elem_fine, len) {
                length(f, len, what, span, sink);
            }
        }
        Type::Matrix { rows, cols, .. } if rows == 0 || cols == 0 => {
            sink.at(
                f,
                codes::MATRIX,
                span,
                format!("{what} is a {rows}×{cols} fragment"),
            );
        }
        _ => {}
    }
}

/// An array length: positive; a constant expression evaluates (outside a template) or is
/// well-formed (inside one, where instantiation evaluates it).
fn length(f: &Function, len: Len, what: &str, span: Span, sink: &mut Sink) {
    match len {
        Len::Fixed(0) => sink.at(f, codes::DECL_TYPE, span, format!("{what} has length 0")),
        Len::Fixed(_) => {}
        Len::Const(h) => {
            if let Some(v) = constant(f, h, what, span, sink) {
                if v == 0 {
                    sink.at(f, codes::DECL_TYPE, span, format!("{what} has length 0"));
                }
            }
        }
    }
}

/// Checks constant expression `h`: in a template, that it is well-formed over the
/// parameters; elsewhere, that it evaluates. Returns its value where it has one.
fn constant(
    f: &Function,
    h: Handle<ConstExpr>,
    what: &str,
    span: Span,
    sink: &mut Sink,
) -> Option<u32> {
    let result = match &f.template {
        Some(t) => template::check_const(f, h, t.params.len()).map(|()| None),
        None => template::eval_const(f, h, None).map(Some),
    };
    match result {
        Ok(v) => v,
        Err(e) => {
            let code = match e {
                ConstError::NotTemplate => codes::NOT_TEMPLATE,
                ConstError::Handle(_) => codes::HANDLE,
                _ => codes::CONST_EVAL,
            };
            sink.at(f, code, span, format!("{what}: {e}"));
            None
        }
    }
}

fn shared(f: &Function, sink: &mut Sink) {
    let mut dynamic: Option<Span> = None;
    for (_, s) in f.shared.iter() {
        if f.kind != FunctionKind::Kernel {
            sink.at(
                f,
                codes::SHARED_OUTSIDE_KERNEL,
                s.span,
                format!("shared array `{}` outside a kernel", s.name),
            );
            continue;
        }
        let what = format!("shared array `{}`", s.name);
        if !elem_ok(f, s.elem, &what, s.span, sink) {
            continue;
        }
        match s.len {
            Some(len) => length(f, len, &what, s.span, sink),
            None => match dynamic {
                Some(first) => sink.at(
                    f,
                    codes::DYNAMIC_SHARED,
                    s.span,
                    format!(
                        "shared array `{}` is a second dynamically sized one (the first is at {first})",
                        s.name
                    ),
                ),
                None => dynamic = Some(s.span),
            },
        }
    }
}

fn elem_ok(f: &Function, e: ElemType, what: &str, span: Span, sink: &mut Sink) -> bool {
    if e.lanes != 1 && !VECTOR_LANES.contains(&e.lanes) {
        sink.at(
            f,
            codes::VECTOR_LANES,
            span,
            format!(
                "{what} has a vector of {} lanes; vectors have 2, 3, 4, 8 or 16",
                e.lanes
            ),
        );
        return false;
    }
    true
}

fn attributes(f: &Function, sink: &mut Sink) {
    let a = &f.attrs;
    if f.kind != FunctionKind::Kernel {
        let mut spans = Vec::new();
        if let Some((_, s)) = a.wave {
            spans.push(("@wave", s));
        }
        if let Some(o) = &a.occupancy {
            spans.push(("@occupancy", o.span));
        }
        if let Some((_, s)) = a.block {
            spans.push(("@block", s));
        }
        for u in &a.unlowered {
            spans.push(("@unlowered", u.span));
        }
        if let Some((_, s)) = &a.unbounded {
            spans.push(("@unbounded", *s));
        }
        for (name, span) in spans {
            sink.at(
                f,
                codes::ATTR_NOT_KERNEL,
                span,
                format!("{name} on `{}`, which is not a kernel", f.name),
            );
        }
        return;
    }
    if let Some((w, span)) = a.wave {
        if !(1..=64).contains(&w) || !w.is_power_of_two() {
            sink.at(
                f,
                codes::WAVE_ATTR,
                span,
                format!("@wave({w}); the width is a power of two from 1 to 64"),
            );
        }
    }
    if let Some(o) = &a.occupancy {
        if o.max_threads.is_some() && o.max_waves.is_some() {
            sink.at(
                f,
                codes::OCCUPANCY,
                o.span,
                "@occupancy gives both max_threads and max_waves; give one",
            );
        }
        let args = [
            ("max_threads", o.max_threads),
            ("max_waves", o.max_waves),
            ("min_resident", o.min_resident),
            ("max_registers", o.max_registers),
        ];
        for (name, h) in args {
            let Some(h) = h else { continue };
            let what = format!("@occupancy {name}");
            if constant(f, h, &what, o.span, sink) == Some(0) {
                sink.at(f, codes::OCCUPANCY, o.span, format!("{what} is 0"));
            }
        }
    }
    if let Some((dims, span)) = a.block {
        let volume: u64 = dims.iter().map(|&d| d as u64).product();
        if dims.contains(&0) || volume > 1 << 31 {
            sink.at(
                f,
                codes::BLOCK_ATTR,
                span,
                format!("@block{dims:?} has a zero dimension or more than 2^31 work-items"),
            );
        } else if let Some(max) = a
            .occupancy
            .as_ref()
            .and_then(|o| o.max_threads)
            .and_then(|h| template::eval_const(f, h, None).ok())
        {
            if volume > max as u64 {
                sink.at(
                    f,
                    codes::BLOCK_OVER_CEILING,
                    span,
                    format!(
                        "@block{dims:?} has {volume} work-items, more than the kernel's \
                         @occupancy(max_threads = {max})"
                    ),
                );
            }
        }
    }
    for u in &a.unlowered {
        if !BACKENDS.contains(&u.backend.as_str()) {
            sink.at(
                f,
                codes::UNLOWERED_BACKEND,
                u.span,
                format!(
                    "@unlowered names backend \"{}\"; backends are cpu, cuda, hip, vulkan",
                    u.backend
                ),
            );
        }
    }
}

/// A template's own clauses, before any instance: only kernels are templates, and its
/// constant expressions are well-formed. (Each instance is checked in `template`.)
fn template_clauses(f: &Function, sink: &mut Sink) {
    let Some(t) = &f.template else { return };
    if f.kind != FunctionKind::Kernel {
        sink.at(
            f,
            codes::ATTR_NOT_KERNEL,
            f.span,
            format!("`{}` has template parameters but is not a kernel", f.name),
        );
        return;
    }
    for (i, (h, span)) in t.requires.iter().enumerate() {
        constant(f, *h, &format!("requires clause {}", i + 1), *span, sink);
    }
}
