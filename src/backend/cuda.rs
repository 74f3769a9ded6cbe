//! The CUDA backend (contract §2.4, §4, §5): NVIDIA GPUs through the driver API, loaded at
//! run time with `cudarc` (feature `dynamic-loading`), running PTX from the shared LLVM walk
//! ([`crate::codegen::llvm`]) and its NVPTX target.
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
//! - **Launches** pack parameters per [`crate::codegen::llvm::KernelAbi`]; a launch needing more than
//!   the default 48 KB of shared memory sets `MAX_DYNAMIC_SHARED_SIZE_BYTES` (the opt-in).
//! - **Timing**: events with timing enabled give the Event tier of `KernelTimer`.

use crate::backend::cache::{hash_hex, CodeCache, DeviceKey, Hit};
use crate::backend::common::{self, BuildError};
use crate::backend::deadlines::{Completion, Deadlines, Finish};
pub use crate::backend::gpu_abi::{abi_from_header, abi_header};
use crate::codegen::checks::{Checks, Report, REPORT_WORDS};
use crate::codegen::llvm::target::LoweringTarget;
use crate::codegen::llvm::{self, nvptx::Nvptx, KernelAbi};
use crate::hal::checked::{report_error, ProgramOptions};
use crate::hal::facts::{DeviceFacts, FeatureSupport, Support};
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::manifest::{KernelManifest, NativeOp};
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, EventImpl, Init, KernelImpl,
    Prebuilt, ProgramImpl, ReadTicket, StreamImpl, TimerTier,
};
use crate::ir::{Function, VerifiedModule};
use cudarc::driver::{result, sys};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod graph;

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

/// The device's context, shared by every [`CudaDevice`] opened on one GPU in this process
/// (they would otherwise share the primary context without sharing its epochs), made
/// current on each thread before driver calls.
///
/// **Device faults.** A sticky error (an illegal or misaligned address, a trap: [`is_sticky`])
/// leaves the context unusable. The first call that sees one recreates the context and starts
/// a new *epoch*: every object made in an earlier epoch (memory, streams, events, loaded
/// modules) is gone with it. Memory reports `XPU-D014` on use and is never freed (its address
/// may belong to a new allocation); a stream makes a new handle on first use; a kernel loads
/// its PTX again. The context is recreated by resetting the primary context
/// (`cuDevicePrimaryCtxReset`, then a retain that is kept until the device closes), checked
/// by a synchronise and a small allocation; where that context does not work, by a context of
/// its own (`cuCtxCreate`). If neither works, every later call is refused with `XPU-D016`.
struct Ctx {
    state: Mutex<CtxState>,
    dev: sys::CUdevice,
    /// The current epoch: 0 at open, one more after each fault.
    epoch: std::sync::atomic::AtomicU64,
    /// The kernel launched last: the one a fault is reported against.
    last_kernel: Mutex<Arc<str>>,
    /// The address of `last_kernel`'s name: a launch of the same kernel again sees it
    /// unchanged and takes no lock ([`Ctx::note_launched`]).
    last_kernel_at: std::sync::atomic::AtomicUsize,
    /// Per ended epoch, the kernel whose fault ended it.
    faults: Mutex<Vec<String>>,
}

/// The live context and how it is held.
struct CtxState {
    ctx: sys::CUcontext,
    /// Retains of the primary context taken by this process's contexts (one at open, one per
    /// recovery by reset), released when the device closes.
    primary_retains: u32,
    /// Whether `ctx` is a context of its own (`cuCtxCreate`), destroyed when replaced or when
    /// the device closes.
    own: bool,
    /// How each recovery went, in order (for [`CudaDevice::recoveries`]).
    recoveries: Vec<String>,
    /// Why the device could not be recovered after a fault, once that happened.
    broken: Option<String>,
}

// SAFETY: a CUDA context handle may be used from any thread once made current there, which
// `bind` does before every driver call.
unsafe impl Send for Ctx {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for Ctx {}

/// Whether a driver error is sticky: the context is lost and every later call fails until it
/// is reset (CUDA driver API, "Error Handling").
pub fn is_sticky(r: sys::CUresult) -> bool {
    use sys::CUresult as E;
    matches!(
        r,
        E::CUDA_ERROR_ILLEGAL_ADDRESS
            | E::CUDA_ERROR_LAUNCH_TIMEOUT
            | E::CUDA_ERROR_ASSERT
            | E::CUDA_ERROR_HARDWARE_STACK_ERROR
            | E::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | E::CUDA_ERROR_MISALIGNED_ADDRESS
            | E::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | E::CUDA_ERROR_INVALID_PC
            | E::CUDA_ERROR_LAUNCH_FAILED
    )
}

/// The process's contexts by device ordinal: every open of one GPU shares one [`Ctx`].
fn contexts() -> &'static Mutex<HashMap<i32, std::sync::Weak<Ctx>>> {
    static CONTEXTS: std::sync::OnceLock<Mutex<HashMap<i32, std::sync::Weak<Ctx>>>> =
        std::sync::OnceLock::new();
    CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether `ctx` works: made current, synchronised, and able to allocate and free.
///
/// # Safety
/// `ctx` must be a context handle of this process (possibly destroyed: the calls then fail).
unsafe fn context_works(ctx: sys::CUcontext) -> Result<(), String> {
    let ok = |what: &str, r: sys::CUresult| {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("{what}: {r:?}"))
        }
    };
    // SAFETY: plain driver calls on the handle; failures are returned.
    unsafe {
        ok("cuCtxSetCurrent", sys::cuCtxSetCurrent(ctx))?;
        ok("cuCtxSynchronize", sys::cuCtxSynchronize())?;
        let mut p: sys::CUdeviceptr = 0;
        ok("cuMemAlloc", sys::cuMemAlloc_v2(&mut p, 256))?;
        ok("cuMemFree", sys::cuMemFree_v2(p))
    }
}

