//! The device seam (contract §2.2, §2.4; DESIGN.md, Decisions 5–8): the small object-safe traits
//! each backend implements, and the errors of device operations.
//!
//! A backend implements only:
//!
//! - [`DeviceImpl`]: facts, allocation (freed when the last [`DeviceMemory`] handle drops),
//!   copies host↔device and device↔device ordered on a stream (the asynchronous form of every
//!   copy; the synchronous forms are "enqueue, then sync"), streams, and loading a program;
//! - [`StreamImpl`] / [`EventImpl`]: ordering and completion;
//! - [`ProgramImpl`] / [`KernelImpl`]: device code per kernel (produced lazily, cached), its
//!   manifest, and the launch itself, which receives arguments already checked against the
//!   kernel's signature, the geometry and the device's limits.
//!
//! Device memory is opaque here: a backend downcasts its own [`DeviceMemory`] (host bytes, a
//! `CUdeviceptr`, a `VkBuffer`) and refuses another backend's.

use super::backend::Backend;
use super::facts::DeviceFacts;
use super::launch::{HostValue, Launch, LaunchError};
use super::manifest::KernelManifest;
use crate::ir::{ElemType, Function, VerifiedModule};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Codes of [`DeviceError`].
pub mod codes {
    /// The backend was left out of this build (its cargo feature is off).
    pub const NOT_COMPILED: &str = "XPU-D001";
    /// The backend is built but cannot run here (no driver, no device).
    pub const UNAVAILABLE: &str = "XPU-D002";
    /// A backend name that names none.
    pub const UNKNOWN_BACKEND: &str = "XPU-D003";
    /// `Device::force` after a device was already selected.
    pub const ALREADY_SELECTED: &str = "XPU-D004";
    /// A device allocation failed.
    pub const OUT_OF_MEMORY: &str = "XPU-D005";
    /// An offset or length past the end of a buffer.
    pub const OUT_OF_RANGE: &str = "XPU-D006";
    /// Host and device sizes disagree.
    pub const SIZE_MISMATCH: &str = "XPU-D007";
    /// A buffer, stream or event used with a device it does not belong to.
    pub const FOREIGN_OBJECT: &str = "XPU-D008";
    /// A program the backend could not load.
    pub const LOAD: &str = "XPU-D009";
    /// Any other failure the driver reported.
    pub const DRIVER: &str = "XPU-D010";
    /// A buffer lost with a device fault's context.
    pub const LOST: &str = "XPU-D014";
    /// The device faulted running a kernel.
    pub const DEVICE_FAULT: &str = "XPU-D015";
    /// The device could not be recovered after a fault: the process cannot use it again.
    pub const UNRECOVERED: &str = "XPU-D016";
    /// A deferred stream's flush stopped at a refused launch.
    pub const FLUSH_FAILED: &str = "XPU-D020";
    /// An operation on a stream after its failed flush.
    pub const AFTER_FAILED_FLUSH: &str = "XPU-D021";
}

