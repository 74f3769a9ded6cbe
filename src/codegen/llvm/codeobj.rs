//! AMDGPU code objects (contract §3.1, §3.6, §4): kernels lowered by the shared walk with the
//! [`Amdgpu`] target, linked with `ld.lld -shared` into an HSA code object, and the kernel
//! descriptor metadata read back from the object into each kernel's [`KernelManifest`].
//!
//! - **One code object per wave width.** The width is a subtarget feature
//!   (`+wavefrontsize32/64`), so kernels of one module that build at different widths are
//!   lowered in separate groups, each its own code object ([`build`]).
//! - **The linker** is `ld.lld`, found through `XPU_LLD`, beside the LLVM installation the
//!   crate was built against, or on `PATH` as `ld.lld-19` / `ld.lld` ([`find_linker`]). A
//!   machine without it is not the kernel's failure (§3.6): the object is kept, the code
//!   object is absent, the manifest's measured fields stay `None`, and [`CodeObject::note`]
//!   says "no assembler/linker".
//! - **The metadata** is the `NT_AMDGPU_METADATA` note (type 32, owner `AMDGPU`), a MessagePack
//!   map whose `amdhsa.kernels` entries carry `.vgpr_count`, `.sgpr_count`,
//!   `.private_segment_fixed_size`, `.group_segment_fixed_size`, `.wavefront_size`,
//!   `.max_flat_workgroup_size` and the spill counts. It is parsed here in Rust (`object` for
//!   the ELF, `rmpv` for MessagePack); no `llvm-readobj` is needed. A key the note lacks is
//!   `None`, never zero.

use crate::codegen::llvm::amdgpu::Amdgpu;
use crate::codegen::llvm::{self, Error, KernelAbi, KernelRef};
use crate::hal::manifest::KernelManifest;
use crate::hal::Backend;
use crate::ir;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Diagnostic codes of the code-object layer.
pub mod codes {
    /// No `ld.lld`: a note, not a kernel failure (§3.6).
    pub const NO_LINKER: &str = "XPU-A01";
    /// `ld.lld` failed on an object LLVM emitted (a bug in the lowering or the toolchain).
    pub const LINK: &str = "XPU-A02";
    /// The code object's metadata note is missing or malformed.
    pub const METADATA: &str = "XPU-A03";
}

/// Why a code object could not be made or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeObjError {
    #[error("note[{}]: no assembler/linker: ld.lld was not found (XPU_LLD, beside LLVM, or on PATH); the object is kept, the code object and its measured facts are absent", codes::NO_LINKER)]
    NoLinker,
    #[error("error[{}]: ld.lld: {message}", codes::LINK)]
    Link { message: String },
    #[error("error[{}]: code object metadata: {message}", codes::METADATA)]
    Metadata { message: String },
}

impl CodeObjError {
    pub fn code(&self) -> &'static str {
        match self {
            CodeObjError::NoLinker => codes::NO_LINKER,
            CodeObjError::Link { .. } => codes::LINK,
            CodeObjError::Metadata { .. } => codes::METADATA,
        }
    }
}

