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
//!   needing one the device does not offer is refused by name ([`Unsupported`]).
//!
//! - **Wide vectors.** 8- and 16-lane vectors (SPIR-V shader vectors have at most 4 lanes)
//!   are arrays of their lanes; lane-wise operations on them are emitted once per lane
//!   (`Em::scalarise`), construction, swizzles and memory access gather and scatter lanes.
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

use crate::ir::{
    AtomicOp, Base, BinaryOp, Builtin, Dim, ElemType, Expr, ExprId, FenceScope, Function, Handle,
    Len, Literal, LoopKind, MathFn, MemoryOrder, Place, ReduceOp, Scalar, Stmt, StmtKind, Type,
    UnaryOp, VerifiedModule, WaveOp,
};
use rspirv::dr::{Builder, InsertPoint, Instruction, Operand};
use rspirv::spirv::{self, Capability, Op, StorageClass, Word};
use std::collections::{BTreeSet, HashMap};

// A child module, so that it extends `Em` with its private fields.
#[path = "math.rs"]
mod math;

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
            denorm_preserve16: true,
            denorm_preserve32: true,
            denorm_preserve64: true,
            szinan_preserve16: true,
            szinan_preserve32: true,
            szinan_preserve64: true,
            folds_float_identities: true,
            flushes_f32_subnormals: false,
            loop_limit: Some(LLVMPIPE_LOOP_LIMIT),
        }
    }
}

/// A construct this kernel uses that Vulkan or this device cannot run, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unsupported on this Vulkan device: {}", self.0)
    }
}

type R<T> = Result<T, Unsupported>;

/// An open `if` of [`Em::guard_begin`]: its merge block and the predicate it suspended.
struct Guard {
    merge: Word,
    saved: Option<Word>,
}

fn refuse<T>(what: impl Into<String>) -> R<T> {
    Err(Unsupported(what.into()))
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

/// Emits `kernel` of `module` for a device offering `caps`.
pub fn emit_kernel(
    module: &VerifiedModule,
    kernel: Handle<Function>,
    caps: &Caps,
) -> Result<Emitted, Unsupported> {
    let f = module.function(kernel);
    let s = caps.subgroup_size.max(1);
    let w = f.attrs.wave.map_or(s, |(w, _)| w);
    if !w.is_power_of_two() || w > 64 {
        return refuse(format!(
            "@wave({w}) (a wave is a power of two from 1 to 64)"
        ));
    }
    let mode = match w.cmp(&s) {
        std::cmp::Ordering::Equal => WaveMode::Native,
        std::cmp::Ordering::Less => WaveMode::Narrow,
        std::cmp::Ordering::Greater => WaveMode::Virtual { slots: w / s },
    };
    let mut em = Em::new(module, caps);
    em.wave_w = w;
    em.mode = mode;
    em.emit_entry(kernel)
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
}

struct Em<'a> {
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
}

fn ids(ws: &[Word]) -> Vec<Operand> {
    ws.iter().map(|&w| Operand::IdRef(w)).collect()
}

/// GLSL.std.450 instruction numbers.
mod glsl {
    pub const ROUND_EVEN: u32 = 2;
    pub const TRUNC: u32 = 3;
    pub const FABS: u32 = 4;
    pub const SABS: u32 = 5;
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

impl<'a> Em<'a> {
    fn new(m: &'a VerifiedModule, caps: &'a Caps) -> Self {
        let mut b = Builder::new();
        b.set_version(1, 3);
        let glsl = b.ext_inst_import("GLSL.std.450");
        b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::GLSL450);
        Em {
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

    fn need_scalar(&mut self, s: Scalar) -> R<()> {
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

    fn scalar_ty(&mut self, s: Scalar) -> R<Word> {
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

    fn vec_ty(&mut self, s: Scalar, n: u8) -> R<Word> {
        let e = self.scalar_ty(s)?;
        if n == 1 {
            return Ok(e);
        }
        if n > 4 {
            // SPIR-V vectors for shaders have 2-4 lanes (Vector16 is a Kernel capability):
            // a wide vector is an array of its lanes, and every lane-wise operation on one is
            // scalarised (`Em::scalarise`).
            let u = self.u32t();
            let c = self.konst(u, n as u64);
            let t = self.tk(TyKey::Array(e, c));
            self.wide.insert(t, (e, n));
            return Ok(t);
        }
        Ok(self.tk(TyKey::Vec(e, n as u32)))
    }

    fn elem_ty(&mut self, e: ElemType) -> R<Word> {
        self.vec_ty(e.scalar, e.lanes)
    }

    fn u32t(&mut self) -> Word {
        self.tk(TyKey::Int(32, false))
    }
    fn boolt(&mut self) -> Word {
        self.tk(TyKey::Bool)
    }

    fn value_ty(&mut self, t: Type) -> R<Word> {
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
    fn const_of(&mut self, s: Scalar, lanes: u8, bits: u64) -> R<Word> {
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

    fn emit_entry(&mut self, kh: Handle<Function>) -> R<Emitted> {
        self.cap(Capability::Shader);
        let f = self.m.function(kh);
        // Workgroup size from spec constants 0..2.
        let u = self.u32t();
        let mut parts = Vec::new();
        for (d, id) in SPEC_BLOCK.iter().enumerate() {
            let c = self.b.spec_constant_bit32(u, 1);
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
        })
    }
}

// ---- the loop-limit probe (Caps::loop_limit) ----
impl Em<'_> {
    /// The kernel's `OpReturn`, after the loop-limit probe where a loop may have run.
    fn kernel_return(&mut self) {
        if self.caps.loop_limit.is_some() && self.loop_opened {
            self.loop_limit_probe();
        }
        self.b.ret().expect("in a block");
    }

    /// The status buffer's binding: the one after the buffer parameters'.
    fn status_binding(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| matches!(s, ParamSlot::Buffer { .. }))
            .count() as u32
    }

    fn status_var(&mut self) -> Word {
        if let Some(v) = self.loop_status {
            return v;
        }
        let st = self
            .buffer_struct(Scalar::U32, false)
            .expect("32-bit buffer elements need no capability");
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, st));
        let var = self.b.id();
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(pt),
                Some(var),
                vec![Operand::StorageClass(StorageClass::StorageBuffer)],
            ));
        self.b.decorate(
            var,
            spirv::Decoration::DescriptorSet,
            vec![Operand::LiteralBit32(0)],
        );
        let binding = self.status_binding();
        self.b.decorate(
            var,
            spirv::Decoration::Binding,
            vec![Operand::LiteralBit32(binding)],
        );
        self.loop_status = Some(var);
        var
    }

    /// Finds out whether the driver's loop limiter is spent and flags it in the status buffer.
    ///
    /// llvmpipe keeps one limiter per invocation for all its loops and never resets it:
    /// once a loop has been cut short, every later loop is left after one pass. So a loop
    /// that should run `bound` (= 2, read from the status buffer so that the compiler can
    /// neither unroll the loop nor know its trip count) passes, run just before the
    /// invocation ends, comes out short exactly when the limiter was spent before it (or had
    /// fewer than 2 passes left: a kernel whose loops took 65,534 or 65,535 passes, still
    /// right, is refused too). A
    /// check after each of the kernel's own loops would not do: the compiler knows a loop
    /// is only left through its exits and folds such a check away.
    fn loop_limit_probe(&mut self) {
        let u = self.u32t();
        let bt = self.boolt();
        let zero = self.cu32(0);
        let one = self.cu32(1);
        let bound = self.probe_bound();
        let k = self.fn_var(u);
        self.store(k, zero);
        let (header, condb, bodyb, cont, merge) = (
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
        );
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(condb);
        self.block(condb);
        let x = self.load(u, k);
        let more = self.opi(Op::ULessThan, bt, &[x, bound]);
        self.branch_cond(more, bodyb, merge);
        self.block(bodyb);
        let y = self.opi(Op::IAdd, u, &[x, one]);
        self.store(k, y);
        self.branch(cont);
        self.block(cont);
        self.branch(header);
        self.block(merge);
        // `!=` rather than `<`: a different comparison from the loop's, which the compiler
        // cannot take as already decided at the merge.
        let x = self.load(u, k);
        let cut = self.opi(Op::INotEqual, bt, &[x, bound]);
        let (set, after) = (self.b.id(), self.b.id());
        self.sel_merge(after);
        self.branch_cond(cut, set, after);
        self.block(set);
        self.flag_loop_limit();
        self.branch(after);
        self.block(after);
    }

    /// Word `k` of the status buffer: 0 the flag, 1 the probe bound.
    fn status_word(&mut self, k: u32) -> Word {
        let status = self.status_var();
        let u = self.u32t();
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, u));
        let zero = self.cu32(0);
        let k = self.cu32(k);
        self.opi(Op::AccessChain, pt, &[status, zero, k])
    }

    /// The probe loop's bound, 2, loaded from the status buffer (so no compiler knows it).
    fn probe_bound(&mut self) -> Word {
        let p = self.status_word(1);
        let u = self.u32t();
        self.load(u, p)
    }

    /// Sets the status flag: the launch reached the driver's loop limit.
    fn flag_loop_limit(&mut self) {
        let p = self.status_word(0);
        let scope = self.cu32(SCOPE_DEVICE);
        let relaxed = self.cu32(0);
        let one = self.cu32(1);
        self.op_void(
            Op::AtomicStore,
            vec![
                Operand::IdRef(p),
                Operand::IdScope(scope),
                Operand::IdMemorySemantics(relaxed),
                Operand::IdRef(one),
            ],
        );
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

// ---- declarations: buffers, push constants, shared memory ----
impl Em<'_> {
    fn carrier(s: Scalar) -> Scalar {
        match s {
            Scalar::Bool | Scalar::U8 | Scalar::U16 => Scalar::U32,
            Scalar::I8 | Scalar::I16 => Scalar::I32,
            Scalar::F16 => Scalar::F32,
            s => s,
        }
    }

    /// The `Block` struct of one buffer parameter: a struct of its own for every buffer, never
    /// one shared by parameters of the same element type. NVIDIA's Vulkan driver (580.159 on
    /// an H200, issue 14) applies the `NonWritable` of the first variable declared with a
    /// struct type to every variable of that type: `(b: buf<f32>, y: buf<f32, rw>)` sharing
    /// one struct had `y`'s loads treated as invariant (hoisted out of an accumulating loop),
    /// so `y[i] += ...` kept only its last term. glslang and DXC never emit a read-only and a
    /// writable block of one type; a struct per buffer (read-only ones also decorated on
    /// their member, as glslang does) keeps every driver on the path it is tested on.
    fn buffer_struct(&mut self, ss: Scalar, read_only: bool) -> R<Word> {
        match ss.bits() {
            8 => {
                if !self.caps.storage8 {
                    return refuse("8-bit buffer elements (storageBuffer8BitAccess)");
                }
                self.cap(Capability::StorageBuffer8BitAccess);
                self.ext("SPV_KHR_8bit_storage");
            }
            16 => {
                if !self.caps.storage16 {
                    return refuse("16-bit buffer elements (storageBuffer16BitAccess)");
                }
                self.cap(Capability::StorageBuffer16BitAccess);
                self.ext("SPV_KHR_16bit_storage");
            }
            64 => {
                if !self.caps.int64 {
                    return refuse("64-bit buffer elements (shaderInt64)");
                }
                self.cap(Capability::Int64);
            }
            _ => {}
        }
        let st = self.scalar_ty_raw(ss);
        let rt = self.tk(TyKey::Runtime(st));
        if self.decorated.insert(rt) {
            self.b.decorate(
                rt,
                spirv::Decoration::ArrayStride,
                vec![Operand::LiteralBit32(ss.size())],
            );
        }
        // A fresh id: `type_struct` would hand back an identical struct already declared.
        let id = self.b.id();
        let s = self.b.type_struct_id(Some(id), vec![rt]);
        self.b.decorate(s, spirv::Decoration::Block, vec![]);
        self.b.member_decorate(
            s,
            0,
            spirv::Decoration::Offset,
            vec![Operand::LiteralBit32(0)],
        );
        if read_only {
            self.b
                .member_decorate(s, 0, spirv::Decoration::NonWritable, vec![]);
        }
        Ok(s)
    }

    fn declare_params(&mut self, f: &Function) -> R<()> {
        let mut binding = 0u32;
        let mut members: Vec<(Word, u32)> = Vec::new();
        let mut offset = 0u32;
        let mut push_member = vec![None; f.params.len()];
        let mut len_member = vec![None; f.params.len()];
        let mut slots = Vec::new();
        let mut add_member = |em: &mut Em, ty: Word, size: u32, align: u32| -> (u32, u32) {
            offset = offset.div_ceil(align) * align;
            let at = offset;
            offset += size;
            members.push((ty, at));
            let _ = em;
            (members.len() as u32 - 1, at)
        };
        for p in &f.params {
            match p.ty {
                Type::Buffer { elem, access } => {
                    let ss = Self::storage_scalar(elem.scalar);
                    let read_only = access == crate::ir::Access::Read;
                    let st = self.buffer_struct(ss, read_only)?;
                    let storage = self.scalar_ty_raw(ss);
                    let ptr = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, st));
                    let var = self
                        .b
                        .variable(ptr, None, StorageClass::StorageBuffer, None);
                    self.b.decorate(
                        var,
                        spirv::Decoration::DescriptorSet,
                        vec![Operand::LiteralBit32(0)],
                    );
                    self.b.decorate(
                        var,
                        spirv::Decoration::Binding,
                        vec![Operand::LiteralBit32(binding)],
                    );
                    if read_only {
                        self.b.decorate(var, spirv::Decoration::NonWritable, vec![]);
                    }
                    self.buffers.push(Some(BufferVar {
                        var,
                        storage,
                        scalar: ss,
                        elem,
                    }));
                    slots.push(ParamSlot::Buffer {
                        binding,
                        len_offset: 0,
                    });
                    binding += 1;
                }
                Type::Scalar(_) | Type::Vector(..) | Type::Tag(_) => {
                    self.buffers.push(None);
                    let (s, n) = match p.ty {
                        Type::Scalar(s) => (s, 1),
                        Type::Vector(s, n) => (s, n),
                        _ => (Scalar::U32, 1),
                    };
                    let c = Self::carrier(s);
                    if n > 4 {
                        // A wide vector travels as its lanes, one member each (consecutive,
                        // as the runtime writes them); `load_params` gathers them.
                        let st = self.scalar_ty(c)?;
                        let mut first = None;
                        for _ in 0..n {
                            let m = add_member(self, st, c.size(), c.size());
                            first.get_or_insert(m);
                        }
                        let (idx, at0) = first.expect("a wide vector has lanes");
                        push_member[slots.len()] = Some(idx);
                        slots.push(ParamSlot::Value {
                            offset: at0,
                            carrier: ElemType::vector(c, n),
                        });
                        continue;
                    }
                    let ty = self.vec_ty(c, n)?;
                    let size = c.size() * n as u32;
                    let align = c.size()
                        * if n == 1 {
                            1
                        } else if n == 2 {
                            2
                        } else {
                            4
                        };
                    let (idx, at) = add_member(self, ty, size, align);
                    push_member[slots.len()] = Some(idx);
                    slots.push(ParamSlot::Value {
                        offset: at,
                        carrier: ElemType::vector(c, n),
                    });
                }
                _ => return refuse(format!("a kernel parameter of type {:?}", p.ty)),
            }
        }
        let u = self.u32t();
        for (i, p) in f.params.iter().enumerate() {
            if matches!(p.ty, Type::Buffer { .. }) {
                let (idx, at) = add_member(self, u, 4, 4);
                len_member[i] = Some(idx);
                if let ParamSlot::Buffer { len_offset, .. } = &mut slots[i] {
                    *len_offset = at;
                }
            }
        }
        self.push_bytes = offset.div_ceil(4) * 4;
        if !members.is_empty() {
            let st = self
                .b
                .type_struct(members.iter().map(|m| m.0).collect::<Vec<_>>());
            self.b.decorate(st, spirv::Decoration::Block, vec![]);
            for (i, (_, at)) in members.iter().enumerate() {
                self.b.member_decorate(
                    st,
                    i as u32,
                    spirv::Decoration::Offset,
                    vec![Operand::LiteralBit32(*at)],
                );
            }
            let ptr = self.tk(TyKey::Ptr(StorageClass::PushConstant, st));
            self.push_var = self.b.variable(ptr, None, StorageClass::PushConstant, None);
            self.push_members = members.iter().map(|m| m.0).collect();
        }
        self.push_member = push_member;
        self.len_member = len_member;
        self.slots = slots;
        Ok(())
    }

    fn shared_storage(&mut self, elem: ElemType) -> R<(Word, ElemType)> {
        let s = match elem.scalar {
            Scalar::F32 => Scalar::U32,
            Scalar::F64 => Scalar::U64,
            s => s,
        };
        let e = ElemType::vector(s, elem.lanes);
        Ok((self.elem_ty(e)?, e))
    }

    fn declare_shared(&mut self, f: &Function) -> R<()> {
        for (_, d) in f.shared.iter() {
            let (et, _) = self.shared_storage(d.elem)?;
            let u = self.u32t();
            let len = match d.len {
                Some(Len::Fixed(n)) => self.konst(u, n.max(1) as u64),
                Some(Len::Const(_)) => {
                    return refuse("a template-sized shared array left uninstantiated")
                }
                None => {
                    let c = self.b.spec_constant_bit32(u, 1);
                    self.b.decorate(
                        c,
                        spirv::Decoration::SpecId,
                        vec![Operand::LiteralBit32(SPEC_SHARED_LEN)],
                    );
                    self.dyn_shared_elem = Some(d.elem.size());
                    c
                }
            };
            let at = self.tk(TyKey::Array(et, len));
            let ptr = self.tk(TyKey::Ptr(StorageClass::Workgroup, at));
            let var = self.b.variable(ptr, None, StorageClass::Workgroup, None);
            self.shared.push((var, d.elem));
        }
        Ok(())
    }

    fn push_load(&mut self, member: u32) -> Word {
        let ty = self.push_members[member as usize];
        let ptr = self.tk(TyKey::Ptr(StorageClass::PushConstant, ty));
        let c = self.cu32(member);
        let p = self.opi(Op::AccessChain, ptr, &[self.push_var, c]);
        self.load(ty, p)
    }

    /// The kernel's value parameters, loaded once in the entry block.
    fn load_params(&mut self, f: &Function) -> R<Vec<Word>> {
        let mut out = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            let Some(member) = self.push_member[i] else {
                out.push(0);
                continue;
            };
            let (s, n) = match p.ty {
                Type::Scalar(s) => (s, 1),
                Type::Vector(s, n) => (s, n),
                _ => (Scalar::U32, 1),
            };
            let c = Self::carrier(s);
            let v = if n > 4 {
                let lanes: Vec<Word> = (0..n as u32).map(|k| self.push_load(member + k)).collect();
                let t = self.vec_ty(c, n)?;
                self.opi(Op::CompositeConstruct, t, &lanes)
            } else {
                self.push_load(member)
            };
            let v = if c == s { v } else { self.cast(v, c, s, n)? };
            out.push(v);
        }
        Ok(out)
    }
}

