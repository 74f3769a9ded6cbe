//! The host CPU as a device (`Backend::Cpu`, contract §3.7): kernels JIT-compiled by
//! [`crate::codegen::cpu`] and run in this process over a pool of worker threads.
//!
//! - Memory is plain host memory ([`super::host`], 64-byte aligned, no defined-byte
//!   tracking); upload and download are copies; streams execute eagerly.
//! - Facts describe the host: logical cores as multiprocessors, the SIMD width for 32-bit
//!   lanes as the wave, physical memory, integrated memory, native 64-bit atomics; what the OS
//!   does not report is absent.
//! - A kernel's code is compiled per launch shape (block and wave), cached per program; the
//!   manifest records the wave it was built at and its static shared memory (no registers or
//!   spills: the host reports none).
//! - A launch binds each buffer view as a base pointer and length, runs the grid's workgroups
//!   over at most `worker_cap()` threads (`CAJETA_XPU_CPU_WORKERS`, or
//!   [`CpuDevice::set_worker_cap`]), and turns a fault the generated code caught
//!   (out of bounds, division by zero, barrier divergence, a broken `align`) into a
//!   [`LaunchError`] naming kernel, line and index. Nothing out of bounds is ever touched.
//! - A launch whose buffers together exceed a quarter of the last-level cache
//!   ([`streaming_footprint`]) runs the kernel's streaming
//!   code where it has some ([`jit::stream`]): prefetched inputs, non-temporal outputs.
//!   `CAJETA_XPU_CPU_STREAMING=off|auto|force` or [`CpuDevice::set_streaming`] overrides it.
//! - Compiled code persists across processes in the device code cache ([`stored`]): a
//!   specialisation another process compiled is loaded, not lowered again.

pub mod stored;

use crate::backend::host::{self, HostStream};
use crate::codegen::cpu::{self as jit, BufRef, CompiledKernel, Fault};
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::ProgramOptions;
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, KernelImpl, Mode, ProgramImpl, StreamImpl,
};
use crate::ir::{Function, Handle, Type, VerifiedModule};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The host CPU device.
pub struct CpuDevice {
    facts: DeviceFacts,
    settings: Arc<Settings>,
}

/// What a launch reads from its device when it starts: shared by the device with every program
/// and kernel, so a change applies to the next launch.
struct Settings {
    /// Worker threads at most.
    cap: AtomicUsize,
    /// A malformed `CAJETA_XPU_CPU_WORKERS`, reported by every launch until
    /// [`CpuDevice::set_worker_cap`] sets a cap.
    cap_error: Mutex<Option<crate::config::BadValue>>,
    /// When launches run streaming code. An unreadable `CAJETA_XPU_CPU_STREAMING` is kept as
    /// its error, which every launch then reports.
    streaming: Mutex<Result<Mode, crate::config::BadValue>>,
    /// Bytes of machine code held by live specialisations ([`DeviceImpl::code_memory`]).
    code_bytes: AtomicU64,
    /// The persistent code cache.
    cache: stored::CpuCache,
}

/// Compiled specialisations a kernel keeps at most; past it the least recently launched one
/// is dropped (its code freed once no launch runs it) and compiled again if needed.
pub const MAX_SPECIALISATIONS: usize = 16;

impl Default for CpuDevice {
    fn default() -> Self {
        CpuDevice::new()
    }
}

/// Workers a launch may use when nothing caps them: `CAJETA_XPU_CPU_WORKERS`, else every
/// core.
fn default_cap() -> usize {
    match crate::config::get().cpu_workers {
        Ok(Some(n)) => n,
        _ => jit::pool::host_cores(),
    }
}

/// A malformed `CAJETA_XPU_CPU_WORKERS`, which every launch reports until a cap is set.
fn default_cap_error() -> Option<crate::config::BadValue> {
    crate::config::get().cpu_workers.clone().err()
}