thread_local! {
    /// The context (and its epoch) this thread made current last ([`Ctx::bind`]).
    static BOUND: std::cell::Cell<(usize, u64)> = const { std::cell::Cell::new((0, u64::MAX)) };
    /// The launch path's packing scratch: parameter words and slot sizes.
    static SCRATCH: std::cell::RefCell<(Vec<u64>, Vec<u32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

impl Ctx {
    /// The context of device `ordinal`: the one already open in this process, or the primary
    /// context retained anew.
    fn open(ordinal: usize) -> Result<Arc<Ctx>, DeviceError> {
        let dev = result::device::get(ordinal as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
        let mut all = contexts().lock();
        if let Some(ctx) = all.get(&dev).and_then(|w| w.upgrade()) {
            return Ok(ctx);
        }
        // SAFETY: `dev` is a valid device; the retain is released by `Ctx::drop`.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| driver_err("cuDevicePrimaryCtxRetain", e))?;
        let ctx = Arc::new(Ctx {
            state: Mutex::new(CtxState {
                ctx,
                primary_retains: 1,
                own: false,
                recoveries: Vec::new(),
                broken: None,
            }),
            dev,
            epoch: std::sync::atomic::AtomicU64::new(0),
            last_kernel: Mutex::new(Arc::from("")),
            last_kernel_at: std::sync::atomic::AtomicUsize::new(0),
            faults: Mutex::new(Vec::new()),
        });
        all.insert(dev, Arc::downgrade(&ctx));
        Ok(ctx)
    }

    fn bind(&self) -> Result<(), DeviceError> {
        let st = self.state.lock();
        if let Some(why) = &st.broken {
            return Err(DeviceError::Unrecovered {
                kernel: self.faults.lock().last().cloned().unwrap_or_default(),
                message: why.clone(),
            });
        }
        // The launch path binds before every call: a thread that bound this context in this
        // epoch already has it current (only this backend makes contexts current).
        let key = (st.ctx as usize, self.epoch());
        if BOUND.with(|b| b.get()) == key {
            return Ok(());
        }
        // SAFETY: the context is held (retained or created) by this `Ctx` while it is live.
        unsafe { result::ctx::set_current(st.ctx) }
            .map_err(|e| driver_err("cuCtxSetCurrent", e))?;
        BOUND.with(|b| b.set(key));
        Ok(())
    }

    /// Notes `name` as the kernel launched last (a fault seen from now on is its). The same
    /// kernel again changes nothing and takes no lock: the address of the name held in
    /// `last_kernel` cannot be another name's while it is held there.
    fn note_launched(&self, name: &Arc<str>) {
        use std::sync::atomic::Ordering;
        let at = Arc::as_ptr(name) as *const u8 as usize;
        if self.last_kernel_at.load(Ordering::Acquire) == at {
            return;
        }
        let mut last = self.last_kernel.lock();
        *last = name.clone();
        self.last_kernel_at.store(at, Ordering::Release);
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The error for an object of `epoch` once that epoch has ended.
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

    /// `what` failed with `e`: a sticky error is the fault of the kernel launched last, and
    /// the context is recreated (once per fault, whoever sees it first); the kernel and the
    /// message are returned. Other errors give `None`.
    fn fault(&self, what: &str, e: &result::DriverError) -> Option<(String, String)> {
        if !is_sticky(e.0) {
            return None;
        }
        let seen = self.epoch();
        let kernel = self.last_kernel.lock().to_string();
        let how = self.recover(seen, &kernel);
        Some((kernel, format!("{what}: {:?} ({how})", e.0)))
    }

    /// Recreates the context after a fault seen in epoch `seen`, unless another thread
    /// already did; says how it went.
    fn recover(&self, seen: u64, kernel: &str) -> String {
        let mut st = self.state.lock();
        if self.epoch() != seen {
            return st
                .recoveries
                .last()
                .cloned()
                .unwrap_or_else(|| "the context was recreated".into());
        }
        let how = self.recreate(&mut st);
        match &how {
            Ok(how) => st.recoveries.push(how.clone()),
            Err(why) => {
                st.recoveries.push(format!("not recovered: {why}"));
                st.broken = Some(why.clone());
            }
        }
        BOUND.with(|b| b.set((0, u64::MAX)));
        self.faults.lock().push(kernel.to_string());
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        how.unwrap_or_else(|why| format!("the device could not be recovered: {why}"))
    }

    /// A working context in place of the faulted one: the primary context reset and retained
    /// again, else a context of its own.
    fn recreate(&self, st: &mut CtxState) -> Result<String, String> {
        let mut tried = Vec::new();
        // SAFETY: `dev` is valid. The reset destroys every allocation, module, stream and
        // event of the primary context, which the epoch marks as gone; the retain after it is
        // kept (counted in `primary_retains`) and released when the device closes.
        unsafe {
            if st.own {
                let _ = sys::cuCtxDestroy_v2(st.ctx);
                st.own = false;
            }
            let r = sys::cuDevicePrimaryCtxReset_v2(self.dev);
            if r != sys::CUresult::CUDA_SUCCESS {
                tried.push(format!("cuDevicePrimaryCtxReset: {r:?}"));
            }
            match result::primary_ctx::retain(self.dev) {
                Ok(fresh) => {
                    st.primary_retains += 1;
                    st.ctx = fresh;
                    match context_works(fresh) {
                        Ok(()) => {
                            return Ok("the context was recreated by a primary-context reset".into())
                        }
                        Err(e) => tried.push(format!("the reset primary context: {e}")),
                    }
                }
                Err(e) => tried.push(format!("cuDevicePrimaryCtxRetain: {e:?}")),
            }
            let mut own: sys::CUcontext = std::ptr::null_mut();
            let r = sys::cuCtxCreate_v4(&mut own, std::ptr::null_mut(), 0, self.dev);
            if r != sys::CUresult::CUDA_SUCCESS {
                tried.push(format!("cuCtxCreate: {r:?}"));
                return Err(tried.join("; "));
            }
            st.ctx = own;
            st.own = true;
            match context_works(own) {
                Ok(()) => Ok(format!(
                    "the context was recreated as a context of its own ({})",
                    tried.join("; ")
                )),
                Err(e) => {
                    tried.push(format!("a context of its own: {e}"));
                    Err(tried.join("; "))
                }
            }
        }
    }

    /// A driver error of a device operation: a fault, or a plain driver failure.
    fn device_err(&self, what: &str, e: result::DriverError) -> DeviceError {
        match self.fault(what, &e) {
            Some((kernel, message)) => DeviceError::DeviceFault { kernel, message },
            None => driver_err(what, e),
        }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        // SAFETY: destroys the context made by `recreate`, if any, and releases every retain
        // of the primary context this `Ctx` took.
        unsafe {
            if st.own {
                let _ = sys::cuCtxDestroy_v2(st.ctx);
            }
            for _ in 0..st.primary_retains {
                let _ = result::primary_ctx::release(self.dev);
            }
        }
        let mut all = contexts().lock();
        if all.get(&self.dev).is_some_and(|w| w.strong_count() == 0) {
            all.remove(&self.dev);
        }
    }
}

/// What a CUDA device of compute capability `arch` (`major * 10 + minor`, as the driver
/// reports it) does natively: f16 arithmetic from sm_53, tensor-core `wmma` from sm_70, a
/// shared opt-in where the driver's opt-in limit exceeds the default one. A warp is always 32
/// wide, so a kernel cannot choose its subgroup size.
pub fn cuda_features(arch: u32, shared: Option<u64>, optin: Option<u64>) -> FeatureSupport {
    let yes = |b: bool| Some(if b { Support::Native } else { Support::No });
    FeatureSupport {
        int64_atomics: Some(Support::Native),
        f16: yes(arch >= 53),
        f64: Some(Support::Native),
        subgroup_size_control: Some(Support::No),
        cooperative_matrix: yes(arch >= 70),
        shared_opt_in: match (shared, optin) {
            (Some(s), Some(o)) => yes(o > s),
            _ => None,
        },
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
        let ctx = Ctx::open(ordinal)?;
        let dev = ctx.dev;
        ctx.bind()?;
        // With the profiler armed, CUPTI (where present) times launches on the device.
        super::cupti::start();
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
            // `buf<_, const>` reads are `ld.global.nc`, bounded by the constant bank's size
            // so that constant data stays portable across backends (docs/semantics.md).
            constant_bytes: u64a(A::CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY),
            constant_offset_alignment: None,
            int64_atomics: Some(true),
            l2_cache_bytes: u64a(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).filter(|&b| b > 0),
            memory_bus_bits: u32a(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
                .filter(|&b| b > 0),
            memory_clock_khz: u32a(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).filter(|&c| c > 0),
            features: cuda_features(
                arch,
                u64a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
                u64a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            ),
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

    /// How each recovery from a device fault went in this process, oldest first: the way the
    /// context was recreated, or why it could not be.
    pub fn recoveries(&self) -> Vec<String> {
        self.ctx.state.lock().recoveries.clone()
    }

    /// The context epoch: 0 at open, one more after each device fault.
    pub fn epoch(&self) -> u64 {
        self.ctx.epoch()
    }

    /// The compute capability as `major * 10 + minor`.
    pub fn arch(&self) -> u32 {
        self.arch
    }

    /// What this device's code is valid for (the cache's key).
    pub fn device_key(&self) -> &DeviceKey {
        &self.key
    }

    /// The code cache this device uses.
    pub fn code_cache(&self) -> &Arc<CodeCache> {
        &self.cache
    }

    fn memory<'m>(&self, mem: &'m Arc<dyn DeviceMemory>) -> Result<&'m CudaMemory, DeviceError> {
        let m = mem.as_any().downcast_ref::<CudaMemory>().ok_or_else(|| {
            DeviceError::ForeignObject {
                what: "memory".into(),
            }
        })?;
        match self.ctx.lost(m.epoch) {
            Some(kernel) => Err(DeviceError::Lost { kernel }),
            None => Ok(m),
        }
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
            let p = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
                match self.ctx.fault("cuMemAlloc", &e) {
                    Some((kernel, message)) => DeviceError::DeviceFault { kernel, message },
                    None => DeviceError::OutOfMemory {
                        bytes: bytes as u64,
                        reason: format!("{e:?}"),
                    },
                }
            })?;
            if init == Init::Poison {
                // SAFETY: `p` holds `bytes` bytes.
                unsafe { result::memset_d8_sync(p, 0xFF, bytes) }
                    .map_err(|e| self.ctx.device_err("cuMemsetD8", e))?;
            }
            p
        };
        Ok(Arc::new(CudaMemory {
            ctx: self.ctx.clone(),
            ptr,
            size: bytes,
            epoch: self.ctx.epoch(),
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
        let s = stream_of(stream)?;
        s.flush()?;
        if src.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range was checked; from pageable memory the call returns once `src`
        // is staged, so the caller may reuse it.
        unsafe { result::memcpy_htod_async(m.ptr + offset as u64, src, s.handle()?) }
            .map_err(|e| self.ctx.device_err("cuMemcpyHtoDAsync", e))
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
        // A host read is an observable point: the queue runs first, and a failed flush is
        // the read's error (never stale bytes).
        s.flush()?;
        let mut data = vec![0u8; len];
        if len > 0 {
            self.ctx.bind()?;
            let h = s.handle()?;
            // SAFETY: the range was checked; `data` outlives the copy because a copy to
            // pageable memory returns only once it has completed, and we sync the stream
            // before handing the bytes out regardless.
            unsafe { result::memcpy_dtoh_async(&mut data, m.ptr + offset as u64, h) }
                .map_err(|e| self.ctx.device_err("cuMemcpyDtoHAsync", e))?;
            // SAFETY: a valid stream of this context.
            unsafe { result::stream::synchronize(h) }
                .map_err(|e| self.ctx.device_err("cuStreamSynchronize", e))?;
        }
        // A host read is an observable point for deadlines too (after the copy, the work
        // before it has finished).
        s.settle_deadlines()?;
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
        let s = stream_of(stream)?;
        s.flush()?;
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both ranges were checked.
        unsafe {
            result::memcpy_dtod_async(
                b.ptr + dst_offset as u64,
                a.ptr + src_offset as u64,
                len,
                s.handle()?,
            )
        }
        .map_err(|e| self.ctx.device_err("cuMemcpyDtoDAsync", e))
    }

    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        self.ctx.bind()?;
        let all = crate::config::get().defer.clone()? == crate::config::DeferSetting::All;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| self.ctx.device_err("cuStreamCreate", e))?;
        Ok(Arc::new(CudaStream {
            ctx: self.ctx.clone(),
            stream: Mutex::new((stream, self.ctx.epoch())),
            deferring: std::sync::atomic::AtomicBool::new(all),
            defer: Mutex::new(graph::StreamDefer::new(all, self.ctx.epoch())),
            deadlines: Mutex::new(Deadlines::new()),
            clock: Mutex::new((std::ptr::null_mut(), u64::MAX)),
        }))
    }

    fn load_with(
        &self,
        module: &Arc<VerifiedModule>,
        options: &ProgramOptions,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let mut p = CudaProgram::new(self, module.clone());
        p.checks = options.checks();
        Ok(Arc::new(p))
    }

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        self.load_with(module, &ProgramOptions::from_env()?)
    }

    fn code_target(&self) -> Option<String> {
        Some(format!("sm_{}", self.arch))
    }

    fn load_prebuilt(
        &self,
        module: &Arc<VerifiedModule>,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let mut program = CudaProgram::new(self, module.clone());
        for p in prebuilt {
            let ptx = String::from_utf8(p.code).map_err(|_| DeviceError::Load {
                message: format!("the PTX of kernel `{}` is not UTF-8", p.kernel),
            })?;
            if abi_from_header(&ptx).is_none() {
                return Err(DeviceError::Load {
                    message: format!("the PTX of kernel `{}` has no xpu-abi header", p.kernel),
                });
            }
            program.prebuilt.get_mut().insert(p.kernel, ptx);
        }
        Ok(Arc::new(program))
    }

    fn coarsens(&self) -> bool {
        true
    }

    fn timer_tier(&self) -> TimerTier {
        TimerTier::Event
    }

    fn profile_begin(&self) -> Option<u64> {
        super::cupti::begin()
    }

    fn profile_end(&self, id: u64) {
        super::cupti::end(id)
    }
}

/// A device allocation.
pub struct CudaMemory {
    ctx: Arc<Ctx>,
    ptr: sys::CUdeviceptr,
    size: usize,
    /// The context epoch it was made in ([`Ctx`]): lost once that epoch ends.
    epoch: u64,
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
        // Memory of a lost context went with it: its address may be a new allocation's now.
        if self.ptr != 0 && self.ctx.lost(self.epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: allocated by `alloc` and freed once, here. cuMemFree synchronises with
            // work still using the allocation.
            unsafe {
                let _ = result::free_sync(self.ptr);
            }
        }
    }
}

