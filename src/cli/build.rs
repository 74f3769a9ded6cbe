//! `xpu build FILE... [--backends cpu,cuda,amdgpu,vulkan] [--arch ...] [--json]`: the build for
//! declared backends under the gates of contract §3.6 ([`super::gated`], [`crate::gate`]).
//!
//! `xpu build FILE --backend cuda|amdgpu|vulkan|cpu [--arch ARCH] [--emit DIR]`: lowers every
//! kernel of a file ahead of time for one backend and reports each one's footprint, with no GPU
//! needed and no gates.
//!
//! For `cuda`: PTX per kernel from the shared LLVM walk for `--arch` (default `sm_90`), and,
//! when `ptxas` is installed, its `-v` report (registers, spills, stack, shared memory).
//! `--emit DIR` writes `DIR/<kernel>.ptx` and `DIR/<kernel>.manifest` (one `key = value` per
//! line; a fact nobody measured is written `absent`). Exit codes as everywhere: 0 built, 1 a
//! problem in the input (diagnostics printed) or a kernel refused, 2 usage or I/O.
//!
//! For `amdgpu`: a code object per wave width for `--arch` (default `gfx90a`), linked with
//! `ld.lld`, and each kernel's manifest from its metadata (VGPRs, SGPRs, scratch, LDS, wave,
//! maximum workgroup); `--emit DIR` writes the `.hsaco` and its assembly (`.s`). The
//! `vulkan` and `cpu` builds are described in their own modules.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BuildArgs {
    /// The kernel files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The backends the build declares, judged by the gates of contract §3.6 (`cpu`, `cuda`,
    /// `amdgpu`, `vulkan`, comma-separated; the default: every one this binary can build).
    #[arg(long, value_delimiter = ',', conflicts_with = "backend")]
    pub backends: Vec<String>,
    /// One backend's footprint report, without the gates (`cuda`, `amdgpu`, `vulkan`, `cpu`;
    /// one file).
    #[arg(long)]
    pub backend: Option<String>,
    /// The target processor: NVIDIA `sm_90` (the default for cuda), `sm_80`, `86`; AMD
    /// `gfx90a` (the default for amdgpu), `gfx942`, `gfx1100`. With `--backends`, one of each,
    /// comma-separated (`sm_80,gfx942`).
    #[arg(long)]
    pub arch: Option<String>,
    /// Write each kernel's device code and manifest here (with `--backend`).
    #[arg(long, requires = "backend")]
    pub emit: Option<PathBuf>,
    /// Print the manifests and gate lines as one JSON document on stdout (`--backends`
    /// builds; the fields are in `docs/gates.md`).
    #[arg(long, conflicts_with = "backend")]
    pub json: bool,
    /// Write one bundle holding every kernel's code and manifest for each declared backend
    /// (`--backends`, or `--backend` with a comma-separated list: `cpu,vulkan,cuda`) and the
    /// canonical IR (one file).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

impl BuildArgs {
    /// The one file of a `--backend` build.
    fn file(&self) -> &std::path::Path {
        &self.files[0]
    }
}

pub fn build(args: &BuildArgs) -> ExitCode {
    if let Some(out) = &args.output {
        return super::build_bundle::build(args, out);
    }
    let Some(backend) = args.backend.as_deref() else {
        return super::gated::build(args);
    };
    if args.files.len() != 1 {
        eprintln!("xpu build --backend {backend}: one file at a time (--backends takes several)");
        return ExitCode::from(2);
    }
    match backend {
        "cuda" => imp::build_cuda(args),
        "amdgpu" => amd::build_amdgpu(args),
        "vulkan" | "cpu" => {
            let module = match load(args) {
                Ok(m) => m,
                Err(code) => return code,
            };
            let path = args.file().display().to_string();
            let emit = args.emit.as_deref();
            if backend == "cpu" {
                crate::backend::cpu::aot_build(&path, &module, emit)
            } else {
                crate::backend::vulkan::aot::build(&path, &module, emit)
            }
        }
        other => {
            eprintln!("xpu build: no ahead-of-time build for the `{other}` backend in this binary");
            ExitCode::from(2)
        }
    }
}

/// The file's verified module, with the emit folder created; the exit code on failure
/// (diagnostics printed: 1 for the input, 2 for I/O).
fn load(args: &BuildArgs) -> Result<crate::ir::VerifiedModule, ExitCode> {
    let path = args.file().display().to_string();
    let src = std::fs::read_to_string(args.file()).map_err(|e| {
        eprintln!("xpu build: {path}: {e}");
        ExitCode::from(2)
    })?;
    let module = crate::ir::parse(&src)
        .and_then(|m| m.verify())
        .map_err(|d| {
            eprintln!("{}", d.render(&path));
            ExitCode::from(1)
        })?;
    if let Some(dir) = &args.emit {
        std::fs::create_dir_all(dir).map_err(|e| {
            eprintln!("xpu build: {}: {e}", dir.display());
            ExitCode::from(2)
        })?;
    }
    Ok(module)
}

#[cfg(not(feature = "hip"))]
mod amd {
    use std::process::ExitCode;

    pub fn build_amdgpu(_: &super::BuildArgs) -> ExitCode {
        eprintln!("xpu build --backend amdgpu: this binary was built without the `hip` feature");
        ExitCode::from(2)
    }
}

#[cfg(feature = "hip")]
mod amd {
    use super::BuildArgs;
    use crate::codegen::llvm::codeobj::{self, BuildOptions};
    use crate::codegen::llvm::{amdgpu::Amdgpu, KernelRef};
    use std::process::ExitCode;

