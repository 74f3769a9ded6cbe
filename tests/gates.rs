//! The build for declared backends and its gates (contract §3.4, §3.6, §4; `xpu::gate`), on the
//! backends every machine builds: the CPU and Vulkan (SPIR-V; the capabilities of the Vulkan
//! device when there is one). The NVPTX and AMDGPU lines are in tests/gpu.rs (feature `cuda`,
//! `hip`). Also: pinned blocks (`@block`, refusal 5 on every backend here), `hold = true`
//! refused at launch (`XPU-L019`), the CPU manifest's `built_wave` and every backend's
//! `code_hash`, and refusal 3 (`XPU-L011`) on the CPU.

use std::process::{Command, Output};
use xpu::gate::{self, diagnose, BuiltKernel, CodeFormat, Target};
use xpu::{Backend, Device, KernelBuffer, KernelManifest, KernelStream, Launch};

const GATES: &str = "tests/filetests/gates/gates.xk";
const ESCAPES: &str = "tests/filetests/gates/escapes.xk";

/// `xpu ARGS` with `envs` set (and the gate/deadline variables cleared unless given).
fn xpu(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xpu"));
    c.args(args)
        .env_remove("CAJETA_XPU_KERNEL_GATE")
        .env_remove("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S")
        .env_remove("XPU_CPU_WAVE");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run xpu")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The gate lines (`path:line:col: level[tag]: ...`) of `stderr` about `kernel` on `backend`.
fn lines_for<'a>(stderr: &'a str, kernel: &str, backend: &str) -> Vec<&'a str> {
    let needle = format!("kernel {kernel} on {backend}: ");
    stderr.lines().filter(|l| l.contains(&needle)).collect()
}

fn vulkan_device() -> Option<Device> {
    Device::open(Backend::Vulkan).ok()
}

#[test]
fn a_file_of_several_kernels_lists_every_offender_under_one_gate_error() {
    // A deadline of 0 s: every CPU compile is abandoned as hung.
    let o = xpu(
        &["build", GATES, "--backends", "cpu,vulkan"],
        &[("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S", "0")],
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    let kernels = ["twin", "clean", "loose", "wide", "table", "tile"];
    for k in kernels {
        let l = lines_for(&stderr, k, "cpu");
        assert_eq!(l.len(), 1, "{k}: {stderr}");
        assert!(
            l[0].contains(": error[xpu-kernel-hung]: ")
                && l[0].contains("within 0 s (CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S)")
                && l[0].contains("(XPU-G005)"),
            "{}",
            l[0]
        );
        assert!(
            l[0].starts_with("tests/filetests/gates/gates.xk:"),
            "{}",
            l[0]
        );
    }
    // One summary error after every offender, naming the contract's code.
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("error[CAJETA_ERROR_XPU_KERNEL_GATE]: "),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("CAJETA_ERROR_XPU_KERNEL_GATE").count(),
        1,
        "{stderr}"
    );
    let errors = stderr
        .lines()
        .filter(|l| l.contains(": error[xpu-kernel-"))
        .count();
    assert!(
        last.contains(&format!("{errors} gate failure(s)")),
        "{last}"
    );
    // No CPU code; the Vulkan kernels that lowered are each reported on stdout.
    assert!(!stdout.contains(" on cpu: "), "{stdout}");
    if vulkan_device().is_some() {
        assert!(stdout.contains("clean on vulkan: spirv"), "{stdout}");
    }
}

#[test]
fn the_cpu_and_vulkan_build_of_the_gate_file() {
    let o = xpu(&["build", GATES, "--backends", "cpu,vulkan"], &[]);
    let (stdout, stderr) = text(&o);
    // The CPU builds every kernel, at its declared wave or the host's.
    for k in ["twin", "clean", "loose", "wide", "table", "tile"] {
        assert!(lines_for(&stderr, k, "cpu").is_empty(), "{k}: {stderr}");
        assert!(stdout.contains(&format!("{k} on cpu: ")), "{k}: {stdout}");
    }
    assert!(
        stdout.contains("clean on cpu: host-machine-code") && stdout.contains("[64, 1, 1] pinned"),
        "{stdout}"
    );
    // Unbounded is judged where a compiler budgets for the block: not here.
    assert!(!stderr.contains("xpu-kernel-unbounded"), "{stderr}");
    // On a Vulkan device whose subgroups are narrower than 64, `wide` (a virtual wave's verb
    // inside a helper) has no code: skipped, with the emitter's reason and code.
    let wide = lines_for(&stderr, "wide", "vulkan");
    let subgroup = vulkan_device().and_then(|d| d.facts().wave_width);
    match subgroup {
        Some(s) if s < 64 => {
            assert_eq!(wide.len(), 1, "{stderr}");
            assert!(
                wide[0].contains("error[xpu-kernel-skipped]")
                    && wide[0].contains("no device code:")
                    && wide[0].contains("virtual wave")
                    && wide[0].contains("(XPU-L001)"),
                "{}",
                wide[0]
            );
            assert_eq!(o.status.code(), Some(1), "{stderr}");
        }
        _ => assert!(wide.is_empty(), "{stderr}"),
    }
}