/// A CUDA stream: its handle and the context epoch it was made in (a stream of a lost
/// context gets a new handle on first use).
pub struct CudaStream {
    ctx: Arc<Ctx>,
    stream: Mutex<(sys::CUstream, u64)>,
    /// Whether launches are queued (contract §2.4, deferred streams): read without the lock
    /// on the launch path.
    deferring: std::sync::atomic::AtomicBool,
    /// The queue, the sequences seen, their graphs, and a failed flush.
    defer: Mutex<graph::StreamDefer>,
    /// The launches with deadlines not yet settled ([`crate::backend::deadlines`]): each
    /// is checked at the stream's next observable point.
    deadlines: Mutex<Deadlines>,
    /// An idle stream of this stream's own on which a launch with a deadline records its
    /// submission event (so that the event completes at once and timestamps the
    /// submission), and the context epoch it was made in; made at the first such launch.
    clock: Mutex<(sys::CUstream, u64)>,
}

// SAFETY: CUDA streams may be used from any thread of the process (with the context bound).
unsafe impl Send for CudaStream {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for CudaStream {}

impl CudaStream {
    /// The current handle (for benchmarks that launch directly); see `CudaStream::handle`.
    pub fn raw(&self) -> sys::CUstream {
        self.stream.lock().0
    }

