//! The device seam (contract §2.2, §2.4, §5.1; DESIGN.md, Decisions 5–8): which backends
//! exist, how one is selected, and the small object-safe traits each backend implements.
//!
//! A [`Device`] is a cheap, `Send + Sync` handle to one backend's device. Everything above the
//! seam ([`KernelBuffer`](crate::KernelBuffer), [`KernelStream`](crate::KernelStream),
//! [`Program`], [`Kernel`], the launch checks) is shared; a backend implements only:
//!
//! - [`DeviceImpl`]: facts, allocation (freed when the last [`DeviceMemory`] handle drops),
//!   copies host↔device and device↔device ordered on a stream (the asynchronous form of every
//!   copy; the synchronous forms are "enqueue, then sync"), streams, and loading a program;
//! - [`StreamImpl`] / [`EventImpl`]: ordering and completion;
//! - [`ProgramImpl`] / [`KernelImpl`]: device code per kernel (produced lazily, cached), its
//!   manifest, and the launch itself, which receives arguments already checked against the
//!   kernel's signature, the geometry and the device's limits ([`crate::launch::check`]).
//!
//! Device memory is opaque here: a backend downcasts its own [`DeviceMemory`] (host bytes, a
//! `CUdeviceptr`, a `VkBuffer`) and refuses another backend's.
//!
//! Adding a backend: a module here implementing the traits, a `pub mod` line, and an arm in
//! [`open_backend`].

pub mod bench_data;
pub mod coarse;
pub mod cpu;
pub(crate) mod f64math;
pub mod host;
pub mod interp;
pub(crate) mod mathconst;
// The NVIDIA backend and the LLVM lowering it shares with AMDGPU (engineer F).
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod cache;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod llvm;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod ptxas;
// The AMD backend (engineer H): AMDGPU code objects linked with ld.lld, run through HIP.
#[cfg(feature = "hip")]
pub mod codeobj;
#[cfg(feature = "hip")]
pub mod hip;
// The Vulkan backend (engineer G): SPIR-V from the IR, run through ash.
pub mod vulkan;

use crate::facts::DeviceFacts;
use crate::ir::{ElemType, Function, VerifiedModule};
use crate::launch::{self, ArgValue, HostValue, Launch, LaunchError};
use crate::manifest::KernelManifest;
use crate::stream::KernelStream;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The backends, by the names the CLI and `CAJETA_XPU_BACKEND` use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The reference interpreter (the oracle; always present).
    Interp,
    /// The host CPU through the Cranelift JIT.
    Cpu,
    /// NVIDIA GPUs through the CUDA driver.
    Cuda,
    /// AMD GPUs through HIP.
    Hip,
    /// Any Vulkan 1.1+ device.
    Vulkan,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Interp,
        Backend::Cpu,
        Backend::Cuda,
        Backend::Hip,
        Backend::Vulkan,
    ];

    /// The order of selection at the first device touch (contract §5.1). The interpreter is
    /// not a device a program lands on by default; it is chosen only when named, or when no
    /// other backend is present.
    pub const SELECTION_ORDER: [Backend; 4] =
        [Backend::Cuda, Backend::Hip, Backend::Vulkan, Backend::Cpu];

    pub const fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
            Backend::Vulkan => "vulkan",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Codes of [`DeviceError`].
pub mod codes {
    pub const NOT_COMPILED: &str = "XPU-D001";
    pub const UNAVAILABLE: &str = "XPU-D002";
    pub const UNKNOWN_BACKEND: &str = "XPU-D003";
    pub const ALREADY_SELECTED: &str = "XPU-D004";
    pub const OUT_OF_MEMORY: &str = "XPU-D005";
    pub const OUT_OF_RANGE: &str = "XPU-D006";
    pub const SIZE_MISMATCH: &str = "XPU-D007";
    pub const FOREIGN_OBJECT: &str = "XPU-D008";
    pub const LOAD: &str = "XPU-D009";
    pub const DRIVER: &str = "XPU-D010";
}