/// `ld.lld`, if this machine has it: `XPU_LLD`, then `<LLVM prefix>/bin/ld.lld`, then
/// `ld.lld-19` and `ld.lld` on `PATH`.
pub fn find_linker() -> Option<PathBuf> {
    let config = crate::config::get();
    if let Some(p) = &config.lld {
        return p.is_file().then(|| p.clone());
    }
    let prefix = option_env!("LLVM_SYS_191_PREFIX").unwrap_or("/usr/lib/llvm-19");
    let beside = Path::new(prefix).join("bin/ld.lld");
    if beside.is_file() {
        return Some(beside);
    }
    let path = config.path.as_ref()?;
    for name in ["ld.lld-19", "ld.lld"] {
        for dir in std::env::split_paths(path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Links one AMDGPU object into a code object (`ld.lld -shared`), with the linker at
/// `linker` (a path that is not a file means no linker) or else the one [`find_linker`] finds.
pub fn link(object: &[u8], linker: Option<&Path>) -> Result<Vec<u8>, CodeObjError> {
    let lld = match linker {
        Some(p) if p.is_file() => p.to_path_buf(),
        Some(_) => return Err(CodeObjError::NoLinker),
        None => find_linker().ok_or(CodeObjError::NoLinker)?,
    };
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "xpu-codeobj-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |what: &str, e: std::io::Error| CodeObjError::Link {
        message: format!("{what}: {e}"),
    };
    std::fs::create_dir_all(&dir).map_err(|e| io("temporary folder", e))?;
    let result = (|| {
        let obj = dir.join("kernels.o");
        let out = dir.join("kernels.hsaco");
        std::fs::write(&obj, object).map_err(|e| io("writing the object", e))?;
        let run = Command::new(&lld)
            .arg("-shared")
            .arg("-o")
            .arg(&out)
            .arg(&obj)
            .output()
            .map_err(|e| io(&format!("running {}", lld.display()), e))?;
        if !run.status.success() {
            return Err(CodeObjError::Link {
                message: String::from_utf8_lossy(&run.stderr).trim().to_string(),
            });
        }
        std::fs::read(&out).map_err(|e| io("reading the code object", e))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// One kernel's entry in a code object's metadata (the kernel descriptor's facts). Every
/// field is what the note says; a key it lacks is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// `.name`: the kernel's symbol in the source.
    pub name: String,
    /// `.symbol`: the descriptor's symbol (`<name>.kd`).
    pub symbol: String,
    pub vgpr_count: Option<u32>,
    /// Accumulation registers (gfx908/gfx90a/gfx94x); share the VGPR file on gfx90a+.
    pub agpr_count: Option<u32>,
    pub sgpr_count: Option<u32>,
    pub vgpr_spill_count: Option<u32>,
    pub sgpr_spill_count: Option<u32>,
    /// Scratch bytes a work-item needs (stack and spills).
    pub private_segment_fixed_size: Option<u32>,
    /// LDS bytes a workgroup needs, not counting the dynamic part given at launch.
    pub group_segment_fixed_size: Option<u32>,
    pub wavefront_size: Option<u32>,
    pub max_flat_workgroup_size: Option<u32>,
    pub kernarg_segment_size: Option<u32>,
    pub kernarg_segment_align: Option<u32>,
    pub uses_dynamic_stack: Option<bool>,
}

const NT_AMDGPU_METADATA: u32 = 32;

/// Reads the kernels' descriptors from a code object's `NT_AMDGPU_METADATA` note.
pub fn read_metadata(code: &[u8]) -> Result<Vec<KernelDescriptor>, CodeObjError> {
    // `object` reads the ELF structures in place and needs them 8-byte aligned; a code object
    // taken from a bundle's memory map may lie at any offset: it is read from an aligned copy.
    if code.as_ptr() as usize % 8 != 0 {
        let mut words = vec![0u64; code.len().div_ceil(8)];
        // SAFETY: the byte view covers exactly the vector's memory, which every byte pattern
        // is valid for; `words` outlives it.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8)
        };
        bytes[..code.len()].copy_from_slice(code);
        return read_aligned_metadata(&bytes[..code.len()]);
    }
    read_aligned_metadata(code)
}

/// [`read_metadata`] of a code object that starts 8-byte aligned.
fn read_aligned_metadata(code: &[u8]) -> Result<Vec<KernelDescriptor>, CodeObjError> {
    use object::read::elf::{FileHeader, SectionHeader};
    let bad = |m: String| CodeObjError::Metadata { message: m };
    let header = object::elf::FileHeader64::<object::Endianness>::parse(code)
        .map_err(|e| bad(format!("not a 64-bit ELF: {e}")))?;
    let endian = header
        .endian()
        .map_err(|e| bad(format!("ELF endianness: {e}")))?;
    let sections = header
        .sections(endian, code)
        .map_err(|e| bad(format!("ELF sections: {e}")))?;
    for section in sections.iter() {
        let Some(mut notes) = section
            .notes(endian, code)
            .map_err(|e| bad(format!("ELF notes: {e}")))?
        else {
            continue;
        };
        while let Some(note) = notes.next().map_err(|e| bad(format!("ELF note: {e}")))? {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                return parse_msgpack(note.desc());
            }
        }
    }
    Err(bad("no NT_AMDGPU_METADATA note".into()))
}

fn parse_msgpack(desc: &[u8]) -> Result<Vec<KernelDescriptor>, CodeObjError> {
    let bad = |m: String| CodeObjError::Metadata { message: m };
    let v =
        rmpv::decode::read_value(&mut &desc[..]).map_err(|e| bad(format!("MessagePack: {e}")))?;
    let get = |map: &rmpv::Value, key: &str| -> Option<rmpv::Value> {
        map.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    };
    let Some(kernels) = get(&v, "amdhsa.kernels") else {
        return Err(bad("no amdhsa.kernels".into()));
    };
    let Some(kernels) = kernels.as_array() else {
        return Err(bad("amdhsa.kernels is not an array".into()));
    };
    let mut out = Vec::new();
    for k in kernels {
        let num = |key: &str| {
            get(k, key)
                .and_then(|v| v.as_u64())
                .and_then(|n| u32::try_from(n).ok())
        };
        let text = |key: &str| get(k, key).and_then(|v| v.as_str().map(str::to_string));
        out.push(KernelDescriptor {
            name: text(".name").unwrap_or_default(),
            symbol: text(".symbol").unwrap_or_default(),
            vgpr_count: num(".vgpr_count"),
            agpr_count: num(".agpr_count"),
            sgpr_count: num(".sgpr_count"),
            vgpr_spill_count: num(".vgpr_spill_count"),
            sgpr_spill_count: num(".sgpr_spill_count"),
            private_segment_fixed_size: num(".private_segment_fixed_size"),
            group_segment_fixed_size: num(".group_segment_fixed_size"),
            wavefront_size: num(".wavefront_size"),
            max_flat_workgroup_size: num(".max_flat_workgroup_size"),
            kernarg_segment_size: num(".kernarg_segment_size"),
            kernarg_segment_align: num(".kernarg_segment_align"),
            uses_dynamic_stack: get(k, ".uses_dynamic_stack").and_then(|v| v.as_bool()),
        });
    }
    Ok(out)
}

/// One kernel in a code object.
#[derive(Clone, Debug)]
pub struct BuiltKernel {
    pub abi: KernelAbi,
    /// The descriptor from the code object's metadata; `None` without a linker.
    pub descriptor: Option<KernelDescriptor>,
    pub manifest: KernelManifest,
}

/// The device code of the kernels that build at one wave width.
#[derive(Clone, Debug)]
pub struct CodeObject {
    /// The processor (`gfx90a`).
    pub arch: String,
    /// The wave width every kernel here was built at.
    pub wave: u32,
    /// The relocatable object LLVM emitted.
    pub object: Vec<u8>,
    /// The linked code object (`hipModuleLoadData` takes it); `None` without a linker.
    pub code: Option<Vec<u8>>,
    /// The assembly LLVM's target machine wrote, when asked for.
    pub assembly: Option<String>,
    pub kernels: Vec<BuiltKernel>,
    /// Why the code object is absent, if it is (§3.6: "no assembler/linker").
    pub note: Option<CodeObjError>,
}

/// What to build besides the code object.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub lower: llvm::Options,
    /// Also write the assembly (a second code generation from the same IR).
    pub assembly: bool,
    /// The linker to use instead of [`find_linker`]'s (a path that is not a file stands for
    /// a machine without one).
    pub linker: Option<PathBuf>,
}

/// Why a build failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A kernel did not lower (refused by name, or an LLVM failure).
    #[error("{0}")]
    Lower(Error),
    /// The linker or the metadata failed on code LLVM produced.
    #[error("{0}")]
    CodeObject(CodeObjError),
}