    /// Settles the stream's deadlines at an observable point: the first launch that missed
    /// its deadline is this point's error, `XPU-L018` (the kernel was left to finish).
    fn settle_deadlines(&self) -> Result<(), DeviceError> {
        let mut book = self.deadlines.lock();
        if book.is_empty() {
            return Ok(());
        }
        match book.settle(Instant::now()) {
            Some(m) => Err(DeviceError::Deadline {
                what: m.describe(),
                kernel: m.kernel,
                deadline: m.deadline,
            }),
            None => Ok(()),
        }
    }

    /// The clock stream ([`CudaStream::clock`]), made on first use in each context epoch.
    fn clock_handle(&self) -> Result<sys::CUstream, DeviceError> {
        let mut c = self.clock.lock();
        let epoch = self.ctx.epoch();
        if c.1 != epoch {
            let fresh =
                result::stream::create(result::stream::StreamKind::NonBlocking).map_err(|e| {
                    self.ctx
                        .device_err("cuStreamCreate (the deadline clock)", e)
                })?;
            *c = (fresh, epoch);
        }
        Ok(c.0)
    }

    /// A timing event recorded on `stream` now.
    fn event_on(&self, stream: sys::CUstream) -> Result<CudaEvent, DeviceError> {
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| self.ctx.device_err("cuEventCreate", e))?;
        let ev = CudaEvent {
            ctx: self.ctx.clone(),
            event,
            epoch: self.ctx.epoch(),
        };
        // SAFETY: live event and stream of one context.
        unsafe { result::event::record(event, stream) }
            .map_err(|e| self.ctx.device_err("cuEventRecord", e))?;
        Ok(ev)
    }

    /// The handle, with the context bound; a stream of a lost context is made again.
    fn handle(&self) -> Result<sys::CUstream, DeviceError> {
        self.ctx.bind()?;
        let mut st = self.stream.lock();
        let epoch = self.ctx.epoch();
        if st.1 != epoch {
            let fresh = result::stream::create(result::stream::StreamKind::NonBlocking)
                .map_err(|e| self.ctx.device_err("cuStreamCreate", e))?;
            *st = (fresh, epoch);
        }
        Ok(st.0)
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        // The stream's drop is an observable point: what it queued runs (an error here has
        // no one left to see it).
        let _ = self.flush();
        self.defer.lock().forget();
        self.deadlines.lock().clear();
        let (clock, clock_epoch) = *self.clock.lock();
        if !clock.is_null() && self.ctx.lost(clock_epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: made in `clock_handle`, destroyed once; only events were recorded on it.
            unsafe {
                let _ = result::stream::destroy(clock);
            }
        }
        let (stream, epoch) = *self.stream.lock();
        if self.ctx.lost(epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: created in `create_stream` (or `handle`), destroyed once; pending work
            // completes first. A stream of a lost context went with it.
            unsafe {
                let _ = result::stream::synchronize(stream);
                let _ = result::stream::destroy(stream);
            }
        }
    }
}