/// A device operation that failed: opening, allocating, copying, viewing, streams, loading.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "error[{}]: the {backend} backend is not compiled into this build",
        codes::NOT_COMPILED
    )]
    NotCompiled { backend: Backend },
    #[error(
        "error[{}]: the {backend} backend is not available here: {reason}",
        codes::UNAVAILABLE
    )]
    Unavailable { backend: Backend, reason: String },
    #[error(
        "error[{}]: no backend is named `{name}` (expected interp, cpu, cuda, hip or vulkan)",
        codes::UNKNOWN_BACKEND
    )]
    UnknownBackend { name: String },
    #[error("error[{}]: the {selected} backend was already selected; Device::force({requested:?}) must come before the first device touch", codes::ALREADY_SELECTED)]
    AlreadySelected {
        selected: Backend,
        requested: String,
    },
    #[error(
        "error[{}]: cannot allocate {bytes} bytes: {reason}",
        codes::OUT_OF_MEMORY
    )]
    OutOfMemory { bytes: u64, reason: String },
    #[error("error[{}]: out of range: {what}", codes::OUT_OF_RANGE)]
    OutOfRange { what: String },
    #[error("error[{}]: size mismatch: {what}", codes::SIZE_MISMATCH)]
    SizeMismatch { what: String },
    #[error("error[{}]: {what} belongs to another device", codes::FOREIGN_OBJECT)]
    ForeignObject { what: String },
    #[error("error[{}]: cannot load the program: {message}", codes::LOAD)]
    Load { message: String },
    #[error("error[{}]: device failure: {message}", codes::DRIVER)]
    Driver { message: String },
}

impl DeviceError {
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
        }
    }
}

/// A setting that a heuristic decides unless the user overrides it: never, as measured, or
/// always where it applies (`CAJETA_XPU_COARSEN`, `CAJETA_XPU_CPU_STREAMING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Auto,
    Force,
}

impl Mode {
    /// The setting in environment variable `var`: `off`, `auto` (or unset or empty),
    /// `force`; anything else is an error naming the variable.
    pub fn from_env(var: &str) -> Result<Mode, String> {
        Mode::parse(var, std::env::var(var).ok().as_deref())
    }

    fn parse(var: &str, value: Option<&str>) -> Result<Mode, String> {
        match value.map(str::trim) {
            None | Some("" | "auto") => Ok(Mode::Auto),
            Some("off" | "0") => Ok(Mode::Off),
            Some("force" | "1") => Ok(Mode::Force),
            Some(other) => Err(format!("{var}={other:?} is not one of off, auto, force")),
        }
    }
}

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
pub fn poison_requested() -> bool {
    std::env::var_os("CAJETA_XPU_POISON").is_some_and(|v| v == "1")
}

/// A backend's allocation. Freed when the last handle drops (views share it).
pub trait DeviceMemory: Send + Sync + Any {
    fn size(&self) -> usize;
    fn as_any(&self) -> &dyn Any;
}

/// A device→host copy in flight; `wait` blocks until the bytes are on the host.
pub trait ReadTicket: Send {
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
    fn as_any(&self) -> &dyn Any;
}

/// A backend's event.
pub trait EventImpl: Send + Sync + Any {
    fn is_complete(&self) -> bool;
    /// Blocks until the event has completed.
    fn sync(&self) -> Result<(), DeviceError>;
    /// The device-clock time from `earlier` to this event, where the backend timestamps events
    /// (the Event tier of `KernelTimer`); `None` otherwise.
    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration>;
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
    fn backend(&self) -> Backend;
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
    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError>;
    /// Prepares `module` for this device. Device code may be produced lazily, per kernel.
    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError>;
    fn timer_tier(&self) -> TimerTier {
        TimerTier::Host
    }
    /// Whether this is a GPU API implemented in software on the host CPU (a Vulkan
    /// `PhysicalDeviceType::CPU` device such as lavapipe). Selection prefers the CPU backend
    /// to such a device; naming it explicitly still gets it.
    fn emulated_on_host(&self) -> bool {
        false
    }
    /// Whether large launches of eligible kernels should run coarsened ([`coarse`]): GPUs,
    /// whose one-element-per-work-item kernels leave memory bandwidth unused.
    fn coarsens(&self) -> bool {
        false
    }
}