impl CpuDevice {
    /// The host CPU, with the worker cap of `CAJETA_XPU_CPU_WORKERS` (else every core) and
    /// the code cache in the default folder ([`crate::backend::cache::CodeCache::default_dir`]).
    pub fn new() -> Self {
        CpuDevice::with_cache(stored::CpuCache::new(
            crate::backend::cache::CodeCache::default_dir(),
        ))
    }

    /// The host CPU with its code cached in `cache` (`stored::CpuCache::new(None)`: none).
    pub fn with_cache(cache: stored::CpuCache) -> Self {
        let wave = jit::host_simd_width();
        let facts = DeviceFacts {
            wave_width: Some(wave),
            supported_wave_widths: Some(vec![1, 2, 4, 8, 16, 32, 64]),
            integrated: Some(true),
            int64_atomics: Some(true),
            // The backend's own limits (DESIGN.md, Decisions 8): each worker holds a
            // workgroup's shared memory (1 GiB at most, as on the interpreter), and the code
            // counts a block's work-items and waves in 32 bits.
            shared_bytes_per_block: Some(1 << 30),
            max_threads_per_block: Some(jit::MAX_BLOCK_VOLUME as u32),
            ..DeviceFacts::host(Backend::Cpu)
        };
        CpuDevice {
            facts,
            settings: Arc::new(Settings {
                cap: AtomicUsize::new(default_cap()),
                cap_error: Mutex::new(default_cap_error()),
                streaming: Mutex::new(crate::config::get().cpu_streaming.clone()),
                code_bytes: AtomicU64::new(0),
                cache,
            }),
        }
    }

    /// The device's persistent code cache (its counters: [`crate::backend::cache::Stats`]).
    pub fn code_cache(&self) -> &stored::CpuCache {
        &self.settings.cache
    }

    /// When launches run the streaming code of kernels that have some: `Auto` (the default)
    /// when the launch's buffers exceed [`streaming_footprint`], `Force` always, `Off` never.
    pub fn set_streaming(&self, mode: Mode) {
        *self.settings.streaming.lock() = Ok(mode);
    }

    /// Caps the worker threads a launch uses (`Device.setCpuWorkerCap`); 0 restores the
    /// default.
    pub fn set_worker_cap(&self, workers: usize) {
        let n = if workers == 0 { default_cap() } else { workers };
        *self.settings.cap_error.lock() = if workers == 0 {
            default_cap_error()
        } else {
            None
        };
        self.settings.cap.store(n, Ordering::Relaxed);
    }

    /// Workers a launch may use now (at least 1).
    pub fn worker_cap(&self) -> usize {
        self.settings.cap.load(Ordering::Relaxed).max(1)
    }
}

impl DeviceImpl for CpuDevice {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }

    fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    host::host_memory_methods!(false, HostStream);

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        self.load_with(module, &ProgramOptions::from_env()?)
    }

    /// ub-traps apply on the CPU; checked mode changes nothing (buffers, shared and private
    /// arrays are bounds-checked always: DESIGN.md, Decisions 8).
    fn load_with(
        &self,
        module: &Arc<VerifiedModule>,
        options: &ProgramOptions,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        Ok(Arc::new(CpuProgram {
            module: module.clone(),
            kernels: Mutex::new(HashMap::new()),
            settings: self.settings.clone(),
            ub_traps: options.ub_traps,
            ir_hash: Arc::new(OnceLock::new()),
        }))
    }

    fn code_memory(&self) -> Option<u64> {
        Some(self.settings.code_bytes.load(Ordering::Relaxed))
    }
}

/// One compiled specialisation's key: the block, the wave, whether every wave of the block
/// is full (a 1-D block of whole waves gets code that knows it), and whether it streams.
type SpecKey = ([u32; 3], u32, bool, bool);

