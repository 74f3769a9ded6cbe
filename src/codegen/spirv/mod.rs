//! The SPIR-V emitter: one verified kernel (with the helpers it calls) to a SPIR-V 1.3 compute
//! module for Vulkan 1.1, built with `rspirv`.
//!
//! What it owns and the choices that keep it valid on every driver:
//!
//! - **Structured control flow.** `if` becomes a selection construct, every loop a loop
//!   construct (header with `OpLoopMerge`, a condition block, the body, a continue block that
//!   runs a `for` loop's step). `break`/`continue` of the innermost loop branch straight to its
//!   merge or continue block. A labelled jump further out stores a code in a function-scope
//!   `jump` variable and breaks out of the innermost loop; after each loop whose body routed
//!   such a jump, a check (a "ladder" rung) either takes the jump (it names this loop) or
//!   breaks on outward. Helpers are inlined at each call inside a one-trip loop, so their
//!   `return` is a jump of the same kind; a kernel's `return` is `OpReturn`.
//! - **Memory layout.** Each buffer parameter is one storage buffer (`Block`, `Offset 0`,
//!   `ArrayStride` = the scalar size; a struct type of its own, so that no driver can mix up
//!   a read-only and a writable buffer, see `buffer_struct`) holding a runtime array of
//!   *scalars*: a vector element is its lanes, loaded and stored one by one, so no std430
//!   vector alignment applies. Floats are stored as unsigned integers of their width and
//!   bitcast on access, which lets a `f32` `atomic_add` be a compare-exchange loop on the
//!   same memory; `bool` is a byte. Scalar
//!   arguments and every buffer's element count live in one push-constant block, each member
//!   32 or 64 bits wide (narrower types travel widened and are converted on entry).
//! - **Specialisation.** The workgroup size is the `WorkgroupSize` built-in made of spec
//!   constants 0–2; the dynamic shared array's element count is spec constant 3.
//! - **Semantics** (`docs/semantics.md`): shift amounts masked to the width, saturating
//!   float→int conversion (NaN → 0), `min`/`max` as `NMin`/`NMax` (minimumNumber), `round`
//!   half away from zero, integer division with the divisor 0 and the `MIN / -1` case made
//!   harmless (no hang, wrap to `MIN`), `NoContraction` on every float arithmetic result.
//! - **Capabilities** are declared only for the types and verbs the kernel uses, and a kernel
//!   needing one the device does not offer is refused by name (a [`crate::codegen::Error`], `XPU-L01`).
//!
//! - **Wide vectors.** 8- and 16-lane vectors (SPIR-V shader vectors have at most 4 lanes)
//!   are arrays of their lanes; lane-wise operations on them are emitted once per lane
//!   (`Emitter::scalarise`), construction, swizzles and memory access gather and scatter lanes.
//! - **Virtual waves** (W > S): verbs staged through a workgroup scratch array between two
//!   barriers, the kernel body predicated so the whole workgroup meets each verb (see the
//!   `virtual mode` section).
//!
//! - **Cooperative matrices** in software: each invocation holds its wave's whole fragment
//!   and performs every verb itself (the operands are wave-uniform).
//!
//! - **Transcendental functions** (`math.rs`): `f64` ones from arithmetic (GLSL.std.450 has
//!   none), `f32` ones computed in `f64` where the device has it.
//!
//! Refused by name: virtual-wave verbs the workgroup cannot meet together, and any construct
//! the device's features do not cover.

use crate::codegen::checks::{CheckSite, Checks};
use crate::codegen::Error;
use crate::ir::{
    AtomicOp, Base, BinaryOp, BitOp, Builtin, Dim, ElemType, Expr, ExprId, FenceScope, Function,
    Handle, Len, Literal, LoopKind, MathFn, MemoryOrder, Place, ReduceOp, Scalar, Stmt, StmtKind,
    Type, UnaryOp, VerifiedModule, WaveOp,
};
use rspirv::dr::{Builder, InsertPoint, Instruction, Operand};
use rspirv::spirv::{self, Capability, Op, StorageClass, Word};
use std::collections::{BTreeSet, HashMap};

// A child module, so that it extends `Emitter` with its private fields.
#[path = "math.rs"]
mod math;

mod atomic_access;
mod bits;
mod block;
mod checked;
pub mod constant;
mod debug;
mod decl;
mod expr;
mod loop_limit;
mod matrix;
mod memory;
mod wave;
mod wave_narrow;
mod wave_virtual;

