//! The CPU backend against the reference interpreter.
//!
//! - Targeted cases: out-of-bounds accesses fail the launch naming kernel, line and index and
//!   touch nothing; integer division by zero fails the launch (never a SIGFPE); the UB corpus
//!   (`tests/ub/`) never crashes the process; worker caps; barriers in loops.
//! - A differential fuzzer: random kernels (arithmetic on every type, divergent `if`s,
//!   loops with labelled `break`/`continue`, early returns, device helpers, private arrays,
//!   vectors, shared memory with barriers, also inside `if`s and loops every work-item takes
//!   alike, shared atomics, wave verbs (constant-offset shuffles only where every lane is
//!   active), inexact float reductions, every atomic kind with memory orders, the
//!   compare-exchange retry loop, scattered stores, random geometry and `@wave`) run on both,
//!   every generated value folded into an output; integers and floats must agree bit for bit
//!   (the CPU computes exactly the interpreter's operations in the same order; any NaN
//!   equals any NaN). About one kernel in 16 makes one out-of-bounds access (buffer, shared
//!   or private): the interpreter reports it and the CPU must refuse the launch with
//!   `XPU-L013`. Kernels with other undefined behaviour still run on the CPU (the process
//!   must survive them) and are not compared. `XPU_FUZZ_CASES` sets the count (default
//!   1000).
//! - The same generator's Vulkan batch through `xpu run` (1,000 kernels), then kernels out of
//!   bounds in shared memory on lavapipe, in this process.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use xpu::{args, Backend, Device, KernelBuffer, KernelStream, Launch, LaunchError};

fn devices() -> (Device, Device) {
    (
        Device::open(Backend::Interp).expect("interp"),
        Device::open(Backend::Cpu).expect("cpu"),
    )
}

fn load(device: &Device, src: &str) -> xpu::Program {
    let m = xpu::ir::parse(src)
        .unwrap_or_else(|e| panic!("parse: {e}\n{src}"))
        .verify()
        .unwrap_or_else(|e| panic!("verify: {e}\n{src}"));
    device.load(m).expect("load")
}

#[test]
fn out_of_bounds_fails_the_launch_and_touches_nothing() {
    let (_, cpu) = devices();
    let src = "kernel oob(out: buf<u32, rw>, n: u32) {\n    let i: u32 = global_id.x;\n    out[i + n] = i;\n}\n";
    let p = load(&cpu, src);
    let k = p.kernel("oob").unwrap();
    let stream = KernelStream::current(&cpu);
    let mut big = cpu.upload(&[7u32; 40]).unwrap();
    let mut out = big.slice(0..32).unwrap();
    let e = k
        .launch(
            &stream,
            Launch::grid([1]).block([32]),
            args![&mut out, 4u32],
        )
        .unwrap_err();
    match &e {
        LaunchError::OutOfBounds {
            kernel,
            line,
            index,
            len,
            ..
        } => {
            assert_eq!(kernel, "oob");
            assert_eq!(*line, 3);
            assert_eq!(*len, 32);
            assert!(*index >= 32, "{e}");
        }
        e => panic!("expected out of bounds, got {e}"),
    }
    // Nothing past the view was written.
    let all = big.download().unwrap();
    assert_eq!(&all[32..], &[7u32; 8]);
    drop(out);
    let _ = &mut big;
}

#[test]
fn out_of_bounds_scattered_stores_fail_the_launch_and_touch_nothing() {
    // Stores whose lanes are not one contiguous run (strided, reversed, gathered through an
    // index buffer, two-element vstores, under a divergent mask, in a partial wave): each takes
    // the lane-by-lane path, whose bounds check must refuse the launch before any lane writes
    // outside the 32-element view of a 48-element buffer.
    let (_, cpu) = devices();
    let src = "kernel stride(out: buf<u32, rw>, idx: buf<u32>) {\n    let i: u32 = global_id.x;\n    out[i * 2] = i;\n}\n\n\
               kernel reversed(out: buf<u32, rw>, idx: buf<u32>) {\n    let i: u32 = global_id.x;\n    out[40 - i] = i;\n}\n\n\
               kernel gathered(out: buf<u32, rw>, idx: buf<u32>) {\n    let i: u32 = global_id.x;\n    out[idx[i]] = i;\n}\n\n\
               kernel divergent(out: buf<u32, rw>, idx: buf<u32>) {\n    let i: u32 = global_id.x;\n    if i % 3 != 0 {\n        out[i * 3] = i;\n    }\n}\n\n\
               kernel pairs(out: buf<u32, rw>, idx: buf<u32>) {\n    let i: u32 = global_id.x;\n    vstore(out, i * 4, vec2<u32>(i, i));\n}\n";
    let p = load(&cpu, src);
    let stream = KernelStream::current(&cpu);
    // idx[i] = 31 - i for the first lanes, then past the end from lane 8.
    let idx: Vec<u32> = (0..32u32)
        .map(|i| if i < 8 { 31 - i } else { 32 + i })
        .collect();
    let idx = cpu.upload(&idx).unwrap();
    for (name, block) in [
        ("stride", 32u32),
        ("stride", 20),
        ("reversed", 32),
        ("reversed", 13),
        ("gathered", 32),
        ("gathered", 11),
        ("divergent", 32),
        ("pairs", 32),
        ("pairs", 9),
    ] {
        let k = p.kernel(name).unwrap();
        let big = cpu.upload(&[7u32; 48]).unwrap();
        let e = {
            let mut out = big.slice(0..32).unwrap();
            k.launch(
                &stream,
                Launch::grid([1]).block([block]),
                args![&mut out, &idx],
            )
            .map(|_| ())
        };
        match &e {
            Err(e @ LaunchError::OutOfBounds { kernel, len, .. }) => {
                assert_eq!(e.code(), "XPU-L013");
                assert_eq!(kernel, name);
                assert_eq!(*len, 32, "{name} block {block}: {e}");
            }
            e => panic!("{name} block {block}: expected out of bounds, got {e:?}"),
        }
        // Nothing past the view was written.
        let all = big.download().unwrap();
        assert_eq!(&all[32..], &[7u32; 16], "{name} block {block}");
    }
}

#[test]
fn division_by_zero_is_an_error_and_min_over_minus_one_wraps() {
    let (_, cpu) = devices();
    let src = "kernel div(out: buf<i32, rw>, a: buf<i32>, b: buf<i32>) {\n    let i: u32 = global_id.x;\n    out[i] = a[i] / b[i] + a[i] % b[i];\n}\n";
    let p = load(&cpu, src);
    let k = p.kernel("div").unwrap();
    let stream = KernelStream::current(&cpu);
    let a = cpu.upload(&[i32::MIN, 7, -7, 9]).unwrap();
    let b = cpu.upload(&[-1, 2, 2, 3]).unwrap();
    let mut out = cpu.upload(&[0i32; 4]).unwrap();
    k.launch(
        &stream,
        Launch::grid([1]).block([4]),
        args![&mut out, &a, &b],
    )
    .unwrap();
    assert_eq!(out.download().unwrap(), vec![i32::MIN, 4, -4, 3]);
    let z = cpu.upload(&[1, 1, 0, 1]).unwrap();
    let e = k
        .launch(
            &stream,
            Launch::grid([1]).block([4]),
            args![&mut out, &a, &z],
        )
        .unwrap_err();
    assert!(e.to_string().contains("division by zero"), "{e}");
}

