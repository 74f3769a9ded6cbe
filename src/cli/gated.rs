//! `xpu build FILE... --backends cpu,cuda,amdgpu,vulkan [--arch sm_90,gfx90a] [--json]`: every
//! kernel of every file lowered for every declared backend and judged by the gates
//! ([`crate::gate`]). Each gate line goes to stderr as `path:line:col: error[xpu-kernel-…]:
//! kernel K on BACKEND: …`, each kernel with code gets one summary line on stdout, and a
//! failed build ends with `error[CAJETA_ERROR_XPU_KERNEL_GATE]: …`. With `--json`, stdout is
//! one JSON document instead ([`to_json`]; the lines still go to stderr). Exit codes: 0 built
//! (gates passed, or demoted by `CAJETA_XPU_KERNEL_GATE=warn`), 1 a gate failed or a file did
//! not parse or verify, 2 usage or I/O.

use super::build::BuildArgs;
use crate::gate::{self, Build, BuiltKernel, Line, Options, Target};
use std::process::ExitCode;

/// The declared targets (`--backends`, default every target this binary builds) and the
/// options; a usage error is printed and is exit code 2.
fn options(args: &BuildArgs) -> Result<Options, ExitCode> {
    let usage = |m: String| {
        eprintln!("xpu build: {m}");
        ExitCode::from(2)
    };
    let mut targets = Vec::new();
    if args.backends.is_empty() {
        targets.extend(Target::ALL.into_iter().filter(|t| t.available()));
    }
    for name in &args.backends {
        let t = Target::from_name(name).ok_or_else(|| {
            usage(format!(
                "`{name}` is not a backend to build for (cpu, cuda, amdgpu, vulkan)"
            ))
        })?;
        if !t.available() {
            return Err(usage(format!(
                "this binary cannot build for `{t}` (it was built without the `{}` feature)",
                if t == Target::Cuda { "cuda" } else { "hip" }
            )));
        }
        if !targets.contains(&t) {
            targets.push(t);
        }
    }
    let mut opts = Options::new(targets).map_err(|e| usage(e.to_string()))?;
    for arch in args.arch.iter().flat_map(|a| a.split(',')) {
        let arch = arch.trim();
        if arch.starts_with("gfx") {
            opts.amdgpu_arch = arch.to_string();
        } else if !arch.is_empty() {
            opts.cuda_arch = arch.to_string();
        }
    }
    Ok(opts)
}

pub fn build(args: &BuildArgs) -> ExitCode {
    let opts = match options(args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut all = Build::default();
    let mut bad_input = false;
    for file in &args.files {
        let path = file.display().to_string();
        let src = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("xpu build: {path}: {e}");
                return ExitCode::from(2);
            }
        };
        let src = match crate::ir::text::decode(&src) {
            Ok(s) => s,
            Err(d) => {
                eprintln!("{}", d.render(&path));
                bad_input = true;
                continue;
            }
        };
        match gate::build_file(&path, src, &opts) {
            Ok(b) => all.extend(b),
            Err(d) => {
                eprintln!("{}", d.render(&path));
                bad_input = true;
            }
        }
    }
    for l in &all.lines {
        eprintln!("{l}");
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&all)).unwrap_or_default()
        );
    } else {
        for k in &all.kernels {
            println!("{}", describe(k));
        }
    }
    if let Some(s) = all.summary() {
        eprintln!("{s}");
    }
    if bad_input || all.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// One line for a kernel with code: `k on cuda (sm_90): wave 32, registers 8, ...`.
fn describe(k: &BuiltKernel) -> String {
    let m = &k.manifest;
    format!(
        "{} on {}{}: {} {} bytes, wave {}, block {}, registers {}, spill {}/{}, stack {}, shared {}, hash {}",
        k.kernel,
        k.target,
        k.arch.as_ref().map_or(String::new(), |a| format!(" ({a})")),
        k.format.name(),
        opt(m.code_bytes),
        opt(m.built_wave),
        m.pinned_block
            .map_or("unpinned".to_string(), |b| format!("{b:?} pinned")),
        opt(m.registers_per_thread),
        opt(m.spill_store_bytes),
        opt(m.spill_load_bytes),
        opt(m.stack_frame_bytes),
        opt(m.static_shared_bytes),
        m.code_hash
            .map_or("-".to_string(), |h| format!("{h:016x}")),
    )
}

/// The build as JSON: `{"kernels": [...], "lines": [...], "summary": ...}`. Each kernel:
/// `kernel`, `backend`, `arch`, `format`, and `manifest`, whose fields are
/// [`KernelManifest`](crate::KernelManifest)'s by name (an absent fact is `null`; `code_hash`
/// a 16-digit hex string). Each line: `path`, `line`, `col`, `level` (`error`, `warning`,
/// `note`), `gate` (`xpu-kernel-…` or `null`), `kernel`, `backend`, `code`, `message`,
/// `tracked`, `stale`, and `text`, the line as printed. `summary` is the summary line or
/// `null`; `failed` whether the build failed.
pub fn to_json(b: &Build) -> serde_json::Value {
    use serde_json::json;
    let kernels: Vec<_> = b
        .kernels
        .iter()
        .map(|k| {
            let m = &k.manifest;
            json!({
                "kernel": k.kernel,
                "backend": k.target.name(),
                "arch": k.arch,
                "format": k.format.name(),
                "manifest": {
                    "kernel": m.kernel,
                    "backend": m.backend.name(),
                    "registers_per_thread": m.registers_per_thread,
                    "scalar_registers": m.scalar_registers,
                    "max_block_threads": m.max_block_threads,
                    "spill_store_bytes": m.spill_store_bytes,
                    "spill_load_bytes": m.spill_load_bytes,
                    "stack_frame_bytes": m.stack_frame_bytes,
                    "static_shared_bytes": m.static_shared_bytes,
                    "dynamic_shared": m.dynamic_shared,
                    "declared_wave": m.declared_wave,
                    "built_wave": m.built_wave,
                    "pinned_block": m.pinned_block,
                    "max_threads": m.max_threads,
                    "max_waves": m.max_waves,
                    "min_resident": m.min_resident,
                    "max_registers": m.max_registers,
                    "feasible_blocks": m.feasible_blocks,
                    "occupancy_limiter": m.occupancy_limiter,
                    "native_ops": m.native_ops.iter().map(|n| json!({
                        "op": n.op, "instruction": n.instruction, "tier": n.tier,
                    })).collect::<Vec<_>>(),
                    "code_hash": m.code_hash.map(|h| format!("{h:016x}")),
                    "code_bytes": m.code_bytes,
                },
            })
        })
        .collect();
    let lines: Vec<_> = b.lines.iter().map(line_json).collect();
    json!({
        "kernels": kernels,
        "lines": lines,
        "summary": b.summary(),
        "failed": b.failed(),
    })
}

fn line_json(l: &Line) -> serde_json::Value {
    serde_json::json!({
        "path": l.path,
        "line": l.span.line,
        "col": l.span.col,
        "level": l.level.name(),
        "gate": l.gate.map(|g| g.tag()),
        "kernel": l.kernel,
        "backend": l.target.map(|t| t.name()),
        "code": l.code,
        "message": l.message,
        "tracked": l.tracked,
        "stale": l.stale,
        "text": l.to_string(),
    })
}