/// The bytes of buffers above which a launch runs its streaming code (in `auto`): a quarter of
/// the last-level cache. The whole cache is not this process's: on the 2-core VM of the
/// measurements, whose 260 MiB L3 serves the rest of its socket too, a triad over three
/// arrays of 16 MiB (48 MiB) still ran from cache (47 GB/s, streaming 51) and a saxpy over two
/// (32 MiB) too (74 GB/s, streaming 68), while at 24 MiB arrays the triad ran from memory
/// (37 GB/s, streaming 52). In cache the per-wave calls cost: 1 MiB arrays, saxpy 74 → 65.
pub fn streaming_footprint() -> u64 {
    last_level_cache() / 4
}

/// The host's last-level cache in bytes: the largest cache sysfs lists for cpu0, else 32 MiB.
fn last_level_cache() -> u64 {
    static LLC: OnceLock<u64> = OnceLock::new();
    *LLC.get_or_init(|| {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        let size = |entry: std::fs::DirEntry| -> Option<u64> {
            let text = std::fs::read_to_string(entry.path().join("size")).ok()?;
            let text = text.trim();
            let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
            let shift = match unit {
                "K" => 10,
                "M" => 20,
                "G" => 30,
                _ => return None,
            };
            Some(digits.parse::<u64>().ok()? << shift)
        };
        std::fs::read_dir(dir)
            .ok()
            .and_then(|entries| entries.filter_map(|e| e.ok().and_then(size)).max())
            .unwrap_or(32 << 20)
    })
}

struct CpuProgram {
    module: Arc<VerifiedModule>,
    kernels: Mutex<HashMap<String, Arc<CpuKernel>>>,
    settings: Arc<Settings>,
    /// Unconfirmed `align` statements are tested ([`ProgramOptions::ub_traps`]).
    ub_traps: bool,
    /// The hash of the module's IR (its cache entries' part), made at the first compile.
    ir_hash: Arc<OnceLock<String>>,
}

/// The block a kernel is first compiled at, to validate the lowering and fill the manifest:
/// code for any one-dimensional block (only 2-D and 3-D blocks get their own code).
const PROBE_BLOCK: [u32; 3] = [0, 1, 1];

/// The specialisation a launch block runs: one code for every 1-D block.
fn spec_block(block: [u32; 3]) -> [u32; 3] {
    if block[1] == 1 && block[2] == 1 {
        PROBE_BLOCK
    } else {
        block
    }
}

/// The block a kernel's first code is built at, and whether its waves are all full: its
/// pinned block (`@block`, contract §3.4: the work-item loop runs a constant trip count), else
/// `PROBE_BLOCK`.
pub fn probe_block(kernel: &Function, wave: u32) -> ([u32; 3], bool) {
    match kernel.attrs.block {
        Some((b, _)) => (b, b.iter().product::<u32>() % wave.max(1) == 0),
        None => (PROBE_BLOCK, false),
    }
}

/// Refusal 3 of §2.4 (`XPU-L011`): a kernel whose result depends on the wave, with no
/// declared `@wave`, built at one lane (`XPU_CPU_WAVE=1`) would run as its scalar twin.
pub fn scalar_twin(
    name: &str,
    kernel: &Function,
    wave: u32,
    wave_dependent: bool,
) -> Result<(), LaunchError> {
    if wave == 1 && wave_dependent && kernel.attrs.wave.is_none() {
        return Err(LaunchError::ScalarTwin {
            kernel: name.to_string(),
            reason: "the CPU backend builds its work-item loop at one lane here (XPU_CPU_WAVE=1) \
                     and the kernel uses the wave; declare @wave(1) if one lane is meant"
                .into(),
        });
    }
    Ok(())
}

/// Compiles `handle` of `module` at `block` and `wave`; `whole_waves`: every launch of the code
/// has a block of whole waves (only then may it be run); `streaming`: see
/// [`jit::Config::streaming`]; `ub_traps`: see [`jit::Config::ub_traps`].
pub fn compile(
    module: &VerifiedModule,
    handle: Handle<Function>,
    block: [u32; 3],
    wave: u32,
    whole_waves: bool,
    streaming: bool,
    ub_traps: bool,
) -> Result<CompiledKernel, jit::Error> {
    let cfg = config_for(
        module.function(handle),
        block,
        wave,
        whole_waves,
        streaming,
        ub_traps,
    );
    CompiledKernel::compile(module, handle, cfg)
}