/// What the device offers that changes what may be emitted.
#[derive(Clone, Debug, Default)]
pub struct Caps {
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    pub float16: bool,
    pub float64: bool,
    /// 8-bit integers in storage buffers (`storageBuffer8BitAccess`).
    pub storage8: bool,
    /// 16-bit types in storage buffers (`storageBuffer16BitAccess`).
    pub storage16: bool,
    pub int64_atomics: bool,
    /// `VK_EXT_shader_atomic_float` buffer float32 add (then native adds are used).
    pub float32_atomic_add: bool,
    /// The subgroup size S.
    pub subgroup_size: u32,
    pub subgroup_basic: bool,
    pub subgroup_vote: bool,
    pub subgroup_arithmetic: bool,
    pub subgroup_ballot: bool,
    pub subgroup_shuffle: bool,
    /// Mesa's lavapipe (llvmpipe): a memory barrier, including the one implied by an atomic's
    /// non-relaxed memory semantics, suspends the invocation like a control barrier, so one
    /// inside a loop whose trip count differs between the subgroups of a workgroup drops the
    /// other subgroups' remaining work (shown with glslang-compiled shaders; see
    /// docs/vulkan-backend.md). Its atomics are sequentially consistent LLVM atomics whatever
    /// the semantics operand says, so there atomics are emitted relaxed and lose nothing.
    pub barrier_suspends: bool,
    /// `shaderDenormPreserveFloat{16,32,64}` (VK_KHR_shader_float_controls / Vulkan 1.2): the
    /// module then asks for the `DenormPreserve` execution mode at each width it uses, so
    /// subnormals survive arithmetic as semantics.md requires (NVIDIA flushes f32 subnormals
    /// without it). Where a width is not offered, the driver's default applies.
    pub denorm_preserve16: bool,
    pub denorm_preserve32: bool,
    pub denorm_preserve64: bool,
    /// `shaderSignedZeroInfNanPreserveFloat{16,32,64}`: the module then asks for the
    /// `SignedZeroInfNanPreserve` execution mode at each width it uses, so the compiler may
    /// not fold `x * 0.0` to `+0.0` or otherwise drop the sign of a zero.
    pub szinan_preserve16: bool,
    pub szinan_preserve32: bool,
    pub szinan_preserve64: bool,
    /// Mesa's lavapipe folds `x * 0.0` to `+0.0` (also for `x` = -2, inf, NaN), `x + 0.0`
    /// and `0.0 - x` to `x` and `-x` whenever one operand is a constant, in spite of
    /// `NoContraction` and `SignedZeroInfNanPreserve`, so its float `+ - *` results that are
    /// zero get their sign (and a product's NaN) recomputed from the operands' bits.
    pub folds_float_identities: bool,
    /// The device flushes f32 subnormal operands and results of `+ - *` even under
    /// `DenormPreserve` (NVIDIA, driver 580 on the H200: 1e-38 · 1e10 gave 0). Where it also
    /// has `shaderFloat64`, f32 `+ - *` are then computed in f64 (exact for two f32 operands:
    /// 53 ≥ 2·24 + 2, so the one rounding to f32 is the correct one), f32 operands are
    /// widened from their bits and results narrowed to their bits where they are below 2^-126,
    /// so no f32 float instruction sees or makes a subnormal.
    pub flushes_f32_subnormals: bool,
    /// The device runs in the host process (a CPU device such as lavapipe), where a shared or
    /// private access out of range writes host memory (DESIGN.md, Decisions 8): every such
    /// index is clamped to the array's last element, so an out-of-bounds access (undefined
    /// behaviour) stays inside the array. Off on GPUs, whose code is then unchanged.
    pub clamp_indices: bool,
    /// The driver ends an invocation's loops after this many loop passes counted over all its
    /// loops, silently (Mesa's llvmpipe/lavapipe: its loop limiter, 65,535; see
    /// docs/vulkan-backend.md). A kernel with a loop then gets a probe before each
    /// `OpReturn` that finds the limiter spent and flags it in a status buffer, and its
    /// launch waits for the dispatch and fails with `XPU-L016` when the flag is set.
    pub loop_limit: Option<u32>,
    /// Mesa 22.3's lavapipe on a host without AVX-512 (seen on an AVX2 AMD EPYC) returns an
    /// f64 `Trunc`'s argument unchanged (`trunc(26041666.67)` gave 26041666.67), and its f64
    /// `FRem`, built on it, wrong values (`1e10 % 384` gave 0), while `Floor` and `Ceil` are
    /// right. f64 `Trunc` and `RoundEven` are then built from `Floor`/`Ceil` and exact
    /// arithmetic, and f64 `FRem` from those.
    pub f64_rounding_from_floor: bool,
    /// The driver starts a subgroup float sum (`OpGroupNonUniformFAdd`: reduce and both
    /// scans) from +0.0 even under `SignedZeroInfNanPreserve`, so a sum of -0.0s reads +0.0
    /// where IEEE arithmetic and the interpreter give -0.0 (found by the differential fuzzer:
    /// `wave_inclusive_scan_sum(-0.0)`; Mesa 22.3's lavapipe and NVIDIA's driver 580 on the
    /// H200 both do). Such sums are then corrected (`Emitter::negative_zero_sum`).
    pub float_sum_from_positive_zero: bool,
}

/// Mesa llvmpipe's `LP_MAX_TGSI_LOOP_ITERATIONS`: one counter per invocation (per SIMD
/// vector of lanes), set once at the shader's start, decremented at the end of every pass
/// through any loop, and a loop is left when it reaches 0 (`lp_exec_endloop`).
pub const LLVMPIPE_LOOP_LIMIT: u32 = 65535;

impl Caps {
    /// Everything on, at subgroup size `s` (validation of emitted modules without a device).
    pub fn all(s: u32) -> Caps {
        Caps {
            int8: true,
            int16: true,
            int64: true,
            float16: true,
            float64: true,
            storage8: true,
            storage16: true,
            int64_atomics: true,
            float32_atomic_add: false,
            subgroup_size: s,
            subgroup_basic: true,
            subgroup_vote: true,
            subgroup_arithmetic: true,
            subgroup_ballot: true,
            subgroup_shuffle: true,
            barrier_suspends: false,
            f64_rounding_from_floor: false,
            float_sum_from_positive_zero: false,
            denorm_preserve16: true,
            denorm_preserve32: true,
            denorm_preserve64: true,
            szinan_preserve16: true,
            szinan_preserve32: true,
            szinan_preserve64: true,
            folds_float_identities: true,
            flushes_f32_subnormals: false,
            clamp_indices: false,
            loop_limit: Some(LLVMPIPE_LOOP_LIMIT),
        }
    }
}

type SpirvResult<T> = crate::codegen::Result<T>;

/// An open `if` of [`Emitter::guard_begin`]: its merge block and the predicate it suspended.
struct Guard {
    merge: Word,
    saved: Option<Word>,
}

fn refuse<T>(what: impl Into<String>) -> SpirvResult<T> {
    Err(Error::unsupported(what))
}

/// How one kernel parameter reaches the shader.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamSlot {
    /// A storage buffer at `binding`; its element count is the push-constant `u32` at
    /// `len_offset`.
    Buffer { binding: u32, len_offset: u32 },
    /// A value in the push-constant block at `offset`, widened to `carrier` (32 or 64 bits
    /// per lane; `f16` travels as `f32`, `bool` and 8/16-bit integers as 32-bit integers).
    Value { offset: u32, carrier: ElemType },
}

