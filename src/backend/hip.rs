//! The HIP backend (contract §2.4, §4, §5): AMD GPUs through the HIP runtime, `libamdhip64`,
//! loaded at run time with `libloading`, running code objects from [`crate::codegen::llvm::codeobj`] (the
//! shared LLVM walk with the [`Amdgpu`] target, linked by `ld.lld`).
//!
//! **Unrun on hardware.** No AMD GPU was available where this was written: everything up to
//! the launch (lowering, code objects, manifests) is tested without one; this module
//! compiles, loads nothing and offers nothing when `libamdhip64` is absent (never a panic),
//! and is written to run where it is present.
//!
//! - **No runtime, no HIP**: [`probe`] dlopens `libamdhip64.so` (or `XPU_HIP_LIB`) and
//!   resolves every entry point before any call; without it, or without a device, the
//!   backend is unavailable and selection moves on.
//! - **Memory** is `hipMalloc`; copies are the `*Async` forms on the caller's stream; fresh
//!   memory is poisoned with 0xFF when asked.
//! - **Device code** is built per kernel at first use for the device's processor (the
//!   `gfx…` name from the device properties, or `XPU_HIP_ARCH`), at the kernel's wave width,
//!   and loaded with `hipModuleLoadData`. A machine without `ld.lld` cannot load a kernel:
//!   the launch is refused naming "no assembler/linker".
//! - **Manifests** come from the code object's metadata note (VGPRs, SGPRs, scratch, LDS,
//!   wave, largest block).
//! - **Facts**: only what is read through entry points whose meaning does not change across
//!   ROCm versions (name, memory, runtime version, the processor and its wave widths). The
//!   `hipDeviceAttribute_t` numbering and the `hipDeviceProp_t` layout differ between ROCm
//!   releases, so the other facts stay absent until they are checked on hardware.
//! - **Launches** pass one pointer per LLVM parameter to `hipModuleLaunchKernel`, which lays
//!   them out per the code object's kernarg metadata.
//! - **Timing**: HIP events give the Event tier of `KernelTimer`.

use crate::backend::common::{self, BuildError};
use crate::codegen::checks::{Checks, Report, REPORT_WORDS};
use crate::codegen::llvm::amdgpu::Amdgpu;
use crate::codegen::llvm::codeobj::{self, BuildOptions};
use crate::codegen::llvm::{KernelAbi, KernelRef};
use crate::codegen::{codes, Error};
use crate::hal::checked::{report_error, ProgramOptions};
use crate::hal::facts::{DeviceFacts, FeatureSupport, Support};
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, EventImpl, Init, KernelImpl,
    Prebuilt, ProgramImpl, ReadTicket, StreamImpl, TimerTier,
};
use crate::ir::{Function, VerifiedModule};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

type HipError = i32;
type Ptr = *mut c_void;