/// The configuration [`compile`] builds with.
fn config_for(
    f: &Function,
    block: [u32; 3],
    wave: u32,
    whole_waves: bool,
    streaming: bool,
    ub_traps: bool,
) -> jit::Config {
    let mut cfg = jit::config(f, block, None);
    cfg.wave = wave;
    cfg.whole_waves = whole_waves;
    cfg.streaming = streaming;
    cfg.ub_traps = ub_traps;
    cfg
}

/// The static shared memory of `kernel` as the JIT lays it out (each fixed-size array 16-byte
/// aligned, in declaration order; mirrors `codegen::cpu::lower`), known before any code.
fn static_shared_bytes(kernel: &Function) -> u64 {
    let mut off = 0u64;
    for (h, sd) in kernel.shared.iter() {
        if let Some(crate::ir::Len::Fixed(n)) = sd.len {
            // A laid-out array takes its physical length (`ir::layout`).
            let n = crate::ir::layout::placed_len(kernel, h).unwrap_or(n);
            off = (off + n as u64 * sd.elem.size() as u64).div_ceil(16) * 16;
        }
    }
    off
}

/// The wave a kernel is built at on this host: its `@wave(N)`, else the host's SIMD width.
pub fn build_wave(kernel: &Function) -> u32 {
    kernel
        .attrs
        .wave
        .map(|(w, _)| w)
        .unwrap_or_else(jit::host_simd_width)
}

/// Compiles `handle` at the probe block (any 1-D block) and returns its manifest, as a
/// program's first use of the kernel makes it: what `xpu build -o` records for the CPU.
pub fn probe_manifest(
    module: &VerifiedModule,
    handle: Handle<Function>,
) -> Result<KernelManifest, jit::Error> {
    let f = module.function(handle);
    let wave = build_wave(f);
    let probe = compile(module, handle, PROBE_BLOCK, wave, false, false, false)?;
    let mut manifest = KernelManifest::from_kernel(f, Backend::Cpu);
    manifest.built_wave = Some(wave);
    manifest.code_bytes = Some(probe.code_bytes);
    manifest.static_shared_bytes = Some(probe.static_shared);
    Ok(manifest)
}

impl CpuProgram {
    fn get(&self, name: &str) -> Result<Arc<CpuKernel>, LaunchError> {
        if let Some(k) = self.kernels.lock().get(name) {
            return Ok(k.clone());
        }
        let handle = self.module.kernel(name).ok_or_else(|| {
            LaunchError::no_code(name, Backend::Cpu, "the program has no kernel of that name")
        })?;
        let f = self.module.function(handle);
        let wave = build_wave(f);
        let wave_dependent = crate::ir::analysis::depends_on_wave(self.module.module(), f);
        scalar_twin(name, f, wave, wave_dependent)?;
        // No code yet (issue 21): the first launch compiles the specialisation it runs, and
        // only a manifest asked for before any launch compiles the probe.
        let mut manifest = KernelManifest::from_kernel(f, Backend::Cpu);
        // A declared `@wave` is the width its launches run at, verbs or not.
        manifest.built_wave = Some(if wave_dependent || f.attrs.wave.is_some() {
            wave
        } else {
            1
        });
        manifest.static_shared_bytes = Some(static_shared_bytes(f));
        let k = Arc::new(CpuKernel {
            module: self.module.clone(),
            handle,
            base: manifest,
            built: OnceLock::new(),
            wave,
            specs: Mutex::new(Specs::default()),
            settings: self.settings.clone(),
            ub_traps: self.ub_traps,
            compile_time: Mutex::new(Duration::ZERO),
            compiles: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            ir_hash: self.ir_hash.clone(),
        });
        self.kernels.lock().insert(name.to_string(), k.clone());
        Ok(k)
    }
}

