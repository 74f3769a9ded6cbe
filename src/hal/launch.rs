//! Launching a kernel (contract §2.4): the geometry ([`Launch`]), typed arguments
//! ([`ArgValue`], [`HostValue`], the [`args!`](crate::args) macro), and every reason a launch is
//! refused ([`LaunchError`], the contract's `XpuLaunchException`).
//!
//! [`check`] holds the refusals every backend shares and runs before a backend sees the
//! launch: the argument list against the kernel's signature (naming the parameter), the
//! geometry against the kernel's declarations and the device's reported limits, shared memory,
//! the declared wave width, the pinned block, and each buffer view's base alignment. A limit the
//! device does not report is not checked (absent is absent, contract §1). Backends add the
//! refusals only they can make (a broken `align` statement, undefined behaviour seen by the
//! interpreter, a view Vulkan cannot bind) with the same error type.

#![warn(missing_docs)]

use crate::hal::facts::DeviceFacts;
use crate::hal::manifest::KernelManifest;
use crate::hal::Backend;
use crate::ir::{Access, ElemType, Function, FunctionInfo, Scalar, Type};
use crate::runtime::buffer::RawBuffer;
use std::fmt;
use std::time::Duration;

/// The stable codes of launch refusals. `XPU-REF01`/`XPU-REF02` are the contract's.
pub mod codes {
    /// [`super::LaunchError::NoCode`]: no device code for the kernel on this backend.
    pub const NO_CODE: &str = "XPU-L001";
    /// [`super::LaunchError::ArgCount`]: the wrong number of arguments.
    pub const ARG_COUNT: &str = "XPU-L002";
    /// [`super::LaunchError::ArgType`]: an argument of another type than its parameter's.
    pub const ARG_TYPE: &str = "XPU-L003";
    /// [`super::LaunchError::EmptyGeometry`]: a zero grid or block dimension.
    pub const EMPTY_GEOMETRY: &str = "XPU-L004";
    /// [`super::LaunchError::TooManyThreads`]: a grid or block past a limit.
    pub const TOO_MANY_THREADS: &str = "XPU-L005";
    /// [`super::LaunchError::SharedMemory`]: more shared memory than allowed.
    pub const SHARED_MEMORY: &str = "XPU-L006";
    /// [`super::LaunchError::WaveWidth`]: an unsupported wave width.
    pub const WAVE_WIDTH: &str = "XPU-L007";
    /// [`super::LaunchError::PinnedBlock`]: a block other than the pinned one.
    pub const PINNED_BLOCK: &str = "XPU-L008";
    /// A block that leaves a partial wave, for a kernel whose software matrix tiles are
    /// distributed over whole waves (contract §3.3).
    pub const PARTIAL_WAVE: &str = "XPU-N01";
    /// [`super::LaunchError::MisalignedBase`]: a view's base misaligned for the kernel.
    pub const MISALIGNED_BASE: &str = "XPU-L009";
    /// [`super::LaunchError::BrokenAlign`]: a stated `align` broken (ub-traps).
    pub const BROKEN_ALIGN: &str = "XPU-L010";
    /// [`super::LaunchError::ScalarTwin`]: a wave kernel's scalar twin would have run.
    pub const SCALAR_TWIN: &str = "XPU-L011";
    /// [`super::LaunchError::UnbindableView`]: a Vulkan view the device cannot bind.
    pub const UNBINDABLE_VIEW: &str = "XPU-L012";
    /// [`super::LaunchError::OutOfBounds`]: an access out of bounds (host backends, checked mode).
    pub const OUT_OF_BOUNDS: &str = "XPU-L013";
    /// [`super::LaunchError::ForeignObject`]: another device's buffer or stream.
    pub const FOREIGN_OBJECT: &str = "XPU-L014";
    /// [`super::LaunchError::Device`]: the device or driver failed the launch.
    pub const DEVICE: &str = "XPU-L015";
    /// [`super::LaunchError::LoopLimit`]: the Vulkan driver cut a loop short.
    pub const LOOP_LIMIT: &str = "XPU-L016";
    /// [`super::LaunchError::PrivateMemory`]: more private memory than the device holds.
    pub const PRIVATE_MEMORY: &str = crate::codegen::codes::PRIVATE_MEMORY;
    /// [`super::LaunchError::Deadline`]: the launch missed its deadline.
    pub const DEADLINE: &str = "XPU-L018";
    /// [`super::LaunchError::DeviceFault`]: the device faulted; its context was recreated.
    pub const DEVICE_FAULT: &str = "XPU-L022";
    /// [`super::LaunchError::LostBuffer`]: a buffer lost with an earlier device fault.
    pub const LOST_BUFFER: &str = "XPU-L023";
    /// [`super::LaunchError::Held`]: the kernel is held on this backend (`@unlowered(hold = true)`).
    pub const HELD: &str = "XPU-L019";
    /// [`super::LaunchError::NoShapeFits`]: no member of a shape family fits.
    pub const NO_SHAPE_FITS: &str = "XPU-L025";
    /// [`super::LaunchError::Deferred`]: refused because the deferred queue failed before it.
    pub const DEFERRED: &str = "XPU-L026";
    /// [`super::LaunchError::AssertFailed`]: an `assert` in the kernel failed.
    pub const ASSERT_FAILED: &str = "XPU-L035";
    /// [`super::LaunchError::ConstantTooLarge`]: a `buf<_, const>` over the device's
    /// constant limit.
    pub const CONSTANT_TOO_LARGE: &str = "XPU-L040";
    /// [`super::LaunchError::ConstantOffset`]: a `buf<_, const>` view at an offset the
    /// device cannot bind as constant data.
    pub const CONSTANT_OFFSET: &str = "XPU-L041";
    /// [`super::LaunchError::Undefinable`]: the interpreter cannot define the kernel.
    pub const UNDEFINABLE: &str = "XPU-REF01";
    /// [`super::LaunchError::Undefined`]: the interpreter observed undefined behaviour.
    pub const UNDEFINED_BEHAVIOR: &str = "XPU-REF02";
}

/// Grid or block dimensions: `4`, `[4]`, `[4, 2]` or `[4, 2, 1]`; missing dimensions are 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims(pub [u32; 3]);

impl From<u32> for Dims {
    fn from(x: u32) -> Self {
        Dims([x, 1, 1])
    }
}
impl From<[u32; 1]> for Dims {
    fn from([x]: [u32; 1]) -> Self {
        Dims([x, 1, 1])
    }
}
impl From<[u32; 2]> for Dims {
    fn from([x, y]: [u32; 2]) -> Self {
        Dims([x, y, 1])
    }
}
impl From<[u32; 3]> for Dims {
    fn from(d: [u32; 3]) -> Self {
        Dims(d)
    }
}

