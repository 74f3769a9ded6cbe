//! The CPU backend's code generator: kernels become host code through Cranelift (contract
//! §3.7; DESIGN.md, "CPU lowering notes").
//!
//! A kernel compiles, for one block shape and one wave width `N`, to one function that runs
//! one workgroup: the work-items go `N` at a time as the lanes of a wave, each IR value held
//! per wave as a uniform scalar, an affine `base + lane × stride`, or lane vectors
//! ([`lanes`]). Divergent control flow runs under lane masks (an `if` runs each side with its
//! mask and skips a side with no lane; a loop runs until every lane has left; `break`,
//! `continue` and `return` update masks); uniform control flow is plain branches
//! ([`analysis`] decides which). An `if` that compares an affine index with a uniform bound
//! first tests, with two scalar compares, whether it holds in the whole wave, and then runs its
//! `then` side unmasked, its stride-1 accesses whole vectors after one scalar bounds compare. A store under a partial mask writes lane by lane, never
//! load-blend-store; every buffer, shared and private access is bounds-checked, once per
//! lane vector where the index is affine, and a violation fails the launch naming kernel,
//! line and index (DESIGN.md, Decision 8). Barriers split the body into regions: every
//! variable in scope is spilled to the wave's state at a barrier and reloaded when all waves
//! have arrived. Wave verbs work across the lanes of one wave, respecting the mask. Device
//! helpers are inlined; a tag dispatch becomes a switch of inlined calls.
//!
//! [`CompiledKernel::launch`] runs a grid over a pool of worker threads ([`pool`]).

pub mod analysis;
pub mod image;
pub mod lanes;
mod lower;
pub use lower::MAX_STATE_BYTES;
pub mod pool;
pub mod rt;
pub mod stream;

use crate::ir::{Function, Handle, VerifiedModule};
use cranelift_codegen::ir::{types, AbiParam, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module as _};
use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use lower::Config;

/// A buffer argument as the generated code sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BufRef {
    pub ptr: *mut u8,
    /// Elements.
    pub len: u64,
}

/// What the generated function reads and writes; one per worker, rewritten per workgroup.
#[repr(C)]
pub struct LaunchCtx {
    /// Per kernel parameter (by index); zero for non-buffers.
    pub bufs: *const BufRef,
    /// Per kernel parameter: 16 lanes of 64 bits (a scalar uses lane 0).
    pub args: *const [u64; 16],
    /// The workgroup (x, y, z). On a 1-D grid, `w` ends (exclusive) the run of groups from
    /// `x` that this call may run, and a kernel with a flat loop (`Lower::fast_loop`) leaves
    /// in `x` the last group it ran; any other kernel runs `x` alone and leaves it.
    pub group: [u32; 4],
    pub grid: [u32; 4],
    /// The block (x, y, z) and its volume.
    pub block: [u32; 4],
    pub shared: *mut u8,
    /// Elements of the dynamically sized shared array.
    pub dyn_shared_len: u64,
    /// The waves' state (spilled variables, private arrays, fragments).
    pub state: *mut u8,
    pub state_stride: u64,
    /// At least [`SCRATCH_BYTES`]: where masked-off lanes read and write.
    pub scratch: *mut u8,
    pub err_code: u32,
    pub err_site: u32,
    pub err_index: u64,
    pub err_len: u64,
    /// The launch's cancellation flag ([`crate::deadline`]), read at every loop back-edge:
    /// nonzero stops the launch with [`err::CANCELLED`].
    pub cancel: *const AtomicU32,
    /// The launch's `print`/`assert` buffer ([`crate::ir::debug`]; `BUFFER_WORDS` words),
    /// null for a kernel without either statement.
    pub debug: *const AtomicU32,
}

/// Bytes of the per-worker scratch area.
pub const SCRATCH_BYTES: usize = 256;

