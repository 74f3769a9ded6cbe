//! The cost of the profiler and of launch recording, against the same launches uncaptured
//! (issue 18).
//!
//! `cargo bench --bench record [-- --backend cpu|vulkan|cuda|interp] [--launches N]
//! [--rounds R]` launches a one-workgroup kernel N times (100,000 by default) on one stream,
//! syncing every 1,000, in three kinds of run:
//!
//! 1. `off`: recording and profiling off (the launch path pays one relaxed load of a cached
//!    flag; the bench also times that check alone);
//! 2. `profile`: the profiler armed (a host span and a device span per launch); the run checks
//!    that the trace holds a device span for every launch (none dropped);
//! 3. `record`: every launch writes a record (N / 10 launches: each is a file).
//!
//! Arming is process-wide and cannot be undone, so each run is a child process (this binary
//! with `--phase`), and the parent alternates `off` and `profile` children R times (5 by
//! default), then one `off`/`record` pair, and prints each round's ratio and the median. Each
//! child times only its launch loop (after a warm round): wall time, and the process's CPU
//! time (every thread, the profiler's writer included), which a loaded machine disturbs less.
//! Read the ratios, not the absolute figures.

use std::process::Command;
use std::time::Instant;
use xpu::{args, Backend, Device, KernelStream, Launch};

const K: &str = "
kernel bump(o: buf<u32, rw>, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = o[i] + 1;
    }
}
";

/// The process's CPU time (all threads), in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One child: `phase` over `launches` launches; prints `wall_us cpu_us` per launch.
fn child(backend: Backend, phase: &str, launches: usize) {
    let dir = std::env::temp_dir().join(format!("xpu-bench-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Armed before the device opens, as `CAJETA_PROFILER=1` does (CUPTI starts with CUDA).
    if phase == "profile" {
        xpu::profile::arm(&dir.join("trace.json"));
    }
    let device = Device::open(backend).expect("the backend is present");
    if phase == "record" {
        device.record_to(dir.join("rec")).unwrap();
    }
    let module = xpu::ir::parse(K).unwrap().verify().unwrap();
    let program = device.load(module).unwrap();
    let kernel = program.kernel("bump").unwrap();
    let stream = KernelStream::current(&device);
    let mut o = device.upload(&vec![0u32; 64]).unwrap();
    let launch = Launch::grid([1]).block([64, 1, 1]);
    let mut run = |n: usize| -> (f64, f64) {
        let (start, cpu) = (Instant::now(), cpu_seconds());
        for i in 0..n {
            kernel
                .launch(&stream, launch, args![&mut o, 64u32])
                .unwrap();
            if i % 1000 == 999 {
                stream.sync().unwrap();
            }
        }
        stream.sync().unwrap();
        (
            start.elapsed().as_secs_f64() * 1e6 / n as f64,
            (cpu_seconds() - cpu) * 1e6 / n as f64,
        )
    };
    run(launches / 10);
    let (wall, cpu) = run(launches);
    match phase {
        "profile" => {
            let t: serde_json::Value = serde_json::from_str(&xpu::profile::trace_json()).unwrap();
            let spans = t["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["cat"] == "device.launch")
                .count();
            let expected = launches + launches / 10;
            assert_eq!(spans, expected, "the capture dropped launches");
            assert_eq!(t["otherData"]["records_dropped"], 0);
            let mut tiers = std::collections::BTreeMap::<String, usize>::new();
            for e in t["traceEvents"].as_array().unwrap() {
                if e["cat"] == "device.launch" {
                    *tiers
                        .entry(e["args"]["tier"].as_str().unwrap_or("?").to_string())
                        .or_default() += 1;
                }
            }
            eprintln!(
                "  (profile: {spans} device spans of {expected} launches, none dropped; tiers {tiers:?}; sources {})",
                t["otherData"]["device_sources"]
            );
        }
        "record" => {
            let summary = xpu::record::finish().unwrap().summary.unwrap();
            eprintln!(
                "  (record: {} records, {} unrecorded, {} bytes)",
                summary.recorded, summary.unrecorded, summary.bytes
            );
        }
        _ => {}
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{wall} {cpu}");
}

/// Runs one child and reads its (wall, cpu) microseconds per launch.
fn spawn(backend: &str, phase: &str, launches: usize) -> (f64, f64) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--backend", backend, "--phase", phase])
        .args(["--launches", &launches.to_string()])
        .env_remove("CAJETA_PROFILER")
        .env_remove("CAJETA_XPU_RECORD")
        .output()
        .expect("the bench can run itself");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the {phase} child failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1).cloned())
    };
    let name = opt("--backend").unwrap_or_else(|| "cpu".into());
    let launches: usize = opt("--launches")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let rounds: usize = opt("--rounds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let backend = Backend::from_name(&name).expect("a backend name");
    if let Some(phase) = opt("--phase") {
        child(backend, &phase, launches);
        return;
    }

    // The check the launch path pays with both off.
    let checks = 100_000_000u64;
    let start = Instant::now();
    let mut on = 0u64;
    for _ in 0..checks {
        on += std::hint::black_box(xpu::record::armed() || xpu::profile::armed()) as u64;
    }
    let check_ns = start.elapsed().as_secs_f64() * 1e9 / checks as f64;
    assert_eq!(on, 0);

    println!(
        "{backend}: {launches} launches, {rounds} rounds (the off check alone: {check_ns:.3} ns)"
    );
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which goes first, so a drift in the machine's load favours neither.
        let (off, on) = if r % 2 == 0 {
            let off = spawn(&name, "off", launches);
            (off, spawn(&name, "profile", launches))
        } else {
            let on = spawn(&name, "profile", launches);
            (spawn(&name, "off", launches), on)
        };
        println!(
            "  round {r}: off {:.3} us wall / {:.3} us cpu; profiled {:.3} / {:.3}: {:.3}x wall, {:.3}x cpu",
            off.0,
            off.1,
            on.0,
            on.1,
            on.0 / off.0,
            on.1 / off.1
        );
        walls.push(on.0 / off.0);
        cpus.push(on.1 / off.1);
    }
    println!(
        "  profiled: median {:.3}x wall, {:.3}x cpu per launch against off",
        median(walls),
        median(cpus)
    );
    let n = launches / 10;
    let off = spawn(&name, "off", n);
    let rec = spawn(&name, "record", n);
    println!(
        "  recorded: {:.3} us wall / {:.3} us cpu per launch against {:.3} / {:.3} off ({:.2}x wall, {:.2}x cpu, {n} launches)",
        rec.0,
        rec.1,
        off.0,
        off.1,
        rec.0 / off.0,
        rec.1 / off.1
    );
}