/// A kernel as SPIR-V, with what the runtime needs to bind and launch it.
#[derive(Clone, Debug)]
pub struct Emitted {
    pub words: Vec<u32>,
    pub slots: Vec<ParamSlot>,
    pub push_bytes: u32,
    /// Bytes per element of the dynamic shared array, where the kernel has one.
    pub dynamic_shared_elem: Option<u32>,
    /// The capabilities the module declares, by name.
    pub capabilities: Vec<String>,
    /// The entry point's name.
    pub entry: String,
    /// The subgroup size S the kernel was built for.
    pub subgroup_size: u32,
    /// The kernel's wave width W (S unless the kernel declares `@wave(W)`).
    pub wave_width: u32,
    /// How waves of W map onto subgroups of S.
    pub wave_mode: WaveMode,
    /// The kernel uses wave verbs (they assume subgroups of consecutive linear local ids).
    pub uses_wave_verbs: bool,
    /// The binding of the loop-limit status buffer ([`Caps::loop_limit`]): two `u32`s, a
    /// flag the kernel sets when the driver's loop limiter was spent (0 before the launch) and
    /// the bound of the probe loop (2). `None` when the kernel has no probe (no loop, or a
    /// device without a limiter).
    pub loop_status: Option<u32>,
    /// The binding of the checks' report buffer (`crate::codegen::checks`, after the
    /// loop-limit status buffer's), where the kernel was built with checks that emitted code.
    pub report: Option<u32>,
    /// The check sites a report names by index.
    pub sites: Vec<CheckSite>,
    /// The binding of the `print`/`assert` buffer ([`crate::ir::debug`], after the report
    /// buffer's), where the kernel has either statement.
    pub debug: Option<u32>,
    /// The `print`/`assert` statements emitted, by the site their records carry.
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
}

/// How a kernel's waves (width W) map onto the device's subgroups (size S), §3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveMode {
    /// W = S: one wave is one subgroup, wave verbs are subgroup operations.
    Native,
    /// W > S: a wave spans `slots = W / S` subgroups; wave verbs are exchanged through
    /// workgroup memory by the whole workgroup (the `virtual mode` section).
    Virtual { slots: u32 },
    /// W < S: a subgroup holds `S / W` waves; wave verbs work on clusters of W lanes.
    Narrow,
}

impl std::fmt::Display for WaveMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaveMode::Native => write!(f, "native"),
            WaveMode::Virtual { slots } => {
                write!(
                    f,
                    "virtual, {slots} subgroups per wave, verbs through shared memory"
                )
            }
            WaveMode::Narrow => write!(f, "narrow"),
        }
    }
}

/// Spec constant ids.
pub const SPEC_BLOCK: [u32; 3] = [0, 1, 2];
pub const SPEC_SHARED_LEN: u32 = 3;

/// Emits `kernel` of `module` for a device offering `caps`, with no checks.
pub fn emit_kernel(
    module: &VerifiedModule,
    kernel: Handle<Function>,
    caps: &Caps,
) -> Result<Emitted, Error> {
    emit_kernel_checked(module, kernel, caps, Checks::default())
}

/// [`emit_kernel`] with `checks`: checked mode (bounds) and ub-traps (`align` statements),
/// reporting into a storage buffer at [`Emitted::report`].
pub fn emit_kernel_checked(
    module: &VerifiedModule,
    kernel: Handle<Function>,
    caps: &Caps,
    checks: Checks,
) -> Result<Emitted, Error> {
    // Shared-tile layouts are placed as declared (`ir::layout`).
    let laid = module.with_layouts();
    let module = laid.as_ref().unwrap_or(module);
    let f = module.function(kernel);
    let s = caps.subgroup_size.max(1);
    let w = f.attrs.wave.map_or(s, |(w, _)| w);
    if !w.is_power_of_two() || w > 64 {
        return Err(Error::new(
            crate::codegen::codes::WAVE,
            format!("@wave({w}) (a wave is a power of two from 1 to 64)"),
        )
        .in_function(&f.name));
    }
    let mode = match w.cmp(&s) {
        std::cmp::Ordering::Equal => WaveMode::Native,
        std::cmp::Ordering::Less => WaveMode::Narrow,
        std::cmp::Ordering::Greater => WaveMode::Virtual { slots: w / s },
    };
    let mut em = Emitter::new(module, caps);
    em.checks = checks;
    em.wave_w = w;
    em.mode = mode;
    em.emit_entry(kernel).map_err(|e| e.in_function(&f.name))
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum TyKey {
    Void,
    Bool,
    Int(u32, bool),
    Float(u32),
    Vec(Word, u32),
    Ptr(StorageClass, Word),
    Array(Word, Word),
    Runtime(Word),
    Fn(Word),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    Loop,
    Body,
}

struct Region {
    kind: RegionKind,
    label: Option<String>,
    merge: Word,
    cont: Word,
    frame: usize,
    code: u32,
    /// A jump past this region was routed through its merge: check after it.
    routed: bool,
    /// Something breaks to the merge (directly or routed): the merge is reachable.
    reached: bool,
}

struct Frame {
    func: Handle<Function>,
    locals: Vec<Option<Word>>,
    params: Vec<Word>,
    ret_var: Option<Word>,
    body_region: Option<usize>,
}

struct BufferVar {
    var: Word,
    /// The storage scalar type's id and its scalar.
    storage: Word,
    scalar: Scalar,
    elem: ElemType,
    /// A constant buffer: a uniform block of `uvec4`s (`constant.rs`).
    uniform: bool,
}

struct Emitter<'a> {
    b: Builder,
    m: &'a VerifiedModule,
    caps: &'a Caps,
    glsl: Word,
    types: HashMap<TyKey, Word>,
    consts: HashMap<(Word, u64), Word>,
    used: BTreeSet<u32>,
    cap_names: BTreeSet<String>,
    extensions: BTreeSet<&'static str>,
    fn_vars: Vec<Instruction>,
    cur_label: Word,
    // kernel state
    buffers: Vec<Option<BufferVar>>,
    slots: Vec<ParamSlot>,
    push_var: Word,
    push_member: Vec<Option<u32>>,
    len_member: Vec<Option<u32>>,
    builtins: HashMap<u32, Word>,
    interface: Vec<Word>,
    shared: Vec<(Word, ElemType)>,
    /// Per shared array, its length in elements (a constant, or the dynamic array's spec
    /// constant), at least 1: what [`Caps::clamp_indices`] clamps to.
    shared_len: Vec<Word>,
    workgroup_size: Word,
    jump_var: Option<Word>,
    regions: Vec<Region>,
    frames: Vec<Frame>,
    next_code: u32,
    dyn_shared_elem: Option<u32>,
    push_bytes: u32,
    push_members: Vec<Word>,
    /// Ids already given a layout decoration (a type is decorated once).
    decorated: BTreeSet<Word>,
    /// The kernel's wave width W and how it maps onto subgroups.
    wave_w: u32,
    mode: WaveMode,
    uses_wave_verbs: bool,
    /// A loop construct has been opened (in emission order): a return after it may follow
    /// loop passes, so it gets the loop-limit probe.
    loop_opened: bool,
    /// The loop-limit status buffer's variable, once a probe needs it.
    loop_status: Option<Word>,
    /// Wide vector types (8 or 16 lanes, arrays of scalars): array type → (scalar type, lanes).
    wide: HashMap<Word, (Word, u8)>,
    /// While a lane-wise operation on wide vectors is scalarised: the value of each operand
    /// for the lane being emitted, and the types the expressions have in that lane, by
    /// (frame depth, expression).
    lane_vals: HashMap<(usize, ExprId), Word>,
    /// Loads of the statement being emitted, issued before its arithmetic (`prefetch`).
    prefetched: HashMap<(usize, ExprId), Word>,
    lane_tys: HashMap<(usize, ExprId), Type>,
    /// The workgroup size's spec constants (x, y, z).
    block_spec: [Word; 3],
    /// Virtual mode: the predicate under which the statements being emitted run (the
    /// conjunction of the enclosing `if` conditions holding a verb), `None` when every
    /// invocation runs them.
    vpred: Option<Word>,
    /// Virtual mode: the workgroup's invocation count (a spec constant), the scratch array's
    /// id (0 until a verb needs it) and the most 32-bit words a verb stages per invocation.
    vw_invocations: Option<Word>,
    vw_scratch: Word,
    vw_words: u32,
    /// The `Private` table of 2/π pieces the f64 `sin`/`cos` reduction reads (0 until used).
    pio2_table: Option<Word>,
    /// What the kernel tests at run time (checked mode, ub-traps).
    checks: Checks,
    /// The report buffer's variable, once a check needs it (its binding is decorated last).
    report_var: Option<Word>,
    /// The check sites emitted so far.
    sites: Vec<CheckSite>,
    /// The debug buffer's variable, once a `print` or `assert` needs it.
    debug_var: Option<Word>,
    debug_sites: Vec<crate::ir::debug::DebugSite>,
    /// The source line of the statement being emitted (a check site's line).
    cur_line: u32,
}