/// Offsets of [`LaunchCtx`] fields, for the generated code.
pub(crate) mod ctx_off {
    use super::*;
    pub const BUFS: i32 = offset_of!(LaunchCtx, bufs) as i32;
    pub const ARGS: i32 = offset_of!(LaunchCtx, args) as i32;
    pub const GROUP: i32 = offset_of!(LaunchCtx, group) as i32;
    pub const GRID: i32 = offset_of!(LaunchCtx, grid) as i32;
    pub const BLOCK: i32 = offset_of!(LaunchCtx, block) as i32;
    pub const SHARED: i32 = offset_of!(LaunchCtx, shared) as i32;
    pub const DYN_SHARED_LEN: i32 = offset_of!(LaunchCtx, dyn_shared_len) as i32;
    pub const STATE: i32 = offset_of!(LaunchCtx, state) as i32;
    pub const STATE_STRIDE: i32 = offset_of!(LaunchCtx, state_stride) as i32;
    pub const SCRATCH: i32 = offset_of!(LaunchCtx, scratch) as i32;
    pub const ERR_CODE: i32 = offset_of!(LaunchCtx, err_code) as i32;
    pub const ERR_SITE: i32 = offset_of!(LaunchCtx, err_site) as i32;
    pub const ERR_INDEX: i32 = offset_of!(LaunchCtx, err_index) as i32;
    pub const ERR_LEN: i32 = offset_of!(LaunchCtx, err_len) as i32;
    pub const CANCEL: i32 = offset_of!(LaunchCtx, cancel) as i32;
    pub const DEBUG: i32 = offset_of!(LaunchCtx, debug) as i32;
}

/// Error codes the generated code records in [`LaunchCtx::err_code`].
pub mod err {
    pub const OOB: u32 = 1;
    pub const DIV_ZERO: u32 = 2;
    pub const BARRIER: u32 = 3;
    pub const ALIGN: u32 = 4;
    /// The launch's cancellation flag was set (its deadline passed).
    pub const CANCELLED: u32 = 5;
}

/// A source location the generated code may report, by index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub line: u32,
    pub col: u32,
    /// What was accessed (`buffer y`, `shared tile`, `array acc`, `integer division`).
    pub what: String,
}

pub use crate::codegen::Error;

/// A launch that the generated code stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    OutOfBounds {
        line: u32,
        what: String,
        index: u64,
        len: u64,
    },
    DivByZero {
        line: u32,
    },
    BarrierDivergence,
    Misaligned {
        line: u32,
        index: u64,
        align: u32,
    },
    /// The launch was refused before it ran: a block too large for the code's 32-bit
    /// work-item counters, or worker areas the host cannot hold.
    Refused(Refusal),
    /// The launch's cancellation flag was set (its deadline passed).
    Cancelled,
}

/// Why [`CompiledKernel::launch`] refused a launch before running anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A block of more work-items than [`MAX_BLOCK_VOLUME`].
    Block { block: [u32; 3], volume: u64 },
    /// The waves' state of one workgroup (private arrays, spills), in bytes, past what the
    /// host has available (`limit`: `None` when it is past the address space, or the
    /// allocator refused it).
    State { bytes: u64, limit: Option<u64> },
    /// One workgroup's shared memory, in bytes, as above.
    Shared { bytes: u64, limit: Option<u64> },
}

/// The most work-items a CPU block may have: the generated code counts work-items and waves
/// in 32 bits (`volume + wave - 1` must not wrap at the widest wave, 64).
pub const MAX_BLOCK_VOLUME: u64 = u32::MAX as u64 + 1 - 64;

/// Worker areas below this many bytes in all are not checked against the host's available
/// memory (a read of `/proc/meminfo` per launch would cost more than they do).
const CHECKED_AREA_BYTES: u64 = 64 << 20;

/// The host's vector width for 32-bit lanes (the default wave): 16 with AVX-512, 8 with
/// AVX, 4 with SSE or NEON.
///
/// `XPU_CPU_WAVE=N` (a power of two up to 64) overrides it, for measurements.
pub fn host_simd_width() -> u32 {
    // A malformed value is reported by every CPU launch (`backend::cpu`).
    if let Ok(Some(n)) = crate::config::get().cpu_wave {
        return n;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if std::is_x86_feature_detected!("avx") {
            return 8;
        }
    }
    4
}

/// FNV-1a over `bytes`: a stable 64-bit hash (the same function as the Vulkan backend's).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn host_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        cfg!(target_arch = "aarch64")
    }
}

/// Machine code for one kernel at one block shape and wave width.
pub struct CompiledKernel {
    // Kept alive: the code lives in its memory.
    _module: JitModuleBox,
    entry: unsafe extern "C" fn(*mut LaunchCtx) -> u32,
    pub name: String,
    pub wave: u32,
    /// The block compiled for; `[0, 1, 1]`: any one-dimensional block.
    pub block: [u32; 3],
    /// Per wave; all waves share one area when the kernel has no barrier.
    pub state_bytes: u32,
    pub barriers: u32,
    pub static_shared: u64,
    pub dynamic_shared_elem: Option<u32>,
    pub sites: Vec<Site>,
    /// The `print` and `assert` statements lowered, by the site their records carry.
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
    pub compile_time: Duration,
    pub code_bytes: u64,
    /// FNV-1a of the machine code: the manifest's code hash.
    pub code_hash: u64,
    /// Built with [`Config::streaming`] on, into code that differs for it.
    pub streaming: bool,
    /// Code built with [`Config::streaming`] would differ from this.
    pub can_stream: bool,
}