impl ProgramImpl for CpuProgram {
    fn kernel(&self, name: &str, _kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        Ok(self.get(name)?)
    }

    fn manifest(&self, name: &str) -> Option<KernelManifest> {
        self.get(name).ok()?.built_manifest().ok().cloned()
    }

    fn lowerings(&self) -> Option<u64> {
        let later: u64 = self
            .kernels
            .lock()
            .values()
            .map(|k| k.compiles.load(Ordering::Relaxed))
            .sum();
        Some(later)
    }
}

/// A kernel's compiled specialisations, each with the tick of its last use (for the
/// least-recently-used cap, [`MAX_SPECIALISATIONS`]).
#[derive(Default)]
struct Specs {
    map: HashMap<SpecKey, (Arc<CompiledKernel>, u64)>,
    tick: u64,
}

/// A kernel on the CPU: its manifest and its compiled specialisations.
pub struct CpuKernel {
    module: Arc<VerifiedModule>,
    handle: Handle<Function>,
    /// The manifest before any code: what the IR says (wave, pinned block, static shared).
    base: KernelManifest,
    /// The manifest with the code facts (size, hash) of the first specialisation compiled.
    built: OnceLock<KernelManifest>,
    wave: u32,
    specs: Mutex<Specs>,
    settings: Arc<Settings>,
    ub_traps: bool,
    compile_time: Mutex<Duration>,
    /// Specialisations compiled (every Cranelift compile of this kernel).
    compiles: AtomicU64,
    /// Specialisations loaded from the disk cache instead.
    loads: AtomicU64,
    /// The program's IR hash.
    ir_hash: Arc<OnceLock<String>>,
}

impl Drop for CpuKernel {
    fn drop(&mut self) {
        let held: u64 = self
            .specs
            .get_mut()
            .map
            .values()
            .map(|(c, _)| c.code_bytes)
            .sum();
        self.settings.code_bytes.fetch_sub(held, Ordering::Relaxed);
    }
}

impl CpuKernel {
    /// Total time spent compiling this kernel's specialisations so far.
    pub fn compile_time(&self) -> Duration {
        *self.compile_time.lock()
    }

    /// The launch error for a kernel the CPU has no code for.
    fn no_code(&self, reason: String) -> LaunchError {
        LaunchError::no_code(self.name(), Backend::Cpu, reason)
    }

