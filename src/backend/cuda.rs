//! The CUDA backend (contract §2.4, §4, §5): NVIDIA GPUs through the driver API, loaded at
//! run time with `cudarc` (feature `dynamic-loading`), running PTX from the shared LLVM walk
//! ([`super::llvm`]) and its NVPTX target.
//!
//! - **No driver, no CUDA**: `cudarc` panics when `libcuda` is missing, so [`probe`] dlopens
//!   it first; without it (or without a device) the backend is simply unavailable.
//! - **Memory** is plain `cuMemAlloc` (never managed memory); copies are the `*Async` forms
//!   on the caller's stream. Fresh memory is poisoned with 0xFF when asked.
//! - **Device code** is produced lazily per kernel at first use: lowered to PTX for the
//!   device's compute capability, cached in memory and on disk ([`super::cache`]) under the
//!   device key (architecture, driver version, LLVM and lowering version) and a hash of the
//!   module's IR, then loaded with `cuModuleLoadData` (the driver JIT-compiles PTX).
//!   [`CudaProgram::first_use`] reports how long each first use took and where its PTX came
//!   from (lowered, memory, disk).
//! - **Manifests** come from `cuFuncGetAttribute`: registers, local memory (stack plus
//!   spills), static shared memory; spill bytes from `ptxas -v` when it is installed (run once
//!   per kernel and cached beside the PTX), absent otherwise.
//! - **Launches** pack parameters per [`super::llvm::KernelAbi`]; a launch needing more than
//!   the default 48 KB of shared memory sets `MAX_DYNAMIC_SHARED_SIZE_BYTES` (the opt-in).
//! - **Timing**: events with timing enabled give the Event tier of `KernelTimer`.

use crate::backend::cache::{hash_hex, CodeCache, DeviceKey, Hit};
use crate::backend::common;
use crate::codegen::llvm::target::LoweringTarget;
use crate::codegen::llvm::{self, nvptx::Nvptx, KernelAbi, ParamAbi};
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, EventImpl, Init, KernelImpl,
    ProgramImpl, ReadTicket, StreamImpl, TimerTier,
};
use crate::ir::{Function, VerifiedModule};
use cudarc::driver::{result, sys};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn driver_err(what: &str, e: result::DriverError) -> DeviceError {
    DeviceError::Driver {
        message: format!("{what}: {e:?}"),
    }
}

/// Whether a CUDA driver and at least one device are present. Never panics: `libcuda` is
/// dlopened before any `cudarc` call touches it.
pub fn probe() -> Result<(), String> {
    // SAFETY: only attempts to dlopen the candidate library names.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda) on this machine".into());
    }
    result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let n = result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
    if n < 1 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(())
}

