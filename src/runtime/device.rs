//! [`Device`]: a cheap, `Send + Sync` handle to one backend's device, how one is selected at
//! the first touch (contract §5.1), and the programs and kernels loaded on it ([`Program`],
//! [`Kernel`]; a launch checks, picks the kernel's variant and hands it to the backend).
//!
//! This is the one file that names every backend: adding one is a folder under
//! `src/backend/` implementing the `hal` seam and an arm in `open_backend`.

#[cfg(feature = "cuda")]
use crate::backend::cuda;
#[cfg(feature = "hip")]
use crate::backend::hip;
use crate::backend::{cpu, interp, vulkan};
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{self, ArgValue, HostValue, Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::seam::*;
use crate::hal::{Backend, ProgramOptions};
use crate::ir::{Function, Handle, VerifiedModule};
use crate::runtime::coarse;
use crate::runtime::stream::KernelStream;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

struct DeviceInner {
    id: u64,
    imp: Arc<dyn DeviceImpl>,
    /// The programs loaded on this device and still alive: the registry
    /// [`Device::kernel_available`] asks.
    programs: Mutex<Vec<LoadedProgram>>,
}

/// A registry entry: a program's module and device side, held weakly.
type LoadedProgram = (
    std::sync::Weak<VerifiedModule>,
    std::sync::Weak<dyn ProgramImpl>,
);

/// A handle to one backend's device: `Send + Sync`, cheap to clone; clones are the same
/// device.
///
/// ```
/// use xpu::{Backend, Device};
///
/// // The interpreter is always present; `Device::current()` picks the best device here.
/// let device = Device::open(Backend::Interp).unwrap();
/// assert_eq!(device.backend(), Backend::Interp);
/// assert!(Device::available().contains(&Backend::Interp));
/// let buffer = device.upload(&[1u32, 2, 3]).unwrap();
/// assert_eq!(buffer.download().unwrap(), vec![1, 2, 3]);
/// ```
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

thread_local! {
    /// The launch path's list of bound arguments, reused from launch to launch.
    static BOUND: std::cell::RefCell<Vec<DeviceArg>> = const { std::cell::RefCell::new(Vec::new()) };
}
static OPENED: OnceLock<Mutex<HashMap<Backend, Device>>> = OnceLock::new();
static FORCED: Mutex<Option<String>> = Mutex::new(None);
static CURRENT: OnceLock<Device> = OnceLock::new();

/// Opens a backend's device implementation. One arm per backend; those not compiled into this
/// build say so.
fn open_backend(backend: Backend) -> Result<Arc<dyn DeviceImpl>, DeviceError> {
    // The profiler is armed (from `CAJETA_PROFILER`) before any backend initialises, so that
    // it sees every compile.
    crate::profile::armed();
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
        if crate::profile::armed() {
            // What times this backend's device spans, unless the backend said (CUPTI).
            let backend = imp.backend();
            let source = match (backend, imp.timer_tier()) {
                (Backend::Interp | Backend::Cpu, _) => "host (the launch runs inside the call)",
                (Backend::Vulkan, TimerTier::Event) => "timestamps (vkCmdWriteTimestamp)",
                (_, TimerTier::Event) => "events",
                _ => "host (submit to complete)",
            };
            crate::profile::note_device_source(backend.name(), source);
        }
        Device {
            inner: Arc::new(DeviceInner {
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                imp,
                programs: Mutex::new(Vec::new()),
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

    /// A fresh interpreter device (not the shared one [`Device::open`] gives) whose every
    /// launch starts from `options`: races allowed by buffer or shared-array name, a shuffle
    /// seed, a step budget, a wave width, checks off. A launch's own
    /// [`Launch::interp`](crate::hal::launch::Launch::interp) and wave win.
    pub fn interp_with(options: crate::interp::Options) -> Device {
        Device::from_impl(Arc::new(interp::InterpDevice::with_options(options)))
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

    /// The backend this device belongs to.
    pub fn backend(&self) -> Backend {
        self.inner.imp.backend()
    }

    /// What the device reports about itself: geometry, limits, features (contract §5.2).
    pub fn facts(&self) -> &DeviceFacts {
        self.inner.imp.facts()
    }

    /// How this device does `feature` (contract §5.2): `Native`, `Emulated` or `No`.
    pub fn supports(&self, feature: crate::hal::facts::Feature) -> crate::hal::facts::Support {
        self.facts().supports(feature)
    }

    /// The registry question (contract §5.2): whether a program loaded on this device and
    /// still alive has device code for the kernel `name` on this backend, with a manifest
    /// whose shared memory fits this device (the opt-in ceiling where the device has one).
    /// Asking builds the kernel's code where it was not built yet.
    pub fn kernel_available(&self, name: &str) -> bool {
        let live: Vec<(Arc<VerifiedModule>, Arc<dyn ProgramImpl>)> = self
            .inner
            .programs
            .lock()
            .iter()
            .filter_map(|(m, i)| Some((m.upgrade()?, i.upgrade()?)))
            .collect();
        let facts = self.facts();
        let ceiling = facts
            .shared_bytes_per_block_optin
            .or(facts.shared_bytes_per_block);
        live.iter().any(|(module, imp)| {
            module.kernel(name).is_some()
                && imp
                    .manifest(name)
                    .is_some_and(|m| match (m.static_shared_bytes, ceiling) {
                        (Some(need), Some(limit)) => need <= limit,
                        _ => true,
                    })
        })
    }

    /// A number unique to this device within the process.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The backend implementation (for backends and tests that need its own API).
    pub fn implementation(&self) -> &Arc<dyn DeviceImpl> {
        &self.inner.imp
    }

    /// Prepares `module` for this device; kernels are compiled on first use, under the
    /// options the environment asks for ([`ProgramOptions::from_env`]: checked mode off,
    /// ub-traps on in debug builds of the library).
    pub fn load(&self, module: impl IntoSharedModule) -> Result<Program, DeviceError> {
        let options = ProgramOptions::from_env()?;
        self.load_with(module, options)
    }

    /// [`Device::load`] under explicit options: checked mode (bounds-checked GPU code) and
    /// ub-traps (tested `align` statements), contract §2.3.
    pub fn load_with(
        &self,
        module: impl IntoSharedModule,
        options: ProgramOptions,
    ) -> Result<Program, DeviceError> {
        self.load_through(module.into_shared(), options, |imp, m| {
            imp.load_with(m, &options)
        })
    }

    /// [`Device::load`] with device code made elsewhere for some kernels (a bundle's:
    /// [`Device::load_bundle`]), under the default options.
    pub(crate) fn load_prebuilt(
        &self,
        module: Arc<VerifiedModule>,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Program, DeviceError> {
        let options = ProgramOptions::from_env()?;
        self.load_through(module, options, |imp, m| imp.load_prebuilt(m, prebuilt))
    }

    /// The coarsened variants made at load, then the backend's program from `load`.
    fn load_through(
        &self,
        module: Arc<VerifiedModule>,
        options: ProgramOptions,
        load: impl FnOnce(
            &dyn DeviceImpl,
            &Arc<VerifiedModule>,
        ) -> Result<Arc<dyn crate::hal::ProgramImpl>, DeviceError>,
    ) -> Result<Program, DeviceError> {
        crate::record::census::register(
            self.backend().name(),
            module.kernels().map(|(_, f)| f.name.as_str()),
        );
        // `print` off: the statements are dropped before anything is lowered.
        let module = match options.print {
            false => module.without_debug().map_or(module, Arc::new),
            true => module,
        };
        let variants = if coarse::made_at_load(self.inner.imp.as_ref()) {
            coarse::variants(&module)
        } else {
            coarse::Variants::default()
        };
        let imp = load(
            self.inner.imp.as_ref(),
            variants.loaded.as_ref().unwrap_or(&module),
        )?;
        {
            let mut programs = self.inner.programs.lock();
            programs.retain(|(m, i)| m.strong_count() > 0 && i.strong_count() > 0);
            programs.push((Arc::downgrade(&module), Arc::downgrade(&imp)));
        }
        Ok(Program {
            device: self.clone(),
            module,
            options,
            imp,
            coarse: Arc::new(CoarseVariants {
                variants,
                kernels: Mutex::default(),
            }),
        })
    }

    /// Bytes of device code this device holds now for live programs and kernels (`None`
    /// where the backend does not count them).
    pub fn code_memory(&self) -> Option<u64> {
        self.inner.imp.code_memory()
    }

    /// A fresh buffer of `len` elements (poisoned under `CAJETA_XPU_POISON=1`).
    pub fn alloc<T: crate::runtime::buffer::Element>(
        &self,
        len: usize,
    ) -> Result<crate::KernelBuffer<T>, DeviceError> {
        crate::KernelBuffer::new(self, len)
    }

    /// Records every launch on this device into `dir` (the API form of `CAJETA_XPU_RECORD`,
    /// which records every device), under the budget of `CAJETA_XPU_RECORD_BUDGET`; see
    /// [`crate::record`]. [`crate::record::finish`] writes the last records. A process records
    /// into one folder: naming another is `XPU-R006`.
    pub fn record_to(
        &self,
        dir: impl AsRef<std::path::Path>,
    ) -> Result<(), crate::record::RecordError> {
        let budget = crate::config::get().record_budget.clone()?;
        crate::record::capture::start(dir.as_ref(), budget, Some(self.id()))
    }

    /// Every kernel registered on this device's backend in this process (each concrete kernel
    /// of every module loaded there), sorted: what the census ([`crate::record::census`])
    /// requires to be value-checked or excused.
    pub fn registered_kernels(&self) -> Vec<String> {
        crate::record::census::registered(self.backend().name())
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: crate::runtime::buffer::Element>(
        &self,
        data: &[T],
    ) -> Result<crate::KernelBuffer<T>, DeviceError> {
        crate::KernelBuffer::from_slice(self, data)
    }
}

/// What produces a backend's device code, as a compile span names it.
fn compile_stage(backend: Backend) -> &'static str {
    match backend {
        Backend::Interp => "interp",
        Backend::Cpu => "cranelift",
        Backend::Cuda => "llvm+ptxas",
        Backend::Hip => "llvm+lld",
        Backend::Vulkan => "spirv+pipeline",
    }
}

fn select() -> Device {
    let forced = FORCED.lock().clone();
    let (route, request) = match forced {
        Some(name) => ("Device::force", Some(name)),
        None => match crate::config::get().backend.clone() {
            Ok(request) => ("CAJETA_XPU_BACKEND", request),
            // Unreadable: the note says so, and selection goes on as if unset.
            Err(e) => {
                eprintln!("note: {e}; selecting as if it were unset");
                ("CAJETA_XPU_BACKEND", None)
            }
        },
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
    /// The module behind a shared handle (no copy when it already is one).
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

/// A program's coarsened variants, and their device kernels once asked for.
struct CoarseVariants {
    variants: coarse::Variants,
    kernels: Mutex<HashMap<String, Arc<dyn KernelImpl>>>,
}

/// A verified module loaded on a device.
///
/// ```
/// use xpu::{Backend, Device};
///
/// let module = xpu::ir::parse("kernel zero(a: buf<u32, rw>) { a[global_id.x] = 0; }")
///     .unwrap()
///     .verify()
///     .unwrap();
/// let program = Device::open(Backend::Interp).unwrap().load(module).unwrap();
/// assert!(program.kernel("zero").is_ok());
/// // A name the module does not define is refused with a coded error.
/// assert_eq!(program.kernel("nope").unwrap_err().code(), "XPU-L001");
/// ```
#[derive(Clone)]
pub struct Program {
    device: Device,
    module: Arc<VerifiedModule>,
    options: ProgramOptions,
    imp: Arc<dyn ProgramImpl>,
    /// The kernels' coarsened variants, made at load on devices that coarsen.
    coarse: Arc<CoarseVariants>,
}

impl Program {
    /// The device the program is loaded on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The verified module the program was loaded from.
    pub fn module(&self) -> &Arc<VerifiedModule> {
        &self.module
    }

    /// The options the program was loaded with (checked mode, ub-traps).
    pub fn options(&self) -> ProgramOptions {
        self.options
    }

    /// The kernel `name` (a kernel or a template instance, `QkTile<64,64,32,32,128>`), with
    /// its device code produced now if it was not yet.
    pub fn kernel(&self, name: &str) -> Result<Kernel, LaunchError> {
        let no_code = |reason: &str| LaunchError::no_code(name, self.device.backend(), reason);
        let handle = self
            .module
            .kernel(name)
            .ok_or_else(|| no_code("the program has no kernel of that name"))?;
        let function = self.module.function(handle);
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
        // `@unlowered(hold = true)`: no code is built here, by declaration (contract §3.6).
        if let Some(tracked) = self.held(function) {
            return Err(LaunchError::Held {
                kernel: name.to_string(),
                backend: self.device.backend(),
                tracked: tracked.to_string(),
            });
        }
        let start = crate::profile::stamp();
        let imp = self.imp.kernel(name, function)?;
        if crate::profile::armed() {
            let backend = self.device.backend();
            crate::profile::host_span(
                crate::profile::Kind::Compile,
                name,
                start,
                crate::profile::Args {
                    backend: backend.name(),
                    stage: Some(compile_stage(backend)),
                    ..Default::default()
                },
            );
        }
        Ok(Kernel {
            name: name.to_string(),
            program: self.clone(),
            handle,
            imp,
            profile_name: std::sync::OnceLock::new(),
        })
    }

    /// The device kernel of kernel `name`'s coarsened variant (`None`: none was made), its
    /// code built on first request.
    fn coarse_variant(&self, name: &str) -> Result<Option<Arc<dyn KernelImpl>>, LaunchError> {
        let c = &self.coarse;
        if let Some(reason) = &c.variants.failure {
            return Err(LaunchError::no_code(
                name,
                self.device.backend(),
                reason.clone(),
            ));
        }
        let (Some(loaded), Some(&h)) = (&c.variants.loaded, c.variants.by_kernel.get(name)) else {
            return Ok(None);
        };
        if let Some(k) = c.kernels.lock().get(name) {
            return Ok(Some(k.clone()));
        }
        let f = loaded.function(h);
        let k = self.imp.kernel(&f.name, f)?;
        c.kernels.lock().insert(name.to_string(), k.clone());
        Ok(Some(k))
    }

    /// The kernel's manifest on this device's backend, or `None` where the backend has no
    /// device code for it.
    pub fn manifest(&self, name: &str) -> Option<KernelManifest> {
        let function = kernel_function(&self.module, name)?;
        if self.held(function).is_some() {
            return None;
        }
        self.imp.manifest(name)
    }

    /// The plan item of an `@unlowered(hold = true)` that applies to `function` on this
    /// device (contract §3.6: the hold skips lowering, and the launch is refused by name).
    fn held<'f>(&self, function: &'f Function) -> Option<&'f str> {
        let backend = self.device.backend();
        let host_wave = self.device.facts().wave_width.unwrap_or(0);
        function
            .attrs
            .unlowered
            .iter()
            .find(|u| u.hold && u.active(backend.name(), host_wave))
            .map(|u| u.tracked.as_str())
    }

    /// How many times this program lowered a kernel's IR to device code so far (code taken
    /// from a bundle or a cache does not count); `None` where the backend does not count.
    pub fn lowerings(&self) -> Option<u64> {
        self.imp.lowerings()
    }
}

/// One kernel of a [`Program`], ready to launch.
///
/// ```
/// use xpu::{args, Backend, Device, KernelStream, Launch};
///
/// let module = xpu::ir::parse("kernel fill(a: buf<u32, rw>, v: u32) { a[global_id.x] = v; }")
///     .unwrap()
///     .verify()
///     .unwrap();
/// let device = Device::open(Backend::Interp).unwrap();
/// let kernel = device.load(module).unwrap().kernel("fill").unwrap();
/// assert_eq!(kernel.name(), "fill");
/// let mut a = device.alloc::<u32>(8).unwrap();
/// let stream = KernelStream::current(&device);
/// kernel
///     .launch(&stream, Launch::grid(2).block(4), args![&mut a, 7u32])
///     .unwrap();
/// stream.sync().unwrap();
/// assert_eq!(a.download().unwrap(), vec![7; 8]);
/// // A wrong argument list is refused before anything runs.
/// let e = kernel.launch(&stream, Launch::grid(1).block(1), args![&mut a]).unwrap_err();
/// assert_eq!(e.code(), "XPU-L002");
/// ```
#[derive(Clone)]
pub struct Kernel {
    name: String,
    program: Program,
    handle: Handle<Function>,
    imp: Arc<dyn KernelImpl>,
    /// The name interned for the profiler, at the first profiled launch.
    profile_name: std::sync::OnceLock<crate::profile::Name>,
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
    /// The kernel's name in its module.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the backend built for the kernel: registers, shared memory, waves, code hash.
    pub fn manifest(&self) -> &KernelManifest {
        self.imp.manifest()
    }

    /// How many compiled specialisations the kernel's device code holds now (`None` where
    /// the backend does not count them; the CPU keeps at most
    /// [`MAX_SPECIALISATIONS`](crate::backend::cpu::MAX_SPECIALISATIONS)).
    pub fn specialisations(&self) -> Option<usize> {
        self.imp.specialisations()
    }

    /// The kernel's verified IR.
    pub fn function(&self) -> &Function {
        self.program.module.function(self.handle)
    }

    /// The program the kernel belongs to.
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
        let info = self.program.module.info(self.handle);
        launch::check(
            &self.name,
            function,
            info,
            self.imp.manifest(),
            device.facts(),
            &launch,
            args,
        )?;
        // The bindings go into this thread's reused list: no allocation per launch once it
        // has grown to the longest argument list (taken out while in use, so a launch from
        // inside a launch's hooks gets a fresh one).
        let mut bound = BOUND
            .try_with(|b| std::mem::take(&mut *b.borrow_mut()))
            .unwrap_or_default();
        bound.clear();
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
        let result = if crate::record::armed() || crate::profile::armed() {
            self.launch_observed(stream, &launch, &mut bound)
        } else {
            self.launch_bound(stream, &launch, &mut bound)
        };
        // The buffers' handles go now (the backend kept what it needs); the list is kept.
        bound.clear();
        let _ = BOUND.try_with(|b| {
            let mut b = b.borrow_mut();
            if b.capacity() < bound.capacity() {
                *b = bound;
            }
        });
        result
    }

    /// [`Kernel::launch`] with recording or profiling on: the launch is captured around the
    /// backend's call (`record`, `profile`).
    fn launch_observed(
        &self,
        stream: &KernelStream,
        launch: &Launch,
        bound: &mut Vec<DeviceArg>,
    ) -> Result<(), LaunchError> {
        let device = &self.program.device;
        let pre = if crate::record::armed() {
            crate::record::capture::before(
                device.id(),
                device.implementation(),
                stream.implementation(),
                &self.program.module,
                &self.name,
                self.function(),
                self.imp.manifest().built_wave,
                launch,
                bound,
            )
        } else {
            None
        };
        let profiling = crate::profile::armed();
        if !profiling {
            let result = self.launch_bound(stream, launch, bound);
            if let Some(pre) = pre {
                crate::record::capture::after(pre, result.is_ok());
            }
            return result;
        }
        let bytes: u64 = bound
            .iter()
            .map(|a| match a {
                DeviceArg::Buffer(b) => b.len as u64,
                DeviceArg::Value(_) => 0,
            })
            .sum();
        let eager = matches!(device.backend(), Backend::Interp | Backend::Cpu);
        // Where the backend has a vendor tracer (CUPTI on CUDA), its dispatch record times the
        // launch; otherwise device-event brackets (CUDA, HIP events; Vulkan timestamp writes in
        // the command buffer) where the backend's events carry device time.
        let record_id = if eager {
            None
        } else {
            device.implementation().profile_begin()
        };
        let bracket = if record_id.is_none()
            && !eager
            && device.implementation().timer_tier() == TimerTier::Event
        {
            stream.implementation().record().ok()
        } else {
            None
        };
        let start = crate::profile::stamp();
        let result = self.launch_bound(stream, launch, bound);
        let end = crate::profile::stamp();
        if let Some(id) = record_id {
            device.implementation().profile_end(id);
        }
        let bracket = bracket.and_then(|b| Some((b, stream.implementation().record().ok()?)));
        let timing = if result.is_err() {
            crate::profile::DeviceTiming::None
        } else if eager {
            // Host streams run the launch inside the call: submit to complete is exact.
            crate::profile::DeviceTiming::Exact
        } else if let Some(id) = record_id {
            crate::profile::DeviceTiming::Record(id)
        } else {
            crate::profile::DeviceTiming::Pending(bracket.map(|(before, after)| {
                let clock: crate::profile::DeviceClock = Box::new(move || {
                    after
                        .elapsed_since(before.as_ref())
                        .map(|d| d.as_nanos() as u64)
                });
                (crate::profile::Tier::Event, clock)
            }))
        };
        let name = *self
            .profile_name
            .get_or_init(|| crate::profile::intern(&self.name));
        crate::profile::launch_span(
            name,
            stream.profile_key(),
            start,
            end,
            crate::profile::Args {
                backend: device.backend().name(),
                grid: Some(launch.grid),
                block: Some(launch.block),
                bytes: Some(bytes),
                stage: None,
            },
            timing,
        );
        if let Some(pre) = pre {
            crate::record::capture::after(pre, result.is_ok());
        }
        result
    }

    /// Hands a checked launch to the backend (its coarsened variant where one is wanted).
    fn launch_bound(
        &self,
        stream: &KernelStream,
        launch: &Launch,
        bound: &mut Vec<DeviceArg>,
    ) -> Result<(), LaunchError> {
        let device = &self.program.device;
        let info = self.program.module.info(self.handle);
        let mode = coarse::mode()
            .map_err(|e| LaunchError::no_code(&self.name, device.backend(), e.to_string()))?;
        if coarse::wanted(mode, device.inner.imp.as_ref(), info, launch) {
            if let Some(variant) = self.program.coarse_variant(&self.name)? {
                // The logical grid's x extent is the variant's extra, last parameter.
                bound.push(DeviceArg::Value(HostValue::from(launch.grid[0])));
                return variant.launch(
                    stream.implementation().as_ref(),
                    &coarse::launch_of(launch),
                    bound,
                );
            }
        }
        self.imp
            .launch(stream.implementation().as_ref(), launch, bound)
    }
}

impl DeviceFacts {
    /// The facts of the device selected for this process (contract: `DeviceFacts.current()`).
    /// Like every selection question, this is itself a device touch.
    pub fn current() -> Result<DeviceFacts, DeviceError> {
        Ok(Device::current()?.facts().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