    /// Keeps `code` as the specialisation `key`, dropping the least recently used one past
    /// [`MAX_SPECIALISATIONS`].
    fn keep(&self, key: SpecKey, code: Arc<CompiledKernel>) {
        let mut specs = self.specs.lock();
        specs.tick += 1;
        let tick = specs.tick;
        self.settings
            .code_bytes
            .fetch_add(code.code_bytes, Ordering::Relaxed);
        if let Some((old, _)) = specs.map.insert(key, (code, tick)) {
            self.settings
                .code_bytes
                .fetch_sub(old.code_bytes, Ordering::Relaxed);
        }
        while specs.map.len() > MAX_SPECIALISATIONS {
            let oldest = *specs
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k)
                .expect("non-empty");
            if let Some((old, _)) = specs.map.remove(&oldest) {
                self.settings
                    .code_bytes
                    .fetch_sub(old.code_bytes, Ordering::Relaxed);
            }
        }
    }

    fn spec(&self, block: [u32; 3], streaming: bool) -> Result<Arc<CompiledKernel>, LaunchError> {
        let whole_waves = block.iter().product::<u32>() % self.wave == 0;
        // A pinned block is the only one launched (the shared check refuses others): its code
        // is built at that block.
        let block = if self.base.pinned_block.is_some() {
            block
        } else {
            spec_block(block)
        };
        let key = (block, self.wave, whole_waves, streaming);
        {
            let mut specs = self.specs.lock();
            specs.tick += 1;
            let tick = specs.tick;
            if let Some((c, t)) = specs.map.get_mut(&key) {
                *t = tick;
                return Ok(c.clone());
            }
        }
        self.build(key)
    }

    /// Specialisations of this kernel loaded from the disk cache rather than compiled.
    pub fn cache_loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// Loads the specialisation `key` from the disk cache, or compiles it (and stores it
    /// there), and keeps it; the first one built gives the manifest its code facts.
    fn build(&self, key: SpecKey) -> Result<Arc<CompiledKernel>, LaunchError> {
        let (block, wave, whole_waves, streaming) = key;
        let f = self.module.function(self.handle);
        let cfg = config_for(f, block, wave, whole_waves, streaming, self.ub_traps);
        let cache = &self.settings.cache;
        // The JIT's diagnostics (`XPU_JIT_DUMP`, `_ASM`, `_BIN`, `_TIME`, the REPL's `:asm`)
        // describe a compile: with any of them on the cache is not read.
        let diag = crate::config::get().jit.clone().unwrap_or_default();
        let read = cache.store.dir().is_some()
            && !(diag.dump || diag.asm || diag.time || diag.bin.is_some() || jit::capturing_clif());
        let hash = cache.store.dir().map(|_| {
            let ir = self.ir_hash.get_or_init(|| {
                crate::backend::cache::hash_hex(&[format!("{:?}", self.module.module()).as_bytes()])
            });
            stored::CpuCache::entry(ir, &f.name, &cfg)
        });
        let loaded = match &hash {
            Some(h) if read => cache.load(h, &f.name),
            _ => None,
        };
        let c = match loaded {
            Some(c) => {
                self.loads.fetch_add(1, Ordering::Relaxed);
                c
            }
            None => {
                self.compiles.fetch_add(1, Ordering::Relaxed);
                let (c, image) = CompiledKernel::compile_with_image(&self.module, self.handle, cfg)
                    .map_err(|e| jit_refusal(self.name(), e))?;
                if let (Some(h), Some(image)) = (&hash, &image) {
                    cache.store(h, image);
                }
                *self.compile_time.lock() += c.compile_time;
                c
            }
        };
        self.built.get_or_init(|| {
            let mut m = self.base.clone();
            m.code_bytes = Some(c.code_bytes);
            m.code_hash = Some(c.code_hash);
            m.static_shared_bytes = Some(c.static_shared);
            m
        });
        let c = Arc::new(c);
        self.keep(key, c.clone());
        Ok(c)
    }

    /// The manifest with its code facts, compiling the probe specialisation (any 1-D block,
    /// or the pinned one) when no launch has compiled code yet.
    fn built_manifest(&self) -> Result<&KernelManifest, LaunchError> {
        if let Some(m) = self.built.get() {
            return Ok(m);
        }
        let f = self.module.function(self.handle);
        let (block, whole) = probe_block(f, self.wave);
        self.build((block, self.wave, whole, false))?;
        Ok(self.built.get().expect("set by the build"))
    }

    fn name(&self) -> &str {
        &self.module.function(self.handle).name
    }

    fn fault(&self, f: Fault, deadline: Option<Duration>) -> LaunchError {
        let kernel = self.name().to_string();
        match f {
            Fault::OutOfBounds {
                line,
                what,
                index,
                len,
            } => LaunchError::OutOfBounds {
                kernel,
                line,
                what,
                index,
                len,
            },
            Fault::DivByZero { line } => LaunchError::Device {
                kernel,
                message: format!(
                    "line {line}: integer division by zero (undefined behaviour; the CPU backend stops the launch)"
                ),
            },
            Fault::BarrierDivergence => LaunchError::Device {
                kernel,
                message: "barrier divergence: the waves of a workgroup stopped at different barriers (undefined behaviour)".into(),
            },
            Fault::Misaligned { line, index, align } => LaunchError::BrokenAlign {
                kernel,
                line,
                index,
                align,
            },
            Fault::Refused(r) => refusal(kernel, r),
            Fault::Cancelled => LaunchError::Deadline {
                kernel,
                deadline: deadline.unwrap_or_default(),
                cancelled: true,
            },
        }
    }
}