/// A module on one device.
pub trait ProgramImpl: Send + Sync {
    /// The device code of the kernel `name`, produced on first request and cached. `kernel`
    /// is its verified IR.
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError>;
    /// The manifest of `name`, or `None` where this backend has no device code for it.
    fn manifest(&self, name: &str) -> Option<KernelManifest>;
}

/// One kernel's device code.
pub trait KernelImpl: Send + Sync {
    fn manifest(&self) -> &KernelManifest;
    /// Runs (or enqueues) the launch on `stream`. The arguments have passed
    /// [`crate::launch::check`]; buffer bindings keep their memory alive for as long as the
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
    pub memory: Arc<dyn DeviceMemory>,
    pub offset: usize,
    pub len: usize,
    pub elem: ElemType,
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
    Buffer(BufferBinding),
    Value(HostValue),
}

struct DeviceInner {
    id: u64,
    imp: Arc<dyn DeviceImpl>,
}

/// A handle to one backend's device: `Send + Sync`, cheap to clone; clones are the same
/// device.
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({}#{})", self.backend(), self.inner.id)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}
impl Eq for Device {}

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);
static OPENED: OnceLock<Mutex<HashMap<Backend, Device>>> = OnceLock::new();
static FORCED: Mutex<Option<String>> = Mutex::new(None);
static CURRENT: OnceLock<Device> = OnceLock::new();

/// Opens a backend's device implementation. One arm per backend; those not compiled into this
/// build say so.
fn open_backend(backend: Backend) -> Result<Arc<dyn DeviceImpl>, DeviceError> {
    match backend {
        Backend::Interp => Ok(Arc::new(interp::InterpDevice::new())),
        Backend::Cpu => Ok(Arc::new(cpu::CpuDevice::new())),
        // (A guard, so that the catch-all arm below still names Cuda for builds without it.)
        #[cfg(feature = "cuda")]
        Backend::Cuda if cfg!(feature = "cuda") => Ok(Arc::new(cuda::CudaDevice::open(0)?)),
        Backend::Vulkan => Ok(Arc::new(vulkan::VulkanDevice::open()?)),
        #[cfg(feature = "hip")]
        Backend::Hip if cfg!(feature = "hip") => Ok(Arc::new(hip::HipDevice::open(0)?)),
        Backend::Cuda | Backend::Hip => Err(DeviceError::NotCompiled { backend }),
    }
}

impl Device {
    /// Wraps a backend implementation in a new device handle (tests and out-of-tree backends;
    /// [`Device::open`] is the usual way).
    pub fn from_impl(imp: Arc<dyn DeviceImpl>) -> Device {
        Device {
            inner: Arc::new(DeviceInner {
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                imp,
            }),
        }
    }

    /// The device of `backend`, opened once per process and shared after that (so that tests
    /// comparing several backends in one process reuse each one's caches).
    pub fn open(backend: Backend) -> Result<Device, DeviceError> {
        let opened = OPENED.get_or_init(|| Mutex::new(HashMap::new()));
        let mut opened = opened.lock();
        if let Some(device) = opened.get(&backend) {
            return Ok(device.clone());
        }
        let device = Device::from_impl(open_backend(backend)?);
        opened.insert(backend, device.clone());
        Ok(device)
    }

    /// Every backend compiled into this build and present on this machine, in selection order
    /// followed by the interpreter.
    pub fn available() -> Vec<Backend> {
        Backend::SELECTION_ORDER
            .into_iter()
            .chain([Backend::Interp])
            .filter(|&b| Device::open(b).is_ok())
            .collect()
    }

    /// Restricts the first device touch to the backend `name` (contract §5.1). Must come
    /// before that touch; a later call naming another backend is an error. A forced backend
    /// that turns out unavailable degrades at selection with one note on stderr.
    pub fn force(name: &str) -> Result<(), DeviceError> {
        let backend = Backend::from_name(name).ok_or_else(|| DeviceError::UnknownBackend {
            name: name.to_string(),
        })?;
        if let Some(current) = CURRENT.get() {
            if current.backend() == backend {
                return Ok(());
            }
            return Err(DeviceError::AlreadySelected {
                selected: current.backend(),
                requested: name.to_string(),
            });
        }
        *FORCED.lock() = Some(backend.name().to_string());
        Ok(())
    }