struct JitModuleBox(Option<JITModule>);

impl Drop for JitModuleBox {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the only function pointer into this module is `CompiledKernel::entry`,
            // which is dropped together with this box.
            unsafe { m.free_memory() };
        }
    }
}

// SAFETY: after `finalize_definitions` the module's code and data are immutable; the entry
// point is a plain function that keeps no state between calls.
unsafe impl Send for JitModuleBox {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for JitModuleBox {}

thread_local! {
    /// The Cranelift IR of the kernels compiled on this thread while [`capture_clif`] runs.
    static CLIF_CAPTURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` and returns its result with the Cranelift IR (before optimisation, as
/// `XPU_JIT_DUMP` prints it) of every kernel [`CompiledKernel::compile`] lowered on this
/// thread meanwhile (the REPL's `:asm K` on the CPU backend).
pub fn capture_clif<R>(f: impl FnOnce() -> R) -> (R, String) {
    let outer = CLIF_CAPTURE.with(|c| c.borrow_mut().replace(String::new()));
    let result = f();
    let text = CLIF_CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (result, text.unwrap_or_default())
}

/// A lowered kernel's CLIF function with the module declarations it refers to, kept by
/// [`CompiledKernel::measure_reload`].
struct KeptClif {
    func: cranelift_codegen::ir::Function,
    decls: Vec<(String, Linkage, cranelift_codegen::ir::Signature)>,
}

thread_local! {
    /// Where [`CompiledKernel::compile_with_image`] leaves a copy of its CLIF function while
    /// [`CompiledKernel::measure_reload`] runs.
    static CLIF_KEEP: std::cell::RefCell<Option<KeptClif>> = const { std::cell::RefCell::new(None) };
    static CLIF_KEEPING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How long each way of making a kernel's code in a second process takes
/// ([`CompiledKernel::measure_reload`]; issue 21, item 3 names the two reloads).
#[derive(Clone, Copy, Debug)]
pub struct ReloadTimes {
    /// The cold path: IR → CLIF lowering and Cranelift's code generation.
    pub cold: Duration,
    /// Option (b): Cranelift's code generation from the lowered CLIF function (a copy in
    /// memory: the time to deserialise a stored one comes on top, so this is its floor).
    pub clif: Duration,
    /// Option (a), kept: reading a stored [`image::CodeImage`] and relocating its machine code
    /// into executable memory ([`CompiledKernel::from_image`]).
    pub image: Duration,
    /// Bytes of the stored image.
    pub image_bytes: usize,
}

/// Whether [`capture_clif`] runs on this thread (a caller that wants the Cranelift IR of a
/// compile then compiles rather than loading cached code).
pub fn capturing_clif() -> bool {
    CLIF_CAPTURE.with(|c| c.borrow().is_some())
}

/// The default configuration on this host for a kernel and launch.
pub fn config(kernel: &Function, block: [u32; 3], launch_wave: Option<u32>) -> Config {
    let wave = kernel
        .attrs
        .wave
        .map(|(w, _)| w)
        .or(launch_wave)
        .unwrap_or_else(host_simd_width);
    Config {
        wave: wave.clamp(1, 64),
        block,
        whole_waves: false,
        fma: host_fma(),
        streaming: false,
        ub_traps: true,
    }
}

/// Why cached code did not load ([`CompiledKernel::from_image`]): the image was refused or
/// the JIT could not place it. The caller compiles instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cached code: {0}")]
pub struct ImageError(pub String);

/// The host's Cranelift ISA with the backend's flags (`verify`: Cranelift's IR verifier on).
fn host_isa(verify: bool) -> Result<cranelift_codegen::isa::OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    flags
        .set("enable_verifier", if verify { "true" } else { "false" })
        .map_err(|e| e.to_string())?;
    cranelift_native::builder()
        .map_err(|e| e.to_string())?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())
}

/// What the code [`CompiledKernel::compile`] makes depends on besides its kernel and
/// [`Config`]: the target triple, Cranelift's shared flags (the verifier's excepted, which
/// changes no code) and the ISA's feature flags as detected on this host. Part of every
/// cache key and of every [`image::CodeImage`].
pub fn host_isa_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| match host_isa(false) {
        Ok(isa) => {
            let shared: Vec<String> = isa
                .flags()
                .iter()
                .filter(|v| v.name != "enable_verifier")
                .map(|v| v.to_string())
                .collect();
            let own: Vec<String> = isa.isa_flags().iter().map(|v| v.to_string()).collect();
            format!(
                "{} cranelift-{} [{}] [{}]",
                isa.triple(),
                cranelift_jit::VERSION,
                shared.join(","),
                own.join(",")
            )
        }
        Err(e) => format!("no-isa {e}"),
    })
}

/// The JIT module every kernel's code lives in: the host ISA, with the runtime helpers'
/// symbols.
fn new_module(verify: bool) -> Result<JITModule, String> {
    let isa = host_isa(verify)?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    for (sym, ptr) in rt::symbols().into_iter().chain(stream::symbols()) {
        jb.symbol(sym, ptr);
    }
    Ok(JITModule::new(jb))
}

/// The names of the runtime helpers generated code may call (the JIT's symbol table).
pub fn helper_names() -> Vec<&'static str> {
    rt::symbols()
        .into_iter()
        .chain(stream::symbols())
        .map(|(s, _)| s)
        .collect()
}

impl CompiledKernel {
    /// Compiles `kernel` of the verified module `vm`, reading each function's expression
    /// types from the verifier's table.
    pub fn compile(
        vm: &VerifiedModule,
        kernel: Handle<Function>,
        cfg: Config,
    ) -> Result<CompiledKernel, Error> {
        Self::compile_with_image(vm, kernel, cfg).map(|(c, _)| c)
    }

    /// [`CompiledKernel::compile`], with the code as an [`image::CodeImage`] for the disk
    /// cache (`None` where a relocation is of a kind images do not carry).
    pub fn compile_with_image(
        vm: &VerifiedModule,
        kernel: Handle<Function>,
        cfg: Config,
    ) -> Result<(CompiledKernel, Option<image::CodeImage>), Error> {
        // Shared-tile layouts are placed as declared (`ir::layout`).
        let laid = vm.with_layouts();
        let vm = laid.as_ref().unwrap_or(vm);
        let module = vm.module();
        let types = |h: Handle<Function>| vm.expr_types(h);
        let t0 = Instant::now();
        let f = &module.functions[kernel];
        let name = f.name.clone();
        let codegen = |message: String| Error::internal(message).in_function(&name);
        if !cfg.wave.is_power_of_two() {
            return Err(Error::new(
                crate::codegen::codes::WAVE,
                format!("a wave of {} lanes (a power of two is needed)", cfg.wave),
            )
            .in_function(&name));
        }
        // Cranelift's IR verifier costs about 30 % of the compile time (sgemm 6.4 → 4.4 ms):
        // on in debug builds and with `XPU_JIT_VERIFY=1`, where a lowering bug is then a
        // `codes::INTERNAL` refusal rather than bad code.
        let diag = crate::config::get()
            .jit
            .clone()
            .map_err(|e| codegen(e.to_string()))?;
        let verify = cfg!(debug_assertions) || diag.verify;
        let mut jm = new_module(verify).map_err(codegen)?;
        let mut ctx = jm.make_context();
        let mut fctx = FunctionBuilderContext::new();
        let mut sig = jm.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I32));
        let id = jm
            .declare_function("kernel", Linkage::Local, &sig)
            .map_err(|e| codegen(e.to_string()))?;
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        let lowered = {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let lw = lower::Lower::new(b, &mut jm, module, kernel, cfg, &types);
            lw.run(kernel)?
        };
        if CLIF_KEEPING.with(|k| k.get()) {
            let decls = jm
                .declarations()
                .get_functions()
                .map(|(_, d)| {
                    (
                        d.name.clone().unwrap_or_default(),
                        d.linkage,
                        d.signature.clone(),
                    )
                })
                .collect();
            let func = ctx.func.clone();
            CLIF_KEEP.with(|k| *k.borrow_mut() = Some(KeptClif { func, decls }));
        }
        let sites = lowered.sites.clone();
        let debug_sites = lowered.debug_sites.clone();
        let t_lower = t0.elapsed();
        if diag.dump {
            eprintln!("{}", ctx.func.display());
        }
        CLIF_CAPTURE.with(|c| {
            if let Some(text) = c.borrow_mut().as_mut() {
                text.push_str(&ctx.func.display().to_string());
            }
        });
        let asm = diag.asm;
        ctx.set_disasm(asm);
        jm.define_function(id, &mut ctx).map_err(|e| {
            codegen(match e {
                cranelift_module::ModuleError::Compilation(c) => format!("{c:?}"),
                e => e.to_string(),
            })
        })?;
        if let Some(path) = &diag.bin {
            if let Some(c) = ctx.compiled_code() {
                let _ = std::fs::write(path, c.code_buffer());
            }
        }
        if asm {
            if let Some(text) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
                eprintln!("{text}");
            }
        }
        let code_bytes = ctx
            .compiled_code()
            .map(|c| c.code_info().total_size as u64)
            .unwrap_or(0);
        let code_hash = ctx
            .compiled_code()
            .map(|c| fnv1a(c.code_buffer()))
            .unwrap_or(0);
        if diag.time {
            eprintln!(
                "jit {}: lowering {:?}, codegen {:?}, {} IR instructions, {} code bytes",
                name,
                t_lower,
                t0.elapsed() - t_lower,
                ctx.func.dfg.num_insts(),
                code_bytes
            );
        }
        let dynamic_shared_elem = f
            .shared
            .iter()
            .find(|(_, s)| s.len.is_none())
            .map(|(_, s)| s.elem.size());
        let image = ctx.compiled_code().and_then(|c| {
            let mut relocs = Vec::new();
            for r in c.buffer.relocs() {
                let m = cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, id);
                let target = match m.name {
                    cranelift_module::ModuleRelocTarget::User {
                        namespace: 0,
                        index,
                    } => image::Target::Symbol(
                        jm.declarations()
                            .get_function_decl(cranelift_module::FuncId::from_u32(index))
                            .name
                            .clone()?,
                    ),
                    cranelift_module::ModuleRelocTarget::LibCall(l) => image::Target::LibCall(l),
                    cranelift_module::ModuleRelocTarget::FunctionOffset(fid, off) if fid == id => {
                        image::Target::SelfOffset(off)
                    }
                    _ => return None,
                };
                image::kind_index(m.kind)?;
                relocs.push(image::ImageReloc {
                    offset: m.offset,
                    kind: m.kind,
                    target,
                    addend: m.addend,
                });
            }
            Some(image::CodeImage {
                isa: host_isa_id().to_string(),
                name: name.clone(),
                wave: cfg.wave,
                block: cfg.block,
                state_bytes: lowered.state_bytes,
                barriers: lowered.barriers,
                static_shared: lowered.static_shared,
                dynamic_shared_elem,
                streaming: cfg.streaming && lowered.can_stream,
                can_stream: lowered.can_stream,
                align: c.buffer.alignment as u64,
                code: c.code_buffer().to_vec(),
                relocs,
                sites: sites.clone(),
                debug_sites: debug_sites.clone(),
            })
        });
        jm.clear_context(&mut ctx);
        jm.finalize_definitions()
            .map_err(|e| codegen(e.to_string()))?;
        let ptr = jm.get_finalized_function(id);
        // SAFETY: the function was built with exactly this signature (one pointer, one i32
        // result) in the host's default calling convention, which is `extern "C"`.
        let entry = unsafe {
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*mut LaunchCtx) -> u32>(ptr)
        };
        Ok((
            CompiledKernel {
                _module: JitModuleBox(Some(jm)),
                entry,
                name,
                wave: cfg.wave,
                block: cfg.block,
                state_bytes: lowered.state_bytes,
                barriers: lowered.barriers,
                static_shared: lowered.static_shared,
                dynamic_shared_elem,
                sites,
                debug_sites,
                compile_time: t0.elapsed(),
                code_bytes,
                code_hash,
                streaming: cfg.streaming && lowered.can_stream,
                can_stream: lowered.can_stream,
            },
            image,
        ))
    }

    /// Times the cold compile of `kernel` and the two ways a second process could make its
    /// code again (the measurement behind keeping [`image::CodeImage`]s; `docs/cpu-backend.md`).
    pub fn measure_reload(
        vm: &VerifiedModule,
        kernel: Handle<Function>,
        cfg: Config,
    ) -> Result<ReloadTimes, Error> {
        let module = vm.module();
        let name = module.functions[kernel].name.clone();
        let fail = |message: String| Error::internal(message).in_function(&name);
        CLIF_KEEPING.with(|k| k.set(true));
        let t = Instant::now();
        let r = Self::compile_with_image(vm, kernel, cfg);
        let cold = t.elapsed();
        CLIF_KEEPING.with(|k| k.set(false));
        let kept = CLIF_KEEP.with(|k| k.borrow_mut().take());
        let (_, img) = r?;
        let kept = kept.ok_or_else(|| fail("no CLIF kept".into()))?;
        let img = img.ok_or_else(|| fail("no image".into()))?;
        // (b): the same declarations in a new module, then Cranelift from the CLIF.
        let t = Instant::now();
        let mut jm = new_module(false).map_err(&fail)?;
        let mut id = None;
        for (n, linkage, sig) in &kept.decls {
            let fid = jm
                .declare_function(n, *linkage, sig)
                .map_err(|e| fail(e.to_string()))?;
            id.get_or_insert(fid);
        }
        let id = id.ok_or_else(|| fail("no declarations".into()))?;
        let mut ctx = jm.make_context();
        ctx.func = kept.func.clone();
        jm.define_function(id, &mut ctx)
            .map_err(|e| fail(e.to_string()))?;
        jm.clear_context(&mut ctx);
        jm.finalize_definitions().map_err(|e| fail(e.to_string()))?;
        let _ = jm.get_finalized_function(id);
        let clif = t.elapsed();
        // SAFETY: no pointer into the module's code was kept.
        unsafe { jm.free_memory() };
        // (a): the stored bytes read back and placed.
        let bytes = img.to_bytes().ok_or_else(|| fail("image".into()))?;
        let t = Instant::now();
        let back = image::CodeImage::from_bytes(&bytes, host_isa_id(), &name, &helper_names())
            .ok_or_else(|| fail("image does not read back".into()))?;
        let loaded = Self::from_image(&back).map_err(|e| fail(e.to_string()))?;
        let image = t.elapsed();
        drop(loaded);
        Ok(ReloadTimes {
            cold,
            clif,
            image,
            image_bytes: bytes.len(),
        })
    }

    /// Loads code [`CompiledKernel::compile_with_image`] made, in this or another process:
    /// the image's code is copied into executable memory of a new JIT module and its
    /// relocations applied against this process's runtime helpers. An image for another ISA
    /// is refused ([`image::CodeImage::from_bytes`] checks the rest).
    pub fn from_image(img: &image::CodeImage) -> Result<CompiledKernel, ImageError> {
        let t0 = Instant::now();
        if img.isa != host_isa_id() {
            return Err(ImageError("made for another ISA".into()));
        }
        let mut jm = new_module(false).map_err(ImageError)?;
        let mut sig = jm.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I32));
        let id = jm.declare_function("kernel", Linkage::Local, &sig)?;
        // An import's signature only matters to code that calls it through CLIF; the bytes
        // already hold the calls, so the helpers are declared with an empty one.
        let helper = jm.make_signature();
        let mut relocs = Vec::with_capacity(img.relocs.len());
        for r in &img.relocs {
            let name = match &r.target {
                image::Target::Symbol(s) => {
                    let fid = jm.declare_function(s, Linkage::Import, &helper)?;
                    cranelift_module::ModuleRelocTarget::user(0, fid.as_u32())
                }
                image::Target::LibCall(l) => cranelift_module::ModuleRelocTarget::LibCall(*l),
                image::Target::SelfOffset(o) => {
                    cranelift_module::ModuleRelocTarget::FunctionOffset(id, *o)
                }
            };
            relocs.push(cranelift_module::ModuleReloc {
                offset: r.offset,
                kind: r.kind,
                name,
                addend: r.addend,
            });
        }
        jm.define_function_bytes(id, img.align, &img.code, &relocs)?;
        jm.finalize_definitions()?;
        let ptr = jm.get_finalized_function(id);
        // SAFETY: the image is code `compile_with_image` made for this ISA (checked above and
        // by the cache's envelope) with exactly this signature, relocated against this
        // process's helpers.
        let entry = unsafe {
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*mut LaunchCtx) -> u32>(ptr)
        };
        Ok(CompiledKernel {
            _module: JitModuleBox(Some(jm)),
            entry,
            name: img.name.clone(),
            wave: img.wave,
            block: img.block,
            state_bytes: img.state_bytes,
            barriers: img.barriers,
            static_shared: img.static_shared,
            dynamic_shared_elem: img.dynamic_shared_elem,
            sites: img.sites.clone(),
            debug_sites: img.debug_sites.clone(),
            compile_time: t0.elapsed(),
            code_bytes: img.code.len() as u64,
            code_hash: fnv1a(&img.code),
            streaming: img.streaming,
            can_stream: img.can_stream,
        })
    }

    fn fault(&self, ctx: &LaunchCtx) -> Fault {
        let site = self.sites.get(ctx.err_site as usize);
        let line = site.map(|s| s.line).unwrap_or(0);
        match ctx.err_code {
            err::OOB => Fault::OutOfBounds {
                line,
                what: site.map(|s| s.what.clone()).unwrap_or_default(),
                index: ctx.err_index,
                len: ctx.err_len,
            },
            err::DIV_ZERO => Fault::DivByZero { line },
            err::ALIGN => Fault::Misaligned {
                line,
                index: ctx.err_index,
                align: ctx.err_len as u32,
            },
            err::CANCELLED => Fault::Cancelled,
            _ => Fault::BarrierDivergence,
        }
    }

    /// Runs the grid: `bufs` and `args` are per kernel parameter. Workgroups are spread over
    /// at most `workers` threads of the shared pool. Once `cancel` is nonzero (another thread
    /// sets it) the launch stops at the next loop back-edge or workgroup with
    /// [`Fault::Cancelled`].
    ///
    /// # Safety
    /// Every `BufRef` must point to `len` elements of its parameter's element type, valid for
    /// reads and (for writable parameters) writes for the whole call, with no other access
    /// meanwhile.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        bufs: &[BufRef],
        args: &[[u64; 16]],
        workers: usize,
        cancel: &AtomicU32,
    ) -> Result<(), Fault> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.launch_debug(grid, block, shared_bytes, bufs, args, workers, cancel, None) }
    }

    /// [`CompiledKernel::launch`] with the buffer the kernel's `print` and `assert`
    /// statements write ([`crate::ir::debug`]: at least `BUFFER_WORDS` words, zero), which a
    /// kernel with [`CompiledKernel::debug_sites`] needs (without one its statements write
    /// nothing).
    ///
    /// # Safety
    /// As [`CompiledKernel::launch`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_debug(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        bufs: &[BufRef],
        args: &[[u64; 16]],
        workers: usize,
        cancel: &AtomicU32,
        debug: Option<&[AtomicU32]>,
    ) -> Result<(), Fault> {
        let debug = debug.filter(|d| d.len() >= crate::ir::debug::BUFFER_WORDS as usize);
        let total = grid.iter().map(|&g| g as u64).product::<u64>();
        if total == 0 {
            return Ok(());
        }
        let volume = block.iter().map(|&b| b as u64).product::<u64>();
        if volume > MAX_BLOCK_VOLUME {
            return Err(Fault::Refused(Refusal::Block { block, volume }));
        }
        let dyn_len = match self.dynamic_shared_elem {
            Some(sz) if sz > 0 => (shared_bytes / sz) as u64,
            _ => 0,
        };
        // Every size in 64 bits, checked: nothing a launch asks for may wrap.
        let shared_total = self.static_shared + shared_bytes as u64;
        let state_stride = if self.barriers > 0 {
            self.state_bytes as u64
        } else {
            0
        };
        let waves = volume.div_ceil(self.wave as u64);
        let state_total = if self.barriers > 0 {
            self.state_bytes as u64 * waves
        } else {
            self.state_bytes as u64
        };
        let too_big = |bytes: u64| bytes > isize::MAX as u64 / 2;
        if too_big(state_total) {
            return Err(Fault::Refused(Refusal::State {
                bytes: state_total,
                limit: None,
            }));
        }
        if too_big(shared_total) {
            return Err(Fault::Refused(Refusal::Shared {
                bytes: shared_total,
                limit: None,
            }));
        }
        let mut threads = workers.max(1).min(total as usize);
        let per_worker = state_total + shared_total;
        if per_worker.saturating_mul(threads as u64) > CHECKED_AREA_BYTES {
            if let Some(available) = crate::facts::host_available_memory() {
                // As many workers as the host holds the areas of (they are allocated per
                // worker and kept); none is a refusal naming the larger area.
                let fit = available / per_worker.max(1);
                if fit == 0 {
                    return Err(Fault::Refused(if state_total >= shared_total {
                        Refusal::State {
                            bytes: state_total,
                            limit: Some(available),
                        }
                    } else {
                        Refusal::Shared {
                            bytes: shared_total,
                            limit: Some(available),
                        }
                    }));
                }
                threads = threads.min(fit as usize);
            }
        }
        let (state_total, shared_total) = (state_total as usize, shared_total as usize);
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let fault: parking_lot::Mutex<Option<(u64, Fault)>> = parking_lot::Mutex::new(None);
        // Malformed, the setting was already refused by the buffers' allocation.
        let poison = crate::config::get().poison.clone().unwrap_or(false);
        // Chunks small enough to balance, large enough to amortise the counter; streaming
        // code's chunks also long enough that the prefetches' run-in at a chunk's start and
        // their run-out past its end (into another worker's chunk) are a small part.
        let most = if self.streaming {
            (stream::CHUNK_ITEMS / volume).max(64)
        } else {
            64
        };
        let chunk = (total / (threads as u64 * 8)).clamp(1, most);
        let one_d = grid[1] == 1 && grid[2] == 1;
        let bufs = SendPtr(bufs.as_ptr());
        let args = SendPtr(args.as_ptr());
        let work = |_: usize| {
            let areas =
                pool::with_worker_memory(state_total, shared_total, |state, shared, scratch| {
                    let mut ctx = LaunchCtx {
                        bufs: bufs.get(),
                        args: args.get(),
                        group: [0; 4],
                        grid: [grid[0], grid[1], grid[2], 0],
                        block: [block[0], block[1], block[2], volume as u32],
                        shared,
                        dyn_shared_len: dyn_len,
                        state,
                        state_stride,
                        scratch,
                        err_code: 0,
                        err_site: 0,
                        err_index: 0,
                        err_len: 0,
                        cancel,
                        debug: debug.map_or(std::ptr::null(), |d| d.as_ptr()),
                    };
                    'chunks: loop {
                        if stop.load(Ordering::Relaxed) {
                            break 'chunks;
                        }
                        if cancel.load(Ordering::Relaxed) != 0 {
                            let mut slot = fault.lock();
                            if slot.is_none() {
                                *slot = Some((u64::MAX, Fault::Cancelled));
                            }
                            stop.store(true, Ordering::Relaxed);
                            break 'chunks;
                        }
                        let first = next.fetch_add(chunk, Ordering::Relaxed);
                        if first >= total {
                            break 'chunks;
                        }
                        let end = (first + chunk).min(total);
                        let mut g = first;
                        while g < end {
                            ctx.group = if one_d {
                                // No 64-bit divisions per workgroup for the common 1-D grid; and
                                // `group.w` offers the rest of the chunk to a kernel with a group
                                // loop (`Lower::fast_loop`), which leaves in `group.x` the last
                                // group it ran.
                                [g as u32, 0, 0, end as u32]
                            } else {
                                let gx = (g % grid[0] as u64) as u32;
                                let gy = ((g / grid[0] as u64) % grid[1] as u64) as u32;
                                let gz = (g / (grid[0] as u64 * grid[1] as u64)) as u32;
                                [gx, gy, gz, 0]
                            };
                            if poison && shared_total > 0 {
                                // SAFETY: the worker's shared area holds `shared_total` bytes.
                                unsafe { std::ptr::write_bytes(shared, 0xFF, shared_total) };
                            }
                            // SAFETY: the context points at live buffers (the caller's contract)
                            // and at this worker's state, shared and scratch areas, sized for this
                            // kernel.
                            let r = unsafe { (self.entry)(&mut ctx) };
                            if one_d {
                                g = g.max(ctx.group[0] as u64);
                            }
                            if r != 0 {
                                let f = self.fault(&ctx);
                                let mut slot = fault.lock();
                                // The lowest workgroup's fault, for a stable report.
                                if slot.as_ref().is_none_or(|(at, _)| g < *at) {
                                    *slot = Some((g, f));
                                }
                                stop.store(true, Ordering::Relaxed);
                                break 'chunks;
                            }
                            g += 1;
                        }
                    }
                    if self.streaming {
                        // The non-temporal stores, visible before the pool hands the launch back.
                        stream::fence();
                    }
                });
            if let Err(refused) = areas {
                let f = Fault::Refused(match refused {
                    pool::AreaRefused::State(bytes) => Refusal::State {
                        bytes: bytes as u64,
                        limit: None,
                    },
                    pool::AreaRefused::Shared(bytes) => Refusal::Shared {
                        bytes: bytes as u64,
                        limit: None,
                    },
                });
                // Before any workgroup of this worker: reported unless one faulted.
                let mut slot = fault.lock();
                if slot.is_none() {
                    *slot = Some((u64::MAX, f));
                }
                stop.store(true, Ordering::Relaxed);
            }
        };
        pool::run(threads, &work);
        match fault.into_inner() {
            Some((_, f)) => Err(f),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Copy)]
struct SendPtr<T>(*const T);
// SAFETY: the pointee outlives the launch (the caller's contract) and is only read.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *const T {
        self.0
    }
}