/// The driver's version as `major * 1000 + minor * 10` (13000 for CUDA 13.0).
pub fn driver_version() -> Option<i32> {
    let mut v = 0;
    // SAFETY: called only after `probe` succeeded (the library is loaded); writes one int.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

/// A retained primary context, made current on each thread before driver calls.
struct Ctx {
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
}

// SAFETY: a CUDA context handle may be used from any thread once made current there, which
// `bind` does before every driver call.
unsafe impl Send for Ctx {}
unsafe impl Sync for Ctx {}

impl Ctx {
    fn bind(&self) -> Result<(), DeviceError> {
        // SAFETY: the context was retained in `CudaDevice::open` and lives as long as self.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| driver_err("cuCtxSetCurrent", e))
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: releases the retain taken in `CudaDevice::open`.
        unsafe {
            let _ = result::primary_ctx::release(self.dev);
        }
    }
}

/// One CUDA device.
pub struct CudaDevice {
    ctx: Arc<Ctx>,
    facts: DeviceFacts,
    /// The compute capability, `major * 10 + minor`.
    arch: u32,
    key: DeviceKey,
    cache: Arc<CodeCache>,
}

impl CudaDevice {
    /// Opens device `ordinal` with the default code cache directory.
    pub fn open(ordinal: usize) -> Result<CudaDevice, DeviceError> {
        Self::open_with_cache(ordinal, CodeCache::new(CodeCache::default_dir()))
    }

    /// Opens device `ordinal`, caching device code in `cache`.
    pub fn open_with_cache(ordinal: usize, cache: CodeCache) -> Result<CudaDevice, DeviceError> {
        probe().map_err(|reason| DeviceError::Unavailable {
            backend: Backend::Cuda,
            reason,
        })?;
        let dev = result::device::get(ordinal as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
        // SAFETY: `dev` is a valid device; the retain is released by `Ctx::drop`.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| driver_err("cuDevicePrimaryCtxRetain", e))?;
        let ctx = Arc::new(Ctx { ctx, dev });
        ctx.bind()?;
        let attr = |a: sys::CUdevice_attribute| -> Option<i64> {
            // SAFETY: `dev` is valid; the attribute is one the driver defines.
            unsafe { result::device::get_attribute(dev, a) }
                .ok()
                .map(|v| v as i64)
        };
        use sys::CUdevice_attribute as A;
        let u32a = |a| attr(a).and_then(|v| u32::try_from(v).ok());
        let u64a = |a| attr(a).and_then(|v| u64::try_from(v).ok());
        let major = u32a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).unwrap_or(0);
        let minor = u32a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).unwrap_or(0);
        let arch = major * 10 + minor;
        let driver = driver_version();
        let dims = |x, y, z| Some([u32a(x)?, u32a(y)?, u32a(z)?]);
        let uuid = result::device::get_uuid(dev).ok().map(|u| {
            u.bytes
                .iter()
                .map(|b| format!("{:02x}", *b as u8))
                .collect::<String>()
        });
        // SAFETY: `dev` is valid.
        let total = unsafe { result::device::total_mem(dev) }
            .ok()
            .map(|v| v as u64);
        let facts = DeviceFacts {
            backend: Some(Backend::Cuda),
            name: result::device::get_name(dev).ok(),
            vendor: Some("NVIDIA".into()),
            driver_version: driver.map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
            uuid,
            multiprocessors: u32a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            simds_per_multiprocessor: None,
            wave_width: u32a(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
            supported_wave_widths: Some(vec![32]),
            max_threads_per_block: u32a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            max_block_dims: dims(
                A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
            ),
            max_grid_dims: dims(
                A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
            ),
            shared_bytes_per_block: u64a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            shared_bytes_per_block_optin: u64a(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ),
            shared_bytes_per_multiprocessor: u64a(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            ),
            registers_per_multiprocessor: u32a(
                A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
            ),
            registers_per_block: u32a(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
            max_threads_per_multiprocessor: u32a(
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            ),
            max_blocks_per_multiprocessor: u32a(
                A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
            ),
            global_memory_bytes: total,
            integrated: attr(A::CU_DEVICE_ATTRIBUTE_INTEGRATED).map(|v| v != 0),
            clock_khz: u32a(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            buffer_offset_alignment: None,
            int64_atomics: Some(true),
        };
        let key = DeviceKey {
            arch: format!("cuda-{}", Nvptx::new(arch).cpu()),
            driver: driver.map_or("unknown".into(), |v| v.to_string()),
            compiler: compiler_id(),
        };
        Ok(CudaDevice {
            ctx,
            facts,
            arch,
            key,
            cache: Arc::new(cache),
        })
    }

    /// `module` on this device, as the concrete program (for first-use reports).
    pub fn load_program(&self, module: &Arc<VerifiedModule>) -> Arc<CudaProgram> {
        Arc::new(CudaProgram::new(self, module.clone()))
    }

    /// The compute capability as `major * 10 + minor`.
    pub fn arch(&self) -> u32 {
        self.arch
    }

    pub fn device_key(&self) -> &DeviceKey {
        &self.key
    }

    pub fn code_cache(&self) -> &Arc<CodeCache> {
        &self.cache
    }

    fn memory<'m>(&self, mem: &'m Arc<dyn DeviceMemory>) -> Result<&'m CudaMemory, DeviceError> {
        mem.as_any()
            .downcast_ref::<CudaMemory>()
            .ok_or_else(|| DeviceError::ForeignObject {
                what: "memory".into(),
            })
    }
}

/// The compiler part of a device key: LLVM's version, the lowering's version, this crate's,
/// and a hash of the lowering's own source, so that any change to the walk or the NVPTX
/// target invalidates cached PTX even when nobody bumps a version number.
pub fn compiler_id() -> String {
    static SOURCES: [&str; 10] = [
        include_str!("../codegen/llvm/mod.rs"),
        include_str!("../codegen/llvm/stmt.rs"),
        include_str!("../codegen/llvm/memory.rs"),
        include_str!("../codegen/llvm/expr.rs"),
        include_str!("../codegen/llvm/atomic.rs"),
        include_str!("../codegen/llvm/wave.rs"),
        include_str!("../codegen/llvm/matrix.rs"),
        include_str!("../codegen/llvm/math.rs"),
        include_str!("../codegen/llvm/nvptx.rs"),
        include_str!("../codegen/llvm/target.rs"),
    ];
    let parts: Vec<&[u8]> = SOURCES.iter().map(|s| s.as_bytes()).collect();
    let h = hash_hex(&parts);
    format!(
        "llvm19-l{}-xpu{}-{}",
        llvm::LOWERING_VERSION,
        env!("CARGO_PKG_VERSION"),
        &h[..12]
    )
}

fn stream_of(s: &dyn StreamImpl) -> Result<&CudaStream, DeviceError> {
    common::downcast(s.as_any(), "the stream")
}

fn check_range(mem: &CudaMemory, offset: usize, len: usize) -> Result<(), DeviceError> {
    common::check_range("an access", offset, len, mem.size)
}

impl DeviceImpl for CudaDevice {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }

    fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    fn alloc(&self, bytes: usize, init: Init) -> Result<Arc<dyn DeviceMemory>, DeviceError> {
        self.ctx.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            // SAFETY: a plain device allocation of `bytes`, freed in `CudaMemory::drop`.
            let p =
                unsafe { result::malloc_sync(bytes) }.map_err(|e| DeviceError::OutOfMemory {
                    bytes: bytes as u64,
                    reason: format!("{e:?}"),
                })?;
            if init == Init::Poison {
                // SAFETY: `p` holds `bytes` bytes.
                unsafe { result::memset_d8_sync(p, 0xFF, bytes) }
                    .map_err(|e| driver_err("cuMemsetD8", e))?;
            }
            p
        };
        Ok(Arc::new(CudaMemory {
            ctx: self.ctx.clone(),
            ptr,
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
        self.ctx.bind()?;
        // SAFETY: the range was checked; from pageable memory the call returns once `src`
        // is staged, so the caller may reuse it.
        unsafe { result::memcpy_htod_async(m.ptr + offset as u64, src, s.stream) }
            .map_err(|e| driver_err("cuMemcpyHtoDAsync", e))
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
            self.ctx.bind()?;
            // SAFETY: the range was checked; `data` outlives the copy because a copy to
            // pageable memory returns only once it has completed, and we sync the stream
            // before handing the bytes out regardless.
            unsafe { result::memcpy_dtoh_async(&mut data, m.ptr + offset as u64, s.stream) }
                .map_err(|e| driver_err("cuMemcpyDtoHAsync", e))?;
            // SAFETY: a valid stream of this context.
            unsafe { result::stream::synchronize(s.stream) }
                .map_err(|e| driver_err("cuStreamSynchronize", e))?;
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
        self.ctx.bind()?;
        // SAFETY: both ranges were checked.
        unsafe {
            result::memcpy_dtod_async(
                b.ptr + dst_offset as u64,
                a.ptr + src_offset as u64,
                len,
                s.stream,
            )
        }
        .map_err(|e| driver_err("cuMemcpyDtoDAsync", e))
    }

    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        self.ctx.bind()?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| driver_err("cuStreamCreate", e))?;
        Ok(Arc::new(CudaStream {
            ctx: self.ctx.clone(),
            stream,
        }))
    }

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        Ok(self.load_program(module))
    }

    fn coarsens(&self) -> bool {
        true
    }

    fn timer_tier(&self) -> TimerTier {
        TimerTier::Event
    }
}