#[test]
fn ub_corpus_never_crashes() {
    // Every run block of tests/ub on the CPU, judged as the file tests judge it: the kinds the
    // CPU checks must be refused with its code (XPU-L013, XPU-L015, XPU-L010); the others run
    // (never a crash) and are skipped. No case may fail.
    let (_, cpu) = devices();
    let interp = Device::open(Backend::Interp).unwrap();
    let (mut refused, mut ran) = (0, 0);
    let mut failures = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir("tests/ub")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for path in paths {
        let src = std::fs::read_to_string(&path).unwrap();
        let (m, specs) = xpu::ir::parse_file(&src)
            .unwrap_or_else(|e| panic!("{}: does not parse: {e}", path.display()));
        let m = m
            .verify()
            .unwrap_or_else(|e| panic!("{}: does not verify: {e}", path.display()));
        // ub-traps on, as in the file tests (`xpu run`): broken `align` statements are caught.
        let traps = xpu::ProgramOptions {
            checked: false,
            ub_traps: true,
            ..Default::default()
        };
        let pc = cpu.load_with(m.clone(), traps).unwrap();
        let pi = interp.load(m).unwrap();
        for spec in &specs {
            match xpu::filetest::runner::run_case(spec, &pc, &pi) {
                xpu::filetest::runner::Outcome::Pass => refused += 1,
                xpu::filetest::runner::Outcome::Skip(_) => ran += 1,
                xpu::filetest::runner::Outcome::Fail(why) => {
                    failures.push(format!("{}: {}: {why}", path.display(), spec.kernel))
                }
            }
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "UB corpus on the CPU: {refused} refused with the CPU's code, {ran} ran undetected"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Out of bounds (buffer, shared, private, scattered store), division and remainder by
    // zero, two broken aligns.
    assert!(refused >= 8, "only {refused} UB cases refused");
}

#[test]
fn worker_cap_and_many_groups() {
    // Under a cap of one worker the calling thread runs every workgroup, in order: each
    // group's ticket from a global counter is its group id. Then the default cap again.
    let (_, cpu) = devices();
    let src = "kernel count(c: buf<u32, rw>, ticket: buf<u32, rw>) {\n    atomic_add(c[group_id.x % 4], 1);\n    \
               if local_id.x == 0 {\n        ticket[group_id.x] = atomic_add(c[4], 1);\n    }\n}\n";
    let p = load(&cpu, src);
    let k = p.kernel("count").unwrap();
    let stream = KernelStream::current(&cpu);
    let d = cpu
        .implementation()
        .as_any_device()
        .and_then(|a| a.downcast_ref::<xpu::backend::cpu::CpuDevice>())
        .expect("a CPU device");
    let default = d.worker_cap();
    for cap in [1, 0] {
        d.set_worker_cap(cap);
        assert_eq!(d.worker_cap(), if cap == 0 { default } else { cap });
        let mut c = cpu.upload(&[0u32; 5]).unwrap();
        let mut ticket = cpu.upload(&[0u32; 1000]).unwrap();
        k.launch(
            &stream,
            Launch::grid([1000]).block([33]),
            args![&mut c, &mut ticket],
        )
        .unwrap();
        let c = c.download().unwrap();
        assert_eq!(&c[..4], &[250 * 33; 4], "cap {cap}");
        assert_eq!(c[4], 1000, "cap {cap}");
        let mut ticket = ticket.download().unwrap();
        if cap == 1 {
            assert!(
                ticket.iter().enumerate().all(|(g, &t)| t == g as u32),
                "cap 1: the groups did not run one after another: {:?}",
                &ticket[..20]
            );
        }
        ticket.sort_unstable();
        assert!(ticket.iter().enumerate().all(|(g, &t)| t == g as u32));
    }
}

/// Polls `as_any` through the trait object (a helper trait keeps the test independent of
/// whether `DeviceImpl` exposes `Any`).
trait AsAnyDevice {
    fn as_any_device(&self) -> Option<&dyn std::any::Any>;
}
impl AsAnyDevice for std::sync::Arc<dyn xpu::hal::DeviceImpl> {
    fn as_any_device(&self) -> Option<&dyn std::any::Any> {
        let d: &dyn xpu::hal::DeviceImpl = self.as_ref();
        Some(d as &dyn std::any::Any)
    }
}

// ---------------------------------------------------------------------------------------
// The differential fuzzer

// The generator is the library's fuzzing kit (`xpu::fuzz::gen`).
use xpu::fuzz::gen::{
    as_kernel_file, generate, generate_for_cpu, generate_out_of_bounds, inputs, Case,
};

enum Verdict {
    Agree,
    /// The interpreter reported an out-of-bounds access and the CPU refused the launch with
    /// `XPU-L013`, as it must.
    BothRefused,
    /// The interpreter reported undefined behaviour: no meaning to compare.
    Discard,
}

/// Writes `want` generated kernels that the interpreter runs without undefined behaviour (at
/// wave 32 and at the CPU's width) into `dir` as kernel files whose run blocks compare every
/// output with the interpreter, for `xpu run DIR --backend cuda|vulkan|...`.
fn write_corpus(dir: &std::path::Path, want: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let (interp, _) = devices();
    let (mut written, mut seed) = (0, 0u64);
    while written < want {
        seed += 1;
        let case = generate(seed);
        let Ok(Ok(m)) = xpu::ir::parse(&case.src).map(|m| m.verify()) else {
            continue;
        };
        let p = interp.load(m).unwrap();
        let defined = [Some(32), None]
            .iter()
            .all(|&w| run_on(&interp, &p, &case, w, seed).is_ok());
        if defined {
            let path = dir.join(format!("case_{seed:05}.xk"));
            std::fs::write(path, as_kernel_file(&case, seed)).unwrap();
            written += 1;
        }
    }
}

/// `XPU_FUZZ_DUMP=DIR XPU_FUZZ_CASES=N cargo test --test cpu -- --ignored dump`: the corpus
/// for a machine that has the `xpu` binary but not Rust (a GPU machine).
#[test]
#[ignore]
fn dump_fuzz_corpus() {
    let Ok(dir) = std::env::var("XPU_FUZZ_DUMP") else {
        return;
    };
    let want: usize = std::env::var("XPU_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    write_corpus(std::path::Path::new(&dir), want);
    println!("wrote {want} kernel files to {dir}");
}

/// A batch of the fuzzer's kernels on Vulkan (lavapipe in CI) against the interpreter,
/// through `xpu run` exactly as a user would run them (`XPU_VK_FUZZ_CASES`, default 1,000),
/// then, in this process, kernels that go out of bounds in shared memory: on lavapipe, which
/// runs shaders in this process, each must leave the host intact (no signal, no heap
/// corruption) and the device usable (a defined kernel launched after each batch agrees).
#[test]
fn fuzz_batch_agrees_on_vulkan() {
    let Ok(vk) = Device::open(Backend::Vulkan) else {
        println!("vulkan fuzz batch: no Vulkan device here, skipped");
        return;
    };
    let cases: usize = std::env::var("XPU_VK_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let dir = std::env::temp_dir().join(format!("xpu-vk-fuzz-{}", std::process::id()));
    write_corpus(&dir, cases);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
        .arg("run")
        .arg(&dir)
        .args(["--backend", "vulkan"])
        .env("CAJETA_XPU_POISON", "1")
        .output()
        .expect("run xpu");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().last().unwrap_or_default().to_string();
    let _ = writeln!(
        std::io::stderr(),
        "vulkan fuzz batch ({cases} generated kernels): {summary}"
    );
    // Every failing case, less the known open disagreements (each printed in the log).
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    let mut unknown = Vec::new();
    for line in &failed {
        match KNOWN_VULKAN_DISAGREEMENTS
            .iter()
            .find(|(case, _)| line.contains(&format!("/{case}.xk:")))
        {
            Some((case, why)) => {
                let _ = writeln!(std::io::stderr(), "known open disagreement {case}: {why}");
            }
            None => unknown.push(*line),
        }
    }
    assert!(
        matches!(out.status.code(), Some(0) | Some(1))
            && unknown.is_empty()
            && failed.len() + passed_or_skipped(&stdout) > 0,
        "{}\n{summary}",
        stdout
            .lines()
            .filter(|l| l.starts_with("FAIL") || l.starts_with("    "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let passed: usize = summary
        .split(" passed")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed * 2 >= cases,
        "too few cases ran on Vulkan: {summary}"
    );

    // Out of bounds in shared memory, on a device that runs in this process only.
    if !vk
        .facts()
        .name
        .as_deref()
        .is_some_and(|n| n.contains("llvmpipe"))
    {
        return;
    }
    let (interp, _) = devices();
    let (mut launched, mut seed) = (0usize, 1u64 << 40);
    while launched < 200 {
        seed += 1;
        let case = generate_out_of_bounds(seed);
        let Ok(Ok(m)) = xpu::ir::parse(&case.src).map(|m| m.verify()) else {
            continue;
        };
        let pi = interp.load(m.clone()).unwrap();
        let wave = Some(vk.facts().wave_width.unwrap_or(32));
        match run_on(&interp, &pi, &case, wave, seed) {
            Err(LaunchError::Undefined { kind, .. }) if kind == "out_of_bounds" => {}
            _ => continue,
        }
        let pv = vk.load(m).unwrap();
        // Undefined: any result or refusal, but the process must survive it.
        let _ = run_on(&vk, &pv, &case, None, seed);
        launched += 1;
        if launched % 50 == 0 {
            assert_defined_case_agrees(&interp, &vk, seed);
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "vulkan out-of-bounds batch: {launched} kernels with shared-memory accesses out of bounds ran in this process, the device still agrees"
    );
}

/// Disagreements of the Vulkan batch found and not yet fixed, by case file, each with what
/// was seen (the closing notes track them): a new one fails the test.
const KNOWN_VULKAN_DISAGREEMENTS: &[(&str, &str)] = &[
    (
        "case_00211",
        "lavapipe: `floor(sin(a as f32))` at a = -125585592 is 1.0 where the interpreter gives \
         0.0: f32 sin of a 1.3e8 argument (GLSL.std.450 Sin has no precision bound outside \
         [-pi, pi], and the SPIR-V lowering's f32 sin falls back to it outside the range its f64 \
         path reduces)",
    ),
    (
        "case_01171",
        "lavapipe: a wave sum over `pow(f, f)` of special inputs (inf, 1e-40, -x) is 0.0 where \
         the interpreter's IEEE pow gives inf",
    ),
    (
        "case_00523",
        "lavapipe: `fma(0.0, p, p)` with p = inf is inf where IEEE fma gives NaN (an fma whose \
         addend is its multiplicand is rewritten; fma(0, p, q) with another q = inf is right)",
    ),
    (
        "case_00932",
        "Vulkan sin past |x| = 65536 (here -9.2e18) falls back to the driver's sin, which has no \
         accuracy bound there (docs/semantics.md, Transcendental accuracy): 1.0 for -0.99993",
    ),
    (
        "case_01102",
        "lavapipe: a helper returning -0.0 on one branch and 1.0 on the other gives +0.0 (the \
         merged constants meet its bcsel(c, 0.0, 1.0) -> b2f(!c) rewrite, which matches -0.0 \
         as 0.0; select and `if` expressions of such constants are lowered around it)",
    ),
];

/// Cases `xpu run` reported as passed or skipped.
fn passed_or_skipped(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("SKIP"))
        .count()
}

/// The first defined generated kernel from `seed` on gives the interpreter's results on
/// `device`.
fn assert_defined_case_agrees(interp: &Device, device: &Device, mut seed: u64) {
    loop {
        seed += 1;
        let case = generate(seed);
        let Ok(Ok(m)) = xpu::ir::parse(&case.src).map(|m| m.verify()) else {
            continue;
        };
        let pi = interp.load(m.clone()).unwrap();
        let pd = device.load(m).unwrap();
        let wave = pd.kernel("k").ok().and_then(|k| k.manifest().built_wave);
        let Ok(want) = run_on(interp, &pi, &case, wave.or(device.facts().wave_width), seed) else {
            continue;
        };
        match run_on(device, &pd, &case, None, seed) {
            Ok(got) => {
                assert_eq!(want, got, "seed {seed}\n{}", case.src);
                return;
            }
            Err(e) if e.refused_by_device() || e.code() == "XPU-L001" => continue,
            Err(e) => panic!("seed {seed}: {e}\n{}", case.src),
        }
    }
}

fn run_on(
    device: &Device,
    program: &xpu::Program,
    case: &Case,
    wave: Option<u32>,
    seed: u64,
) -> Result<Vec<Vec<u64>>, LaunchError> {
    let total = (case.grid * case.block * case.by) as usize;
    let (in_i, in_f) = inputs(case, seed);
    let stream = KernelStream::current(device);
    let mut out_i: KernelBuffer<i32> = device.upload(&vec![-1i32; total]).unwrap();
    let mut out_f: KernelBuffer<f32> = device.upload(&vec![-1.0f32; total]).unwrap();
    let mut out_l: KernelBuffer<u64> = device.upload(&vec![1u64; total]).unwrap();
    let mut cnt: KernelBuffer<u32> = device
        .upload(&[0u32, 0, u32::MAX, 0, 0, u32::MAX, 0, 0, 0])
        .unwrap();
    let xi = device.upload(&in_i).unwrap();
    let xf = device.upload(&in_f).unwrap();
    let k = program.kernel("k")?;
    let mut launch = Launch::grid([case.grid]).block([case.block, case.by]);
    if let Some(w) = wave {
        launch = launch.wave(w);
    }
    k.launch(
        &stream,
        launch,
        args![
            &mut out_i,
            &mut out_f,
            &mut out_l,
            &mut cnt,
            &xi,
            &xf,
            (seed % 7) as u32
        ],
    )?;
    Ok(vec![
        out_i
            .download()
            .unwrap()
            .iter()
            .map(|&x| x as u32 as u64)
            .collect(),
        out_f
            .download()
            .unwrap()
            .iter()
            .map(|&x| {
                if x.is_nan() {
                    u64::MAX
                } else {
                    x.to_bits() as u64
                }
            })
            .collect(),
        out_l.download().unwrap(),
        cnt.download().unwrap().iter().map(|&x| x as u64).collect(),
    ])
}

fn check_case(seed: u64) -> Result<Verdict, String> {
    let case = generate_for_cpu(seed);
    let (interp, cpu) = devices();
    let m = xpu::ir::parse(&case.src)
        .map_err(|e| format!("generated kernel does not parse: {e}\n{}", case.src))?
        .verify()
        .map_err(|e| format!("generated kernel does not verify: {e}\n{}", case.src))?;
    let pi = interp.load(m.clone()).unwrap();
    let pc = cpu.load(m).unwrap();
    let wave = pc
        .kernel("k")
        .map_err(|e| format!("{e}\n{}", case.src))?
        .manifest()
        .built_wave;
    let reference = match run_on(&interp, &pi, &case, wave, seed) {
        Ok(r) => r,
        Err(LaunchError::Undefined { kind, report, .. })
            if kind == "out_of_bounds" && !report.contains(" lane ") =>
        {
            // The CPU bounds-checks every access: it must refuse what the interpreter saw.
            return match run_on(&cpu, &pc, &case, None, seed) {
                Err(e @ LaunchError::OutOfBounds { .. }) if e.code() == "XPU-L013" => {
                    Ok(Verdict::BothRefused)
                }
                other => Err(format!(
                    "the interpreter reported an out-of-bounds access ({report}); the cpu gave {:?} instead of XPU-L013 (seed {seed})\n{}",
                    other.err(),
                    case.src
                )),
            };
        }
        Err(LaunchError::Undefined { .. }) => {
            // Still run it: whatever it computes, the process must survive it.
            let _ = run_on(&cpu, &pc, &case, None, seed);
            return Ok(Verdict::Discard);
        }
        Err(e) => return Err(format!("interpreter: {e}\n{}", case.src)),
    };
    let got = run_on(&cpu, &pc, &case, None, seed).map_err(|e| {
        format!(
            "cpu failed where the interpreter ran: {e}\nseed {seed}, grid {} block {}\n{}",
            case.grid, case.block, case.src
        )
    })?;
    let names = ["out_i", "out_f", "out_l", "cnt"];
    for (b, (r, g)) in reference.iter().zip(&got).enumerate() {
        if let Some(i) = (0..r.len()).find(|&i| r[i] != g[i]) {
            return Err(format!(
                "{}[{i}]: interp {:#x}, cpu {:#x} (seed {seed}, grid {} block {}, wave {:?})\n{}",
                names[b], r[i], g[i], case.grid, case.block, wave, case.src
            ));
        }
    }
    Ok(Verdict::Agree)
}

#[test]
fn differential_fuzz_against_the_interpreter() {
    let cases: u32 = std::env::var("XPU_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    if let Some(seed) = std::env::var("XPU_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        println!("{}", generate_for_cpu(seed).src);
        match check_case(seed) {
            Ok(Verdict::Agree) => println!("agree"),
            Ok(Verdict::BothRefused) => println!("both refused (out of bounds)"),
            Ok(Verdict::Discard) => println!("discarded"),
            Err(e) => panic!("{e}"),
        }
        return;
    }
    let agreed = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    let discarded = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/cpu_fuzz.txt",
            ),
        )),
        ..Config::default()
    });
    let result = runner.run(&any::<u64>(), |seed| {
        match check_case(seed) {
            Ok(Verdict::Agree) => {
                agreed.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Verdict::BothRefused) => {
                refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Verdict::Discard) => {
                discarded.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(TestCaseError::fail(e)),
        }
        Ok(())
    });
    let (a, r, d) = (
        agreed.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        discarded.load(Ordering::Relaxed),
    );
    // Straight to stderr, past the test harness's capture, so every CI log shows the count.
    let _ = writeln!(
        std::io::stderr(),
        "differential fuzz: {} generated kernels, {a} agreed, {r} out of bounds refused by both, {d} discarded (other undefined behaviour)",
        a + r + d
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        a * 2 >= (a + r + d),
        "too many kernels discarded: {d} of {}",
        a + r + d
    );
}

#[test]
#[ignore]
fn fuzz_timing() {
    let (interp, cpu) = devices();
    let (mut tc, mut ti, mut tr) = (0.0, 0.0, 0.0);
    for seed in 0..100u64 {
        let case = generate(seed);
        let m = xpu::ir::parse(&case.src).unwrap().verify().unwrap();
        let pi = interp.load(m.clone()).unwrap();
        let pc = cpu.load(m).unwrap();
        let t = std::time::Instant::now();
        let k = pc.kernel("k").unwrap();
        let w = k.manifest().built_wave;
        let _ = run_on(&cpu, &pc, &case, None, seed);
        tc += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let _ = run_on(&interp, &pi, &case, w, seed);
        ti += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let _ = run_on(&cpu, &pc, &case, None, seed);
        tr += t.elapsed().as_secs_f64();
    }
    println!("cpu compile+run {tc:.2}s, interp {ti:.2}s, cpu rerun {tr:.2}s");
}

/// Runs every run block of `src` on the CPU (against the interpreter where it says
/// `expect = interp`) and requires each to pass.
fn run_blocks(src: &str) {
    run_blocks_on(&devices().1, src);
}

fn run_blocks_on(cpu: &Device, src: &str) {
    let interp = Device::open(Backend::Interp).expect("interp");
    let (m, specs) = xpu::ir::parse_file(src).unwrap_or_else(|e| panic!("parse: {e}"));
    let m = m.verify().unwrap_or_else(|e| panic!("verify: {e}"));
    let pc = cpu.load(m.clone()).unwrap();
    let pi = interp.load(m).unwrap();
    assert!(!specs.is_empty());
    for spec in &specs {
        match xpu::filetest::runner::run_case(spec, &pc, &pi) {
            xpu::filetest::runner::Outcome::Pass => {}
            other => panic!("{}: {other:?}", spec.kernel),
        }
    }
}

#[test]
fn barriers_inside_helpers_and_loops() {
    // A helper with a barrier called inside an expression (the left operand must survive the
    // barrier), through a tag, and a barrier in a loop with a uniform trip count around
    // divergent work.
    run_blocks(
        r#"
tagset Sync = [sync_add, sync_mul];

device fn sync_add(x: i32) -> i32 {
    barrier();
    return x + 1;
}

device fn sync_mul(x: i32) -> i32 {
    barrier();
    return x * 3;
}

kernel in_expr(out: buf<i32, rw>) {
    let i: u32 = global_id.x;
    let a: i32 = (i as i32) * 7;
    out[i] = a + sync_add(i as i32) * 2;
}

kernel through_tag(out: buf<i32, rw>, t: tag<Sync>) {
    let i: u32 = global_id.x;
    let a: i32 = 5;
    out[i] = a - dispatch(t, i as i32);
}

kernel loop_barrier(out: buf<i32, rw>, n: u32) {
    shared tile: [i32; 40];
    let l: u32 = local_id.x;
    let acc: i32 = 0;
    for round: u32 in 0..n {
        if l % 3 == 0 {
            tile[l] = (l + round) as i32;
        } else {
            tile[l] = -(l as i32);
        }
        barrier();
        acc += tile[(l + round + 1) % 40];
        if acc > 100 {
            acc -= 50;
        }
        barrier();
    }
    out[global_id.x] = acc;
}

run in_expr {
    grid = [2];
    block = [40];
    arg out = fill(80, 0);
    expect out = interp;
}

run through_tag {
    grid = [2];
    block = [40];
    arg out = fill(80, 0);
    arg t = 1;
    expect out = interp;
}

run loop_barrier {
    grid = [3];
    block = [40];
    arg out = fill(120, 0);
    arg n = 9;
    expect out = interp;
}
"#,
    );
}

#[test]
fn shared_and_private_out_of_bounds_fail_the_launch() {
    let (_, cpu) = devices();
    let src = "kernel sh(out: buf<i32, rw>, k: u32) {\n    shared t: [i32; 16];\n    let l: u32 = local_id.x;\n    t[l + k] = 1;\n    barrier();\n    out[l] = t[l];\n}\n\nkernel pr(out: buf<i32, rw>, k: u32) {\n    let a: [i32; 4];\n    let l: u32 = local_id.x;\n    a[l % 4] = 3;\n    out[l] = a[(l + k) % 8];\n}\n";
    let p = load(&cpu, src);
    let stream = KernelStream::current(&cpu);
    let mut out = cpu.upload(&[0i32; 16]).unwrap();
    for (name, k, ok_k) in [("sh", 9u32, 0u32), ("pr", 5, 0)] {
        let kern = p.kernel(name).unwrap();
        let e = kern
            .launch(&stream, Launch::grid([1]).block([16]), args![&mut out, k])
            .unwrap_err();
        match e {
            LaunchError::OutOfBounds { line, index, .. } => {
                assert!(line > 0);
                assert!(index >= 4, "{name}: index {index}");
            }
            e => panic!("{name}: expected out of bounds, got {e}"),
        }
        if name == "sh" {
            kern.launch(
                &stream,
                Launch::grid([1]).block([16]),
                args![&mut out, ok_k],
            )
            .unwrap();
        }
    }
}

#[test]
fn vector_types_reinterpretation_and_vector_memory() {
    // Vectors of bool, i8, i64, f16; vector selects; bitcasts that change the lane count;
    // vload/vstore of u8; vec3 buffers.
    run_blocks(
        r#"
kernel vecs(out_u: buf<u32, rw>, out_f: buf<f32, rw>, out_h: buf<f16, rw>, b8: buf<u8, rw>, v3: buf<vec3<f32>, rw>, x: buf<f32>) {
    let i: u32 = global_id.x;
    let f: f32 = x[i];
    let v: vec4<f32> = vec4<f32>(f, f * 2.0, -f, 1.5);
    let c: vec4<bool> = v > vec4<f32>(0.0);
    let s: vec4<f32> = select(c, v, vec4<f32>(7.0));
    let m: vec4<i32> = vec4<i32>(i as i32, 3, -5, 100) * vec4<i32>(2);
    let e: vec4<i8> = vec4<i8>(i as i8, 3i8, -5i8, 100i8) * vec4<i8>(3i8);
    let sw: vec2<f32> = s.wz;
    let bits: u32 = bitcast<u32>(vec4<u8>(1u8, 2u8, i as u8, 4u8));
    let wide: u64 = bitcast<u64>(vec2<u32>(i, 0xdeadbeef));
    let back: vec2<u32> = bitcast<vec2<u32>>(wide);
    let h: vec2<f16> = vec2<f16>(f as f16, 0.5f16) + vec2<f16>(1.0f16);
    let l: vec4<i64> = vec4<i64>(m.x as i64, -1i64, 7i64, m.w as i64) << vec4<i64>(33i64);
    let cnt: u32 = select(c.x && !c.z, 1u32, 0u32) + select(c.y || c.w, 10u32, 0u32);
    out_u[i] = bits ^ back.y ^ cnt ^ (e.x as u32) ^ (e.w as u32) ^ (l.x >> 33i64) as u32 ^ (m.z as u32);
    out_f[i] = sw.x + sw.y + s.x + min(v, vec4<f32>(0.25)).y + abs(v).z;
    out_h[i] = h.x * h.y;
    let w: vec8<u8> = vload<8>(b8, i * 8);
    vstore(b8, i * 8, w + vec8<u8>(1u8));
    let t: vec3<f32> = v3[i];
    v3[i] = t.zyx * vec3<f32>(f);
}

run vecs {
    grid = [2];
    block = [13];
    arg out_u = fill(26, 0);
    arg out_f = fill(26, 0.0);
    arg out_h = fill(26, 0.0);
    arg b8 = iota(208);
    arg v3 = iota(78);
    arg x = random(26, -4.0, 4.0, seed 3);
    expect out_u = interp;
    expect out_f = interp;
    expect out_h = interp;
    expect b8 = interp;
    expect v3 = interp;
}
"#,
    );
}

#[test]
fn inexact_float_wave_reductions_fold_in_lane_order() {
    // Float sums whose value depends on the order of the additions (magnitudes from 1 to 1e7
    // mixed across lanes, f32 and f64): reductions and scans of full waves, of a partial
    // wave (100 work-items) and under a divergent mask must equal the interpreter's fold in
    // ascending lane order bit for bit (`ulps` 0).
    run_blocks(
        r#"
kernel sums(r32: buf<f32, rw>, s32: buf<f32, rw>, e32: buf<f32, rw>, p32: buf<f32, rw>, r64: buf<f64, rw>, p64: buf<f64, rw>, x: buf<f32>) {
    let i: u32 = global_id.x;
    let big: f32 = select(lane_id % 3 == 0, 10000000.0, 1.0) * select(lane_id % 5 == 1, -3.0, 1.0);
    let v: f32 = x[i] * big;
    r32[i] = wave_reduce_sum(v);
    s32[i] = wave_inclusive_scan_sum(v);
    e32[i] = wave_exclusive_scan_sum(v);
    let d: f64 = (v as f64) * 1.0000001 + (x[i] as f64) * 0.1;
    r64[i] = wave_reduce_sum(d);
    if lane_id % 4 != 1 {
        p32[i] = wave_reduce_sum(v);
        p64[i] = wave_reduce_sum(d);
    }
}

run sums {
    grid = [2];
    block = [128];
    arg r32 = fill(256, 0.0);
    arg s32 = fill(256, 0.0);
    arg e32 = fill(256, 0.0);
    arg p32 = fill(256, 0.0);
    arg r64 = fill(256, 0.0);
    arg p64 = fill(256, 0.0);
    arg x = random(256, -1.0, 1.0, seed 17);
    expect r32 = interp;
    expect s32 = interp;
    expect e32 = interp;
    expect p32 = interp;
    expect r64 = interp;
    expect p64 = interp;
}

run sums {
    grid = [1];
    block = [100];
    arg r32 = fill(256, 0.0);
    arg s32 = fill(256, 0.0);
    arg e32 = fill(256, 0.0);
    arg p32 = fill(256, 0.0);
    arg r64 = fill(256, 0.0);
    arg p64 = fill(256, 0.0);
    arg x = random(256, -1.0, 1.0, seed 23);
    expect r32 = interp;
    expect s32 = interp;
    expect e32 = interp;
    expect p32 = interp;
    expect r64 = interp;
    expect p64 = interp;
}
"#,
    );
}

#[test]
fn wave_64_over_a_3d_block_with_a_partial_wave() {
    // 210 work-items per group in waves of 64 (the last partial), i64 scans, reductions,
    // ballots and shuffles, division per lane.
    run_blocks(
        r#"
@wave(64)
kernel wide(out: buf<i64, rw>, x: buf<i64>) {
    let g: u32 = global_id.x + global_id.y * 7 + global_id.z * 140;
    let l: u32 = local_id.x + local_id.y * group_size.x + local_id.z * group_size.x * group_size.y;
    let v: i64 = x[g % 200];
    let s: i64 = wave_inclusive_scan_sum(v);
    let m: i64 = wave_reduce_max(v * (l as i64));
    let b: u64 = wave_ballot(v > 0i64);
    let r: i64 = wave_shuffle_xor(v, 1);
    let q: i64 = select(v != 0i64, s / (v | 1i64), s % 7i64);
    out[g] = s + m + (b as i64) + r + q;
}

run wide {
    grid = [1, 2, 1];
    block = [7, 10, 3];
    arg out = fill(420, 0);
    arg x = random(200, -1000, 1000, seed 9);
    expect out = interp;
}
"#,
    );
}

#[test]
fn bounds_test_ifs_agree_with_the_interpreter() {
    // `if affine op uniform` runs its `then` side without masks when the test holds in a
    // whole wave: every comparison, both operand orders, signed and unsigned, strides 1 and 2,
    // a base near the top of u32 (lanes that wrap), partial waves, and buffers too short (the
    // fault must be the interpreter's too), at the host's wave and at 4 and 8.
    let (interp, cpu) = devices();
    let conds = [
        "i < n",
        "i <= n",
        "i > n",
        "i >= n",
        "n < i",
        "n >= i",
        "(i + off) < n",
        "(i + off) >= n",
        "(i as i32) < (n as i32)",
        "(n as i32) <= ((i + off) as i32)",
        "(i * 2u32) < n",
    ];
    let source = |wave: Option<u32>| {
        let mut src = String::new();
        for (k, c) in conds.iter().enumerate() {
            if let Some(w) = wave {
                writeln!(src, "@wave({w})").unwrap();
            }
            writeln!(
                src,
                "kernel b{k}(out: buf<i32, rw>, inp: buf<i32>, n: u32, off: u32) {{\n    \
             let i: u32 = global_id.x;\n    let v: i32 = -1i32;\n    if {c} {{\n        \
             v = inp[i] + 1i32;\n        out[i] = v * 2i32;\n    }} else {{\n        \
             out[i] = 5i32 + v;\n    }}\n}}\n"
            )
            .unwrap();
        }
        src
    };
    let stream_i = KernelStream::current(&interp);
    let stream_c = KernelStream::current(&cpu);
    let mut checked = 0;
    for wave in [None, Some(4u32), Some(8)] {
        let src = source(wave);
        let pi = load(&interp, &src);
        let pc = load(&cpu, &src);
        for (k, cond) in conds.iter().enumerate() {
            let name = format!("b{k}");
            let ki = pi.kernel(&name).unwrap();
            let kc = pc.kernel(&name).unwrap();
            for (grid, block) in [(3u32, 32u32), (2, 20)] {
                let total = (grid * block) as usize;
                for (n, off) in [
                    (0u32, 0u32),
                    (7, 0),
                    (16, 0),
                    (33, 0),
                    (total as u32, 0),
                    (u32::MAX - 3, 0),
                    (40, u32::MAX - 20),
                    (u32::MAX, u32::MAX - 40),
                ] {
                    for short in [0usize, 5] {
                        let data: Vec<i32> = (0..total - short).map(|x| x as i32 * 3).collect();
                        let launch = Launch::grid([grid]).block([block]);
                        let run = |dev: &Device, kern: &xpu::Kernel, stream: &KernelStream| {
                            let inp = dev.upload(&data).unwrap();
                            let mut out = dev.upload(&vec![0i32; total]).unwrap();
                            kern.launch(stream, launch, args![&mut out, &inp, n, off])
                                .map(|_| out.download().unwrap())
                        };
                        let want = run(&interp, &ki, &stream_i);
                        let got = run(&cpu, &kc, &stream_c);
                        let what = format!("{cond} wave {wave:?} grid {grid} block {block} n {n} off {off} short {short}");
                        match (want, got) {
                            (Ok(w), Ok(g)) => assert_eq!(w, g, "{what}"),
                            (
                                Err(LaunchError::Undefined { kind, report, .. }),
                                Err(LaunchError::OutOfBounds {
                                    line, index, len, ..
                                }),
                            ) => {
                                assert_eq!(kind, "out_of_bounds", "{what}");
                                assert!(index >= len && len == (total - short) as u64, "{what}");
                                assert!(report.starts_with(&format!("{line}:")), "{what}");
                            }
                            (w, g) => panic!("{what}: interpreter {w:?}, cpu {g:?}"),
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 11 * 2 * 8 * 2);
}

#[test]
fn waves_restarted_after_a_failed_bounds_test() {
    // A kernel whose top-level bounds-test `if` follows only effect-free `let`s runs its full
    // waves in a loop of their own; the first wave whose test fails runs again from its
    // start in the ordinary (masked) loop, with the rest of the workgroup. The `let`s before
    // the `if` (a load, a wave verb) and the statements after it must behave as on the
    // interpreter: failing first waves (`>=`), a failing wave in the middle of a group,
    // partial waves, and at waves 4, 8 and the host's.
    for wave in ["", "@wave(4)\n", "@wave(8)\n"] {
        let src = format!(
            r#"
{wave}kernel ge(out: buf<i32, rw>, out2: buf<i32, rw>, inp: buf<i32>, k: u32) {{
    let i: u32 = global_id.x;
    let x: i32 = inp[i] * 3;
    let t: i32 = wave_reduce_sum(x);
    if i >= k {{
        out[i] = x + t;
    }} else {{
        out[i] = -x;
    }}
    out2[i] += x + 1;
}}

{wave}kernel lt(out: buf<i32, rw>, cnt: buf<i32, rw>, inp: buf<i32>, n: u32) {{
    let i: u32 = global_id.x;
    let l: u32 = local_id.x;
    let x: i32 = inp[i % 64];
    if l < n {{
        out[i] = x * 2 + (l as i32);
    }}
    cnt[i] += 1;
}}

// No `local_id`, `group_id`, wave verb or call: full waves run in the flat loop over a run
// of workgroups (40 groups: several per call), restarting mid-run.
{wave}kernel flat(out: buf<i32, rw>, out2: buf<i32, rw>, inp: buf<i32>, k: u32) {{
    let i: u32 = global_id.x;
    let x: i32 = inp[i] * 3;
    if i >= k {{
        out[i] = x + 1;
    }} else {{
        out[i] = -x;
    }}
    out2[i] += x + 1;
}}

{wave}kernel flat_lt(out: buf<i32, rw>, inp: buf<i32>, n: u32) {{
    let i: u32 = global_id.x;
    if i < n {{
        out[i] = inp[i] * 2 + 1;
    }}
}}

run flat {{
    grid = [40];
    block = [32];
    arg out = fill(1280, 0);
    arg out2 = fill(1280, 0);
    arg inp = iota(1280);
    arg k = 701;
    expect out = interp;
    expect out2 = interp;
}}

run flat_lt {{
    grid = [40];
    block = [32];
    arg out = fill(1280, 7);
    arg inp = iota(1280);
    arg n = 1001;
    expect out = interp;
}}

run ge {{
    grid = [3];
    block = [32];
    arg out = fill(96, 0);
    arg out2 = fill(96, 0);
    arg inp = iota(96);
    arg k = 37;
    expect out = interp;
    expect out2 = interp;
}}

run ge {{
    grid = [2];
    block = [40];
    arg out = fill(80, 0);
    arg out2 = fill(80, 0);
    arg inp = iota(80);
    arg k = 0;
    expect out = interp;
    expect out2 = interp;
}}

run lt {{
    grid = [3];
    block = [40];
    arg out = fill(120, 0);
    arg cnt = fill(120, 0);
    arg inp = iota(64);
    arg n = 21;
    expect out = interp;
    expect cnt = interp;
}}

run lt {{
    grid = [4];
    block = [16];
    arg out = fill(64, 0);
    arg cnt = fill(64, 0);
    arg inp = iota(64);
    arg n = 64;
    expect out = interp;
    expect cnt = interp;
}}
"#
        );
        run_blocks(&src);
    }
}

#[test]
fn whole_wave_shared_accesses_check_bounds() {
    // A 2-D block of whole waves: every wave is full, so a stride-1 shared access is whole
    // chunks or a fault (also when its lanes wrap past u32::MAX), reported at the first bad
    // lane as the lane-by-lane check would.
    let (interp, cpu) = devices();
    let src = "kernel sh(out: buf<i32, rw>, k: u32) {\n    shared t: [i32; 64];\n    \
               let l: u32 = local_id.y * 16u32 + local_id.x;\n    t[l + k] = 7i32 + (l as i32);\n    \
               barrier();\n    out[l] = t[l] + t[(l + k) % 64u32];\n}\n";
    let pi = load(&interp, src);
    let pc = load(&cpu, src);
    let stream_i = KernelStream::current(&interp);
    let stream_c = KernelStream::current(&cpu);
    for (k, bad) in [
        (0u32, None),
        (32, Some(64u64)),
        (33, Some(64)),
        (200, Some(200)),
        (u32::MAX - 5, Some(u32::MAX as u64 - 5)),
    ] {
        let run = |dev: &Device, p: &xpu::Program, stream: &KernelStream| {
            let mut out = dev.upload(&[0i32; 64]).unwrap();
            p.kernel("sh")
                .unwrap()
                .launch(stream, Launch::grid([1]).block([16, 4]), args![&mut out, k])
                .map(|_| out.download().unwrap())
        };
        let got = run(&cpu, &pc, &stream_c);
        match bad {
            None => {
                let want = run(&interp, &pi, &stream_i);
                assert!(want.is_ok(), "k {k}");
                assert_eq!(got.unwrap(), want.unwrap(), "k {k}");
            }
            Some(first) => match got {
                Err(LaunchError::OutOfBounds { index, len, .. }) => {
                    assert_eq!((index, len), (first, 64), "k {k}");
                }
                e => panic!("k {k}: expected out of bounds, got {e:?}"),
            },
        }
    }
}

#[test]
fn full_wave_loop_checks_lengths_once_and_faults_as_before() {
    // The full-wave loop folds the lengths of the buffers its bounds-test `if` indexes at the
    // tested index into the wave's fast test (one compare per wave, no compare per access); a
    // wave that fails only that restarts in the ordinary loop, which must report the fault as
    // the per-access checks do: the first wave holding a bad index, and in it the first
    // access (b, c, then a) whose last lane is out of bounds, at index max(first lane, len).
    // Streaming code (prefetches, non-temporal stores to `a`) must do the same.
    let (interp, plain) = devices();
    let streaming = streaming_cpu();
    for ((wave, w), cpu) in [("", 0u64), ("@wave(8)\n", 8), ("@wave(4)\n", 4)]
        .into_iter()
        .flat_map(|w| [(w, &plain), (w, &streaming)])
    {
        let src = format!(
            "{wave}kernel triad(n: u32, s: f32, a: buf<f32, rw>, b: buf<f32>, c: buf<f32>) {{\n    \
             let i: u32 = global_id.x;\n    if i < n {{\n        a[i] = b[i] + s * c[i];\n    }}\n}}\n"
        );
        let pi = load(&interp, &src);
        let pc = load(cpu, &src);
        let w = if w == 0 {
            pc.manifest("triad").unwrap().built_wave.unwrap() as u64
        } else {
            w
        };
        let stream_i = KernelStream::current(&interp);
        let stream_c = KernelStream::current(cpu);
        // At 4 workgroups every call runs one; at 96 each call runs a run of them in the
        // flat loop (`Lower::fast_loop`), so a failing wave falls mid-run.
        for (scale, (n, la, lb, lc)) in [1u32, 24].into_iter().flat_map(|k| {
            [
                (128u32, 128usize, 128usize, 128usize),
                (120, 128, 128, 128),
                (128, 100, 128, 128),
                (128, 128, 100, 128),
                (128, 128, 128, 100),
                (128, 100, 110, 128),
                (128, 128, 117, 105),
                (128, 1, 128, 128),
            ]
            .map(|(n, la, lb, lc)| {
                let s = |l: usize| if l == 1 { 1 } else { l * k as usize };
                (k, (n * k, s(la), s(lb), s(lc)))
            })
        }) {
            let run = |dev: &Device, p: &xpu::Program, stream: &KernelStream| {
                let b: Vec<f32> = (0..lb).map(|x| x as f32).collect();
                let c: Vec<f32> = (0..lc).map(|x| 0.5 * x as f32).collect();
                let b = dev.upload(&b).unwrap();
                let c = dev.upload(&c).unwrap();
                let mut a = dev.upload(&vec![-1.0f32; la]).unwrap();
                p.kernel("triad")
                    .unwrap()
                    .launch(
                        stream,
                        Launch::grid([4 * scale]).block([32]),
                        args![n, 3.0f32, &mut a, &b, &c],
                    )
                    .map(|_| a.download().unwrap())
            };
            // The first wave with an index out of bounds of any buffer, and in it the first
            // access that fails.
            let items = n as u64;
            let mut want_fault = None;
            'waves: for first in (0..items).step_by(w as usize) {
                let last = (first + w - 1).min(items - 1);
                for (name, len) in [("b", lb), ("c", lc), ("a", la)] {
                    if last >= len as u64 {
                        want_fault = Some((format!("buffer {name}"), first.max(len as u64), len));
                        break 'waves;
                    }
                }
            }
            let got = run(cpu, &pc, &stream_c);
            match want_fault {
                None => {
                    let want = run(&interp, &pi, &stream_i).unwrap();
                    assert_eq!(got.unwrap(), want, "wave {w} n {n} lens {la} {lb} {lc}");
                }
                Some((what_w, index_w, len_w)) => match got {
                    Err(LaunchError::OutOfBounds {
                        what, index, len, ..
                    }) => assert_eq!(
                        (what, index, len),
                        (what_w, index_w, len_w as u64),
                        "wave {w} n {n} lens {la} {lb} {lc}"
                    ),
                    e => panic!("wave {w} n {n} lens {la} {lb} {lc}: expected a fault, got {e:?}"),
                },
            }
        }
    }
}

/// A CPU device of its own (not the process's shared one) whose launches always run the
/// streaming code of kernels that have some (`CpuDevice::set_streaming`).
fn streaming_cpu() -> Device {
    let d = xpu::backend::cpu::CpuDevice::new();
    d.set_streaming(xpu::hal::Mode::Force);
    Device::from_impl(std::sync::Arc::new(d))
}

#[test]
fn streaming_code_agrees_with_the_interpreter() {
    // Streaming code (what a launch larger than the last-level cache runs, forced here):
    // each wave of the flat loop prefetches its read streams ahead and stores the outputs
    // the kernel never reads non-temporally. Outputs of 1, 4 and 8 chunks a wave (u8, f32,
    // f64), a read-and-written buffer (plain stores), more read streams than one prefetch
    // call takes, elements wider than a line, ragged ends, restarts and a write-only buffer
    // also written at another index.
    let src = r#"
kernel triad(n: u32, s: f32, a: buf<f32, rw>, b: buf<f32>, c: buf<f32>) {
    let i: u32 = global_id.x;
    if i < n {
        a[i] = b[i] + s * c[i];
    }
}

kernel saxpy(n: u32, s: f32, x: buf<f32>, y: buf<f32, rw>) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = s * x[i] + y[i];
    }
}

kernel triad64(n: u32, s: f64, a: buf<f64, rw>, b: buf<f64>, c: buf<f64>) {
    let i: u32 = global_id.x;
    if i < n {
        a[i] = b[i] + s * c[i];
    }
}

kernel bytes(n: u32, o: buf<u8, rw>, x: buf<u8>) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = x[i] * 3 + 1;
    }
}

kernel five(n: u32, o: buf<i32, rw>, a: buf<i32>, b: buf<i32>, c: buf<i32>, d: buf<i32>,
            e: buf<i32>) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = a[i] - b[i] + c[i] * d[i] + e[i];
    }
}

kernel quads(n: u32, o: buf<vec4<f32>, rw>, x: buf<vec4<f32>>) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = x[i].wzyx * vec4<f32>(2.0);
    }
}

