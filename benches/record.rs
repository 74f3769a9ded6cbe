//! The cost of the profiler and of launch recording, against the same launches uncaptured,
//! measured in one run (issue 18).
//!
//! `cargo bench --bench record [-- --backend cpu|vulkan|cuda|interp] [--launches N]` launches a
//! one-workgroup kernel N times (100,000 by default) on one stream, syncing every 1,000, and
//! prints microseconds per launch:
//!
//! 1. uncaptured (recording and profiling off: the launch path pays one relaxed load of a
//!    cached flag; the bench also times that check alone);
//! 2. recording (N / 10 launches: each writes a record file), against uncaptured launches
//!    of the same count;
//! 3. with the profiler armed (a host span and a device span per launch), against uncaptured
//!    again, checking that the trace holds a device span for every launch (none dropped).
//!
//! The phases run in that order because arming is process-wide; each is preceded by a warm
//! round. Read the ratios, not the absolute figures, on a loaded machine.

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

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1).cloned())
    };
    let backend = opt("--backend").unwrap_or_else(|| "cpu".into());
    let launches: usize = opt("--launches")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let backend = Backend::from_name(&backend).expect("a backend name");
    let device = Device::open(backend).expect("the backend is present");
    let module = xpu::ir::parse(K).unwrap().verify().unwrap();
    let program = device.load(module).unwrap();
    let kernel = program.kernel("bump").unwrap();
    let stream = KernelStream::current(&device);
    let mut o = device.upload(&vec![0u32; 64]).unwrap();
    let launch = Launch::grid([1]).block([64, 1, 1]);
    let mut run = |n: usize| -> f64 {
        let start = Instant::now();
        for i in 0..n {
            kernel
                .launch(&stream, launch, args![&mut o, 64u32])
                .unwrap();
            if i % 1000 == 999 {
                stream.sync().unwrap();
            }
        }
        stream.sync().unwrap();
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    };

    // The check the launch path pays with both off.
    let checks = 100_000_000u64;
    let start = Instant::now();
    let mut on = 0u64;
    for _ in 0..checks {
        on += std::hint::black_box(xpu::record::armed() || xpu::profile::armed()) as u64;
    }
    let check_ns = start.elapsed().as_secs_f64() * 1e9 / checks as f64;
    assert_eq!(on, 0);

    run(launches / 10);
    let off = run(launches);
    println!("{backend}: {launches} launches");
    println!("  off:       {off:8.3} us/launch (the off check alone: {check_ns:.3} ns)");

    let dir = std::env::temp_dir().join(format!("xpu-bench-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // Recording (before the profiler, which cannot be disarmed).
    let n = launches / 10;
    let off_small = run(n);
    device.record_to(dir.join("rec")).unwrap();
    run(n / 10);
    let recorded = run(n);
    let summary = xpu::record::finish().unwrap().summary.unwrap();
    println!(
        "  recorded:  {recorded:8.3} us/launch ({:.2}x off over the same {n}); {} records, {} unrecorded, {} bytes",
        recorded / off_small,
        summary.recorded,
        summary.unrecorded,
        summary.bytes
    );

    let off = run(launches);
    let trace = dir.join("trace.json");
    xpu::profile::arm(&trace);
    run(launches / 10);
    let profiled = run(launches);
    let t: serde_json::Value = serde_json::from_str(&xpu::profile::trace_json()).unwrap();
    let spans = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "device.launch")
        .count();
    let expected = launches + launches / 10;
    println!(
        "  profiled:  {profiled:8.3} us/launch ({:+.1}% against {off:.3} off); {spans} device spans of {expected} launches, dropped {}",
        (profiled / off - 1.0) * 100.0,
        t["otherData"]["records_dropped"]
    );
    assert_eq!(spans, expected, "the capture dropped launches");
    let _ = std::fs::remove_dir_all(&dir);
}