    /// The device selected for this process at its first touch, in the order CUDA, HIP,
    /// Vulkan, CPU among those compiled in and present (a software Vulkan such as lavapipe
    /// after the CPU: see [`DeviceImpl::emulated_on_host`]), restricted by [`Device::force`]
    /// or else `CAJETA_XPU_BACKEND` (a name or a comma-separated list); the interpreter when
    /// nothing else is present. Cached for the process.
    pub fn current() -> Result<Device, DeviceError> {
        Ok(CURRENT.get_or_init(select).clone())
    }

    /// The backend [`Device::current`] selected (itself a device touch).
    pub fn active_backend() -> Backend {
        CURRENT.get_or_init(select).backend()
    }

    pub fn backend(&self) -> Backend {
        self.inner.imp.backend()
    }

    pub fn facts(&self) -> &DeviceFacts {
        self.inner.imp.facts()
    }

    /// A number unique to this device within the process.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The backend implementation (for backends and tests that need its own API).
    pub fn implementation(&self) -> &Arc<dyn DeviceImpl> {
        &self.inner.imp
    }

    /// Prepares `module` for this device; kernels are compiled on first use.
    pub fn load(&self, module: impl IntoSharedModule) -> Result<Program, DeviceError> {
        let module = module.into_shared();
        let imp = self.inner.imp.load(&module)?;
        Ok(Program {
            device: self.clone(),
            module,
            imp,
            coarse: Arc::default(),
        })
    }

    /// A fresh buffer of `len` elements (poisoned under `CAJETA_XPU_POISON=1`).
    pub fn alloc<T: crate::buffer::Element>(
        &self,
        len: usize,
    ) -> Result<crate::KernelBuffer<T>, DeviceError> {
        crate::KernelBuffer::new(self, len)
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: crate::buffer::Element>(
        &self,
        data: &[T],
    ) -> Result<crate::KernelBuffer<T>, DeviceError> {
        crate::KernelBuffer::from_slice(self, data)
    }
}

fn select() -> Device {
    let forced = FORCED.lock().clone();
    let (route, request) = match forced {
        Some(name) => ("Device::force", Some(name)),
        None => (
            "CAJETA_XPU_BACKEND",
            match std::env::var("CAJETA_XPU_BACKEND") {
                Ok(v) => Some(v).filter(|v| !v.trim().is_empty()),
                Err(std::env::VarError::NotPresent) => None,
                Err(std::env::VarError::NotUnicode(raw)) => {
                    // Not a name of any backend: said, like any other request that cannot
                    // be met, rather than ignored.
                    let fallback = default_device();
                    eprintln!(
                        "note: CAJETA_XPU_BACKEND={} is not valid UTF-8, so names no backend; selected {} instead",
                        raw.to_string_lossy(),
                        fallback.backend()
                    );
                    return fallback;
                }
            },
        ),
    };
    if let Some(request) = request {
        let mut reasons = Vec::new();
        for name in request.split(',') {
            match Backend::from_name(name) {
                Some(backend) => match Device::open(backend) {
                    Ok(device) => return device,
                    Err(e) => reasons.push(e.to_string()),
                },
                None => reasons.push(
                    DeviceError::UnknownBackend {
                        name: name.trim().to_string(),
                    }
                    .to_string(),
                ),
            }
        }
        let fallback = default_device();
        eprintln!(
            "note: {route}={request} is not available ({}); selected {} instead",
            reasons.join("; "),
            fallback.backend()
        );
        return fallback;
    }
    default_device()
}

fn default_device() -> Device {
    // A software GPU (lavapipe) is no better a device than the host it runs on: it is kept
    // for when the CPU backend is absent.
    let mut emulated = None;
    for backend in Backend::SELECTION_ORDER {
        if let Ok(device) = Device::open(backend) {
            if device.implementation().emulated_on_host() {
                emulated.get_or_insert(device);
                continue;
            }
            return device;
        }
    }
    if let Some(device) = emulated {
        return device;
    }
    // The interpreter is always compiled in and needs no driver.
    Device::open(Backend::Interp)
        .unwrap_or_else(|_| Device::from_impl(Arc::new(interp::InterpDevice::new())))
}

/// What [`Device::load`] accepts: a verified module, owned or shared.
pub trait IntoSharedModule {
    fn into_shared(self) -> Arc<VerifiedModule>;
}
impl IntoSharedModule for Arc<VerifiedModule> {
    fn into_shared(self) -> Arc<VerifiedModule> {
        self
    }
}
impl IntoSharedModule for &Arc<VerifiedModule> {
    fn into_shared(self) -> Arc<VerifiedModule> {
        self.clone()
    }
}
impl IntoSharedModule for VerifiedModule {
    fn into_shared(self) -> Arc<VerifiedModule> {
        Arc::new(self)
    }
}
impl IntoSharedModule for &VerifiedModule {
    fn into_shared(self) -> Arc<VerifiedModule> {
        Arc::new(self.clone())
    }
}

/// Kernel name → its coarsened variant's device code (`None`: not eligible).
type CoarseVariants = HashMap<String, Option<Arc<dyn KernelImpl>>>;

/// A verified module loaded on a device.
#[derive(Clone)]
pub struct Program {
    device: Device,
    module: Arc<VerifiedModule>,
    imp: Arc<dyn ProgramImpl>,
    /// Each kernel's coarsened variant once built (`None`: not eligible).
    coarse: Arc<Mutex<CoarseVariants>>,
}

impl Program {
    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn module(&self) -> &Arc<VerifiedModule> {
        &self.module
    }