// ---- statements and structured control flow ----
impl Em<'_> {
    fn frame(&self) -> &Frame {
        self.frames.last().expect("a frame is open")
    }

    fn func(&self) -> &Function {
        self.m.function(self.frame().func)
    }

    fn local_var(&mut self, h: Handle<crate::ir::Local>) -> R<Word> {
        if let Some(v) = self.frame().locals[h.index()] {
            return Ok(v);
        }
        let ty = self.func().locals[h].ty;
        let t = self.value_ty(ty)?;
        let v = self.fn_var(t);
        self.frames.last_mut().expect("frame").locals[h.index()] = Some(v);
        Ok(v)
    }

    fn local_ty(&self, h: Handle<crate::ir::Local>) -> Type {
        self.func().locals[h].ty
    }

    fn emit_block(&mut self, block: &[Stmt]) -> R<()> {
        for s in block {
            if self.terminated() {
                break;
            }
            if self.virtual_here() {
                self.virtual_stmt(s)?;
            } else {
                self.stmt(s)?;
            }
        }
        Ok(())
    }

    fn jump_var(&mut self) -> Word {
        if let Some(v) = self.jump_var {
            return v;
        }
        let u = self.u32t();
        let zero = self.konst(u, 0);
        let p = self.tk(TyKey::Ptr(StorageClass::Function, u));
        let id = self.b.id();
        self.fn_vars.push(Instruction::new(
            Op::Variable,
            Some(p),
            Some(id),
            vec![
                Operand::StorageClass(StorageClass::Function),
                Operand::IdRef(zero),
            ],
        ));
        self.jump_var = Some(id);
        id
    }

    /// Leaves for region `target`: its merge (`continue_ == false`) or its continue block.
    fn jump(&mut self, target: usize, continue_: bool) {
        let inner = self.regions.len() - 1;
        if !continue_ {
            self.regions[target].reached = true;
        }
        if target == inner {
            let r = &self.regions[target];
            let to = if continue_ { r.cont } else { r.merge };
            self.branch(to);
            return;
        }
        let code = self.regions[target].code + continue_ as u32;
        let jv = self.jump_var();
        let c = self.cu32(code);
        self.store(jv, c);
        for r in &mut self.regions[target + 1..] {
            r.routed = true;
            r.reached = true;
        }
        let merge = self.regions[inner].merge;
        self.branch(merge);
    }

    /// After a region's merge: take a routed jump aimed at the enclosing region, or pass it
    /// on outward.
    fn ladder_rung(&mut self) {
        let jv = self.jump_var();
        let u = self.u32t();
        let bt = self.boolt();
        let zero = self.konst(u, 0);
        let j = self.load(u, jv);
        let nz = self.opi(Op::INotEqual, bt, &[j, zero]);
        let (m, h) = (self.b.id(), self.b.id());
        self.sel_merge(m);
        self.branch_cond(nz, h, m);
        self.block(h);
        let e = self.regions.len() - 1;
        let (code, kind, cont, merge) = {
            let r = &self.regions[e];
            (r.code, r.kind, r.cont, r.merge)
        };
        let cb = self.cu32(code);
        let cc = self.cu32(code + 1);
        let is_b = self.opi(Op::IEqual, bt, &[j, cb]);
        let is_c = self.opi(Op::IEqual, bt, &[j, cc]);
        let hit = self.opi(Op::LogicalOr, bt, &[is_b, is_c]);
        let nj = self.opi(Op::Select, u, &[hit, zero, j]);
        self.store(jv, nj);
        self.regions[e].reached = true;
        if kind == RegionKind::Loop {
            self.branch_cond(is_c, cont, merge);
        } else {
            self.branch(merge);
        }
        self.block(m);
    }

    fn push_region(&mut self, kind: RegionKind, label: Option<String>, merge: Word, cont: Word) {
        let code = self.next_code;
        self.next_code += 2;
        self.regions.push(Region {
            kind,
            label,
            merge,
            cont,
            frame: self.frames.len() - 1,
            code,
            routed: false,
            reached: false,
        });
    }

    /// Opens the merge block of a popped region (unreachable when nothing leaves for it).
    fn close_region(&mut self, r: Region) {
        self.block(r.merge);
        if !r.reached {
            self.b.unreachable().expect("in a block");
            return;
        }
        if r.routed && !self.regions.is_empty() {
            self.ladder_rung();
        }
    }

    fn find_loop(&self, label: &Option<String>) -> R<usize> {
        let frame = self.frames.len() - 1;
        for (i, r) in self.regions.iter().enumerate().rev() {
            if r.frame != frame || r.kind != RegionKind::Loop {
                continue;
            }
            if label.is_none() || r.label == *label {
                return Ok(i);
            }
        }
        refuse(format!("a break or continue outside its loop ({label:?})"))
    }

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        let roots = s.kind.value_roots();
        self.prefetch(&roots)?;
        let r = self.stmt_body(s);
        self.prefetched.clear();
        r
    }

    /// Issues the statement's buffer loads before any of its arithmetic: a load's address
    /// only, never its use, waits on earlier work. Otherwise a load that follows a
    /// branch the arithmetic makes (f32 `+ - *` on a device that flushes subnormals,
    /// `f32_unflushed`) waits for the branch, whose condition waits for the earlier load:
    /// one load in flight at a time (on the H200 saxpy lost 30 %). Only loads that run
    /// whatever happens are moved (`Function::unconditional_loads`), and only scalar ones.
    fn prefetch(&mut self, roots: &[ExprId]) -> R<()> {
        let Some(loads) = self.func().unconditional_loads(roots) else {
            return Ok(());
        };
        let depth = self.frames.len();
        for e in loads {
            if self.ty_of(e).and_then(|t| t.lanes()) != Some(1)
                || self.needs_scalarising(e)?.is_some()
            {
                continue;
            }
            let w = self.expr(e)?;
            self.prefetched.insert((depth, e), w);
        }
        Ok(())
    }

    fn stmt_body(&mut self, s: &Stmt) -> R<()> {
        match &s.kind {
            StmtKind::Let { local, init } => {
                let v = self.local_var(*local)?;
                if let Some(e) = init {
                    let x = self.expr(*e)?;
                    self.store(v, x);
                }
            }
            StmtKind::Assign { place, value } => match place {
                Place::Local(h) => {
                    let x = self.expr(*value)?;
                    let v = self.local_var(*h)?;
                    self.store(v, x);
                }
                Place::Lane { local, lane } => {
                    let x = self.expr(*value)?;
                    let v = self.local_var(*local)?;
                    let s = self.local_ty(*local).scalar().unwrap_or(Scalar::U32);
                    let st = self.scalar_ty(s)?;
                    let p = self.tk(TyKey::Ptr(StorageClass::Function, st));
                    let c = self.cu32(*lane as u32);
                    let ptr = self.opi(Op::AccessChain, p, &[v, c]);
                    self.store(ptr, x);
                }
                Place::Element { base, index } => {
                    let i = self.expr_u32(*index)?;
                    let x = self.expr(*value)?;
                    let elem = self.base_elem(*base)?;
                    self.store_elem(*base, elem, i, x)?;
                }
            },
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.expr(*cond)?;
                let (t, m) = (self.b.id(), self.b.id());
                let e = if else_block.is_empty() {
                    m
                } else {
                    self.b.id()
                };
                self.sel_merge(m);
                self.branch_cond(c, t, e);
                self.block(t);
                self.emit_block(then_block)?;
                let then_done = self.terminated();
                self.branch(m);
                let mut else_done = false;
                if !else_block.is_empty() {
                    self.block(e);
                    self.emit_block(else_block)?;
                    else_done = self.terminated();
                    self.branch(m);
                }
                self.block(m);
                if then_done && else_done {
                    self.b.unreachable().expect("in a block");
                }
            }
            StmtKind::Loop { label, kind, body } => self.emit_loop(label, kind, body)?,
            StmtKind::Break(label) => {
                let t = self.find_loop(label)?;
                self.jump(t, false);
            }
            StmtKind::Continue(label) => {
                let t = self.find_loop(label)?;
                self.jump(t, true);
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => Some(self.expr(*e)?),
                    None => None,
                };
                let (ret_var, body) = (self.frame().ret_var, self.frame().body_region);
                match body {
                    None => self.kernel_return(),
                    Some(r) => {
                        if let (Some(rv), Some(v)) = (ret_var, v) {
                            self.store(rv, v);
                        }
                        self.jump(r, false);
                    }
                }
            }
            StmtKind::Expr(e) => {
                self.expr_void(*e)?;
            }
            StmtKind::Barrier => {
                let wg = self.cu32(SCOPE_WORKGROUP);
                let sem = self.cu32(SEM_ACQ_REL | SEM_WORKGROUP | SEM_UNIFORM);
                self.op_void(
                    Op::ControlBarrier,
                    vec![
                        Operand::IdScope(wg),
                        Operand::IdScope(wg),
                        Operand::IdMemorySemantics(sem),
                    ],
                );
            }
            StmtKind::Fence(scope) => {
                let (sc, bits) = match scope {
                    FenceScope::Workgroup => (SCOPE_WORKGROUP, SEM_WORKGROUP | SEM_UNIFORM),
                    FenceScope::Device => (SCOPE_DEVICE, SEM_UNIFORM),
                };
                let sc = self.cu32(sc);
                let sem = self.cu32(SEM_ACQ_REL | bits);
                self.op_void(
                    Op::MemoryBarrier,
                    vec![Operand::IdScope(sc), Operand::IdMemorySemantics(sem)],
                );
            }
            StmtKind::VStore {
                base, index, value, ..
            } => {
                let i = self.expr_u32(*index)?;
                let fh = self.frame().func;
                let vt = self.m.expr_type(fh, *value);
                let x = self.expr(*value)?;
                let (s, n) = match vt {
                    Some(Type::Vector(s, n)) => (s, n),
                    Some(Type::Scalar(s)) => (s, 1),
                    _ => return refuse("vstore of a non-vector value"),
                };
                let se = ElemType::scalar(s);
                for k in 0..n {
                    let lane = if n == 1 {
                        x
                    } else {
                        let st = self.scalar_ty(s)?;
                        self.op(
                            Op::CompositeExtract,
                            st,
                            vec![Operand::IdRef(x), Operand::LiteralBit32(k as u32)],
                        )
                    };
                    let kk = self.cu32(k as u32);
                    let u = self.u32t();
                    let ik = self.opi(Op::IAdd, u, &[i, kk]);
                    self.store_elem(*base, se, ik, lane)?;
                }
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => self.matrix_store(*value, *base, *offset, *stride)?,
        }
        Ok(())
    }

    fn emit_loop(&mut self, label: &Option<String>, kind: &LoopKind, body: &[Stmt]) -> R<()> {
        let mut for_state = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = self.expr(*start)?;
            let e = self.expr(*end)?;
            let st = match step {
                Some(x) => self.expr(*x)?,
                None => {
                    let sc = self.local_ty(*var).scalar().unwrap_or(Scalar::U32);
                    self.const_of(sc, 1, 1)?
                }
            };
            let v = self.local_var(*var)?;
            self.store(v, s);
            for_state = Some((*var, v, e, st));
        }
        let (header, condb, bodyb, cont, merge) = (
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
        );
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(condb);
        self.block(condb);
        self.push_region(RegionKind::Loop, label.clone(), merge, cont);
        match kind {
            LoopKind::Infinite => self.branch(bodyb),
            LoopKind::While(c) => {
                let c = self.expr(*c)?;
                self.branch_cond(c, bodyb, merge);
                self.regions.last_mut().expect("region").reached = true;
            }
            LoopKind::For { .. } => {
                let (var, v, e, _) = for_state.expect("for state");
                let sc = self.local_ty(var).scalar().unwrap_or(Scalar::U32);
                let t = self.scalar_ty(sc)?;
                let x = self.load(t, v);
                let bt = self.boolt();
                let lt = if sc.is_signed() {
                    Op::SLessThan
                } else {
                    Op::ULessThan
                };
                let c = self.opi(lt, bt, &[x, e]);
                self.branch_cond(c, bodyb, merge);
                self.regions.last_mut().expect("region").reached = true;
            }
        }
        self.block(bodyb);
        self.emit_block(body)?;
        self.branch(cont);
        self.block(cont);
        if let Some((var, v, _, st)) = for_state {
            let sc = self.local_ty(var).scalar().unwrap_or(Scalar::U32);
            let t = self.scalar_ty(sc)?;
            let x = self.load(t, v);
            let y = self.opi(Op::IAdd, t, &[x, st]);
            self.store(v, y);
        }
        // A loop nothing leaves (no break reaches its merge) is still left where the driver's
        // loop limiter runs out: give it an exit the compiler cannot rule out (the status
        // buffer's probe bound is never 0), and flag the launch there.
        let limiter_exit = self.caps.loop_limit.is_some()
            && !self.regions.last().expect("region").reached
            && !self.terminated();
        if limiter_exit {
            let bound = self.probe_bound();
            let (u, bt) = (self.u32t(), self.boolt());
            let zero = self.konst(u, 0);
            let never = self.opi(Op::IEqual, bt, &[bound, zero]);
            self.branch_cond(never, merge, header);
        } else {
            self.branch(header);
        }
        let r = self.regions.pop().expect("region");
        if limiter_exit {
            self.block(r.merge);
            self.flag_loop_limit();
            self.b.ret().expect("in a block");
            return Ok(());
        }
        self.close_region(r);
        Ok(())
    }

    /// Inlines helper `h` with argument values `args`; its result, if it has one.
    fn inline_call(&mut self, h: Handle<Function>, args: Vec<Word>) -> R<Option<Word>> {
        let helper = self.m.function(h);
        if self.frames.iter().any(|f| f.func == h) {
            return refuse(format!("recursive call of {}", helper.name));
        }
        if !helper.shared.is_empty() {
            return refuse(format!("shared memory declared in helper {}", helper.name));
        }
        let ret_ty = match helper.ret {
            Some(t) => Some(self.value_ty(t)?),
            None => None,
        };
        let ret_var = ret_ty.map(|t| self.fn_var(t));
        let (header, bodyb, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(bodyb);
        self.block(bodyb);
        self.frames.push(Frame {
            func: h,
            locals: vec![None; helper.locals.len()],
            params: args,
            ret_var,
            body_region: None,
        });
        self.push_region(RegionKind::Body, None, merge, cont);
        let ri = self.regions.len() - 1;
        self.frames.last_mut().expect("frame").body_region = Some(ri);
        self.emit_block(&helper.body)?;
        if !self.terminated() {
            self.regions[ri].reached = true;
            self.branch(merge);
        }
        self.block(cont);
        self.branch(header);
        let mut r = self.regions.pop().expect("region");
        self.frames.pop();
        // A helper that never returns still continues its caller's code here (its end is UB).
        r.reached = true;
        self.close_region(r);
        Ok(match (ret_var, ret_ty) {
            (Some(v), Some(t)) => Some(self.load(t, v)),
            _ => None,
        })
    }
}

