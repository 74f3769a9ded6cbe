//! The AMDGPU code objects of the HIP backend, built once per (kernel, processor, options)
//! and kept in the device code cache ([`crate::backend::cache`], the folder the CUDA PTX, the
//! Vulkan SPIR-V and the CPU code use; issue 21, item 3), so that a second process loads the
//! linked ELF instead of running LLVM and `ld.lld` again.
//!
//! [`code_object`] is the layer below the HIP runtime: it needs LLVM and `ld.lld`, not a
//! device, so it is tested where no AMD GPU is.
//!
//! The device key names the processor (`hip-gfx90a`) and the compiler: LLVM's version, the
//! lowering's version, this crate's, a hash of the lowering's sources and the linker's path.
//! The entry's hash covers the module's IR, the kernel's name, the wave it builds at, the
//! checks and the cooperative-matrix settings. An entry is the code object with its launch
//! ABI header ([`crate::backend::gpu_abi::abi_header`]) and its manifest (JSON); one that
//! does not read back (not an ELF image, no header, a manifest of another kernel, its entry
//! symbol absent from the code) is removed, counted as rejected and built again.

use crate::backend::cache::{hash_hex, CodeCache, DeviceKey};
use crate::backend::common::BuildError;
use crate::backend::gpu_abi::{abi_from_header, abi_header};
use crate::codegen::checks::Checks;
use crate::codegen::llvm::amdgpu::Amdgpu;
use crate::codegen::llvm::codeobj::{self, BuildOptions};
use crate::codegen::llvm::{KernelAbi, KernelRef};
use crate::codegen::Error;
use crate::hal::manifest::KernelManifest;
use crate::ir::{Function, Handle, VerifiedModule};

/// The cache files' extension.
const EXT: &str = "hsaco";

/// The first bytes of an entry's payload, with its format version.
const MAGIC: &[u8; 8] = b"XPUHSA\x00\x01";

/// A kernel's linked code object, its launch ABI and its manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// The AMDGPU code object (ELF).
    pub code: Vec<u8>,
    /// The launch ABI (from a cached entry: its header, with the name and waves from the IR).
    pub abi: KernelAbi,
    /// The kernel's manifest, read from the code object's metadata when it was built.
    pub manifest: KernelManifest,
    /// Read from the disk cache (LLVM did not run).
    pub cached: bool,
}

/// The compiler part of the key: LLVM's version, the lowering's version, this crate's, a
/// hash of the lowering's sources (so that any change to the walk or the AMDGPU target
/// invalidates cached code objects, version bump or not) and the linker.
pub fn compiler_id() -> String {
    static SOURCES: [&str; 20] = [
        include_str!("../codegen/llvm/mod.rs"),
        include_str!("../codegen/llvm/amdgpu.rs"),
        include_str!("../codegen/llvm/atomic.rs"),
        include_str!("../codegen/llvm/atomic_access.rs"),
        include_str!("../codegen/llvm/bits.rs"),
        include_str!("../codegen/llvm/checked.rs"),
        include_str!("../codegen/llvm/codeobj.rs"),
        include_str!("../codegen/llvm/expr.rs"),
        include_str!("../codegen/llvm/math.rs"),
        include_str!("../codegen/llvm/math/arith.rs"),
        include_str!("../codegen/llvm/matrix.rs"),
        include_str!("../codegen/llvm/matrix_dist.rs"),
        include_str!("../codegen/llvm/memory.rs"),
        include_str!("../codegen/llvm/print.rs"),
        include_str!("../codegen/llvm/stmt.rs"),
        include_str!("../codegen/llvm/target.rs"),
        include_str!("../codegen/llvm/wave.rs"),
        include_str!("../codegen/checks.rs"),
        include_str!("../ir/debug.rs"),
        include_str!("gpu_abi.rs"),
    ];
    let mut parts: Vec<&[u8]> = SOURCES.iter().map(|s| s.as_bytes()).collect();
    let linker = codeobj::find_linker()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    parts.push(linker.as_bytes());
    let h = hash_hex(&parts);
    format!(
        "llvm19-l{}-xpu{}-{}",
        crate::codegen::llvm::LOWERING_VERSION,
        env!("CARGO_PKG_VERSION"),
        &h[..12]
    )
}

/// The key code objects for processor `arch` are filed under.
pub fn device_key(arch: &str) -> DeviceKey {
    DeviceKey {
        arch: format!("hip-{arch}"),
        driver: "none".into(),
        compiler: compiler_id(),
    }
}