/// A device operation that failed: opening, allocating, copying, viewing, streams, loading.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "error[{}]: the {backend} backend is not compiled into this build",
        codes::NOT_COMPILED
    )]
    /// The backend was left out of this build.
    NotCompiled {
        /// The backend asked for.
        backend: Backend,
    },
    #[error(
        "error[{}]: the {backend} backend is not available here: {reason}",
        codes::UNAVAILABLE
    )]
    /// The backend cannot run here.
    Unavailable {
        /// The backend asked for.
        backend: Backend,
        /// Why (the driver's or loader's message).
        reason: String,
    },
    #[error(
        "error[{}]: no backend is named `{name}` (expected interp, cpu, cuda, hip or vulkan)",
        codes::UNKNOWN_BACKEND
    )]
    /// No backend has this name.
    UnknownBackend {
        /// The name given.
        name: String,
    },
    #[error("error[{}]: the {selected} backend was already selected; Device::force({requested:?}) must come before the first device touch", codes::ALREADY_SELECTED)]
    /// `Device::force` came after a device was already selected.
    AlreadySelected {
        /// The backend already in use.
        selected: Backend,
        /// The backend `force` asked for, as written.
        requested: String,
    },
    #[error(
        "error[{}]: cannot allocate {bytes} bytes: {reason}",
        codes::OUT_OF_MEMORY
    )]
    /// An allocation failed.
    OutOfMemory {
        /// The size asked for, in bytes.
        bytes: u64,
        /// The driver's message.
        reason: String,
    },
    #[error("error[{}]: out of range: {what}", codes::OUT_OF_RANGE)]
    /// An offset or length past the end.
    OutOfRange {
        /// What was out of range, with the numbers.
        what: String,
    },
    #[error("error[{}]: size mismatch: {what}", codes::SIZE_MISMATCH)]
    /// Sizes disagree.
    SizeMismatch {
        /// What disagreed, with both sizes.
        what: String,
    },
    #[error("error[{}]: {what} belongs to another device", codes::FOREIGN_OBJECT)]
    /// An object from another device.
    ForeignObject {
        /// Which object.
        what: String,
    },
    #[error("error[{}]: cannot load the program: {message}", codes::LOAD)]
    /// The program could not be loaded.
    Load {
        /// The backend's message.
        message: String,
    },
    #[error("error[{}]: device failure: {message}", codes::DRIVER)]
    /// Another driver failure.
    Driver {
        /// The driver's message.
        message: String,
    },
    /// The object belonged to a device context lost with the fault of `kernel` (the backend
    /// recreated the context; see [`DeviceError::DeviceFault`]).
    #[error(
        "error[{}]: lost with the device fault of kernel {kernel}: the device's context was \
         recreated; allocate and upload the buffer again",
        codes::LOST
    )]
    Lost {
        /// The kernel whose fault lost the context.
        kernel: String,
    },
    /// The device faulted (a sticky CUDA/HIP error) running `kernel`, the kernel launched
    /// last, and this operation saw it; the backend recreated the context where the driver
    /// lets it (the message says; else later calls give [`DeviceError::Unrecovered`]), and
    /// every buffer of the lost one reports [`DeviceError::Lost`] on use.
    #[error(
        "error[{}]: the device faulted running kernel {kernel}: {message} (the \
         message says whether the context was recreated); every buffer allocated before the \
         fault is lost",
        codes::DEVICE_FAULT
    )]
    DeviceFault {
        /// The kernel launched last.
        kernel: String,
        /// The driver's message.
        message: String,
    },
    /// After the device fault of `kernel`, no working context could be made again (neither
    /// the reset primary context nor a new one): every later operation on the device fails so.
    #[error(
        "error[{}]: the device could not be recovered after the device fault of kernel \
         {kernel}: {message}; open the device again in a new process",
        codes::UNRECOVERED
    )]
    Unrecovered {
        /// The kernel whose fault the device did not recover from.
        kernel: String,
        /// Why: what the recovery tried and how each attempt failed.
        message: String,
    },
    /// A deferred stream's flush (at this operation) stopped at a launch the driver
    /// refused: `kernel`'s, with the launch error; the `not_run` launches queued after it did
    /// not run (contract §2.4, deferred streams).
    #[error(
        "error[{}]: the deferred launch of kernel {kernel} failed at the flush: {error}; the \
         {not_run} launches queued after it did not run",
        codes::FLUSH_FAILED
    )]
    FlushFailed {
        /// The kernel whose launch was refused.
        kernel: String,
        /// The launch error, as text.
        error: String,
        /// Launches queued after it that did not run.
        not_run: usize,
    },
    /// An operation on a deferred stream whose earlier flush failed at `kernel`: what the
    /// stream computes after that point is stale, so reads, copies and syncs refuse until
    /// `KernelStream::clear_failure`.
    #[error(
        "error[{}]: the stream's deferred launches stopped at kernel {kernel} ({error}); its \
         results from there on were not computed (KernelStream::clear_failure acknowledges it)",
        codes::AFTER_FAILED_FLUSH
    )]
    AfterFailedFlush {
        /// The kernel whose launch was refused.
        kernel: String,
        /// The launch error, as text.
        error: String,
    },
    /// A launch on this stream missed its deadline (refusal 6, contract §2.4), seen at this
    /// observable point (a sync, a host read, an event record or wait) on a GPU, whose
    /// kernels cannot be cancelled: the kernel was left to finish, and the device and the
    /// stream go on (the operation itself completed).
    #[error(
        "error[{}]: kernel {kernel}: missed its deadline of {} s: {what}; a GPU kernel cannot \
         be cancelled, so it was left to finish, and the device goes on",
        super::launch::codes::DEADLINE,
        crate::deadline::format_seconds(*.deadline)
    )]
    Deadline {
        /// The kernel of the launch that missed it.
        kernel: String,
        /// Its deadline window.
        deadline: Duration,
        /// When its work finished, or that it had not ([`crate::backend::deadlines::Missed::describe`]).
        what: String,
    },
    /// A malformed environment value the operation needed.
    #[error("{0}")]
    Config(#[from] crate::config::BadValue),
}