/// The geometry of one launch: `Launch::grid([blocks]).block([256]).shared_bytes(n)`.
///
/// ```
/// use std::time::Duration;
/// use xpu::hal::launch::InterpLaunch;
/// use xpu::Launch;
///
/// let launch = Launch::grid([64, 2]).block(256).deadline(Duration::from_secs(5));
/// assert_eq!((launch.grid, launch.block), ([64, 2, 1], [256, 1, 1]));
/// assert_eq!(launch.wave, None);
/// // The interpreter's options travel with the launch; other backends ignore them.
/// let racy = Launch::grid(1).block(32).interp(InterpLaunch {
///     allow_races: true,
///     ..Default::default()
/// });
/// assert!(racy.interp.allow_races);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Workgroups per dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup and dimension.
    pub block: [u32; 3],
    /// Dynamic shared memory, sizing the kernel's `shared name: [T];` array.
    pub shared_bytes: u32,
    /// Whether the launch opts in to the device's larger per-block shared limit (§5.2).
    pub shared_opt_in: bool,
    /// The wave width the launch assumes. The interpreter models a wave of this width; any
    /// other backend refuses the launch when its kernel was built at a different width.
    pub wave: Option<u32>,
    /// How long the launch may run (contract §2.4, refusal 6). The interpreter and the CPU
    /// cancel a launch that runs past it ([`LaunchError::Deadline`]); GPU backends, which
    /// cannot cancel a kernel, report it and leave the kernel to finish (CUDA at the
    /// stream's next sync, host read or event record/wait, as
    /// [`DeviceError::Deadline`](crate::hal::DeviceError::Deadline)). `None` (the default):
    /// no limit.
    pub deadline: Option<Duration>,
    /// The interpreter's options for this launch (other backends ignore them): see
    /// [`InterpLaunch`].
    pub interp: InterpLaunch,
}

/// Options of the reference interpreter a launch can carry ([`Launch::interp`]); other
/// backends ignore them. A device opened with
/// [`Device::interp_with`](crate::runtime::device::Device::interp_with) sets the same (and
/// names races by buffer or shared array) for every launch; what a launch sets here wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterpLaunch {
    /// Report no data race in this launch: every buffer parameter and shared array is taken
    /// as racing on purpose (a benign-race kernel, value-tested).
    pub allow_races: bool,
    /// Run workgroups and work-items in an order shuffled by this seed.
    pub shuffle_seed: Option<u64>,
    /// The most work-item steps the launch may execute; past it the launch is refused with
    /// `XPU-L015` (a device failure naming the step budget).
    pub max_steps: Option<u64>,
}

impl Launch {
    /// A launch of `grid` workgroups of one work-item each (set the block with [`Launch::block`]).
    pub fn grid(grid: impl Into<Dims>) -> Self {
        Launch {
            grid: grid.into().0,
            block: [1, 1, 1],
            shared_bytes: 0,
            shared_opt_in: false,
            wave: None,
            deadline: None,
            interp: InterpLaunch::default(),
        }
    }

    /// Sets the interpreter's options for this launch ([`InterpLaunch`]).
    pub fn interp(mut self, options: InterpLaunch) -> Self {
        self.interp = options;
        self
    }

    /// Sets the block (work-items per workgroup): `64`, `[16, 16]`; missing dimensions are 1.
    pub fn block(mut self, block: impl Into<Dims>) -> Self {
        self.block = block.into().0;
        self
    }

    /// Sets the bytes of dynamic shared memory (a `shared ... [dynamic]` array) per workgroup.
    pub fn shared_bytes(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// Asks for shared memory past the default per-block limit where the device has an opt-in
    /// limit (CUDA's `MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`).
    pub fn shared_opt_in(mut self, opt_in: bool) -> Self {
        self.shared_opt_in = opt_in;
        self
    }

    /// Sets the wave width the launch assumes (the `wave` field).
    pub fn wave(mut self, width: u32) -> Self {
        self.wave = Some(width);
        self
    }

    /// Sets the launch's deadline (see [`Launch::deadline`]).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Work-items per workgroup.
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|&b| b as u64).product()
    }

    /// Workgroups in the grid.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g as u64).product()
    }
}

/// A scalar or vector value passed by value to a kernel: its type and the bits of each lane
/// (integers two's complement, floats IEEE, `bool` 0 or 1, `f16` its 16 bits), zero-extended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HostValue {
    ty: ElemType,
    lanes: [u64; 16],
}

impl HostValue {
    /// A scalar of type `scalar` holding `bits` (truncated to the type's width).
    pub fn scalar(scalar: Scalar, bits: u64) -> Self {
        let mut lanes = [0; 16];
        lanes[0] = bits & mask(scalar);
        HostValue {
            ty: ElemType::scalar(scalar),
            lanes,
        }
    }

    /// A vector of `lanes.len()` lanes (2, 3, 4, 8 or 16), each truncated to the scalar's width.
    pub fn vector(scalar: Scalar, lanes: &[u64]) -> Option<Self> {
        if !crate::ir::VECTOR_LANES.contains(&(lanes.len() as u8)) {
            return None;
        }
        let mut bits = [0; 16];
        for (dst, src) in bits.iter_mut().zip(lanes) {
            *dst = src & mask(scalar);
        }
        Some(HostValue {
            ty: ElemType::vector(scalar, lanes.len() as u8),
            lanes: bits,
        })
    }

    /// The value's type (a scalar is a one-lane element).
    pub fn ty(&self) -> ElemType {
        self.ty
    }

    /// The bits of lane `i` (`0` past the last lane).
    pub fn lane_bits(&self, i: usize) -> u64 {
        self.lanes.get(i).copied().unwrap_or(0)
    }

    /// The bits of every lane.
    pub fn lanes(&self) -> &[u64] {
        &self.lanes[..self.ty.lanes as usize]
    }

    /// The value as it is laid out in memory: each lane little-endian at its scalar's size.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let size = self.ty.scalar.size() as usize;
        self.lanes()
            .iter()
            .flat_map(|bits| bits.to_le_bytes().into_iter().take(size))
            .collect()
    }

    /// The inverse of [`HostValue::to_le_bytes`]; `None` when `bytes` has the wrong length.
    pub fn from_le_bytes(ty: ElemType, bytes: &[u8]) -> Option<Self> {
        let size = ty.scalar.size() as usize;
        if bytes.len() != ty.size() as usize || ty.lanes == 0 || ty.lanes > 16 {
            return None;
        }
        let mut lanes = [0u64; 16];
        for (lane, chunk) in lanes.iter_mut().zip(bytes.chunks(size)) {
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(chunk);
            *lane = u64::from_le_bytes(buf);
        }
        Some(HostValue { ty, lanes })
    }
}

fn mask(scalar: Scalar) -> u64 {
    match scalar {
        Scalar::Bool => 1,
        s if s.bits() == 64 => u64::MAX,
        s => (1u64 << s.bits()) - 1,
    }
}

impl fmt::Debug for HostValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", elem_name(self.ty))?;
        for (i, bits) in self.lanes().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}", format_scalar(self.ty.scalar, *bits))?;
        }
        write!(f, ")")
    }
}

