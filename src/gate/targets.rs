//! Lowering one kernel for one [`Target`], with the toolchain each needs (`ptxas` for NVPTX
//! footprints, `ld.lld` for AMDGPU code objects), each looked up once per build.

use super::{codes, BuiltKernel, CodeFormat, Level, Line, Lowered, Options, Target};
use crate::codegen::cpu as jit;
use crate::hal::manifest::KernelManifest;
use crate::hal::Backend;
use crate::ir::{Function, Handle, Span, VerifiedModule};
use std::sync::{mpsc, Arc};

/// What was looked up once per build: the Vulkan capabilities, and whether each missing tool
/// has had its note.
#[derive(Default)]
pub(crate) struct Tools {
    vulkan: Option<crate::codegen::spirv::Caps>,
    #[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
    noted: Vec<Target>,
}

impl Tools {
    /// A note, once per target, that `tool` is missing (never a gate failure, §3.6).
    #[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
    fn note_missing(&mut self, target: Target, path: &str, message: &str, lines: &mut Vec<Line>) {
        if self.noted.contains(&target) {
            return;
        }
        self.noted.push(target);
        lines.push(Line {
            path: path.to_string(),
            span: Span::UNKNOWN,
            level: Level::Note,
            gate: Some(super::Gate::Spill),
            kernel: None,
            target: Some(target),
            code: codes::NO_TOOL.into(),
            message: message.to_string(),
            tracked: None,
            stale: false,
        });
    }
}

/// Lowers kernel `h` of `module` for `target`; notes about missing tools go to `lines`.
pub(crate) fn lower(
    module: &Arc<VerifiedModule>,
    h: Handle<Function>,
    target: Target,
    opts: &Options,
    tools: &mut Tools,
    path: &str,
    lines: &mut Vec<Line>,
) -> Lowered {
    match target {
        Target::Cpu => cpu(module, h, opts),
        Target::Vulkan => vulkan(module, h, tools),
        Target::Cuda => cuda(module, h, opts, tools, path, lines),
        Target::Amdgpu => amdgpu(module, h, opts, tools, path, lines),
    }
}

/// The CPU: compiled on a worker thread, abandoned past `opts.cpu_deadline`.
fn cpu(module: &Arc<VerifiedModule>, h: Handle<Function>, opts: &Options) -> Lowered {
    use crate::backend::cpu as host;
    let f = module.function(h);
    let wave = host::build_wave(f);
    let wave_dependent = crate::ir::analysis::depends_on_wave(module.module(), f);
    if let Err(e) = host::scalar_twin(&f.name, f, wave, wave_dependent) {
        return Lowered::Refused {
            code: e.code().into(),
            reason: e.to_string(),
        };
    }
    // A deadline of zero abandons every compile (documented: a sweep that wants no CPU code,
    // and the tests of this gate, which must not race a fast compile).
    if opts.cpu_deadline.is_zero() {
        return Lowered::Hung {
            deadline: opts.cpu_deadline,
        };
    }
    let (block, whole) = host::probe_block(f, wave);
    let (tx, rx) = mpsc::channel();
    let m = module.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("xpu-build-cpu-{}", f.name))
        .spawn(move || {
            let r = host::compile(&m, h, block, wave, whole, false, false)
                .map(|c| (c.code_hash, c.code_bytes, c.static_shared));
            // The build may have stopped waiting (the deadline passed): nothing to tell then.
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Lowered::Refused {
            code: crate::hal::launch::codes::NO_CODE.into(),
            reason: format!("cannot start the compile thread: {e}"),
        };
    }
    // Past the deadline the thread is abandoned: it finishes (or not) on its own, and the
    // process does not wait for it.
    match rx.recv_timeout(opts.cpu_deadline) {
        Ok(Ok((hash, bytes, shared))) => {
            let mut m = KernelManifest::from_kernel(f, Backend::Cpu);
            m.built_wave = Some(if wave_dependent { wave } else { 1 });
            m.code_hash = Some(hash);
            m.code_bytes = Some(bytes);
            m.static_shared_bytes = Some(shared);
            Lowered::Code {
                built: Box::new(BuiltKernel {
                    kernel: f.name.clone(),
                    target: Target::Cpu,
                    arch: None,
                    format: CodeFormat::HostMachineCode,
                    // Cranelift code is made where it runs; the bundle carries the IR.
                    code: Vec::new(),
                    manifest: m,
                }),
                spill_count: None,
            }
        }
        Ok(Err(e)) => {
            let reason = e.reason_in(&f.name);
            let e = crate::hal::launch::LaunchError::lowering(&f.name, Backend::Cpu, e, false);
            Lowered::Refused {
                code: e.code().into(),
                reason,
            }
        }
        Err(_) => Lowered::Hung {
            deadline: opts.cpu_deadline,
        },
    }
}

