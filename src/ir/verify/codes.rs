//! The verifier's diagnostic codes. Each rule has one stable code; `docs/verifier.md` lists
//! them with examples. Codes are never reused for a different rule.

/// A handle or index that does not name an element of its arena: an expression, local,
/// shared array, constant expression, function, tag set, parameter, template parameter or
/// tag member.
pub const HANDLE: &str = "XPU-V001";
/// An expression with more than one parent (expressions form trees), or one that is its own
/// operand.
pub const EXPR_REUSED: &str = "XPU-V002";
/// An expression that no statement reaches.
pub const EXPR_UNUSED: &str = "XPU-V003";
/// A function nested deeper than `MAX_NESTING` (256) in itself: blocks plus the operands of
/// the expression inside the innermost (only a module built in Rust gets that deep).
pub const NESTING: &str = "XPU-V004";

/// Operands of the wrong type for their operator, cast, select, vector constructor or math
/// function.
pub const OPERAND_TYPE: &str = "XPU-V010";
/// A call to a helper that returns nothing, used as a value.
pub const VOID_VALUE: &str = "XPU-V011";
/// A vector lane count other than 2, 3, 4, 8 or 16.
pub const VECTOR_LANES: &str = "XPU-V012";
/// A lane index past the end of its vector (`v.w` on a `vec3`, a swizzle, a lane place).
pub const LANE_INDEX: &str = "XPU-V013";
/// An indexed access whose base is not a buffer, shared array or private array, or whose
/// index is not `u32`.
pub const INDEX: &str = "XPU-V014";
/// A call whose arguments do not match the callee's parameters in count or type.
pub const CALL_ARGS: &str = "XPU-V015";
/// A tag value or a dispatch that does not fit its tag set.
pub const DISPATCH: &str = "XPU-V016";
/// An atomic on something other than a buffer or shared element of `i32`, `u32`, `i64`,
/// `u64` (or `f32` for `atomic_add`), or with a value of another type.
pub const ATOMIC: &str = "XPU-V017";
/// A compare operand on an atomic other than `atomic_compare_exchange`, or none on it.
pub const ATOMIC_COMPARE: &str = "XPU-V018";
/// A wave verb with arguments of the wrong number or type.
pub const WAVE_ARGS: &str = "XPU-V019";
/// A `vload`/`vstore` whose lane count is illegal or whose base is not a scalar buffer.
pub const VLOAD: &str = "XPU-V020";
/// An `align` that is not a power of two from 1 to 16, or wider than the access.
pub const ALIGN: &str = "XPU-V021";
/// Cooperative-matrix operands of inconsistent roles, scalars or shapes.
pub const MATRIX: &str = "XPU-V022";
/// `len(p)` of a parameter that is not a buffer.
pub const LEN: &str = "XPU-V023";

/// A declared type that is not allowed where it is declared (a buffer outside kernel
/// parameters, an empty array, a helper parameter that is an array).
pub const DECL_TYPE: &str = "XPU-V030";
/// An assignment or `let` initialiser whose value does not have the place's type.
pub const ASSIGN_TYPE: &str = "XPU-V031";
/// An `if` or `while` condition that is not `bool`.
pub const COND_TYPE: &str = "XPU-V032";
/// A `return` that does not match the function's return type.
pub const RETURN: &str = "XPU-V033";
/// A `for` loop whose variable is not an integer or whose bounds and step are not its type.
pub const FOR_LOOP: &str = "XPU-V034";
/// A write (assignment, atomic, `vstore`, `matrix_store`) to a read-only buffer.
pub const READ_ONLY: &str = "XPU-V035";
/// A `break` or `continue` naming a label no enclosing loop has, or a loop label that
/// repeats an enclosing loop's.
pub const LABEL: &str = "XPU-V036";
/// A `break` or `continue` outside any loop.
pub const OUTSIDE_LOOP: &str = "XPU-V037";
/// A local used where its `let` is not in scope (before it, or outside its block), or
/// declared twice.
pub const LOCAL_SCOPE: &str = "XPU-V038";
/// A `matrix_store` whose value is not a fragment or whose base does not hold its scalar.
pub const MATRIX_STORE: &str = "XPU-V039";

/// An `if` expression whose condition is not a `bool` scalar, or whose arms are not one
/// scalar or vector type.
pub const IF_EXPR: &str = "XPU-V090";
/// A `for var = init; cond; update` loop whose variable is not a numeric scalar, whose
/// `init` or `update` is not of its type, or whose `cond` is not `bool`.
pub const COND_FOR: &str = "XPU-V091";
/// A multi-dimensional array shape that does not fit its array: not a fixed-length private
/// or shared array, fewer than two lengths, a product other than its element count, or two
/// shapes for one array.
pub const ARRAY_DIMS: &str = "XPU-V092";