/// The HIP entry points this backend calls, resolved once from `libamdhip64`.
struct Api {
    _lib: libloading::Library,
    init: unsafe extern "C" fn(u32) -> HipError,
    get_device_count: unsafe extern "C" fn(*mut i32) -> HipError,
    set_device: unsafe extern "C" fn(i32) -> HipError,
    device_reset: unsafe extern "C" fn() -> HipError,
    device_synchronize: unsafe extern "C" fn() -> HipError,
    device_get_name: unsafe extern "C" fn(*mut c_char, i32, i32) -> HipError,
    device_total_mem: unsafe extern "C" fn(*mut usize, i32) -> HipError,
    runtime_get_version: unsafe extern "C" fn(*mut i32) -> HipError,
    get_device_properties: unsafe extern "C" fn(*mut u8, i32) -> HipError,
    get_error_string: unsafe extern "C" fn(HipError) -> *const c_char,
    malloc: unsafe extern "C" fn(*mut Ptr, usize) -> HipError,
    free: unsafe extern "C" fn(Ptr) -> HipError,
    memset: unsafe extern "C" fn(Ptr, i32, usize) -> HipError,
    memcpy_htod_async: unsafe extern "C" fn(Ptr, *const c_void, usize, Ptr) -> HipError,
    memcpy_dtoh_async: unsafe extern "C" fn(Ptr, Ptr, usize, Ptr) -> HipError,
    memcpy_dtod_async: unsafe extern "C" fn(Ptr, Ptr, usize, Ptr) -> HipError,
    stream_create_with_flags: unsafe extern "C" fn(*mut Ptr, u32) -> HipError,
    stream_destroy: unsafe extern "C" fn(Ptr) -> HipError,
    stream_synchronize: unsafe extern "C" fn(Ptr) -> HipError,
    stream_wait_event: unsafe extern "C" fn(Ptr, Ptr, u32) -> HipError,
    event_create: unsafe extern "C" fn(*mut Ptr) -> HipError,
    event_record: unsafe extern "C" fn(Ptr, Ptr) -> HipError,
    event_synchronize: unsafe extern "C" fn(Ptr) -> HipError,
    event_query: unsafe extern "C" fn(Ptr) -> HipError,
    event_elapsed_time: unsafe extern "C" fn(*mut f32, Ptr, Ptr) -> HipError,
    event_destroy: unsafe extern "C" fn(Ptr) -> HipError,
    module_load_data: unsafe extern "C" fn(*mut Ptr, *const c_void) -> HipError,
    module_get_function: unsafe extern "C" fn(*mut Ptr, Ptr, *const c_char) -> HipError,
    module_unload: unsafe extern "C" fn(Ptr) -> HipError,
    module_get_global: unsafe extern "C" fn(*mut Ptr, *mut usize, Ptr, *const c_char) -> HipError,
    #[allow(clippy::type_complexity)]
    module_launch_kernel: unsafe extern "C" fn(
        Ptr,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        Ptr,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> HipError,
}

// SAFETY: the entry points are plain C functions of a thread-safe runtime; the library
// handle is only kept alive.
unsafe impl Send for Api {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for Api {}

const HIP_SUCCESS: HipError = 0;
const HIP_ERROR_NOT_READY: HipError = 600;
const HIP_STREAM_NON_BLOCKING: u32 = 1;

impl Api {
    fn load() -> Result<Api, String> {
        let names: Vec<String> = match crate::config::get()
            .hip_lib
            .clone()
            .map_err(|e| e.to_string())?
        {
            Some(p) => vec![p],
            None => vec![
                "libamdhip64.so".into(),
                "libamdhip64.so.6".into(),
                "libamdhip64.so.5".into(),
                "/opt/rocm/lib/libamdhip64.so".into(),
            ],
        };
        let mut last = String::new();
        let lib = names
            .iter()
            .find_map(|n| {
                // SAFETY: loading the HIP runtime runs its initialisers, which is what
                // using HIP requires.
                match unsafe { libloading::Library::new(n) } {
                    Ok(l) => Some(l),
                    Err(e) => {
                        last = e.to_string();
                        None
                    }
                }
            })
            .ok_or_else(|| format!("no HIP runtime (libamdhip64) on this machine: {last}"))?;
        macro_rules! sym {
            ($($name:literal),+) => {{
                let mut found = None;
                $(
                    if found.is_none() {
                        // SAFETY: the symbol's C signature is the field's type (HIP's API).
                        if let Ok(s) = unsafe { lib.get(concat!($name, "\0").as_bytes()) } {
                            found = Some(*s);
                        }
                    }
                )+
                found.ok_or_else(|| format!("libamdhip64 lacks {}", [$($name),+].join(" / ")))?
            }};
        }
        Ok(Api {
            init: sym!("hipInit"),
            get_device_count: sym!("hipGetDeviceCount"),
            set_device: sym!("hipSetDevice"),
            device_reset: sym!("hipDeviceReset"),
            device_synchronize: sym!("hipDeviceSynchronize"),
            device_get_name: sym!("hipDeviceGetName"),
            device_total_mem: sym!("hipDeviceTotalMem"),
            runtime_get_version: sym!("hipRuntimeGetVersion"),
            get_device_properties: sym!("hipGetDevicePropertiesR0600", "hipGetDeviceProperties"),
            get_error_string: sym!("hipGetErrorString"),
            malloc: sym!("hipMalloc"),
            free: sym!("hipFree"),
            memset: sym!("hipMemset"),
            memcpy_htod_async: sym!("hipMemcpyHtoDAsync"),
            memcpy_dtoh_async: sym!("hipMemcpyDtoHAsync"),
            memcpy_dtod_async: sym!("hipMemcpyDtoDAsync"),
            stream_create_with_flags: sym!("hipStreamCreateWithFlags"),
            stream_destroy: sym!("hipStreamDestroy"),
            stream_synchronize: sym!("hipStreamSynchronize"),
            stream_wait_event: sym!("hipStreamWaitEvent"),
            event_create: sym!("hipEventCreate"),
            event_record: sym!("hipEventRecord"),
            event_synchronize: sym!("hipEventSynchronize"),
            event_query: sym!("hipEventQuery"),
            event_elapsed_time: sym!("hipEventElapsedTime"),
            event_destroy: sym!("hipEventDestroy"),
            module_load_data: sym!("hipModuleLoadData"),
            module_get_function: sym!("hipModuleGetFunction"),
            module_unload: sym!("hipModuleUnload"),
            module_get_global: sym!("hipModuleGetGlobal"),
            module_launch_kernel: sym!("hipModuleLaunchKernel"),
            _lib: lib,
        })
    }