kernel spread(n: u32, o: buf<i32, rw>, x: buf<i32>) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = x[i] + 1;
        if x[i] % 7 == 0 {
            o[n + i] = -x[i];
        }
    }
}

run triad {
    grid = [300];
    block = [64];
    arg n = 19157;
    arg s = 3.0;
    arg a = fill(19200, -1.0);
    arg b = random(19200, -8.0, 8.0, seed 1);
    arg c = random(19200, -8.0, 8.0, seed 2);
    expect a = interp;
}

run saxpy {
    grid = [300];
    block = [64];
    arg n = 19200;
    arg s = -0.5;
    arg x = random(19200, -8.0, 8.0, seed 3);
    arg y = random(19200, -8.0, 8.0, seed 4);
    expect y = interp;
}

run triad64 {
    grid = [97];
    block = [128];
    arg n = 12000;
    arg s = 0.25;
    arg a = fill(12416, 5.0);
    arg b = random(12416, -8.0, 8.0, seed 5);
    arg c = random(12416, -8.0, 8.0, seed 6);
    expect a = interp;
}

run bytes {
    grid = [200];
    block = [32];
    arg n = 6390;
    arg o = fill(6400, 9);
    arg x = random(6400, 0, 256, seed 7);
    expect o = interp;
}

run five {
    grid = [150];
    block = [64];
    arg n = 9600;
    arg o = fill(9600, 0);
    arg a = random(9600, -1000, 1000, seed 8);
    arg b = random(9600, -1000, 1000, seed 9);
    arg c = random(9600, -1000, 1000, seed 10);
    arg d = random(9600, -1000, 1000, seed 11);
    arg e = random(9600, -1000, 1000, seed 12);
    expect o = interp;
}

