//! The CPU backend's persistent code cache (issue 21, item 3; `docs/cpu-backend.md`, "Code
//! cache"): a specialisation's machine code ([`jit::image::CodeImage`]) is kept in the device
//! code cache ([`crate::backend::cache`], the folder the CUDA PTX and the Vulkan SPIR-V use),
//! so that another process launching the same kernel at the same specialisation loads it
//! instead of lowering and compiling.
//!
//! The device key names the host ISA (triple, Cranelift's flags, the CPU features detected)
//! and the compiler (Cranelift's version, this crate's, a hash of the lowering's sources); the
//! entry's hash covers the module's IR, the kernel's name and the whole [`jit::Config`] (block,
//! wave, whole waves, FMA, streaming, ub-traps). An entry that does not read back as an image
//! for this ISA and kernel, or that the JIT cannot place, is removed, counted as rejected and
//! compiled again; its replacement is stored.

use crate::backend::cache::{hash_hex, CodeCache, DeviceKey};
use crate::codegen::cpu::{self as jit, CompiledKernel};

/// The cache files' extension.
const EXT: &str = "cpu";

/// The compiler part of the CPU's device key: Cranelift's version, this crate's, and a hash
/// of the lowering's sources, so that code an older lowering made is never served after a
/// change to it, version bump or not.
pub fn compiler_id() -> String {
    static SOURCES: [&str; 20] = [
        include_str!("../../codegen/cpu/mod.rs"),
        include_str!("../../codegen/cpu/analysis.rs"),
        include_str!("../../codegen/cpu/image.rs"),
        include_str!("../../codegen/cpu/lanes.rs"),
        include_str!("../../codegen/cpu/rt.rs"),
        include_str!("../../codegen/cpu/stream.rs"),
        include_str!("../../codegen/cpu/lower/atomic.rs"),
        include_str!("../../codegen/cpu/lower/atomic_access.rs"),
        include_str!("../../codegen/cpu/lower/bits.rs"),
        include_str!("../../codegen/cpu/lower/call.rs"),
        include_str!("../../codegen/cpu/lower/debug.rs"),
        include_str!("../../codegen/cpu/lower/driver.rs"),
        include_str!("../../codegen/cpu/lower/expr.rs"),
        include_str!("../../codegen/cpu/lower/mask.rs"),
        include_str!("../../codegen/cpu/lower/memory.rs"),
        include_str!("../../codegen/cpu/lower/mod.rs"),
        include_str!("../../codegen/cpu/lower/stmt.rs"),
        include_str!("../../codegen/cpu/lower/wave.rs"),
        include_str!("../../codegen/checks.rs"),
        include_str!("../../ir/debug.rs"),
    ];
    let parts: Vec<&[u8]> = SOURCES.iter().map(|s| s.as_bytes()).collect();
    let h = hash_hex(&parts);
    format!(
        "cranelift{}-xpu{}-{}",
        cranelift_jit::VERSION,
        env!("CARGO_PKG_VERSION"),
        &h[..12]
    )
}

/// The CPU's device key on this host.
pub fn device_key() -> DeviceKey {
    let isa = jit::host_isa_id();
    let triple = isa.split(' ').next().unwrap_or("unknown");
    DeviceKey {
        arch: format!("cpu-{triple}-{}", &hash_hex(&[isa.as_bytes()])[..12]),
        driver: "none".into(),
        compiler: compiler_id(),
    }
}

/// A disk cache of CPU code and the key its entries are filed under.
#[derive(Debug)]
pub struct CpuCache {
    /// The store (disk only: a program keeps its own code, so that dropped programs leave
    /// nothing behind).
    pub store: CodeCache,
    /// This host's key.
    pub key: DeviceKey,
}

impl CpuCache {
    /// A cache under `dir` (none at all when `None`).
    pub fn new(dir: Option<std::path::PathBuf>) -> Self {
        CpuCache::with_store(CodeCache::disk_only(dir))
    }

    /// A cache over `store`.
    pub fn with_store(store: CodeCache) -> Self {
        CpuCache {
            store,
            key: device_key(),
        }
    }

    /// The entry's hash for `kernel` of the module whose IR hashes to `ir_hash`, built with
    /// `cfg`.
    pub fn entry(ir_hash: &str, kernel: &str, cfg: &jit::Config) -> String {
        hash_hex(&[
            ir_hash.as_bytes(),
            kernel.as_bytes(),
            format!("{cfg:?}").as_bytes(),
        ])
    }

    /// The code stored under `hash` for `kernel`, loaded; an entry that does not load is
    /// removed (and counted as rejected).
    pub fn load(&self, hash: &str, kernel: &str) -> Option<CompiledKernel> {
        self.store.dir()?;
        let (bytes, _) = self.store.get(&self.key, hash, EXT)?;
        let names = jit::helper_names();
        let loaded = jit::image::CodeImage::from_bytes(&bytes, jit::host_isa_id(), kernel, &names)
            .and_then(|img| CompiledKernel::from_image(&img).ok());
        if loaded.is_none() {
            self.store.reject(&self.key, hash, EXT);
        }
        loaded
    }

    /// Stores `image` under `hash` (best effort).
    pub fn store(&self, hash: &str, image: &jit::image::CodeImage) {
        if self.store.dir().is_none() {
            return;
        }
        if let Some(bytes) = image.to_bytes() {
            self.store.put(&self.key, hash, EXT, bytes);
        }
    }
}