/// A scalar's bits shown as its value (`1.5`, `-3`, `true`); `f16` shown through `f32`.
pub fn format_scalar(scalar: Scalar, bits: u64) -> String {
    match scalar {
        Scalar::Bool => (bits != 0).to_string(),
        Scalar::I8 => (bits as u8 as i8).to_string(),
        Scalar::I16 => (bits as u16 as i16).to_string(),
        Scalar::I32 => (bits as u32 as i32).to_string(),
        Scalar::I64 => (bits as i64).to_string(),
        Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => bits.to_string(),
        Scalar::F16 => format!("{:?}", half::f16::from_bits(bits as u16).to_f32()),
        Scalar::F32 => format!("{:?}", f32::from_bits(bits as u32)),
        Scalar::F64 => format!("{:?}", f64::from_bits(bits)),
    }
}

macro_rules! host_value_from {
    ($($t:ty => $s:ident, $conv:expr;)*) => {$(
        impl From<$t> for HostValue {
            fn from(v: $t) -> Self {
                #[allow(clippy::redundant_closure_call)]
                HostValue::scalar(Scalar::$s, ($conv)(v))
            }
        }
        impl<const N: usize> From<[$t; N]> for HostValue {
            /// A vector value; `N` must be 2, 3, 4, 8 or 16 (others become a 1-lane zero and
            /// are refused at launch as a type mismatch).
            fn from(v: [$t; N]) -> Self {
                let lanes: Vec<u64> = v.iter().map(|&x| {
                    #[allow(clippy::redundant_closure_call)]
                    ($conv)(x)
                }).collect();
                HostValue::vector(Scalar::$s, &lanes).unwrap_or(HostValue {
                    ty: ElemType::vector(Scalar::$s, 0),
                    lanes: [0; 16],
                })
            }
        }
    )*};
}

host_value_from! {
    bool => Bool, |v: bool| v as u64;
    i8 => I8, |v: i8| v as u8 as u64;
    i16 => I16, |v: i16| v as u16 as u64;
    i32 => I32, |v: i32| v as u32 as u64;
    i64 => I64, |v: i64| v as u64;
    u8 => U8, |v: u8| v as u64;
    u16 => U16, |v: u16| v as u64;
    u32 => U32, |v: u32| v as u64;
    u64 => U64, |v: u64| v;
    half::f16 => F16, |v: half::f16| v.to_bits() as u64;
    f32 => F32, |v: f32| v.to_bits() as u64;
    f64 => F64, |v: f64| v.to_bits();
}

/// A buffer view passed to a kernel, with the element type it is passed as and whether the
/// caller lent it for writing (`&mut buffer`). Made only by [`ArgValue::raw`],
/// [`ArgValue::raw_mut`] and the conversions from `&KernelBuffer`/`&mut KernelBuffer`, so
/// that a buffer lent read-only (`&`) is never passed as writable.
#[derive(Clone, Copy)]
pub struct BufferArg<'a> {
    pub(crate) raw: &'a RawBuffer,
    pub(crate) elem: ElemType,
    pub(crate) writable: bool,
}

impl<'a> BufferArg<'a> {
    /// The buffer.
    pub fn raw(&self) -> &'a RawBuffer {
        self.raw
    }

    /// The element type the buffer is passed as.
    pub fn elem(&self) -> ElemType {
        self.elem
    }

    /// Whether the caller lent the buffer for writing.
    pub fn writable(&self) -> bool {
        self.writable
    }
}

/// One kernel argument: a buffer view, a value, or a function tag.
#[derive(Clone, Copy)]
pub enum ArgValue<'a> {
    /// A buffer view, lent read-only or for writing.
    Buffer(BufferArg<'a>),
    /// A scalar or vector value.
    Value(HostValue),
    /// A `tag<Set>` parameter's member index (out of range is allowed: dispatch through it
    /// does nothing). Backends receive it as a `u32` value.
    Tag(u32),
}

impl<'a> ArgValue<'a> {
    /// An untyped buffer lent read-only, passed as elements of `elem` (the file-test runner's
    /// buffers, typed by the kernel's parameter). A kernel cannot write it: a `buf<T, rw>`
    /// parameter refuses it (`XPU-L003`), as it refuses `&KernelBuffer`.
    ///
    /// ```compile_fail
    /// # fn f(raw: &xpu::buffer::RawBuffer, elem: xpu::ir::ElemType) {
    /// // No flag makes a shared borrow writable: lend it with `raw_mut(&mut raw, elem)`.
    /// let _ = xpu::ArgValue::raw(raw, elem, true);
    /// # }
    /// ```
    pub fn raw(raw: &'a RawBuffer, elem: ElemType) -> Self {
        ArgValue::Buffer(BufferArg {
            raw,
            elem,
            writable: false,
        })
    }

    /// An untyped buffer lent for writing (`&mut`), passed as elements of `elem`.
    pub fn raw_mut(raw: &'a mut RawBuffer, elem: ElemType) -> Self {
        ArgValue::Buffer(BufferArg {
            raw,
            elem,
            writable: true,
        })
    }

    /// What this argument is, as the text format names types (`buf<f32, rw>`, `u32`).
    pub fn type_name(&self) -> String {
        match self {
            ArgValue::Buffer(b) => {
                let elem = elem_name(b.elem);
                if b.writable {
                    format!("buf<{elem}, rw>")
                } else {
                    format!("buf<{elem}>")
                }
            }
            ArgValue::Value(v) => elem_name(v.ty),
            ArgValue::Tag(_) => "tag".to_string(),
        }
    }
}

impl<V: Into<HostValue>> From<V> for ArgValue<'_> {
    fn from(v: V) -> Self {
        ArgValue::Value(v.into())
    }
}

/// Builds an argument array for [`Kernel::launch`](crate::runtime::device::Kernel::launch):
/// `args![&mut y, &x, 2.0f32, n]` (a buffer lent for writing is `&mut`).
#[macro_export]
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        [$($crate::hal::launch::ArgValue::from($arg)),*]
    };
}

