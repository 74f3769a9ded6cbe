//! The text format (`.xk`, docs/text-format.md): one canonical, readable syntax for the IR.
//!
//! - [`parse`] / [`parse_file`]: source to [`Module`] (and, for test files, the run blocks),
//!   or [`Diagnostics`] with `XPU-Pnnn` codes ([`codes`]) and exact `line:col`s.
//! - [`print`](fn@print) / [`print_file`]: the canonical text. Printing is a fixed point:
//!   `print(parse(print(m))) == print(m)` for every module the parser accepts and every
//!   well-formed module built in Rust.
//!
//! The pipeline is [`lexer`] → `parser` (syntax tree, `ast`) → `lower` (names, literal
//! types, IR); the printer inverts the lowering's literal typing exactly. Comments are not
//! part of the IR, so `print(parse(src))` drops them.

// The syntax tree and the parser are internal: programs go through `parse`/`parse_file`.
pub(crate) mod ast;
pub mod lexer;
pub mod literal;
mod lower;
pub(crate) mod parser;
mod printer;
pub mod run;
pub mod structs;

use crate::ir::text::run::RunSpec;
use crate::ir::{Diagnostic, Diagnostics, MathFn, Module, Scalar, Span, Type};

pub use printer::{print, print_file};

/// The parser's diagnostic codes.
pub mod codes {
    /// A character that starts no token.
    pub const CHAR: &str = "XPU-P001";
    /// A malformed literal: number, suffix, string escape, label.
    pub const LITERAL: &str = "XPU-P002";
    /// A syntax error: something other than what the grammar allows here.
    pub const SYNTAX: &str = "XPU-P003";
    /// A name that resolves to nothing (local, parameter, shared array, template parameter).
    pub const UNKNOWN_NAME: &str = "XPU-P004";
    /// A call or tag set member that names no function.
    pub const UNKNOWN_FUNCTION: &str = "XPU-P005";
    /// An unknown type or tag set.
    pub const UNKNOWN_TYPE: &str = "XPU-P006";
    /// A name defined twice where it must be unique.
    pub const DUPLICATE: &str = "XPU-P007";
    /// A literal that does not fit its type, or a count out of range.
    pub const RANGE: &str = "XPU-P008";
    /// Nesting deeper than the parser accepts.
    pub const DEPTH: &str = "XPU-P009";
    /// An assignment or atomic whose target is not a place.
    pub const PLACE: &str = "XPU-P010";
    /// A built-in name used to name something.
    pub const RESERVED: &str = "XPU-P011";
    /// `break 'l` / `continue 'l` with no enclosing loop labelled `'l`.
    pub const LABEL: &str = "XPU-P012";
    /// An unknown attribute, key or value.
    pub const ATTRIBUTE: &str = "XPU-P013";
    /// A malformed run block.
    pub const RUN: &str = "XPU-P014";
    /// Something not allowed in a constant expression.
    pub const CONST: &str = "XPU-P015";
    /// The file is not UTF-8.
    pub const UTF8: &str = "XPU-P016";
    /// A malformed built-in call: arguments, generic arguments, lanes.
    pub const BUILTIN: &str = "XPU-P017";
    /// A declaration where it cannot be: `shared` in a nested block, `[E]` outside `shared`.
    pub const MISPLACED: &str = "XPU-P018";
    /// A `let` or `for` without a type whose type cannot be inferred.
    pub const INFER: &str = "XPU-P019";
    /// `atomic_load`/`atomic_store` with the wrong number of arguments, or a last argument
    /// that is not a memory order (issue #23).
    pub const ATOMIC_ORDER: &str = "XPU-P020";
    /// A `print` format that is malformed (a lone `{` or `}`) or whose `{}` count is not the
    /// number of values given (issue 23 item 9).
    pub const PRINT_FORMAT: &str = "XPU-P032";
    /// The update of a `for var = init; cond; update` loop assigns something other than `var`.
    pub const FOR_UPDATE: &str = "XPU-P030";
    /// A multi-dimensional array with a length that is not an integer literal, or indexed
    /// with fewer subscripts than it has dimensions.
    pub const DIMS: &str = "XPU-P031";
    /// A helper's buffer or array parameter given something other than the name of a
    /// buffer, shared array or private array.
    pub const MEMORY_ARG: &str = "XPU-P045";
    /// `shared` in a type not followed by a one-dimensional array type.
    pub const MEMORY_PARAM_TYPE: &str = "XPU-P046";
    /// A wave verb's `width =` (issue 23 item 3): on a verb that takes no tile (a vote,
    /// `wave_elect`), given twice, or not an unsuffixed integer literal.
    pub const TILE: &str = "XPU-P040";
    /// A layout type (`swizzled<T, S>`, `block_padded<T, B, P>`) whose arguments are not
    /// integer literals, or whose first argument is not an array type.
    pub const LAYOUT: &str = "XPU-P060";
    /// A layout type anywhere but a `shared` declaration.
    pub const LAYOUT_PLACE: &str = "XPU-P061";
}