/// Two functions, two tag sets, or a template instance and a function with one name.
pub const DUPLICATE_NAME: &str = "XPU-V050";
/// A device helper that calls itself, directly or through others.
pub const RECURSION: &str = "XPU-V051";
/// A call to a kernel or a kernel template.
pub const KERNEL_CALL: &str = "XPU-V052";
/// A kernel with a return type.
pub const KERNEL_RETURN: &str = "XPU-V053";
/// A shared array declared outside a kernel.
pub const SHARED_OUTSIDE_KERNEL: &str = "XPU-V054";
/// More than one dynamically sized shared array in a kernel.
pub const DYNAMIC_SHARED: &str = "XPU-V055";
/// A tag set that is empty, or whose members are not device helpers of one signature.
pub const TAG_SET: &str = "XPU-V056";
/// An attribute (or a template clause) on a function that is not a kernel.
pub const ATTR_NOT_KERNEL: &str = "XPU-V057";
/// `@wave(N)` with `N` not a power of two from 1 to 64.
pub const WAVE_ATTR: &str = "XPU-V058";
/// `@occupancy` giving both `max_threads` and `max_waves`, or an argument of zero.
pub const OCCUPANCY: &str = "XPU-V059";
/// `@unlowered` naming a backend other than `cpu`, `cuda`, `hip`, `vulkan`.
pub const UNLOWERED_BACKEND: &str = "XPU-V060";
/// `@block(...)` with a zero dimension, or a volume past 2^31 work-items.
pub const BLOCK_ATTR: &str = "XPU-G001";
/// `@block(...)` larger than the kernel's own `@occupancy(max_threads = N)`.
pub const BLOCK_OVER_CEILING: &str = "XPU-G002";
/// A function nested deeper than `MAX_CALL_DEPTH` (1024) with its helper calls inlined (a
/// chain of helpers too long), reported at a kernel or a helper nothing calls.
pub const CALL_DEPTH: &str = "XPU-V061";
/// A kernel (or a helper nothing calls) larger than `MAX_INLINED_SIZE` (16,384) expressions
/// once its helper calls are inlined.
pub const INLINED_SIZE: &str = "XPU-V062";

/// An `instantiate` entry with a different number of arguments than the template has
/// parameters.
pub const TEMPLATE_ARGS: &str = "XPU-V070";
/// More `instantiate` entries than the cap (8, or `max N`).
pub const TEMPLATE_CAP: &str = "XPU-V071";
/// The same `instantiate` entry twice.
pub const DUPLICATE_INSTANCE: &str = "XPU-V072";
/// A constant expression that overflows `u32`, divides by zero, or does not evaluate.
pub const CONST_EVAL: &str = "XPU-V073";
/// A template parameter, or an array length given by a constant expression, outside a
/// template.
pub const NOT_TEMPLATE: &str = "XPU-V074";
/// An instance that fails a `requires` clause (the contract's code, kept verbatim).
pub const TEMPLATE_REQUIREMENT: &str = "CAJETA_ERROR_TEMPLATE_REQUIREMENT";

// Issue #23 (device subset: bit operations, atomics, sub-wave tiles): XPU-V080..XPU-V089.

/// A bit operation (`popcount`, `clz`, `ctz`, `bit_reverse`, `rotate_left/right`,
/// `bitfield_extract/insert`, `mul_hi`) with the wrong number of arguments, a value that is
/// not an integer scalar, values of different types, or an amount that is not `u32`.
pub const BITS: &str = "XPU-V080";
/// `atomic_load` with order `release` or `acq_rel`, or `atomic_store` with `acquire` or
/// `acq_rel`.
pub const ATOMIC_ORDER: &str = "XPU-V081";

/// A `print` whose format is malformed (a lone `{` or `}`) or whose `{}` count is not its
/// value count (issue 23 item 9).
pub const PRINT_FORMAT: &str = "XPU-V110";
/// A `print` value that is not a scalar (`bool`, an integer or a float), or more than
/// `MAX_PRINT_VALUES` (8) values in one `print`.
pub const PRINT_VALUE: &str = "XPU-V111";
// Issue 23 item 8 (address spaces and layouts): XPU-V160..XPU-V169.

/// A write to a constant buffer (`buf<_, const>`): an assignment, `vstore`, `matrix_store`,
/// an atomic or `atomic_store`.
pub const CONSTANT_WRITE: &str = "XPU-V160";
/// `atomic_load` or `matrix_load` of a constant buffer.
pub const CONSTANT_ACCESS: &str = "XPU-V161";
/// A layout that does not fit its shared array: a launch-sized array, `swizzled` on a
/// one-dimensional array or with a period that is not a power of two dividing the row
/// length, `block_padded` with a block of 0, or a padded size past 2^32 - 1 bytes.
pub const LAYOUT_SHAPE: &str = "XPU-V162";
/// `matrix_load` or `matrix_store` on a laid-out shared array (`vload`/`vstore` take
/// buffers only: `XPU-V020`).
pub const LAYOUT_ACCESS: &str = "XPU-V163";
/// An index into a laid-out shared array with a call, dispatch or atomic in it.
pub const LAYOUT_INDEX: &str = "XPU-V164";

/// An `assert` condition that is not `bool`.
pub const ASSERT_COND: &str = "XPU-V112";

/// A helper's buffer, shared-array or private-array parameter given something else: not
/// the name of memory, memory of another kind (a buffer for a shared array), another
/// element type, or another length (issue 23 item 4).
pub const MEMORY_ARG: &str = "XPU-V130";
/// A read-only buffer passed where the helper's parameter is `buf<E, rw>`.
pub const MEMORY_ACCESS: &str = "XPU-V131";
/// A call of a helper that takes memory somewhere other than a statement of its own, the
/// whole value of a `let` or an assignment, or the whole value of a `return`.
pub const MEMORY_CALL_SITE: &str = "XPU-V132";
/// A tag set member with a buffer, shared-array or private-array parameter (tags dispatch
/// to helpers of values only).
pub const MEMORY_TAG: &str = "XPU-V133";
/// A reference to memory ([`crate::ir::Expr::Ref`]) anywhere but as a call argument for a
/// memory parameter.
pub const MEMORY_REF: &str = "XPU-V134";
/// A wave verb's tile width (`width = T`, issue 23 item 3) that is not a power of two from 1
/// to 64, or a `width` on a verb that takes none (the votes, `wave_elect`).
pub const TILE_WIDTH: &str = "XPU-V120";
/// A tile wider than the kernel's declared `@wave(N)`.
pub const TILE_WAVE: &str = "XPU-V121";
