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

use crate::backend::common;
use crate::codegen::checks::{Checks, Report, REPORT_WORDS};
use crate::codegen::llvm::amdgpu::Amdgpu;
use crate::codegen::llvm::codeobj::{self, BuildOptions};
use crate::codegen::llvm::{KernelAbi, KernelRef};
use crate::hal::checked::{report_error, ProgramOptions};
use crate::hal::facts::{DeviceFacts, FeatureSupport, Support};
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, EventImpl, Init, KernelImpl,
    ProgramImpl, ReadTicket, StreamImpl, TimerTier,
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
    ordinal: i32,
    facts: DeviceFacts,
    arch: String,
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
            ordinal,
            facts,
            arch,
        })
    }

    /// The processor kernels are built for (`gfx90a`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    fn bind(&self) -> Result<(), DeviceError> {
        // SAFETY: a device ordinal that opened.
        self.api.check("hipSetDevice", unsafe {
            (self.api.set_device)(self.ordinal)
        })
    }

    fn memory<'m>(&self, mem: &'m Arc<dyn DeviceMemory>) -> Result<&'m HipMemory, DeviceError> {
        mem.as_any()
            .downcast_ref::<HipMemory>()
            .ok_or_else(|| DeviceError::ForeignObject {
                what: "memory of another backend".into(),
            })
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
            if r != HIP_SUCCESS {
                return Err(DeviceError::OutOfMemory {
                    bytes: bytes as u64,
                    reason: format!("hipMalloc: error {r}"),
                });
            }
            if init == Init::Poison {
                // SAFETY: `p` holds `bytes` bytes.
                self.api
                    .check("hipMemset", unsafe { (self.api.memset)(p, 0xFF, bytes) })?;
            }
        }
        Ok(Arc::new(HipMemory {
            api: self.api,
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
        let s = stream_of(stream)?;
        self.bind()?;
        // SAFETY: the range was checked; the stream is synchronised before returning, so
        // `src` may be reused at once (pageable memory is staged by the runtime anyway).
        unsafe {
            self.api.check(
                "hipMemcpyHtoDAsync",
                (self.api.memcpy_htod_async)(
                    (m.ptr + offset as u64) as Ptr,
                    src.as_ptr() as *const c_void,
                    src.len(),
                    s.stream,
                ),
            )?;
            self.api.check(
                "hipStreamSynchronize",
                (self.api.stream_synchronize)(s.stream),
            )
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
            self.bind()?;
            // SAFETY: the range was checked; `data` outlives the copy (the stream is
            // synchronised before it is handed out).
            unsafe {
                self.api.check(
                    "hipMemcpyDtoHAsync",
                    (self.api.memcpy_dtoh_async)(
                        data.as_mut_ptr() as Ptr,
                        (m.ptr + offset as u64) as Ptr,
                        len,
                        s.stream,
                    ),
                )?;
                self.api.check(
                    "hipStreamSynchronize",
                    (self.api.stream_synchronize)(s.stream),
                )?;
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
        let s = stream_of(stream)?;
        self.bind()?;
        // SAFETY: both ranges were checked.
        self.api.check("hipMemcpyDtoDAsync", unsafe {
            (self.api.memcpy_dtod_async)(
                (b.ptr + dst_offset as u64) as Ptr,
                (a.ptr + src_offset as u64) as Ptr,
                len,
                s.stream,
            )
        })
    }

    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        self.bind()?;
        let mut s: Ptr = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        self.api.check("hipStreamCreateWithFlags", unsafe {
            (self.api.stream_create_with_flags)(&mut s, HIP_STREAM_NON_BLOCKING)
        })?;
        Ok(Arc::new(HipStream {
            api: self.api,
            stream: s,
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
        Ok(Arc::new(HipProgram {
            api: self.api,
            ordinal: self.ordinal,
            arch: self.arch.clone(),
            module: module.clone(),
            kernels: Mutex::new(HashMap::new()),
            checks: options.checks(),
        }))
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
        if self.ptr != 0 {
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
    stream: Ptr,
}

// SAFETY: HIP streams may be used from any thread.
unsafe impl Send for HipStream {}
unsafe impl Sync for HipStream {}

impl Drop for HipStream {
    fn drop(&mut self) {
        // SAFETY: created in `create_stream`; pending work completes first.
        unsafe {
            let _ = (self.api.stream_synchronize)(self.stream);
            let _ = (self.api.stream_destroy)(self.stream);
        }
    }
}

impl StreamImpl for HipStream {
    fn sync(&self) -> Result<(), DeviceError> {
        // SAFETY: a live stream.
        self.api.check("hipStreamSynchronize", unsafe {
            (self.api.stream_synchronize)(self.stream)
        })
    }

    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        let mut e: Ptr = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; a live stream.
        unsafe {
            self.api
                .check("hipEventCreate", (self.api.event_create)(&mut e))?;
            self.api
                .check("hipEventRecord", (self.api.event_record)(e, self.stream))?;
        }
        Ok(Arc::new(HipEvent {
            api: self.api,
            event: e,
        }))
    }

    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError> {
        let e = event.as_any().downcast_ref::<HipEvent>().ok_or_else(|| {
            DeviceError::ForeignObject {
                what: "an event of another backend".into(),
            }
        })?;
        // SAFETY: a live stream and event.
        self.api.check("hipStreamWaitEvent", unsafe {
            (self.api.stream_wait_event)(self.stream, e.event, 0)
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A HIP event (timing enabled: `hipEventCreate`'s default).
pub struct HipEvent {
    api: &'static Api,
    event: Ptr,
}

// SAFETY: HIP events may be used from any thread.
unsafe impl Send for HipEvent {}
unsafe impl Sync for HipEvent {}

impl Drop for HipEvent {
    fn drop(&mut self) {
        // SAFETY: created in `record`, destroyed once.
        unsafe {
            let _ = (self.api.event_destroy)(self.event);
        }
    }
}

impl EventImpl for HipEvent {
    fn is_complete(&self) -> bool {
        // SAFETY: a live event.
        unsafe { (self.api.event_query)(self.event) != HIP_ERROR_NOT_READY }
    }

    fn sync(&self) -> Result<(), DeviceError> {
        // SAFETY: a live event.
        self.api.check("hipEventSynchronize", unsafe {
            (self.api.event_synchronize)(self.event)
        })
    }

    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration> {
        let e = earlier.as_any().downcast_ref::<HipEvent>()?;
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
    ordinal: i32,
    arch: String,
    module: Arc<VerifiedModule>,
    kernels: Mutex<HashMap<String, Arc<HipKernel>>>,
    /// Checked mode and ub-traps.
    checks: Checks,
}

impl HipProgram {
    fn build(&self, name: &str) -> Result<HipKernel, String> {
        let handle = self
            .module
            .kernel(name)
            .ok_or_else(|| format!("no kernel `{name}` in the module"))?;
        let target = Amdgpu::new(&self.arch).ok_or("unknown processor")?;
        let matrix_dist = crate::config::get()
            .matrix_dist
            .clone()
            .map_err(|e| e.to_string())?;
        let matrix_impl = crate::config::get()
            .matrix_impl
            .clone()
            .map_err(|e| e.to_string())?;
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
        .map_err(|e| e.to_string())?;
        let obj = objs.into_iter().next().ok_or("no code object")?;
        let code = match (&obj.code, &obj.note) {
            (Some(c), _) => c.clone(),
            (None, Some(n)) => return Err(n.to_string()),
            (None, None) => return Err("no code object".into()),
        };
        let built = obj.kernels.into_iter().next().ok_or("no kernel built")?;
        let a = self.api;
        let mut module: Ptr = std::ptr::null_mut();
        let mut func: Ptr = std::ptr::null_mut();
        let sym = CString::new(built.abi.symbol.clone()).map_err(|e| e.to_string())?;
        // SAFETY: `code` is a complete code object; out-pointers are locals.
        unsafe {
            a.check("hipSetDevice", (a.set_device)(self.ordinal))
                .map_err(|e| e.to_string())?;
            a.check(
                "hipModuleLoadData",
                (a.module_load_data)(&mut module, code.as_ptr() as *const c_void),
            )
            .map_err(|e| e.to_string())?;
            if let Err(e) = a.check(
                "hipModuleGetFunction",
                (a.module_get_function)(&mut func, module, sym.as_ptr()),
            ) {
                let _ = (a.module_unload)(module);
                return Err(e.to_string());
            }
        }
        // The checks' report global, where the code writes one.
        let report = if built.abi.report {
            let mut ptr: Ptr = std::ptr::null_mut();
            let mut bytes = 0usize;
            let rs =
                CString::new(crate::codegen::llvm::REPORT_SYMBOL).map_err(|e| e.to_string())?;
            // SAFETY: a live module; out-pointers are locals.
            let r = unsafe { (a.module_get_global)(&mut ptr, &mut bytes, module, rs.as_ptr()) };
            if r != HIP_SUCCESS || bytes < REPORT_WORDS * 4 {
                // SAFETY: loaded above, unloaded once.
                unsafe {
                    let _ = (a.module_unload)(module);
                }
                return Err(format!(
                    "hipModuleGetGlobal({}): error {r}, {bytes} bytes",
                    crate::codegen::llvm::REPORT_SYMBOL
                ));
            }
            Some(ptr)
        } else {
            None
        };
        let mut manifest = built.manifest;
        manifest.kernel = name.to_string();
        crate::hal::profile::fill_manifest(&self.arch, &mut manifest);
        Ok(HipKernel {
            api: a,
            ordinal: self.ordinal,
            module,
            func,
            abi: built.abi,
            manifest,
            report,
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
        let k = Arc::new(self.build(name).map_err(|reason| LaunchError::NoCode {
            kernel: name.to_string(),
            backend: Backend::Hip,
            reason,
            by_device: false,
        })?);
        self.kernels.lock().insert(name.to_string(), k.clone());
        Ok(k)
    }

    fn manifest(&self, name: &str) -> Option<KernelManifest> {
        let f = self.module.kernel(name)?;
        self.kernel(name, self.module.function(f))
            .ok()
            .map(|k| k.manifest().clone())
    }
}

/// One loaded kernel.
pub struct HipKernel {
    api: &'static Api,
    ordinal: i32,
    module: Ptr,
    func: Ptr,
    abi: KernelAbi,
    manifest: KernelManifest,
    /// The checks' report global, where the code has one.
    report: Option<Ptr>,
}

// SAFETY: module and function handles may be used from any thread.
unsafe impl Send for HipKernel {}
unsafe impl Sync for HipKernel {}

impl Drop for HipKernel {
    fn drop(&mut self) {
        // SAFETY: loaded in `HipProgram::build`, unloaded once.
        unsafe {
            let _ = (self.api.module_unload)(self.module);
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
        let s = stream_of(stream).map_err(|e| dev_err(e.to_string()))?;
        let mut slots = crate::backend::gpu_args::pack(&self.abi, args, |m| {
            m.downcast_ref::<HipMemory>().map(|m| m.ptr)
        })?;
        let mut ptrs: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s.as_mut_ptr() as *mut c_void)
            .collect();
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        let a = self.api;
        static ZERO: [u32; REPORT_WORDS] = [0; REPORT_WORDS];
        // SAFETY: the parameters were packed per the kernel's ABI from checked arguments;
        // buffer memory is kept alive by the bindings the caller holds until the stream syncs.
        // The report global holds REPORT_WORDS u32s; `ZERO` is static.
        unsafe {
            a.check("hipSetDevice", (a.set_device)(self.ordinal))
                .map_err(|e| dev_err(e.to_string()))?;
            if let Some(report) = self.report {
                a.check(
                    "hipMemcpyHtoDAsync (the report)",
                    (a.memcpy_htod_async)(
                        report,
                        ZERO.as_ptr() as *const c_void,
                        REPORT_WORDS * 4,
                        s.stream,
                    ),
                )
                .map_err(|e| dev_err(e.to_string()))?;
            }
            a.check(
                "hipModuleLaunchKernel",
                (a.module_launch_kernel)(
                    self.func,
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    launch.shared_bytes,
                    s.stream,
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
            )
            .map_err(|e| dev_err(e.to_string()))?;
        }
        // Checks: the launch waits for the kernel and reads its report (docs/checked-mode.md).
        if let Some(report) = self.report {
            let mut words = [0u32; REPORT_WORDS];
            // SAFETY: a live stream; `words` has the global's size and outlives the sync.
            unsafe {
                a.check(
                    "hipMemcpyDtoHAsync (the report)",
                    (a.memcpy_dtoh_async)(
                        words.as_mut_ptr() as Ptr,
                        report,
                        REPORT_WORDS * 4,
                        s.stream,
                    ),
                )
                .map_err(|e| dev_err(e.to_string()))?;
                a.check("hipStreamSynchronize", (a.stream_synchronize)(s.stream))
                    .map_err(|e| dev_err(e.to_string()))?;
            }
            if let Some(e) = report_error(name, Report::decode(&words), &self.abi.sites) {
                return Err(e);
            }
        }
        Ok(())
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
    fn arch_is_found_in_a_properties_block() {
        let mut block = vec![0u8; 1024];
        block[10..29].copy_from_slice(b"AMD Instinct MI210\0");
        block[400..421].copy_from_slice(b"gfx90a:sramecc+:xnack");
        assert_eq!(arch_from_properties(&block).as_deref(), Some("gfx90a"));
        assert_eq!(arch_from_properties(&[0u8; 64]), None);
    }
}
