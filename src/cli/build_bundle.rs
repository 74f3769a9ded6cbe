//! `xpu build FILE --backend cpu,vulkan,cuda -o BUNDLE`: every kernel of a file lowered for
//! each backend named (a comma-separated list), written as one bundle ([`crate::bundle`]) with
//! each kernel's device code and manifest and the module's canonical IR.
//!
//! Per backend: `cpu` records each kernel's manifest after a probe compile (its code is made
//! where it runs, from the IR); `vulkan` SPIR-V as this machine's Vulkan device emits it (or,
//! with none, for every optional capability at subgroup size 32: a device with other
//! capabilities lowers from the IR at load); `cuda` PTX for `--arch` (default `sm_90`), with
//! `ptxas -v`'s registers and spills in the manifest where `ptxas` is installed; `amdgpu` (or
//! `hip`) a linked code object per kernel for the AMD processor of `--arch` (default `gfx90a`),
//! its ABI header as the entry's launch metadata and its manifest from the code object's
//! metadata; without `ld.lld` a note, and no AMDGPU entries (a HIP device lowers from the IR).
//! `--arch` takes one NVIDIA and one AMD processor, comma-separated (`sm_80,gfx942`). Exit
//! codes: 0 written, 1 a kernel refused or a problem in the input (nothing written), 2 usage or
//! I/O.

use crate::bundle::{BundleWriter, Entry};
use crate::hal::Backend;
use std::path::Path;
use std::process::ExitCode;