impl StreamImpl for CudaStream {
    fn sync(&self) -> Result<(), DeviceError> {
        self.flush()?;
        let h = self.handle()?;
        // SAFETY: a live stream.
        unsafe { result::stream::synchronize(h) }
            .map_err(|e| self.ctx.device_err("cuStreamSynchronize", e))?;
        // Everything enqueued has finished: every deadline is settled here.
        self.settle_deadlines()
    }

    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        self.flush()?;
        self.settle_deadlines()?;
        let h = self.handle()?;
        Ok(Arc::new(self.event_on(h)?))
    }

    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError> {
        let ev = event.as_any().downcast_ref::<CudaEvent>().ok_or_else(|| {
            DeviceError::ForeignObject {
                what: "the event".into(),
            }
        })?;
        if let Some(kernel) = self.ctx.lost(ev.epoch) {
            return Err(DeviceError::Lost { kernel });
        }
        self.flush()?;
        self.settle_deadlines()?;
        let h = self.handle()?;
        // SAFETY: live stream and event.
        unsafe {
            result::stream::wait_event(h, ev.event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
        }
        .map_err(|e| self.ctx.device_err("cuStreamWaitEvent", e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn set_deferred(&self, on: bool) -> Result<bool, DeviceError> {
        use crate::config::DeferSetting;
        let on = match crate::config::get().defer.clone()? {
            DeferSetting::Never => false,
            DeferSetting::All | DeferSetting::ByStream => on,
        };
        if !on {
            self.flush()?;
        }
        self.defer.lock().set_deferred(on);
        self.deferring
            .store(on, std::sync::atomic::Ordering::Release);
        Ok(on)
    }

    fn defer_stat(&self) -> crate::hal::defer::DeferStat {
        self.defer.lock().stat()
    }

    fn clear_failure(&self) {
        self.clear_failure_now();
    }
}

/// A CUDA event (timing enabled).
pub struct CudaEvent {
    ctx: Arc<Ctx>,
    event: sys::CUevent,
    /// The context epoch it was made in.
    epoch: u64,
}

// SAFETY: events may be used from any thread with the context bound.
unsafe impl Send for CudaEvent {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for CudaEvent {}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        if self.ctx.lost(self.epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: created in `record`, destroyed once (an event of a lost context went
            // with it).
            unsafe {
                let _ = result::event::destroy(self.event);
            }
        }
    }
}

impl EventImpl for CudaEvent {
    fn is_complete(&self) -> bool {
        // An event of a lost context never completes: it is done with.
        if self.ctx.lost(self.epoch).is_some() {
            return true;
        }
        // SAFETY: a live event.
        self.ctx.bind().is_ok() && unsafe { result::event::query(self.event) }.is_ok()
    }

    fn sync(&self) -> Result<(), DeviceError> {
        if let Some(kernel) = self.ctx.lost(self.epoch) {
            return Err(DeviceError::Lost { kernel });
        }
        self.ctx.bind()?;
        // SAFETY: a live event.
        unsafe { result::event::synchronize(self.event) }
            .map_err(|e| self.ctx.device_err("cuEventSynchronize", e))
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
    /// A bundle's PTX for this architecture.
    Bundle,
    /// The on-disk cache.
    Disk,
}

/// How a kernel's first use went: where its PTX came from, and how long lowering (or the
/// cache lookup) and the driver's load took.
#[derive(Clone, Copy, Debug)]
pub struct FirstUse {
    /// Where the PTX came from.
    pub source: CodeSource,
    /// Lowering or the cache lookup.
    pub code: Duration,
    /// The driver's load of the PTX.
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
    /// Checked mode and ub-traps ([`ProgramOptions`]): part of the code's cache key.
    checks: Checks,
    /// PTX (with its `xpu-abi` header) from a bundle, by kernel: taken instead of lowering.
    prebuilt: Mutex<HashMap<String, String>>,
    /// Kernels lowered by LLVM here (not from a bundle or the cache).
    lowerings: std::sync::atomic::AtomicU64,
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
            checks: Checks::default(),
            prebuilt: Mutex::new(HashMap::new()),
            lowerings: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How `name`'s first use went, once it has happened.
    pub fn first_use(&self, name: &str) -> Option<FirstUse> {
        self.first_use.lock().get(name).copied()
    }

    fn build(&self, name: &str) -> Result<CudaKernel, BuildError> {
        let handle = self.module.kernel(name).ok_or_else(|| {
            crate::codegen::Error::new(
                crate::codegen::codes::INPUT,
                format!("no kernel `{name}` in the module"),
            )
        })?;
        let target = Nvptx::new(self.arch);
        let t0 = Instant::now();
        // Code built with checks differs from code without: its own cache entry.
        let checks = format!("{:?}", self.checks);
        let cpu = target.cpu();
        let mut key: Vec<&[u8]> = vec![self.ir_hash.as_bytes(), name.as_bytes(), cpu.as_bytes()];
        if self.checks.any() {
            key.push(checks.as_bytes());
        }
        // `CAJETA_GPU_MATRIX_DIST=off`: replicated software tiles, code of their own.
        let dist = crate::config::get().matrix_dist.clone()?;
        if !dist {
            key.push(b"matrix-replicated");
        }
        // `CAJETA_GPU_MATRIX_IMPL`: a forced tier, code of its own.
        let matrix_impl = crate::config::get().matrix_impl.clone()?;
        let forced = matrix_impl.map(|t| format!("matrix-impl-{t:?}"));
        if let Some(f) = &forced {
            key.push(f.as_bytes());
        }
        let hash = hash_hex(&key);
        // A bundle's PTX is code without checks: taken only when none are asked for.
        let bundled = self
            .prebuilt
            .lock()
            .remove(name)
            .filter(|_| !self.checks.any())
            .and_then(|ptx| Some((abi_from_header(&ptx)?, ptx)));
        let cached = bundled.map(|(abi, ptx)| (ptx, abi, CodeSource::Bundle));
        let (ptx, abi, source) =
            cached
                .map(Ok)
                .unwrap_or_else(|| match self.cache.get(&self.key, &hash, "ptx") {
                    Some((bytes, hit)) => {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        match abi_from_header(&text) {
                            Some(abi) => Ok((
                                text,
                                abi,
                                if hit == Hit::Memory {
                                    CodeSource::Memory
                                } else {
                                    CodeSource::Disk
                                },
                            )),
                            None => self.lower(handle, &target, &hash, (dist, matrix_impl)),
                        }
                    }
                    None => self.lower(handle, &target, &hash, (dist, matrix_impl)),
                })?;
        let code_time = t0.elapsed();
        let t1 = Instant::now();
        let loaded = Loaded::load(&self.ctx, &ptx, &abi)?;
        let func = loaded.func;
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
            // The driver's figure is an `int`: a static array past it (4 GiB in
            // tests/hostile/shared_static_4gib.xk) reads as less, and the launch faulted with
            // CUDA_ERROR_ILLEGAL_INSTRUCTION instead of the shared-memory refusal. The
            // IR's own sum is kept where it is larger.
            let ir = manifest.static_shared_bytes.unwrap_or(0);
            manifest.static_shared_bytes = Some(ir.max(s as u64));
        }
        manifest.built_wave = Some(32);
        manifest.native_ops = matrix_from_header(&ptx);
        if let Some((store, load)) = self.spills(&hash, &ptx, &abi.symbol, &target) {
            manifest.spill_store_bytes = Some(store);
            manifest.spill_load_bytes = Some(load);
        }
        manifest.code_hash = Some(u64::from_str_radix(&hash[..16], 16).unwrap_or(0));
        manifest.code_bytes = Some(ptx.len() as u64);
        crate::hal::profile::fill_manifest(&format!("sm_{}", self.arch), &mut manifest);
        Ok(CudaKernel {
            ctx: self.ctx.clone(),
            me: std::sync::OnceLock::new(),
            name: Arc::from(name),
            shape: std::sync::OnceLock::new(),
            ptx,
            loaded: Mutex::new(loaded),
            abi,
            manifest,
            debug_lock: Mutex::new(()),
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
        (matrix_dist, matrix_impl): (bool, Option<crate::config::ForcedTier>),
    ) -> Result<(String, KernelAbi, CodeSource), BuildError> {
        self.lowerings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = llvm::lower(
            &self.module,
            &[llvm::KernelRef::plain(handle)],
            target,
            &llvm::Options {
                checks: self.checks,
                matrix_dist,
                matrix_impl,
                ..llvm::Options::default()
            },
        )?;
        let abi =
            out.kernels.into_iter().next().ok_or_else(|| {
                crate::codegen::Error::internal("the lowering produced no kernel")
            })?;
        let ptx = format!(
            "{}{}{}",
            abi_header(&abi),
            matrix_header(&out.matrix_ops),
            String::from_utf8_lossy(&out.code)
        );
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
        let built = self
            .build(name)
            .map_err(|e| e.launch(name, Backend::Cuda))?;
        let k = Arc::new(built);
        let _ = k.me.set(Arc::downgrade(&k));
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

/// The cooperative-matrix operations of a kernel's code (its manifest's native operations,
/// contract §3.3, §4) as header lines after [`abi_header`]'s:
/// `// xpu-matrix <tier>|<op>|<instruction>`.
pub fn matrix_header(ops: &[llvm::MatrixOp]) -> String {
    ops.iter()
        .map(|o| format!("// xpu-matrix {}|{}|{}\n", o.tier, o.op, o.instruction))
        .collect()
}

/// The manifest's native operations from the header [`matrix_header`] wrote.
pub fn matrix_from_header(ptx: &str) -> Vec<NativeOp> {
    ptx.lines()
        .take_while(|l| l.starts_with("// xpu-"))
        .filter_map(|l| l.strip_prefix("// xpu-matrix "))
        .filter_map(|l| {
            let mut it = l.splitn(3, '|');
            Some(NativeOp {
                tier: it.next()?.to_string(),
                op: it.next()?.to_string(),
                instruction: it.next()?.to_string(),
            })
        })
        .collect()
}

/// A kernel's manifest's native operations, as the lowering recorded them.
pub fn native_ops(ops: &[llvm::MatrixOp]) -> Vec<NativeOp> {
    ops.iter()
        .map(|o| NativeOp {
            op: o.op.clone(),
            instruction: o.instruction.clone(),
            tier: o.tier.to_string(),
        })
        .collect()
}

/// One kernel's loaded code.
pub struct CudaKernel {
    ctx: Arc<Ctx>,
    /// The kernel's own handle, which a deferred launch and a graph keep (so that the
    /// module outlives them).
    me: std::sync::OnceLock<std::sync::Weak<CudaKernel>>,
    /// The name, shared with the context's record of the kernel launched last.
    name: Arc<str>,
    /// The words of each parameter slot (the argument list's shape), once known.
    shape: std::sync::OnceLock<Arc<[u32]>>,
    /// The PTX, kept to load it again in a context recreated after a device fault.
    ptx: String,
    loaded: Mutex<Loaded>,
    abi: KernelAbi,
    manifest: KernelManifest,
    /// Held by a launch of a kernel with `print` or `assert` from clearing the debug buffer
    /// until it has read it back (the buffer is the module's, one for every launch).
    debug_lock: Mutex<()>,
}

/// A kernel's PTX loaded in one context epoch.
struct Loaded {
    module: sys::CUmodule,
    func: sys::CUfunction,
    /// The checks' report global (`llvm::REPORT_SYMBOL`), where the code has one.
    report: Option<sys::CUdeviceptr>,
    /// The `print`/`assert` buffer global (`llvm::DEBUG_SYMBOL`), where the code has one.
    debug: Option<sys::CUdeviceptr>,
    /// The dynamic shared bytes the function is opted in to.
    max_dynamic: u32,
    epoch: u64,
}

impl Loaded {
    /// Loads `ptx` (whose entry and report global `abi` names) in the current context.
    ///
    /// A sticky error seen here is an earlier kernel's fault: it is a
    /// [`DeviceError::DeviceFault`] (the context is recreated); other failures are
    /// [`DeviceError::Load`].
    fn load(ctx: &Ctx, ptx: &str, abi: &KernelAbi) -> Result<Loaded, DeviceError> {
        ctx.bind()?;
        let epoch = ctx.epoch();
        let mut image = ptx.as_bytes().to_vec();
        image.push(0);
        // SAFETY: `image` is NUL-terminated PTX text.
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| match ctx.fault("cuModuleLoadData", &e) {
                Some((kernel, message)) => DeviceError::DeviceFault { kernel, message },
                None => DeviceError::Load {
                    message: format!("cuModuleLoadData: {e:?}"),
                },
            })?;
        let unload = |why: String| {
            // SAFETY: loaded above, unloaded once on this failure path.
            unsafe {
                let _ = result::module::unload(module);
            }
            DeviceError::Load { message: why }
        };
        let sym = std::ffi::CString::new(abi.symbol.clone()).map_err(|e| unload(e.to_string()))?;
        // SAFETY: a live module; `sym` names its entry.
        let func = unsafe { result::module::get_function(module, sym) }
            .map_err(|e| unload(format!("cuModuleGetFunction: {e:?}")))?;
        // The checks' report global, where the code writes one.
        let report = if abi.report {
            let sym =
                std::ffi::CString::new(llvm::REPORT_SYMBOL).map_err(|e| unload(e.to_string()))?;
            // SAFETY: a live module; `sym` names a global of `REPORT_WORDS` u32s.
            let (ptr, bytes) = unsafe { result::module::get_global(module, sym) }.map_err(|e| {
                unload(format!("cuModuleGetGlobal({}): {e:?}", llvm::REPORT_SYMBOL))
            })?;
            if bytes < REPORT_WORDS * 4 {
                return Err(unload(format!("the report global has {bytes} bytes")));
            }
            Some(ptr)
        } else {
            None
        };
        // The `print`/`assert` buffer, where the code writes one.
        let debug = if abi.debug {
            let sym =
                std::ffi::CString::new(llvm::DEBUG_SYMBOL).map_err(|e| unload(e.to_string()))?;
            // SAFETY: a live module; `sym` names a global of `BUFFER_WORDS` u32s.
            let (ptr, bytes) = unsafe { result::module::get_global(module, sym) }
                .map_err(|e| unload(format!("cuModuleGetGlobal({}): {e:?}", llvm::DEBUG_SYMBOL)))?;
            if bytes < crate::hal::debug::BUFFER_WORDS as usize * 4 {
                return Err(unload(format!("the debug buffer global has {bytes} bytes")));
            }
            Some(ptr)
        } else {
            None
        };
        Ok(Loaded {
            module,
            func,
            report,
            debug,
            max_dynamic: 0,
            epoch,
        })
    }
}

// SAFETY: module and function handles are usable from any thread with the context bound.
unsafe impl Send for CudaKernel {}
// SAFETY: shared references only make the same driver calls, which are thread-safe.
unsafe impl Sync for CudaKernel {}

impl Drop for CudaKernel {
    fn drop(&mut self) {
        let l = self.loaded.lock();
        // A module of a lost context went with it.
        if self.ctx.lost(l.epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: loaded in `Loaded::load`, unloaded once.
            unsafe {
                let _ = result::module::unload(l.module);
            }
        }
    }
}

impl CudaKernel {
    /// The raw function handle (for benchmarks comparing against a bare launch).
    pub fn raw(&self) -> sys::CUfunction {
        self.loaded.lock().func
    }
}

impl CudaKernel {
    /// A driver error of this kernel: a device fault (the context is recreated) or a plain
    /// failure.
    fn fail(&self, what: &str, e: result::DriverError) -> LaunchError {
        match self.ctx.fault(what, &e) {
            Some((kernel, message)) => LaunchError::DeviceFault { kernel, message },
            None => LaunchError::Device {
                kernel: self.manifest.kernel.clone(),
                message: format!("{what}: {e:?}"),
            },
        }
    }

    fn dev_err(&self, message: String) -> LaunchError {
        LaunchError::Device {
            kernel: self.manifest.kernel.clone(),
            message,
        }
    }

    /// A device error of this kernel's launch: a device fault stays one; others are plain
    /// failures of the launch.
    fn device_fail(&self, e: DeviceError) -> LaunchError {
        match e {
            DeviceError::DeviceFault { kernel, message } => {
                LaunchError::DeviceFault { kernel, message }
            }
            e => self.dev_err(e.to_string()),
        }
    }

    /// The function in the current epoch (loaded again after a fault), opted in to
    /// `dynamic` bytes of shared memory where it needs more than the default 48 KB; the
    /// report global where the code has one.
    fn prepare(&self, dynamic: u32) -> Result<(sys::CUfunction, Globals), LaunchError> {
        let mut loaded = self.loaded.lock();
        // A context recreated after a fault: the PTX is loaded in it again.
        if loaded.epoch != self.ctx.epoch() {
            *loaded =
                Loaded::load(&self.ctx, &self.ptx, &self.abi).map_err(|e| self.device_fail(e))?;
        }
        let l = &mut *loaded;
        if self.abi.static_shared_bytes + dynamic as u64 > 48 * 1024 && l.max_dynamic < dynamic {
            // SAFETY: a live function; the driver validates the size.
            unsafe {
                result::function::set_function_attribute(
                    l.func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic as i32,
                )
            }
            .map_err(|e| self.fail(&format!("opting in to {dynamic} bytes of shared memory"), e))?;
            l.max_dynamic = dynamic;
        }
        Ok((
            l.func,
            Globals {
                report: l.report,
                debug: l.debug,
            },
        ))
    }

    /// Enqueues the kernel on `stream_h` with packed parameters (`words`, `sizes` as
    /// [`crate::backend::gpu_args::pack_into`] makes them); the report global where the code
    /// has one (cleared on the stream before the kernel), and the debug buffer where it has
    /// one (its cursors cleared so).
    fn enqueue(
        &self,
        stream_h: sys::CUstream,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic: u32,
        words: &[u64],
        sizes: &[u32],
    ) -> Result<Globals, LaunchError> {
        let (func, globals) = self.prepare(dynamic)?;
        if let Some(debug) = globals.debug {
            // SAFETY: the debug global's first words are its cursors; ordered on the stream.
            check(unsafe {
                sys::cuMemsetD32Async(debug, 0, crate::hal::debug::HEADER_WORDS as usize, stream_h)
            })
            .map_err(|e| self.fail("cuMemsetD32Async (the debug buffer)", e))?;
        }
        if let Some(report) = globals.report {
            // SAFETY: the report global holds REPORT_WORDS u32s; ordered on the stream.
            check(unsafe { sys::cuMemsetD32Async(report, 0, REPORT_WORDS, stream_h) })
                .map_err(|e| self.fail("cuMemsetD32Async (the report)", e))?;
        }
        graph::with_param_ptrs(words, sizes, |ptrs| {
            // SAFETY: the parameters were packed per the kernel's ABI from checked arguments;
            // buffer memory outlives the launch (freeing it synchronises with the device).
            unsafe {
                result::launch_kernel(
                    func,
                    (grid[0], grid[1], grid[2]),
                    (block[0], block[1], block[2]),
                    dynamic,
                    stream_h,
                    ptrs,
                )
            }
        })
        .map_err(|e| self.fail("cuLaunchKernel", e))?;
        // A fault seen from now on is this kernel's (or one launched after it).
        self.ctx.note_launched(&self.name);
        Ok(globals)
    }

    /// The argument list's shape, shared by every launch of the kernel.
    fn shape_of(&self, sizes: &[u32]) -> Arc<[u32]> {
        let shape = self.shape.get_or_init(|| Arc::from(sizes));
        if **shape == *sizes {
            shape.clone()
        } else {
            Arc::from(sizes)
        }
    }

    /// A launch on a deferred stream: queued, or direct for an exception (after the queue,
    /// which keeps the stream's order).
    fn launch_deferred(
        &self,
        s: &CudaStream,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        use crate::backend::defer::recognise::{exception, LaunchTraits};
        let (mut words, mut sizes) = (Vec::new(), Vec::new());
        crate::backend::gpu_args::pack_into(
            &self.abi,
            args,
            |m| m.downcast_ref::<CudaMemory>().map(|m| m.ptr),
            &mut words,
            &mut sizes,
        )?;
        let traits = LaunchTraits {
            args: args.len(),
            arg_bytes: words.len() * 8,
            // A launch that reads back a report or `print` records is never deferred.
            checked: self.abi.report || self.abi.debug,
            deadline: launch.deadline.is_some(),
            // No argument of this IR is a buffer array, a texture or an image.
            buffer_array: false,
            observed: crate::profile::device_sink_live(),
        };
        let me = self.me.get().and_then(std::sync::Weak::upgrade);
        let (Some(me), None) = (me, exception(&traits)) else {
            s.flush()
                .map_err(|e| deferred_error(&self.manifest.kernel, e))?;
            s.defer.lock().note_direct();
            return self.launch_direct(s, launch, &words, &sizes);
        };
        let node = graph::CudaNode::new(me, self.shape_of(&sizes), launch, words, args);
        s.queue(node)
            .map_err(|e| deferred_error(&self.manifest.kernel, e))
    }

    /// The direct launch: enqueued, then (with a deadline) waited for, and (with checks) its
    /// report read.
    fn launch_direct(
        &self,
        s: &CudaStream,
        launch: &Launch,
        words: &[u64],
        sizes: &[u32],
    ) -> Result<(), LaunchError> {
        let name = &self.manifest.kernel;
        let stream_h = s.handle().map_err(|e| self.device_fail(e))?;
        // A deadline: an event on the stream's idle clock stream timestamps the submission
        // (it completes at once), and one recorded after the kernel its completion; the
        // stream's next observable point compares the two against the window. A kernel
        // cannot be cancelled: one past its deadline is reported there and left to finish.
        let submitted = match launch.deadline {
            Some(_) => {
                let clock = s.clock_handle().map_err(|e| self.device_fail(e))?;
                Some((
                    Instant::now(),
                    s.event_on(clock).map_err(|e| self.device_fail(e))?,
                ))
            }
            None => None,
        };
        let _debug = self.abi.debug.then(|| self.debug_lock.lock());
        let Globals { report, debug } = self.enqueue(
            stream_h,
            launch.grid,
            launch.block,
            launch.shared_bytes,
            words,
            sizes,
        )?;
        if let (Some(deadline), Some((at, start))) = (launch.deadline, submitted) {
            let end = s.event_on(stream_h).map_err(|e| self.device_fail(e))?;
            s.deadlines.lock().push(
                self.name.clone(),
                at,
                deadline,
                Box::new(DeadlineEvents { start, end }),
            );
        }
        // `print` and `assert`: the launch waits for the kernel and reads the records back; the
        // lines go to the sink, a failed assert is the launch's refusal (`XPU-L035`) unless a
        // check's (below) is.
        let mut printed = Ok(());
        if let Some(debug) = debug {
            let words = crate::hal::debug::read_back(|first, dst: &mut [u32]| {
                // SAFETY: a live stream; `first + dst.len()` words lie inside the global
                // (`read_back` clamps them to its regions); `dst` outlives the copy, which
                // the synchronisation completes.
                check(unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        dst.as_mut_ptr() as *mut c_void,
                        debug + first as u64 * 4,
                        dst.len() * 4,
                        stream_h,
                    )
                })
                .map_err(|e| self.fail("cuMemcpyDtoHAsync (the debug buffer)", e))?;
                // SAFETY: a live stream of the bound context.
                unsafe { result::stream::synchronize(stream_h) }
                    .map_err(|e| self.fail("cuStreamSynchronize", e))
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
            // SAFETY: a live stream; `words` is REPORT_WORDS u32s, the global's size, and
            // outlives the copy (the stream is synchronised below).
            check(unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    words.as_mut_ptr() as *mut c_void,
                    report,
                    REPORT_WORDS * 4,
                    stream_h,
                )
            })
            .map_err(|e| self.fail("cuMemcpyDtoHAsync (the report)", e))?;
            // SAFETY: a live stream of the bound context.
            unsafe { result::stream::synchronize(stream_h) }
                .map_err(|e| self.fail("cuStreamSynchronize", e))?;
            if let Some(e) = report_error(name, Report::decode(&words), &self.abi.sites) {
                return Err(e);
            }
        }
        printed
    }
}

/// The two events of a launch with a deadline ([`CudaKernel::launch_direct`]): its
/// submission, timestamped on an idle stream, and its completion.
struct DeadlineEvents {
    start: CudaEvent,
    end: CudaEvent,
}

impl Completion for DeadlineEvents {
    fn poll(&self) -> Finish {
        // Events of a lost context: the fault was reported on its own; nothing to say here.
        if self.end.ctx.lost(self.end.epoch).is_some() || self.end.ctx.bind().is_err() {
            return Finish::Done(None);
        }
        // SAFETY: a live event of the bound context.
        match unsafe { sys::cuEventQuery(self.end.event) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Finish::Pending,
            sys::CUresult::CUDA_SUCCESS => Finish::Done(self.end.elapsed_since(&self.start)),
            _ => Finish::Done(None),
        }
    }
}

/// The module globals a launch clears before the kernel and reads after it.
struct Globals {
    /// The checks' report (`llvm::REPORT_SYMBOL`).
    report: Option<sys::CUdeviceptr>,
    /// The `print`/`assert` buffer (`llvm::DEBUG_SYMBOL`).
    debug: Option<sys::CUdeviceptr>,
}

/// A driver status as a result.
fn check(r: sys::CUresult) -> Result<(), result::DriverError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(result::DriverError(r))
    }
}

/// The launch of `kernel` refused because the stream's queue failed before it.
fn deferred_error(kernel: &str, e: DeviceError) -> LaunchError {
    LaunchError::Deferred {
        kernel: kernel.to_string(),
        message: e.to_string(),
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
        let s = stream_of(stream).map_err(|e| self.dev_err(e.to_string()))?;
        // Buffers of a context lost with a fault cannot be used.
        for (i, a) in args.iter().enumerate() {
            if let DeviceArg::Buffer(b) = a {
                if let Some(m) = b.memory.as_any().downcast_ref::<CudaMemory>() {
                    if let Some(fault) = self.ctx.lost(m.epoch) {
                        return Err(LaunchError::LostBuffer {
                            kernel: self.manifest.kernel.clone(),
                            param: format!("#{i}"),
                            fault,
                        });
                    }
                }
            }
        }
        if s.deferring.load(std::sync::atomic::Ordering::Acquire) {
            return self.launch_deferred(s, launch, args);
        }
        // The direct path packs into this thread's scratch: no allocation per launch.
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (words, sizes) = &mut *scratch;
            crate::backend::gpu_args::pack_into(
                &self.abi,
                args,
                |m| m.downcast_ref::<CudaMemory>().map(|m| m.ptr),
                words,
                sizes,
            )?;
            self.launch_direct(s, launch, words, sizes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::checks::CheckSite;
    use crate::codegen::llvm::ParamAbi;

    #[test]
    fn sticky_errors_are_the_faults_that_lose_a_context() {
        use sys::CUresult as E;
        for e in [
            E::CUDA_ERROR_ILLEGAL_ADDRESS,
            E::CUDA_ERROR_MISALIGNED_ADDRESS,
            E::CUDA_ERROR_LAUNCH_FAILED,
            E::CUDA_ERROR_ASSERT,
            E::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        ] {
            assert!(is_sticky(e), "{e:?}");
        }
        for e in [
            E::CUDA_SUCCESS,
            E::CUDA_ERROR_OUT_OF_MEMORY,
            E::CUDA_ERROR_INVALID_VALUE,
            E::CUDA_ERROR_NOT_READY,
            E::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        ] {
            assert!(!is_sticky(e), "{e:?}");
        }
    }

    #[test]
    fn fault_errors_name_the_kernel_and_say_what_was_lost() {
        let e = LaunchError::DeviceFault {
            kernel: "bad".into(),
            message: "cuStreamSynchronize: CUDA_ERROR_MISALIGNED_ADDRESS".into(),
        };
        assert_eq!(e.code(), "XPU-L022");
        assert!(e.to_string().contains("kernel bad") && e.to_string().contains("recreated"));
        let d = DeviceError::Lost {
            kernel: "bad".into(),
        };
        assert_eq!(d.code(), "XPU-D014");
        assert!(
            d.to_string()
                .contains("lost with the device fault of kernel bad"),
            "{d}"
        );
        let d = DeviceError::DeviceFault {
            kernel: "bad".into(),
            message: "x".into(),
        };
        assert_eq!(d.code(), "XPU-D015");
    }

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
            report: true,
            sites: vec![CheckSite {
                line: 7,
                what: "buffer x".into(),
            }],
            debug: true,
            debug_sites: vec![crate::ir::debug::DebugSite {
                line: 9,
                kind: crate::ir::debug::SiteKind::Print {
                    format: "x={}\nnext".into(),
                    args: vec![crate::ir::Scalar::F32],
                },
            }],
        };
        let header = format!("{}// xpu-matrix a|b|c\n", abi_header(&abi));
        let back = abi_from_header(&header).unwrap();
        assert!(back.report);
        assert_eq!(back.sites, abi.sites);
        assert!(back.debug);
        assert_eq!(back.debug_sites, abi.debug_sites);
        assert_eq!(back.symbol, "k");
        assert_eq!(back.static_shared_bytes, 1024);
        assert_eq!(back.dynamic_shared_elem, Some(4));
        assert!(matches!(
            back.params[0],
            ParamAbi::Buffer { base_align: 16, .. }
        ));
    }
}