#[test]
fn warn_mode_demotes_every_gate_and_exits_0() {
    let o = xpu(
        &["build", GATES, ESCAPES, "--backends", "cpu,vulkan"],
        &[
            ("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S", "0"),
            ("CAJETA_XPU_KERNEL_GATE", "warn"),
        ],
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stderr.contains(": error["), "{stderr}");
    assert!(
        stderr.contains(": warning[xpu-kernel-hung]: kernel clean on cpu: "),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("warning[CAJETA_ERROR_XPU_KERNEL_GATE]: ")
                && l.contains("demoted by CAJETA_XPU_KERNEL_GATE=warn")),
        "{stderr}"
    );
    let bad = xpu(
        &["build", ESCAPES, "--backends", "cpu"],
        &[("CAJETA_XPU_KERNEL_GATE", "loud")],
    );
    let (_, stderr) = text(&bad);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("XPU-C001") && stderr.contains("CAJETA_XPU_KERNEL_GATE"),
        "{stderr}"
    );
}

#[test]
fn the_escapes_note_hold_and_go_stale() {
    // A host wave of 4: `host_wave_below = 8` holds.
    let o = xpu(
        &["build", ESCAPES, "--backends", "cpu,vulkan"],
        &[("XPU_CPU_WAVE", "4")],
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    // hold = true: not lowered on vulkan, a note tagged with the plan item.
    let held = lines_for(&stderr, "held", "vulkan");
    assert_eq!(held.len(), 1, "{stderr}");
    assert!(
        held[0].contains(": note[xpu-kernel-skipped]: ")
            && held[0].contains("held by @unlowered(hold = true)")
            && held[0].ends_with("[tracked: PLAN-12]"),
        "{}",
        held[0]
    );
    assert!(!stdout.contains("held on vulkan"), "{stdout}");
    assert!(stdout.contains("held on cpu: "), "{stdout}");
    // A hold of a kernel that lowers and passes: STALE, an error.
    let stale = lines_for(&stderr, "stale", "cpu");
    assert_eq!(stale.len(), 1, "{stderr}");
    assert!(
        stale[0].contains(": error[xpu-kernel-skipped]: kernel stale on cpu: STALE: ")
            && stale[0].contains("(XPU-G006)")
            && stale[0].ends_with("[tracked: PLAN-7]"),
        "{}",
        stale[0]
    );
    // may_lower = true: no stale detection.
    assert!(lines_for(&stderr, "may", "cpu").is_empty(), "{stderr}");
    // host_wave_below = 8 on a host of 4 lanes: the hold applies, and is stale.
    let narrow = lines_for(&stderr, "narrow", "cpu");
    assert!(
        narrow.len() == 1
            && narrow[0].contains("STALE")
            && narrow[0].ends_with("[tracked: PLAN-9]"),
        "{stderr}"
    );
    // The derived pin is a note, and the manifest records it.
    assert!(
        stderr.contains(": note[xpu-kernel-build]: kernel derived: block [16, 1, 1] pinned"),
        "{stderr}"
    );
    assert!(
        stdout.contains("derived on cpu: host-machine-code")
            && stdout.contains("[16, 1, 1] pinned"),
        "{stdout}"
    );
    // On a host of 16 lanes the narrow hold holds nothing: no line at all.
    let o = xpu(
        &["build", ESCAPES, "--backends", "cpu"],
        &[("XPU_CPU_WAVE", "16")],
    );
    let (_, stderr) = text(&o);
    assert!(lines_for(&stderr, "narrow", "cpu").is_empty(), "{stderr}");
    assert_eq!(lines_for(&stderr, "stale", "cpu").len(), 1, "{stderr}");
}

#[test]
fn build_json_parses_back() {
    let o = xpu(
        &[
            "build",
            GATES,
            ESCAPES,
            "--backends",
            "cpu,vulkan",
            "--json",
        ],
        &[],
    );
    let (stdout, stderr) = text(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}):\n{stdout}\n{stderr}");
    });
    assert_eq!(v["failed"], serde_json::json!(true), "{stdout}");
    let kernels = v["kernels"].as_array().unwrap();
    let find = |k: &str, b: &str| {
        kernels
            .iter()
            .find(|x| x["kernel"] == k && x["backend"] == b)
            .unwrap_or_else(|| panic!("{k} on {b} missing:\n{stdout}"))
    };
    let clean = &find("clean", "cpu")["manifest"];
    assert_eq!(clean["pinned_block"], serde_json::json!([64, 1, 1]));
    // No wave verb: built at 1 (§3.7); a wave kernel at its width.
    assert_eq!(clean["built_wave"], serde_json::json!(1));
    assert_eq!(
        find("wide", "cpu")["manifest"]["built_wave"],
        serde_json::json!(64)
    );
    assert_eq!(clean["registers_per_thread"], serde_json::Value::Null);
    for k in kernels {
        let hash = k["manifest"]["code_hash"].as_str().unwrap_or("");
        assert_eq!(hash.len(), 16, "{k}");
    }
    let lines = v["lines"].as_array().unwrap();
    let stale = lines
        .iter()
        .find(|l| l["kernel"] == "stale" && l["backend"] == "cpu")
        .unwrap();
    assert_eq!(stale["stale"], serde_json::json!(true));
    assert_eq!(stale["gate"], serde_json::json!("xpu-kernel-skipped"));
    assert_eq!(stale["level"], serde_json::json!("error"));
    assert_eq!(stale["tracked"], serde_json::json!("PLAN-7"));
    assert_eq!(stale["code"], serde_json::json!("XPU-G006"));
    assert!(stale["text"].as_str().unwrap().contains("STALE"));
}