/// The CLI's `build -o BUNDLE`.
pub fn build(args: &super::build::BuildArgs, out: &Path) -> ExitCode {
    if args.files.len() != 1 {
        eprintln!("xpu build -o: one file at a time");
        return ExitCode::from(2);
    }
    let file = &args.files[0];
    let path = file.display().to_string();
    let src = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xpu build: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let parsed = match crate::ir::parse(&src) {
        Ok(m) => m,
        Err(d) => {
            eprintln!("{}", d.render(&path));
            return ExitCode::from(1);
        }
    };
    let ir = crate::ir::print(&parsed);
    let module = match parsed.verify() {
        Ok(m) => m,
        Err(d) => {
            eprintln!("{}", d.render(&path));
            return ExitCode::from(1);
        }
    };
    let mut writer = BundleWriter::new(ir);
    let mut failed = false;
    let declared: Vec<String> = if args.backends.is_empty() {
        let one = args.backend.as_deref().unwrap_or("cpu,vulkan");
        one.split(',').map(|s| s.trim().to_string()).collect()
    } else {
        args.backends.clone()
    };
    for name in declared.iter().map(String::as_str) {
        let r = match name {
            "cpu" => cpu(&module, &mut writer),
            "vulkan" => vulkan(&module, &mut writer),
            "cuda" => cuda(&module, arch_for(args.arch.as_deref(), false), &mut writer),
            "amdgpu" | "hip" => amdgpu(&module, arch_for(args.arch.as_deref(), true), &mut writer),
            other => {
                eprintln!("xpu build: `{other}` cannot be bundled (cpu, vulkan, cuda, amdgpu)");
                return ExitCode::from(2);
            }
        };
        match r {
            Ok(errors) => {
                for e in &errors {
                    eprintln!("{path}: {e}");
                }
                failed |= !errors.is_empty();
            }
            Err(code) => return code,
        }
    }
    if failed {
        eprintln!("xpu build: {}: not written", out.display());
        return ExitCode::from(1);
    }
    match writer.write(out) {
        Ok(()) => {
            let n = writer.entries().len();
            println!("{}: {n} entries", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// The processor of `--arch` for one vendor: the AMD one (`gfx…`) when `amd`, else the other.
fn arch_for(arch: Option<&str>, amd: bool) -> Option<&str> {
    arch?
        .split(',')
        .map(str::trim)
        .find(|a| a.starts_with("gfx") == amd)
}

#[cfg(not(feature = "hip"))]
fn amdgpu(
    _: &crate::ir::VerifiedModule,
    _: Option<&str>,
    _: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    eprintln!("xpu build: this binary was built without the `hip` feature");
    Err(ExitCode::from(2))
}

/// A linked code object per kernel for `arch` (default `gfx90a`), with its ABI header as the
/// entry's launch metadata; without a linker, a note and no entries.
#[cfg(feature = "hip")]
fn amdgpu(
    module: &crate::ir::VerifiedModule,
    arch: Option<&str>,
    writer: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    use crate::codegen::llvm::codeobj::{self, BuildOptions};
    use crate::codegen::llvm::{amdgpu::Amdgpu, KernelRef};
    let arch = arch.unwrap_or("gfx90a");
    let Some(target) = Amdgpu::new(arch) else {
        eprintln!("xpu build: `{arch}` is not an AMDGPU processor (gfx90a, gfx942, gfx1100)");
        return Err(ExitCode::from(2));
    };
    let mut errors = Vec::new();
    let mut noted = false;
    for (h, f) in module.kernels() {
        let objects = match codeobj::build(
            module,
            &[KernelRef::plain(h)],
            &target,
            &BuildOptions::default(),
        ) {
            Ok(o) => o,
            Err(e) => {
                errors.push(format!(
                    "error[{}]: kernel {} on amdgpu: {e}",
                    e.code(),
                    f.name
                ));
                continue;
            }
        };
        for o in objects {
            let Some(code) = o.code else {
                if !noted {
                    if let Some(note) = &o.note {
                        eprintln!("xpu build: note: {note}; no AMDGPU code is bundled (a HIP device lowers from the IR)");
                    }
                    noted = true;
                }
                continue;
            };
            for k in o.kernels {
                let mut manifest = k.manifest;
                manifest.kernel = f.name.clone();
                manifest.code_bytes = Some(code.len() as u64);
                manifest.code_hash = Some(
                    u64::from_str_radix(&crate::backend::cache::hash_hex(&[&code])[..16], 16)
                        .unwrap_or(0),
                );
                writer.add(Entry {
                    backend: Backend::Hip,
                    target: o.arch.clone(),
                    kernel: f.name.clone(),
                    code: Some(code.clone()),
                    meta: Some(crate::backend::gpu_abi::abi_header(&k.abi)),
                    manifest,
                });
            }
        }
    }
    Ok(errors)
}

/// Each kernel's manifest after a probe compile; the refusals as lines.
fn cpu(
    module: &crate::ir::VerifiedModule,
    writer: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    let mut errors = Vec::new();
    for (h, f) in module.kernels() {
        match crate::backend::cpu::probe_manifest(module, h) {
            Ok(manifest) => {
                writer.add(Entry {
                    backend: Backend::Cpu,
                    target: "host".into(),
                    kernel: f.name.clone(),
                    code: None,
                    meta: None,
                    manifest,
                });
            }
            Err(e) => errors.push(format!(
                "error[{}]: kernel {} on cpu: {}",
                e.code,
                f.name,
                e.reason_in(&f.name)
            )),
        }
    }
    Ok(errors)
}

fn vulkan(
    module: &crate::ir::VerifiedModule,
    writer: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    use crate::backend::vulkan::{self, stored};
    let (caps, size_control) = match vulkan::VulkanDevice::open() {
        Ok(d) => (d.caps().clone(), d.size_control()),
        Err(_) => {
            eprintln!(
                "xpu build: note: no Vulkan device; bundling SPIR-V for every optional capability at subgroup size 32"
            );
            (crate::codegen::spirv::Caps::all(32), None)
        }
    };
    let target = stored::target(&caps, size_control);
    let mut errors = Vec::new();
    for (h, f) in module.kernels() {
        match vulkan::emit_for_device(module, h, &caps, size_control) {
            Ok((e, manifest)) => {
                writer.add(Entry {
                    backend: Backend::Vulkan,
                    target: target.clone(),
                    kernel: f.name.clone(),
                    code: Some(stored::code_bytes(&e)),
                    meta: Some(stored::layout(&e)),
                    manifest,
                });
            }
            Err(e) => errors.push(format!(
                "error[{}]: kernel {} on vulkan: {}",
                e.code,
                f.name,
                e.reason_in(&f.name)
            )),
        }
    }
    Ok(errors)
}

#[cfg(not(feature = "cuda"))]
fn cuda(
    _: &crate::ir::VerifiedModule,
    _: Option<&str>,
    _: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    eprintln!("xpu build: this binary was built without the `cuda` feature");
    Err(ExitCode::from(2))
}

#[cfg(feature = "cuda")]
fn cuda(
    module: &crate::ir::VerifiedModule,
    arch: Option<&str>,
    writer: &mut BundleWriter,
) -> Result<Vec<String>, ExitCode> {
    use crate::codegen::llvm::{self, nvptx::Nvptx, ptxas, KernelRef};
    use crate::hal::manifest::KernelManifest;
    let arch_name = arch.unwrap_or("sm_90");
    let Some(arch) = Nvptx::parse_arch(arch_name) else {
        eprintln!("xpu build: `{arch_name}` is not an NVIDIA architecture (sm_90, 86, 9.0)");
        return Err(ExitCode::from(2));
    };
    let target = Nvptx::new(arch);
    let sm = format!("sm_{}", target.sm());
    let have_ptxas = ptxas::find().is_some();
    if !have_ptxas {
        eprintln!("xpu build: note: ptxas not found; registers and spills are absent");
    }
    let mut errors = Vec::new();
    for (h, f) in module.kernels() {
        let out = match llvm::lower(module, &[KernelRef::plain(h)], &target, &Default::default()) {
            Ok(o) => o,
            Err(e) => {
                errors.push(format!(
                    "error[{}]: kernel {} on cuda: {}",
                    e.code,
                    f.name,
                    e.reason_in(&f.name)
                ));
                continue;
            }
        };
        let Some(abi) = out.kernels.first() else {
            errors.push(format!(
                "error[{}]: kernel {} on cuda: the lowering produced no kernel",
                llvm::codes::INTERNAL,
                f.name
            ));
            continue;
        };
        let ptx = format!(
            "{}{}{}",
            crate::backend::cuda::abi_header(abi),
            crate::backend::cuda::matrix_header(&out.matrix_ops),
            String::from_utf8_lossy(&out.code)
        );
        let mut manifest = KernelManifest::from_kernel(f, Backend::Cuda);
        manifest.native_ops = crate::backend::cuda::native_ops(&out.matrix_ops);
        manifest.built_wave = Some(abi.wave_width);
        manifest.code_bytes = Some(ptx.len() as u64);
        manifest.code_hash = Some(
            u64::from_str_radix(
                &crate::backend::cache::hash_hex(&[ptx.as_bytes()])[..16],
                16,
            )
            .unwrap_or(0),
        );
        if have_ptxas {
            match ptxas::assemble(&ptx, &sm) {
                Ok(r) => {
                    if let Some(r) = r.function(&abi.symbol) {
                        manifest.registers_per_thread = r.registers;
                        manifest.spill_store_bytes = r.spill_store_bytes;
                        manifest.spill_load_bytes = r.spill_load_bytes;
                        manifest.stack_frame_bytes = r.stack_frame_bytes;
                    }
                }
                Err(e) => {
                    errors.push(format!(
                        "error[{}]: kernel {} on cuda: ptxas: {e}",
                        llvm::codes::INTERNAL,
                        f.name
                    ));
                    continue;
                }
            }
        }
        writer.add(Entry {
            backend: Backend::Cuda,
            target: sm.clone(),
            kernel: f.name.clone(),
            code: Some(ptx.into_bytes()),
            meta: None,
            manifest,
        });
    }
    Ok(errors)
}