run quads {
    grid = [60];
    block = [32];
    arg n = 1900;
    arg o = fill(1920, 0.0);
    arg x = random(1920, -4.0, 4.0, seed 13);
    expect o = interp;
}

run spread {
    grid = [50];
    block = [64];
    arg n = 3200;
    arg o = fill(6400, 0);
    arg x = random(3200, 0, 1000, seed 14);
    expect o = interp;
}
"#;
    let cpu = streaming_cpu();
    run_blocks_on(&cpu, src);
    // The outputs at every offset within a 16-byte chunk: a view at an odd offset takes the
    // helpers' plain-store path.
    let interp = Device::open(Backend::Interp).unwrap();
    let pi = load(&interp, src);
    let pc = load(&cpu, src);
    for skew in 0..4usize {
        let run = |dev: &Device, p: &xpu::Program| {
            let n = 5000u32;
            let b: Vec<f32> = (0..n).map(|x| x as f32 * 0.25).collect();
            let c: Vec<f32> = (0..n).map(|x| 100.0 - x as f32).collect();
            let (b, c) = (dev.upload(&b).unwrap(), dev.upload(&c).unwrap());
            let whole = dev.upload(&vec![-2.0f32; n as usize + 4]).unwrap();
            let mut a = whole.slice(skew..skew + n as usize).unwrap();
            p.kernel("triad")
                .unwrap()
                .launch(
                    &KernelStream::current(dev),
                    Launch::grid([n.div_ceil(64)]).block([64]),
                    args![n, 3.0f32, &mut a, &b, &c],
                )
                .unwrap();
            whole.download().unwrap()
        };
        assert_eq!(run(&cpu, &pc), run(&interp, &pi), "skew {skew}");
    }
}