impl BuildError {
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::Lower(e) => e.code,
            BuildError::CodeObject(e) => e.code(),
        }
    }
}

/// Lowers `kernels` of `module` (verified) for `target`'s processor: one code object per
/// wave width the kernels build at (each kernel at its `@wave`, else the processor's
/// default; a declared width the processor cannot build is refused with `XPU-L03`).
pub fn build(
    module: &ir::Module,
    kernels: &[KernelRef],
    target: &Amdgpu,
    opts: &BuildOptions,
) -> Result<Vec<CodeObject>, BuildError> {
    // Group by the width each kernel gets, in first-seen order.
    let mut groups: Vec<(Amdgpu, Vec<KernelRef>)> = Vec::new();
    for k in kernels {
        let declared = module
            .functions
            .try_get(k.function)
            .and_then(|f| f.attrs.wave.map(|(w, _)| w));
        let t = target.for_kernel(declared);
        match groups.iter_mut().find(|(g, _)| g.wave == t.wave) {
            Some((_, ks)) => ks.push(k.clone()),
            None => groups.push((t, vec![k.clone()])),
        }
    }
    let mut out = Vec::new();
    for (t, ks) in groups {
        let t = Amdgpu {
            assembly: false,
            ..t
        };
        let lowered = llvm::lower(module, &ks, &t, &opts.lower).map_err(BuildError::Lower)?;
        let assembly = if opts.assembly {
            let ta = Amdgpu {
                assembly: true,
                ..t.clone()
            };
            let a = llvm::lower(module, &ks, &ta, &opts.lower).map_err(BuildError::Lower)?;
            Some(a.text())
        } else {
            None
        };
        let (code, note) = match link(&lowered.code, opts.linker.as_deref()) {
            Ok(c) => (Some(c), None),
            Err(CodeObjError::NoLinker) => (None, Some(CodeObjError::NoLinker)),
            Err(e) => return Err(BuildError::CodeObject(e)),
        };
        let descriptors = match &code {
            Some(c) => read_metadata(c).map_err(BuildError::CodeObject)?,
            None => Vec::new(),
        };
        let code_hash = code.as_ref().map(|c| hash64(c));
        let mut built = Vec::new();
        for (k, abi) in ks.iter().zip(lowered.kernels) {
            let d = descriptors.iter().find(|d| d.name == abi.symbol).cloned();
            if code.is_some() && d.is_none() {
                return Err(BuildError::CodeObject(CodeObjError::Metadata {
                    message: format!("no descriptor for kernel `{}`", abi.symbol),
                }));
            }
            if let Some(w) = d.as_ref().and_then(|d| d.wavefront_size) {
                if w != abi.wave_width {
                    return Err(BuildError::CodeObject(CodeObjError::Metadata {
                        message: format!(
                            "`{}` was built at wave {w}, not the pinned {}",
                            abi.symbol, abi.wave_width
                        ),
                    }));
                }
            }
            let mut m = KernelManifest::from_kernel(&module.functions[k.function], Backend::Hip);
            m.kernel = abi.name.clone();
            m.built_wave = Some(abi.wave_width);
            m.max_threads = m.max_threads.or(abi.bounds.max_threads);
            if let Some(d) = &d {
                m.registers_per_thread = d.vgpr_count;
                m.scalar_registers = d.sgpr_count;
                m.stack_frame_bytes = d.private_segment_fixed_size;
                m.static_shared_bytes = d.group_segment_fixed_size.map(u64::from);
                m.max_block_threads = d.max_flat_workgroup_size;
            }
            m.code_hash = code_hash;
            m.code_bytes = code.as_ref().map(|c| c.len() as u64);
            // The code's cooperative-matrix operations and their tiers (§3.3, §4).
            m.native_ops = lowered
                .matrix_ops
                .iter()
                .map(|o| crate::hal::manifest::NativeOp {
                    op: o.op.clone(),
                    instruction: o.instruction.clone(),
                    tier: o.tier.to_string(),
                })
                .collect();
            built.push(BuiltKernel {
                abi,
                descriptor: d,
                manifest: m,
            });
        }
        out.push(CodeObject {
            arch: t.arch.clone(),
            wave: t.wave,
            object: lowered.code,
            code,
            assembly,
            kernels: built,
            note,
        });
    }
    Ok(out)
}