impl DeviceError {
    /// The error's stable code (`XPU-Dnnn`, or `XPU-C001` for a bad environment value).
    pub fn code(&self) -> &'static str {
        match self {
            DeviceError::NotCompiled { .. } => codes::NOT_COMPILED,
            DeviceError::Unavailable { .. } => codes::UNAVAILABLE,
            DeviceError::UnknownBackend { .. } => codes::UNKNOWN_BACKEND,
            DeviceError::AlreadySelected { .. } => codes::ALREADY_SELECTED,
            DeviceError::OutOfMemory { .. } => codes::OUT_OF_MEMORY,
            DeviceError::OutOfRange { .. } => codes::OUT_OF_RANGE,
            DeviceError::SizeMismatch { .. } => codes::SIZE_MISMATCH,
            DeviceError::ForeignObject { .. } => codes::FOREIGN_OBJECT,
            DeviceError::Load { .. } => codes::LOAD,
            DeviceError::Driver { .. } => codes::DRIVER,
            DeviceError::Lost { .. } => codes::LOST,
            DeviceError::DeviceFault { .. } => codes::DEVICE_FAULT,
            DeviceError::Unrecovered { .. } => codes::UNRECOVERED,
            DeviceError::FlushFailed { .. } => codes::FLUSH_FAILED,
            DeviceError::AfterFailedFlush { .. } => codes::AFTER_FAILED_FLUSH,
            DeviceError::Deadline { .. } => super::launch::codes::DEADLINE,
            DeviceError::Config(_) => crate::config::BAD_VALUE,
        }
    }
}

pub use crate::config::Mode;

/// How fresh device memory is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// Every byte 0xFF (`CAJETA_XPU_POISON=1`, contract §7): a kernel reading what nothing
    /// wrote gets NaN or all-ones deterministically.
    Poison,
    /// Whatever is cheapest for the backend.
    Any,
}

/// Whether `CAJETA_XPU_POISON=1` asks for poisoned fresh memory.
pub fn poison_requested() -> Result<bool, crate::config::BadValue> {
    crate::config::get().poison.clone()
}