#[test]
fn stores_of_a_single_active_lane() {
    // A scatter under a mask that holds one lane (`if lane_id == k`) stores that lane alone
    // after checking its index alone; two or more lanes take the general scatter. Components
    // of vector elements, `vstore`, narrow and half types, an affine index, and a lane chosen
    // at run time, at the host's wave and at 4 and 8.
    for wave in ["", "@wave(4)\n", "@wave(8)\n"] {
        let src = format!(
            r#"
{wave}kernel one_lane(o: buf<i32, rw>, o2: buf<vec2<f32>, rw>, o3: buf<u8, rw>,
                      o4: buf<f16, rw>, o5: buf<f32, rw>, x: buf<i32>, k: u32) {{
    let i: u32 = global_id.x;
    let v: i32 = x[i];
    let w: u32 = group_id.x * 16 + local_id.x / wave_width;
    if lane_id == k % wave_width {{
        o[w] = v * 3;
        o2[(i * 7) % 192] = vec2<f32>(v as f32, 1.5);
        o3[(i * 5) % 192] = v as u8;
        o4[i / 2] = (v as f32 * 0.25) as f16;
        vstore(o5, w * 2, vec2<f32>(v as f32, -(v as f32)));
        o[100 + i] = v;
    }}
    if lane_id < 2 {{
        o[400 + w * 2 + lane_id] = v + 1;
    }}
}}

run one_lane {{
    grid = [6];
    block = [32];
    arg o = fill(600, -1);
    arg o2 = fill(192, 0.0);
    arg o3 = fill(192, 0);
    arg o4 = fill(96, 0.0);
    arg o5 = fill(192, 0.0);
    arg x = random(192, -1000, 1000, seed 21);
    arg k = 3;
    expect o = interp;
    expect o2 = interp;
    expect o3 = interp;
    expect o4 = interp;
    expect o5 = interp;
}}

run one_lane {{
    grid = [3];
    block = [40];
    arg o = fill(600, -1);
    arg o2 = fill(192, 0.0);
    arg o3 = fill(192, 0);
    arg o4 = fill(96, 0.0);
    arg o5 = fill(192, 0.0);
    arg x = random(192, -1000, 1000, seed 22);
    arg k = 7;
    expect o = interp;
    expect o2 = interp;
    expect o3 = interp;
    expect o4 = interp;
    expect o5 = interp;
}}
"#
        );
        run_blocks(&src);
    }
    // The one lane's index out of bounds: the fault names it, as the lane-vector check would.
    let (_, cpu) = devices();
    let p = load(
        &cpu,
        "kernel far(o: buf<i32, rw>) {\n    let i: u32 = global_id.x;\n    if lane_id == 3 {\n        o[i * 100] = 1;\n    }\n}\n",
    );
    let mut o = cpu.upload(&vec![0i32; 250]).unwrap();
    let e = p
        .kernel("far")
        .unwrap()
        .launch(
            &KernelStream::current(&cpu),
            Launch::grid([4]).block([64]),
            args![&mut o],
        )
        .unwrap_err();
    match e {
        LaunchError::OutOfBounds {
            index, len, line, ..
        } => assert_eq!((index, len, line), (300, 250, 4)),
        e => panic!("expected an out-of-bounds fault, got {e:?}"),
    }
}