    /// The kernel `name` (a kernel or a template instance, `QkTile<64,64,32,32,128>`), with
    /// its device code produced now if it was not yet.
    pub fn kernel(&self, name: &str) -> Result<Kernel, LaunchError> {
        let no_code = |reason: &str| LaunchError::NoCode {
            kernel: name.to_string(),
            backend: self.device.backend(),
            reason: reason.to_string(),
        };
        let function = kernel_function(&self.module, name)
            .ok_or_else(|| no_code("the program has no kernel of that name"))?;
        // A declared wave the device cannot give is refused before any code is built for it
        // (contract §2.4, "an unsupported declared wave width").
        if let (Some((declared, _)), Some(supported)) = (
            function.attrs.wave,
            self.device.facts().supported_wave_widths.as_ref(),
        ) {
            if !supported.contains(&declared) {
                return Err(LaunchError::WaveWidth {
                    kernel: name.to_string(),
                    declared,
                    reason: format!("the device supports {supported:?}"),
                });
            }
        }
        let imp = self.imp.kernel(name, function)?;
        Ok(Kernel {
            name: name.to_string(),
            program: self.clone(),
            function: Arc::new(function.clone()),
            imp,
        })
    }

    /// The coarsened variant of kernel `name`, built on first request.
    fn coarse_variant(&self, name: &str) -> Result<Option<Arc<dyn KernelImpl>>, LaunchError> {
        if let Some(v) = self.coarse.lock().get(name) {
            return Ok(v.clone());
        }
        let v = coarse::variant(self.device.inner.imp.as_ref(), &self.module, name)?;
        self.coarse.lock().insert(name.to_string(), v.clone());
        Ok(v)
    }

    /// The kernel's manifest on this device's backend, or `None` where the backend has no
    /// device code for it.
    pub fn manifest(&self, name: &str) -> Option<KernelManifest> {
        kernel_function(&self.module, name)?;
        self.imp.manifest(name)
    }
}

/// The verified kernel named `name` (template instances by their instance name).
pub fn kernel_function<'m>(module: &'m VerifiedModule, name: &str) -> Option<&'m Function> {
    module.kernel(name).map(|h| module.function(h))
}