fn hash64(bytes: &[u8]) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(bytes);
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// Writes each code object (`<stem>.<arch>.w<wave>.hsaco`, or the `.o` without a linker)
/// and its assembly (`.s`) into `dir`; returns the paths written.
pub fn emit(objects: &[CodeObject], stem: &str, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for o in objects {
        let base = format!("{stem}.{}.w{}", o.arch, o.wave);
        let (ext, bytes) = match &o.code {
            Some(c) => ("hsaco", c),
            None => ("o", &o.object),
        };
        let p = dir.join(format!("{base}.{ext}"));
        std::fs::write(&p, bytes)?;
        written.push(p);
        if let Some(s) = &o.assembly {
            let p = dir.join(format!("{base}.s"));
            std::fs::write(&p, s)?;
            written.push(p);
        }
    }
    Ok(written)
}

fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// One line describing a kernel's manifest (`-` for an absent fact).
pub fn describe(k: &BuiltKernel, arch: &str) -> String {
    let m = &k.manifest;
    format!(
        "{} [amdgpu {arch}]: wave {} vgprs {} sgprs {} scratch {} lds {} max_flat_workgroup {}{}",
        m.kernel,
        opt(m.built_wave),
        opt(m.registers_per_thread),
        opt(m.scalar_registers),
        opt(m.stack_frame_bytes),
        opt(m.static_shared_bytes),
        opt(m.max_block_threads),
        if m.dynamic_shared {
            " +dynamic lds"
        } else {
            ""
        },
    )
}