/// Why a launch did not run (the contract's `XpuLaunchException`). Each variant has a stable
/// code ([`LaunchError::code`]) and names the kernel; it prints as `error[CODE]: kernel NAME:
/// message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// No device code for the kernel on this backend: no such kernel in the program, or the
    /// backend could not lower it (with the lowering's reason).
    #[error("error[{}]: kernel {kernel}: no code on the {} backend: {reason}", codes::NO_CODE, backend.name())]
    NoCode {
        /// The kernel the launch named.
        kernel: String,
        /// The backend that refused it.
        backend: Backend,
        /// Why, in words (where a lowering refused, its error as it prints).
        reason: String,
        /// The lowering's refusal, typed, where a lowering refused (see
        /// [`LaunchError::lowering`]).
        #[source]
        lowering: Option<Box<crate::codegen::Error>>,
        /// The kernel is well formed but needs what this device lacks (a type, a verb, a
        /// wave mapping, push-constant room): see [`LaunchError::refused_by_device`].
        by_device: bool,
    },
    /// The number of arguments is not the kernel's parameter count.
    #[error(
        "error[{}]: kernel {kernel}: takes {expected} arguments, got {got}",
        codes::ARG_COUNT
    )]
    ArgCount {
        /// The kernel the launch named.
        kernel: String,
        /// The kernel's parameter count.
        expected: usize,
        /// How many arguments were passed.
        got: usize,
    },
    /// An argument whose type is not its parameter's; `index` counts from 0.
    #[error(
        "error[{}]: kernel {kernel}: argument {index} ({param}) is {expected}, got {got}",
        codes::ARG_TYPE
    )]
    ArgType {
        /// The kernel the launch named.
        kernel: String,
        /// The argument's position, from 0.
        index: usize,
        /// The parameter's name.
        param: String,
        /// The parameter's type, as the text format writes it.
        expected: String,
        /// The argument's type, as the text format writes it.
        got: String,
    },
    /// A zero dimension in the grid or the block.
    #[error(
        "error[{}]: kernel {kernel}: {what} {dims:?} has a zero dimension",
        codes::EMPTY_GEOMETRY
    )]
    EmptyGeometry {
        /// The kernel the launch named.
        kernel: String,
        /// `grid` or `block`.
        what: &'static str,
        /// The dimensions given.
        dims: [u32; 3],
    },
    /// A grid or block larger than the device, the kernel's declared ceiling, or the 32-bit
    /// coordinate space allows.
    #[error(
        "error[{}]: kernel {kernel}: too many threads: {what} {dims:?}: {limit}",
        codes::TOO_MANY_THREADS
    )]
    TooManyThreads {
        /// The kernel the launch named.
        kernel: String,
        /// `grid` or `block`.
        what: &'static str,
        /// The dimensions given.
        dims: [u32; 3],
        /// What the device, the backend or the kernel allows, in words.
        limit: String,
        /// The limit is the device's (or its backend's), not the kernel's declaration or the
        /// 32-bit coordinate space every backend shares.
        by_device: bool,
    },
    /// The launch needs more shared memory than the device or the kernel allows.
    #[error(
        "error[{}]: kernel {kernel}: too much shared memory: needs {need} bytes, {limit}",
        codes::SHARED_MEMORY
    )]
    SharedMemory {
        /// The kernel the launch named.
        kernel: String,
        /// Bytes of shared memory the launch needs (static and dynamic).
        need: u64,
        /// What the device, the backend or the kernel allows, in words.
        limit: String,
    },
    /// A wave width the device cannot run the kernel at.
    #[error(
        "error[{}]: kernel {kernel}: unsupported wave width {declared}: {reason}",
        codes::WAVE_WIDTH
    )]
    WaveWidth {
        /// The kernel the launch named.
        kernel: String,
        /// The wave width the kernel or the launch declared.
        declared: u32,
        /// Why, in words.
        reason: String,
    },
    /// A block other than the one the kernel pins with `@block` (contract §3.4).
    #[error(
        "error[{}]: kernel {kernel}: block {got:?} differs from the pinned block {pinned:?}",
        codes::PINNED_BLOCK
    )]
    PinnedBlock {
        /// The kernel the launch named.
        kernel: String,
        /// The block the kernel's `@block` pins.
        pinned: [u32; 3],
        /// The launch's block.
        got: [u32; 3],
    },
    /// The kernel's cooperative-matrix tiles are distributed over the lanes of whole waves
    /// (the software tier, contract §3.3) and the block leaves a partial wave.
    #[error(
        "error[{}]: kernel {kernel}: block {block:?} ({threads} work-items) leaves a partial wave of {wave}: its cooperative matrices are distributed software tiles, which need whole waves (CAJETA_GPU_MATRIX_DIST=off replicates them)",
        codes::PARTIAL_WAVE
    )]
    PartialWave {
        /// The kernel the launch named.
        kernel: String,
        /// The block asked for.
        block: [u32; 3],
        /// Its work-items.
        threads: u64,
        /// The wave width the tiles are distributed over.
        wave: u32,
    },
    /// A buffer view whose base is not aligned to what the kernel's accesses need.
    #[error("error[{}]: kernel {kernel}: buffer {param} starts at byte {offset}, not a multiple of {align}", codes::MISALIGNED_BASE)]
    MisalignedBase {
        /// The kernel the launch named.
        kernel: String,
        /// The parameter the buffer was passed as.
        param: String,
        /// The view's byte offset in its buffer.
        offset: u64,
        /// The alignment the accesses need, in bytes.
        align: u64,
    },
    /// A `vload`/`vstore` whose stated `align` the index broke (checked builds).
    #[error(
        "error[{}]: kernel {kernel}: line {line}: align = {align} broken at index {index}",
        codes::BROKEN_ALIGN
    )]
    BrokenAlign {
        /// The kernel the launch named.
        kernel: String,
        /// The statement's source line.
        line: u32,
        /// The element index that broke the statement.
        index: u64,
        /// The `align` the statement stated.
        align: u32,
    },
    /// The CPU vectoriser would leave the wave kernel's loop scalar (contract §3.7).
    #[error(
        "error[{}]: kernel {kernel}: the scalar twin of a wave kernel would have run: {reason}",
        codes::SCALAR_TWIN
    )]
    ScalarTwin {
        /// The kernel the launch named.
        kernel: String,
        /// Why, in words.
        reason: String,
    },
    /// A Vulkan view at an offset the device cannot bind.
    #[error("error[{}]: kernel {kernel}: buffer {param} at byte {offset} cannot be bound (the device needs a multiple of {align})", codes::UNBINDABLE_VIEW)]
    UnbindableView {
        /// The kernel the launch named.
        kernel: String,
        /// The parameter the buffer was passed as.
        param: String,
        /// The view's byte offset in its buffer.
        offset: u64,
        /// The offset alignment the device needs, in bytes.
        align: u64,
    },
    /// An access outside a buffer or shared array, caught by a host backend (DESIGN.md,
    /// Decisions 8).
    #[error("error[{}]: kernel {kernel}: line {line}: index {index} out of bounds of {what} (length {len})", codes::OUT_OF_BOUNDS)]
    OutOfBounds {
        /// The kernel the launch named.
        kernel: String,
        /// The access's source line.
        line: u32,
        /// The buffer parameter or shared array accessed.
        what: String,
        /// The element index accessed.
        index: u64,
        /// Its length in elements.
        len: u64,
    },
    /// A buffer or stream that belongs to another device.
    #[error(
        "error[{}]: kernel {kernel}: {what} belongs to another device",
        codes::FOREIGN_OBJECT
    )]
    ForeignObject {
        /// The kernel the launch named.
        kernel: String,
        /// Which argument, or the stream.
        what: String,
    },
    /// Private arrays (and, on the CPU, the waves' other state) larger than the device or
    /// host holds: refused before any code runs (DESIGN.md, Decisions 8).
    #[error(
        "error[{}]: kernel {kernel}: too much private memory: needs {need} bytes, {limit}",
        codes::PRIVATE_MEMORY
    )]
    PrivateMemory {
        /// The kernel the launch named.
        kernel: String,
        /// Bytes of private memory the launch needs.
        need: u64,
        /// What the device, the backend or the kernel allows, in words.
        limit: String,
    },
    /// The device or its driver failed the launch.
    #[error("error[{}]: kernel {kernel}: device failure: {message}", codes::DEVICE)]
    Device {
        /// The kernel the launch named.
        kernel: String,
        /// The driver's or the interpreter's message.
        message: String,
    },
    /// The device's driver cut a loop short: it ends an invocation's loops after `limit`
    /// passes counted over all of them (Mesa's lavapipe, docs/vulkan-backend.md). The launch
    /// ran to its end and its results are wrong; the Vulkan backend finds this out by waiting
    /// for such a launch (only on a device known to limit loops, and only for kernels with
    /// a loop).
    #[error(
        "error[{}]: kernel {kernel}: the Vulkan driver cut a loop short (it ends an \
         invocation's loops after {limit} passes counted over all of them): the results are \
         wrong",
        codes::LOOP_LIMIT
    )]
    LoopLimit {
        /// The kernel the launch named.
        kernel: String,
        /// The driver's pass limit.
        limit: u32,
    },
    /// The launch ran past its deadline (contract §2.4, refusal 6). On the interpreter and the
    /// CPU the launch was cancelled (buffers it wrote hold what it wrote so far); on a GPU
    /// backend the kernel may still be running, and the next synchronising call waits for it.
    #[error(
        "error[{}]: kernel {kernel}: missed its deadline of {}",
        codes::DEADLINE,
        deadline_text(.deadline, .cancelled)
    )]
    Deadline {
        /// The kernel the launch named.
        kernel: String,
        /// The deadline the launch had.
        deadline: Duration,
        /// Whether the backend stopped the launch (interpreter, CPU) or only reported it.
        cancelled: bool,
    },
    /// The device faulted (a sticky CUDA/HIP error: an illegal or misaligned address, a trap)
    /// while running `kernel`, the kernel launched last before the fault was seen. The
    /// backend recreates the device's context where the driver lets it (the message says how
    /// it went; where it could not, later calls give `XPU-D016`), and every buffer of the lost
    /// context reports `XPU-D014` on use.
    #[error(
        "error[{}]: kernel {kernel}: the device faulted running it: {message} (the \
         message says whether the context was recreated); every buffer allocated before the \
         fault is lost",
        codes::DEVICE_FAULT
    )]
    DeviceFault {
        /// The kernel the launch named.
        kernel: String,
        /// The driver's error.
        message: String,
    },
    /// A buffer argument lost with an earlier device fault (its context was recreated).
    #[error(
        "error[{}]: kernel {kernel}: buffer {param} was lost with the device fault of kernel \
         {fault}; allocate and upload it again",
        codes::LOST_BUFFER
    )]
    LostBuffer {
        /// The kernel the launch named.
        kernel: String,
        /// The parameter the buffer was passed as.
        param: String,
        /// The kernel whose fault lost the buffer.
        fault: String,
    },
    /// The kernel is held on this backend by `@unlowered(backend = ..., hold = true)`
    /// (contract §3.6): no code was built for it, by declaration, and the launch is refused
    /// by name with the plan item that tracks the hold.
    #[error(
        "error[{}]: kernel {kernel}: held on the {} backend by @unlowered(hold = true) [tracked: {tracked}]",
        codes::HELD,
        backend.name()
    )]
    Held {
        /// The kernel the launch named.
        kernel: String,
        /// The backend the kernel is held on.
        backend: Backend,
        /// The plan item that tracks the hold.
        tracked: String,
    },
    /// No member of a shape family fits this device at this problem (contract §6.1): every
    /// candidate was pruned; `verdicts` names each with its rule, need and limit.
    #[error(
        "error[{}]: family {family}: no candidate fits this device at {problem}: {verdicts}",
        codes::NO_SHAPE_FITS
    )]
    NoShapeFits {
        /// The family (in the kernel position: [`LaunchError::kernel`] answers it).
        family: String,
        /// `MxNxK`.
        problem: String,
        /// Each candidate's pruning rule, need and limit, in words.
        verdicts: String,
    },
    /// Not launched: the deferred stream's queue failed before this launch (at the flush
    /// this launch set off, or at an earlier one not yet acknowledged with
    /// `KernelStream::clear_failure`); `message` is the flush's error, naming the kernel that
    /// failed (contract §2.4, deferred streams).
    #[error(
        "error[{}]: kernel {kernel}: not launched: the stream's deferred launches failed: {message}",
        codes::DEFERRED
    )]
    Deferred {
        /// The kernel not launched.
        kernel: String,
        /// The failed flush's error.
        message: String,
    },
    /// An `assert` in the kernel failed (issue 23 item 9): the first failure in work-item
    /// order (docs/semantics.md, "Print and assert"), by source line and work-item.
    #[error(
        "error[{}]: kernel {kernel}: line {line}: assert failed in work-item ({}, {}, {}) of workgroup ({}, {}, {}): {message}",
        codes::ASSERT_FAILED, item[0], item[1], item[2], group[0], group[1], group[2]
    )]
    AssertFailed {
        /// The kernel the launch named.
        kernel: String,
        /// The assert's source line.
        line: u32,
        /// The workgroup's id.
        group: [u32; 3],
        /// The work-item's local id in its workgroup.
        item: [u32; 3],
        /// The assert's message.
        message: String,
    },
    /// A constant buffer (`buf<_, const>`) larger than the device's constant limit
    /// ([`DeviceFacts::constant_bytes`](crate::hal::facts::DeviceFacts::constant_bytes)).
    #[error("error[{}]: kernel {kernel}: constant buffer {param} has {bytes} bytes; the device allows {limit} bytes of constant data per buffer (pass it as `buf<_>` instead)", codes::CONSTANT_TOO_LARGE)]
    ConstantTooLarge {
        /// The kernel the launch named.
        kernel: String,
        /// The parameter the buffer was passed as.
        param: String,
        /// The view's size in bytes.
        bytes: u64,
        /// The device's limit in bytes.
        limit: u64,
    },
    /// A constant buffer view whose offset is not a multiple of the device's constant-binding
    /// alignment (Vulkan's `minUniformBufferOffsetAlignment`).
    #[error("error[{}]: kernel {kernel}: constant buffer {param} starts at byte {offset}, not a multiple of the device's constant-binding alignment {align}", codes::CONSTANT_OFFSET)]
    ConstantOffset {
        /// The kernel the launch named.
        kernel: String,
        /// The parameter the buffer was passed as.
        param: String,
        /// The view's byte offset in its buffer.
        offset: u64,
        /// The alignment the device needs.
        align: u64,
    },
    /// The interpreter cannot define what the kernel does (`XPU-REF01`).
    #[error("error[{}]: kernel {kernel}: {message}", codes::UNDEFINABLE)]
    Undefinable {
        /// The kernel the launch named.
        kernel: String,
        /// Why, in words.
        message: String,
    },
    /// The interpreter observed undefined behaviour (`XPU-REF02`); `kind` names it
    /// (`out-of-bounds`, `race`, ...), `report` is the interpreter's text, `ub` the same kind
    /// as an enum and `site` where it happened (function, `line:col`, work-item).
    #[error("error[{}]: kernel {kernel}: {report}", codes::UNDEFINED_BEHAVIOR)]
    Undefined {
        /// The kernel the launch named.
        kernel: String,
        /// The kind's name (`out-of-bounds`, `race`, ...).
        kind: String,
        /// The interpreter's report.
        report: String,
        /// The kind as an enum.
        ub: crate::interp::UbKind,
        /// Where it happened.
        site: Box<Site>,
    },
}