/// A backend's allocation. Freed when the last handle drops (views share it).
pub trait DeviceMemory: Send + Sync + Any {
    /// The allocation's size in bytes.
    fn size(&self) -> usize;
    /// The backend's own type, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// A device→host copy in flight; `wait` blocks until the bytes are on the host.
pub trait ReadTicket: Send {
    /// Blocks until the copy is done and returns the bytes.
    fn wait(self: Box<Self>) -> Result<Vec<u8>, DeviceError>;
}

/// A backend's stream: operations enqueued on it run in order. Destroyed on drop (after its
/// work completes, where the backend needs that).
pub trait StreamImpl: Send + Sync + Any {
    /// Blocks until everything enqueued so far has completed.
    fn sync(&self) -> Result<(), DeviceError>;
    /// An event that completes when everything enqueued so far has.
    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError>;
    /// Makes later work on this stream wait for `event`.
    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError>;
    /// The backend's own type, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Asks the stream to defer its launches (contract §2.4); `Ok(true)` where it now does.
    /// Turning deferral off flushes the queue first. The default, for backends that do not
    /// defer, ignores the request.
    fn set_deferred(&self, on: bool) -> Result<bool, DeviceError> {
        let _ = on;
        Ok(false)
    }
    /// The deferral counters (all zero on a stream that never deferred).
    fn defer_stat(&self) -> super::defer::DeferStat {
        super::defer::DeferStat::default()
    }
    /// Acknowledges a failed flush of a deferred stream (`XPU-D020`): the stream takes
    /// launches and reads again. Nothing to do on a stream that does not defer.
    fn clear_failure(&self) {}
}

/// A backend's event.
pub trait EventImpl: Send + Sync + Any {
    /// Whether the event has completed (does not block).
    fn is_complete(&self) -> bool;
    /// Blocks until the event has completed.
    fn sync(&self) -> Result<(), DeviceError>;
    /// The device-clock time from `earlier` to this event, where the backend timestamps events
    /// (the Event tier of `KernelTimer`); `None` otherwise.
    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration>;
    /// The backend's own type, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// How a backend's timer brackets a stream (contract §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerTier {
    /// The vendor's dispatch records.
    Device,
    /// Device events around the work (CUDA, HIP).
    Event,
    /// The host clock around a synchronised stream (the host backends).
    Host,
    /// No timing (Vulkan outside the profiler): the caller times on the host.
    Unavailable,
}

/// What one backend implements. Object safe; every method may fail with a [`DeviceError`]
/// and none may panic on a missing driver.
pub trait DeviceImpl: Send + Sync + Any {
    /// Which backend this is.
    fn backend(&self) -> Backend;
    /// What the device is and can do.
    fn facts(&self) -> &DeviceFacts;
    /// `bytes` of device memory (zero is allowed), filled per `init`.
    fn alloc(&self, bytes: usize, init: Init) -> Result<Arc<dyn DeviceMemory>, DeviceError>;
    /// Enqueues on `stream` a copy of `src` into `mem` at `offset`. `src` may be reused as
    /// soon as this returns (a backend stages it if the copy is still in flight).
    fn write(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        src: &[u8],
    ) -> Result<(), DeviceError>;
    /// Enqueues on `stream` a copy of `len` bytes of `mem` at `offset` to the host.
    fn read(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        len: usize,
    ) -> Result<Box<dyn ReadTicket>, DeviceError>;
    /// Enqueues on `stream` a device-side copy of `len` bytes.
    fn copy(
        &self,
        stream: &dyn StreamImpl,
        src: &Arc<dyn DeviceMemory>,
        src_offset: usize,
        dst: &Arc<dyn DeviceMemory>,
        dst_offset: usize,
        len: usize,
    ) -> Result<(), DeviceError>;
    /// A new stream on this device.
    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError>;
    /// Prepares `module` for this device. Device code may be produced lazily, per kernel.
    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError>;
    /// [`DeviceImpl::load`] under `options` (checked mode, ub-traps). A backend that builds
    /// no checks (the interpreter, which checks everything always) keeps this default.
    fn load_with(
        &self,
        module: &Arc<VerifiedModule>,
        options: &super::checked::ProgramOptions,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let _ = options;
        self.load(module)
    }
    /// How this backend's [`KernelTimer`](crate::KernelTimer) brackets work; the host clock by default.
    fn timer_tier(&self) -> TimerTier {
        TimerTier::Host
    }
    /// With the profiler armed, just before a launch: the id under which the vendor's tracer
    /// (CUPTI on CUDA) will report the launch's dispatch record to
    /// `profile::device_record`, or `None` where no tracer is active (then events time it).
    fn profile_begin(&self) -> Option<u64> {
        None
    }
    /// The launch that [`DeviceImpl::profile_begin`] answered `id` for has been handed over.
    fn profile_end(&self, id: u64) {
        let _ = id;
    }
    /// Whether this is a GPU API implemented in software on the host CPU (a Vulkan
    /// `PhysicalDeviceType::CPU` device such as lavapipe). Selection prefers the CPU backend
    /// to such a device; naming it explicitly still gets it.
    fn emulated_on_host(&self) -> bool {
        false
    }
    /// Whether large launches of eligible kernels should run coarsened ([`coarse`](crate::runtime::coarse)): GPUs,
    /// whose one-element-per-work-item kernels leave memory bandwidth unused.
    fn coarsens(&self) -> bool {
        false
    }
    /// The target that device code made elsewhere (a bundle, [`crate::bundle`]) must name to
    /// be used on this device without lowering again (`sm_90`, `gfx90a`, a Vulkan capability
    /// key); `None` where the backend takes no such code (its code is made where it runs).
    fn code_target(&self) -> Option<String> {
        None
    }
    /// [`DeviceImpl::load`], with device code made elsewhere for some kernels of `module`
    /// (made for [`DeviceImpl::code_target`]): those kernels take it at their first use instead
    /// of being lowered; the others are lowered as after `load`. Code the backend cannot use
    /// is an error here ([`DeviceError::Load`]). The default, for backends without a code
    /// target, is `load`.
    fn load_prebuilt(
        &self,
        module: &Arc<VerifiedModule>,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let _ = prebuilt;
        self.load(module)
    }
    /// Bytes of device code the device holds now for live programs (`None`: not counted by
    /// this backend).
    fn code_memory(&self) -> Option<u64> {
        None
    }
}

/// One kernel's device code made elsewhere (a bundle entry) for [`DeviceImpl::load_prebuilt`].
#[derive(Clone, Debug)]
pub struct Prebuilt {
    /// The kernel's name (instances by their instance name).
    pub kernel: String,
    /// The device code, in the backend's format (PTX, code object, SPIR-V).
    pub code: Vec<u8>,
    /// The backend's launch metadata stored beside the code.
    pub meta: Option<String>,
    /// The manifest the code was built with.
    pub manifest: KernelManifest,
}

/// A module on one device.
pub trait ProgramImpl: Send + Sync {
    /// The device code of the kernel `name`, produced on first request and cached. `kernel`
    /// is its verified IR.
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError>;
    /// The manifest of `name`, or `None` where this backend has no device code for it.
    fn manifest(&self, name: &str) -> Option<KernelManifest>;
    /// How many times this program lowered a kernel's IR to device code (code taken from a
    /// bundle or a cache does not count); `None` where the backend does not count.
    fn lowerings(&self) -> Option<u64> {
        None
    }
}

/// One kernel's device code.
pub trait KernelImpl: Send + Sync {
    /// What the device code of the kernel is and needs.
    fn manifest(&self) -> &KernelManifest;
    /// How many compiled specialisations (per block, wave, ...) the kernel holds now; `None`
    /// where the backend does not count them.
    fn specialisations(&self) -> Option<usize> {
        None
    }
    /// Runs (or enqueues) the launch on `stream`. The arguments have passed
    /// [`crate::hal::launch::check`]; buffer bindings keep their memory alive for as long as the
    /// backend holds them.
    fn launch(
        &self,
        stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError>;
}

/// A buffer argument as a backend receives it: a byte range of one allocation, passed as
/// elements of `elem`.
#[derive(Clone)]
pub struct BufferBinding {
    /// The allocation.
    pub memory: Arc<dyn DeviceMemory>,
    /// Where the range starts, in bytes.
    pub offset: usize,
    /// The range's length, in bytes.
    pub len: usize,
    /// The element type the kernel sees.
    pub elem: ElemType,
    /// Whether the kernel may write it.
    pub writable: bool,
}

impl fmt::Debug for BufferBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferBinding")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("elem", &self.elem)
            .field("writable", &self.writable)
            .finish()
    }
}

/// A checked launch argument. A function tag arrives as a `u32` value (its member index).
#[derive(Clone, Debug)]
pub enum DeviceArg {
    /// A buffer parameter's range.
    Buffer(BufferBinding),
    /// A scalar parameter's value (a tag as its `u32` index).
    Value(HostValue),
}

/// The verified kernel named `name` (template instances by their instance name).
pub fn kernel_function<'m>(module: &'m VerifiedModule, name: &str) -> Option<&'m Function> {
    module.kernel(name).map(|h| module.function(h))
}
