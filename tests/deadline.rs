//! Launch deadlines (contract §2.4, refusal 6; issue 15, defect 2): a kernel that never
//! terminates is cancelled at its deadline on the interpreter and the CPU backend with
//! `XPU-L018` naming the kernel, within a bounded time, and the device and the process stay
//! usable (a second kernel runs after it). On Vulkan (lavapipe here), which cannot cancel, a
//! kernel that outlives its deadline is reported and the device stays usable. Also the
//! hostile files `tests/hostile/deadline_*.xk` through `xpu run`, and the text format's
//! `deadline = SECONDS;`.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xpu::devices::Backend;
use xpu::ir::VerifiedModule;
use xpu::launch::codes;
use xpu::{args, Device, KernelStream, Launch, LaunchError};

const KERNELS: &str = r#"
kernel spin(out: buf<u32, rw>) {
    loop {
    }
}

kernel spin_while(out: buf<u32, rw>, n: u32) {
    let i: u32 = global_id.x;
    while i < n {
        out[i] = out[i] + 1;
    }
}

kernel barrier_forever(out: buf<u32, rw>) {
    shared s: [u32; 64];
    let l: u32 = local_id.x;
    s[l] = l;
    while true {
        barrier();
        let v: u32 = s[63 - l];
        barrier();
        s[l] = v + 1;
    }
}

kernel double(out: buf<u32, rw>) {
    out[global_id.x] = global_id.x * 2;
}
"#;

fn module() -> Arc<VerifiedModule> {
    Arc::new(xpu::ir::parse(KERNELS).unwrap().verify().unwrap())
}

/// The backends that run kernels in this process and can cancel them.
fn cancelling_devices() -> Vec<Device> {
    let mut v = vec![Device::open(Backend::Interp).unwrap()];
    if let Ok(cpu) = Device::open(Backend::Cpu) {
        v.push(cpu);
    }
    v
}

/// Launches `kernel` on a 64-element buffer with `launch`, returning the result and the time
/// the launch (and its sync) took.
fn launch_on(
    device: &Device,
    kernel: &str,
    launch: Launch,
    extra: Option<u32>,
) -> (Result<(), LaunchError>, Duration) {
    let program = device.load(module()).unwrap();
    let k = program.kernel(kernel).unwrap();
    let mut out = device.upload(&vec![0u32; 256]).unwrap();
    let stream = KernelStream::current(device);
    let t0 = Instant::now();
    let r = match extra {
        Some(n) => k.launch(&stream, launch, args![&mut out, n]),
        None => k.launch(&stream, launch, args![&mut out]),
    };
    let r = r.and_then(|()| {
        stream.sync().map_err(|e| LaunchError::Device {
            kernel: kernel.into(),
            message: e.to_string(),
        })
    });
    (r, t0.elapsed())
}

/// The device still runs a kernel correctly.
fn still_usable(device: &Device) {
    let program = device.load(module()).unwrap();
    let mut out = device.upload(&vec![0u32; 64]).unwrap();
    let stream = KernelStream::current(device);
    program
        .kernel("double")
        .unwrap()
        .launch(&stream, Launch::grid([2]).block([32]), args![&mut out])
        .unwrap();
    stream.sync().unwrap();
    let got: Vec<u32> = out.download().unwrap();
    assert_eq!(got, (0..64).map(|i| i * 2).collect::<Vec<u32>>());
}

fn assert_cancelled(r: Result<(), LaunchError>, took: Duration, kernel: &str, backend: &str) {
    let e = r.expect_err("a launch that never ends must be cancelled");
    assert_eq!(e.code(), codes::DEADLINE, "{backend}: {e}");
    assert_eq!(e.kernel(), kernel);
    assert!(
        matches!(
            e,
            LaunchError::Deadline {
                cancelled: true,
                ..
            }
        ),
        "{backend}: {e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("XPU-L018") && text.contains(kernel) && text.contains("deadline"),
        "{text}"
    );
    // Generous: the machine is shared; a hang would never return at all.
    assert!(
        took < Duration::from_secs(30),
        "{backend}: took {took:?} to cancel"
    );
}

#[test]
fn an_infinite_loop_is_cancelled_at_its_deadline() {
    for device in cancelling_devices() {
        let name = device.backend().name();
        let d = Duration::from_millis(200);
        let (r, took) = launch_on(
            &device,
            "spin",
            Launch::grid([4]).block([64]).deadline(d),
            None,
        );
        assert!(took >= d, "{name}: stopped before the deadline ({took:?})");
        assert_cancelled(r, took, "spin", name);
        still_usable(&device);
        // A loop with a (never false) condition and a body, over several workgroups.
        let (r, took) = launch_on(
            &device,
            "spin_while",
            Launch::grid([2]).block([32]).deadline(d),
            Some(64),
        );
        assert_cancelled(r, took, "spin_while", name);
        still_usable(&device);
    }
}

#[test]
fn a_barrier_loop_is_cancelled_at_its_deadline() {
    for device in cancelling_devices() {
        let name = device.backend().name();
        let (r, took) = launch_on(
            &device,
            "barrier_forever",
            Launch::grid([3])
                .block([64])
                .deadline(Duration::from_millis(200)),
            None,
        );
        assert_cancelled(r, took, "barrier_forever", name);
        still_usable(&device);
    }
}

#[test]
fn a_deadline_that_is_not_reached_changes_nothing() {
    for device in cancelling_devices() {
        let program = device.load(module()).unwrap();
        let mut out = device.upload(&vec![0u32; 64]).unwrap();
        let stream = KernelStream::current(&device);
        let launch = Launch::grid([2])
            .block([32])
            .deadline(Duration::from_secs(600));
        program
            .kernel("double")
            .unwrap()
            .launch(&stream, launch, args![&mut out])
            .unwrap();
        stream.sync().unwrap();
        let got: Vec<u32> = out.download().unwrap();
        assert_eq!(got[63], 126);
    }
}