fn ids(ws: &[Word]) -> Vec<Operand> {
    ws.iter().map(|&w| Operand::IdRef(w)).collect()
}

/// GLSL.std.450 instruction numbers.
mod glsl {
    pub const ROUND_EVEN: u32 = 2;
    pub const TRUNC: u32 = 3;
    pub const FABS: u32 = 4;
    pub const FSIGN: u32 = 6;
    pub const FLOOR: u32 = 8;
    pub const CEIL: u32 = 9;
    pub const SIN: u32 = 13;
    pub const COS: u32 = 14;
    pub const TANH: u32 = 21;
    pub const POW: u32 = 26;
    pub const EXP: u32 = 27;
    pub const LOG: u32 = 28;
    pub const EXP2: u32 = 29;
    pub const LOG2: u32 = 30;
    pub const SQRT: u32 = 31;
    pub const INVERSE_SQRT: u32 = 32;
    pub const UMIN: u32 = 38;
    pub const SMIN: u32 = 39;
    pub const UMAX: u32 = 41;
    pub const SMAX: u32 = 42;
    pub const FMA: u32 = 50;
    pub const FREXP: u32 = 51;
    pub const LDEXP: u32 = 53;
    pub const FIND_ILSB: u32 = 73;
    pub const NMIN: u32 = 79;
    pub const NMAX: u32 = 80;
}

const SCOPE_DEVICE: u32 = 1;
const SCOPE_WORKGROUP: u32 = 2;
const SCOPE_SUBGROUP: u32 = 3;
const SEM_ACQUIRE: u32 = 0x2;
const SEM_RELEASE: u32 = 0x4;
const SEM_ACQ_REL: u32 = 0x8;
const SEM_UNIFORM: u32 = 0x40;
const SEM_WORKGROUP: u32 = 0x100;