fn vulkan(module: &Arc<VerifiedModule>, h: Handle<Function>, tools: &mut Tools) -> Lowered {
    let caps = tools
        .vulkan
        .get_or_insert_with(|| crate::backend::vulkan::aot::caps().0);
    let f = module.function(h);
    match crate::codegen::spirv::emit_kernel(module, h, caps) {
        Ok(e) => {
            let code: Vec<u8> = e.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut m = KernelManifest::from_kernel(f, Backend::Vulkan);
            m.built_wave = Some(e.wave_width);
            m.code_hash = Some(jit::fnv1a(&code));
            m.code_bytes = Some(code.len() as u64);
            Lowered::Code {
                built: Box::new(BuiltKernel {
                    kernel: f.name.clone(),
                    target: Target::Vulkan,
                    arch: None,
                    format: CodeFormat::Spirv,
                    code,
                    manifest: m,
                }),
                spill_count: None,
            }
        }
        Err(u) => Lowered::Refused {
            code: crate::hal::launch::codes::NO_CODE.into(),
            reason: format!(
                "unsupported on this Vulkan device: {}",
                u.reason_in(&f.name)
            ),
        },
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda(
    _: &Arc<VerifiedModule>,
    _: Handle<Function>,
    _: &Options,
    _: &mut Tools,
    _: &str,
    _: &mut Vec<Line>,
) -> Lowered {
    Lowered::Refused {
        code: crate::hal::launch::codes::NO_CODE.into(),
        reason: "this binary was built without the `cuda` feature".into(),
    }
}

#[cfg(feature = "cuda")]
fn cuda(
    module: &Arc<VerifiedModule>,
    h: Handle<Function>,
    opts: &Options,
    tools: &mut Tools,
    path: &str,
    lines: &mut Vec<Line>,
) -> Lowered {
    use crate::codegen::llvm::{self, nvptx::Nvptx, ptxas, KernelRef};
    let f = module.function(h);
    let refused = |code: &str, reason: String| Lowered::Refused {
        code: code.to_string(),
        reason,
    };
    let Some(arch) = Nvptx::parse_arch(&opts.cuda_arch) else {
        return refused(
            llvm::codes::INPUT,
            format!("`{}` is not an NVIDIA architecture", opts.cuda_arch),
        );
    };
    let target = Nvptx::new(arch);
    let sm = format!("sm_{}", target.sm());
    let cfg = crate::config::get();
    let (matrix_dist, matrix_impl) = match (cfg.matrix_dist.clone(), cfg.matrix_impl.clone()) {
        (Ok(d), Ok(i)) => (d, i),
        (Err(e), _) | (_, Err(e)) => return refused(crate::config::BAD_VALUE, e.to_string()),
    };
    let out = match llvm::lower(
        module,
        &[KernelRef::plain(h)],
        &target,
        &llvm::Options {
            matrix_dist,
            matrix_impl,
            ..Default::default()
        },
    ) {
        Ok(o) => o,
        Err(e) => return refused(e.code, e.reason_in(&f.name)),
    };
    let abi = &out.kernels[0];
    let ptx = out.text();
    let mut m = KernelManifest::from_kernel(f, Backend::Cuda);
    m.kernel = abi.name.clone();
    m.built_wave = Some(abi.wave_width);
    m.max_threads = m.max_threads.or(abi.bounds.max_threads);
    m.static_shared_bytes = Some(abi.static_shared_bytes);
    m.code_hash = Some(jit::fnv1a(ptx.as_bytes()));
    m.code_bytes = Some(ptx.len() as u64);
    m.native_ops = crate::backend::cuda::native_ops(&out.matrix_ops);
    if ptxas::find().is_some() {
        match ptxas::assemble(&ptx, &sm) {
            Ok(r) => {
                if let Some(p) = r.function(&abi.symbol) {
                    m.registers_per_thread = p.registers;
                    m.spill_store_bytes = p.spill_store_bytes;
                    m.spill_load_bytes = p.spill_load_bytes;
                    m.stack_frame_bytes = p.stack_frame_bytes;
                    if let Some(s) = p.shared_bytes {
                        m.static_shared_bytes = Some(s as u64);
                    }
                }
            }
            Err(e) => return refused(llvm::codes::INTERNAL, format!("ptxas: {e}")),
        }
    } else {
        tools.note_missing(
            Target::Cuda,
            path,
            "no assembler: ptxas not found (XPU_PTXAS, PATH, the nvidia-cuda-nvcc wheel), so registers and spills are absent and the spill gate is not judged",
            lines,
        );
    }
    Lowered::Code {
        built: Box::new(BuiltKernel {
            kernel: abi.name.clone(),
            target: Target::Cuda,
            arch: Some(sm),
            format: CodeFormat::Ptx,
            code: ptx.into_bytes(),
            manifest: m,
        }),
        spill_count: None,
    }
}

#[cfg(not(feature = "hip"))]
fn amdgpu(
    _: &Arc<VerifiedModule>,
    _: Handle<Function>,
    _: &Options,
    _: &mut Tools,
    _: &str,
    _: &mut Vec<Line>,
) -> Lowered {
    Lowered::Refused {
        code: crate::hal::launch::codes::NO_CODE.into(),
        reason: "this binary was built without the `hip` feature".into(),
    }
}

#[cfg(feature = "hip")]
fn amdgpu(
    module: &Arc<VerifiedModule>,
    h: Handle<Function>,
    opts: &Options,
    tools: &mut Tools,
    path: &str,
    lines: &mut Vec<Line>,
) -> Lowered {
    use crate::codegen::llvm::codeobj::{self, BuildOptions, CodeObjError};
    use crate::codegen::llvm::{amdgpu::Amdgpu, KernelRef};
    let Some(target) = Amdgpu::new(&opts.amdgpu_arch) else {
        return Lowered::Refused {
            code: crate::codegen::llvm::codes::INPUT.into(),
            reason: format!("`{}` is not an AMDGPU processor", opts.amdgpu_arch),
        };
    };
    let cfg = crate::config::get();
    let (matrix_dist, matrix_impl) = match (cfg.matrix_dist.clone(), cfg.matrix_impl.clone()) {
        (Ok(d), Ok(i)) => (d, i),
        (Err(e), _) | (_, Err(e)) => {
            return Lowered::Refused {
                code: crate::config::BAD_VALUE.into(),
                reason: e.to_string(),
            }
        }
    };
    let objects = match codeobj::build(
        module,
        &[KernelRef::plain(h)],
        &target,
        &BuildOptions {
            lower: crate::codegen::llvm::Options {
                matrix_dist,
                matrix_impl,
                ..Default::default()
            },
            ..BuildOptions::default()
        },
    ) {
        Ok(o) => o,
        Err(e) => {
            let reason = match &e {
                codeobj::BuildError::Lower(l) => l.reason_in(&module.function(h).name),
                e => e.to_string(),
            };
            return Lowered::Refused {
                code: e.code().into(),
                reason,
            };
        }
    };
    let Some(o) = objects.into_iter().next() else {
        return Lowered::Refused {
            code: crate::hal::launch::codes::NO_CODE.into(),
            reason: "the lowering produced no code object".into(),
        };
    };
    if let Some(CodeObjError::NoLinker) = &o.note {
        tools.note_missing(
            Target::Amdgpu,
            path,
            "no linker: ld.lld not found (XPU_LLD, ld.lld-19, ld.lld), so code objects are relocatable, the kernel descriptors absent and the spill gate is not judged",
            lines,
        );
    }
    let Some(k) = o.kernels.into_iter().next() else {
        return Lowered::Refused {
            code: crate::hal::launch::codes::NO_CODE.into(),
            reason: "the code object holds no kernel".into(),
        };
    };
    let spill_count = k.descriptor.as_ref().and_then(|d| {
        let (v, s) = (d.vgpr_spill_count?, d.sgpr_spill_count.unwrap_or(0));
        Some(v + s)
    });
    let (format, code) = match o.code {
        Some(c) => (CodeFormat::Hsaco, c),
        None => (CodeFormat::AmdgpuObject, o.object),
    };
    let mut m = k.manifest;
    if m.code_hash.is_none() {
        m.code_hash = Some(jit::fnv1a(&code));
        m.code_bytes = Some(code.len() as u64);
    }
    Lowered::Code {
        built: Box::new(BuiltKernel {
            kernel: m.kernel.clone(),
            target: Target::Amdgpu,
            arch: Some(o.arch),
            format,
            code,
            manifest: m,
        }),
        spill_count,
    }
}