impl LaunchError {
    /// The stable code (`XPU-L003`, `XPU-REF02`, ...).
    pub fn code(&self) -> &'static str {
        use LaunchError::*;
        match self {
            NoCode { .. } => codes::NO_CODE,
            ArgCount { .. } => codes::ARG_COUNT,
            ArgType { .. } => codes::ARG_TYPE,
            EmptyGeometry { .. } => codes::EMPTY_GEOMETRY,
            TooManyThreads { .. } => codes::TOO_MANY_THREADS,
            SharedMemory { .. } => codes::SHARED_MEMORY,
            WaveWidth { .. } => codes::WAVE_WIDTH,
            PinnedBlock { .. } => codes::PINNED_BLOCK,
            PartialWave { .. } => codes::PARTIAL_WAVE,
            MisalignedBase { .. } => codes::MISALIGNED_BASE,
            BrokenAlign { .. } => codes::BROKEN_ALIGN,
            ScalarTwin { .. } => codes::SCALAR_TWIN,
            UnbindableView { .. } => codes::UNBINDABLE_VIEW,
            OutOfBounds { .. } => codes::OUT_OF_BOUNDS,
            ForeignObject { .. } => codes::FOREIGN_OBJECT,
            Device { .. } => codes::DEVICE,
            LoopLimit { .. } => codes::LOOP_LIMIT,
            PrivateMemory { .. } => codes::PRIVATE_MEMORY,
            Deadline { .. } => codes::DEADLINE,
            DeviceFault { .. } => codes::DEVICE_FAULT,
            LostBuffer { .. } => codes::LOST_BUFFER,
            Held { .. } => codes::HELD,
            NoShapeFits { .. } => codes::NO_SHAPE_FITS,
            Deferred { .. } => codes::DEFERRED,
            Undefinable { .. } => codes::UNDEFINABLE,
            Undefined { .. } => codes::UNDEFINED_BEHAVIOR,
            AssertFailed { .. } => codes::ASSERT_FAILED,
            ConstantTooLarge { .. } => codes::CONSTANT_TOO_LARGE,
            ConstantOffset { .. } => codes::CONSTANT_OFFSET,
        }
    }

    /// No code for `kernel` on `backend`, for a reason other than a lowering's refusal (no
    /// such kernel, a configuration or driver failure before any code was made).
    pub fn no_code(kernel: &str, backend: Backend, reason: impl Into<String>) -> Self {
        LaunchError::NoCode {
            kernel: kernel.to_string(),
            backend,
            reason: reason.into(),
            lowering: None,
            by_device: false,
        }
    }

    /// No code for `kernel` on `backend` because its lowering refused with `error`;
    /// `by_device`: the refusal is a capability this device lacks.
    pub fn lowering(
        kernel: &str,
        backend: Backend,
        error: crate::codegen::Error,
        by_device: bool,
    ) -> Self {
        LaunchError::NoCode {
            kernel: kernel.to_string(),
            backend,
            reason: error.to_string(),
            lowering: Some(Box::new(error)),
            by_device,
        }
    }

    /// Whether this device, not the kernel or the launch, is why it did not run: a
    /// capability the device lacks (`NoCode` with `by_device`, an unsupported wave width), one
    /// of its limits (grid or block size, shared memory), or its driver's loop limit. Another
    /// device may run the same launch; the file-test runner reports these as skipped.
    pub fn refused_by_device(&self) -> bool {
        use LaunchError::*;
        match self {
            NoCode { by_device, .. } | TooManyThreads { by_device, .. } => *by_device,
            SharedMemory { .. }
            | PrivateMemory { .. }
            | WaveWidth { .. }
            | LoopLimit { .. }
            | Held { .. }
            | NoShapeFits { .. } => true,
            _ => false,
        }
    }

    /// The kernel the launch was for.
    pub fn kernel(&self) -> &str {
        use LaunchError::*;
        match self {
            NoCode { kernel, .. }
            | ArgCount { kernel, .. }
            | ArgType { kernel, .. }
            | EmptyGeometry { kernel, .. }
            | TooManyThreads { kernel, .. }
            | SharedMemory { kernel, .. }
            | WaveWidth { kernel, .. }
            | PinnedBlock { kernel, .. }
            | PartialWave { kernel, .. }
            | MisalignedBase { kernel, .. }
            | BrokenAlign { kernel, .. }
            | ScalarTwin { kernel, .. }
            | UnbindableView { kernel, .. }
            | OutOfBounds { kernel, .. }
            | ForeignObject { kernel, .. }
            | Device { kernel, .. }
            | LoopLimit { kernel, .. }
            | PrivateMemory { kernel, .. }
            | Deadline { kernel, .. }
            | DeviceFault { kernel, .. }
            | LostBuffer { kernel, .. }
            | Held { kernel, .. }
            | Deferred { kernel, .. }
            | Undefinable { kernel, .. }
            | Undefined { kernel, .. }
            | AssertFailed { kernel, .. }
            | ConstantTooLarge { kernel, .. }
            | ConstantOffset { kernel, .. } => kernel,
            NoShapeFits { family, .. } => family,
        }
    }
}