#[test]
fn the_gate_library_builds_a_module() {
    // The seam a bundle writer uses: per (kernel, target), code and manifest.
    let src = std::fs::read_to_string(ESCAPES).unwrap();
    let opts = gate::Options {
        targets: vec![Target::Vulkan],
        cuda_arch: "sm_90".into(),
        amdgpu_arch: "gfx90a".into(),
        warn: false,
        cpu_deadline: std::time::Duration::from_secs(600),
    };
    let b = gate::build_file("escapes.xk", &src, &opts).unwrap();
    let derived = b.kernels.iter().find(|k| k.kernel == "derived").unwrap();
    assert_eq!(derived.format, CodeFormat::Spirv);
    assert_eq!(&derived.code[..4], &0x0723_0203u32.to_le_bytes());
    assert_eq!(derived.manifest.pinned_block, Some([16, 1, 1]));
    assert!(b.kernels.iter().all(|k| k.kernel != "held"));
    assert!(!b.failed(), "{:?}", b.lines);
    // A file that does not verify is its diagnostics.
    let err =
        gate::build_file("x.xk", "@block(0)\nkernel z(o: buf<u32, rw>) {\n}\n", &opts).unwrap_err();
    assert_eq!(err.0[0].code, "XPU-G001", "{err:?}");
}

#[test]
fn block_attributes_are_verified_and_round_trip() {
    let src = "@occupancy(max_threads = 64)\n@block(16, 8)\nkernel k(o: buf<u32, rw>) {\n    o[global_id.x] = 1;\n}\n";
    let m = xpu::ir::parse(src).unwrap();
    let printed = xpu::ir::print(&m);
    assert!(printed.contains("@block(16, 8)\n"), "{printed}");
    assert_eq!(xpu::ir::print(&xpu::ir::parse(&printed).unwrap()), printed);
    let e = m.verify().unwrap_err();
    assert_eq!(e.0[0].code, "XPU-G002", "{e:?}");
    for bad in [
        "@block(0)",
        "@block(65536, 65536)",
        "@block()",
        "@block(1, 2, 3, 4)",
    ] {
        let src = format!("{bad}\nkernel k(o: buf<u32, rw>) {{\n    o[0] = 1;\n}}\n");
        let r = xpu::ir::parse(&src).and_then(|m| m.verify());
        assert!(r.is_err(), "{bad} accepted");
    }
    let ok = xpu::ir::parse("@block(8, 2, 2)\nkernel k(o: buf<u32, rw>) {\n    o[0] = 1;\n}\n")
        .unwrap()
        .verify()
        .unwrap();
    let (h, _) = ok.kernels().next().unwrap();
    let m = KernelManifest::from_kernel(ok.function(h), Backend::Interp);
    assert_eq!(m.pinned_block, Some([8, 2, 2]));
}