// ---- memory access ----
impl Em<'_> {
    fn base_elem(&self, base: Base) -> R<ElemType> {
        match base {
            Base::Param(p) => match self.buffers.get(p as usize) {
                Some(Some(b)) => Ok(b.elem),
                _ => refuse("an index into a parameter that is not a buffer"),
            },
            Base::Shared(h) => Ok(self.shared[h.index()].1),
            Base::Local(h) => match self.local_ty(h) {
                Type::Array { elem, .. } => Ok(elem),
                _ => refuse("an index into a local that is not an array"),
            },
        }
    }

    /// A pointer to scalar `k` of a buffer (a runtime array of storage scalars).
    fn buffer_ptr(&mut self, p: u32, scalar_index: Word) -> (Word, Word, Scalar) {
        let (var, storage, scalar) = {
            let b = self.buffers[p as usize]
                .as_ref()
                .expect("a buffer parameter");
            (b.var, b.storage, b.scalar)
        };
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, storage));
        let z = self.cu32(0);
        let ptr = self.opi(Op::AccessChain, pt, &[var, z, scalar_index]);
        (ptr, storage, scalar)
    }

    /// Storage bits → value of scalar `s` (floats are stored as unsigned integers, `bool` as
    /// a byte in buffers).
    fn stored_to_value(&mut self, v: Word, stored: Scalar, s: Scalar, lanes: u8) -> R<Word> {
        if stored == s {
            return Ok(v);
        }
        let t = self.vec_ty(s, lanes)?;
        if lanes > 4 {
            let mut ls = Vec::new();
            for k in 0..lanes {
                let x = self.lane_of_raw(v, stored, k);
                ls.push(self.stored_to_value(x, stored, s, 1)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        if s == Scalar::Bool {
            let u = if lanes == 1 {
                self.u32t()
            } else {
                let u = self.u32t();
                self.tk(TyKey::Vec(u, lanes as u32))
            };
            let w = self.opi(Op::UConvert, u, &[v]);
            let z = self.konst(u, 0);
            return Ok(self.opi(Op::INotEqual, t, &[w, z]));
        }
        Ok(self.opi(Op::Bitcast, t, &[v]))
    }

    fn value_to_stored(&mut self, v: Word, s: Scalar, stored: Scalar, stored_ty: Word) -> Word {
        if stored == s {
            return v;
        }
        if let Some(&(lane_ty, n)) = self.wide.get(&stored_ty) {
            let ls: Vec<Word> = (0..n)
                .map(|k| {
                    let x = self.lane_of_raw(v, s, k);
                    self.value_to_stored(x, s, stored, lane_ty)
                })
                .collect();
            return self.opi(Op::CompositeConstruct, stored_ty, &ls);
        }
        if s == Scalar::Bool {
            let u = self.u32t();
            let one = self.konst(u, 1);
            let zero = self.konst(u, 0);
            let w = self.opi(Op::Select, u, &[v, one, zero]);
            return self.opi(Op::UConvert, stored_ty, &[w]);
        }
        self.opi(Op::Bitcast, stored_ty, &[v])
    }

    /// Lane `k` of a wide value of scalar `s` (its type already made).
    fn lane_of_raw(&mut self, v: Word, s: Scalar, k: u8) -> Word {
        let st = self.scalar_ty_raw(s);
        self.op(
            Op::CompositeExtract,
            st,
            vec![Operand::IdRef(v), Operand::LiteralBit32(k as u32)],
        )
    }

    fn elem_ptr_other(&mut self, base: Base, index: Word) -> R<(Word, Word, ElemType)> {
        match base {
            Base::Shared(h) => {
                let (var, elem) = self.shared[h.index()];
                let (st, se) = self.shared_storage(elem)?;
                let pt = self.tk(TyKey::Ptr(StorageClass::Workgroup, st));
                Ok((self.opi(Op::AccessChain, pt, &[var, index]), st, se))
            }
            Base::Local(h) => {
                let var = self.local_var(h)?;
                let elem = self.base_elem(base)?;
                let et = self.elem_ty(elem)?;
                let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
                Ok((self.opi(Op::AccessChain, pt, &[var, index]), et, elem))
            }
            Base::Param(_) => unreachable!("buffers take buffer_ptr"),
        }
    }

    /// Element `index` of `base`, whose elements are `elem` (for `vload`, the scalar).
    fn load_elem(&mut self, base: Base, elem: ElemType, index: Word) -> R<Word> {
        match base {
            Base::Param(p) => {
                let mut lanes = Vec::new();
                let u = self.u32t();
                let first = if elem.lanes == 1 {
                    index
                } else {
                    let n = self.cu32(elem.lanes as u32);
                    self.opi(Op::IMul, u, &[index, n])
                };
                for k in 0..elem.lanes {
                    let at = if k == 0 {
                        first
                    } else {
                        let kk = self.cu32(k as u32);
                        self.opi(Op::IAdd, u, &[first, kk])
                    };
                    let (ptr, st, ss) = self.buffer_ptr(p, at);
                    let raw = self.load(st, ptr);
                    lanes.push(self.stored_to_value(raw, ss, elem.scalar, 1)?);
                }
                if elem.lanes == 1 {
                    Ok(lanes[0])
                } else {
                    let t = self.elem_ty(elem)?;
                    Ok(self.opi(Op::CompositeConstruct, t, &lanes))
                }
            }
            _ => {
                let (ptr, st, se) = self.elem_ptr_other(base, index)?;
                let raw = self.load(st, ptr);
                self.stored_to_value(raw, se.scalar, elem.scalar, elem.lanes)
            }
        }
    }

    fn store_elem(&mut self, base: Base, elem: ElemType, index: Word, value: Word) -> R<()> {
        match base {
            Base::Param(p) => {
                let u = self.u32t();
                let first = if elem.lanes == 1 {
                    index
                } else {
                    let n = self.cu32(elem.lanes as u32);
                    self.opi(Op::IMul, u, &[index, n])
                };
                for k in 0..elem.lanes {
                    let at = if k == 0 {
                        first
                    } else {
                        let kk = self.cu32(k as u32);
                        self.opi(Op::IAdd, u, &[first, kk])
                    };
                    let lane = if elem.lanes == 1 {
                        value
                    } else {
                        let st = self.scalar_ty(elem.scalar)?;
                        self.op(
                            Op::CompositeExtract,
                            st,
                            vec![Operand::IdRef(value), Operand::LiteralBit32(k as u32)],
                        )
                    };
                    let (ptr, st, ss) = self.buffer_ptr(p, at);
                    let w = self.value_to_stored(lane, elem.scalar, ss, st);
                    self.store(ptr, w);
                }
                Ok(())
            }
            _ => {
                let (ptr, st, se) = self.elem_ptr_other(base, index)?;
                let w = self.value_to_stored(value, elem.scalar, se.scalar, st);
                self.store(ptr, w);
                Ok(())
            }
        }
    }
}

// ---- expressions ----
impl Em<'_> {
    fn ty_of(&self, e: ExprId) -> Option<Type> {
        if let Some(&t) = self.lane_tys.get(&(self.frames.len(), e)) {
            return Some(t);
        }
        self.m.expr_type(self.frame().func, e)
    }

    /// The lane count of `e`'s type when it is a wide (8- or 16-lane) vector.
    fn wide_lanes(&self, e: ExprId) -> Option<u8> {
        match self.ty_of(e) {
            Some(Type::Vector(_, n)) if n > 4 => Some(n),
            _ => None,
        }
    }

    /// Lane `k` of a vector value of `lanes` lanes of `s` (a SPIR-V vector or, wide, an
    /// array).
    fn lane_of(&mut self, v: Word, s: Scalar, lanes: u8, k: u8) -> R<Word> {
        if lanes == 1 {
            return Ok(v);
        }
        let st = self.scalar_ty(s)?;
        Ok(self.op(
            Op::CompositeExtract,
            st,
            vec![Operand::IdRef(v), Operand::LiteralBit32(k as u32)],
        ))
    }

    /// A lane-wise operation (arithmetic, comparison, cast, math, select, lane-wise bitcast)
    /// whose result or an operand is a wide vector: the operands are evaluated
    /// once, then the operation is emitted once per lane with each wide operand replaced by
    /// its lane (and the expression typed as a scalar), and the lanes are gathered.
    fn scalarise(&mut self, e: ExprId, n: u8) -> R<Word> {
        let depth = self.frames.len();
        let expr = self.func().exprs[e].clone();
        let out_ty = self.ty_of(e);
        let mut operands = Vec::new();
        for o in expr.operands() {
            let t = self.ty_of(o);
            let v = self.expr(o)?;
            operands.push((o, v, t));
        }
        let mut lanes = Vec::new();
        for k in 0..n {
            for &(o, v, t) in &operands {
                let lane = match t {
                    Some(Type::Vector(s, m)) if m == n => {
                        self.lane_tys.insert((depth, o), Type::Scalar(s));
                        self.lane_of(v, s, m, k)?
                    }
                    _ => v,
                };
                self.lane_vals.insert((depth, o), lane);
            }
            if let Some(Type::Vector(s, _)) = out_ty {
                self.lane_tys.insert((depth, e), Type::Scalar(s));
            }
            let r = self.expr(e);
            for &(o, _, _) in &operands {
                self.lane_vals.remove(&(depth, o));
                self.lane_tys.remove(&(depth, o));
            }
            self.lane_tys.remove(&(depth, e));
            lanes.push(r?);
        }
        match out_ty {
            Some(Type::Vector(s, m)) if m == n => {
                let t = self.vec_ty(s, n)?;
                Ok(self.opi(Op::CompositeConstruct, t, &lanes))
            }
            _ => refuse(format!(
                "an operation mixing {n}-lane vectors with other shapes"
            )),
        }
    }

    /// Whether `e` is a lane-wise operation on wide vectors that [`Self::scalarise`] lowers;
    /// its lane count.
    fn needs_scalarising(&self, e: ExprId) -> R<Option<u8>> {
        let expr = &self.func().exprs[e];
        let lanewise = matches!(
            expr,
            Expr::Unary { .. }
                | Expr::Binary { .. }
                | Expr::Cast { .. }
                | Expr::Bitcast { .. }
                | Expr::Select { .. }
                | Expr::Math { .. }
        );
        if !lanewise {
            return Ok(None);
        }
        let n = self
            .wide_lanes(e)
            .or_else(|| expr.operands().into_iter().find_map(|o| self.wide_lanes(o)));
        let Some(n) = n else { return Ok(None) };
        if let Expr::Bitcast { arg, .. } = expr {
            if self.wide_lanes(*arg) != Some(n) || self.wide_lanes(e) != Some(n) {
                return refuse(format!(
                    "a bitcast between a {n}-lane vector and a value of another lane count"
                ));
            }
        }
        Ok(Some(n))
    }

    fn sl(&self, e: ExprId) -> (Scalar, u8) {
        match self.ty_of(e) {
            Some(Type::Scalar(s)) => (s, 1),
            Some(Type::Vector(s, n)) => (s, n),
            _ => (Scalar::U32, 1),
        }
    }

    fn expr_void(&mut self, e: ExprId) -> R<()> {
        let fh = self.frame().func;
        let expr = &self.m.function(fh).exprs[e];
        if let Expr::Call { function, args } = expr {
            let vals = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
            self.inline_call(*function, vals)?;
            return Ok(());
        }
        if let Expr::Dispatch { tag, args } = expr {
            self.dispatch(*tag, args, None)?;
            return Ok(());
        }
        self.expr(e)?;
        Ok(())
    }

    /// An integer expression as a `u32` (an index, a lane).
    fn expr_u32(&mut self, e: ExprId) -> R<Word> {
        let (s, _) = self.sl(e);
        let v = self.expr(e)?;
        self.cast(v, s, Scalar::U32, 1)
    }

    fn builtin_vec(&mut self, bi: spirv::BuiltIn, d: Dim) -> Word {
        let u = self.u32t();
        let uv3 = self.tk(TyKey::Vec(u, 3));
        let var = self.builtin(bi, uv3);
        let v = self.load(uv3, var);
        self.op(
            Op::CompositeExtract,
            u,
            vec![Operand::IdRef(v), Operand::LiteralBit32(d.index() as u32)],
        )
    }

    fn subgroup_scalar(&mut self, bi: spirv::BuiltIn) -> R<Word> {
        if !self.caps.subgroup_basic {
            return refuse("subgroup operations (VK_SUBGROUP_FEATURE_BASIC)");
        }
        self.cap(Capability::GroupNonUniform);
        let u = self.u32t();
        let var = self.builtin(bi, u);
        Ok(self.load(u, var))
    }

    fn expr(&mut self, e: ExprId) -> R<Word> {
        if let Some(&v) = self.lane_vals.get(&(self.frames.len(), e)) {
            return Ok(v);
        }
        if let Some(&v) = self.prefetched.get(&(self.frames.len(), e)) {
            return Ok(v);
        }
        if let Some(n) = self.needs_scalarising(e)? {
            return self.scalarise(e, n);
        }
        let fh = self.frame().func;
        let f = self.m.function(fh);
        let ty = self.ty_of(e);
        let expr = f.exprs[e].clone();
        Ok(match expr {
            Expr::Literal(l) => match l {
                Literal::Bool(b) => {
                    let t = self.boolt();
                    self.konst(t, b as u64)
                }
                Literal::Int { bits, ty } => self.const_of(ty, 1, bits)?,
                Literal::Float { value, ty } => {
                    self.const_of(ty, 1, Self::float_bits(ty, value))?
                }
            },
            Expr::Param(i) => self.frame().params[i as usize],
            Expr::Local(h) => {
                let v = self.local_var(h)?;
                let t = self.value_ty(self.local_ty(h))?;
                self.load(t, v)
            }
            Expr::TemplateParam(_) => return refuse("a template parameter left uninstantiated"),
            Expr::Builtin(b) => match b {
                Builtin::GlobalId(d) => self.builtin_vec(spirv::BuiltIn::GlobalInvocationId, d),
                Builtin::LocalId(d) => self.builtin_vec(spirv::BuiltIn::LocalInvocationId, d),
                Builtin::GroupId(d) => self.builtin_vec(spirv::BuiltIn::WorkgroupId, d),
                Builtin::NumGroups(d) => self.builtin_vec(spirv::BuiltIn::NumWorkgroups, d),
                Builtin::GroupSize(d) => {
                    let u = self.u32t();
                    let wg = self.workgroup_size;
                    self.op(
                        Op::CompositeExtract,
                        u,
                        vec![Operand::IdRef(wg), Operand::LiteralBit32(d.index() as u32)],
                    )
                }
                Builtin::WaveWidth => match self.mode {
                    WaveMode::Native => self.subgroup_scalar(spirv::BuiltIn::SubgroupSize)?,
                    _ => self.cu32(self.wave_w),
                },
                Builtin::LaneId => {
                    // linear_local_id % W, as the semantics define it, in every mode: even
                    // with W = S, `SubgroupLocalInvocationId` is not that where the driver
                    // does not pack subgroups in linear order (lavapipe makes each row of a
                    // 1x2 block its own subgroup, so both invocations were lane 0). Where
                    // wave verbs depend on the packing, such blocks are refused (L007).
                    let u = self.u32t();
                    let var = self.builtin(spirv::BuiltIn::LocalInvocationIndex, u);
                    let l = self.load(u, var);
                    let m = self.cu32(self.wave_w - 1);
                    self.opi(Op::BitwiseAnd, u, &[l, m])
                }
            },
            Expr::Unary { op, arg } => {
                let (s, n) = self.sl(arg);
                let t = self.vec_ty(s, n)?;
                let a = self.expr(arg)?;
                match (op, s) {
                    (UnaryOp::Neg, Scalar::F32) => self.sign_bit_op(a, n, Op::BitwiseXor)?,
                    (UnaryOp::Neg, s) if s.is_float() => self.fop(Op::FNegate, t, &[a]),
                    (UnaryOp::Neg, _) => self.opi(Op::SNegate, t, &[a]),
                    (UnaryOp::Not, Scalar::Bool) => self.opi(Op::LogicalNot, t, &[a]),
                    (UnaryOp::Not, _) => self.opi(Op::Not, t, &[a]),
                }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(op, lhs, rhs)?,
            Expr::Cast { to, arg } => {
                let (s, n) = self.sl(arg);
                let a = self.expr(arg)?;
                self.cast(a, s, to, n)?
            }
            Expr::Bitcast { to, arg } => {
                let (s, _) = self.sl(arg);
                if s == Scalar::Bool || to.scalar() == Some(Scalar::Bool) {
                    return refuse("bitcast of bool");
                }
                let a = self.expr(arg)?;
                // The expression's type: a scalar while a wide bitcast is scalarised.
                let t = self.value_ty(ty.unwrap_or(to))?;
                self.opi(Op::Bitcast, t, &[a])
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.expr(cond)?;
                let (_, cn) = self.sl(cond);
                let a = self.expr(accept)?;
                let r = self.expr(reject)?;
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                let lanes = ty.and_then(|t| t.lanes()).unwrap_or(1);
                let c = if cn == 1 && lanes > 1 {
                    let bt = self.boolt();
                    let bv = self.tk(TyKey::Vec(bt, lanes as u32));
                    self.opi(Op::CompositeConstruct, bv, &vec![c; lanes as usize])
                } else {
                    c
                };
                self.opi(Op::Select, t, &[c, a, r])
            }
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => {
                let mut vs = Vec::new();
                for &p in &parts {
                    let (ps, pn) = self.sl(p);
                    let v = self.expr(p)?;
                    if lanes > 4 && pn > 1 {
                        // An array is made of scalars only: take the part apart.
                        for k in 0..pn {
                            vs.push(self.lane_of(v, ps, pn, k)?);
                        }
                    } else {
                        vs.push(v);
                    }
                }
                let t = self.vec_ty(scalar, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vs)
            }
            Expr::Splat { lanes, value } => {
                let (s, _) = self.sl(value);
                let v = self.expr(value)?;
                let t = self.vec_ty(s, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vec![v; lanes as usize])
            }
            Expr::Extract { vector, lane } => {
                let (s, _) = self.sl(vector);
                let v = self.expr(vector)?;
                let t = self.scalar_ty(s)?;
                self.op(
                    Op::CompositeExtract,
                    t,
                    vec![Operand::IdRef(v), Operand::LiteralBit32(lane as u32)],
                )
            }
            Expr::Swizzle { vector, lanes } => {
                let (s, n) = self.sl(vector);
                let v = self.expr(vector)?;
                let t = self.vec_ty(s, lanes.len() as u8)?;
                if n > 4 || lanes.len() > 4 {
                    // OpVectorShuffle takes SPIR-V vectors only: gather the lanes.
                    let mut ls = Vec::new();
                    for &l in &lanes {
                        ls.push(self.lane_of(v, s, n, l)?);
                    }
                    return Ok(self.opi(Op::CompositeConstruct, t, &ls));
                }
                let mut ops = ids(&[v, v]);
                ops.extend(lanes.iter().map(|&l| Operand::LiteralBit32(l as u32)));
                self.op(Op::VectorShuffle, t, ops)
            }
            Expr::Index { base, index } => {
                let i = self.expr_u32(index)?;
                let elem = self.base_elem(base)?;
                self.load_elem(base, elem, i)?
            }
            Expr::Len(p) => match self.len_member.get(p as usize).copied().flatten() {
                Some(m) => self.push_load(m),
                None => return refuse("len of a parameter that is not a buffer"),
            },
            Expr::Call { function, args } => {
                let vals = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
                match self.inline_call(function, vals)? {
                    Some(v) => v,
                    None => return refuse("the value of a helper that returns nothing"),
                }
            }
            Expr::Tag { index, .. } => self.cu32(index),
            Expr::Dispatch { tag, args } => {
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                self.dispatch(tag, &args, Some(t))?
                    .expect("a typed dispatch yields a value")
            }
            Expr::Math { fun, args } => self.math(fun, &args, ty)?,
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => self.atomic(op, order, place, value, compare)?,
            Expr::Wave { op, args } => self.wave(op, &args, ty)?,
            Expr::VLoad {
                base, index, lanes, ..
            } => {
                let i = self.expr_u32(index)?;
                let elem = self.base_elem(base)?;
                let se = ElemType::scalar(elem.scalar);
                let u = self.u32t();
                let mut vs = Vec::new();
                for k in 0..lanes {
                    let kk = self.cu32(k as u32);
                    let ik = self.opi(Op::IAdd, u, &[i, kk]);
                    vs.push(self.load_elem(base, se, ik)?);
                }
                let t = self.vec_ty(elem.scalar, lanes)?;
                self.opi(Op::CompositeConstruct, t, &vs)
            }
            Expr::MatrixFill {
                scalar,
                rows,
                cols,
                value,
                ..
            } => {
                let v = self.expr(value)?;
                let t = self.value_ty(ty.unwrap_or(Type::U32))?;
                let n = rows as usize * cols as usize;
                let _ = scalar;
                self.opi(Op::CompositeConstruct, t, &vec![v; n])
            }
            Expr::MatrixLoad {
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
                ..
            } => self.matrix_load(scalar, rows, cols, base, offset, stride, ty)?,
            Expr::MatrixMma { a, b, c } => self.matrix_mma(a, b, c)?,
        })
    }

    /// `dispatch(tag, args)`: one selection per member; an out-of-range tag leaves the zero.
    fn dispatch(&mut self, tag: ExprId, args: &[ExprId], ty: Option<Word>) -> R<Option<Word>> {
        let set = match self.ty_of(tag) {
            Some(Type::Tag(s)) => s,
            _ => return refuse("dispatch through a value that is not a tag"),
        };
        let t = self.expr(tag)?;
        let vals = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
        let res = ty.map(|ty| {
            let v = self.fn_var(ty);
            let z = self.b.constant_null(ty);
            self.store(v, z);
            v
        });
        let members = self.m.module().tag_sets[set].members.clone();
        let bt = self.boolt();
        for (k, h) in members.into_iter().enumerate() {
            let kk = self.cu32(k as u32);
            let c = self.opi(Op::IEqual, bt, &[t, kk]);
            let (then, m) = (self.b.id(), self.b.id());
            self.sel_merge(m);
            self.branch_cond(c, then, m);
            self.block(then);
            let r = self.inline_call(h, vals.clone())?;
            if let (Some(v), Some(r)) = (res, r) {
                self.store(v, r);
            }
            self.branch(m);
            self.block(m);
        }
        Ok(match (res, ty) {
            (Some(v), Some(ty)) => Some(self.load(ty, v)),
            _ => None,
        })
    }

    fn binary(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> R<Word> {
        let (s, n) = self.sl(lhs);
        let bt = self.boolt();
        let bty = if n == 1 {
            bt
        } else {
            self.tk(TyKey::Vec(bt, n as u32))
        };
        if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            let a = self.expr(lhs)?;
            if n > 1 {
                let b = self.expr(rhs)?;
                let o = if op == BinaryOp::LogicalAnd {
                    Op::LogicalAnd
                } else {
                    Op::LogicalOr
                };
                return Ok(self.opi(o, bty, &[a, b]));
            }
            // Short circuit: the right operand runs only when it decides the result.
            let from = self.cur_label;
            let (rb, m) = (self.b.id(), self.b.id());
            self.sel_merge(m);
            if op == BinaryOp::LogicalAnd {
                self.branch_cond(a, rb, m);
            } else {
                self.branch_cond(a, m, rb);
            }
            self.block(rb);
            let b = self.expr(rhs)?;
            let rend = self.cur_label;
            self.branch(m);
            self.block(m);
            return Ok(self.op(Op::Phi, bt, ids(&[a, from, b, rend])));
        }
        let t = self.vec_ty(s, n)?;
        let a = self.expr(lhs)?;
        let mut b = self.expr(rhs)?;
        let (rs, _) = self.sl(rhs);
        let float = s.is_float();
        let signed = s.is_signed();
        Ok(match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul if float => {
                let o = match op {
                    BinaryOp::Add => Op::FAdd,
                    BinaryOp::Sub => Op::FSub,
                    _ => Op::FMul,
                };
                let r = if s == Scalar::F32 && self.f32_in_f64() {
                    self.f32_unflushed(o, n, t, bty, a, b)?
                } else {
                    self.fop(o, t, &[a, b])
                };
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Add => self.opi(Op::IAdd, t, &[a, b]),
            BinaryOp::Sub => self.opi(Op::ISub, t, &[a, b]),
            BinaryOp::Mul => self.opi(Op::IMul, t, &[a, b]),
            BinaryOp::Div if float && s == Scalar::F32 && self.caps.float64 => {
                // Correctly rounded: Vulkan allows 2.5 ulp for f32 `FDiv` and nothing for
                // |y| > 2^126, and NVIDIA divides by x·rcp(y) with rcp flushing its subnormal
                // result (3e38 / 3e38 gave 0). The f64 quotient (within 2.5 f64 ulps) is
                // nearer than any f32 quotient comes to an f32 rounding midpoint, so one
                // rounding to f32 gives the correctly rounded result.
                self.cap(Capability::Float64);
                let dt = self.vec_ty(Scalar::F64, n)?;
                let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
                let q = self.fop(Op::FDiv, dt, &[da, db]);
                let r = self.f64_to_f32(q, n)?;
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Div if float => {
                let r = self.fop(Op::FDiv, t, &[a, b]);
                self.identity_fixup(op, s, n, bty, t, a, b, r)?
            }
            BinaryOp::Rem if float && s == Scalar::F32 && self.caps.float64 => {
                // C fmod, computed in f64 where drivers' `x - y * trunc(x / y)` is exact for
                // every f32 pair whose quotient fits 29 bits.
                self.cap(Capability::Float64);
                let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
                let r = self.fmod_f64_of_f32(da, db, n)?;
                let r = self.f64_to_f32(r, n)?;
                // The result has the dividend's sign, zeros included.
                let ut = self.vec_ty(Scalar::U32, n)?;
                let (ru, au) = (
                    self.opi(Op::Bitcast, ut, &[r]),
                    self.opi(Op::Bitcast, ut, &[a]),
                );
                let mag = self.konst(ut, 0x7fff_ffff);
                let sign = self.konst(ut, 0x8000_0000);
                let m = self.opi(Op::BitwiseAnd, ut, &[ru, mag]);
                let sg = self.opi(Op::BitwiseAnd, ut, &[au, sign]);
                let o = self.opi(Op::BitwiseOr, ut, &[m, sg]);
                let r = self.opi(Op::Bitcast, t, &[o]);
                self.frem_edges(s, n, t, bty, a, b, r)?
            }
            BinaryOp::Rem if float => {
                let r = if s == Scalar::F64 {
                    self.frem_f64(t, a, b)
                } else {
                    self.fop(Op::FRem, t, &[a, b])
                };
                self.frem_edges(s, n, t, bty, a, b, r)?
            }
            BinaryOp::Div | BinaryOp::Rem => {
                // Division by zero is UB but must not hang or fault: divide by 1 instead.
                // `MIN / -1` wraps to `MIN` and `MIN % -1` is 0 (SPIR-V leaves both undefined).
                let zero = self.konst(t, 0);
                let one = self.konst(t, 1);
                let bz = self.opi(Op::IEqual, bty, &[b, zero]);
                if signed {
                    let m1 = self.konst(t, u64::MAX);
                    let bm = self.opi(Op::IEqual, bty, &[b, m1]);
                    let bad = self.opi(Op::LogicalOr, bty, &[bz, bm]);
                    let safe = self.opi(Op::Select, t, &[bad, one, b]);
                    if op == BinaryOp::Div {
                        let q = self.opi(Op::SDiv, t, &[a, safe]);
                        let neg = self.opi(Op::SNegate, t, &[a]);
                        self.opi(Op::Select, t, &[bm, neg, q])
                    } else {
                        // `a - trunc(a / b) * b`, not `OpSRem`: NVIDIA's driver (580, on an
                        // H200) computes `OpSRem` on the operands' unsigned bit patterns
                        // (-7 % 2 gave 1, -301i16 % 7 gave 2), while its `OpSDiv` truncates
                        // as specified. With `safe` = 1 for `b` = -1 this is 0 (`MIN % -1`).
                        let q = self.opi(Op::SDiv, t, &[a, safe]);
                        let qb = self.opi(Op::IMul, t, &[q, safe]);
                        self.opi(Op::ISub, t, &[a, qb])
                    }
                } else {
                    let safe = self.opi(Op::Select, t, &[bz, one, b]);
                    let o = if op == BinaryOp::Div {
                        Op::UDiv
                    } else {
                        Op::UMod
                    };
                    self.opi(o, t, &[a, safe])
                }
            }
            BinaryOp::BitAnd if s == Scalar::Bool => self.opi(Op::LogicalAnd, t, &[a, b]),
            BinaryOp::BitOr if s == Scalar::Bool => self.opi(Op::LogicalOr, t, &[a, b]),
            BinaryOp::BitXor if s == Scalar::Bool => self.opi(Op::LogicalNotEqual, t, &[a, b]),
            BinaryOp::BitAnd => self.opi(Op::BitwiseAnd, t, &[a, b]),
            BinaryOp::BitOr => self.opi(Op::BitwiseOr, t, &[a, b]),
            BinaryOp::BitXor => self.opi(Op::BitwiseXor, t, &[a, b]),
            BinaryOp::Shl | BinaryOp::Shr => {
                if rs != s {
                    b = self.cast(b, rs, s, n)?;
                }
                // The amount is taken modulo the width (semantics.md, Integers).
                let mask = self.konst(t, (s.bits() - 1) as u64);
                let amt = self.opi(Op::BitwiseAnd, t, &[b, mask]);
                let o = match (op, signed) {
                    (BinaryOp::Shl, _) => Op::ShiftLeftLogical,
                    (_, true) => Op::ShiftRightArithmetic,
                    _ => Op::ShiftRightLogical,
                };
                self.opi(o, t, &[a, amt])
            }
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => {
                let o = match (op, s) {
                    (BinaryOp::Eq, Scalar::Bool) => Op::LogicalEqual,
                    (BinaryOp::Ne, Scalar::Bool) => Op::LogicalNotEqual,
                    (BinaryOp::Eq, s) if s.is_float() => Op::FOrdEqual,
                    (BinaryOp::Ne, s) if s.is_float() => Op::FUnordNotEqual,
                    (BinaryOp::Lt, s) if s.is_float() => Op::FOrdLessThan,
                    (BinaryOp::Le, s) if s.is_float() => Op::FOrdLessThanEqual,
                    (BinaryOp::Gt, s) if s.is_float() => Op::FOrdGreaterThan,
                    (BinaryOp::Ge, s) if s.is_float() => Op::FOrdGreaterThanEqual,
                    (BinaryOp::Eq, _) => Op::IEqual,
                    (BinaryOp::Ne, _) => Op::INotEqual,
                    (BinaryOp::Lt, s) if s.is_signed() => Op::SLessThan,
                    (BinaryOp::Le, s) if s.is_signed() => Op::SLessThanEqual,
                    (BinaryOp::Gt, s) if s.is_signed() => Op::SGreaterThan,
                    (BinaryOp::Ge, s) if s.is_signed() => Op::SGreaterThanEqual,
                    (BinaryOp::Lt, _) => Op::ULessThan,
                    (BinaryOp::Le, _) => Op::ULessThanEqual,
                    (BinaryOp::Gt, _) => Op::UGreaterThan,
                    _ => Op::UGreaterThanEqual,
                };
                if s == Scalar::Bool && !matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
                    return refuse("ordering comparison of bool");
                }
                self.opi(o, bty, &[a, b])
            }
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => unreachable!("handled above"),
        })
    }

    /// A value conversion per semantics.md (Conversions).
    fn cast(&mut self, v: Word, from: Scalar, to: Scalar, n: u8) -> R<Word> {
        if from == to {
            return Ok(v);
        }
        let t = self.vec_ty(to, n)?;
        if n > 4 {
            let mut ls = Vec::new();
            for k in 0..n {
                let x = self.lane_of(v, from, n, k)?;
                ls.push(self.cast(x, from, to, 1)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        let bt = self.boolt();
        let bty = if n == 1 {
            bt
        } else {
            self.tk(TyKey::Vec(bt, n as u32))
        };
        if from == Scalar::Bool {
            let one_bits = if to.is_float() {
                Self::float_bits(to, 1.0)
            } else {
                1
            };
            let one = self.konst(t, one_bits);
            let zero = self.konst(t, 0);
            return Ok(self.opi(Op::Select, t, &[v, one, zero]));
        }
        let ft = self.vec_ty(from, n)?;
        if to == Scalar::Bool {
            let zero = self.konst(ft, 0);
            let o = if from.is_float() {
                Op::FUnordNotEqual
            } else {
                Op::INotEqual
            };
            return Ok(self.opi(o, bty, &[v, zero]));
        }
        Ok(match (from.is_float(), to.is_float()) {
            (false, false) => {
                if from.bits() == to.bits() {
                    self.opi(Op::Bitcast, t, &[v])
                } else if from.bits() < to.bits() && from.is_signed() {
                    // Sign-extend by the source's signedness, then reinterpret.
                    let wide = match to.bits() {
                        16 => Scalar::I16,
                        32 => Scalar::I32,
                        _ => Scalar::I64,
                    };
                    let wt = self.vec_ty(wide, n)?;
                    let w = self.opi(Op::SConvert, wt, &[v]);
                    if wide == to {
                        w
                    } else {
                        self.opi(Op::Bitcast, t, &[w])
                    }
                } else {
                    let unsigned = match to.bits() {
                        8 => Scalar::U8,
                        16 => Scalar::U16,
                        32 => Scalar::U32,
                        _ => Scalar::U64,
                    };
                    let src = if from.is_signed() {
                        let us = match from.bits() {
                            8 => Scalar::U8,
                            16 => Scalar::U16,
                            32 => Scalar::U32,
                            _ => Scalar::U64,
                        };
                        let ut = self.vec_ty(us, n)?;
                        self.opi(Op::Bitcast, ut, &[v])
                    } else {
                        v
                    };
                    let ut = self.vec_ty(unsigned, n)?;
                    let w = self.opi(Op::UConvert, ut, &[src]);
                    if unsigned == to {
                        w
                    } else {
                        self.opi(Op::Bitcast, t, &[w])
                    }
                }
            }
            (false, true) => {
                let o = if from.is_signed() {
                    Op::ConvertSToF
                } else {
                    Op::ConvertUToF
                };
                self.opi(o, t, &[v])
            }
            (true, true)
                if self.caps.flushes_f32_subnormals && from == Scalar::F32 && to == Scalar::F64 =>
            {
                self.widen_f32(v, n)?
            }
            (true, true)
                if self.caps.flushes_f32_subnormals && from == Scalar::F64 && to == Scalar::F32 =>
            {
                self.f64_to_f32(v, n)?
            }
            (true, true) => self.opi(Op::FConvert, t, &[v]),
            (true, false) => {
                // Saturating, NaN → 0: clamp into range, convert, then fix the top end (the
                // bound itself is often not representable in the source type) and NaN.
                let bits = to.bits();
                let (lo, hi) = if to.is_signed() {
                    (-(2f64.powi(bits as i32 - 1)), 2f64.powi(bits as i32 - 1))
                } else {
                    (0.0, 2f64.powi(bits as i32))
                };
                let below = |s: Scalar, x: f64| -> u64 {
                    match s {
                        Scalar::F16 => {
                            let h = half::f16::from_f64(x);
                            let h = if h.to_f64() >= x {
                                half::f16::from_bits(h.to_bits() - 1)
                            } else {
                                h
                            };
                            h.to_bits() as u64
                        }
                        Scalar::F32 => {
                            let f = x as f32;
                            let f = if f as f64 >= x {
                                f32::from_bits(f.to_bits() - 1)
                            } else {
                                f
                            };
                            f.to_bits() as u64
                        }
                        _ => {
                            // A power of two: the float just below it.
                            let f = f64::from_bits(x.to_bits() - 1);
                            f.to_bits()
                        }
                    }
                };
                let lo_c = {
                    let lo_v = match from {
                        Scalar::F16 => lo.max(-65504.0),
                        _ => lo,
                    };
                    self.konst(ft, Self::float_bits(from, lo_v))
                };
                let hi_below = self.konst(ft, below(from, hi));
                let hi_c = self.konst(ft, Self::float_bits(from, hi));
                let c1 = self.ext_inst(ft, glsl::NMAX, &[v, lo_c]);
                let c2 = self.ext_inst(ft, glsl::NMIN, &[c1, hi_below]);
                let o = if to.is_signed() {
                    Op::ConvertFToS
                } else {
                    Op::ConvertFToU
                };
                let r = self.opi(o, t, &[c2]);
                let max = if to.is_signed() {
                    (1u64 << (bits - 1)) - 1
                } else if bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                let maxc = self.konst(t, max);
                let over = self.opi(Op::FOrdGreaterThanEqual, bty, &[v, hi_c]);
                let r = self.opi(Op::Select, t, &[over, maxc, r]);
                let r = if to.is_signed() {
                    // Below a bound the source type cannot hold (f16 → i32): the minimum.
                    let under = self.opi(Op::FOrdLessThan, bty, &[v, lo_c]);
                    let minc = self.konst(t, 1u64 << (bits - 1));
                    self.opi(Op::Select, t, &[under, minc, r])
                } else {
                    r
                };
                let nan = self.opi(Op::IsNan, bty, &[v]);
                let zero = self.konst(t, 0);
                self.opi(Op::Select, t, &[nan, zero, r])
            }
        })
    }

    fn math(&mut self, fun: MathFn, args: &[ExprId], ty: Option<Type>) -> R<Word> {
        let (s, _) = self.sl(args[0]);
        let vs = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
        let t = self.value_ty(ty.unwrap_or(Type::F32))?;
        let g = |em: &mut Self, i: u32, a: &[Word]| em.ext_inst(t, i, a);
        let lanes = ty.and_then(|t| t.lanes()).unwrap_or(1);
        // GLSL.std.450 has no 64-bit transcendental functions and leaves 64-bit `Sqrt` and
        // `InverseSqrt` loose: they are built from arithmetic (`math.rs`).
        if s == Scalar::F64
            && (fun.is_transcendental() || matches!(fun, MathFn::Sqrt | MathFn::Rsqrt))
        {
            return self.math_f64(fun, &vs, lanes);
        }
        // Vulkan allows `Fma` to round twice and `Sqrt` 3 ulps; f32 ones are computed in f64
        // where the device has it (the f64 product is exact; one more rounding to f32).
        if s == Scalar::F32
            && self.caps.float64
            && matches!(fun, MathFn::Fma | MathFn::Sqrt | MathFn::Rsqrt)
        {
            self.cap(Capability::Float64);
            let dt = self.vec_ty(Scalar::F64, lanes)?;
            let mut ds = Vec::with_capacity(vs.len());
            for &v in vs.iter() {
                ds.push(self.widen_f32(v, lanes)?);
            }
            let r = match fun {
                MathFn::Fma => {
                    let p = self.fop(Op::FMul, dt, &[ds[0], ds[1]]);
                    self.fop(Op::FAdd, dt, &[p, ds[2]])
                }
                MathFn::Sqrt => self.ext_inst(dt, glsl::SQRT, &ds),
                _ => {
                    let q = self.ext_inst(dt, glsl::SQRT, &ds);
                    let one = self.konst(dt, 1f64.to_bits());
                    self.fop(Op::FDiv, dt, &[one, q])
                }
            };
            return if self.caps.flushes_f32_subnormals {
                self.f64_to_f32(r, lanes)
            } else {
                Ok(self.opi(Op::FConvert, t, &[r]))
            };
        }
        if s == Scalar::F32 && self.caps.float64 && fun.is_transcendental() {
            return self.transcendental_f32(fun, &vs, t, lanes);
        }
        Ok(match fun {
            MathFn::Sqrt => g(self, glsl::SQRT, &vs),
            MathFn::Rsqrt => g(self, glsl::INVERSE_SQRT, &vs),
            MathFn::Exp => g(self, glsl::EXP, &vs),
            MathFn::Exp2 => g(self, glsl::EXP2, &vs),
            MathFn::Log => g(self, glsl::LOG, &vs),
            MathFn::Log2 => g(self, glsl::LOG2, &vs),
            MathFn::Sin => g(self, glsl::SIN, &vs),
            MathFn::Cos => g(self, glsl::COS, &vs),
            MathFn::Tanh => g(self, glsl::TANH, &vs),
            MathFn::Pow => g(self, glsl::POW, &vs),
            MathFn::Fma => g(self, glsl::FMA, &vs),
            MathFn::Floor => g(self, glsl::FLOOR, &vs),
            MathFn::Ceil => g(self, glsl::CEIL, &vs),
            MathFn::Trunc => g(self, glsl::TRUNC, &vs),
            MathFn::Round => {
                // Half-way cases away from zero (GLSL Round leaves ties to the driver).
                let tr = g(self, glsl::TRUNC, &vs);
                let d = self.fop(Op::FSub, t, &[vs[0], tr]);
                let ad = g(self, glsl::FABS, &[d]);
                let half = self.konst(t, Self::float_bits(s, 0.5));
                let bty = self.bool_like(ty)?;
                let ge = self.opi(Op::FOrdGreaterThanEqual, bty, &[ad, half]);
                let sg = g(self, glsl::FSIGN, &vs);
                let up = self.fop(Op::FAdd, t, &[tr, sg]);
                let _ = glsl::ROUND_EVEN;
                self.opi(Op::Select, t, &[ge, up, tr])
            }
            MathFn::Min | MathFn::Max | MathFn::Clamp => {
                let (mn, mx) = if s.is_float() {
                    (glsl::NMIN, glsl::NMAX)
                } else if s.is_signed() {
                    (glsl::SMIN, glsl::SMAX)
                } else {
                    (glsl::UMIN, glsl::UMAX)
                };
                if s.is_float() {
                    let bty = self.bool_like(ty)?;
                    match fun {
                        MathFn::Min => self.fminmax(s, lanes, true, t, bty, vs[0], vs[1])?,
                        MathFn::Max => self.fminmax(s, lanes, false, t, bty, vs[0], vs[1])?,
                        _ => {
                            let a = self.fminmax(s, lanes, false, t, bty, vs[0], vs[1])?;
                            self.fminmax(s, lanes, true, t, bty, a, vs[2])?
                        }
                    }
                } else {
                    match fun {
                        MathFn::Min => g(self, mn, &vs),
                        MathFn::Max => g(self, mx, &vs),
                        _ => {
                            let a = g(self, mx, &[vs[0], vs[1]]);
                            g(self, mn, &[a, vs[2]])
                        }
                    }
                }
            }
            MathFn::Abs => {
                if s == Scalar::F32 {
                    self.sign_bit_op(vs[0], lanes, Op::BitwiseAnd)?
                } else if s.is_float() {
                    g(self, glsl::FABS, &vs)
                } else if s.is_signed() {
                    g(self, glsl::SABS, &vs)
                } else {
                    vs[0]
                }
            }
        })
    }

    /// Float `min`/`max` as `NMin`/`NMax` (a NaN operand yields the other), with the
    /// interpreter's `-0 < +0`, which GLSL.std.450 leaves open (lavapipe gave
    /// `max(-0.0, 0.0) == -0.0`): for two zeros, min ORs the bit patterns and max ANDs them
    /// (on bits, which lavapipe's folding of `0.0 + x` cannot touch); without an integer
    /// type of the width, min is `-((-a) + (-b))` and max `a + b`.
    #[allow(clippy::too_many_arguments)]
    fn fminmax(
        &mut self,
        s: Scalar,
        n: u8,
        min: bool,
        t: Word,
        bty: Word,
        a: Word,
        b: Word,
    ) -> R<Word> {
        let i = if min { glsl::NMIN } else { glsl::NMAX };
        let (r, az, bz) = if s == Scalar::F32 && self.f32_in_f64() {
            // In f64, where no operand is flushed; the result is one of them, exact.
            self.cap(Capability::Float64);
            let dt = self.vec_ty(Scalar::F64, n)?;
            let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
            let r = self.ext_inst(dt, i, &[da, db]);
            let r = self.f64_to_f32(r, n)?;
            let zero = self.fconst(dt, 0.0);
            let az = self.opi(Op::FOrdEqual, bty, &[da, zero]);
            let bz = self.opi(Op::FOrdEqual, bty, &[db, zero]);
            (r, az, bz)
        } else {
            let r = self.ext_inst(t, i, &[a, b]);
            let zero = self.konst(t, 0);
            let az = self.opi(Op::FOrdEqual, bty, &[a, zero]);
            let bz = self.opi(Op::FOrdEqual, bty, &[b, zero]);
            (r, az, bz)
        };
        let both = self.opi(Op::LogicalAnd, bty, &[az, bz]);
        let us = match s {
            Scalar::F16 if self.caps.int16 => Some(Scalar::U16),
            Scalar::F32 => Some(Scalar::U32),
            Scalar::F64 if self.caps.int64 => Some(Scalar::U64),
            _ => None,
        };
        let z = if let Some(us) = us {
            let ut = self.vec_ty(us, n)?;
            let ab = self.opi(Op::Bitcast, ut, &[a]);
            let bb = self.opi(Op::Bitcast, ut, &[b]);
            let o = if min { Op::BitwiseOr } else { Op::BitwiseAnd };
            let z = self.opi(o, ut, &[ab, bb]);
            self.opi(Op::Bitcast, t, &[z])
        } else if min {
            let na = self.fop(Op::FNegate, t, &[a]);
            let nb = self.fop(Op::FNegate, t, &[b]);
            let s = self.fop(Op::FAdd, t, &[na, nb]);
            self.fop(Op::FNegate, t, &[s])
        } else {
            self.fop(Op::FAdd, t, &[a, b])
        };
        Ok(self.opi(Op::Select, t, &[both, z, r]))
    }

    /// f32 negation (`BitwiseXor`) or `abs` (`BitwiseAnd`) on the bit pattern: exact for
    /// subnormals and NaNs, where NVIDIA's `FAbs` flushes a subnormal to 0 even under
    /// `DenormPreserve` (H200, driver 580: abs(1e-40) gave 0).
    fn sign_bit_op(&mut self, a: Word, n: u8, op: Op) -> R<Word> {
        let ft = self.vec_ty(Scalar::F32, n)?;
        let ut = self.vec_ty(Scalar::U32, n)?;
        let mask = match op {
            Op::BitwiseXor => 0x8000_0000,
            _ => 0x7fff_ffff,
        };
        let m = self.konst(ut, mask);
        let bits = self.opi(Op::Bitcast, ut, &[a]);
        let r = self.opi(op, ut, &[bits, m]);
        Ok(self.opi(Op::Bitcast, ft, &[r]))
    }

    /// `r = a <op> b` (`+ - *` on floats) made exact where a compiler folded it to an
    /// operand or to `+0.0` ([`Caps::folds_float_identities`]): a zero result gets the sign
    /// IEEE gives it (a sum: negative only when both addends are -0; a product: the XOR of
    /// the signs), and a zero product of an infinite or NaN operand becomes NaN. The tests are
    /// on the bit patterns, which no float folding touches.
    #[allow(clippy::too_many_arguments)]
    fn zero_sign_fixup(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        n: u8,
        bty: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> R<Word> {
        let t = self.vec_ty(s, n)?;
        let (us, sign_bit, exp_mask, nan_bits) = match s {
            Scalar::F16 => (Scalar::U16, 0x8000u64, 0x7c00u64, 0x7e00u64),
            Scalar::F64 => (
                Scalar::U64,
                0x8000_0000_0000_0000,
                0x7ff0_0000_0000_0000,
                0x7ff8_0000_0000_0000,
            ),
            _ => (Scalar::U32, 0x8000_0000, 0x7f80_0000, 0x7fc0_0000),
        };
        let ut = self.vec_ty(us, n)?;
        let sign = self.konst(ut, sign_bit);
        let mag = self.konst(ut, sign_bit - 1);
        let uzero = self.konst(ut, 0);
        let (ab, bb, rb) = (
            self.opi(Op::Bitcast, ut, &[a]),
            self.opi(Op::Bitcast, ut, &[b]),
            self.opi(Op::Bitcast, ut, &[r]),
        );
        let rmag = self.opi(Op::BitwiseAnd, ut, &[rb, mag]);
        let rzero = self.opi(Op::IEqual, bty, &[rmag, uzero]);
        let (sa, sb) = (
            self.opi(Op::BitwiseAnd, ut, &[ab, sign]),
            self.opi(Op::BitwiseAnd, ut, &[bb, sign]),
        );
        let zbits = match op {
            BinaryOp::Add => self.opi(Op::BitwiseAnd, ut, &[sa, sb]),
            BinaryOp::Div => {
                // A zero quotient has the XOR of the signs, but 0/0 and 0/NaN are NaN
                // (lavapipe folded `0.0 / x` to +0.0 whatever x was).
                let x = self.opi(Op::BitwiseXor, ut, &[sa, sb]);
                let exp = self.konst(ut, exp_mask);
                let amag = self.opi(Op::BitwiseAnd, ut, &[ab, mag]);
                let bmag = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
                let azero = self.opi(Op::IEqual, bty, &[amag, uzero]);
                let bzero = self.opi(Op::IEqual, bty, &[bmag, uzero]);
                let bnan = self.opi(Op::UGreaterThan, bty, &[bmag, exp]);
                let b_bad = self.opi(Op::LogicalOr, bty, &[bzero, bnan]);
                let bad = self.opi(Op::LogicalAnd, bty, &[azero, b_bad]);
                let nan = self.konst(ut, nan_bits);
                self.opi(Op::Select, ut, &[bad, nan, x])
            }
            BinaryOp::Sub => {
                let nsb = self.opi(Op::BitwiseXor, ut, &[sb, sign]);
                self.opi(Op::BitwiseAnd, ut, &[sa, nsb])
            }
            _ => {
                let x = self.opi(Op::BitwiseXor, ut, &[sa, sb]);
                let exp = self.konst(ut, exp_mask);
                let amag = self.opi(Op::BitwiseAnd, ut, &[ab, mag]);
                let bmag = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
                let ainf = self.opi(Op::UGreaterThanEqual, bty, &[amag, exp]);
                let binf = self.opi(Op::UGreaterThanEqual, bty, &[bmag, exp]);
                let bad = self.opi(Op::LogicalOr, bty, &[ainf, binf]);
                let nan = self.konst(ut, nan_bits);
                self.opi(Op::Select, ut, &[bad, nan, x])
            }
        };
        let o = self.opi(Op::Select, ut, &[rzero, zbits, rb]);
        Ok(self.opi(Op::Bitcast, t, &[o]))
    }

    /// A float `+ - * /` result made exact where the compiler folds float identities
    /// ([`Caps::folds_float_identities`]: `zero_sign_fixup`, where an integer type of the
    /// width exists); unchanged elsewhere.
    #[allow(clippy::too_many_arguments)]
    fn identity_fixup(
        &mut self,
        op: BinaryOp,
        s: Scalar,
        n: u8,
        bty: Word,
        t: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> R<Word> {
        let ok_int = match s {
            Scalar::F16 => self.caps.int16,
            Scalar::F64 => self.caps.int64,
            _ => true,
        };
        if self.caps.folds_float_identities && ok_int && !self.wide.contains_key(&t) {
            self.zero_sign_fixup(op, s, n, bty, a, b, r)
        } else {
            Ok(r)
        }
    }

    /// Exact C `fmod(|x|, |y|)` of two `f32` values held in `f64` (the caller restores the
    /// sign and the special cases). Drivers lower `FRem` to `x - y·trunc(x / y)`, exact only
    /// while the quotient fits about 29 bits (lavapipe: `7.0 % 1e-40` gave 0), so the
    /// dividend is first reduced by `y·2^k` with `k` = the quotient's binary exponent - 25:
    /// each step is exact (every value stays a 24-bit multiple of y's ulp) and removes 25
    /// bits of quotient; 12 steps cover the f32 range (quotients up to 2^277).
    fn fmod_f64_of_f32(&mut self, x: Word, y: Word, n: u8) -> R<Word> {
        let dt = self.vec_ty(Scalar::F64, n)?;
        let it = self.vec_ty(Scalar::I32, n)?;
        let mut x = self.ext_inst(dt, glsl::FABS, &[x]);
        let y = self.ext_inst(dt, glsl::FABS, &[y]);
        let zero = self.konst(it, 0);
        let bias = self.konst(it, 25);
        for _ in 0..12 {
            let q = self.fop(Op::FDiv, dt, &[x, y]);
            let (_, e) = self.frexp(dt, it, q);
            let k = self.opi(Op::ISub, it, &[e, bias]);
            let k = self.ext_inst(it, glsl::SMAX, &[k, zero]);
            let ys = self.ext_inst(dt, glsl::LDEXP, &[y, k]);
            x = self.frem_f64(dt, x, ys);
        }
        Ok(x)
    }

    /// An `f64` (of `n` lanes) rounded to `f32` with subnormal results kept: where the
    /// result is below 2^-126 its bits are built as the integer `round(|r| · 2^149)` (exact in
    /// f64) under the sign, since `FConvert` flushes subnormal results on drivers without
    /// `DenormPreserve` for f32 (lavapipe: `7.0 % 1e-40` gave 0).
    fn f64_to_f32(&mut self, r: Word, n: u8) -> R<Word> {
        let flushes = self.caps.flushes_f32_subnormals;
        let t = self.vec_ty(Scalar::F32, n)?;
        let dt = self.vec_ty(Scalar::F64, n)?;
        let ut = self.vec_ty(Scalar::U32, n)?;
        let bt = self.boolt();
        let bty = if n > 1 {
            self.tk(TyKey::Vec(bt, n as u32))
        } else {
            bt
        };
        let c = self.opi(Op::FConvert, t, &[r]);
        let cb = self.opi(Op::Bitcast, ut, &[c]);
        let ar = self.ext_inst(dt, glsl::FABS, &[r]);
        let lim = self.fconst(dt, f64::from(f32::MIN_POSITIVE));
        let small = self.opi(Op::FOrdLessThan, bty, &[ar, lim]);
        let scale = self.fconst(dt, 2f64.powi(149));
        let sc = self.fop(Op::FMul, dt, &[ar, scale]);
        let sc = self.ext_inst(dt, glsl::ROUND_EVEN, &[sc]);
        let m = self.opi(Op::ConvertFToU, ut, &[sc]);
        let sign = self.konst(ut, 0x8000_0000);
        let sb = self.opi(Op::BitwiseAnd, ut, &[cb, sign]);
        // A flushing `FConvert` may also drop the sign of what it flushed; a negative `r`
        // says it (a zero `r` converts exactly, its sign included).
        let sb = if flushes {
            let dz = self.fconst(dt, 0.0);
            let neg = self.opi(Op::FOrdLessThan, bty, &[r, dz]);
            self.opi(Op::Select, ut, &[neg, sign, sb])
        } else {
            sb
        };
        let sub = self.opi(Op::BitwiseOr, ut, &[m, sb]);
        let bits = self.opi(Op::Select, ut, &[small, sub, cb]);
        Ok(self.opi(Op::Bitcast, t, &[bits]))
    }

    /// f32 `a <o> b` (`+ - *`) on a device that flushes f32 subnormals: the f32 operation,
    /// and the exact f64 path (exact in f64 for two f32 operands, one rounding to f32 from
    /// the bits) behind a branch taken only where a flush may have changed the result. One
    /// test of the result decides (an `FSETP` with an abs modifier): a flushed result or
    /// product is zero; a flushed subnormal operand changes a sum only if the other addend
    /// is below 2^-101 (at or above it, its ulp is at least 2^-124, four times any
    /// subnormal, so the exact sum rounds to it anyway), where the result is below 2^-101
    /// too; a flushed operand times an infinity is NaN. So: `|r| < 2^-126` for a product,
    /// `|r| < 2^-101` for a sum, or NaN. (Testing operands and result bit by bit cost saxpy
    /// on the H200 40 % of its time in integer work; the f64 path on every operation, 30 %.)
    #[allow(clippy::too_many_arguments)]
    fn f32_unflushed(&mut self, o: Op, n: u8, t: Word, bty: Word, a: Word, b: Word) -> R<Word> {
        let fast = self.fop(o, t, &[a, b]);
        let limit = if o == Op::FMul {
            f32::MIN_POSITIVE
        } else {
            2f32.powi(-101)
        };
        let limit = self.konst(t, limit.to_bits() as u64);
        let mag = self.ext_inst(t, glsl::FABS, &[fast]);
        let lanes = self.opi(Op::FUnordLessThan, bty, &[mag, limit]);
        let bt = self.boolt();
        let any = if n > 1 {
            self.opi(Op::Any, bt, &[lanes])
        } else {
            lanes
        };
        let from = self.cur_label;
        let (slow_bb, merge) = (self.b.id(), self.b.id());
        self.sel_merge(merge);
        self.branch_cond(any, slow_bb, merge);
        self.block(slow_bb);
        self.cap(Capability::Float64);
        let dt = self.vec_ty(Scalar::F64, n)?;
        let (da, db) = (self.widen_f32(a, n)?, self.widen_f32(b, n)?);
        let r = self.fop(o, dt, &[da, db]);
        let slow = self.f64_to_f32(r, n)?;
        let slow = if n > 1 {
            self.opi(Op::Select, t, &[lanes, slow, fast])
        } else {
            slow
        };
        let slow_end = self.cur_label;
        self.branch(merge);
        self.block(merge);
        Ok(self.op(Op::Phi, t, ids(&[fast, from, slow, slow_end])))
    }

    /// Whether f32 `+ - *` are computed in f64 ([`Caps::flushes_f32_subnormals`]).
    fn f32_in_f64(&self) -> bool {
        self.caps.flushes_f32_subnormals && self.caps.float64
    }

    /// An `f32` (of `n` lanes) widened to `f64` exactly. `FConvert` normally; on a device
    /// that flushes f32 subnormals ([`Caps::flushes_f32_subnormals`]) an operand with a zero
    /// exponent field is built from its bits instead, as `±mantissa · 2^-149` (normal and
    /// exact in f64), since the flush may happen on `FConvert`'s f32 operand.
    fn widen_f32(&mut self, v: Word, n: u8) -> R<Word> {
        let dt = self.vec_ty(Scalar::F64, n)?;
        let c = self.opi(Op::FConvert, dt, &[v]);
        if !self.caps.flushes_f32_subnormals {
            return Ok(c);
        }
        let ut = self.vec_ty(Scalar::U32, n)?;
        let bt = self.boolt();
        let bty = if n > 1 {
            self.tk(TyKey::Vec(bt, n as u32))
        } else {
            bt
        };
        let bits = self.opi(Op::Bitcast, ut, &[v]);
        let (expm, mantm, signm, zero) = (
            self.konst(ut, 0x7f80_0000),
            self.konst(ut, 0x007f_ffff),
            self.konst(ut, 0x8000_0000),
            self.konst(ut, 0),
        );
        let e = self.opi(Op::BitwiseAnd, ut, &[bits, expm]);
        let tiny = self.opi(Op::IEqual, bty, &[e, zero]);
        let m = self.opi(Op::BitwiseAnd, ut, &[bits, mantm]);
        let mf = self.opi(Op::ConvertUToF, dt, &[m]);
        let scale = self.fconst(dt, 2f64.powi(-149));
        let mag = self.fop(Op::FMul, dt, &[mf, scale]);
        let neg_mag = self.fop(Op::FNegate, dt, &[mag]);
        let sb = self.opi(Op::BitwiseAnd, ut, &[bits, signm]);
        let neg = self.opi(Op::INotEqual, bty, &[sb, zero]);
        let built = self.opi(Op::Select, dt, &[neg, neg_mag, mag]);
        Ok(self.opi(Op::Select, dt, &[tiny, built, c]))
    }

    /// C `fmod`'s special cases over a computed `r = a % b`, which SPIR-V leaves undefined
    /// (lavapipe gave `0.0 % 0.0 == 0`): NaN when either operand is NaN, `a` is infinite or
    /// `b` is zero; `a` itself when `b` is infinite and `a` finite.
    #[allow(clippy::too_many_arguments)]
    fn frem_edges(
        &mut self,
        s: Scalar,
        n: u8,
        t: Word,
        bty: Word,
        a: Word,
        b: Word,
        r: Word,
    ) -> R<Word> {
        let nan_bits = match s {
            Scalar::F16 => 0x7e00,
            Scalar::F64 => 0x7ff8_0000_0000_0000,
            _ => 0x7fc0_0000,
        };
        let nan = self.konst(t, nan_bits);
        let zero = self.konst(t, 0);
        let an = self.opi(Op::IsNan, bty, &[a]);
        let bn = self.opi(Op::IsNan, bty, &[b]);
        let ai = self.opi(Op::IsInf, bty, &[a]);
        let bi = self.opi(Op::IsInf, bty, &[b]);
        let bz = if s == Scalar::F32 && self.caps.flushes_f32_subnormals {
            // On the bits: a flushing `FOrdEqual` finds a subnormal divisor equal to 0.
            let ut = self.vec_ty(Scalar::U32, n)?;
            let mag = self.konst(ut, 0x7fff_ffff);
            let uz = self.konst(ut, 0);
            let bb = self.opi(Op::Bitcast, ut, &[b]);
            let bm = self.opi(Op::BitwiseAnd, ut, &[bb, mag]);
            self.opi(Op::IEqual, bty, &[bm, uz])
        } else {
            self.opi(Op::FOrdEqual, bty, &[b, zero])
        };
        let bad = self.opi(Op::LogicalOr, bty, &[an, bn]);
        let bad = self.opi(Op::LogicalOr, bty, &[bad, ai]);
        let bad = self.opi(Op::LogicalOr, bty, &[bad, bz]);
        let r = self.opi(Op::Select, t, &[bi, a, r]);
        Ok(self.opi(Op::Select, t, &[bad, nan, r]))
    }

    /// An `f64` constant of type `dt` (splatted across its lanes).
    fn fconst(&mut self, dt: Word, v: f64) -> Word {
        self.konst(dt, v.to_bits())
    }

    fn bool_like(&mut self, ty: Option<Type>) -> R<Word> {
        let bt = self.boolt();
        Ok(match ty.and_then(|t| t.lanes()) {
            Some(n) if n > 1 => self.tk(TyKey::Vec(bt, n as u32)),
            _ => bt,
        })
    }
}

// ---- atomics and wave verbs ----
impl Em<'_> {
    fn atomic(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        place: Place,
        value: ExprId,
        compare: Option<ExprId>,
    ) -> R<Word> {
        let Place::Element { base, index } = place else {
            return refuse("an atomic on a local");
        };
        let (s, _) = self.sl(value);
        if s.bits() == 64 {
            if !self.caps.int64_atomics {
                return refuse("64-bit integer atomics (shaderBufferInt64Atomics)");
            }
            self.cap(Capability::Int64Atomics);
        }
        let i = self.expr_u32(index)?;
        let cmp = match compare {
            Some(c) => Some(self.expr(c)?),
            None => None,
        };
        let v = self.expr(value)?;
        let (ptr, st, stored, scope, storage_bits) = match base {
            Base::Param(p) => {
                let (ptr, st, ss) = self.buffer_ptr(p, i);
                (ptr, st, ss, SCOPE_DEVICE, SEM_UNIFORM)
            }
            Base::Shared(_) => {
                let (ptr, st, se) = self.elem_ptr_other(base, i)?;
                (ptr, st, se.scalar, SCOPE_WORKGROUP, SEM_WORKGROUP)
            }
            Base::Local(_) => return refuse("an atomic on a private array"),
        };
        let order_bits = match order {
            MemoryOrder::Relaxed => 0,
            MemoryOrder::Acquire => SEM_ACQUIRE,
            MemoryOrder::Release => SEM_RELEASE,
            MemoryOrder::AcqRel | MemoryOrder::SeqCst => SEM_ACQ_REL,
        };
        let sem_bits = if order_bits == 0 || self.caps.barrier_suspends {
            0
        } else {
            order_bits | storage_bits
        };
        let scope_c = self.cu32(scope);
        let sem = self.cu32(sem_bits);
        let t = self.scalar_ty(s)?;
        if s.is_float() {
            if op != AtomicOp::Add {
                return refuse(format!("{} on a float", op.name()));
            }
            // A compare-exchange loop on the element's bits (floats are stored as integers).
            let (header, body, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
            self.branch(header);
            self.block(header);
            self.loop_header(merge, cont);
            self.branch(body);
            self.block(body);
            let relaxed = self.cu32(0);
            let old = self.op(
                Op::AtomicLoad,
                st,
                vec![
                    Operand::IdRef(ptr),
                    Operand::IdScope(scope_c),
                    Operand::IdMemorySemantics(relaxed),
                ],
            );
            let oldf = self.opi(Op::Bitcast, t, &[old]);
            let sum = self.fop(Op::FAdd, t, &[oldf, v]);
            let new = self.opi(Op::Bitcast, st, &[sum]);
            let neq_sem = self.cu32(
                sem_bits & !(SEM_RELEASE | SEM_ACQ_REL)
                    | if sem_bits & SEM_ACQ_REL != 0 {
                        SEM_ACQUIRE
                    } else {
                        0
                    },
            );
            let got = self.op(
                Op::AtomicCompareExchange,
                st,
                vec![
                    Operand::IdRef(ptr),
                    Operand::IdScope(scope_c),
                    Operand::IdMemorySemantics(sem),
                    Operand::IdMemorySemantics(neq_sem),
                    Operand::IdRef(new),
                    Operand::IdRef(old),
                ],
            );
            let bt = self.boolt();
            let ok = self.opi(Op::IEqual, bt, &[got, old]);
            self.branch_cond(ok, merge, cont);
            self.block(cont);
            self.branch(header);
            self.block(merge);
            let _ = stored;
            return Ok(oldf);
        }
        let o = match op {
            AtomicOp::Add => Op::AtomicIAdd,
            AtomicOp::Sub => Op::AtomicISub,
            AtomicOp::Min if s.is_signed() => Op::AtomicSMin,
            AtomicOp::Min => Op::AtomicUMin,
            AtomicOp::Max if s.is_signed() => Op::AtomicSMax,
            AtomicOp::Max => Op::AtomicUMax,
            AtomicOp::And => Op::AtomicAnd,
            AtomicOp::Or => Op::AtomicOr,
            AtomicOp::Xor => Op::AtomicXor,
            AtomicOp::Exchange => Op::AtomicExchange,
            AtomicOp::CompareExchange => {
                let neq = sem_bits & !(SEM_RELEASE | SEM_ACQ_REL)
                    | if sem_bits & SEM_ACQ_REL != 0 {
                        SEM_ACQUIRE
                    } else {
                        0
                    };
                let neq = if neq & (SEM_ACQUIRE) == 0 { 0 } else { neq };
                let neq_c = self.cu32(neq);
                let c = cmp.expect("compare_exchange has an expected value");
                return Ok(self.op(
                    Op::AtomicCompareExchange,
                    t,
                    vec![
                        Operand::IdRef(ptr),
                        Operand::IdScope(scope_c),
                        Operand::IdMemorySemantics(sem),
                        Operand::IdMemorySemantics(neq_c),
                        Operand::IdRef(v),
                        Operand::IdRef(c),
                    ],
                ));
            }
        };
        Ok(self.op(
            o,
            t,
            vec![
                Operand::IdRef(ptr),
                Operand::IdScope(scope_c),
                Operand::IdMemorySemantics(sem),
                Operand::IdRef(v),
            ],
        ))
    }

    fn shuffle(&mut self, t: Word, x: Word, lane: Word) -> R<Word> {
        if let Some(&(lt, n)) = self.wide.get(&t) {
            // A wide vector (an array) is shuffled lane by lane.
            let mut ls = Vec::new();
            for k in 0..n {
                let xk = self.op(
                    Op::CompositeExtract,
                    lt,
                    vec![Operand::IdRef(x), Operand::LiteralBit32(k as u32)],
                );
                ls.push(self.shuffle(lt, xk, lane)?);
            }
            return Ok(self.opi(Op::CompositeConstruct, t, &ls));
        }
        if !self.caps.subgroup_shuffle {
            return refuse("subgroup shuffles (VK_SUBGROUP_FEATURE_SHUFFLE)");
        }
        self.cap(Capability::GroupNonUniformShuffle);
        let sc = self.cu32(SCOPE_SUBGROUP);
        Ok(self.op(
            Op::GroupNonUniformShuffle,
            t,
            vec![
                Operand::IdScope(sc),
                Operand::IdRef(x),
                Operand::IdRef(lane),
            ],
        ))
    }

    fn wave(&mut self, op: WaveOp, args: &[ExprId], ty: Option<Type>) -> R<Word> {
        if let WaveMode::Virtual { slots } = self.mode {
            // Verbs of the kernel body are emulated before their statement (`pre_verbs`);
            // one reaching here sits where the workgroup cannot be made to meet it.
            return refuse(format!(
                "{} in a virtual wave (@wave({}) on subgroups of {}, {slots} subgroups per \
                 wave) inside a helper, a loop condition or a loop bound: the \
                 shared-memory exchange needs the whole workgroup at the verb",
                wave_verb_name(op),
                self.wave_w,
                self.caps.subgroup_size
            ));
        }
        if !self.caps.subgroup_basic {
            return refuse("subgroup operations (VK_SUBGROUP_FEATURE_BASIC)");
        }
        self.uses_wave_verbs = true;
        if self.mode == WaveMode::Narrow {
            return self.wave_narrow(op, args, ty);
        }
        self.cap(Capability::GroupNonUniform);
        let sc = self.cu32(SCOPE_SUBGROUP);
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, _) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let vs = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
        let u = self.u32t();
        let bt = self.boolt();
        Ok(match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                if !self.caps.subgroup_arithmetic {
                    return refuse("subgroup arithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC)");
                }
                self.cap(Capability::GroupNonUniformArithmetic);
                let (group, o) = group_reduction(op, r, s);
                if matches!(r, ReduceOp::Min | ReduceOp::Max)
                    && matches!(s, Scalar::F16 | Scalar::F32)
                    && !self.wide.contains_key(&t)
                {
                    let (_, lanes) = self.sl(args[0]);
                    let excl = group == spirv::GroupOperation::ExclusiveScan;
                    return self.float_minmax_wave(
                        r == ReduceOp::Min,
                        s,
                        t,
                        lanes,
                        excl,
                        vs[0],
                        |em, o, ty, v, _| {
                            Ok(em.op(
                                o,
                                ty,
                                vec![
                                    Operand::IdScope(sc),
                                    Operand::GroupOperation(group),
                                    Operand::IdRef(v),
                                ],
                            ))
                        },
                    );
                }
                let r = self.op(
                    o,
                    t,
                    vec![
                        Operand::IdScope(sc),
                        Operand::GroupOperation(group),
                        Operand::IdRef(vs[0]),
                    ],
                );
                if s.is_float() {
                    self.b.decorate(r, spirv::Decoration::NoContraction, vec![]);
                }
                r
            }
            WaveOp::Broadcast | WaveOp::Shuffle => {
                let (ls, _) = self.sl(args[1]);
                let l = self.cast(vs[1], ls, Scalar::U32, 1)?;
                self.shuffle(t, vs[0], l)?
            }
            WaveOp::ShuffleXor | WaveOp::ShuffleUp | WaveOp::ShuffleDown | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let lane = self.subgroup_scalar(spirv::BuiltIn::SubgroupLocalInvocationId)?;
                let width = self.subgroup_scalar(spirv::BuiltIn::SubgroupSize)?;
                let src = match op {
                    WaveOp::ShuffleXor => {
                        let x = self.opi(Op::BitwiseXor, u, &[lane, d]);
                        let ok = self.opi(Op::ULessThan, bt, &[x, width]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleUp => {
                        let ok = self.opi(Op::ULessThanEqual, bt, &[d, lane]);
                        let x = self.opi(Op::ISub, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleDown => {
                        let room = self.opi(Op::ISub, u, &[width, lane]);
                        let ok = self.opi(Op::ULessThan, bt, &[d, room]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    _ => {
                        let one = self.cu32(1);
                        let mask = self.opi(Op::ISub, u, &[width, one]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                self.shuffle(t, vs[0], src)?
            }
            WaveOp::Ballot => {
                if !self.caps.subgroup_ballot {
                    return refuse("subgroup ballots (VK_SUBGROUP_FEATURE_BALLOT)");
                }
                self.cap(Capability::GroupNonUniformBallot);
                let uv4 = self.tk(TyKey::Vec(u, 4));
                let b = self.op(
                    Op::GroupNonUniformBallot,
                    uv4,
                    vec![Operand::IdScope(sc), Operand::IdRef(vs[0])],
                );
                let uv2 = self.tk(TyKey::Vec(u, 2));
                let lo = self.op(
                    Op::VectorShuffle,
                    uv2,
                    vec![
                        Operand::IdRef(b),
                        Operand::IdRef(b),
                        Operand::LiteralBit32(0),
                        Operand::LiteralBit32(1),
                    ],
                );
                self.opi(Op::Bitcast, t, &[lo])
            }
            WaveOp::Any | WaveOp::All => {
                if !self.caps.subgroup_vote {
                    return refuse("subgroup votes (VK_SUBGROUP_FEATURE_VOTE)");
                }
                self.cap(Capability::GroupNonUniformVote);
                let o = if op == WaveOp::Any {
                    Op::GroupNonUniformAny
                } else {
                    Op::GroupNonUniformAll
                };
                self.op(o, bt, vec![Operand::IdScope(sc), Operand::IdRef(vs[0])])
            }
            WaveOp::Elect => self.op(Op::GroupNonUniformElect, bt, vec![Operand::IdScope(sc)]),
        })
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

// ---- narrow mode: waves of W < S lanes, S / W of them per subgroup ----
//
// A wave is a cluster of W consecutive subgroup invocations (subgroups hold consecutive linear
// local ids, as every driver lays them out). Reductions, scans and votes run once per cluster
// c over the whole subgroup, every lane outside cluster c contributing the operator's
// identity, and each lane keeps the result of its own cluster's pass: the active lanes of
// the other clusters never mix in, whatever the divergence. Shuffles address
// `cluster base + lane`; ballots and elect read the cluster's bits of a subgroup ballot.
impl Em<'_> {
    /// `(lane, cluster, base)`: the lane within the wave, the wave's index in the subgroup and
    /// its first subgroup invocation.
    fn narrow_lane(&mut self) -> R<(Word, Word, Word)> {
        let sub = self.subgroup_scalar(spirv::BuiltIn::SubgroupLocalInvocationId)?;
        let u = self.u32t();
        let m = self.cu32(self.wave_w - 1);
        let sh = self.cu32(self.wave_w.trailing_zeros());
        let lane = self.opi(Op::BitwiseAnd, u, &[sub, m]);
        let cl = self.opi(Op::ShiftRightLogical, u, &[sub, sh]);
        let base = self.opi(Op::ShiftLeftLogical, u, &[cl, sh]);
        Ok((lane, cl, base))
    }

    /// `c ? a : b` for values of `lanes` lanes with a scalar condition.
    fn select_lanes(&mut self, t: Word, c: Word, a: Word, b: Word, lanes: u8) -> Word {
        let c = if lanes > 1 {
            let bt = self.boolt();
            let bv = self.tk(TyKey::Vec(bt, lanes as u32));
            self.opi(Op::CompositeConstruct, bv, &vec![c; lanes as usize])
        } else {
            c
        };
        self.opi(Op::Select, t, &[c, a, b])
    }

    /// A float `min`/`max` wave reduction or scan (`f16`/`f32`, up to 4 lanes) with the
    /// interpreter's rules, which `OpGroupNonUniformFMin`/`FMax` do not keep: a NaN lane
    /// yields to any number (all-NaN gives NaN, not the identity ±inf) and `-0 < +0`. Each
    /// value becomes an unsigned key whose order is the float order with `-0 < +0` (the
    /// sign-magnitude to biased mapping); a NaN becomes the key that loses every comparison
    /// (`u32::MAX` for min, 0 for max), which decodes back to a NaN. `run(op, ty, v, id)`
    /// performs the group operation `op` on `v` of type `ty` with identity `id`. An exclusive
    /// scan's first active lane gets the float identity (found by a second scan of ones).
    #[allow(clippy::too_many_arguments)]
    fn float_minmax_wave(
        &mut self,
        min: bool,
        s: Scalar,
        t: Word,
        lanes: u8,
        exclusive: bool,
        v: Word,
        mut run: impl FnMut(&mut Self, Op, Word, Word, Word) -> R<Word>,
    ) -> R<Word> {
        let ft = self.vec_ty(Scalar::F32, lanes)?;
        let ut = self.vec_ty(Scalar::U32, lanes)?;
        let bt = self.boolt();
        let bty = if lanes > 1 {
            self.tk(TyKey::Vec(bt, lanes as u32))
        } else {
            bt
        };
        let x = if s == Scalar::F16 {
            self.opi(Op::FConvert, ft, &[v])
        } else {
            v
        };
        let bits = self.opi(Op::Bitcast, ut, &[x]);
        let sign = self.konst(ut, 0x8000_0000);
        let zero = self.konst(ut, 0);
        let sb = self.opi(Op::BitwiseAnd, ut, &[bits, sign]);
        let neg = self.opi(Op::INotEqual, bty, &[sb, zero]);
        let inv = self.opi(Op::Not, ut, &[bits]);
        let biased = self.opi(Op::BitwiseOr, ut, &[bits, sign]);
        let key = self.opi(Op::Select, ut, &[neg, inv, biased]);
        let lose = self.konst(ut, if min { u32::MAX as u64 } else { 0 });
        let nan = self.opi(Op::IsNan, bty, &[x]);
        let key = self.opi(Op::Select, ut, &[nan, lose, key]);
        let op = if min {
            Op::GroupNonUniformUMin
        } else {
            Op::GroupNonUniformUMax
        };
        let k = run(self, op, ut, key, lose)?;
        let kb = self.opi(Op::BitwiseAnd, ut, &[k, sign]);
        let pos = self.opi(Op::INotEqual, bty, &[kb, zero]);
        let unb = self.opi(Op::BitwiseXor, ut, &[k, sign]);
        let kinv = self.opi(Op::Not, ut, &[k]);
        let bits = self.opi(Op::Select, ut, &[pos, unb, kinv]);
        let f = self.opi(Op::Bitcast, ft, &[bits]);
        let mut r = if s == Scalar::F16 {
            self.opi(Op::FConvert, t, &[f])
        } else {
            f
        };
        if exclusive {
            let one = self.konst(ut, 1);
            let prior = run(self, Op::GroupNonUniformUMax, ut, one, zero)?;
            let first = self.opi(Op::IEqual, bty, &[prior, zero]);
            let rop = if min { ReduceOp::Min } else { ReduceOp::Max };
            let id = self.const_of(s, lanes, Self::identity_bits(rop, s))?;
            r = self.opi(Op::Select, t, &[first, id, r]);
        }
        Ok(r)
    }

    /// The identity of `r` on scalar `s` (`semantics.md`: 0, all ones, the type's max/min).
    fn identity_bits(r: ReduceOp, s: Scalar) -> u64 {
        let w = s.bits();
        let ones = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let inf = match s {
            Scalar::F16 => 0x7c00u64,
            Scalar::F32 => 0x7f80_0000,
            _ => 0x7ff0_0000_0000_0000,
        };
        match (r, s) {
            (ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor, _) => 0,
            (ReduceOp::And, Scalar::Bool) => 1,
            (ReduceOp::And, _) => ones,
            (ReduceOp::Min, s) if s.is_float() => inf,
            (ReduceOp::Max, s) if s.is_float() => inf | (1u64 << (w - 1)),
            (ReduceOp::Min, s) if s.is_signed() => ones >> 1,
            (ReduceOp::Max, s) if s.is_signed() => 1u64 << (w - 1),
            (ReduceOp::Min, _) => ones,
            (ReduceOp::Max, _) => 0,
        }
    }

    /// Runs `pass(value)` once per cluster with the other clusters' lanes given `identity`;
    /// each lane keeps its own cluster's result.
    fn per_cluster(
        &mut self,
        t: Word,
        lanes: u8,
        v: Word,
        identity: Word,
        mut pass: impl FnMut(&mut Self, Word) -> Word,
    ) -> R<Word> {
        let (_, cl, _) = self.narrow_lane()?;
        let bt = self.boolt();
        let u = self.u32t();
        let mut acc = None;
        for c in 0..self.caps.subgroup_size / self.wave_w {
            let cc = self.konst(u, c as u64);
            let mine = self.opi(Op::IEqual, bt, &[cl, cc]);
            let vc = self.select_lanes(t, mine, v, identity, lanes);
            let r = pass(self, vc);
            acc = Some(match acc {
                None => r,
                Some(a) => self.select_lanes(t, mine, r, a, lanes),
            });
        }
        Ok(acc.expect("S / W >= 2 clusters"))
    }

    /// This wave's bits of a subgroup ballot of `p`, as a `u32` (W ≤ 32 here).
    fn cluster_ballot(&mut self, p: Word) -> R<Word> {
        if !self.caps.subgroup_ballot {
            return refuse("subgroup ballots (VK_SUBGROUP_FEATURE_BALLOT)");
        }
        self.cap(Capability::GroupNonUniformBallot);
        let (_, _, base) = self.narrow_lane()?;
        let u = self.u32t();
        let uv4 = self.tk(TyKey::Vec(u, 4));
        let sc = self.cu32(SCOPE_SUBGROUP);
        let b = self.op(
            Op::GroupNonUniformBallot,
            uv4,
            vec![Operand::IdScope(sc), Operand::IdRef(p)],
        );
        let five = self.cu32(5);
        let word = self.opi(Op::ShiftRightLogical, u, &[base, five]);
        let comp = self.opi(Op::VectorExtractDynamic, u, &[b, word]);
        let m31 = self.cu32(31);
        let shift = self.opi(Op::BitwiseAnd, u, &[base, m31]);
        let bits = self.opi(Op::ShiftRightLogical, u, &[comp, shift]);
        let mask = self.cu32(if self.wave_w >= 32 {
            u32::MAX
        } else {
            (1u32 << self.wave_w) - 1
        });
        Ok(self.opi(Op::BitwiseAnd, u, &[bits, mask]))
    }

    fn wave_narrow(&mut self, op: WaveOp, args: &[ExprId], ty: Option<Type>) -> R<Word> {
        self.cap(Capability::GroupNonUniform);
        let sc = self.cu32(SCOPE_SUBGROUP);
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, lanes) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let vs = args.iter().map(|a| self.expr(*a)).collect::<R<Vec<_>>>()?;
        let u = self.u32t();
        let bt = self.boolt();
        let w = self.wave_w;
        Ok(match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                if !self.caps.subgroup_arithmetic {
                    return refuse("subgroup arithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC)");
                }
                self.cap(Capability::GroupNonUniformArithmetic);
                let (group, o) = group_reduction(op, r, s);
                if matches!(r, ReduceOp::Min | ReduceOp::Max)
                    && matches!(s, Scalar::F16 | Scalar::F32)
                    && !self.wide.contains_key(&t)
                {
                    let excl = group == spirv::GroupOperation::ExclusiveScan;
                    return self.float_minmax_wave(
                        r == ReduceOp::Min,
                        s,
                        t,
                        lanes,
                        excl,
                        vs[0],
                        |em, o, ty, v, id| {
                            em.per_cluster(ty, lanes, v, id, |em, v| {
                                em.op(
                                    o,
                                    ty,
                                    vec![
                                        Operand::IdScope(sc),
                                        Operand::GroupOperation(group),
                                        Operand::IdRef(v),
                                    ],
                                )
                            })
                        },
                    );
                }
                let id = self.const_of(s, lanes, Self::identity_bits(r, s))?;
                let float = s.is_float();
                self.per_cluster(t, lanes, vs[0], id, |em, v| {
                    let r = em.op(
                        o,
                        t,
                        vec![
                            Operand::IdScope(sc),
                            Operand::GroupOperation(group),
                            Operand::IdRef(v),
                        ],
                    );
                    if float {
                        em.b.decorate(r, spirv::Decoration::NoContraction, vec![]);
                    }
                    r
                })?
            }
            WaveOp::Any | WaveOp::All => {
                if !self.caps.subgroup_vote {
                    return refuse("subgroup votes (VK_SUBGROUP_FEATURE_VOTE)");
                }
                self.cap(Capability::GroupNonUniformVote);
                let (o, id) = if op == WaveOp::Any {
                    (Op::GroupNonUniformAny, 0)
                } else {
                    (Op::GroupNonUniformAll, 1)
                };
                let id = self.konst(bt, id);
                self.per_cluster(bt, 1, vs[0], id, |em, v| {
                    em.op(o, bt, vec![Operand::IdScope(sc), Operand::IdRef(v)])
                })?
            }
            WaveOp::Broadcast | WaveOp::Shuffle => {
                let (ls, _) = self.sl(args[1]);
                let l = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let (_, _, base) = self.narrow_lane()?;
                let m = self.cu32(w - 1);
                let l = self.opi(Op::BitwiseAnd, u, &[l, m]);
                let src = self.opi(Op::BitwiseOr, u, &[base, l]);
                self.shuffle(t, vs[0], src)?
            }
            WaveOp::ShuffleXor | WaveOp::ShuffleUp | WaveOp::ShuffleDown | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vs[1], ls, Scalar::U32, 1)?;
                let (lane, _, base) = self.narrow_lane()?;
                let width = self.cu32(w);
                let src = match op {
                    WaveOp::ShuffleXor => {
                        let x = self.opi(Op::BitwiseXor, u, &[lane, d]);
                        let ok = self.opi(Op::ULessThan, bt, &[x, width]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleUp => {
                        let ok = self.opi(Op::ULessThanEqual, bt, &[d, lane]);
                        let x = self.opi(Op::ISub, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleDown => {
                        let room = self.opi(Op::ISub, u, &[width, lane]);
                        let ok = self.opi(Op::ULessThan, bt, &[d, room]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    _ => {
                        let mask = self.cu32(w - 1);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                let abs = self.opi(Op::BitwiseOr, u, &[base, src]);
                self.shuffle(t, vs[0], abs)?
            }
            WaveOp::Ballot => {
                let bits = self.cluster_ballot(vs[0])?;
                self.opi(Op::UConvert, t, &[bits])
            }
            WaveOp::Elect => {
                let tr = self.konst(bt, 1);
                let bits = self.cluster_ballot(tr)?;
                let low = self.ext_inst(u, glsl::FIND_ILSB, &[bits]);
                let (lane, _, _) = self.narrow_lane()?;
                self.opi(Op::IEqual, bt, &[lane, low])
            }
        })
    }
}

// ---- virtual mode: waves of W > S lanes, staged through shared memory ----
//
// A wave of W lanes spans W / S subgroups, which exchange values only through workgroup
// memory, so a verb is emulated with two workgroup barriers: every invocation of the
// workgroup writes its operand (as 32-bit words) and whether it is active into a scratch
// array indexed by its linear local id, a barrier, each invocation combines its wave's W
// entries (in ascending lane order, exactly as the interpreter folds), a barrier. For that
// the whole workgroup must reach every verb together: a statement holding a verb is emitted
// for everyone, its verbs evaluated first with the lanes that would not run it marked
// inactive (their operands are evaluated under a guard), then the statement itself under that
// guard. An `if` holding a verb becomes this predication of its branches (conditions
// combined), so divergent verbs see exactly the active lanes of the semantics. A `for` loop
// holding a verb is allowed where its bounds are workgroup-uniform and nothing jumps out of
// it. What cannot be predicated — a verb inside a helper, a loop condition, a non-uniform or
// predicated loop, after an early `return` — is refused by name.
impl Em<'_> {
    /// The expressions a statement evaluates itself (not those of its nested blocks).
    fn stmt_roots(k: &StmtKind) -> Vec<ExprId> {
        match k {
            StmtKind::Let { init, .. } => init.iter().copied().collect(),
            StmtKind::Assign { place, value } => match place {
                Place::Element { index, .. } => vec![*index, *value],
                _ => vec![*value],
            },
            StmtKind::If { cond, .. } => vec![*cond],
            StmtKind::Loop { kind, .. } => match kind {
                LoopKind::Infinite => vec![],
                LoopKind::While(c) => vec![*c],
                LoopKind::For {
                    start, end, step, ..
                } => {
                    let mut v = vec![*start, *end];
                    v.extend(step.iter().copied());
                    v
                }
            },
            StmtKind::Return(v) => v.iter().copied().collect(),
            StmtKind::Expr(e) => vec![*e],
            StmtKind::VStore { index, value, .. } => vec![*index, *value],
            StmtKind::MatrixStore {
                value,
                offset,
                stride,
                ..
            } => vec![*value, *offset, *stride],
            StmtKind::Break(_) | StmtKind::Continue(_) | StmtKind::Barrier | StmtKind::Fence(_) => {
                vec![]
            }
        }
    }

    /// The wave verbs in `e`'s tree, operands before the verbs that use them.
    fn verbs_in(&self, e: ExprId, out: &mut Vec<ExprId>) {
        let ex = &self.func().exprs[e];
        for o in ex.operands() {
            self.verbs_in(o, out);
        }
        if matches!(ex, Expr::Wave { .. }) {
            out.push(e);
        }
    }

    fn stmt_has_verb(&self, s: &Stmt) -> bool {
        let mut v = Vec::new();
        for e in Self::stmt_roots(&s.kind) {
            self.verbs_in(e, &mut v);
        }
        !v.is_empty()
            || s.kind
                .blocks()
                .iter()
                .any(|b| b.iter().any(|s| self.stmt_has_verb(s)))
    }

    /// Whether a jump in `block` leaves it: a `return`, or a `break`/`continue` aimed at a
    /// loop outside `block` (`inner` holds the labels of the loops of `block` around the
    /// statements looked at). A loop inside `block` that breaks out of itself only, such
    /// as a compare-exchange retry loop, does not leave it.
    fn jumps_out(block: &[Stmt], inner: &mut Vec<Option<String>>) -> bool {
        block.iter().any(|s| match &s.kind {
            StmtKind::Return(_) => true,
            StmtKind::Break(l) | StmtKind::Continue(l) => match l {
                None => inner.is_empty(),
                Some(name) => !inner.iter().any(|x| x.as_deref() == Some(name.as_str())),
            },
            StmtKind::Loop { label, body, .. } => {
                inner.push(label.clone());
                let out = Self::jumps_out(body, inner);
                inner.pop();
                out
            }
            k => k.blocks().iter().any(|b| Self::jumps_out(b, inner)),
        })
    }

    fn has_return(block: &[Stmt]) -> bool {
        block.iter().any(|s| {
            matches!(s.kind, StmtKind::Return(_))
                || s.kind.blocks().iter().any(|b| Self::has_return(b))
        })
    }

    fn assigns(block: &[Stmt], var: Handle<crate::ir::Local>) -> bool {
        block.iter().any(|s| {
            matches!(&s.kind, StmtKind::Assign { place: Place::Local(l), .. } if *l == var)
                || matches!(&s.kind, StmtKind::Assign { place: Place::Lane { local, .. }, .. } if *local == var)
                || s.kind.blocks().iter().any(|b| Self::assigns(b, var))
        })
    }

    /// Whether `e` has the same value in every invocation of the workgroup (conservatively:
    /// built from literals, value parameters, lengths and workgroup-wide built-ins).
    fn is_uniform(&self, e: ExprId) -> bool {
        let ex = &self.func().exprs[e];
        match ex {
            Expr::Literal(_) | Expr::Param(_) | Expr::Len(_) | Expr::TemplateParam(_) => true,
            Expr::Builtin(b) => matches!(
                b,
                Builtin::GroupId(_)
                    | Builtin::NumGroups(_)
                    | Builtin::GroupSize(_)
                    | Builtin::WaveWidth
            ),
            Expr::Unary { .. }
            | Expr::Binary { .. }
            | Expr::Cast { .. }
            | Expr::Bitcast { .. }
            | Expr::Select { .. }
            | Expr::Compose { .. }
            | Expr::Splat { .. }
            | Expr::Extract { .. }
            | Expr::Swizzle { .. }
            | Expr::Math { .. } => ex.operands().into_iter().all(|o| self.is_uniform(o)),
            _ => false,
        }
    }

    /// Kernel-level conditions for emulating verbs in a virtual wave: no `return` that could
    /// come before a verb (the invocations that left would never reach its barriers).
    fn check_virtual_kernel(&self, body: &[Stmt]) -> R<()> {
        let Some(last) = body.iter().rposition(|s| self.stmt_has_verb(s)) else {
            return Ok(());
        };
        if Self::has_return(&body[..=last]) {
            return refuse(format!(
                "wave verbs after a return in a virtual wave (@wave({}) on subgroups of {}): \
                 the invocations that returned cannot join the shared-memory exchange",
                self.wave_w, self.caps.subgroup_size
            ));
        }
        Ok(())
    }

    /// Virtual verbs are emulated in this frame (the kernel's own body).
    fn virtual_here(&self) -> bool {
        matches!(self.mode, WaveMode::Virtual { .. }) && self.frames.len() == 1
    }

    /// `if c { body }` as a selection construct; the predicate is off inside (the guard
    /// already holds it).
    fn guarded(&mut self, c: Word, body: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
        let g = self.guard_begin(c);
        let r = body(self);
        self.guard_end(g, r)
    }

    /// [`Em::guarded`] in two halves, for a body that cannot be a closure over the emitter:
    /// opens the construct (the body follows), and returns what [`Em::guard_end`] needs.
    fn guard_begin(&mut self, c: Word) -> Guard {
        let (t, merge) = (self.b.id(), self.b.id());
        self.sel_merge(merge);
        self.branch_cond(c, t, merge);
        self.block(t);
        Guard {
            merge,
            saved: self.vpred.take(),
        }
    }

    /// Closes what [`Em::guard_begin`] opened, after a body that gave `r`.
    fn guard_end(&mut self, g: Guard, r: R<()>) -> R<()> {
        self.vpred = g.saved;
        r?;
        self.branch(g.merge);
        self.block(g.merge);
        Ok(())
    }

    /// `e` evaluated only where the predicate holds (its type's zero elsewhere).
    fn guarded_value(&mut self, e: ExprId) -> R<Word> {
        let Some(p) = self.vpred else {
            return self.expr(e);
        };
        let t = self.value_ty(self.ty_of(e).unwrap_or(Type::U32))?;
        let v = self.fn_var(t);
        let z = self.b.constant_null(t);
        self.store(v, z);
        self.guarded(p, |em| {
            let x = em.expr(e)?;
            em.store(v, x);
            Ok(())
        })?;
        Ok(self.load(t, v))
    }

    /// Emits a statement of the kernel body in virtual mode.
    fn virtual_stmt(&mut self, s: &Stmt) -> R<()> {
        if !self.stmt_has_verb(s) {
            return match self.vpred {
                Some(p) => self.guarded(p, |em| em.stmt(s)),
                None => self.stmt(s),
            };
        }
        let depth = self.frames.len();
        let mut done = Vec::new();
        let r = (|| -> R<()> {
            match &s.kind {
                StmtKind::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    self.pre_verbs(&[*cond], &mut done)?;
                    let c = self.guarded_value(*cond)?;
                    let bt = self.boolt();
                    let outer = self.vpred;
                    let nc = self.opi(Op::LogicalNot, bt, &[c]);
                    let (pt, pe) = match outer {
                        Some(p) => (
                            self.opi(Op::LogicalAnd, bt, &[p, c]),
                            self.opi(Op::LogicalAnd, bt, &[p, nc]),
                        ),
                        None => (c, nc),
                    };
                    self.vpred = Some(pt);
                    let r = self.emit_block(then_block);
                    self.vpred = Some(pe);
                    let r = r.and_then(|_| self.emit_block(else_block));
                    self.vpred = outer;
                    r
                }
                StmtKind::Loop { label, kind, body } => {
                    let why = if self.vpred.is_some() {
                        Some("inside a branch")
                    } else if Self::jumps_out(body, &mut Vec::new()) {
                        Some("with a break, continue or return")
                    } else {
                        match kind {
                            LoopKind::For {
                                var,
                                start,
                                end,
                                step,
                            } => {
                                let uniform = self.is_uniform(*start)
                                    && self.is_uniform(*end)
                                    && step.is_none_or(|x| self.is_uniform(x));
                                if !uniform {
                                    Some("whose bounds are not workgroup-uniform")
                                } else if Self::assigns(body, *var) {
                                    Some("that assigns its variable")
                                } else {
                                    None
                                }
                            }
                            _ => Some("that is not a `for` loop"),
                        }
                    };
                    if let Some(why) = why {
                        return refuse(format!(
                            "a wave verb in a loop {why} in a virtual wave (@wave({}) on \
                             subgroups of {}): the whole workgroup must reach it together",
                            self.wave_w, self.caps.subgroup_size
                        ));
                    }
                    self.emit_loop(label, kind, body)
                }
                _ => {
                    self.pre_verbs(&Self::stmt_roots(&s.kind), &mut done)?;
                    match self.vpred {
                        Some(p) => self.guarded(p, |em| em.stmt(s)),
                        None => self.stmt(s),
                    }
                }
            }
        })();
        for e in done {
            self.lane_vals.remove(&(depth, e));
        }
        r
    }

    /// Emulates the verbs in `roots` (innermost first) for the whole workgroup; their values
    /// are then what the statement reads.
    fn pre_verbs(&mut self, roots: &[ExprId], done: &mut Vec<ExprId>) -> R<()> {
        let mut verbs = Vec::new();
        for &e in roots {
            self.verbs_in(e, &mut verbs);
        }
        let depth = self.frames.len();
        for v in verbs {
            let Expr::Wave { op, args } = self.func().exprs[v].clone() else {
                continue;
            };
            let mut vals = Vec::new();
            for &a in &args {
                vals.push(self.guarded_value(a)?);
            }
            let ty = self.ty_of(v);
            let r = self.virtual_verb(op, &args, &vals, ty)?;
            self.lane_vals.insert((depth, v), r);
            done.push(v);
        }
        Ok(())
    }

    /// The number of invocations of the workgroup (a spec constant from the block size).
    fn invocations(&mut self) -> Word {
        if let Some(n) = self.vw_invocations {
            return n;
        }
        let u = self.u32t();
        let [x, y, z] = self.block_spec;
        let mul = |em: &mut Self, a: Word, b: Word| {
            let id = em.b.id();
            em.b.module_mut().types_global_values.push(Instruction::new(
                Op::SpecConstantOp,
                Some(u),
                Some(id),
                vec![
                    Operand::LiteralSpecConstantOpInteger(Op::IMul),
                    Operand::IdRef(a),
                    Operand::IdRef(b),
                ],
            ));
            id
        };
        let xy = mul(self, x, y);
        let n = mul(self, xy, z);
        self.vw_invocations = Some(n);
        n
    }

    /// A pointer to word `k` (0: the active flag) of invocation `at` in the scratch array.
    fn scratch_ptr(&mut self, k: u32, at: Word) -> Word {
        let u = self.u32t();
        if self.vw_scratch == 0 {
            self.vw_scratch = self.b.id();
        }
        let idx = if k == 0 {
            at
        } else {
            let n = self.invocations();
            let kk = self.cu32(k);
            let off = self.opi(Op::IMul, u, &[n, kk]);
            self.opi(Op::IAdd, u, &[off, at])
        };
        let pt = self.tk(TyKey::Ptr(StorageClass::Workgroup, u));
        let var = self.vw_scratch;
        self.opi(Op::AccessChain, pt, &[var, idx])
    }

    /// Declares the scratch array once every verb has said how many words it stages.
    fn declare_scratch(&mut self) {
        if self.vw_scratch == 0 {
            return;
        }
        let u = self.u32t();
        let n = self.invocations();
        let k = self.cu32(self.vw_words + 1);
        let len = self.b.id();
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::SpecConstantOp,
                Some(u),
                Some(len),
                vec![
                    Operand::LiteralSpecConstantOpInteger(Op::IMul),
                    Operand::IdRef(n),
                    Operand::IdRef(k),
                ],
            ));
        let at = self.b.type_array(u, len);
        let pt = self.b.type_pointer(None, StorageClass::Workgroup, at);
        let var = self.vw_scratch;
        self.b
            .module_mut()
            .types_global_values
            .push(Instruction::new(
                Op::Variable,
                Some(pt),
                Some(var),
                vec![Operand::StorageClass(StorageClass::Workgroup)],
            ));
    }

    fn wg_barrier(&mut self) {
        let wg = self.cu32(SCOPE_WORKGROUP);
        let sem = self.cu32(SEM_ACQ_REL | SEM_WORKGROUP);
        self.op_void(
            Op::ControlBarrier,
            vec![
                Operand::IdScope(wg),
                Operand::IdScope(wg),
                Operand::IdMemorySemantics(sem),
            ],
        );
    }

    /// A scalar as 32-bit words (one, or two for 64-bit types; low word first).
    fn encode_words(&mut self, v: Word, s: Scalar) -> R<Vec<Word>> {
        let u = self.u32t();
        Ok(match s {
            Scalar::Bool => {
                let (one, zero) = (self.cu32(1), self.cu32(0));
                vec![self.opi(Op::Select, u, &[v, one, zero])]
            }
            Scalar::U32 => vec![v],
            Scalar::I32 | Scalar::F32 => vec![self.opi(Op::Bitcast, u, &[v])],
            Scalar::F16 => {
                let f = self.scalar_ty(Scalar::F32)?;
                let w = self.opi(Op::FConvert, f, &[v]);
                vec![self.opi(Op::Bitcast, u, &[w])]
            }
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 => {
                let us = if s.bits() == 8 {
                    Scalar::U8
                } else {
                    Scalar::U16
                };
                let x = self.cast(v, s, us, 1)?;
                vec![self.opi(Op::UConvert, u, &[x])]
            }
            _ => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let x = if s == Scalar::U64 {
                    v
                } else {
                    self.opi(Op::Bitcast, u64t, &[v])
                };
                let sh = self.konst(u64t, 32);
                let hi = self.opi(Op::ShiftRightLogical, u64t, &[x, sh]);
                vec![
                    self.opi(Op::UConvert, u, &[x]),
                    self.opi(Op::UConvert, u, &[hi]),
                ]
            }
        })
    }

    fn decode_words(&mut self, w: &[Word], s: Scalar) -> R<Word> {
        let t = self.scalar_ty(s)?;
        Ok(match s {
            Scalar::Bool => {
                let z = self.cu32(0);
                self.opi(Op::INotEqual, t, &[w[0], z])
            }
            Scalar::U32 => w[0],
            Scalar::I32 | Scalar::F32 => self.opi(Op::Bitcast, t, &[w[0]]),
            Scalar::F16 => {
                let f = self.scalar_ty(Scalar::F32)?;
                let x = self.opi(Op::Bitcast, f, &[w[0]]);
                self.opi(Op::FConvert, t, &[x])
            }
            Scalar::I8 | Scalar::U8 | Scalar::I16 | Scalar::U16 => {
                let us = if s.bits() == 8 {
                    Scalar::U8
                } else {
                    Scalar::U16
                };
                let ut = self.scalar_ty(us)?;
                let x = self.opi(Op::UConvert, ut, &[w[0]]);
                self.cast(x, us, s, 1)?
            }
            _ => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let lo = self.opi(Op::UConvert, u64t, &[w[0]]);
                let hi = self.opi(Op::UConvert, u64t, &[w[1]]);
                let sh = self.konst(u64t, 32);
                let hi = self.opi(Op::ShiftLeftLogical, u64t, &[hi, sh]);
                let x = self.opi(Op::BitwiseOr, u64t, &[lo, hi]);
                if s == Scalar::U64 {
                    x
                } else {
                    self.opi(Op::Bitcast, t, &[x])
                }
            }
        })
    }

    /// Words per lane of scalar `s`.
    fn words_of(s: Scalar) -> u32 {
        if s.bits() == 64 {
            2
        } else {
            1
        }
    }

    /// The staged value of invocation `at` (a value of `lanes` lanes of `s`).
    fn read_staged(&mut self, at: Word, s: Scalar, lanes: u8) -> R<Word> {
        let per = Self::words_of(s);
        let mut ls = Vec::new();
        let u = self.u32t();
        for k in 0..lanes as u32 {
            let mut ws = Vec::new();
            for i in 0..per {
                let p = self.scratch_ptr(1 + k * per + i, at);
                ws.push(self.load(u, p));
            }
            ls.push(self.decode_words(&ws, s)?);
        }
        if lanes == 1 {
            return Ok(ls[0]);
        }
        let t = self.vec_ty(s, lanes)?;
        Ok(self.opi(Op::CompositeConstruct, t, &ls))
    }

    /// Whether invocation `at` exists and was active at the verb, and `at` made safe to read.
    fn staged_active(&mut self, at: Word) -> (Word, Word) {
        let u = self.u32t();
        let bt = self.boolt();
        let n = self.invocations();
        let inb = self.opi(Op::ULessThan, bt, &[at, n]);
        let zero = self.cu32(0);
        let safe = self.opi(Op::Select, u, &[inb, at, zero]);
        let p = self.scratch_ptr(0, safe);
        let a = self.load(u, p);
        let a = self.opi(Op::INotEqual, bt, &[a, zero]);
        (self.opi(Op::LogicalAnd, bt, &[inb, a]), safe)
    }

    /// `for j in 0..n { body(j) }` as a loop construct.
    fn counted_loop(&mut self, n: u32, mut body: impl FnMut(&mut Self, Word) -> R<()>) -> R<()> {
        let u = self.u32t();
        let bt = self.boolt();
        let jv = self.fn_var(u);
        let zero = self.cu32(0);
        self.store(jv, zero);
        let (header, condb, bodyb, cont, merge) = (
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
            self.b.id(),
        );
        self.branch(header);
        self.block(header);
        self.loop_header(merge, cont);
        self.branch(condb);
        self.block(condb);
        let j = self.load(u, jv);
        let nn = self.cu32(n);
        let c = self.opi(Op::ULessThan, bt, &[j, nn]);
        self.branch_cond(c, bodyb, merge);
        self.block(bodyb);
        body(self, j)?;
        self.branch(cont);
        self.block(cont);
        let j = self.load(u, jv);
        let one = self.cu32(1);
        let j1 = self.opi(Op::IAdd, u, &[j, one]);
        self.store(jv, j1);
        self.branch(header);
        self.block(merge);
        Ok(())
    }

    /// `a <op> b` for a reduction on scalar `s`.
    fn combine(&mut self, r: ReduceOp, s: Scalar, t: Word, a: Word, b: Word) -> Word {
        match r {
            ReduceOp::Sum if s.is_float() => self.fop(Op::FAdd, t, &[a, b]),
            ReduceOp::Sum => self.opi(Op::IAdd, t, &[a, b]),
            ReduceOp::Min | ReduceOp::Max => {
                let i = match (r == ReduceOp::Min, s) {
                    (true, s) if s.is_float() => glsl::NMIN,
                    (false, s) if s.is_float() => glsl::NMAX,
                    (true, s) if s.is_signed() => glsl::SMIN,
                    (false, s) if s.is_signed() => glsl::SMAX,
                    (true, _) => glsl::UMIN,
                    (false, _) => glsl::UMAX,
                };
                self.ext_inst(t, i, &[a, b])
            }
            ReduceOp::And if s == Scalar::Bool => self.opi(Op::LogicalAnd, t, &[a, b]),
            ReduceOp::Or if s == Scalar::Bool => self.opi(Op::LogicalOr, t, &[a, b]),
            ReduceOp::Xor if s == Scalar::Bool => self.opi(Op::LogicalNotEqual, t, &[a, b]),
            ReduceOp::And => self.opi(Op::BitwiseAnd, t, &[a, b]),
            ReduceOp::Or => self.opi(Op::BitwiseOr, t, &[a, b]),
            ReduceOp::Xor => self.opi(Op::BitwiseXor, t, &[a, b]),
        }
    }

    /// One verb for the whole workgroup: stage, barrier, combine the wave's lanes, barrier.
    fn virtual_verb(
        &mut self,
        op: WaveOp,
        args: &[ExprId],
        vals: &[Word],
        ty: Option<Type>,
    ) -> R<Word> {
        let u = self.u32t();
        let bt = self.boolt();
        let w = self.wave_w;
        let t = self.value_ty(ty.unwrap_or(Type::BOOL))?;
        let (s, lanes) = if args.is_empty() {
            (Scalar::Bool, 1)
        } else {
            self.sl(args[0])
        };
        let lidv = self.builtin(spirv::BuiltIn::LocalInvocationIndex, u);
        let lid = self.load(u, lidv);
        let m = self.cu32(w - 1);
        let lane = self.opi(Op::BitwiseAnd, u, &[lid, m]);
        let nm = self.cu32(!(w - 1));
        let base = self.opi(Op::BitwiseAnd, u, &[lid, nm]);
        // Stage: the active flag, then the operand's words.
        let act = match self.vpred {
            Some(p) => {
                let (one, zero) = (self.cu32(1), self.cu32(0));
                self.opi(Op::Select, u, &[p, one, zero])
            }
            None => self.cu32(1),
        };
        let p0 = self.scratch_ptr(0, lid);
        self.store(p0, act);
        if op != WaveOp::Elect {
            let mut k = 1;
            for l in 0..lanes {
                let x = self.lane_of(vals[0], s, lanes, l)?;
                for wd in self.encode_words(x, s)? {
                    let p = self.scratch_ptr(k, lid);
                    self.store(p, wd);
                    k += 1;
                }
            }
            self.vw_words = self.vw_words.max(k - 1);
        }
        self.wg_barrier();
        let result = match op {
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let acc = self.fn_var(t);
                let first = self.fn_var(bt);
                let tr = self.konst(bt, 1);
                let fa = self.konst(bt, 0);
                self.store(first, tr);
                let id = self.const_of(s, 1, Self::identity_bits(r, s))?;
                self.store(acc, id);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    let c = match op {
                        WaveOp::InclusiveScan(_) => {
                            let le = em.opi(Op::ULessThanEqual, bt, &[j, lane]);
                            em.opi(Op::LogicalAnd, bt, &[a, le])
                        }
                        WaveOp::ExclusiveScan(_) => {
                            let lt = em.opi(Op::ULessThan, bt, &[j, lane]);
                            em.opi(Op::LogicalAnd, bt, &[a, lt])
                        }
                        _ => a,
                    };
                    em.guarded(c, |em| {
                        let x = em.read_staged(safe, s, 1)?;
                        let f = em.load(bt, first);
                        let cur = em.load(t, acc);
                        let comb = em.combine(r, s, t, cur, x);
                        let nv = em.opi(Op::Select, t, &[f, x, comb]);
                        em.store(acc, nv);
                        em.store(first, fa);
                        Ok(())
                    })
                })?;
                self.load(t, acc)
            }
            WaveOp::Broadcast
            | WaveOp::Shuffle
            | WaveOp::ShuffleXor
            | WaveOp::ShuffleUp
            | WaveOp::ShuffleDown
            | WaveOp::Rotate => {
                let (ls, _) = self.sl(args[1]);
                let d = self.cast(vals[1], ls, Scalar::U32, 1)?;
                let width = self.cu32(w);
                let mask = self.cu32(w - 1);
                let src = match op {
                    WaveOp::Broadcast | WaveOp::Shuffle => {
                        // A lane outside the wave is UB: read one inside it.
                        self.opi(Op::BitwiseAnd, u, &[d, mask])
                    }
                    WaveOp::ShuffleXor => {
                        let x = self.opi(Op::BitwiseXor, u, &[lane, d]);
                        let ok = self.opi(Op::ULessThan, bt, &[x, width]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleUp => {
                        let ok = self.opi(Op::ULessThanEqual, bt, &[d, lane]);
                        let x = self.opi(Op::ISub, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    WaveOp::ShuffleDown => {
                        let room = self.opi(Op::ISub, u, &[width, lane]);
                        let ok = self.opi(Op::ULessThan, bt, &[d, room]);
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::Select, u, &[ok, x, lane])
                    }
                    _ => {
                        let x = self.opi(Op::IAdd, u, &[lane, d]);
                        self.opi(Op::BitwiseAnd, u, &[x, mask])
                    }
                };
                let at = self.opi(Op::IAdd, u, &[base, src]);
                // A lane missing from a partial wave is UB: read our own.
                let n = self.invocations();
                let inb = self.opi(Op::ULessThan, bt, &[at, n]);
                let at = self.opi(Op::Select, u, &[inb, at, lid]);
                self.read_staged(at, s, lanes)?
            }
            WaveOp::Ballot => {
                let u64t = self.scalar_ty(Scalar::U64)?;
                let acc = self.fn_var(u64t);
                let z = self.konst(u64t, 0);
                self.store(acc, z);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    em.guarded(a, |em| {
                        let p = em.read_staged(safe, Scalar::Bool, 1)?;
                        let one = em.konst(u64t, 1);
                        let zero = em.konst(u64t, 0);
                        let j64 = em.opi(Op::UConvert, u64t, &[j]);
                        let bit = em.opi(Op::ShiftLeftLogical, u64t, &[one, j64]);
                        let bit = em.opi(Op::Select, u64t, &[p, bit, zero]);
                        let cur = em.load(u64t, acc);
                        let nv = em.opi(Op::BitwiseOr, u64t, &[cur, bit]);
                        em.store(acc, nv);
                        Ok(())
                    })
                })?;
                let r = self.load(u64t, acc);
                if t == u64t {
                    r
                } else {
                    self.opi(Op::Bitcast, t, &[r])
                }
            }
            WaveOp::Any | WaveOp::All => {
                let any = op == WaveOp::Any;
                let acc = self.fn_var(bt);
                let init = self.konst(bt, !any as u64);
                self.store(acc, init);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, safe) = em.staged_active(at);
                    em.guarded(a, |em| {
                        let p = em.read_staged(safe, Scalar::Bool, 1)?;
                        let cur = em.load(bt, acc);
                        let o = if any { Op::LogicalOr } else { Op::LogicalAnd };
                        let nv = em.opi(o, bt, &[cur, p]);
                        em.store(acc, nv);
                        Ok(())
                    })
                })?;
                self.load(bt, acc)
            }
            WaveOp::Elect => {
                let low = self.fn_var(u);
                let wc = self.cu32(w);
                self.store(low, wc);
                self.counted_loop(w, |em, j| {
                    let at = em.opi(Op::IAdd, u, &[base, j]);
                    let (a, _) = em.staged_active(at);
                    let cur = em.load(u, low);
                    let m = em.ext_inst(u, glsl::UMIN, &[cur, j]);
                    let nv = em.opi(Op::Select, u, &[a, m, cur]);
                    em.store(low, nv);
                    Ok(())
                })?;
                let l = self.load(u, low);
                self.opi(Op::IEqual, bt, &[lane, l])
            }
        };
        // Everyone has read the scratch before the next verb writes it.
        self.wg_barrier();
        Ok(result)
    }
}

// ---- cooperative matrices, in software ----
//
// Vulkan's cooperative matrices (VK_KHR_cooperative_matrix) are absent on many devices
// (lavapipe among them), so a fragment is lowered the way the interpreter holds it: every
// invocation of the wave keeps the whole `rows × cols` tile (a row-major array) and performs
// each verb itself. The operands are wave-uniform by the semantics, so every lane computes
// the same tile; `matrix_mma` accumulates in ascending `k`, rounding each product and each
// sum in the accumulator type (`NoContraction`), exactly as the interpreter does; every lane
// of the wave writes the same values in `matrix_store`, so each lane also reads its own
// writes back.
impl Em<'_> {
    fn matrix_shape(&self, e: ExprId) -> R<(Scalar, u32, u32)> {
        match self.ty_of(e) {
            Some(Type::Matrix {
                scalar, rows, cols, ..
            }) => Ok((scalar, rows as u32, cols as u32)),
            _ => refuse("a matrix verb on a value that is not a fragment"),
        }
    }

    /// `offset + (e / cols) * stride + e % cols`: the memory index of tile element `e`.
    fn tile_index(&mut self, e: Word, cols: u32, offset: Word, stride: Word) -> Word {
        let u = self.u32t();
        let c = self.cu32(cols);
        let i = self.opi(Op::UDiv, u, &[e, c]);
        let j = self.opi(Op::UMod, u, &[e, c]);
        let row = self.opi(Op::IMul, u, &[i, stride]);
        let at = self.opi(Op::IAdd, u, &[offset, row]);
        self.opi(Op::IAdd, u, &[at, j])
    }

    #[allow(clippy::too_many_arguments)]
    fn matrix_load(
        &mut self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        ty: Option<Type>,
    ) -> R<Word> {
        let off = self.expr_u32(offset)?;
        let st = self.expr_u32(stride)?;
        let t = self.value_ty(ty.unwrap_or(Type::U32))?;
        let et = self.scalar_ty(scalar)?;
        let var = self.fn_var(t);
        let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
        let cols = cols as u32;
        self.counted_loop(rows as u32 * cols, |em, e| {
            let at = em.tile_index(e, cols, off, st);
            let x = em.load_elem(base, ElemType::scalar(scalar), at)?;
            let p = em.opi(Op::AccessChain, pt, &[var, e]);
            em.store(p, x);
            Ok(())
        })?;
        Ok(self.load(t, var))
    }

    fn matrix_store(&mut self, value: ExprId, base: Base, offset: ExprId, stride: ExprId) -> R<()> {
        let (scalar, rows, cols) = self.matrix_shape(value)?;
        let v = self.expr(value)?;
        let off = self.expr_u32(offset)?;
        let st = self.expr_u32(stride)?;
        let t = self.value_ty(self.ty_of(value).unwrap_or(Type::U32))?;
        let et = self.scalar_ty(scalar)?;
        let var = self.fn_var(t);
        self.store(var, v);
        let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
        self.counted_loop(rows * cols, |em, e| {
            let at = em.tile_index(e, cols, off, st);
            let p = em.opi(Op::AccessChain, pt, &[var, e]);
            let x = em.load(et, p);
            em.store_elem(base, ElemType::scalar(scalar), at, x)
        })
    }

    /// `d[i][j] = c[i][j] + Σ_k a[i][k] * b[k][j]`, `a` and `b` converted to the accumulator's
    /// type, in ascending `k`, each product and sum rounded.
    fn matrix_mma(&mut self, a: ExprId, b: ExprId, c: ExprId) -> R<Word> {
        let (sa, m, kk) = self.matrix_shape(a)?;
        let (sb, _, n) = self.matrix_shape(b)?;
        let (sc, _, _) = self.matrix_shape(c)?;
        let ta = self.value_ty(self.ty_of(a).unwrap_or(Type::U32))?;
        let tb = self.value_ty(self.ty_of(b).unwrap_or(Type::U32))?;
        let tc = self.value_ty(self.ty_of(c).unwrap_or(Type::U32))?;
        let (va, vb, vc) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
        let (xa, xb, xc) = (self.fn_var(ta), self.fn_var(tb), self.fn_var(tc));
        self.store(xa, va);
        self.store(xb, vb);
        self.store(xc, vc);
        let (ea, eb, ec) = (
            self.scalar_ty(sa)?,
            self.scalar_ty(sb)?,
            self.scalar_ty(sc)?,
        );
        let (pa, pb, pc) = (
            self.tk(TyKey::Ptr(StorageClass::Function, ea)),
            self.tk(TyKey::Ptr(StorageClass::Function, eb)),
            self.tk(TyKey::Ptr(StorageClass::Function, ec)),
        );
        let u = self.u32t();
        let acc = self.fn_var(ec);
        let float = sc.is_float();
        self.counted_loop(m * n, |em, e| {
            let nn = em.cu32(n);
            let i = em.opi(Op::UDiv, u, &[e, nn]);
            let j = em.opi(Op::UMod, u, &[e, nn]);
            let p = em.opi(Op::AccessChain, pc, &[xc, e]);
            let c0 = em.load(ec, p);
            em.store(acc, c0);
            em.counted_loop(kk, |em, k| {
                let kc = em.cu32(kk);
                let ia = em.opi(Op::IMul, u, &[i, kc]);
                let ia = em.opi(Op::IAdd, u, &[ia, k]);
                let ib = em.opi(Op::IMul, u, &[k, nn]);
                let ib = em.opi(Op::IAdd, u, &[ib, j]);
                let qa = em.opi(Op::AccessChain, pa, &[xa, ia]);
                let qb = em.opi(Op::AccessChain, pb, &[xb, ib]);
                let x = em.load(ea, qa);
                let y = em.load(eb, qb);
                let x = em.cast(x, sa, sc, 1)?;
                let y = em.cast(y, sb, sc, 1)?;
                let cur = em.load(ec, acc);
                let s = if float {
                    let prod = em.fop(Op::FMul, ec, &[x, y]);
                    em.fop(Op::FAdd, ec, &[cur, prod])
                } else {
                    let prod = em.opi(Op::IMul, ec, &[x, y]);
                    em.opi(Op::IAdd, ec, &[cur, prod])
                };
                em.store(acc, s);
                Ok(())
            })?;
            let r = em.load(ec, acc);
            em.store(p, r);
            Ok(())
        })?;
        Ok(self.load(tc, xc))
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