/// ub-traps on the CPU (contract §2.3; issue 16 item 4): an `align` statement the proof does
/// not confirm is tested when the program is loaded with ub-traps (`XPU-L010` naming kernel,
/// line and index), read as stated without them, and a confirmed one gets no code at all.
mod ub_traps {
    use super::*;
    use xpu::ProgramOptions;

    const GATHER: &str = "kernel gather(out: buf<u32, rw>, x: buf<u32>, o: u32) {
    let i: u32 = global_id.x;
    let v: vec4<u32> = vload<4>(x, 4 * i + o, align = 16);
    out[i] = v.x;
}
";

    fn run(options: ProgramOptions, o: u32) -> (Result<(), LaunchError>, Vec<u32>) {
        let (_, cpu) = devices();
        let m = xpu::ir::parse(GATHER).unwrap().verify().unwrap();
        let p = cpu.load_with(m, options).unwrap();
        let mut out = cpu.upload(&[0u32; 4]).unwrap();
        let x = cpu.upload(&(0..32u32).collect::<Vec<_>>()).unwrap();
        let stream = KernelStream::current(&cpu);
        let r = p.kernel("gather").unwrap().launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut out, &x, o],
        );
        (r, out.download().unwrap())
    }

    #[test]
    fn a_broken_statement_is_refused_only_with_ub_traps() {
        let on = ProgramOptions {
            checked: false,
            ub_traps: true,
            ..Default::default()
        };
        let e = run(on, 2).0.unwrap_err();
        assert_eq!(e.code(), "XPU-L010", "{e}");
        let text = e.to_string();
        assert!(
            text.contains("kernel gather") && text.contains("line 3"),
            "{text}"
        );
        assert!(
            text.contains("index 2") && text.contains("align = 16"),
            "{text}"
        );
        assert_eq!(run(on, 4), (Ok(()), vec![4, 8, 12, 16]));
        // Without ub-traps the statement is accepted and the stated elements are read.
        let off = ProgramOptions {
            checked: false,
            ub_traps: false,
            ..Default::default()
        };
        assert_eq!(run(off, 2), (Ok(()), vec![2, 6, 10, 14]));
    }

    #[test]
    fn a_confirmed_statement_costs_nothing() {
        let src = GATHER.replace("4 * i + o", "4 * i");
        let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let build = |traps: bool| {
            xpu::backend::cpu::compile(&vm, h, [0, 1, 1], 4, false, false, traps).unwrap()
        };
        let (with, without) = (build(true), build(false));
        assert_eq!(with.sites.len(), without.sites.len());
        assert_eq!(with.code_bytes, without.code_bytes);
        // The unconfirmed statement gets its site and its code.
        let vm = xpu::ir::parse(GATHER).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let traps = xpu::backend::cpu::compile(&vm, h, [0, 1, 1], 4, false, false, true).unwrap();
        let plain = xpu::backend::cpu::compile(&vm, h, [0, 1, 1], 4, false, false, false).unwrap();
        assert_eq!(traps.sites.len(), plain.sites.len() + 1);
        assert!(traps
            .sites
            .iter()
            .any(|s| s.what == "align = 16" && s.line == 3));
    }
}

/// Issue 21: the first launch compiles once, and code is freed with its program.
mod first_launch {
    use xpu::{args, Backend, Device, KernelStream, Launch};