/// The hash of a module's IR, as the cache entries use it (the Debug form covers every
/// function, type, attribute and span).
pub fn ir_hash(module: &VerifiedModule) -> String {
    hash_hex(&[format!("{:?}", module.module()).as_bytes()])
}

/// An entry's payload: the magic, the ABI header's length (`u32` little-endian) and text,
/// the manifest's length and JSON, the code object.
fn pack(b: &Built) -> Option<Vec<u8>> {
    let header = abi_header(&b.abi);
    let manifest = serde_json::to_vec(&b.manifest).ok()?;
    let mut out = Vec::with_capacity(16 + header.len() + manifest.len() + b.code.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
    out.extend_from_slice(&manifest);
    out.extend_from_slice(&b.code);
    Some(out)
}

/// The payload back, checked to be kernel `f`'s code at wave `wave`; `None` for anything
/// else.
fn unpack(bytes: &[u8], f: &Function, wave: u32) -> Option<Built> {
    fn part(rest: &mut &[u8]) -> Option<Vec<u8>> {
        let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let p = rest.get(4..4usize.checked_add(n)?)?.to_vec();
        *rest = &rest[4 + n..];
        Some(p)
    }
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let header = String::from_utf8(part(&mut rest)?).ok()?;
    let manifest: KernelManifest = serde_json::from_slice(&part(&mut rest)?).ok()?;
    let code = rest.to_vec();
    if !code.starts_with(b"\x7fELF") || manifest.kernel != f.name {
        return None;
    }
    if manifest.built_wave != Some(wave) {
        return None;
    }
    let mut abi = abi_from_header(&header)?;
    if abi.symbol.is_empty()
        || !code
            .windows(abi.symbol.len())
            .any(|w| w == abi.symbol.as_bytes())
    {
        return None;
    }
    // What the header does not carry, from the IR (the launch bounds are not: the HIP
    // launch reads the entry symbol, the report and the sites only, as for a bundle).
    abi.name = f.name.clone();
    abi.wave_width = wave;
    abi.declared_wave = f.attrs.wave.map(|(w, _)| w);
    Some(Built {
        code,
        abi,
        manifest,
        cached: true,
    })
}

/// Kernel `handle` of `module` (whose IR hashes to `ir_hash`, [`ir_hash`]) as a linked code
/// object for processor `arch` with `checks`: from `cache` where it holds one, else lowered
/// by LLVM, linked and stored there. The cooperative-matrix settings are the environment's
/// (`CAJETA_GPU_MATRIX_DIST`, `CAJETA_GPU_MATRIX_IMPL`), as on CUDA.
pub fn code_object(
    module: &VerifiedModule,
    ir_hash: &str,
    handle: Handle<Function>,
    arch: &str,
    checks: Checks,
    cache: &CodeCache,
) -> Result<Built, BuildError> {
    let target = Amdgpu::new(arch)
        .ok_or_else(|| Error::unsupported(format!("unknown AMDGPU processor `{arch}`")))?;
    let f = module.function(handle);
    let wave = target.for_kernel(f.attrs.wave.map(|(w, _)| w)).wave;
    let matrix_dist = crate::config::get().matrix_dist.clone()?;
    let matrix_impl = crate::config::get().matrix_impl.clone()?;
    let key = device_key(arch);
    let options = format!("{checks:?} dist={matrix_dist} impl={matrix_impl:?}");
    let wave_s = wave.to_string();
    let hash = hash_hex(&[
        ir_hash.as_bytes(),
        f.name.as_bytes(),
        wave_s.as_bytes(),
        options.as_bytes(),
    ]);
    if let Some((bytes, _)) = cache.get(&key, &hash, EXT) {
        match unpack(&bytes, f, wave) {
            Some(b) => return Ok(b),
            // An entry whose envelope checked but that is not this kernel's code: removed,
            // and rebuilt below.
            None => cache.reject(&key, &hash, EXT),
        }
    }
    let objs = codeobj::build(
        module,
        &[KernelRef::plain(handle)],
        &target,
        &BuildOptions {
            lower: crate::codegen::llvm::Options {
                checks,
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
    let b = Built {
        code,
        abi: built.abi,
        manifest: built.manifest,
        cached: false,
    };
    if let Some(payload) = pack(&b) {
        cache.put(&key, &hash, EXT, payload);
    }
    Ok(b)
}
