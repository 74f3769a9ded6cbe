//! `xpu build FILE --backend vulkan [--emit DIR]`: every kernel of a file as SPIR-V, ahead of
//! time. The capabilities are the Vulkan device's when one is present (so the module is the
//! one a run would use), otherwise every optional capability at subgroup size 32 (a note says
//! so). Each module is checked with `spirv-val --target-env vulkan1.1` when the tool exists.
//! `--emit DIR` writes `DIR/<kernel>.spv`, `DIR/<kernel>.spvasm` (when `spirv-dis` exists) and
//! `DIR/<kernel>.manifest` (`key = value` lines; what nobody measured is `absent`).
//! Exit codes: 0 built, 1 a problem in the input or a kernel refused, 2 usage or I/O.

use crate::codegen::spirv::{emit_kernel, Caps, Emitted};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};

/// The device's capabilities, or everything at S = 32 with `None` as the device name.
pub(crate) fn caps() -> (Caps, Option<String>) {
    match super::VulkanDevice::open() {
        Ok(d) => {
            let name = crate::hal::DeviceImpl::facts(&d).name.clone();
            (
                d.caps().clone(),
                Some(name.unwrap_or_else(|| "unnamed".into())),
            )
        }
        Err(_) => (Caps::all(32), None),
    }
}

fn tool(name: &str) -> bool {
    Command::new(name).arg("--version").output().is_ok()
}

/// Runs `tool args.. file` on `words` written to a temporary file; its stdout, or its
/// diagnostics as the error.
fn on_words(words: &[u32], tool: &str, args: &[&str]) -> Result<String, String> {
    let path = std::env::temp_dir().join(format!(
        "xpu-vk-aot-{}-{}.spv",
        std::process::id(),
        super::hash_words(words)
    ));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
    let out = Command::new(tool).args(args).arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn manifest_text(name: &str, f: &crate::ir::Function, e: &Emitted, device: &str) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "kernel = {name}");
    let _ = writeln!(m, "backend = vulkan");
    let _ = writeln!(m, "device = {device}");
    let _ = writeln!(m, "entry = {}", e.entry);
    let _ = writeln!(m, "subgroup_size = {}", e.subgroup_size);
    let _ = writeln!(m, "built_wave = {}", e.wave_width);
    let _ = writeln!(
        m,
        "declared_wave = {}",
        f.attrs.wave.map_or("absent".into(), |(w, _)| w.to_string())
    );
    let _ = writeln!(m, "wave_mode = {}", e.wave_mode);
    let _ = writeln!(m, "push_constant_bytes = {}", e.push_bytes);
    let _ = writeln!(m, "dynamic_shared = {}", e.dynamic_shared_elem.is_some());
    let _ = writeln!(m, "capabilities = {}", e.capabilities.join(" "));
    let _ = writeln!(m, "spirv_bytes = {}", e.words.len() * 4);
    let _ = writeln!(m, "code_hash = {:016x}", super::hash_words(&e.words));
    let _ = writeln!(m, "registers = absent");
    let _ = writeln!(m, "spill_bytes = absent");
    m
}

/// The CLI's `build --backend vulkan`.
pub fn build(path: &str, module: &crate::ir::VerifiedModule, emit: Option<&Path>) -> ExitCode {
    let (caps, device) = caps();
    let device = match device {
        Some(d) => d,
        None => {
            eprintln!(
                "xpu build: note: no Vulkan device; building for every optional capability at \
                 subgroup size 32"
            );
            "absent".into()
        }
    };
    let (val, dis) = (tool("spirv-val"), tool("spirv-dis"));
    if !val {
        eprintln!("xpu build: note: spirv-val not found; modules are not validated");
    }
    let mut failed = false;
    for (h, f) in module.kernels() {
        let t0 = std::time::Instant::now();
        let e = match emit_kernel(module, h, &caps) {
            Ok(e) => e,
            Err(u) => {
                eprintln!("{path}: error[XPU-L001]: kernel {}: {u}", f.name);
                failed = true;
                continue;
            }
        };
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let valid = if val {
            match on_words(&e.words, "spirv-val", &["--target-env", "vulkan1.1"]) {
                Ok(_) => "valid",
                Err(msg) => {
                    eprintln!(
                        "{path}: error[XPU-L001]: kernel {}: spirv-val: {msg}",
                        f.name
                    );
                    failed = true;
                    "INVALID"
                }
            }
        } else {
            "not validated"
        };
        println!(
            "{path}: {}: SPIR-V 1.3, {} bytes, wave {} ({}), lowered in {ms:.1} ms, {valid}",
            f.name,
            e.words.len() * 4,
            e.wave_width,
            e.wave_mode
        );
        if let Some(dir) = emit {
            let base = dir.join(&e.entry);
            let bytes: Vec<u8> = e.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut res = std::fs::write(base.with_extension("spv"), bytes).and_then(|_| {
                std::fs::write(
                    base.with_extension("manifest"),
                    manifest_text(&f.name, f, &e, &device),
                )
            });
            if dis && res.is_ok() {
                match on_words(&e.words, "spirv-dis", &[]) {
                    Ok(text) => res = std::fs::write(base.with_extension("spvasm"), text),
                    Err(msg) => eprintln!("xpu build: note: spirv-dis: {msg}"),
                }
            }
            if let Err(err) = res {
                eprintln!("xpu build: {}: {err}", dir.display());
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