const PINNED: &str =
    "@block(64)\nkernel p(o: buf<u32, rw>) {\n    o[global_id.x] = global_id.x + 1;\n}\n\n\
    @unlowered(backend = \"vulkan\", tracked = \"PLAN-12\", hold = true)\n\
    @unlowered(backend = \"cpu\", tracked = \"PLAN-13\", hold = true, host_wave_below = 1024)\n\
    kernel h(o: buf<u32, rw>) {\n    o[global_id.x] = 2;\n}\n\n\
    kernel plain(o: buf<u32, rw>) {\n    o[global_id.x] = 3;\n}\n\n\
    kernel waves(o: buf<u32, rw>) {\n    o[global_id.x] = wave_reduce_sum(1u32);\n}\n";

fn devices() -> Vec<Device> {
    let mut out = vec![
        Device::open(Backend::Interp).unwrap(),
        Device::open(Backend::Cpu).unwrap(),
    ];
    out.extend(vulkan_device());
    out
}

#[test]
fn a_pinned_block_is_refused_otherwise_on_every_backend() {
    let vm = xpu::ir::parse(PINNED).unwrap().verify().unwrap();
    for dev in devices() {
        let program = dev.load(&vm).unwrap();
        let k = program.kernel("p").unwrap();
        assert_eq!(
            k.manifest().pinned_block,
            Some([64, 1, 1]),
            "{}",
            dev.backend()
        );
        let stream = KernelStream::current(&dev);
        let mut out = KernelBuffer::<u32>::new(&dev, 128).unwrap();
        let e = k
            .launch(&stream, Launch::grid([4]).block([32]), xpu::args![&mut out])
            .unwrap_err();
        assert_eq!(e.code(), "XPU-L008", "{}: {e}", dev.backend());
        assert!(e.to_string().contains("pinned block [64, 1, 1]"), "{e}");
        k.launch(&stream, Launch::grid([2]).block([64]), xpu::args![&mut out])
            .unwrap();
        stream.sync().unwrap();
        let got = out.download().unwrap();
        assert_eq!(got, (1..=128).collect::<Vec<u32>>(), "{}", dev.backend());
    }
}

#[test]
fn a_held_kernel_is_refused_by_name_and_has_no_manifest() {
    let vm = xpu::ir::parse(PINNED).unwrap().verify().unwrap();
    for dev in devices() {
        let program = dev.load(&vm).unwrap();
        match dev.backend() {
            // `host_wave_below = 1024`: every host is narrower.
            Backend::Vulkan | Backend::Cpu => {
                let e = program.kernel("h").unwrap_err();
                assert_eq!(e.code(), "XPU-L019", "{e}");
                assert!(e.refused_by_device());
                let plan = if dev.backend() == Backend::Cpu {
                    "PLAN-13"
                } else {
                    "PLAN-12"
                };
                assert!(
                    e.to_string().contains("kernel h: held on the")
                        && e.to_string().contains(&format!("[tracked: {plan}]")),
                    "{e}"
                );
                assert!(program.manifest("h").is_none());
            }
            _ => {
                program.kernel("h").unwrap();
                assert!(program.manifest("h").is_some());
            }
        }
    }
}