impl<'a> Emitter<'a> {
    fn new(m: &'a VerifiedModule, caps: &'a Caps) -> Self {
        let mut b = Builder::new();
        b.set_version(1, 3);
        let glsl = b.ext_inst_import("GLSL.std.450");
        b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::GLSL450);
        Emitter {
            b,
            m,
            caps,
            glsl,
            types: HashMap::new(),
            consts: HashMap::new(),
            used: BTreeSet::new(),
            cap_names: BTreeSet::new(),
            extensions: BTreeSet::new(),
            fn_vars: Vec::new(),
            cur_label: 0,
            buffers: Vec::new(),
            slots: Vec::new(),
            push_var: 0,
            push_member: Vec::new(),
            len_member: Vec::new(),
            builtins: HashMap::new(),
            interface: Vec::new(),
            shared: Vec::new(),
            shared_len: Vec::new(),
            workgroup_size: 0,
            jump_var: None,
            regions: Vec::new(),
            frames: Vec::new(),
            next_code: 1,
            dyn_shared_elem: None,
            push_bytes: 0,
            push_members: Vec::new(),
            decorated: BTreeSet::new(),
            wave_w: caps.subgroup_size,
            mode: WaveMode::Native,
            uses_wave_verbs: false,
            loop_opened: false,
            loop_status: None,
            wide: HashMap::new(),
            lane_vals: HashMap::new(),
            prefetched: HashMap::new(),
            lane_tys: HashMap::new(),
            block_spec: [0; 3],
            vpred: None,
            vw_invocations: None,
            vw_scratch: 0,
            vw_words: 0,
            pio2_table: None,
            checks: Checks::default(),
            report_var: None,
            sites: Vec::new(),
            debug_var: None,
            debug_sites: Vec::new(),
            cur_line: 0,
        }
    }

    // ---- capabilities and types ----

    fn cap(&mut self, c: Capability) {
        if self.used.insert(c as u32) {
            self.b.capability(c);
            self.cap_names.insert(format!("{c:?}"));
        }
    }

    fn ext(&mut self, e: &'static str) {
        if self.extensions.insert(e) {
            self.b.extension(e);
        }
    }

    fn need_scalar(&mut self, s: Scalar) -> SpirvResult<()> {
        let (ok, cap, name) = match s {
            Scalar::I8 | Scalar::U8 => (
                self.caps.int8,
                Some(Capability::Int8),
                "8-bit integers (shaderInt8)",
            ),
            Scalar::I16 | Scalar::U16 => (
                self.caps.int16,
                Some(Capability::Int16),
                "16-bit integers (shaderInt16)",
            ),
            Scalar::I64 | Scalar::U64 => (
                self.caps.int64,
                Some(Capability::Int64),
                "64-bit integers (shaderInt64)",
            ),
            Scalar::F16 => (
                self.caps.float16,
                Some(Capability::Float16),
                "f16 arithmetic (shaderFloat16)",
            ),
            Scalar::F64 => (
                self.caps.float64,
                Some(Capability::Float64),
                "f64 (shaderFloat64)",
            ),
            _ => (true, None, ""),
        };
        if !ok {
            return refuse(name);
        }
        if let Some(c) = cap {
            self.cap(c);
        }
        Ok(())
    }

    fn tk(&mut self, key: TyKey) -> Word {
        if let Some(&w) = self.types.get(&key) {
            return w;
        }
        let w = match key {
            TyKey::Void => self.b.type_void(),
            TyKey::Bool => self.b.type_bool(),
            TyKey::Int(w, s) => self.b.type_int(w, s as u32),
            TyKey::Float(w) => self.b.type_float(w, None),
            TyKey::Vec(e, n) => self.b.type_vector(e, n),
            TyKey::Ptr(sc, t) => self.b.type_pointer(None, sc, t),
            TyKey::Array(e, len) => self.b.type_array(e, len),
            TyKey::Runtime(e) => self.b.type_runtime_array(e),
            TyKey::Fn(r) => self.b.type_function(r, vec![]),
        };
        self.types.insert(key, w);
        w
    }

    fn scalar_ty(&mut self, s: Scalar) -> SpirvResult<Word> {
        self.need_scalar(s)?;
        Ok(self.scalar_ty_raw(s))
    }

    /// A scalar type without the arithmetic capability check (storage-only uses check their
    /// own capability).
    fn scalar_ty_raw(&mut self, s: Scalar) -> Word {
        match s {
            Scalar::Bool => self.tk(TyKey::Bool),
            Scalar::F16 => self.tk(TyKey::Float(16)),
            Scalar::F32 => self.tk(TyKey::Float(32)),
            Scalar::F64 => self.tk(TyKey::Float(64)),
            s => self.tk(TyKey::Int(s.bits(), s.is_signed())),
        }
    }

    fn vec_ty(&mut self, s: Scalar, n: u8) -> SpirvResult<Word> {
        let e = self.scalar_ty(s)?;
        if n == 1 {
            return Ok(e);
        }
        if n > 4 {
            // SPIR-V vectors for shaders have 2-4 lanes (Vector16 is a Kernel capability):
            // a wide vector is an array of its lanes, and every lane-wise operation on one is
            // scalarised (`Emitter::scalarise`).
            let u = self.u32t();
            let c = self.konst(u, n as u64);
            let t = self.tk(TyKey::Array(e, c));
            self.wide.insert(t, (e, n));
            return Ok(t);
        }
        Ok(self.tk(TyKey::Vec(e, n as u32)))
    }

    fn elem_ty(&mut self, e: ElemType) -> SpirvResult<Word> {
        self.vec_ty(e.scalar, e.lanes)
    }

    fn u32t(&mut self) -> Word {
        self.tk(TyKey::Int(32, false))
    }
    fn boolt(&mut self) -> Word {
        self.tk(TyKey::Bool)
    }

    fn value_ty(&mut self, t: Type) -> SpirvResult<Word> {
        match t {
            Type::Scalar(s) => self.scalar_ty(s),
            Type::Vector(s, n) => self.vec_ty(s, n),
            Type::Tag(_) => Ok(self.u32t()),
            Type::Array { elem, len } => {
                let e = self.elem_ty(elem)?;
                let n = match len {
                    Len::Fixed(n) => n,
                    Len::Const(_) => return refuse("a template-sized array left uninstantiated"),
                };
                let u = self.u32t();
                let c = self.konst(u, n as u64);
                Ok(self.tk(TyKey::Array(e, c)))
            }
            Type::Matrix {
                scalar, rows, cols, ..
            } => {
                // A fragment is held whole by every invocation of its wave (as the
                // interpreter holds it): an array of `rows × cols` elements, row-major.
                let e = self.scalar_ty(scalar)?;
                let u = self.u32t();
                let c = self.konst(u, rows as u64 * cols as u64);
                Ok(self.tk(TyKey::Array(e, c)))
            }
            Type::Buffer { .. } => refuse("a buffer value outside a kernel parameter"),
            Type::Shared { .. } => refuse("a shared array by reference outside a helper parameter"),
        }
    }

    /// The unsigned integer type of the same width as a float (how floats are stored).
    fn storage_scalar(s: Scalar) -> Scalar {
        match s {
            // f16 stays f16: 16-bit storage allows no bitcast without Int16.
            Scalar::F32 => Scalar::U32,
            Scalar::F64 => Scalar::U64,
            Scalar::Bool => Scalar::U8,
            s => s,
        }
    }

    fn konst(&mut self, ty: Word, bits: u64) -> Word {
        if let Some(&w) = self.consts.get(&(ty, bits)) {
            return w;
        }
        let w = self.raw_const(ty, bits);
        self.consts.insert((ty, bits), w);
        w
    }

    fn raw_const(&mut self, ty: Word, bits: u64) -> Word {
        // Find the width of `ty` from our type table.
        if let Some(&(e, n)) = self.wide.get(&ty) {
            let c = self.konst(e, bits);
            return self.b.constant_composite(ty, vec![c; n as usize]);
        }
        let key = self.types.iter().find(|(_, &w)| w == ty).map(|(k, _)| *k);
        match key {
            Some(TyKey::Bool) => {
                if bits != 0 {
                    self.b.constant_true(ty)
                } else {
                    self.b.constant_false(ty)
                }
            }
            Some(TyKey::Int(64, _)) | Some(TyKey::Float(64)) => self.b.constant_bit64(ty, bits),
            Some(TyKey::Vec(e, n)) => {
                let c = self.konst(e, bits);
                let parts = vec![c; n as usize];
                self.b.constant_composite(ty, parts)
            }
            Some(TyKey::Int(w, true)) if w < 32 => {
                // Narrow signed literals are sign-extended to the word.
                let sh = 64 - w;
                self.b
                    .constant_bit32(ty, (((bits << sh) as i64) >> sh) as u32)
            }
            Some(TyKey::Int(w, _)) | Some(TyKey::Float(w)) if w < 32 => {
                self.b.constant_bit32(ty, (bits & ((1u64 << w) - 1)) as u32)
            }
            _ => self.b.constant_bit32(ty, bits as u32),
        }
    }

    fn cu32(&mut self, v: u32) -> Word {
        let t = self.u32t();
        self.konst(t, v as u64)
    }

    /// A constant of scalar `s` (splatted to `lanes`), from bits.
    fn const_of(&mut self, s: Scalar, lanes: u8, bits: u64) -> SpirvResult<Word> {
        let t = self.vec_ty(s, lanes)?;
        Ok(self.konst(t, bits))
    }

    fn float_bits(s: Scalar, v: f64) -> u64 {
        match s {
            Scalar::F16 => half::f16::from_f64(v).to_bits() as u64,
            Scalar::F32 => (v as f32).to_bits() as u64,
            _ => v.to_bits(),
        }
    }

    // ---- instructions ----

    fn op(&mut self, op: Op, ty: Word, args: Vec<Operand>) -> Word {
        let id = self.b.id();
        self.b
            .insert_into_block(
                InsertPoint::End,
                Instruction::new(op, Some(ty), Some(id), args),
            )
            .expect("a block is open while emitting");
        id
    }

    fn op_void(&mut self, op: Op, args: Vec<Operand>) {
        self.b
            .insert_into_block(InsertPoint::End, Instruction::new(op, None, None, args))
            .expect("a block is open while emitting");
    }

    fn opi(&mut self, op: Op, ty: Word, args: &[Word]) -> Word {
        self.op(op, ty, ids(args))
    }

    /// A float arithmetic result, decorated `NoContraction` (semantics: no FMA fusion).
    fn fop(&mut self, op: Op, ty: Word, args: &[Word]) -> Word {
        let r = self.opi(op, ty, args);
        self.b.decorate(r, spirv::Decoration::NoContraction, vec![]);
        r
    }

    fn ext_inst(&mut self, ty: Word, inst: u32, args: &[Word]) -> Word {
        if self.caps.f64_rounding_from_floor
            && matches!(inst, glsl::TRUNC | glsl::ROUND_EVEN)
            && self.is_f64_type(ty)
        {
            return if inst == glsl::TRUNC {
                self.trunc_from_floor(ty, args[0])
            } else {
                self.round_even_from_floor(ty, args[0])
            };
        }
        self.ext_inst_raw(ty, inst, args)
    }

    /// Whether `ty` is f64 or a vector of f64.
    fn is_f64_type(&self, ty: Word) -> bool {
        let Some(&f64t) = self.types.get(&TyKey::Float(64)) else {
            return false;
        };
        ty == f64t
            || self
                .types
                .iter()
                .any(|(k, &w)| w == ty && matches!(k, TyKey::Vec(e, _) if *e == f64t))
    }

    /// The bool type of `ty`'s lanes.
    fn bool_of(&mut self, ty: Word) -> Word {
        let bt = self.boolt();
        let lanes = self.types.iter().find_map(|(k, &w)| match k {
            TyKey::Vec(_, n) if w == ty => Some(*n),
            _ => None,
        });
        match lanes {
            Some(n) => self.tk(TyKey::Vec(bt, n)),
            None => bt,
        }
    }

    /// `trunc(x)` of f64 `x` as `x < 0 ? ceil(x) : floor(x)` (signed zeros, infinities and
    /// NaN kept: see [`Caps::f64_rounding_from_floor`]).
    fn trunc_from_floor(&mut self, ty: Word, x: Word) -> Word {
        let bty = self.bool_of(ty);
        let zero = self.konst(ty, 0f64.to_bits());
        let neg = self.opi(Op::FOrdLessThan, bty, &[x, zero]);
        let c = self.ext_inst_raw(ty, glsl::CEIL, &[x]);
        let f = self.ext_inst_raw(ty, glsl::FLOOR, &[x]);
        self.opi(Op::Select, ty, &[neg, c, f])
    }

    /// `roundEven(x)` of f64 `x` from `Floor`: `f = floor(x)`, `d = x - f` (exact), up when
    /// `d > 0.5` or a tie on an odd `f`; a zero result takes `x`'s sign (`ceil(x)` is -0.0
    /// on [-0.5, 0]).
    fn round_even_from_floor(&mut self, ty: Word, x: Word) -> Word {
        let bty = self.bool_of(ty);
        let c = |em: &mut Self, v: f64| em.konst(ty, v.to_bits());
        let (zero, half, one) = (c(self, 0.0), c(self, 0.5), c(self, 1.0));
        let f = self.ext_inst_raw(ty, glsl::FLOOR, &[x]);
        let d = self.fop(Op::FSub, ty, &[x, f]);
        let above = self.opi(Op::FOrdGreaterThan, bty, &[d, half]);
        let tie = self.opi(Op::FOrdEqual, bty, &[d, half]);
        let hf = self.fop(Op::FMul, ty, &[f, half]);
        let hff = self.ext_inst_raw(ty, glsl::FLOOR, &[hf]);
        let odd = self.opi(Op::FOrdNotEqual, bty, &[hff, hf]);
        let tie_odd = self.opi(Op::LogicalAnd, bty, &[tie, odd]);
        let up = self.opi(Op::LogicalOr, bty, &[above, tie_odd]);
        let f1 = self.fop(Op::FAdd, ty, &[f, one]);
        let r = self.opi(Op::Select, ty, &[up, f1, f]);
        let is_zero = self.opi(Op::FOrdEqual, bty, &[r, zero]);
        let nonpos = self.opi(Op::FOrdLessThanEqual, bty, &[x, zero]);
        let cx = self.ext_inst_raw(ty, glsl::CEIL, &[x]);
        let signed_zero = self.opi(Op::Select, ty, &[nonpos, cx, zero]);
        self.opi(Op::Select, ty, &[is_zero, signed_zero, r])
    }

    /// f64 `x % y` (C `fmod` for quotients that fit the mantissa) where the driver's `FRem`
    /// cannot be trusted ([`Caps::f64_rounding_from_floor`]): `x - y·trunc(x / y)`, corrected
    /// by one `y` where the rounded quotient overshot; else `FRem`.
    fn frem_f64(&mut self, ty: Word, x: Word, y: Word) -> Word {
        if !self.caps.f64_rounding_from_floor {
            return self.fop(Op::FRem, ty, &[x, y]);
        }
        let bty = self.bool_of(ty);
        let q = self.fop(Op::FDiv, ty, &[x, y]);
        let t = self.trunc_from_floor(ty, q);
        let p = self.fop(Op::FMul, ty, &[y, t]);
        let r = self.fop(Op::FSub, ty, &[x, p]);
        // `r` has the sign of `x` unless the quotient rounded up past an integer.
        let zero = self.konst(ty, 0f64.to_bits());
        let xneg = self.opi(Op::FOrdLessThan, bty, &[x, zero]);
        let rneg = self.opi(Op::FOrdLessThan, bty, &[r, zero]);
        let rpos = self.opi(Op::FOrdGreaterThan, bty, &[r, zero]);
        let xnonneg = self.not_of(bty, xneg);
        let over_pos = self.opi(Op::LogicalAnd, bty, &[rneg, xnonneg]);
        let over_neg = self.opi(Op::LogicalAnd, bty, &[rpos, xneg]);
        let ay = self.ext_inst_raw(ty, glsl::FABS, &[y]);
        let plus = self.fop(Op::FAdd, ty, &[r, ay]);
        let minus = self.fop(Op::FSub, ty, &[r, ay]);
        let r = self.opi(Op::Select, ty, &[over_pos, plus, r]);
        self.opi(Op::Select, ty, &[over_neg, minus, r])
    }

    fn not_of(&mut self, bty: Word, b: Word) -> Word {
        self.opi(Op::LogicalNot, bty, &[b])
    }

    fn ext_inst_raw(&mut self, ty: Word, inst: u32, args: &[Word]) -> Word {
        let mut ops = vec![
            Operand::IdRef(self.glsl),
            Operand::LiteralExtInstInteger(inst),
        ];
        ops.extend(ids(args));
        self.op(Op::ExtInst, ty, ops)
    }

    /// GLSL `Frexp`: `(m, e)` with `x = m · 2^e`, `m` of type `ty` in [0.5, 1) (0 and
    /// non-finite `x` as the GLSL spec says), `e` of the integer type `it`.
    fn frexp(&mut self, ty: Word, it: Word, x: Word) -> (Word, Word) {
        let ev = self.fn_var(it);
        let m = self.ext_inst(ty, glsl::FREXP, &[x, ev]);
        (m, self.load(it, ev))
    }

    fn terminated(&self) -> bool {
        self.b.selected_block().is_none()
    }

    fn block(&mut self, label: Word) {
        self.b.begin_block(Some(label)).expect("no block left open");
        self.cur_label = label;
    }

    fn branch(&mut self, to: Word) {
        if !self.terminated() {
            self.b.branch(to).expect("branch in a block");
        }
    }

    fn branch_cond(&mut self, c: Word, t: Word, f: Word) {
        self.b
            .branch_conditional(c, t, f, vec![])
            .expect("branch in a block");
    }

    fn sel_merge(&mut self, m: Word) {
        self.b
            .selection_merge(m, spirv::SelectionControl::NONE)
            .expect("merge in a block");
    }

    /// `OpLoopMerge` in the current (header) block. Every loop construct goes through here,
    /// so the loop-limit probe knows a loop may have run ([`Caps::loop_limit`]).
    fn loop_header(&mut self, merge: Word, cont: Word) {
        self.loop_opened = true;
        self.b
            .loop_merge(merge, cont, spirv::LoopControl::NONE, vec![])
            .expect("in a block");
    }

    fn fn_var(&mut self, ty: Word) -> Word {
        let p = self.tk(TyKey::Ptr(StorageClass::Function, ty));
        let id = self.b.id();
        self.fn_vars.push(Instruction::new(
            Op::Variable,
            Some(p),
            Some(id),
            vec![Operand::StorageClass(StorageClass::Function)],
        ));
        id
    }

    fn load(&mut self, ty: Word, ptr: Word) -> Word {
        self.opi(Op::Load, ty, &[ptr])
    }

    fn store(&mut self, ptr: Word, v: Word) {
        self.op_void(Op::Store, ids(&[ptr, v]));
    }

    // ---- the entry point ----

    fn builtin(&mut self, bi: spirv::BuiltIn, ty: Word) -> Word {
        if let Some(&v) = self.builtins.get(&(bi as u32)) {
            return v;
        }
        let p = self.tk(TyKey::Ptr(StorageClass::Input, ty));
        // A module-scope variable, although a block may be open now.
        let v = self.b.id();
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(p),
                Some(v),
                vec![Operand::StorageClass(StorageClass::Input)],
            ));
        self.b
            .decorate(v, spirv::Decoration::BuiltIn, vec![Operand::BuiltIn(bi)]);
        self.builtins.insert(bi as u32, v);
        self.interface.push(v);
        v
    }

    fn emit_entry(&mut self, kh: Handle<Function>) -> SpirvResult<Emitted> {
        self.cap(Capability::Shader);
        let f = self.m.function(kh);
        // Workgroup size from spec constants 0..2; a pinned block (`@block`, §3.4) is their
        // default, so the module states the one workgroup size it is built for.
        let pinned = f.attrs.block.map_or([1, 1, 1], |(b, _)| b);
        let u = self.u32t();
        let mut parts = Vec::new();
        for (d, id) in SPEC_BLOCK.iter().enumerate() {
            let c = self.b.spec_constant_bit32(u, pinned[d]);
            self.b.decorate(
                c,
                spirv::Decoration::SpecId,
                vec![Operand::LiteralBit32(*id)],
            );
            self.block_spec[d] = c;
            parts.push(c);
        }
        let uv3 = self.tk(TyKey::Vec(u, 3));
        let wg = self.b.spec_constant_composite(uv3, parts);
        self.b.decorate(
            wg,
            spirv::Decoration::BuiltIn,
            vec![Operand::BuiltIn(spirv::BuiltIn::WorkgroupSize)],
        );
        self.workgroup_size = wg;

        self.declare_params(f)?;
        self.declare_shared(f)?;

        let void = self.tk(TyKey::Void);
        let fnty = self.tk(TyKey::Fn(void));
        let main = self
            .b
            .begin_function(void, None, spirv::FunctionControl::NONE, fnty)
            .expect("one function at a time");
        let entry = self.b.id();
        self.block(entry);
        let params = self.load_params(f)?;
        self.frames.push(Frame {
            func: kh,
            locals: vec![None; f.locals.len()],
            params,
            ret_var: None,
            body_region: None,
        });
        if matches!(self.mode, WaveMode::Virtual { .. }) {
            self.check_virtual_kernel(&f.body)?;
        }
        self.emit_block(&f.body)?;
        if !self.terminated() {
            self.kernel_return();
        }
        self.frames.pop();
        self.declare_scratch();
        // Hoist the function-scope variables into the entry block.
        let fi = self.b.selected_function().expect("the function is open");
        let vars = std::mem::take(&mut self.fn_vars);
        let block = &mut self.b.module_mut().functions[fi].blocks[0];
        for (i, v) in vars.into_iter().enumerate() {
            block.instructions.insert(i, v);
        }
        self.b.end_function().expect("the function is open");

        let name = sanitize(&f.name);
        let interface = self.interface.clone();
        self.b.entry_point(
            spirv::ExecutionModel::GLCompute,
            main,
            name.clone(),
            interface,
        );
        // Subnormals are preserved (semantics.md) at every float width the kernel uses and
        // the device can preserve; f32 is always in play (f16/f64 math may go through it).
        let used = [
            self.used.contains(&(Capability::Float16 as u32)),
            true,
            self.used.contains(&(Capability::Float64 as u32)),
        ];
        let c = &self.caps;
        let modes = [
            (
                Capability::DenormPreserve,
                spirv::ExecutionMode::DenormPreserve,
                [
                    c.denorm_preserve16,
                    c.denorm_preserve32,
                    c.denorm_preserve64,
                ],
            ),
            (
                Capability::SignedZeroInfNanPreserve,
                spirv::ExecutionMode::SignedZeroInfNanPreserve,
                [
                    c.szinan_preserve16,
                    c.szinan_preserve32,
                    c.szinan_preserve64,
                ],
            ),
        ];
        for (cap, mode, offered) in modes {
            for ((w, offered), used) in [16u32, 32, 64].into_iter().zip(offered).zip(used) {
                if offered && used {
                    self.cap(cap);
                    self.ext("SPV_KHR_float_controls");
                    self.b.execution_mode(main, mode, [w]);
                }
            }
        }
        let push_bytes = self.push_bytes;
        let loop_status = self.loop_status.map(|_| self.status_binding());
        let report = self.report_var.map(|var| {
            let binding = self.status_binding() + loop_status.is_some() as u32;
            self.b.decorate(
                var,
                spirv::Decoration::Binding,
                vec![Operand::LiteralBit32(binding)],
            );
            binding
        });
        let debug = self.debug_var.map(|var| {
            let binding =
                self.status_binding() + loop_status.is_some() as u32 + report.is_some() as u32;
            self.b.decorate(
                var,
                spirv::Decoration::Binding,
                vec![Operand::LiteralBit32(binding)],
            );
            binding
        });
        let module = std::mem::replace(&mut self.b, Builder::new()).module();
        use rspirv::binary::Assemble;
        Ok(Emitted {
            words: module.assemble(),
            slots: std::mem::take(&mut self.slots),
            push_bytes,
            dynamic_shared_elem: self.dyn_shared_elem,
            capabilities: self.cap_names.iter().cloned().collect(),
            entry: name,
            subgroup_size: self.caps.subgroup_size,
            wave_width: self.wave_w,
            wave_mode: self.mode,
            uses_wave_verbs: self.uses_wave_verbs,
            loop_status,
            report,
            sites: std::mem::take(&mut self.sites),
            debug,
            debug_sites: std::mem::take(&mut self.debug_sites),
        })
    }
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "main".into()
    } else {
        s
    }
}