/// A device allocation.
pub struct CudaMemory {
    ctx: Arc<Ctx>,
    ptr: sys::CUdeviceptr,
    size: usize,
}

impl CudaMemory {
    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl DeviceMemory for CudaMemory {
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaMemory {
    fn drop(&mut self) {
        if self.ptr != 0 && self.ctx.bind().is_ok() {
            // SAFETY: allocated by `alloc` and freed once, here. cuMemFree synchronises with
            // work still using the allocation.
            unsafe {
                let _ = result::free_sync(self.ptr);
            }
        }
    }
}

/// A CUDA stream.
pub struct CudaStream {
    ctx: Arc<Ctx>,
    stream: sys::CUstream,
}

// SAFETY: CUDA streams may be used from any thread of the process (with the context bound).
unsafe impl Send for CudaStream {}
unsafe impl Sync for CudaStream {}

impl CudaStream {
    pub fn raw(&self) -> sys::CUstream {
        self.stream
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created in `create_stream`, destroyed once; pending work completes first.
            unsafe {
                let _ = result::stream::synchronize(self.stream);
                let _ = result::stream::destroy(self.stream);
            }
        }
    }
}

impl StreamImpl for CudaStream {
    fn sync(&self) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        // SAFETY: a live stream.
        unsafe { result::stream::synchronize(self.stream) }
            .map_err(|e| driver_err("cuStreamSynchronize", e))
    }

    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        self.ctx.bind()?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| driver_err("cuEventCreate", e))?;
        let ev = CudaEvent {
            ctx: self.ctx.clone(),
            event,
        };
        // SAFETY: live event and stream of one context.
        unsafe { result::event::record(event, self.stream) }
            .map_err(|e| driver_err("cuEventRecord", e))?;
        Ok(Arc::new(ev))
    }

    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError> {
        let ev = event.as_any().downcast_ref::<CudaEvent>().ok_or_else(|| {
            DeviceError::ForeignObject {
                what: "the event".into(),
            }
        })?;
        self.ctx.bind()?;
        // SAFETY: live stream and event.
        unsafe {
            result::stream::wait_event(
                self.stream,
                ev.event,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| driver_err("cuStreamWaitEvent", e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A CUDA event (timing enabled).
pub struct CudaEvent {
    ctx: Arc<Ctx>,
    event: sys::CUevent,
}

// SAFETY: events may be used from any thread with the context bound.
unsafe impl Send for CudaEvent {}
unsafe impl Sync for CudaEvent {}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created in `record`, destroyed once.
            unsafe {
                let _ = result::event::destroy(self.event);
            }
        }
    }
}

impl EventImpl for CudaEvent {
    fn is_complete(&self) -> bool {
        // SAFETY: a live event.
        self.ctx.bind().is_ok() && unsafe { result::event::query(self.event) }.is_ok()
    }

    fn sync(&self) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        // SAFETY: a live event.
        unsafe { result::event::synchronize(self.event) }
            .map_err(|e| driver_err("cuEventSynchronize", e))
    }

    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration> {
        let e = earlier.as_any().downcast_ref::<CudaEvent>()?;
        self.ctx.bind().ok()?;
        // SAFETY: two live events; both must have completed, which the driver checks.
        let ms = unsafe { result::event::elapsed(e.event, self.event) }.ok()?;
        (ms >= 0.0).then(|| Duration::from_secs_f64(ms as f64 / 1e3))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Where a kernel's PTX came from at its first use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeSource {
    /// Lowered by LLVM in this process.
    Lowered,
    /// The in-memory cache.
    Memory,
    /// The on-disk cache.
    Disk,
}

/// How a kernel's first use went: where its PTX came from, and how long lowering (or the
/// cache lookup) and the driver's load took.
#[derive(Clone, Copy, Debug)]
pub struct FirstUse {
    pub source: CodeSource,
    pub code: Duration,
    pub load: Duration,
}

/// A module on a CUDA device; kernels are built at first request.
pub struct CudaProgram {
    ctx: Arc<Ctx>,
    arch: u32,
    key: DeviceKey,
    cache: Arc<CodeCache>,
    module: Arc<VerifiedModule>,
    /// The module's identity for the cache: a hash of its IR.
    ir_hash: String,
    kernels: Mutex<HashMap<String, Arc<CudaKernel>>>,
    first_use: Mutex<HashMap<String, FirstUse>>,
}

impl CudaProgram {
    fn new(dev: &CudaDevice, module: Arc<VerifiedModule>) -> Self {
        // The Debug form covers every function, type and attribute; spans are included, so
        // an edit that moves code also re-lowers, which is conservative and cheap.
        let ir_hash = hash_hex(&[format!("{:?}", module.module()).as_bytes()]);
        CudaProgram {
            ctx: dev.ctx.clone(),
            arch: dev.arch,
            key: dev.key.clone(),
            cache: dev.cache.clone(),
            module,
            ir_hash,
            kernels: Mutex::new(HashMap::new()),
            first_use: Mutex::new(HashMap::new()),
        }
    }

    /// How `name`'s first use went, once it has happened.
    pub fn first_use(&self, name: &str) -> Option<FirstUse> {
        self.first_use.lock().get(name).copied()
    }

    fn build(&self, name: &str) -> Result<CudaKernel, String> {
        let handle = self
            .module
            .kernel(name)
            .ok_or_else(|| format!("no kernel `{name}` in the module"))?;
        let target = Nvptx::new(self.arch);
        let t0 = Instant::now();
        let hash = hash_hex(&[
            self.ir_hash.as_bytes(),
            name.as_bytes(),
            target.cpu().as_bytes(),
        ]);
        let (ptx, abi, source) = match self.cache.get(&self.key, &hash, "ptx") {
            Some((bytes, hit)) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                match abi_from_header(&text) {
                    Some(abi) => (
                        text,
                        abi,
                        if hit == Hit::Memory {
                            CodeSource::Memory
                        } else {
                            CodeSource::Disk
                        },
                    ),
                    None => self.lower(handle, &target, &hash)?,
                }
            }
            None => self.lower(handle, &target, &hash)?,
        };
        let code_time = t0.elapsed();
        let t1 = Instant::now();
        self.ctx.bind().map_err(|e| e.to_string())?;
        let mut image = ptx.clone().into_bytes();
        image.push(0);
        // SAFETY: `image` is NUL-terminated PTX text.
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| format!("cuModuleLoadData: {e:?}"))?;
        let sym = std::ffi::CString::new(abi.symbol.clone()).map_err(|e| e.to_string())?;
        // SAFETY: a live module; `sym` names its entry.
        let func = unsafe { result::module::get_function(module, sym) }
            .map_err(|e| format!("cuModuleGetFunction: {e:?}"))?;
        let load_time = t1.elapsed();
        self.first_use.lock().insert(
            name.to_string(),
            FirstUse {
                source,
                code: code_time,
                load: load_time,
            },
        );
        let fattr = |a: sys::CUfunction_attribute| -> Option<u32> {
            // SAFETY: a live function handle.
            unsafe { result::function::get_function_attribute(func, a) }
                .ok()
                .and_then(|v| u32::try_from(v).ok())
        };
        use sys::CUfunction_attribute as F;
        let kernel = self.module.function(handle);
        let mut manifest = KernelManifest::from_kernel(kernel, Backend::Cuda);
        manifest.kernel = name.to_string();
        manifest.registers_per_thread = fattr(F::CU_FUNC_ATTRIBUTE_NUM_REGS);
        manifest.stack_frame_bytes = fattr(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
        if let Some(s) = fattr(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) {
            manifest.static_shared_bytes = Some(s as u64);
        }
        manifest.built_wave = Some(32);
        if let Some((store, load)) = self.spills(&hash, &ptx, &abi.symbol, &target) {
            manifest.spill_store_bytes = Some(store);
            manifest.spill_load_bytes = Some(load);
        }
        manifest.code_hash = Some(u64::from_str_radix(&hash[..16], 16).unwrap_or(0));
        manifest.code_bytes = Some(ptx.len() as u64);
        Ok(CudaKernel {
            ctx: self.ctx.clone(),
            module,
            func,
            abi,
            manifest,
            max_dynamic: Mutex::new(0),
        })
    }

    /// Spill bytes (stores, loads) from `ptxas -v`, which the driver does not report: cached
    /// beside the PTX, measured once when `ptxas` is installed, absent otherwise.
    fn spills(&self, hash: &str, ptx: &str, symbol: &str, target: &Nvptx) -> Option<(u32, u32)> {
        let parse = |b: &[u8]| -> Option<(u32, u32)> {
            let t = std::str::from_utf8(b).ok()?;
            let mut it = t.split_whitespace().map(|v| v.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        };
        if let Some((bytes, _)) = self.cache.get(&self.key, hash, "spills") {
            return parse(&bytes);
        }
        crate::codegen::llvm::ptxas::find()?;
        let report = crate::codegen::llvm::ptxas::assemble(ptx, &target.cpu()).ok()?;
        let f = report.function(symbol)?;
        let v = (f.spill_store_bytes?, f.spill_load_bytes?);
        self.cache.put(
            &self.key,
            hash,
            "spills",
            format!("{} {}", v.0, v.1).into_bytes(),
        );
        Some(v)
    }

    fn lower(
        &self,
        handle: crate::ir::Handle<Function>,
        target: &Nvptx,
        hash: &str,
    ) -> Result<(String, KernelAbi, CodeSource), String> {
        let out = llvm::lower(
            self.module.module(),
            &[llvm::KernelRef::plain(handle)],
            target,
            &llvm::Options::default(),
        )
        .map_err(|e| e.to_string())?;
        let abi = out
            .kernels
            .into_iter()
            .next()
            .ok_or("the lowering produced no kernel")?;
        let ptx = format!("{}{}", abi_header(&abi), String::from_utf8_lossy(&out.code));
        self.cache
            .put(&self.key, hash, "ptx", ptx.clone().into_bytes());
        Ok((ptx, abi, CodeSource::Lowered))
    }
}

impl ProgramImpl for CudaProgram {
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        if let Some(k) = self.kernels.lock().get(name) {
            return Ok(k.clone());
        }
        let limit = super::common::PRIVATE_BYTES_GPU;
        super::common::check_private(name, &self.module, kernel, limit, "the CUDA backend")?;
        let k = Arc::new(self.build(name).map_err(|reason| LaunchError::NoCode {
            kernel: name.to_string(),
            backend: Backend::Cuda,
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

/// The ABI facts the PTX alone does not carry, as a comment line at the top of cached PTX:
/// `// xpu-abi <symbol> <static shared> <dynamic elem or -> <base align per param,...>`.
fn abi_header(abi: &KernelAbi) -> String {
    let aligns: Vec<String> = abi
        .params
        .iter()
        .map(|p| match p {
            ParamAbi::Buffer { base_align, .. } => base_align.to_string(),
            ParamAbi::Value { .. } => "-".into(),
        })
        .collect();
    format!(
        "// xpu-abi {} {} {} {}\n",
        abi.symbol,
        abi.static_shared_bytes,
        abi.dynamic_shared_elem
            .map_or("-".into(), |e| e.to_string()),
        if aligns.is_empty() {
            "none".into()
        } else {
            aligns.join(",")
        }
    )
}

/// The header line back; the parameter types come from the IR at launch.
fn abi_from_header(ptx: &str) -> Option<KernelAbi> {
    let line = ptx.lines().next()?.strip_prefix("// xpu-abi ")?;
    let mut it = line.split_whitespace();
    let symbol = it.next()?.to_string();
    let static_shared_bytes = it.next()?.parse().ok()?;
    let dynamic_shared_elem = match it.next()? {
        "-" => None,
        v => Some(v.parse().ok()?),
    };
    let params = match it.next()? {
        "none" => Vec::new(),
        list => list
            .split(',')
            .map(|a| match a {
                "-" => ParamAbi::Value {
                    ty: crate::ir::Type::U32,
                    size: 0,
                    align: 0,
                },
                n => ParamAbi::Buffer {
                    elem: crate::ir::ElemType::scalar(crate::ir::Scalar::U8),
                    writable: true,
                    base_align: n.parse().unwrap_or(16),
                },
            })
            .collect(),
    };
    Some(KernelAbi {
        name: symbol.clone(),
        symbol,
        params,
        static_shared_bytes,
        dynamic_shared_elem,
        wave_width: 32,
        bounds: Default::default(),
        declared_wave: None,
    })
}

/// One kernel's loaded code.
pub struct CudaKernel {
    ctx: Arc<Ctx>,
    module: sys::CUmodule,
    func: sys::CUfunction,
    abi: KernelAbi,
    manifest: KernelManifest,
    /// The dynamic shared bytes the function is opted in to.
    max_dynamic: Mutex<u32>,
}

// SAFETY: module and function handles are usable from any thread with the context bound.
unsafe impl Send for CudaKernel {}
unsafe impl Sync for CudaKernel {}

impl Drop for CudaKernel {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded in `build`, unloaded once.
            unsafe {
                let _ = result::module::unload(self.module);
            }
        }
    }
}

impl CudaKernel {
    /// The raw function handle (for benchmarks comparing against a bare launch).
    pub fn raw(&self) -> sys::CUfunction {
        self.func
    }
}

impl KernelImpl for CudaKernel {
    fn manifest(&self) -> &KernelManifest {
        &self.manifest
    }

    fn launch(
        &self,
        stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        let started = std::time::Instant::now();
        let name = &self.manifest.kernel;
        let dev_err = |message: String| LaunchError::Device {
            kernel: name.clone(),
            message,
        };
        let s = stream_of(stream).map_err(|e| dev_err(e.to_string()))?;
        let mut slots = crate::backend::gpu_args::pack(&self.abi, args, |m| {
            m.downcast_ref::<CudaMemory>().map(|m| m.ptr)
        })?;
        let mut ptrs: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s.as_mut_ptr() as *mut c_void)
            .collect();
        self.ctx.bind().map_err(|e| dev_err(e.to_string()))?;
        // Shared memory beyond the default 48 KB needs the function's opt-in.
        let dynamic = launch.shared_bytes;
        if self.abi.static_shared_bytes + dynamic as u64 > 48 * 1024 {
            let mut cur = self.max_dynamic.lock();
            if *cur < dynamic {
                // SAFETY: a live function; the driver validates the size.
                unsafe {
                    result::function::set_function_attribute(
                        self.func,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        dynamic as i32,
                    )
                }
                .map_err(|e| {
                    dev_err(format!(
                        "opting in to {dynamic} bytes of shared memory: {e:?}"
                    ))
                })?;
                *cur = dynamic;
            }
        }
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        // SAFETY: the parameters were packed per the kernel's ABI from checked arguments;
        // buffer memory is kept alive by the bindings the caller holds until the stream syncs.
        unsafe {
            result::launch_kernel(
                self.func,
                (gx, gy, gz),
                (bx, by, bz),
                dynamic,
                s.stream,
                &mut ptrs,
            )
        }
        .map_err(|e| dev_err(format!("cuLaunchKernel: {e:?}")))?;
        // A deadline: poll the stream until it drains or the deadline passes. A kernel cannot
        // be cancelled; past the deadline it is reported and left to finish (the next sync
        // waits for it, and the context stays usable).
        if let Some(deadline) = launch.deadline {
            let until = started.checked_add(deadline).unwrap_or(started);
            let mut nap = Duration::from_micros(20);
            loop {
                // SAFETY: a live stream of the bound context.
                match unsafe { sys::cuStreamQuery(s.stream) } {
                    sys::CUresult::CUDA_SUCCESS => break,
                    sys::CUresult::CUDA_ERROR_NOT_READY => {}
                    e => return Err(dev_err(format!("cuStreamQuery: {e:?}"))),
                }
                let now = std::time::Instant::now();
                if now >= until {
                    return Err(LaunchError::Deadline {
                        kernel: name.clone(),
                        deadline,
                        cancelled: false,
                    });
                }
                std::thread::sleep(nap.min(until - now));
                nap = (nap * 2).min(Duration::from_millis(2));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics() {
        // On a machine without a driver this is an error value, not a panic.
        let _ = probe();
    }

    #[test]
    fn abi_header_round_trips() {
        let abi = KernelAbi {
            name: "k".into(),
            symbol: "k".into(),
            params: vec![
                ParamAbi::Buffer {
                    elem: crate::ir::ElemType::scalar(crate::ir::Scalar::F32),
                    writable: true,
                    base_align: 16,
                },
                ParamAbi::Value {
                    ty: crate::ir::Type::F32,
                    size: 4,
                    align: 4,
                },
            ],
            static_shared_bytes: 1024,
            dynamic_shared_elem: Some(4),
            wave_width: 32,
            bounds: Default::default(),
            declared_wave: None,
        };
        let back = abi_from_header(&abi_header(&abi)).unwrap();
        assert_eq!(back.symbol, "k");
        assert_eq!(back.static_shared_bytes, 1024);
        assert_eq!(back.dynamic_shared_elem, Some(4));
        assert!(matches!(
            back.params[0],
            ParamAbi::Buffer { base_align: 16, .. }
        ));
    }
}