    pub fn build_amdgpu(args: &BuildArgs) -> ExitCode {
        let path = args.file().display().to_string();
        let arch = args.arch.as_deref().unwrap_or("gfx90a");
        let Some(target) = Amdgpu::new(arch) else {
            eprintln!("xpu build: `{arch}` is not an AMDGPU processor (gfx90a, gfx942, gfx1100)");
            return ExitCode::from(2);
        };
        let module = match super::load(args) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let opts = BuildOptions {
            assembly: args.emit.is_some(),
            ..Default::default()
        };
        let mut failed = false;
        // One kernel at a time, so that one refusal does not hide the others' manifests.
        for (h, _) in module.kernels() {
            let objects =
                match codeobj::build(module.module(), &[KernelRef::plain(h)], &target, &opts) {
                    Ok(o) => o,
                    Err(e) => {
                        eprintln!("{path}: error[{}]: {e}", e.code());
                        failed = true;
                        continue;
                    }
                };
            for o in &objects {
                if let Some(note) = &o.note {
                    eprintln!("{path}: note: {note}");
                }
                for k in &o.kernels {
                    println!("{path}: {}", codeobj::describe(k, arch));
                }
            }
            if let (Some(dir), Some(k)) =
                (&args.emit, objects.first().and_then(|o| o.kernels.first()))
            {
                if let Err(e) = codeobj::emit(&objects, &k.abi.symbol, dir) {
                    eprintln!("xpu build: {}: {e}", dir.display());
                    return ExitCode::from(2);
                }
            }
        }
        if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use std::process::ExitCode;

    pub fn build_cuda(_: &super::BuildArgs) -> ExitCode {
        eprintln!("xpu build --backend cuda: this binary was built without the `cuda` feature");
        ExitCode::from(2)
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::BuildArgs;
    use crate::codegen::llvm::ptxas;
    use crate::codegen::llvm::{self, nvptx::Nvptx, KernelRef};
    use std::fmt::Write as _;
    use std::process::ExitCode;

    fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
        v.map_or("absent".into(), |v| v.to_string())
    }

    pub fn build_cuda(args: &BuildArgs) -> ExitCode {
        let path = args.file().display().to_string();
        let arch_name = args.arch.as_deref().unwrap_or("sm_90");
        let Some(arch) = Nvptx::parse_arch(arch_name) else {
            eprintln!("xpu build: `{arch_name}` is not an NVIDIA architecture (sm_90, 86, 9.0)");
            return ExitCode::from(2);
        };
        let module = match super::load(args) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let target = Nvptx::new(arch);
        let sm = format!("sm_{}", target.sm());
        let have_ptxas = ptxas::find().is_some();
        if !have_ptxas {
            eprintln!("xpu build: note: ptxas not found; registers and spills are absent");
        }
        let mut failed = false;
        for (h, f) in module.kernels() {
            let t0 = std::time::Instant::now();
            let out = match llvm::lower(
                module.module(),
                &[KernelRef::plain(h)],
                &target,
                &Default::default(),
            ) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("{}", e.to_diagnostic().render(&path));
                    failed = true;
                    continue;
                }
            };
            let lower_ms = t0.elapsed().as_secs_f64() * 1e3;
            let abi = &out.kernels[0];
            let ptx = out.text();
            let report = if have_ptxas {
                match ptxas::assemble(&ptx, &sm) {
                    Ok(r) => r.function(&abi.symbol).cloned(),
                    Err(e) => {
                        eprintln!(
                            "{path}: error[{}]: kernel {}: {e}",
                            llvm::codes::INTERNAL,
                            f.name
                        );
                        failed = true;
                        None
                    }
                }
            } else {
                None
            };
            let r = report.unwrap_or_default();
            let mut m = String::new();
            let _ = writeln!(m, "kernel = {}", f.name);
            let _ = writeln!(m, "backend = cuda");
            let _ = writeln!(m, "arch = {sm}");
            let _ = writeln!(m, "symbol = {}", abi.symbol);
            let _ = writeln!(m, "built_wave = {}", abi.wave_width);
            let _ = writeln!(m, "declared_wave = {}", opt(abi.declared_wave));
            let _ = writeln!(m, "max_threads = {}", opt(abi.bounds.max_threads));
            let _ = writeln!(m, "min_resident = {}", opt(abi.bounds.min_resident));
            let _ = writeln!(m, "max_registers = {}", opt(abi.bounds.max_registers));
            let _ = writeln!(m, "registers = {}", opt(r.registers));
            let _ = writeln!(m, "spill_store_bytes = {}", opt(r.spill_store_bytes));
            let _ = writeln!(m, "spill_load_bytes = {}", opt(r.spill_load_bytes));
            let _ = writeln!(m, "stack_frame_bytes = {}", opt(r.stack_frame_bytes));
            let _ = writeln!(
                m,
                "static_shared_bytes = {}",
                opt(r
                    .shared_bytes
                    .map(u64::from)
                    .or(Some(abi.static_shared_bytes)))
            );
            let _ = writeln!(m, "dynamic_shared = {}", abi.dynamic_shared_elem.is_some());
            let _ = writeln!(m, "ptx_bytes = {}", ptx.len());
            print!("{path}: {}: {sm}, lowered in {lower_ms:.1} ms", f.name);
            println!(
                ", registers {}, spill {}/{} bytes, stack {}, shared {}",
                opt(r.registers),
                opt(r.spill_store_bytes),
                opt(r.spill_load_bytes),
                opt(r.stack_frame_bytes),
                opt(r.shared_bytes)
            );
            if let Some(dir) = &args.emit {
                let base = dir.join(&abi.symbol);
                let w1 = std::fs::write(base.with_extension("ptx"), &ptx);
                let w2 = std::fs::write(base.with_extension("manifest"), &m);
                if let Err(e) = w1.and(w2) {
                    eprintln!("xpu build: {}: {e}", dir.display());
                    return ExitCode::from(2);
                }
            }
        }
        if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}