    const SRC: &str = r#"
kernel k(y: buf<f32, rw>, x: buf<f32>, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = x[i] * 3.0 + 1.0;
    }
}
"#;

    /// A CPU device without the disk cache: these tests count Cranelift compiles, which a
    /// warm cache (from an earlier run) would skip.
    fn fresh_cpu() -> Device {
        Device::from_impl(std::sync::Arc::new(
            xpu::backend::cpu::CpuDevice::with_cache(xpu::backend::cpu::stored::CpuCache::new(
                None,
            )),
        ))
    }

    #[test]
    fn the_first_launch_compiles_one_specialisation_and_no_probe() {
        let cpu = fresh_cpu();
        let stream = KernelStream::current(&cpu);
        let wave = cpu.facts().wave_width.unwrap();
        // Blocks of whole waves, a partial wave, and a 2-D block: each gets the one code its
        // launch runs, compiled at the first launch and never at `kernel()`.
        for block in [[64, 1, 1], [wave + 1, 1, 1], [4, 4, 1]] {
            let program = cpu
                .load(xpu::ir::parse(SRC).unwrap().verify().unwrap())
                .unwrap();
            let kernel = program.kernel("k").unwrap();
            assert_eq!(program.lowerings(), Some(0), "kernel() compiles nothing");
            assert_eq!(kernel.manifest().code_bytes, None);
            assert_eq!(cpu.code_memory(), Some(0));
            // The kernel indexes by global_id.x: a block's x extent of elements.
            let n = block[0];
            let mut y = cpu.upload(&vec![0f32; n as usize]).unwrap();
            let x = cpu.upload(&vec![2f32; n as usize]).unwrap();
            kernel
                .launch(
                    &stream,
                    Launch::grid([1]).block(block),
                    args![&mut y, &x, n],
                )
                .unwrap();
            assert_eq!(y.download().unwrap(), vec![7f32; n as usize]);
            assert_eq!(program.lowerings(), Some(1), "block {block:?}: one compile");
            assert!(
                kernel.manifest().code_bytes.is_some(),
                "the manifest has its code"
            );
            assert_eq!(kernel.specialisations(), Some(1));
            // Launching again compiles nothing more.
            kernel
                .launch(
                    &stream,
                    Launch::grid([2]).block(block),
                    args![&mut y, &x, n],
                )
                .unwrap();
            assert_eq!(program.lowerings(), Some(1));
            assert!(cpu.code_memory().unwrap() > 0);
            drop(kernel);
            drop(program);
            assert_eq!(cpu.code_memory(), Some(0));
        }
        // A manifest asked for before any launch compiles the probe (once).
        let program = cpu
            .load(xpu::ir::parse(SRC).unwrap().verify().unwrap())
            .unwrap();
        let m = program.manifest("k").unwrap();
        assert!(m.code_bytes.is_some() && m.code_hash.is_some());
        assert_eq!(program.lowerings(), Some(1));
        let _ = program.manifest("k").unwrap();
        assert_eq!(program.lowerings(), Some(1));
        let _ = Backend::Cpu;
    }

    /// `xpu bench cpu --json`'s report: every kernel measured, and its JSON reads back.
    #[test]
    fn the_cpu_bench_report_parses_back_from_json() {
        let report = xpu::bench::suite::cpu(xpu::bench::suite::Sizes::quick()).unwrap();
        let kernels: Vec<&str> = report.entries.iter().map(|e| e.kernel.as_str()).collect();
        assert_eq!(
            kernels,
            ["triad", "saxpy", "sgemm", "wave_reduce", "mandelbrot"]
        );
        assert!(report.entries.iter().all(|e| e.value > 0.0), "{report:?}");
        let json = serde_json::to_string_pretty(&vec![report.clone()]).unwrap();
        let back: Vec<xpu::bench::suite::DeviceReport> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![report]);
        let path = std::env::temp_dir().join(format!("xpu-roofline-{}.svg", std::process::id()));
        xpu::bench::suite::plot(&back, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("triad"), "{svg}");
        let _ = std::fs::remove_file(&path);
    }

    /// Resident memory in bytes (`/proc/self/statm`), where the OS reports it.
    fn rss() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * 4096)
    }

    #[test]
    fn loading_and_dropping_10000_programs_leaves_resident_memory_flat() {
        // In a process of its own: resident memory is the process's, and other tests allocate.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "first_launch::rss_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("XPU_TEST_RSS_CHILD", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success() && text.contains("CHILD OK"), "{text}");
        for line in text.lines().filter(|l| l.contains("resident memory")) {
            println!("{line}");
        }
    }

    #[test]
    #[ignore = "the child of loading_and_dropping_10000_programs_leaves_resident_memory_flat"]
    fn rss_child() {
        std::env::var("XPU_TEST_RSS_CHILD").expect("run as a child");
        let Some(_) = rss() else {
            eprintln!("no /proc/self/statm here: skipped");
            return;
        };
        let cpu = fresh_cpu();
        let stream = KernelStream::current(&cpu);
        let mut y = cpu.upload(&vec![0f32; 64]).unwrap();
        let x = cpu.upload(&vec![1f32; 64]).unwrap();
        let mut one = |k: u32| {
            // Distinct programs: each kernel has its own constant.
            let src = SRC.replace("1.0;", &format!("{k}.0;"));
            let program = cpu
                .load(xpu::ir::parse(&src).unwrap().verify().unwrap())
                .unwrap();
            let kernel = program.kernel("k").unwrap();
            kernel
                .launch(
                    &stream,
                    Launch::grid([1]).block([64]),
                    args![&mut y, &x, 64u32],
                )
                .unwrap();
        };
        // Warm-up: the allocator's and the JIT's pools reach their working size.
        for k in 0..1000 {
            one(k);
        }
        let before = rss().unwrap();
        for k in 1000..10_000 {
            one(k);
        }
        let after = rss().unwrap();
        assert_eq!(cpu.code_memory(), Some(0), "no code held");
        assert_eq!(y.download().unwrap()[0], 3.0 + 9999.0);
        let grown = after.saturating_sub(before);
        // 9,000 programs of a few KiB of code each would be tens of MiB if kept.
        assert!(
            grown < 4 << 20,
            "resident memory grew {grown} bytes over 9,000 dropped programs ({before} -> {after})"
        );
        eprintln!("resident memory {before} -> {after} bytes over 9,000 dropped programs");
        eprintln!("CHILD OK");
    }
}

/// The persistent CPU code cache (issue 21, item 3): a specialisation compiled by one device
/// is loaded, not compiled, by another over the same folder; a damaged, truncated or foreign
/// entry is removed and replaced; the folder stays under its cap; results agree with the
/// interpreter throughout.
mod code_cache {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use xpu::backend::cache::CodeCache;
    use xpu::backend::cpu::{stored::CpuCache, CpuDevice};
    use xpu::{args, Backend, Device, KernelStream, Launch};

    /// A helper call (exp, sin: relocations against the runtime's symbols), vector constants,
    /// shared memory across a barrier and bounds-checked accesses (fault sites).
    const SRC: &str = r#"
kernel cached(y: buf<f32, rw>, x: buf<f32>, n: u32) {
    shared t: [f32; 64];
    let l: u32 = local_id.x;
    let i: u32 = global_id.x;
    t[l] = exp(x[i] * 0.25) + 0.5;
    barrier();
    if i < n {
        y[i] = t[63 - l] * 2.0 + sin(x[i]);
    }
}
"#;

    const N: usize = 256;