fn wave_verb_name(op: WaveOp) -> String {
    match op {
        WaveOp::Reduce(r) => format!("wave_reduce_{}", r.name()),
        WaveOp::InclusiveScan(r) => format!("wave_inclusive_scan_{}", r.name()),
        WaveOp::ExclusiveScan(r) => format!("wave_exclusive_scan_{}", r.name()),
        WaveOp::Broadcast => "wave_broadcast".into(),
        WaveOp::Shuffle => "wave_shuffle".into(),
        WaveOp::ShuffleXor => "wave_shuffle_xor".into(),
        WaveOp::ShuffleUp => "wave_shuffle_up".into(),
        WaveOp::ShuffleDown => "wave_shuffle_down".into(),
        WaveOp::Rotate => "wave_rotate".into(),
        WaveOp::Ballot => "wave_ballot".into(),
        WaveOp::Any => "wave_any".into(),
        WaveOp::All => "wave_all".into(),
        WaveOp::Elect => "wave_elect".into(),
    }
}

/// The subgroup operation and opcode of a wave reduction or scan with operator `r` over
/// values of scalar `s` (shared by the native and narrow wave lowerings).
fn group_reduction(op: WaveOp, r: ReduceOp, s: Scalar) -> (spirv::GroupOperation, Op) {
    let group = match op {
        WaveOp::Reduce(_) => spirv::GroupOperation::Reduce,
        WaveOp::InclusiveScan(_) => spirv::GroupOperation::InclusiveScan,
        _ => spirv::GroupOperation::ExclusiveScan,
    };
    let o = match (r, s) {
        (ReduceOp::Sum, s) if s.is_float() => Op::GroupNonUniformFAdd,
        (ReduceOp::Sum, _) => Op::GroupNonUniformIAdd,
        (ReduceOp::Min, s) if s.is_float() => Op::GroupNonUniformFMin,
        (ReduceOp::Min, s) if s.is_signed() => Op::GroupNonUniformSMin,
        (ReduceOp::Min, _) => Op::GroupNonUniformUMin,
        (ReduceOp::Max, s) if s.is_float() => Op::GroupNonUniformFMax,
        (ReduceOp::Max, s) if s.is_signed() => Op::GroupNonUniformSMax,
        (ReduceOp::Max, _) => Op::GroupNonUniformUMax,
        (ReduceOp::And, Scalar::Bool) => Op::GroupNonUniformLogicalAnd,
        (ReduceOp::Or, Scalar::Bool) => Op::GroupNonUniformLogicalOr,
        (ReduceOp::Xor, Scalar::Bool) => Op::GroupNonUniformLogicalXor,
        (ReduceOp::And, _) => Op::GroupNonUniformBitwiseAnd,
        (ReduceOp::Or, _) => Op::GroupNonUniformBitwiseOr,
        (ReduceOp::Xor, _) => Op::GroupNonUniformBitwiseXor,
    };
    (group, o)
}