/// Where in the source a run-time error happened: the launched kernel, the function the
/// offending statement is in (the kernel or a helper it called), its `line:col` in the
/// module's source, and the work-item that did it where the backend knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The launched kernel.
    pub kernel: String,
    /// The function holding the statement (the kernel or a helper).
    pub function: String,
    /// The statement's or expression's location (`0:0` unknown; a column of 0: only the line
    /// is known).
    pub span: crate::ir::Span,
    /// The work-item, where the backend knows it (the interpreter does).
    pub item: Option<crate::interp::WorkItem>,
}

impl LaunchError {
    /// Where the error happened in the kernel's source, for the run-time errors that know:
    /// undefined behaviour on the interpreter (with the work-item), an out-of-bounds access or
    /// a broken `align` caught by the CPU backend (the line only).
    pub fn site(&self) -> Option<Site> {
        match self {
            LaunchError::Undefined { site, .. } => Some((**site).clone()),
            LaunchError::OutOfBounds { kernel, line, .. }
            | LaunchError::BrokenAlign { kernel, line, .. }
                if *line != 0 =>
            {
                Some(Site {
                    kernel: kernel.clone(),
                    function: kernel.clone(),
                    span: crate::ir::Span::new(*line, 0),
                    item: None,
                })
            }
            _ => None,
        }
    }

