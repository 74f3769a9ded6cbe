//! Vulkan backend tests (one binary): every filetest kernel's SPIR-V passes `spirv-val
//! --target-env vulkan1.1` (at subgroup sizes 8 and 32, with every optional capability
//! offered), and, where a Vulkan device is present (Mesa's lavapipe here, the NVIDIA driver on
//! the GPU machine), the filetests run on it and agree with the interpreter, capability
//! refusals reported as skips. Without `spirv-val` or without a device, the test in question
//! prints why and checks only what it can.

use std::path::{Path, PathBuf};
use std::process::Command;
use xpu::devices::vulkan::spirv::{emit_kernel, Caps};
use xpu::devices::Backend;

fn filetests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "xk") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests"),
        &mut out,
    );
    out
}

fn have_spirv_val() -> bool {
    Command::new("spirv-val").arg("--version").output().is_ok()
}

fn validate(words: &[u32], tag: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("xpu-vk-val-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{tag}.spv"));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
    let out = Command::new("spirv-val")
        .args(["--target-env", "vulkan1.1"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        let _ = std::fs::remove_file(&path);
        Ok(())
    } else {
        Err(format!(
            "{}{} (kept at {})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            path.display()
        ))
    }
}

#[test]
fn every_filetest_kernel_emits_valid_spirv() {
    if !have_spirv_val() {
        eprintln!("spirv-val not found (apt-get install spirv-tools): emission only");
    }
    let check = have_spirv_val();
    let mut failures = Vec::new();
    let mut refused = Vec::new();
    let mut emitted = 0;
    for path in filetests() {
        let src = std::fs::read_to_string(&path).unwrap();
        let Ok(m) = xpu::ir::parse(&src) else {
            continue;
        };
        let Ok(vm) = m.verify() else { continue };
        for s in [8u32, 32] {
            let caps = Caps::all(s);
            for (h, f) in vm.kernels() {
                let tag = format!(
                    "{}-{}-{s}",
                    path.file_stem().unwrap().to_string_lossy(),
                    f.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                );
                match emit_kernel(&vm, h, &caps) {
                    Ok(e) => {
                        emitted += 1;
                        if check {
                            if let Err(msg) = validate(&e.words, &tag) {
                                failures.push(format!(
                                    "{} {} (S={s}): {msg}",
                                    path.display(),
                                    f.name
                                ));
                            }
                        }
                    }
                    Err(u) => refused.push(format!("{} {} (S={s}): {u}", path.display(), f.name)),
                }
            }
        }
    }
    println!(
        "{emitted} kernels emitted; refused:\n  {}",
        refused.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} invalid modules:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(emitted >= 60, "only {emitted} kernels emitted");
    // Refusals are by name, and only for what Vulkan cannot express here.
    for r in &refused {
        assert!(
            r.contains("cooperative matri")
                || r.contains("-lane vector")
                || r.contains("@wave(")
                || r.contains("GLSL.std.450 has no 64-bit"),
            "unexpected refusal: {r}"
        );
    }
}

#[test]
fn vulkan_availability_never_panics() {
    // With or without a loader and a device, opening answers a value.
    match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => println!("vulkan: {:?}", d.facts().name),
        Err(e) => println!("vulkan not offered: {e}"),
    }
}

#[test]
fn filetests_on_the_vulkan_device_agree_with_the_interpreter() {
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    std::env::set_var("CAJETA_XPU_POISON", "1");
    let runner = xpu::filetest::runner::Runner::new(vec![device]).unwrap();
    let mut report = Vec::new();
    let summary = runner
        .run_paths(&[PathBuf::from("tests/filetests")], &mut report)
        .unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(summary.passed >= 90, "only {} cases passed", summary.passed);
}
