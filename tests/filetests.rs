//! Every kernel file under `tests/filetests/` and `tests/ub/` on every backend this build has
//! and this machine runs (the interpreter always; the CPU JIT and GPUs where present), through
//! `xpu run` (the runner is `xpu::filetest::runner`). A failing case fails the test with the
//! runner's whole report.
//!
//! Each backend runs in its own `xpu run` process under a deadline: a kernel that never
//! terminates on some backend (a lowering bug) cannot be stopped inside a process, so it
//! fails this test with the report up to the case that hung instead of hanging the suite.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xpu::Device;

/// How long one backend may take over every file (the whole suite takes seconds);
/// `XPU_FILETEST_DEADLINE_S` overrides it.
fn deadline() -> Duration {
    let secs = std::env::var("XPU_FILETEST_DEADLINE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(secs)
}

struct Outcome {
    report: String,
    passed: usize,
    failed: usize,
    skipped: usize,
}

impl Outcome {
    /// Writes the closing counts and every skipped case with its reason to the process's
    /// stderr, past the test harness's capture, so that the CI log shows what did not run.
    fn print_skips(&self, what: &str) {
        use std::io::Write;
        let mut text = format!(
            "{what}: {} passed, {} failed, {} skipped\n",
            self.passed, self.failed, self.skipped
        );
        let mut in_skip = false;
        for line in self.report.lines() {
            if line.starts_with("SKIP") {
                in_skip = true;
            } else if !line.starts_with("    ") {
                in_skip = false;
            }
            if in_skip {
                text.push_str("  ");
                text.push_str(line);
                text.push('\n');
            }
        }
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// The fewest cases `backend` must pass (not skip) over tests/filetests and tests/ub, out of
/// `total`: the interpreter judges every case but agreement with itself; the CPU skips only the UB it does not detect
/// (`xpu::filetest::runner::ub_answer`); GPUs run the UB corpus's out-of-bounds and misaligned
/// cases in checked mode (docs/checked-mode.md), skip its other kinds, and skip
/// what they refuse by capability (a wave width, f64 or f16 where absent). A backend that
/// skips more than that has stopped testing, which must not pass as a success.
fn floor(backend: xpu::Backend, total: usize) -> usize {
    match backend {
        // The interpreter skips only `expect NAME = interp;` on itself.
        xpu::Backend::Interp => total * 90 / 100,
        xpu::Backend::Cpu => total * 85 / 100,
        xpu::Backend::Cuda | xpu::Backend::Hip | xpu::Backend::Vulkan => total * 70 / 100,
    }
}

fn run_backend(name: &str) -> Result<Outcome, String> {
    run_with(name, &["tests/filetests", "tests/ub"], &[])
}

/// `xpu run PATHS --backend NAME` with `env` added.
fn run_with(name: &str, paths: &[&str], env: &[(&str, &str)]) -> Result<Outcome, String> {
    // Cargo runs integration tests from the package root; relative paths keep the report short.
    let mut child = Command::new(env!("CARGO_BIN_EXE_xpu"))
        .arg("run")
        .args(paths)
        .args(["--backend", name])
        // The suites' default (contract §7): fresh device memory is poisoned.
        .env("CAJETA_XPU_POISON", "1")
        .envs(env.iter().copied())
        .env_remove("CAJETA_XPU_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start xpu: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let deadline = deadline();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let report = out_reader.join().unwrap_or_default();
    let errors = err_reader.join().unwrap_or_default();
    let Some(status) = status else {
        let last = report.lines().rev().find(|l| !l.starts_with("    "));
        return Err(format!(
            "{report}\n{errors}\n{name}: no result after {deadline:?}: the case after `{}` hung",
            last.unwrap_or("(none)")
        ));
    };
    // The closing line: `N passed, N failed` with `, N skipped` when any were.
    let closing = report.lines().last().unwrap_or_default();
    let count = |word: &str| -> Option<usize> {
        closing
            .split(", ")
            .find_map(|part| part.strip_suffix(word)?.trim().parse().ok())
    };
    let skipped = count(" skipped").unwrap_or(0);
    match (count(" passed"), count(" failed")) {
        (Some(passed), Some(failed)) if status.code() == Some((failed > 0) as i32) => Ok(Outcome {
            report,
            passed,
            failed,
            skipped,
        }),
        _ => Err(format!(
            "{report}\n{errors}\n{name}: xpu run exited with {status}"
        )),
    }
}

#[test]
fn filetests_pass_on_every_available_backend() {
    assert!(Path::new("tests/filetests").is_dir());
    let mut failures = Vec::new();
    for backend in Device::available() {
        match run_backend(backend.name()) {
            Ok(outcome) => {
                println!("{}", outcome.report);
                outcome.print_skips(&format!("file tests on {}", backend.name()));
                let total = outcome.passed + outcome.failed + outcome.skipped;
                let floor = floor(backend, total);
                if outcome.failed > 0 {
                    failures.push(format!("on {backend}:\n{}", outcome.report));
                } else if total < 150 || outcome.passed < floor {
                    failures.push(format!(
                        "on {backend}: {} of {total} cases passed, fewer than its floor of \
                         {floor} of at least 150 (the rest skipped):\n{}",
                        outcome.passed, outcome.report
                    ));
                }
            }
            Err(message) => failures.push(format!("on {backend}:\n{message}")),
        }
    }
    assert!(
        failures.is_empty(),
        "file tests failed {}",
        failures.join("\n")
    );
}

/// The hostile-input corpus (`tests/hostile/`, issue 15): kernels and run blocks sized to
/// wrap 32-bit size arithmetic, exhaust memory or index far outside shared and private
/// arrays, on every backend present. Each case must end in its coded refusal or its result,
/// never a signal, an abort or the OOM killer (a crash fails here as an exit without the
/// closing line).
#[test]
fn hostile_corpus_is_refused_or_safe_on_every_available_backend() {
    assert!(Path::new("tests/hostile").is_dir());
    let mut failures = Vec::new();
    let mut ran = 0;
    for backend in Device::available() {
        match run_with(backend.name(), &["tests/hostile"], &[]) {
            Ok(outcome) => {
                println!("{}", outcome.report);
                ran += outcome.passed + outcome.failed;
                if outcome.failed > 0 {
                    failures.push(format!("on {backend}:\n{}", outcome.report));
                }
            }
            Err(message) => failures.push(format!("on {backend}:\n{message}")),
        }
    }
    assert!(
        failures.is_empty(),
        "hostile corpus failed {}",
        failures.join("\n")
    );
    assert!(ran >= 10, "only {ran} cases ran");
}

/// The CPU's streaming code (prefetched reads, non-temporal stores of outputs a kernel never
/// reads), which only launches larger than the last-level cache run, forced onto every launch
/// of the file tests: each result must still be the file's expected one.
#[test]
fn filetests_pass_streaming() {
    match run_with(
        "cpu",
        &["tests/filetests"],
        &[("CAJETA_XPU_CPU_STREAMING", "force")],
    ) {
        Ok(outcome) if outcome.failed == 0 => {
            println!("{}", outcome.report);
            outcome.print_skips("streaming file tests on cpu");
            let total = outcome.passed + outcome.skipped;
            assert!(
                outcome.passed >= floor(xpu::Backend::Cpu, total),
                "streaming: only {} of {total} cases passed",
                outcome.passed
            );
        }
        Ok(outcome) => panic!("streaming file tests failed on cpu:\n{}", outcome.report),
        Err(message) => panic!("streaming file tests failed on cpu:\n{message}"),
    }
}

/// The coarsening pass (`xpu::ir::coarsen`), which GPUs apply to large launches only, forced
/// onto every eligible launch of the file tests on the interpreter and the CPU: each result
/// must still be the file's expected one.
/// The attribute file tests at the narrow host waves `XPU_CPU_WAVE` allows for measurement
/// (1, 2, 4): an attribute changes how a kernel is built, never what it computes, so no case
/// may depend on the host's SIMD width (`by_waves` once assumed a wave of at least 8).
#[test]
fn attribute_filetests_pass_at_narrow_cpu_waves() {
    for wave in ["1", "2", "4"] {
        match run_with("cpu", &["tests/filetests/attrs"], &[("XPU_CPU_WAVE", wave)]) {
            Ok(outcome) if outcome.failed == 0 => {}
            Ok(outcome) => panic!("XPU_CPU_WAVE={wave}:\n{}", outcome.report),
            Err(message) => panic!("XPU_CPU_WAVE={wave}:\n{message}"),
        }
    }
}

#[test]
fn filetests_pass_coarsened() {
    let mut failures = Vec::new();
    for backend in ["interp", "cpu"] {
        match run_with(
            backend,
            &["tests/filetests"],
            &[("CAJETA_XPU_COARSEN", "force")],
        ) {
            Ok(outcome) if outcome.failed == 0 => {
                println!("{}", outcome.report);
                outcome.print_skips(&format!("coarsened file tests on {backend}"));
                let total = outcome.passed + outcome.skipped;
                let b = xpu::Backend::from_name(backend).expect("a backend");
                if outcome.passed < floor(b, total) {
                    failures.push(format!(
                        "on {backend}: only {} of {total} cases passed",
                        outcome.passed
                    ));
                }
            }
            Ok(outcome) => failures.push(format!("on {backend}:\n{}", outcome.report)),
            Err(message) => failures.push(format!("on {backend}:\n{message}")),
        }
    }
    assert!(
        failures.is_empty(),
        "coarsened file tests failed {}",
        failures.join("\n")
    );
}

/// The expected values of the generated file tests come from an independent host model
/// (`tests/filetests/gen/expect.py`, numpy and Python's libm, never an interpreter): the
/// files must hold what the model computes today, or a changed model (or a hand-edited
/// expectation) would go unnoticed. Needs `python3` with numpy (`.ci/run` installs it).
#[test]
fn generated_expectations_match_the_numpy_model() {
    let out = Command::new("python3")
        .args(["tests/filetests/gen/expect.py", "--check"])
        .output()
        .unwrap_or_else(|e| panic!("cannot start python3 (needed with numpy): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tests/filetests/gen/expect.py --check failed ({}): rerun it without --check to \
         rewrite the files, and review the diff\n{stdout}\n{stderr}",
        out.status
    );
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "expect.py --check: {}", stdout.trim());
    }
}

/// One rule for refusals: a launch this device cannot run (one of its limits, a capability
/// it lacks: `LaunchError::refused_by_device`) is a skip, whatever kind of refusal it is; a
/// refusal that would happen on every device (here the kernel's own `@occupancy` ceiling) is
/// a failure. Before, a grid over lavapipe's 65,535 workgroups failed the case while a missing
/// capability skipped it.
#[test]
fn device_refusals_are_skips_and_kernel_refusals_failures() {
    use xpu::filetest::runner::{Outcome as CaseOutcome, Runner};
    let mut checked = 0;
    for backend in Device::available() {
        let device = Device::open(backend).unwrap();
        let Some(max) = device.facts().max_grid_dims else {
            continue;
        };
        if max[0] == u32::MAX {
            continue;
        }
        let src = format!(
            "kernel k(o: buf<u32, rw>) {{\n    o[0] = 1u32;\n}}\n\n\
             @occupancy(max_threads = 32)\nkernel small(o: buf<u32, rw>) {{\n    o[0] = 1u32;\n}}\n\n\
             run k {{\n    grid = [{}];\n    block = [1];\n    arg o = fill(1, 0);\n    expect o = [1];\n}}\n\n\
             run small {{\n    grid = [1];\n    block = [64];\n    arg o = fill(1, 0);\n    expect o = [1];\n}}\n",
            max[0] as u64 + 1
        );
        let runner = Runner::new(vec![device]).unwrap();
        let mut cases = Vec::new();
        runner
            .run_source("limits.xk", &src, &mut |c| {
                cases.push(c.clone());
                Ok(())
            })
            .unwrap();
        assert_eq!(cases.len(), 2, "{backend}");
        assert!(
            matches!(&cases[0].outcome, CaseOutcome::Skip(m) if m.contains("XPU-L005")),
            "{backend}: {}",
            cases[0]
        );
        assert!(
            matches!(&cases[1].outcome, CaseOutcome::Fail(m) if m.contains("XPU-L005")),
            "{backend}: {}",
            cases[1]
        );
        checked += 1;
    }
    if checked == 0 {
        println!("no device here reports a grid limit: nothing to check");
    }
}

/// `xpu run` shows what each case's launches printed (issue 23 item 9) before the case's
/// verdict: the same lines, in the same order, on every backend present.
#[test]
fn xpu_run_shows_the_printed_lines_the_same_on_every_backend() {
    let file = "tests/filetests/debug/print.xk";
    let lines = |backend: &str| -> Vec<String> {
        let o = run_with(backend, &[file], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((o.passed, o.failed), (1, 0), "{backend}: {}", o.report);
        o.report
            .lines()
            .filter(|l| l.starts_with("  print "))
            .map(String::from)
            .collect()
    };
    let want = lines("interp");
    // 32 work-items: each prints once in the kernel and once in the helper; 8 hold a
    // negative value; the loop prints `i % 3` times (31 in all).
    assert_eq!(want.len(), 32 + 32 + 8 + 31, "{want:#?}");
    assert_eq!(
        want[0],
        "  print [print_types:15 group 0,0,0 item 0,0,0] i=0 s=-9 h=0.5 d=0.16666666666666666 w=7 k=-5000000000"
    );
    assert_eq!(
        want[1],
        "  print [print_types:26 group 0,0,0 item 0,0,0] twice 0"
    );
    for backend in Device::available() {
        if backend == xpu::Backend::Interp {
            continue;
        }
        assert_eq!(lines(backend.name()), want, "{backend}");
    }
}