    fn folder(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xpu-cpu-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn cpu(store: CodeCache) -> (Device, Arc<CpuDevice>) {
        let imp = Arc::new(CpuDevice::with_cache(CpuCache::with_store(store)));
        (Device::from_impl(imp.clone()), imp)
    }

    /// `cached` over `N` elements on `device`, and the program's compiles.
    fn run(device: &Device, src: &str) -> (Vec<f32>, u64) {
        let program = device
            .load(xpu::ir::parse(src).unwrap().verify().unwrap())
            .unwrap();
        let kernel = program.kernel("cached").unwrap();
        let x: Vec<f32> = (0..N).map(|i| i as f32 * 0.37 - 20.0).collect();
        let mut y = device.upload(&vec![0f32; N]).unwrap();
        let xb = device.upload(&x).unwrap();
        kernel
            .launch(
                &KernelStream::current(device),
                Launch::grid([(N / 64) as u32]).block([64]),
                args![&mut y, &xb, N as u32],
            )
            .unwrap();
        (y.download().unwrap(), program.lowerings().unwrap_or(0))
    }

    fn want() -> Vec<f32> {
        run(&Device::open(Backend::Interp).unwrap(), SRC).0
    }

    /// The cache files under `dir`.
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(sub.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push(f.path());
            }
        }
        out
    }

    #[test]
    fn a_second_device_loads_the_code_and_bad_entries_are_replaced() {
        let want = want();
        let dir = folder("reuse");
        // Cold: compiled, stored.
        let (d, imp) = cpu(CodeCache::disk_only(Some(dir.clone())));
        assert_eq!(run(&d, SRC), (want.clone(), 1));
        assert_eq!(imp.code_cache().store.stats().disk_hits, 0);
        let stored = files(&dir);
        assert_eq!(stored.len(), 1, "one specialisation, one file");
        let good = std::fs::read(&stored[0]).unwrap();
        // Warm, another device (nothing shared in memory): loaded, not compiled.
        let (d, imp) = cpu(CodeCache::disk_only(Some(dir.clone())));
        assert_eq!(run(&d, SRC), (want.clone(), 0), "loaded from the cache");
        assert_eq!(imp.code_cache().store.stats().disk_hits, 1);
        // A manifest asked for after a load has the code's facts (hash of the same code).
        let fresh = cpu(CodeCache::disk_only(None)).0;
        let m_fresh = fresh
            .load(xpu::ir::parse(SRC).unwrap().verify().unwrap())
            .unwrap()
            .manifest("cached")
            .unwrap();
        let m_loaded = d
            .load(xpu::ir::parse(SRC).unwrap().verify().unwrap())
            .unwrap()
            .manifest("cached")
            .unwrap();
        assert_eq!(m_fresh.code_hash, m_loaded.code_hash);
        assert_eq!(m_fresh.code_bytes, m_loaded.code_bytes);
        // Damaged: a flipped byte in the code (the envelope's hash no longer checks),
        // truncated, and an entry whose envelope checks but whose payload is another format.
        let n = good.len();
        let mut flipped = good.clone();
        flipped[n - 40] ^= 0x5a;
        let foreign = {
            // Rewritten through the store: a valid envelope around a foreign payload.
            let store = CodeCache::disk_only(Some(dir.clone()));
            let key = xpu::backend::cpu::stored::device_key();
            let hash = stored[0].file_stem().unwrap().to_str().unwrap().to_string();
            store.put(
                &key,
                &hash,
                "cpu",
                b"XPUCPU\x00\x09 another version".to_vec(),
            );
            std::fs::read(&stored[0]).unwrap()
        };
        for (what, bytes) in [
            ("flipped", flipped),
            ("truncated", good[..n / 2].to_vec()),
            ("empty", Vec::new()),
            ("foreign", foreign),
        ] {
            std::fs::write(&stored[0], &bytes).unwrap();
            let (d, imp) = cpu(CodeCache::disk_only(Some(dir.clone())));
            assert_eq!(run(&d, SRC), (want.clone(), 1), "{what}: compiled again");
            let st = imp.code_cache().store.stats();
            // (A foreign payload in a good envelope is read, then refused: a disk hit too.)
            assert_eq!(st.rejected, 1, "{what}: rejected");
            assert_eq!(
                std::fs::read(&stored[0]).unwrap(),
                good,
                "{what}: replaced by a good entry"
            );
            // And the replacement is used.
            let (d, _) = cpu(CodeCache::disk_only(Some(dir.clone())));
            assert_eq!(
                run(&d, SRC),
                (want.clone(), 0),
                "{what}: replacement loaded"
            );
        }
        // Another kernel source (the IR hash) is another entry.
        let other = SRC.replace("* 2.0", "* 3.0");
        let (d, _) = cpu(CodeCache::disk_only(Some(dir.clone())));
        assert_eq!(run(&d, &other).1, 1, "other IR compiles");
        // The launch's specialisation, the manifest's probe (any 1-D block, not all waves
        // full: other code) and the other kernel's.
        assert_eq!(files(&dir).len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ub_traps_and_blocks_are_their_own_entries_and_no_folder_means_no_files() {
        let dir = folder("keys");
        let (d, _) = cpu(CodeCache::disk_only(Some(dir.clone())));
        run(&d, SRC);
        let (d2, _) = cpu(CodeCache::disk_only(Some(dir.clone())));
        let program = d2
            .load_with(
                xpu::ir::parse(SRC).unwrap().verify().unwrap(),
                xpu::ProgramOptions {
                    ub_traps: !xpu::ProgramOptions::default().ub_traps,
                    ..Default::default()
                },
            )
            .unwrap();
        let k = program.kernel("cached").unwrap();
        let mut y = d2.upload(&vec![0f32; N]).unwrap();
        let x = d2.upload(&vec![1f32; N]).unwrap();
        k.launch(
            &KernelStream::current(&d2),
            Launch::grid([4]).block([64]),
            args![&mut y, &x, N as u32],
        )
        .unwrap();
        assert_eq!(program.lowerings(), Some(1), "ub-traps flipped: other code");
        assert_eq!(files(&dir).len(), 2);
        // No folder: nothing written anywhere, every program compiles.
        let (d, imp) = cpu(CodeCache::disk_only(None));
        assert_eq!(run(&d, SRC).1, 1);
        assert_eq!(run(&d, SRC).1, 1);
        assert!(imp.code_cache().store.dir().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The two reloads issue 21 names, measured in this process on every kernel of a few
    /// files: (a) the stored machine code relocated (what the cache keeps), (b) Cranelift
    /// from the lowered CLIF (a copy in memory: its floor, before any deserialisation).
    /// Prints the medians over the kernels of the best of five; asserts nothing about time.
    #[test]
    fn the_two_reloads_measured() {
        let files = [
            ("cached", SRC.to_string()),
            (
                "reduction.xk",
                std::fs::read_to_string("tests/filetests/suites/cuda_samples/reduction.xk")
                    .unwrap(),
            ),
            (
                "correlation.xk",
                std::fs::read_to_string("tests/filetests/suites/polybench/correlation.xk").unwrap(),
            ),
        ];
        let mut rows = Vec::new();
        for (file, src) in &files {
            let (m, _) = xpu::ir::text::parse_file(src).unwrap();
            let m = m.verify().unwrap();
            for (h, f) in m.kernels() {
                let wave = xpu::backend::cpu::build_wave(f);
                let (block, whole) = xpu::backend::cpu::probe_block(f, wave);
                let mut cfg = xpu::codegen::cpu::config(f, block, Some(wave));
                cfg.wave = wave;
                cfg.whole_waves = whole;
                let mut best: Option<xpu::codegen::cpu::ReloadTimes> = None;
                for _ in 0..5 {
                    let Ok(t) = xpu::codegen::cpu::CompiledKernel::measure_reload(&m, h, cfg)
                    else {
                        break;
                    };
                    best = Some(match best {
                        None => t,
                        Some(b) => xpu::codegen::cpu::ReloadTimes {
                            cold: b.cold.min(t.cold),
                            clif: b.clif.min(t.clif),
                            image: b.image.min(t.image),
                            image_bytes: t.image_bytes,
                        },
                    });
                }
                if let Some(b) = best {
                    rows.push((format!("{file}:{}", f.name), b));
                }
            }
        }
        assert!(!rows.is_empty());
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
        for (k, t) in &rows {
            println!(
                "reload {k}: cold {:.0} us, (b) CLIF {:.0} us ({:.2}x), (a) image {:.0} us ({:.3}x), {} bytes",
                us(t.cold),
                us(t.clif),
                us(t.clif) / us(t.cold),
                us(t.image),
                us(t.image) / us(t.cold),
                t.image_bytes
            );
        }
        let median = |f: &dyn Fn(&xpu::codegen::cpu::ReloadTimes) -> f64| {
            let mut v: Vec<f64> = rows.iter().map(|(_, t)| f(t)).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        println!(
            "reload medians over {} kernels: (b) CLIF / cold {:.3}, (a) image / cold {:.3}",
            rows.len(),
            median(&|t| us(t.clif) / us(t.cold)),
            median(&|t| us(t.image) / us(t.cold)),
        );
    }

    /// `xpu bench first-result --backend cpu --json` in a fresh process with `env`: its p50
    /// (ms) and its lowerings.
    fn first_result(kernels: usize, env: &[(&str, &Path)]) -> (f64, u64) {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"));
        c.args([
            "bench",
            "first-result",
            "--on",
            "cpu",
            "--json",
            "--kernels",
        ])
        .arg(kernels.to_string())
        .env_remove("XPU_CACHE_DIR");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = &v[0];
        (
            row["p50_ms"].as_f64().unwrap(),
            row["lowerings"].as_u64().unwrap(),
        )
    }

    /// A second process's first result with the cache warm, against the first's with an
    /// empty folder (issue 21's target: at most 0.5×). The lowerings are asserted (every
    /// kernel compiled cold, none warm); the times only printed (median of three pairs).
    #[test]
    fn a_second_process_skips_cranelift() {
        let kernels = 100;
        let mut ratios = Vec::new();
        for rep in 0..3 {
            let dir = folder(&format!("process-{rep}"));
            let (cold, l_cold) = first_result(kernels, &[("XPU_CACHE_DIR", &dir)]);
            let (warm, l_warm) = first_result(kernels, &[("XPU_CACHE_DIR", &dir)]);
            assert_eq!((l_cold, l_warm), (kernels as u64, 0));
            println!(
                "first result p50: cold {cold:.3} ms, warm {warm:.3} ms ({:.3}x)",
                warm / cold
            );
            ratios.push(warm / cold);
            let _ = std::fs::remove_dir_all(&dir);
        }
        ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("first result warm / cold, median of 3: {:.3}", ratios[1]);
    }

    /// `XPU_CACHE_DIR=off`: no folder is used, not even the XDG or home default, and a second
    /// process compiles everything again.
    #[test]
    fn xpu_cache_dir_off_disables_the_cache() {
        let home = folder("off-home");
        let xdg = folder("off-xdg");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&xdg).unwrap();
        let env = [
            ("XPU_CACHE_DIR", Path::new("off")),
            ("HOME", home.as_path()),
            ("XDG_CACHE_HOME", xdg.as_path()),
        ];
        assert_eq!(first_result(3, &env).1, 3);
        assert_eq!(first_result(3, &env).1, 3, "nothing was kept");
        assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(&xdg).unwrap().count(), 0);
        // The control: with XDG_CACHE_HOME alone, the default folder is used.
        let env = [("HOME", home.as_path()), ("XDG_CACHE_HOME", xdg.as_path())];
        assert_eq!(first_result(3, &env).1, 3);
        assert_eq!(first_result(3, &env).1, 0);
        assert!(xdg.join("xpu").is_dir());
        let _ = std::fs::remove_dir_all(&home);
        let _ = std::fs::remove_dir_all(&xdg);
    }

    #[test]
    fn the_folder_stays_under_its_cap() {
        let dir = folder("cap");
        let (d, _) = cpu(CodeCache::disk_only(Some(dir.clone())));
        run(&d, SRC);
        let one = std::fs::metadata(&files(&dir)[0]).unwrap().len();
        let _ = std::fs::remove_dir_all(&dir);
        // Room for two entries and a half: the third and fourth kernels evict the oldest.
        let cap = one * 5 / 2;
        let (d, imp) = cpu(CodeCache::with_cap(Some(dir.clone()), cap));
        for k in 0..4 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let src = SRC.replace("0.5;", &format!("0.{};", k + 1));
            run(&d, &src);
            let total: u64 = files(&dir)
                .iter()
                .map(|f| std::fs::metadata(f).unwrap().len())
                .sum();
            assert!(total <= cap, "kernel {k}: {total} bytes over the cap {cap}");
        }
        assert_eq!(imp.code_cache().store.stats().evicted, 2);
        assert_eq!(files(&dir).len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Issue 23 item 8: the CPU places a laid-out shared tile as declared (the padding counted in
/// its shared memory, the manifest saying so); the interpreter keeps the identity layout.
#[test]
fn layouts_are_placed_on_the_cpu_and_identity_in_the_interpreter() {
    let (interp, cpu) = devices();
    let src = "kernel k(o: buf<f32, rw>) {\n    shared t: block_padded<[[f32; 32]; 32], 32, 1>;\n    shared s: swizzled<[[f32; 32]; 32], 32>;\n    let i: u32 = local_id.x;\n    t[i][0] = 1.0;\n    s[i][1] = 2.0;\n    barrier();\n    o[i] = t[i][0] + s[i][1];\n}\n";
    let pc = load(&cpu, src);
    let m = pc.manifest("k").unwrap();
    assert_eq!(m.shared_layouts.len(), 2, "{m:?}");
    assert!(m.shared_layouts.iter().all(|l| l.applied), "{m:?}");
    assert_eq!(m.shared_layouts[0].physical_elems, Some(1055));
    assert_eq!(m.shared_layouts[0].layout, "block_padded<32, 1>");
    assert_eq!(m.shared_layouts[1].physical_elems, Some(1024));
    // 1055 f32s (16-byte aligned: 4224 bytes) and 4096.
    assert_eq!(m.static_shared_bytes, Some(4224 + 4096));
    let pi = load(&interp, src);
    let mi = pi.manifest("k").unwrap();
    assert!(mi.shared_layouts.iter().all(|l| !l.applied), "{mi:?}");
    assert_eq!(mi.static_shared_bytes, Some(8192));
}