    fn check(&self, what: &str, r: HipError) -> Result<(), DeviceError> {
        if r == HIP_SUCCESS {
            return Ok(());
        }
        // SAFETY: hipGetErrorString returns a static string for any code.
        let text = unsafe {
            let p = (self.get_error_string)(r);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(DeviceError::Driver {
            message: format!("{what}: error {r} {text}"),
        })
    }
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
}

/// Whether a HIP error is sticky: the device's context is lost and every later call fails
/// until the device is reset (illegal or misaligned address, trap, launch failure: the HIP
/// codes follow CUDA's numbering for these).
pub fn is_sticky(r: HipError) -> bool {
    matches!(r, 700 | 702 | 710 | 715 | 716 | 717 | 718 | 719)
}

/// The fault state of one HIP device in this process, shared by every [`HipDevice`] opened on
/// it (as CUDA's context is, `backend::cuda`): a sticky error seen by any call resets the
/// device (`hipDeviceReset`) and starts a new *epoch*. Memory of an ended epoch reports
/// `XPU-D014` on use and is never freed; a stream makes a new handle on first use; a kernel
/// loads its code object again. If the reset device does not work (a synchronise and a small
/// allocation), every later call is refused with `XPU-D016`.
struct HipCtx {
    api: &'static Api,
    ordinal: i32,
    epoch: std::sync::atomic::AtomicU64,
    /// The kernel launched last: the one a fault is reported against.
    last_kernel: Mutex<String>,
    /// Per ended epoch, the kernel whose fault ended it.
    faults: Mutex<Vec<String>>,
    /// Why the device could not be recovered, once that happened; held while recovering.
    broken: Mutex<Option<String>>,
}

impl HipCtx {
    fn open(api: &'static Api, ordinal: i32) -> Arc<HipCtx> {
        static ALL: OnceLock<Mutex<HashMap<i32, std::sync::Weak<HipCtx>>>> = OnceLock::new();
        let mut all = ALL.get_or_init(|| Mutex::new(HashMap::new())).lock();
        if let Some(c) = all.get(&ordinal).and_then(|w| w.upgrade()) {
            return c;
        }
        let c = Arc::new(HipCtx {
            api,
            ordinal,
            epoch: std::sync::atomic::AtomicU64::new(0),
            last_kernel: Mutex::new(String::new()),
            faults: Mutex::new(Vec::new()),
            broken: Mutex::new(None),
        });
        all.insert(ordinal, Arc::downgrade(&c));
        c
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The kernel whose fault ended `epoch`, once it has ended.
    fn lost(&self, epoch: u64) -> Option<String> {
        if epoch == self.epoch() {
            return None;
        }
        Some(
            self.faults
                .lock()
                .get(epoch as usize)
                .cloned()
                .unwrap_or_default(),
        )
    }

    /// Makes the device current on this thread (refused once it could not be recovered).
    fn bind(&self) -> Result<(), DeviceError> {
        if let Some(why) = self.broken.lock().clone() {
            return Err(DeviceError::Unrecovered {
                kernel: self.faults.lock().last().cloned().unwrap_or_default(),
                message: why,
            });
        }
        // SAFETY: a device ordinal that opened.
        self.api.check("hipSetDevice", unsafe {
            (self.api.set_device)(self.ordinal)
        })
    }

    /// `r` of `what`: success, a device fault (the device is reset: a [`DeviceError::DeviceFault`]
    /// naming the kernel launched last), or a plain failure.
    fn check(&self, what: &str, r: HipError) -> Result<(), DeviceError> {
        if r == HIP_SUCCESS {
            return Ok(());
        }
        if !is_sticky(r) {
            return self.api.check(what, r);
        }
        let message = self
            .api
            .check(what, r)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let kernel = self.last_kernel.lock().clone();
        let how = self.recover(self.epoch(), &kernel);
        Err(DeviceError::DeviceFault {
            kernel,
            message: format!("{message} ({how})"),
        })
    }

    /// Resets the device after a fault seen in epoch `seen`, unless another thread already
    /// did; says how it went.
    fn recover(&self, seen: u64, kernel: &str) -> String {
        let mut broken = self.broken.lock();
        if self.epoch() != seen {
            return "the device was reset".into();
        }
        let a = self.api;
        let ok = |what: &str, r: HipError| {
            if r == HIP_SUCCESS {
                Ok(())
            } else {
                Err(format!("{what}: error {r}"))
            }
        };
        // SAFETY: plain runtime calls on a device ordinal that opened; the reset destroys
        // every allocation, module, stream and event of the device in this process, which the
        // epoch marks as gone. The probe allocation is freed at once.
        let r = unsafe {
            (|| {
                ok("hipSetDevice", (a.set_device)(self.ordinal))?;
                ok("hipDeviceReset", (a.device_reset)())?;
                ok("hipSetDevice", (a.set_device)(self.ordinal))?;
                ok("hipDeviceSynchronize", (a.device_synchronize)())?;
                let mut p: Ptr = std::ptr::null_mut();
                ok("hipMalloc", (a.malloc)(&mut p, 256))?;
                ok("hipFree", (a.free)(p))
            })()
        };
        self.faults.lock().push(kernel.to_string());
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        match r {
            Ok(()) => "the device was reset".into(),
            Err(why) => {
                *broken = Some(why.clone());
                format!("the device could not be recovered: {why}")
            }
        }
    }
}

/// Whether a HIP runtime and at least one device are present. Never panics.
pub fn probe() -> Result<(), String> {
    let a = api()?;
    // SAFETY: entry points resolved from the loaded runtime; out-pointers are locals.
    unsafe {
        if (a.init)(0) != HIP_SUCCESS {
            return Err("hipInit failed".into());
        }
        let mut n = 0;
        if (a.get_device_count)(&mut n) != HIP_SUCCESS || n < 1 {
            return Err("the HIP runtime reports no device".into());
        }
    }
    Ok(())
}

/// The first `gfx…` name in a properties block: `gcnArchName`, found by content because the
/// `hipDeviceProp_t` layout differs between ROCm releases.
fn arch_from_properties(block: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 3 < block.len() {
        if &block[i..i + 3] == b"gfx" && (i == 0 || block[i - 1] == 0) {
            let end = block[i..].iter().position(|&b| b == 0)? + i;
            let s = std::str::from_utf8(&block[i..end]).ok()?;
            if let Some(a) = Amdgpu::parse_arch(s) {
                return Some(a);
            }
        }
        i += 1;
    }
    None
}

/// One HIP device.
pub struct HipDevice {
    api: &'static Api,
    facts: DeviceFacts,
    arch: String,
    ctx: Arc<HipCtx>,
}

impl HipDevice {
    /// Opens device `ordinal`.
    pub fn open(ordinal: usize) -> Result<HipDevice, DeviceError> {
        let unavailable = |reason: String| DeviceError::Unavailable {
            backend: Backend::Hip,
            reason,
        };
        probe().map_err(unavailable)?;
        let a = api().map_err(unavailable)?;
        let ordinal = ordinal as i32;
        // SAFETY: the entry point was resolved from the loaded HIP runtime; it takes a plain ordinal.
        a.check("hipSetDevice", unsafe { (a.set_device)(ordinal) })?;
        let mut name = [0 as c_char; 256];
        let mut total = 0usize;
        let mut version = 0i32;
        let mut props = vec![0u8; 64 * 1024];
        // SAFETY: out-buffers sized as the API requires (the properties block is far larger
        // than any hipDeviceProp_t).
        let (name_ok, mem_ok, ver_ok, props_ok) = unsafe {
            (
                (a.device_get_name)(name.as_mut_ptr(), 256, ordinal) == HIP_SUCCESS,
                (a.device_total_mem)(&mut total, ordinal) == HIP_SUCCESS,
                (a.runtime_get_version)(&mut version) == HIP_SUCCESS,
                (a.get_device_properties)(props.as_mut_ptr(), ordinal) == HIP_SUCCESS,
            )
        };
        let arch = crate::config::get()
            .hip_arch
            .clone()
            .map_err(|e| unavailable(e.to_string()))?
            .and_then(|s| Amdgpu::parse_arch(&s))
            .or_else(|| props_ok.then(|| arch_from_properties(&props)).flatten())
            .ok_or_else(|| {
                unavailable("the device's processor (gfx…) is not one this build targets".into())
            })?;
        let facts = DeviceFacts {
            backend: Some(Backend::Hip),
            name: name_ok.then(|| {
                // SAFETY: hipDeviceGetName NUL-terminates within the buffer.
                unsafe { CStr::from_ptr(name.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            }),
            vendor: Some("AMD".into()),
            driver_version: ver_ok.then(|| version.to_string()),
            wave_width: Some(Amdgpu::default_wave(&arch)),
            supported_wave_widths: Some(Amdgpu::buildable_waves(&arch).to_vec()),
            global_memory_bytes: mem_ok.then_some(total as u64),
            int64_atomics: Some(true),
            features: FeatureSupport {
                int64_atomics: Some(Support::Native),
                f16: Some(Support::Native),
                f64: Some(Support::Native),
                // A kernel is built at wave32 or wave64 where the processor has both.
                subgroup_size_control: Some(if Amdgpu::buildable_waves(&arch).len() > 1 {
                    Support::Native
                } else {
                    Support::No
                }),
                cooperative_matrix: None,
                // LDS per workgroup has one limit on AMD: nothing to opt in to.
                shared_opt_in: Some(Support::No),
            },
            ..DeviceFacts::default()
        };
        Ok(HipDevice {
            api: a,
            facts,
            arch,
            ctx: HipCtx::open(a, ordinal),
        })
    }

    /// The processor kernels are built for (`gfx90a`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    fn program(&self, module: &Arc<VerifiedModule>, checks: Checks) -> HipProgram {
        HipProgram {
            api: self.api,
            ctx: self.ctx.clone(),
            arch: self.arch.clone(),
            module: module.clone(),
            kernels: Mutex::new(HashMap::new()),
            checks,
            prebuilt: Mutex::new(HashMap::new()),
            lowerings: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn bind(&self) -> Result<(), DeviceError> {
        self.ctx.bind()
    }

    fn memory<'m>(&self, mem: &'m Arc<dyn DeviceMemory>) -> Result<&'m HipMemory, DeviceError> {
        let m =
            mem.as_any()
                .downcast_ref::<HipMemory>()
                .ok_or_else(|| DeviceError::ForeignObject {
                    what: "memory of another backend".into(),
                })?;
        match self.ctx.lost(m.epoch) {
            Some(kernel) => Err(DeviceError::Lost { kernel }),
            None => Ok(m),
        }
    }
}

fn stream_of(s: &dyn StreamImpl) -> Result<&HipStream, DeviceError> {
    common::downcast(s.as_any(), "the stream")
}

fn check_range(mem: &HipMemory, offset: usize, len: usize) -> Result<(), DeviceError> {
    common::check_range("an access", offset, len, mem.size)
}

impl DeviceImpl for HipDevice {
    fn backend(&self) -> Backend {
        Backend::Hip
    }

    fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    fn alloc(&self, bytes: usize, init: Init) -> Result<Arc<dyn DeviceMemory>, DeviceError> {
        self.bind()?;
        let mut p: Ptr = std::ptr::null_mut();
        if bytes > 0 {
            // SAFETY: a plain device allocation, freed in `HipMemory::drop`.
            let r = unsafe { (self.api.malloc)(&mut p, bytes) };
            if is_sticky(r) {
                return Err(self.ctx.check("hipMalloc", r).unwrap_err());
            }
            if r != HIP_SUCCESS {
                return Err(DeviceError::OutOfMemory {
                    bytes: bytes as u64,
                    reason: format!("hipMalloc: error {r}"),
                });
            }
            if init == Init::Poison {
                // SAFETY: `p` holds `bytes` bytes.
                let r = unsafe { (self.api.memset)(p, 0xFF, bytes) };
                self.ctx.check("hipMemset", r)?;
            }
        }
        Ok(Arc::new(HipMemory {
            api: self.api,
            ctx: self.ctx.clone(),
            epoch: self.ctx.epoch(),
            ptr: p as u64,
            size: bytes,
        }))
    }

    fn write(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        src: &[u8],
    ) -> Result<(), DeviceError> {
        let m = self.memory(mem)?;
        check_range(m, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let s = stream_of(stream)?.handle()?;
        // SAFETY: the range was checked; the stream is synchronised before returning, so
        // `src` may be reused at once (pageable memory is staged by the runtime anyway).
        unsafe {
            self.ctx.check(
                "hipMemcpyHtoDAsync",
                (self.api.memcpy_htod_async)(
                    (m.ptr + offset as u64) as Ptr,
                    src.as_ptr() as *const c_void,
                    src.len(),
                    s,
                ),
            )?;
            self.ctx
                .check("hipStreamSynchronize", (self.api.stream_synchronize)(s))
        }
    }

    fn read(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        len: usize,
    ) -> Result<Box<dyn ReadTicket>, DeviceError> {
        let m = self.memory(mem)?;
        check_range(m, offset, len)?;
        let s = stream_of(stream)?;
        let mut data = vec![0u8; len];
        if len > 0 {
            let s = s.handle()?;
            // SAFETY: the range was checked; `data` outlives the copy (the stream is
            // synchronised before it is handed out).
            unsafe {
                self.ctx.check(
                    "hipMemcpyDtoHAsync",
                    (self.api.memcpy_dtoh_async)(
                        data.as_mut_ptr() as Ptr,
                        (m.ptr + offset as u64) as Ptr,
                        len,
                        s,
                    ),
                )?;
                self.ctx
                    .check("hipStreamSynchronize", (self.api.stream_synchronize)(s))?;
            }
        }
        Ok(Box::new(common::Ready(data)))
    }

    fn copy(
        &self,
        stream: &dyn StreamImpl,
        src: &Arc<dyn DeviceMemory>,
        src_offset: usize,
        dst: &Arc<dyn DeviceMemory>,
        dst_offset: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let a = self.memory(src)?;
        let b = self.memory(dst)?;
        check_range(a, src_offset, len)?;
        check_range(b, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let s = stream_of(stream)?.handle()?;
        // SAFETY: both ranges were checked.
        self.ctx.check("hipMemcpyDtoDAsync", unsafe {
            (self.api.memcpy_dtod_async)(
                (b.ptr + dst_offset as u64) as Ptr,
                (a.ptr + src_offset as u64) as Ptr,
                len,
                s,
            )
        })
    }

    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        self.bind()?;
        let mut s: Ptr = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        self.ctx.check("hipStreamCreateWithFlags", unsafe {
            (self.api.stream_create_with_flags)(&mut s, HIP_STREAM_NON_BLOCKING)
        })?;
        Ok(Arc::new(HipStream {
            api: self.api,
            ctx: self.ctx.clone(),
            stream: Mutex::new((s, self.ctx.epoch())),
        }))
    }

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        self.load_with(module, &ProgramOptions::from_env()?)
    }