    /// The kind of undefined behaviour, as an enum, for [`LaunchError::Undefined`] and for
    /// the CPU backend's checked refusals of the same (out of bounds, a broken `align`).
    pub fn ub_kind(&self) -> Option<crate::interp::UbKind> {
        match self {
            LaunchError::Undefined { ub, .. } => Some(*ub),
            LaunchError::OutOfBounds { .. } => Some(crate::interp::UbKind::OutOfBounds),
            LaunchError::BrokenAlign { .. } => Some(crate::interp::UbKind::Misaligned),
            _ => None,
        }
    }
}

/// `0.5 s (cancelled)`: a missed deadline as [`LaunchError::Deadline`] prints it.
fn deadline_text(deadline: &Duration, cancelled: &bool) -> String {
    let what = if *cancelled {
        "the launch was cancelled"
    } else {
        "the kernel cannot be cancelled here and is left to finish"
    };
    format!("{} s; {what}", crate::deadline::format_seconds(*deadline))
}

/// An element type as the text format writes it (`f32`, `vec4<f32>`).
pub fn elem_name(elem: ElemType) -> String {
    if elem.lanes == 1 {
        elem.scalar.name().to_string()
    } else {
        format!("vec{}<{}>", elem.lanes, elem.scalar.name())
    }
}

/// A parameter type as the text format writes it.
pub fn type_name(ty: Type) -> String {
    match ty {
        Type::Scalar(s) => s.name().to_string(),
        Type::Vector(s, n) => elem_name(ElemType::vector(s, n)),
        Type::Buffer { elem, access } => access.buffer_name(&elem_name(elem)),
        Type::Array { elem, .. } => format!("[{}; _]", elem_name(elem)),
        Type::Matrix {
            role,
            scalar,
            rows,
            cols,
        } => format!("matrix<{}, {}, {rows}, {cols}>", role.name(), scalar.name()),
        Type::Tag(_) => "tag".to_string(),
        Type::Shared { elem, .. } => format!("shared [{}]", elem_name(elem)),
    }
}