/// Parses a kernel file. Run blocks are accepted (checked for syntax) and dropped.
///
/// ```
/// let module = xpu::ir::parse("kernel k(a: buf<u32, rw>) { a[0] = 1; }").unwrap();
/// assert!(module.verify().is_ok());
/// // A problem is a coded diagnostic at a line and column.
/// let diags = xpu::ir::parse("kernel k(a: buf<u32, rw>) {\n    a[0] = nope;\n}").unwrap_err();
/// assert!(diags.to_string().contains("2:12: error[XPU-P004]"), "{diags}");
/// ```
pub fn parse(src: &str) -> Result<Module, Diagnostics> {
    parse_file(src).map(|(m, _)| m)
}

/// Parses a kernel file with its run blocks, in source order.
pub fn parse_file(src: &str) -> Result<(Module, Vec<RunSpec>), Diagnostics> {
    let (tokens, mut diags) = lexer::tokenize(src);
    let mut p = parser::Parser::new(tokens);
    let items = p.items();
    diags.append(&mut p.diags);
    let items = structs::desugar(items, &mut diags);
    let module = lower::lower(&items, &mut diags);
    if !diags.is_empty() {
        diags.sort_by_key(|d| d.span);
        diags.dedup();
        return Err(Diagnostics(diags));
    }
    let runs = items
        .into_iter()
        .filter_map(|i| match i {
            ast::Item::Run(r) => Some(r),
            _ => None,
        })
        .collect();
    Ok((module, runs))
}

/// `bytes` as UTF-8 text, or a diagnostic (`XPU-P016`) at the first invalid byte.
pub fn decode(bytes: &[u8]) -> Result<&str, Diagnostics> {
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or("");
        let line = valid.matches('\n').count() as u32 + 1;
        let col = valid.rsplit('\n').next().unwrap_or("").chars().count() as u32 + 1;
        Diagnostics(vec![Diagnostic::new(
            codes::UTF8,
            Span::new(line, col),
            "the file is not valid UTF-8",
        )])
    })
}

/// The scalar a literal takes from an expected type: the scalar of a scalar or vector.
pub(crate) fn scalar_of(ty: Option<Type>) -> Option<Scalar> {
    match ty? {
        Type::Scalar(s) | Type::Vector(s, _) => Some(s),
        _ => None,
    }
}

/// The type of an unsuffixed literal where `expect` is the context's scalar: the context's
/// if it is of the literal's kind (integer or float), else `i32` / `f32`.
pub(crate) fn infer_literal(expect: Option<Scalar>, float: bool) -> Scalar {
    match expect {
        Some(s) if float && s.is_float() => s,
        Some(s) if !float && s.is_int() => s,
        _ if float => Scalar::F32,
        _ => Scalar::I32,
    }
}

/// Names that no declaration may take (types, coordinates, generic built-ins).
const RESERVED: &[&str] = &[
    "bool",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "f16",
    "f32",
    "f64",
    "vec2",
    "vec3",
    "vec4",
    "vec8",
    "vec16",
    "buf",
    "matrix",
    "tag",
    "global_id",
    "local_id",
    "group_id",
    "group_size",
    "num_groups",
    "wave_width",
    "lane_id",
    "bitcast",
    "vload",
    "matrix_fill",
    "matrix_load",
];

/// Whether `name` is reserved: no local, parameter, shared array, template parameter,
/// function or tag set may take it.
pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// Whether `name` is a built-in function (so no function may take it).
pub fn is_builtin_function(name: &str) -> bool {
    MathFn::from_name(name).is_some()
        || crate::ir::AtomicOp::from_name(name).is_some()
        || crate::ir::BitOp::from_name(name).is_some()
        || matches!(name, "atomic_load" | "atomic_store")
        || lower::wave_op(name).is_some()
        || parser::GENERIC_CALLS.contains(&name)
        || matches!(
            name,
            "select"
                | "swizzle"
                | "len"
                | "dispatch"
                | "matrix_mma"
                | "barrier"
                | "wave_barrier"
                | "fence"
                | "vstore"
                | "matrix_store"
        )
}