    /// Checked mode and ub-traps are built into the code object (`llvm::checked`); a kernel
    /// with checks writes the report global, which its launch clears and reads back.
    fn load_with(
        &self,
        module: &Arc<VerifiedModule>,
        options: &ProgramOptions,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        Ok(Arc::new(self.program(module, options.checks())))
    }

    fn code_target(&self) -> Option<String> {
        Some(self.arch.clone())
    }

    /// A bundle's code objects for this processor ([`bundled_code`]), taken instead of a
    /// lowering at each kernel's first use (code without checks: a program whose options ask
    /// for checks lowers).
    fn load_prebuilt(
        &self,
        module: &Arc<VerifiedModule>,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let program = self.program(module, ProgramOptions::from_env()?.checks());
        {
            let mut map = program.prebuilt.lock();
            for p in prebuilt {
                let kernel = p.kernel.clone();
                map.insert(kernel, bundled_code(p)?);
            }
        }
        Ok(Arc::new(program))
    }

    fn coarsens(&self) -> bool {
        true
    }

    fn timer_tier(&self) -> TimerTier {
        TimerTier::Event
    }
}

/// A device allocation.
pub struct HipMemory {
    api: &'static Api,
    ctx: Arc<HipCtx>,
    /// The epoch it was made in ([`HipCtx`]): lost once that epoch ends.
    epoch: u64,
    ptr: u64,
    size: usize,
}

impl HipMemory {
    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl DeviceMemory for HipMemory {
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for HipMemory {
    fn drop(&mut self) {
        // Memory of a reset device went with it: its address may be a new allocation's now.
        if self.ptr != 0 && self.ctx.lost(self.epoch).is_none() {
            // SAFETY: allocated by hipMalloc in `alloc`, freed once.
            unsafe {
                let _ = (self.api.free)(self.ptr as Ptr);
            }
        }
    }
}

/// A HIP stream.
pub struct HipStream {
    api: &'static Api,
    ctx: Arc<HipCtx>,
    /// The handle and the epoch it was made in (a stream of a reset device is made again).
    stream: Mutex<(Ptr, u64)>,
}

impl HipStream {
    /// The handle, with the device bound; a stream of an ended epoch is made again.
    fn handle(&self) -> Result<Ptr, DeviceError> {
        self.ctx.bind()?;
        let mut st = self.stream.lock();
        let epoch = self.ctx.epoch();
        if st.1 != epoch {
            let mut s: Ptr = std::ptr::null_mut();
            // SAFETY: out-pointer to a local.
            self.ctx.check("hipStreamCreateWithFlags", unsafe {
                (self.api.stream_create_with_flags)(&mut s, HIP_STREAM_NON_BLOCKING)
            })?;
            *st = (s, epoch);
        }
        Ok(st.0)
    }
}

// SAFETY: HIP streams may be used from any thread.
unsafe impl Send for HipStream {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for HipStream {}

impl Drop for HipStream {
    fn drop(&mut self) {
        let (stream, epoch) = *self.stream.lock();
        if self.ctx.lost(epoch).is_some() {
            return;
        }
        // SAFETY: created in `create_stream` (or `handle`), destroyed once; pending work
        // completes first. A stream of a reset device went with it.
        unsafe {
            let _ = (self.api.stream_synchronize)(stream);
            let _ = (self.api.stream_destroy)(stream);
        }
    }
}

impl StreamImpl for HipStream {
    fn sync(&self) -> Result<(), DeviceError> {
        let h = self.handle()?;
        // SAFETY: a live stream.
        self.ctx.check("hipStreamSynchronize", unsafe {
            (self.api.stream_synchronize)(h)
        })
    }

    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        let h = self.handle()?;
        let mut e: Ptr = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; a live stream.
        unsafe {
            self.ctx
                .check("hipEventCreate", (self.api.event_create)(&mut e))?;
            self.ctx
                .check("hipEventRecord", (self.api.event_record)(e, h))?;
        }
        Ok(Arc::new(HipEvent {
            api: self.api,
            ctx: self.ctx.clone(),
            epoch: self.ctx.epoch(),
            event: e,
        }))
    }

    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError> {
        let e = event.as_any().downcast_ref::<HipEvent>().ok_or_else(|| {
            DeviceError::ForeignObject {
                what: "an event of another backend".into(),
            }
        })?;
        if let Some(kernel) = self.ctx.lost(e.epoch) {
            return Err(DeviceError::Lost { kernel });
        }
        let h = self.handle()?;
        // SAFETY: a live stream and event.
        self.ctx.check("hipStreamWaitEvent", unsafe {
            (self.api.stream_wait_event)(h, e.event, 0)
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A HIP event (timing enabled: `hipEventCreate`'s default).
pub struct HipEvent {
    api: &'static Api,
    ctx: Arc<HipCtx>,
    /// The epoch it was made in.
    epoch: u64,
    event: Ptr,
}

// SAFETY: HIP events may be used from any thread.
unsafe impl Send for HipEvent {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for HipEvent {}

impl Drop for HipEvent {
    fn drop(&mut self) {
        if self.ctx.lost(self.epoch).is_some() {
            return;
        }
        // SAFETY: created in `record`, destroyed once (an event of a reset device went with
        // it).
        unsafe {
            let _ = (self.api.event_destroy)(self.event);
        }
    }
}

impl EventImpl for HipEvent {
    fn is_complete(&self) -> bool {
        // An event of a reset device never completes: it is done with.
        if self.ctx.lost(self.epoch).is_some() {
            return true;
        }
        // SAFETY: a live event.
        unsafe { (self.api.event_query)(self.event) != HIP_ERROR_NOT_READY }
    }

    fn sync(&self) -> Result<(), DeviceError> {
        if let Some(kernel) = self.ctx.lost(self.epoch) {
            return Err(DeviceError::Lost { kernel });
        }
        // SAFETY: a live event.
        self.ctx.check("hipEventSynchronize", unsafe {
            (self.api.event_synchronize)(self.event)
        })
    }

    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration> {
        let e = earlier.as_any().downcast_ref::<HipEvent>()?;
        if self.ctx.lost(self.epoch).is_some() || self.ctx.lost(e.epoch).is_some() {
            return None;
        }
        let mut ms = 0f32;
        // SAFETY: two live events; out-pointer to a local.
        let r = unsafe { (self.api.event_elapsed_time)(&mut ms, e.event, self.event) };
        (r == HIP_SUCCESS && ms >= 0.0).then(|| Duration::from_secs_f64(ms as f64 / 1e3))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A module on a HIP device; each kernel's code object is built at first request.
pub struct HipProgram {
    api: &'static Api,
    ctx: Arc<HipCtx>,
    arch: String,
    module: Arc<VerifiedModule>,
    kernels: Mutex<HashMap<String, Arc<HipKernel>>>,
    /// Checked mode and ub-traps.
    checks: Checks,
    /// Code objects from a bundle, by kernel: taken instead of lowering.
    prebuilt: Mutex<HashMap<String, BundledCode>>,
    /// Kernels lowered by LLVM here (not taken from a bundle).
    lowerings: std::sync::atomic::AtomicU64,
}

/// A kernel's code object from a bundle, with its launch ABI and manifest.
#[derive(Debug)]
pub struct BundledCode {
    /// The AMDGPU code object (ELF).
    pub code: Vec<u8>,
    /// The launch ABI read from the bundled header.
    pub abi: KernelAbi,
    /// The kernel's manifest as bundled.
    pub manifest: KernelManifest,
}

/// A bundle entry's code object checked for loading: an ELF image (a linked AMDGPU code
/// object) whose launch metadata is the ABI header ([`crate::backend::gpu_abi`]) naming an
/// entry symbol. Anything else is refused (`XPU-D009`) before the runtime sees it.
pub fn bundled_code(p: Prebuilt) -> Result<BundledCode, DeviceError> {
    let load = |what: &str| DeviceError::Load {
        message: format!("the code object of kernel `{}` {what}", p.kernel),
    };
    if !p.code.starts_with(b"\x7fELF") {
        return Err(load("is not an ELF image"));
    }
    let meta = p
        .meta
        .as_deref()
        .ok_or_else(|| load("has no launch metadata"))?;
    let abi = crate::backend::gpu_abi::abi_from_header(meta)
        .ok_or_else(|| load("has launch metadata without an xpu-abi header"))?;
    let symbol = abi.symbol.as_bytes();
    if !p.code.windows(symbol.len().max(1)).any(|w| w == symbol) {
        return Err(load(&format!("does not define its entry `{}`", abi.symbol)));
    }
    Ok(BundledCode {
        code: p.code,
        abi,
        manifest: p.manifest,
    })
}

impl HipProgram {
    fn build(&self, name: &str) -> Result<HipKernel, BuildError> {
        let handle = self
            .module
            .kernel(name)
            .ok_or_else(|| Error::new(codes::INPUT, format!("no kernel `{name}` in the module")))?;
        // A bundle's code object is code without checks: taken only when none are asked for.
        let bundled = self
            .prebuilt
            .lock()
            .remove(name)
            .filter(|_| !self.checks.any());
        let (code, abi, manifest) = match bundled {
            Some(b) => (b.code, b.abi, b.manifest),
            None => self.lower(handle)?,
        };
        self.load_code(name, code, abi, manifest)
    }

    /// Lowers kernel `handle` to a linked code object for this processor.
    fn lower(
        &self,
        handle: crate::ir::Handle<Function>,
    ) -> Result<(Vec<u8>, KernelAbi, KernelManifest), BuildError> {
        self.lowerings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let target = Amdgpu::new(&self.arch).ok_or_else(|| {
            Error::unsupported(format!("unknown AMDGPU processor `{}`", self.arch))
        })?;
        let matrix_dist = crate::config::get().matrix_dist.clone()?;
        let matrix_impl = crate::config::get().matrix_impl.clone()?;
        let objs = codeobj::build(
            self.module.module(),
            &[KernelRef::plain(handle)],
            &target,
            &BuildOptions {
                lower: crate::codegen::llvm::Options {
                    checks: self.checks,
                    matrix_dist,
                    matrix_impl,
                    ..Default::default()
                },
                ..BuildOptions::default()
            },
        )
        .map_err(|e| match e {
            codeobj::BuildError::Lower(e) => e,
            codeobj::BuildError::CodeObject(e) => Error::new(e.code(), e.to_string()),
        })?;
        let none = || Error::internal("the build produced no code object");
        let obj = objs.into_iter().next().ok_or_else(none)?;
        let code = match (&obj.code, &obj.note) {
            (Some(c), _) => c.clone(),
            (None, Some(n)) => return Err(Error::new(n.code(), n.to_string()).into()),
            (None, None) => return Err(none().into()),
        };
        let built = obj.kernels.into_iter().next().ok_or_else(none)?;
        Ok((code, built.abi, built.manifest))
    }

    /// Loads `code` (whose entry and report global `abi` names) as kernel `name`.
    fn load_code(
        &self,
        name: &str,
        code: Vec<u8>,
        abi: KernelAbi,
        manifest: KernelManifest,
    ) -> Result<HipKernel, BuildError> {
        let loaded = HipLoaded::load(&self.ctx, &code, &abi)?;
        let mut manifest = manifest;
        manifest.kernel = name.to_string();
        crate::hal::profile::fill_manifest(&self.arch, &mut manifest);
        Ok(HipKernel {
            api: self.api,
            ctx: self.ctx.clone(),
            code,
            loaded: Mutex::new(loaded),
            abi,
            manifest,
            debug_lock: Mutex::new(()),
        })
    }
}

/// A kernel's code object loaded in one epoch of its device.
struct HipLoaded {
    module: Ptr,
    func: Ptr,
    /// The checks' report global, where the code has one.
    report: Option<Ptr>,
    /// The `print`/`assert` buffer global, where the code has one.
    debug: Option<Ptr>,
    epoch: u64,
}

impl HipLoaded {
    /// Loads `code` (whose entry and report global `abi` names) in the device's current epoch.
    fn load(ctx: &HipCtx, code: &[u8], abi: &KernelAbi) -> Result<HipLoaded, DeviceError> {
        let a = ctx.api;
        ctx.bind()?;
        let epoch = ctx.epoch();
        let load_err = |message: String| DeviceError::Load { message };
        let mut module: Ptr = std::ptr::null_mut();
        let mut func: Ptr = std::ptr::null_mut();
        let sym = CString::new(abi.symbol.clone()).map_err(|e| load_err(e.to_string()))?;
        // SAFETY: `code` is a complete code object; out-pointers are locals.
        unsafe {
            ctx.check(
                "hipModuleLoadData",
                (a.module_load_data)(&mut module, code.as_ptr() as *const c_void),
            )?;
            if let Err(e) = ctx.check(
                "hipModuleGetFunction",
                (a.module_get_function)(&mut func, module, sym.as_ptr()),
            ) {
                let _ = (a.module_unload)(module);
                return Err(e);
            }
        }
        // The checks' report global, where the code writes one.
        let report = if abi.report {
            let mut ptr: Ptr = std::ptr::null_mut();
            let mut bytes = 0usize;
            let rs = CString::new(crate::codegen::llvm::REPORT_SYMBOL)
                .map_err(|e| load_err(e.to_string()))?;
            // SAFETY: a live module; out-pointers are locals.
            let r = unsafe { (a.module_get_global)(&mut ptr, &mut bytes, module, rs.as_ptr()) };
            if r != HIP_SUCCESS || bytes < REPORT_WORDS * 4 {
                // SAFETY: loaded above, unloaded once.
                unsafe {
                    let _ = (a.module_unload)(module);
                }
                return Err(load_err(format!(
                    "hipModuleGetGlobal({}): error {r}, {bytes} bytes",
                    crate::codegen::llvm::REPORT_SYMBOL
                )));
            }
            Some(ptr)
        } else {
            None
        };
        // The `print`/`assert` buffer, where the code writes one.
        let debug = if abi.debug {
            let mut ptr: Ptr = std::ptr::null_mut();
            let mut bytes = 0usize;
            let ds = CString::new(crate::codegen::llvm::DEBUG_SYMBOL)
                .map_err(|e| load_err(e.to_string()))?;
            // SAFETY: a live module; out-pointers are locals.
            let r = unsafe { (a.module_get_global)(&mut ptr, &mut bytes, module, ds.as_ptr()) };
            if r != HIP_SUCCESS || bytes < crate::hal::debug::BUFFER_WORDS as usize * 4 {
                // SAFETY: loaded above, unloaded once.
                unsafe {
                    let _ = (a.module_unload)(module);
                }
                return Err(load_err(format!(
                    "hipModuleGetGlobal({}): error {r}, {bytes} bytes",
                    crate::codegen::llvm::DEBUG_SYMBOL
                )));
            }
            Some(ptr)
        } else {
            None
        };
        Ok(HipLoaded {
            module,
            func,
            report,
            debug,
            epoch,
        })
    }
}

impl ProgramImpl for HipProgram {
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        if let Some(k) = self.kernels.lock().get(name) {
            return Ok(k.clone());
        }
        let limit = super::common::PRIVATE_BYTES_GPU;
        super::common::check_private(name, &self.module, kernel, limit, "the HIP backend")?;
        let k = Arc::new(self.build(name).map_err(|e| e.launch(name, Backend::Hip))?);
        self.kernels.lock().insert(name.to_string(), k.clone());
        Ok(k)
    }

    fn manifest(&self, name: &str) -> Option<KernelManifest> {
        let f = self.module.kernel(name)?;
        self.kernel(name, self.module.function(f))
            .ok()
            .map(|k| k.manifest().clone())
    }

    fn lowerings(&self) -> Option<u64> {
        Some(self.lowerings.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// One loaded kernel.
pub struct HipKernel {
    api: &'static Api,
    ctx: Arc<HipCtx>,
    /// The code object, kept to load it again after a device reset.
    code: Vec<u8>,
    loaded: Mutex<HipLoaded>,
    abi: KernelAbi,
    manifest: KernelManifest,
    /// Held by a launch of a kernel with `print` or `assert` from clearing the debug buffer
    /// until it has read it back (the buffer is the module's, one for every launch).
    debug_lock: Mutex<()>,
}

// SAFETY: module and function handles may be used from any thread.
unsafe impl Send for HipKernel {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for HipKernel {}

impl Drop for HipKernel {
    fn drop(&mut self) {
        let l = self.loaded.lock();
        // A module of a reset device went with it.
        if self.ctx.lost(l.epoch).is_none() {
            // SAFETY: loaded in `HipLoaded::load`, unloaded once.
            unsafe {
                let _ = (self.api.module_unload)(l.module);
            }
        }
    }
}

impl KernelImpl for HipKernel {
    fn manifest(&self) -> &KernelManifest {
        &self.manifest
    }

    fn launch(
        &self,
        stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        let name = &self.manifest.kernel;
        let dev_err = |message: String| LaunchError::Device {
            kernel: name.clone(),
            message,
        };
        // A device error: a fault (the device is reset) or a plain failure.
        let fail = |e: DeviceError| match e {
            DeviceError::DeviceFault { kernel, message } => {
                LaunchError::DeviceFault { kernel, message }
            }
            e => dev_err(e.to_string()),
        };
        let s = stream_of(stream).map_err(|e| dev_err(e.to_string()))?;
        // Buffers of a reset device cannot be used.
        for (i, a) in args.iter().enumerate() {
            if let DeviceArg::Buffer(b) = a {
                if let Some(m) = b.memory.as_any().downcast_ref::<HipMemory>() {
                    if let Some(fault) = self.ctx.lost(m.epoch) {
                        return Err(LaunchError::LostBuffer {
                            kernel: name.clone(),
                            param: format!("#{i}"),
                            fault,
                        });
                    }
                }
            }
        }
        let mut slots = crate::backend::gpu_args::pack(&self.abi, args, |m| {
            m.downcast_ref::<HipMemory>().map(|m| m.ptr)
        })?;
        let mut ptrs: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s.as_mut_ptr() as *mut c_void)
            .collect();
        let stream_h = s.handle().map_err(fail)?;
        let mut loaded = self.loaded.lock();
        // A device reset after a fault: the code object is loaded in it again.
        if loaded.epoch != self.ctx.epoch() {
            *loaded = HipLoaded::load(&self.ctx, &self.code, &self.abi).map_err(fail)?;
        }
        let (func, report, debug) = (loaded.func, loaded.report, loaded.debug);
        drop(loaded);
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        let a = self.api;
        let ctx = &self.ctx;
        static ZERO: [u32; REPORT_WORDS] = [0; REPORT_WORDS];
        let _debug = debug.map(|_| self.debug_lock.lock());
        // SAFETY: the parameters were packed per the kernel's ABI from checked arguments;
        // buffer memory is kept alive by the bindings the caller holds until the stream syncs.
        // The report global holds REPORT_WORDS u32s; `ZERO` is static.
        unsafe {
            if let Some(report) = report {
                ctx.check(
                    "hipMemcpyHtoDAsync (the report)",
                    (a.memcpy_htod_async)(
                        report,
                        ZERO.as_ptr() as *const c_void,
                        REPORT_WORDS * 4,
                        stream_h,
                    ),
                )
                .map_err(fail)?;
            }
            // The debug buffer's cursors (its first HEADER_WORDS words, fewer than ZERO's).
            if let Some(debug) = debug {
                ctx.check(
                    "hipMemcpyHtoDAsync (the debug buffer)",
                    (a.memcpy_htod_async)(
                        debug,
                        ZERO.as_ptr() as *const c_void,
                        crate::hal::debug::HEADER_WORDS as usize * 4,
                        stream_h,
                    ),
                )
                .map_err(fail)?;
            }
            ctx.check(
                "hipModuleLaunchKernel",
                (a.module_launch_kernel)(
                    func,
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    launch.shared_bytes,
                    stream_h,
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
            )
            .map_err(fail)?;
        }
        // A fault seen from now on is this kernel's (or one launched after it).
        *ctx.last_kernel.lock() = name.clone();
        // `print` and `assert`: the launch waits for the kernel and reads the records back; the
        // lines go to the sink, a failed assert is the launch's refusal (`XPU-L035`) unless a
        // check's (below) is.
        let mut printed = Ok(());
        if let Some(debug) = debug {
            let words = crate::hal::debug::read_back(|first, dst: &mut [u32]| {
                // SAFETY: a live stream; `first + dst.len()` words lie inside the global
                // (`read_back` clamps them to its regions); `dst` outlives the copy, which the
                // synchronisation completes.
                unsafe {
                    ctx.check(
                        "hipMemcpyDtoHAsync (the debug buffer)",
                        (a.memcpy_dtoh_async)(
                            dst.as_mut_ptr() as Ptr,
                            (debug as *mut u8).add(first as usize * 4) as Ptr,
                            dst.len() * 4,
                            stream_h,
                        ),
                    )
                    .map_err(fail)?;
                    ctx.check("hipStreamSynchronize", (a.stream_synchronize)(stream_h))
                        .map_err(fail)
                }
            })?;
            printed = crate::hal::debug::finish(
                name,
                &words,
                &self.abi.debug_sites,
                launch.grid,
                launch.block,
            );
        }
        // Checks: the launch waits for the kernel and reads its report (docs/checked-mode.md).
        if let Some(report) = report {
            let mut words = [0u32; REPORT_WORDS];
            // SAFETY: a live stream; `words` has the global's size and outlives the sync.
            unsafe {
                ctx.check(
                    "hipMemcpyDtoHAsync (the report)",
                    (a.memcpy_dtoh_async)(
                        words.as_mut_ptr() as Ptr,
                        report,
                        REPORT_WORDS * 4,
                        stream_h,
                    ),
                )
                .map_err(fail)?;
                ctx.check("hipStreamSynchronize", (a.stream_synchronize)(stream_h))
                    .map_err(fail)?;
            }
            if let Some(e) = report_error(name, Report::decode(&words), &self.abi.sites) {
                return Err(e);
            }
        }
        printed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_open_fails_cleanly_without_a_runtime() {
        if probe().is_err() {
            match HipDevice::open(0) {
                Err(DeviceError::Unavailable { backend, .. }) => assert_eq!(backend, Backend::Hip),
                Err(e) => panic!("unexpected error {e}"),
                Ok(_) => panic!("opened a device that probe denied"),
            }
        }
    }

    #[test]
    fn sticky_hip_errors_are_the_faults_that_reset_the_device() {
        // hipErrorIllegalAddress, hipErrorLaunchTimeOut, hipErrorAssert, hipErrorLaunchFailure.
        for e in [700, 702, 710, 719] {
            assert!(is_sticky(e), "{e}");
        }
        // Success, out of memory, invalid value, not ready, out of resources.
        for e in [0, 2, 1, 600, 701] {
            assert!(!is_sticky(e), "{e}");
        }
    }

    #[test]
    fn arch_is_found_in_a_properties_block() {
        let mut block = vec![0u8; 1024];
        block[10..29].copy_from_slice(b"AMD Instinct MI210\0");
        block[400..421].copy_from_slice(b"gfx90a:sramecc+:xnack");
        assert_eq!(arch_from_properties(&block).as_deref(), Some("gfx90a"));
        assert_eq!(arch_from_properties(&[0u8; 64]), None);
    }
}