/// The refusals every backend shares, in a fixed order: arguments (count, then each type),
/// geometry (zero dimensions, then the device's and the kernel's limits), the pinned block,
/// shared memory, the declared wave, and buffer base alignment. `kernel` is the verified,
/// instantiated kernel named `name`, `info` what its verification found; `manifest` its
/// manifest on this backend.
pub fn check(
    name: &str,
    kernel: &Function,
    info: &FunctionInfo,
    manifest: &KernelManifest,
    facts: &DeviceFacts,
    launch: &Launch,
    args: &[ArgValue<'_>],
) -> Result<(), LaunchError> {
    let kernel_name = || name.to_string();
    check_args(name, kernel, args)?;

    for (what, dims) in [("grid", launch.grid), ("block", launch.block)] {
        if dims.contains(&0) {
            return Err(LaunchError::EmptyGeometry {
                kernel: kernel_name(),
                what,
                dims,
            });
        }
    }
    let too_many = |what, dims, limit: String, by_device| LaunchError::TooManyThreads {
        kernel: kernel_name(),
        what,
        dims,
        limit,
        by_device,
    };
    // Coordinates are u32: every global id, and the launch's work-item count per dimension,
    // must be representable.
    for d in 0..3 {
        if launch.grid[d] as u64 * launch.block[d] as u64 > u32::MAX as u64 + 1 {
            return Err(too_many(
                "grid",
                launch.grid,
                format!(
                    "grid × block in dimension {} exceeds 2^32 work-items",
                    "xyz".as_bytes()[d] as char
                ),
                false,
            ));
        }
    }
    if let Some(max) = facts.max_grid_dims {
        for d in 0..3 {
            if launch.grid[d] > max[d] {
                return Err(too_many(
                    "grid",
                    launch.grid,
                    format!("the device allows {max:?} workgroups"),
                    true,
                ));
            }
        }
    }
    facts
        .block_fits(launch.block)
        .map_err(|limit| too_many("block", launch.block, limit, true))?;
    let threads = launch.threads_per_block();
    if let Some(max) = manifest.max_threads {
        if threads > max as u64 {
            return Err(too_many(
                "block",
                launch.block,
                format!("the kernel declares @occupancy(max_threads = {max})"),
                false,
            ));
        }
    }
    if let (Some(waves), Some(width)) = (
        manifest.max_waves,
        launch
            .wave
            .or(manifest.declared_wave)
            .or(manifest.built_wave.filter(|&w| w > 1))
            .or(facts.wave_width),
    ) {
        if threads > waves as u64 * width as u64 {
            return Err(too_many(
                "block",
                launch.block,
                format!(
                    "the kernel declares @occupancy(max_waves = {waves}) at wave width {width}"
                ),
                false,
            ));
        }
    }
    if let Some(pinned) = manifest.pinned_block {
        if pinned != launch.block {
            return Err(LaunchError::PinnedBlock {
                kernel: kernel_name(),
                pinned,
                got: launch.block,
            });
        }
    }
    // Distributed software matrix tiles exchange shares among every lane of a wave.
    if let Some(wave) = manifest.built_wave.filter(|&w| w > 1) {
        let distributed = manifest
            .native_ops
            .iter()
            .any(|o| o.tier == crate::hal::manifest::TIER_DISTRIBUTED);
        if distributed && threads % wave as u64 != 0 {
            return Err(LaunchError::PartialWave {
                kernel: kernel_name(),
                block: launch.block,
                threads,
                wave,
            });
        }
    }

    if let Some(need) = manifest.shared_bytes_with(launch.shared_bytes as u64) {
        let (limit, which) = if launch.shared_opt_in {
            (
                facts
                    .shared_bytes_per_block_optin
                    .or(facts.shared_bytes_per_block),
                "opt-in ",
            )
        } else {
            (facts.shared_bytes_per_block, "")
        };
        if let Some(limit) = limit {
            if need > limit {
                return Err(LaunchError::SharedMemory {
                    kernel: kernel_name(),
                    need,
                    limit: format!("the device allows {limit} bytes per block ({which}limit)"),
                });
            }
        }
    }

    if let Some(declared) = manifest.declared_wave {
        if let Some(supported) = &facts.supported_wave_widths {
            if !supported.contains(&declared) {
                return Err(LaunchError::WaveWidth {
                    kernel: kernel_name(),
                    declared,
                    reason: format!("the device supports {supported:?}"),
                });
            }
        }
        if let Some(wave) = launch.wave {
            if wave != declared {
                return Err(LaunchError::WaveWidth {
                    kernel: kernel_name(),
                    declared,
                    reason: format!("the launch assumes wave {wave}"),
                });
            }
        }
    }
    // A kernel built at 1 lane without a declared wave has no wave verb (§3.7: the CPU
    // records 1 for it): nothing in it depends on the width the launch assumes.
    let wave_free = manifest.built_wave == Some(1) && manifest.declared_wave.is_none();
    if let (Some(wave), Some(built)) = (launch.wave, manifest.built_wave) {
        if wave != built && !wave_free {
            return Err(LaunchError::WaveWidth {
                kernel: kernel_name(),
                declared: wave,
                reason: format!("the launch assumes it but the kernel was built at wave {built}"),
            });
        }
    }

    check_constants(name, kernel, facts, args)?;
    for (i, arg) in args.iter().enumerate() {
        if let ArgValue::Buffer(b) = arg {
            let align = info.base_align.get(i).copied().unwrap_or(1);
            let offset = b.raw.offset_bytes() as u64;
            if offset % align != 0 {
                return Err(LaunchError::MisalignedBase {
                    kernel: kernel_name(),
                    param: kernel.params[i].name.clone(),
                    offset,
                    align,
                });
            }
        }
    }
    Ok(())
}

/// The constant buffers (`buf<_, const>`) of a launch against the device's constant limits
/// (contract §2.2 `Constant`): a view larger than [`DeviceFacts::constant_bytes`] is
/// `XPU-L040`, one at an offset that is not a multiple of
/// [`DeviceFacts::constant_offset_alignment`] `XPU-L041`. A limit the device does not report
/// checks nothing.
pub fn check_constants(
    name: &str,
    kernel: &Function,
    facts: &DeviceFacts,
    args: &[ArgValue<'_>],
) -> Result<(), LaunchError> {
    for (param, arg) in kernel.params.iter().zip(args) {
        let (
            Type::Buffer {
                access: Access::Constant,
                ..
            },
            ArgValue::Buffer(b),
        ) = (param.ty, arg)
        else {
            continue;
        };
        let bytes = b.raw.byte_len() as u64;
        if let Some(limit) = facts.constant_bytes {
            if bytes > limit {
                return Err(LaunchError::ConstantTooLarge {
                    kernel: name.to_string(),
                    param: param.name.clone(),
                    bytes,
                    limit,
                });
            }
        }
        if let Some(align) = facts.constant_offset_alignment.filter(|&a| a > 1) {
            let offset = b.raw.offset_bytes() as u64;
            if offset % align != 0 {
                return Err(LaunchError::ConstantOffset {
                    kernel: name.to_string(),
                    param: param.name.clone(),
                    offset,
                    align,
                });
            }
        }
    }
    Ok(())
}

/// The argument list against the signature: count, then each argument's type, naming the
/// first parameter that does not match.
pub fn check_args(name: &str, kernel: &Function, args: &[ArgValue<'_>]) -> Result<(), LaunchError> {
    if args.len() != kernel.params.len() {
        return Err(LaunchError::ArgCount {
            kernel: name.to_string(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    for (index, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let ok = match (param.ty, arg) {
            (Type::Buffer { elem, access }, ArgValue::Buffer(b)) => {
                b.elem == elem
                    && (access.read_only() || b.writable)
                    && (b.raw.byte_len() as u64 / elem.size().max(1) as u64) <= u32::MAX as u64
                    && b.raw.byte_len() % elem.size().max(1) as usize == 0
            }
            (Type::Scalar(_) | Type::Vector(..), ArgValue::Value(v)) => {
                param.ty.as_elem() == Some(v.ty())
            }
            (Type::Tag(_), ArgValue::Tag(_)) => true,
            _ => false,
        };
        if !ok {
            let mut got = arg.type_name();
            if let (Type::Buffer { elem, access }, ArgValue::Buffer(b)) = (param.ty, arg) {
                if b.elem == elem && access == Access::ReadWrite && !b.writable {
                    got.push_str(" lent read-only (pass it as `&mut`)");
                } else if b.elem == elem {
                    got = format!(
                        "{got} of {} bytes (not a whole number of elements within u32 range)",
                        b.raw.byte_len()
                    );
                }
            }
            return Err(LaunchError::ArgType {
                kernel: name.to_string(),
                index,
                param: param.name.clone(),
                expected: type_name(param.ty),
                got,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_fill_missing_with_one() {
        let l = Launch::grid([4]).block([16, 2]).shared_bytes(64);
        assert_eq!(l.grid, [4, 1, 1]);
        assert_eq!(l.block, [16, 2, 1]);
        assert_eq!(l.threads_per_block(), 32);
        assert_eq!(l.blocks(), 4);
        assert_eq!(Launch::grid(7).grid, [7, 1, 1]);
    }

    #[test]
    fn host_values_round_trip() {
        let v = HostValue::from(-2i16);
        assert_eq!(v.ty(), ElemType::scalar(Scalar::I16));
        assert_eq!(v.to_le_bytes(), vec![0xfe, 0xff]);
        assert_eq!(HostValue::from_le_bytes(v.ty(), &v.to_le_bytes()), Some(v));
        let w = HostValue::from([1.0f32, 2.0, 3.0, 4.0]);
        assert_eq!(w.ty(), ElemType::vector(Scalar::F32, 4));
        assert_eq!(w.to_le_bytes().len(), 16);
        assert_eq!(format!("{w:?}"), "vec4<f32>(1.0, 2.0, 3.0, 4.0)");
        assert_eq!(HostValue::scalar(Scalar::U8, 0x1ff).lane_bits(0), 0xff);
        assert!(HostValue::vector(Scalar::F32, &[0; 5]).is_none());
    }

    #[test]
    fn halves_are_values() {
        let h = HostValue::from(half::f16::from_f32(1.5));
        assert_eq!(h.ty(), ElemType::scalar(Scalar::F16));
        assert_eq!(h.lane_bits(0), 0x3e00);
        assert_eq!(format!("{h:?}"), "f16(1.5)");
    }

    #[test]
    fn errors_carry_codes_and_kernel() {
        let e = LaunchError::ArgType {
            kernel: "saxpy".into(),
            index: 1,
            param: "x".into(),
            expected: "buf<f32>".into(),
            got: "buf<u32>".into(),
        };
        assert_eq!(e.code(), "XPU-L003");
        assert_eq!(e.kernel(), "saxpy");
        assert_eq!(
            e.to_string(),
            "error[XPU-L003]: kernel saxpy: argument 1 (x) is buf<f32>, got buf<u32>"
        );
    }
}