/// The launch error for code the JIT cannot build: a wave's state past what the code
/// addresses is refused as private memory (`XPU-L017`), anything else as no code.
fn jit_refusal(kernel: &str, e: jit::Error) -> LaunchError {
    match e.private {
        Some((need, limit)) => LaunchError::PrivateMemory {
            kernel: kernel.to_string(),
            need,
            limit: format!("the CPU backend addresses at most {limit} bytes of state per wave"),
        },
        None => LaunchError::lowering(kernel, Backend::Cpu, e, false),
    }
}

/// The launch error for a launch the compiled code refused before running.
fn refusal(kernel: String, r: jit::Refusal) -> LaunchError {
    let limit = |what: &str, limit: Option<u64>| match limit {
        Some(available) => format!("the host has {available} bytes available for {what}"),
        None => format!("the host cannot allocate {what}"),
    };
    match r {
        jit::Refusal::Block { block, volume } => LaunchError::TooManyThreads {
            kernel,
            what: "block",
            dims: block,
            limit: format!(
                "a block of {volume} work-items, but the CPU backend runs at most {} per block",
                jit::MAX_BLOCK_VOLUME
            ),
            by_device: true,
        },
        jit::Refusal::State { bytes, limit: l } => LaunchError::PrivateMemory {
            kernel,
            need: bytes,
            limit: limit("a workgroup's private arrays and state", l),
        },
        jit::Refusal::Shared { bytes, limit: l } => LaunchError::SharedMemory {
            kernel,
            need: bytes,
            limit: limit("a workgroup's shared memory", l),
        },
    }
}

impl KernelImpl for CpuKernel {
    /// The code facts (size, hash) are absent until code is compiled: by the first launch, or
    /// by [`ProgramImpl::manifest`].
    fn manifest(&self) -> &KernelManifest {
        self.built.get().unwrap_or(&self.base)
    }

    fn specialisations(&self) -> Option<usize> {
        Some(self.specs.lock().map.len())
    }

    fn launch(
        &self,
        _stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        let kernel = || self.name().to_string();
        let mut code = self.spec(launch.block, false)?;
        let device_error = |e: DeviceError| LaunchError::Device {
            kernel: kernel(),
            message: e.to_string(),
        };
        let mut locked = host::lock_bindings(args).map_err(device_error)?;
        let function = self.module.function(self.handle);
        let mut bufs = Vec::with_capacity(args.len());
        let mut values = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            let mut lanes = [0u64; 16];
            let mut buf = BufRef {
                ptr: std::ptr::null_mut(),
                len: 0,
            };
            match arg {
                DeviceArg::Buffer(b) => {
                    if let Some(Some(view)) = locked.views.get(i) {
                        let base = locked.allocations[view.allocation].as_mut_ptr();
                        let elem = b.elem.size().max(1) as usize;
                        // SAFETY: `lock_bindings` checked the view lies inside its allocation.
                        buf.ptr = unsafe { base.add(view.offset) };
                        buf.len = (view.len / elem) as u64;
                    }
                }
                DeviceArg::Value(v) => {
                    for (l, x) in v.lanes().iter().enumerate().take(16) {
                        lanes[l] = *x;
                    }
                    if let Some(Type::Tag(_)) = function.params.get(i).map(|p| p.ty) {
                        lanes[0] &= 0xffff_ffff;
                    }
                }
            }
            bufs.push(buf);
            values.push(lanes);
        }
        if let Some(e) = self.settings.cap_error.lock().clone() {
            return Err(self.no_code(e.to_string()));
        }
        if let Err(e) = &crate::config::get().cpu_wave {
            return Err(self.no_code(e.to_string()));
        }
        let streaming = self
            .settings
            .streaming
            .lock()
            .clone()
            .map_err(|e| self.no_code(e.to_string()))?;
        let stream = code.can_stream
            && match streaming {
                Mode::Off => false,
                Mode::Force => true,
                Mode::Auto => {
                    let footprint: usize = locked.views.iter().flatten().map(|v| v.len).sum();
                    footprint as u64 > streaming_footprint()
                }
            };
        if stream {
            code = self.spec(launch.block, true)?;
        }
        let watch = crate::deadline::Watch::arm(launch.deadline);
        // The `print`/`assert` buffer, for a kernel with either statement only.
        let debug: Option<Vec<std::sync::atomic::AtomicU32>> =
            (!code.debug_sites.is_empty()).then(|| {
                (0..crate::hal::debug::BUFFER_WORDS)
                    .map(|_| std::sync::atomic::AtomicU32::new(0))
                    .collect()
            });
        // SAFETY: every buffer points into an allocation locked for this call, with its
        // length in elements; the kernel's accesses are bounds-checked against it.
        let r = unsafe {
            code.launch_debug(
                launch.grid,
                launch.block,
                launch.shared_bytes,
                &bufs,
                &values,
                self.settings.cap.load(Ordering::Relaxed).max(1),
                watch.flag(),
                debug.as_deref(),
            )
        };
        drop(watch);
        drop(locked);
        let printed = match debug {
            Some(d) => {
                let words: Vec<u32> = d.into_iter().map(|w| w.into_inner()).collect();
                crate::hal::debug::finish(
                    &code.name,
                    &words,
                    &code.debug_sites,
                    launch.grid,
                    launch.block,
                )
            }
            None => Ok(()),
        };
        r.map_err(|f| self.fault(f, launch.deadline))?;
        printed
    }
}