/// Vulkan cannot cancel a kernel: one that outlives its deadline is reported (not cancelled),
/// and the device stays usable once it has finished.
#[test]
fn vulkan_reports_a_missed_deadline_and_stays_usable() {
    let Ok(device) = Device::open(Backend::Vulkan) else {
        eprintln!("skipped: no Vulkan device");
        return;
    };
    const SLOW: &str = r#"
kernel slow(out: buf<u32, rw>, n: u32) {
    let acc: u32 = global_id.x;
    for k: u32 in 0..n {
        acc = acc * 1664525 + 1013904223 + k;
    }
    out[global_id.x] = acc;
}
"#;
    let m = Arc::new(xpu::ir::parse(SLOW).unwrap().verify().unwrap());
    let program = device.load(m).unwrap();
    let k = program.kernel("slow").unwrap();
    let mut out = device.upload(&vec![0u32; 4096]).unwrap();
    let stream = KernelStream::current(&device);
    // Long enough on any device to outlive 1 ms, short enough to finish (a few seconds on
    // lavapipe).
    let launch = Launch::grid([64])
        .block([64])
        .deadline(Duration::from_millis(1));
    let r = k.launch(&stream, launch, args![&mut out, 2_000_000u32]);
    match r {
        Err(LaunchError::Deadline {
            cancelled, kernel, ..
        }) => {
            assert!(!cancelled);
            assert_eq!(kernel, "slow");
        }
        other => panic!("expected a reported deadline, got {other:?}"),
    }
    // The kernel was left to finish; the stream waits for it, and the device runs the next.
    stream.sync().unwrap();
    let done = Launch::grid([1])
        .block([64])
        .deadline(Duration::from_secs(60));
    let mut small = device.upload(&vec![0u32; 64]).unwrap();
    k.launch(&stream, done, args![&mut small, 0u32]).unwrap();
    stream.sync().unwrap();
    let got: Vec<u32> = small.download().unwrap();
    assert_eq!(got, (0..64).collect::<Vec<u32>>());
}

/// `xpu run FILE --backend B` with a wall-clock bound of its own, so a regression fails
/// instead of hanging the suite.
fn xpu_run(file: &str, backend: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xpu"))
        .arg("run")
        .arg(file)
        .args(["--backend", backend])
        .args(extra)
        .env_remove("CAJETA_XPU_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn hostile_deadline_files_pass_on_the_interpreter_and_the_cpu() {
    for file in [
        "tests/hostile/deadline_loop.xk",
        "tests/hostile/deadline_barrier.xk",
    ] {
        for backend in ["interp", "cpu"] {
            if backend == "cpu" && Device::open(Backend::Cpu).is_err() {
                continue;
            }
            let (code, text) = xpu_run(file, backend, &[]);
            assert_eq!(code, Some(0), "{file} on {backend}:\n{text}");
            assert!(
                text.contains(" 0 failed") || text.contains("passed, 0 failed"),
                "{text}"
            );
            assert!(!text.contains("SKIP"), "{text}");
        }
    }
}

#[test]
fn xpu_run_default_deadline_and_its_flag() {
    // A run block without `deadline` takes `--deadline`: the case is refused with XPU-L018
    // (a failure, exit 1, since it expects no refusal) instead of hanging.
    let dir = std::env::temp_dir().join(format!("xpu-deadline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("forever.xk");
    std::fs::write(
        &file,
        "kernel forever(out: buf<u32, rw>) {\n    loop {\n    }\n}\n\nrun forever {\n    grid = [1];\n    block = [4];\n    arg out = fill(4, 0);\n    expect out = fill(4, 0);\n}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, text) = xpu_run(f, "interp", &["--deadline", "0.2"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("XPU-L018") && text.contains("forever"),
        "{text}"
    );
    // Bad values are usage errors.
    for bad in ["-1", "nan", "abc"] {
        let (code, text) = xpu_run(f, "interp", &["--deadline", bad]);
        assert_eq!(code, Some(2), "--deadline {bad}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn deadline_in_run_blocks_round_trips() {
    let src = "kernel k(out: buf<u32, rw>) {\n    out[0] = 1;\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n    deadline = 0.25;\n    arg out = fill(1, 0);\n}\n";
    let (_, specs) = xpu::ir::parse_file(src).unwrap();
    assert_eq!(specs[0].deadline, Some(Duration::from_millis(250)));
    let (m, specs) = xpu::ir::parse_file(src).unwrap();
    let printed = xpu::ir::print_file(&m, &specs);
    assert!(printed.contains("deadline = 0.25;"), "{printed}");
    let (_, again) = xpu::ir::parse_file(&printed).unwrap();
    assert_eq!(again, specs);
    // Whole seconds print without a fraction.
    let whole = src.replace("0.25", "60");
    let (m, specs) = xpu::ir::parse_file(&whole).unwrap();
    assert!(xpu::ir::print_file(&m, &specs).contains("deadline = 60;"));
    // Refused: zero, negative, not a number, twice.
    for bad in [
        "deadline = 0;",
        "deadline = -1;",
        "deadline = true;",
        "deadline = 1; deadline = 2;",
    ] {
        let s = src.replace("deadline = 0.25;", bad);
        let e = xpu::ir::parse_file(&s).expect_err(bad);
        assert!(e.0.iter().any(|d| d.code == "XPU-P014"), "{bad}: {e:?}");
    }
}