/// One kernel of a [`Program`], ready to launch.
#[derive(Clone)]
pub struct Kernel {
    name: String,
    program: Program,
    function: Arc<Function>,
    imp: Arc<dyn KernelImpl>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({} on {:?})", self.name, self.program.device)
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Program(on {:?})", self.device)
    }
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn manifest(&self) -> &KernelManifest {
        self.imp.manifest()
    }

    /// The kernel's verified IR.
    pub fn function(&self) -> &Function {
        &self.function
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Launches the kernel on `stream` (contract §2.4). The arguments are checked against the
    /// signature, the geometry against the kernel and the device, and each buffer against the
    /// device it belongs to, before the backend sees the launch; any refusal is a
    /// [`LaunchError`] naming the kernel. On asynchronous devices the launch is enqueued; the
    /// next synchronising call reports a device fault.
    pub fn launch<'a>(
        &self,
        stream: &KernelStream,
        launch: Launch,
        mut args: impl AsMut<[ArgValue<'a>]>,
    ) -> Result<(), LaunchError> {
        let args = args.as_mut();
        let device = &self.program.device;
        if stream.device() != device {
            return Err(LaunchError::ForeignObject {
                kernel: self.name.clone(),
                what: "the stream".into(),
            });
        }
        let function = self.function();
        launch::check(
            &self.name,
            function,
            self.imp.manifest(),
            device.facts(),
            &launch,
            args,
        )?;
        let mut bound = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            bound.push(match arg {
                ArgValue::Buffer(b) => {
                    if b.raw.device() != device {
                        return Err(LaunchError::ForeignObject {
                            kernel: self.name.clone(),
                            what: format!("buffer {}", function.params[i].name),
                        });
                    }
                    DeviceArg::Buffer(BufferBinding {
                        memory: b.raw.memory().clone(),
                        offset: b.raw.offset_bytes(),
                        len: b.raw.byte_len(),
                        elem: b.elem,
                        writable: b.writable,
                    })
                }
                ArgValue::Value(v) => DeviceArg::Value(*v),
                ArgValue::Tag(t) => DeviceArg::Value(HostValue::from(*t)),
            });
        }
        let mode = coarse::mode().map_err(|reason| LaunchError::NoCode {
            kernel: self.name.clone(),
            backend: device.backend(),
            reason,
        })?;
        if coarse::wanted(mode, device.inner.imp.as_ref(), function, &launch) {
            if let Some(variant) = self.program.coarse_variant(&self.name)? {
                // The logical grid's x extent is the variant's extra, last parameter.
                bound.push(DeviceArg::Value(HostValue::from(launch.grid[0])));
                return variant.launch(
                    stream.implementation().as_ref(),
                    &coarse::launch_of(&launch),
                    &bound,
                );
            }
        }
        self.imp
            .launch(stream.implementation().as_ref(), &launch, &bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names() {
        let m = |v: Option<&str>| Mode::parse("CAJETA_XPU_COARSEN", v);
        assert_eq!(m(None), Ok(Mode::Auto));
        assert_eq!(m(Some("auto")), Ok(Mode::Auto));
        assert_eq!(m(Some(" force ")), Ok(Mode::Force));
        assert_eq!(m(Some("off")), Ok(Mode::Off));
        let e = m(Some("sometimes")).unwrap_err();
        assert!(
            e.contains("off, auto, force") && e.contains("CAJETA_XPU_COARSEN"),
            "{e}"
        );
    }

    #[test]
    fn backend_names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert_eq!(Backend::from_name(" CPU "), Some(Backend::Cpu));
        assert_eq!(Backend::from_name("metal"), None);
    }

    #[test]
    fn open_is_cached_and_interp_always_present() {
        let a = Device::open(Backend::Interp).unwrap();
        let b = Device::open(Backend::Interp).unwrap();
        assert_eq!(a, b);
        assert!(Device::available().contains(&Backend::Interp));
        // Without the `hip` feature HIP is not compiled; with it, a machine without
        // libamdhip64 says unavailable (never a panic).
        match Device::open(Backend::Hip) {
            Err(e) if !cfg!(feature = "hip") => assert_eq!(e.code(), codes::NOT_COMPILED),
            Err(e) => assert_eq!(e.code(), codes::UNAVAILABLE),
            // A machine with an AMD GPU opens it, which only a `hip` build can.
            Ok(d) => assert_eq!(d.backend(), Backend::Hip),
        }
    }

    #[test]
    fn force_rejects_unknown_names() {
        assert_eq!(
            Device::force("metal").unwrap_err().code(),
            codes::UNKNOWN_BACKEND
        );
    }
}