/// `xpu build FILE --backend cpu [--emit DIR]`: JIT-compiles every kernel of a file for this
/// host (any 1-D block, the kernel's or the host's wave) and reports, per kernel, the wave it
/// was built at, the compile time, the code size, the per-wave state and the static shared
/// memory. `--emit DIR` writes `DIR/<kernel>.manifest` (`key = value` lines, `absent` for what
/// the CPU does not measure). Exit codes: 0 built, 1 a problem in the input or a kernel the
/// CPU cannot lower, 2 usage or I/O.
pub fn aot_build(
    path: &str,
    module: &VerifiedModule,
    emit: Option<&std::path::Path>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let mut failed = false;
    let mut total = Duration::ZERO;
    for (h, f) in module.kernels() {
        let wave = build_wave(f);
        match compile(module, h, PROBE_BLOCK, wave, false, false, true) {
            Ok(c) => {
                total += c.compile_time;
                println!(
                    "{}: wave {}, compiled in {:.2} ms, {} code bytes, {} state bytes per wave, {} barrier regions, {} static shared bytes",
                    f.name,
                    c.wave,
                    c.compile_time.as_secs_f64() * 1e3,
                    c.code_bytes,
                    c.state_bytes,
                    c.barriers + 1,
                    c.static_shared
                );
                if let Some(dir) = emit {
                    let m = format!(
                        "kernel = {}\nbackend = cpu\nbuilt_wave = {}\ndeclared_wave = {}\ncode_bytes = {}\ncompile_ms = {:.3}\nstatic_shared_bytes = {}\nstate_bytes_per_wave = {}\nregisters_per_thread = absent\nspill_store_bytes = absent\n",
                        f.name,
                        c.wave,
                        f.attrs.wave.map_or("absent".to_string(), |(w, _)| w.to_string()),
                        c.code_bytes,
                        c.compile_time.as_secs_f64() * 1e3,
                        c.static_shared,
                        c.state_bytes,
                    );
                    let file =
                        dir.join(format!("{}.manifest", f.name.replace(['<', '>', ','], "_")));
                    if let Err(e) = std::fs::write(&file, m) {
                        eprintln!("xpu build: {}: {e}", file.display());
                        return ExitCode::from(2);
                    }
                }
            }
            Err(e) => {
                eprintln!("{path}: error[{}]: {e}", crate::hal::launch::codes::NO_CODE);
                failed = true;
            }
        }
    }
    println!("total JIT compile time {:.2} ms", total.as_secs_f64() * 1e3);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