#[test]
fn manifests_record_the_built_wave_and_a_code_hash_on_every_backend() {
    let vm = xpu::ir::parse(PINNED).unwrap().verify().unwrap();
    for dev in devices() {
        let program = dev.load(&vm).unwrap();
        for k in ["p", "plain", "waves"] {
            let m = program.manifest(k).unwrap();
            assert!(m.code_hash.is_some(), "{k} on {}", dev.backend());
        }
        if dev.backend() == Backend::Cpu {
            let host = dev.facts().wave_width.unwrap();
            assert_eq!(program.manifest("plain").unwrap().built_wave, Some(1));
            assert_eq!(program.manifest("waves").unwrap().built_wave, Some(host));
            // A wave-free kernel takes any launch wave.
            let stream = KernelStream::current(&dev);
            let mut out = KernelBuffer::<u32>::new(&dev, 8).unwrap();
            program
                .kernel("plain")
                .unwrap()
                .launch(
                    &stream,
                    Launch::grid([1]).block([8]).wave(host),
                    xpu::args![&mut out],
                )
                .unwrap();
            assert_eq!(out.download().unwrap(), vec![3; 8]);
        }
    }
}

#[test]
fn the_scalar_twin_of_a_wave_kernel_is_refused_on_the_cpu() {
    // XPU_CPU_WAVE=1 builds the CPU's work-item loop at one lane: `twin` (a wave verb, no
    // @wave) would run as its scalar twin.
    let o = xpu(
        &["run", GATES, "--backend", "cpu"],
        &[("XPU_CPU_WAVE", "1")],
    );
    let (stdout, stderr) = text(&o);
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("XPU-L011") && all.contains("twin"), "{all}");
    let o = xpu(
        &["build", GATES, "--backends", "cpu"],
        &[("XPU_CPU_WAVE", "1")],
    );
    let (_, stderr) = text(&o);
    let l = lines_for(&stderr, "twin", "cpu");
    assert!(
        l.len() == 1 && l[0].contains("xpu-kernel-skipped") && l[0].contains("(XPU-L011)"),
        "{stderr}"
    );
    // `wide` declares @wave(64): built at 64 whatever the host.
    assert!(lines_for(&stderr, "wide", "cpu").is_empty(), "{stderr}");
}

/// A manifest for `diagnose::spill` as NVPTX would measure it.
fn nvptx(kernel: &str, stack: u32, stores: u32, regs: u32, block: Option<[u32; 3]>) -> BuiltKernel {
    let mut m = KernelManifest::empty(kernel, Backend::Cuda);
    m.stack_frame_bytes = Some(stack);
    m.spill_store_bytes = Some(stores);
    m.spill_load_bytes = Some(stores);
    m.registers_per_thread = Some(regs);
    m.pinned_block = block;
    BuiltKernel {
        kernel: kernel.into(),
        target: Target::Cuda,
        arch: Some("sm_90".into()),
        format: CodeFormat::Ptx,
        code: Vec::new(),
        manifest: m,
    }
}

#[test]
fn the_spill_diagnosis_tells_three_causes_apart() {
    let src = std::fs::read_to_string(GATES).unwrap();
    let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
    let f = |name: &str| vm.function(vm.kernel(name).unwrap());
    // A software tile: the fragment is named, a native type suggested.
    let m = diagnose::spill(f("tile"), &nvptx("tile", 3072, 0, 40, None), None).unwrap();
    assert!(
        m.contains("portable software tile")
            && m.contains("fragment `fa` (matrix<a, f32, 16, 16>, 1024 bytes")
            && m.contains("f16 A/B"),
        "{m}"
    );
    // Zero spill stores: a construct legalised through memory, the private array named.
    let m = diagnose::spill(f("table"), &nvptx("table", 256, 0, 20, None), None).unwrap();
    assert!(
        m.contains("zero spill stores") && m.contains("private array `t` ([u32; _])"),
        "{m}"
    );
    // Register pressure: registers against the budget of the pinned block.
    let m = diagnose::spill(
        f("clean"),
        &nvptx("clean", 64, 64, 64, Some([1024, 1, 1])),
        None,
    )
    .unwrap();
    assert!(
        m.contains("register pressure: 64 registers per thread against a budget of 64 for a block of 1024 threads")
            && m.contains("pin a smaller block"),
        "{m}"
    );
    // No scratch, or nothing measured: no line.
    assert!(diagnose::spill(f("clean"), &nvptx("clean", 0, 0, 8, None), None).is_none());
    let mut unmeasured = nvptx("clean", 0, 0, 8, None);
    unmeasured.manifest.spill_store_bytes = None;
    unmeasured.manifest.stack_frame_bytes = None;
    assert!(diagnose::spill(f("clean"), &unmeasured, None).is_none());
}
