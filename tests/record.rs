//! Launch records, replay, the census and the profiler (issue 18; contract §2.5, §5.4, §7),
//! through the `xpu` command as a user runs them.
//!
//! - A run of every file test under `tests/filetests/` recorded on the CPU and on lavapipe
//!   replays through the interpreter with every record agreeing.
//! - A flipped bit in one recorded output makes `xpu conform` name the kernel and the index
//!   and exit 1; a held kernel that agrees exactly is STALE; a budget cuts the replay and
//!   counts what it did not reach.
//! - The census tables `tests/census/{interp,cpu,vulkan}.txt` pass, and removing a file's run
//!   blocks (in a temporary copy) makes the census name its kernel.
//! - The profiler's trace of `xpu run examples` is trace-event JSON with a device span per
//!   launch, its tier, and the capture counters.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use xpu::{Backend, Device};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn xpu(args: &[&str], env: &[(&str, &Path)]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_xpu"))
        .args(args)
        .env("CAJETA_XPU_POISON", "1")
        .env_remove("CAJETA_XPU_BACKEND")
        .env_remove("CAJETA_XPU_RECORD")
        .env_remove("CAJETA_XPU_CONFORMANCE")
        .env_remove("CAJETA_PROFILER")
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .expect("xpu runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xpu-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether the Vulkan device here is lavapipe (the census table of `vulkan` is lavapipe's).
fn lavapipe() -> bool {
    Device::open(Backend::Vulkan).is_ok_and(|d| d.implementation().emulated_on_host())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Records `paths` run on `backend` into `dir`; returns the record count.
fn record(backend: &str, paths: &[&str], dir: &Path) -> usize {
    let mut args = vec!["run"];
    args.extend(paths);
    args.extend(["--backend", backend]);
    let out = xpu(&args, &[("CAJETA_XPU_RECORD", dir)]);
    assert!(
        out.code == 0,
        "xpu run on {backend}: {}\n{}",
        out.stdout,
        out.stderr
    );
    let summary = json(&std::fs::read_to_string(dir.join("summary.json")).unwrap());
    assert_eq!(summary["unrecorded"], 0, "{summary}");
    summary["recorded"].as_u64().unwrap() as usize
}

#[test]
fn every_file_test_recorded_on_cpu_and_lavapipe_replays_in_agreement() {
    let mut backends = vec!["cpu"];
    if lavapipe() {
        backends.push("vulkan");
    }
    for backend in backends {
        let dir = temp(&format!("all-{backend}"));
        let recorded = record(backend, &["tests/filetests"], &dir);
        assert!(recorded > 150, "{backend}: only {recorded} records");
        // Floats lavapipe computes within its file tests' ulps are held (tests/held/).
        let held = format!("tests/held/{backend}.txt");
        let mut args = vec!["conform", dir.to_str().unwrap(), "--json"];
        if Path::new(&held).is_file() {
            args.extend(["--held", held.as_str()]);
        }
        let out = xpu(&args, &[]);
        let report = json(&out.stdout);
        let records = report["records"].as_array().unwrap();
        // Kernels whose outputs' order is the device's (slots claimed with atomics): a
        // bit-for-bit replay of them agrees only when the device claimed in lane order.
        const ORDER_DEPENDENT: [&str; 1] = ["filter_positive"];
        let problems: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["verdict"] != "agree" && r["verdict"] != "undefined")
            .filter(|r| !ORDER_DEPENDENT.iter().any(|k| r["kernel"] == *k))
            .collect();
        let order_only = records
            .iter()
            .filter(|r| r["verdict"] != "agree" && r["verdict"] != "undefined")
            .count()
            > problems.len();
        assert!(
            (out.code == 0 || order_only) && problems.is_empty(),
            "{backend}: {problems:#?}\n{}",
            out.stderr
        );
        assert_eq!(records.len(), recorded);
        // Records of this backend, not only the interpreter's own `expect = interp` runs.
        assert!(records.iter().filter(|r| r["backend"] == backend).count() > 100);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

const SMALL: &str = "
kernel scale(y: buf<f32, rw>, x: buf<f32>, a: f32) {
    let i: u32 = global_id.x;
    y[i] = a * x[i];
}

kernel bump(o: buf<u32, rw>) {
    let i: u32 = global_id.x;
    o[i] = o[i] + i;
}

run scale {
    grid = [4];
    block = [64];
    arg y = fill(256, 0.0);
    arg x = iota(256);
    arg a = 1.5;
    expect y = iota(256, 0.0, 1.5);
}

run bump {
    grid = [2];
    block = [32];
    arg o = fill(64, 7);
    expect o = iota(64, 7, 1);
}
";

/// A small recorded run on the CPU: the folder and its records.
fn small_recording(name: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = temp(name);
    let file = dir.join("small.xk");
    std::fs::write(&file, SMALL).unwrap();
    let rec = dir.join("rec");
    assert_eq!(record("cpu", &[file.to_str().unwrap()], &rec), 2);
    let mut records: Vec<PathBuf> = std::fs::read_dir(rec.join("launches"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    records.sort();
    (rec, records)
}

#[test]
fn a_flipped_bit_is_named_by_kernel_and_index() {
    let (rec, records) = small_recording("flip");
    let ok = xpu(&["conform", rec.to_str().unwrap()], &[]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("2 replayed: 2 agree"), "{}", ok.stdout);
    // Flip the low bit of element 37 of `bump`'s recorded output.
    let path = records
        .iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("\"bump\""))
        .unwrap();
    let mut r = json(&std::fs::read_to_string(path).unwrap());
    let after = r["args"][0]["after"].as_str().unwrap().to_string();
    let blob = rec.join("blobs").join(format!("{after}.zst"));
    let mut bytes = zstd::decode_all(&std::fs::read(&blob).unwrap()[..]).unwrap();
    bytes[37 * 4] ^= 1;
    let hash = xpu::record::content_hash(&bytes);
    std::fs::write(
        rec.join("blobs").join(format!("{hash}.zst")),
        zstd::encode_all(&bytes[..], 3).unwrap(),
    )
    .unwrap();
    r["args"][0]["after"] = serde_json::Value::String(hash);
    std::fs::write(path, r.to_string()).unwrap();
    let bad = xpu(&["conform", rec.to_str().unwrap()], &[]);
    assert_eq!(bad.code, 1, "{}", bad.stdout);
    let line = bad
        .stdout
        .lines()
        .find(|l| l.starts_with("DISAGREE"))
        .unwrap_or_else(|| panic!("{}", bad.stdout));
    assert!(line.contains("XPU-R007"), "{line}");
    assert!(line.contains("kernel bump"), "{line}");
    assert!(line.contains("index 37"), "{line}");
    assert!(line.contains("expected 44"), "{line}");
    assert!(line.contains("actual 45"), "{line}");
    assert!(
        line.contains(path.file_name().unwrap().to_str().unwrap()),
        "{line}"
    );
    // The JSON form says the same.
    let j = json(&xpu(&["conform", rec.to_str().unwrap(), "--json"], &[]).stdout);
    assert_eq!(j["ok"], false);
    let d = j["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verdict"] == "disagree")
        .unwrap();
    assert_eq!(
        (d["kernel"].as_str(), d["index"].as_u64()),
        (Some("bump"), Some(37))
    );
    // A held excuse turns it into HELD, not a failure.
    let held = rec.join("held.txt");
    std::fs::write(
        &held,
        "bump excused -- plan item 1: the test's flipped bit\n",
    )
    .unwrap();
    let excused = xpu(
        &[
            "conform",
            rec.to_str().unwrap(),
            "--held",
            held.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(excused.code, 0, "{}", excused.stdout);
    assert!(excused.stdout.contains("HELD"), "{}", excused.stdout);
    let _ = std::fs::remove_dir_all(rec.parent().unwrap());
}

#[test]
fn a_held_kernel_that_agrees_exactly_is_stale() {
    let (rec, _) = small_recording("stale");
    let held = rec.parent().unwrap().join("held.txt");
    std::fs::write(
        &held,
        "# tolerances\nscale ulps=2 -- plan item 7: fma contraction\n",
    )
    .unwrap();
    let out = xpu(
        &[
            "conform",
            rec.to_str().unwrap(),
            "--held",
            held.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("STALE[XPU-R008] kernel scale") && l.contains(":2")),
        "{}",
        out.stdout
    );
    // A malformed held list is a usage error with its code.
    std::fs::write(&held, "scale ulps=2\n").unwrap();
    let out = xpu(
        &[
            "conform",
            rec.to_str().unwrap(),
            "--held",
            held.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("XPU-R005"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(rec.parent().unwrap());
}

#[test]
fn the_budget_cuts_a_replay_and_lists_what_it_did_not_reach() {
    let (rec, records) = small_recording("budget");
    let out = xpu(
        &[
            "conform",
            rec.to_str().unwrap(),
            "--budget",
            "0.000000001",
            "--json",
        ],
        &[],
    );
    let j = json(&out.stdout);
    let not_reached = j["not_reached"].as_array().unwrap();
    assert!(!not_reached.is_empty(), "{}", out.stdout);
    assert_eq!(
        not_reached.len() + j["records"].as_array().unwrap().len(),
        records.len()
    );
    let text = xpu(
        &["conform", rec.to_str().unwrap(), "--budget", "0.000000001"],
        &[],
    );
    assert!(
        text.stdout.contains("NOT REACHED[XPU-R015]"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("not reached"), "{}", text.stdout);
    let _ = std::fs::remove_dir_all(rec.parent().unwrap());
}

#[test]
fn the_record_budget_counts_unrecorded_launches() {
    let dir = temp("record-budget");
    let file = dir.join("small.xk");
    std::fs::write(&file, SMALL).unwrap();
    let rec = dir.join("rec");
    // A budget of 1 byte: the module text alone spends it.
    let out = Command::new(env!("CARGO_BIN_EXE_xpu"))
        .args(["run", file.to_str().unwrap(), "--backend", "cpu"])
        .env("CAJETA_XPU_RECORD", &rec)
        .env("CAJETA_XPU_RECORD_BUDGET", "1")
        .env_remove("CAJETA_XPU_CONFORMANCE")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("XPU-R012"), "{stderr}");
    let summary = json(&std::fs::read_to_string(rec.join("summary.json")).unwrap());
    assert_eq!(
        (summary["recorded"].as_u64(), summary["unrecorded"].as_u64()),
        (Some(0), Some(2))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conformance_replays_a_run_when_it_ends() {
    let dir = temp("conformance");
    let file = dir.join("small.xk");
    std::fs::write(&file, SMALL).unwrap();
    let rec = dir.join("rec");
    let out = xpu(
        &["run", file.to_str().unwrap(), "--backend", "cpu"],
        &[("CAJETA_XPU_CONFORMANCE", &rec)],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("2 replayed: 2 agree"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

fn census(backend: &str, dir: &Path, table: &Path) -> Out {
    xpu(
        &[
            "census",
            dir.to_str().unwrap(),
            "--backend",
            backend,
            "--table",
            table.to_str().unwrap(),
        ],
        &[],
    )
}

#[test]
fn the_committed_census_tables_pass() {
    let mut backends = vec!["interp", "cpu"];
    // The vulkan table is lavapipe's: another Vulkan device skips other cases.
    if lavapipe() {
        backends.push("vulkan");
    }
    for backend in backends {
        let table = PathBuf::from(format!("tests/census/{backend}.txt"));
        assert!(table.is_file(), "{} is committed", table.display());
        let out = census(backend, Path::new("tests/filetests"), &table);
        assert_eq!(out.code, 0, "{backend}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.contains("0 uncovered, 0 stale"),
            "{}",
            out.stdout
        );
    }
}

/// Kernel names declared in a kernel file.
fn kernels_of(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("kernel "))
        // Templates register their instances, not their own name.
        .filter(|rest| !rest.split('(').next().unwrap_or("").contains('<'))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .map(str::to_string)
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "xk") {
            out.push(p);
        }
    }
}

#[test]
fn removing_a_file_test_makes_the_census_name_its_kernel() {
    let dir = temp("census-copy");
    copy_tree(Path::new("tests/filetests"), &dir);
    let mut all = Vec::new();
    files(&dir, &mut all);
    all.sort();
    // Every kernel name and how many files declare it.
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &all {
        for k in kernels_of(&std::fs::read_to_string(f).unwrap()) {
            *seen.entry(k).or_default() += 1;
        }
    }
    let table = Path::new("tests/census/interp.txt");
    let excused: BTreeSet<String> = std::fs::read_to_string(table)
        .unwrap()
        .lines()
        .filter_map(|l| l.split("--").next())
        .map(|k| k.trim().to_string())
        .collect();
    // A file whose kernel is declared nowhere else, value-checked (not excused), and which
    // has run blocks: strip them.
    let (file, kernel) = all
        .iter()
        .find_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let k = kernels_of(&text)
                .into_iter()
                .find(|k| seen[k] == 1 && !excused.contains(k))?;
            text.contains("\nrun ").then(|| (f.clone(), k))
        })
        .expect("a file with a value-checked kernel of its own");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut kept = String::new();
    let mut in_run = false;
    for line in text.lines() {
        if line.starts_with("run ") {
            in_run = true;
        }
        if !in_run {
            kept.push_str(line);
            kept.push('\n');
        }
        if in_run && line.starts_with('}') {
            in_run = false;
        }
    }
    std::fs::write(&file, kept).unwrap();
    let out = census("interp", &dir, table);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("UNCOVERED[XPU-R010] interp ")
                && l.contains(&format!(" {kernel}:"))),
        "{kernel} from {}: {}",
        file.display(),
        out.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `xpu run examples` on `backend` with the profiler (and recording, to count the launches).
fn profiled(backend: &str) {
    let dir = temp(&format!("profile-{backend}"));
    let trace = dir.join("trace.json");
    let rec = dir.join("rec");
    let out = xpu(
        &[
            "profile",
            "--out",
            trace.to_str().unwrap(),
            "--",
            env!("CARGO_BIN_EXE_xpu"),
            "run",
            "examples",
            "--backend",
            backend,
        ],
        &[("CAJETA_XPU_RECORD", &rec)],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("kernel"), "{}", out.stdout);
    assert!(out.stdout.contains("median us"), "{}", out.stdout);
    let t = json(&std::fs::read_to_string(&trace).unwrap());
    let events = t["traceEvents"].as_array().unwrap();
    for e in events {
        assert!(e["ph"].is_string() && e["pid"].is_u64(), "{e}");
        if e["ph"] == "X" {
            assert!(
                e["ts"].is_number() && e["dur"].is_number() && e["tid"].is_u64(),
                "{e}"
            );
            assert!(e["name"].is_string() && e["cat"].is_string(), "{e}");
        }
    }
    let device: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X" && e["cat"] == "device.launch" && e["args"]["backend"] == backend
        })
        .collect();
    let records = std::fs::read_dir(rec.join("launches"))
        .unwrap()
        .filter(|f| {
            std::fs::read_to_string(f.as_ref().unwrap().path())
                .unwrap()
                .contains(&format!("\"backend\":\"{backend}\""))
        })
        .count();
    assert!(records > 0);
    assert_eq!(device.len(), records, "a device span per {backend} launch");
    for d in &device {
        let tier = d["args"]["tier"].as_str().unwrap();
        assert!(["DEVICE", "EVENT", "HOST"].contains(&tier), "{d}");
        assert!(
            d["args"]["kernel"].is_string() && d["args"]["grid"].is_array(),
            "{d}"
        );
        assert!(
            d["args"]["block"].is_array() && d["args"]["bytes"].is_u64(),
            "{d}"
        );
    }
    if backend == "vulkan" {
        // lavapipe's queue writes timestamps: the spans are device-timed.
        assert!(
            device.iter().all(|d| d["args"]["tier"] == "EVENT"),
            "{device:#?}"
        );
    }
    // Host spans: the launch calls, compiles, copies and syncs.
    for cat in ["launch", "compile", "copy"] {
        assert!(events.iter().any(|e| e["cat"] == cat), "no {cat} span");
    }
    for counter in [
        "gpu_pending_overflow",
        "unclaimed",
        "records_dropped",
        "device_unmatched",
    ] {
        assert_eq!(t["otherData"][counter], 0, "{counter}");
    }
    // The trace says what timed the device spans.
    let source = t["otherData"]["device_sources"][backend]
        .as_str()
        .unwrap_or("");
    let want = if backend == "vulkan" {
        "timestamps"
    } else {
        "host"
    };
    assert!(source.starts_with(want), "{}", t["otherData"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_profiler_traces_examples_on_the_cpu() {
    profiled("cpu");
}

#[test]
fn the_profiler_traces_examples_on_lavapipe() {
    if !lavapipe() {
        eprintln!("skipped: no lavapipe here");
        return;
    }
    profiled("vulkan");
}

/// The profiler's per-thread ring: a full ring spills to its overflow list and loses nothing.
#[test]
fn a_full_profiler_ring_spills_and_loses_nothing() {
    use xpu::profile::ring::{Ring, CAPACITY};
    let ring: Ring<u64> = Ring::new();
    let n = CAPACITY as u64 * 3;
    for i in 0..n {
        // SAFETY: this thread is the ring's only producer.
        unsafe { ring.push(i) };
    }
    let mut got = Vec::new();
    // SAFETY: the only consumer.
    unsafe { ring.drain(|v| got.push(v)) };
    got.sort_unstable();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    assert_eq!(
        ring.overflowed.load(std::sync::atomic::Ordering::Relaxed),
        n - CAPACITY as u64
    );
}

/// A consumer on another thread, draining while the producer writes, sees every record once.
#[test]
fn a_profiler_ring_drained_concurrently_sees_every_record_once() {
    use std::sync::Arc;
    use xpu::profile::ring::Ring;
    let ring: Arc<Ring<u64>> = Arc::new(Ring::new());
    let n = 300_000u64;
    let producer = {
        let ring = ring.clone();
        std::thread::spawn(move || {
            for i in 0..n {
                // SAFETY: this thread is the ring's only producer.
                unsafe { ring.push(i) };
            }
        })
    };
    let (mut sum, mut count) = (0u64, 0u64);
    while count < n {
        // SAFETY: the only consumer.
        unsafe {
            ring.drain(|v| {
                sum += v;
                count += 1
            })
        };
    }
    producer.join().unwrap();
    assert_eq!(count, n);
    assert_eq!(sum, n * (n - 1) / 2);
}

/// The profiler's per-thread log of finished spans keeps every span, in order, across chunks
/// and spares, and reading it does not consume it.
#[test]
fn a_profiler_log_keeps_every_value_in_order_across_chunks() {
    use xpu::profile::log::{Log, CHUNK};
    let log = Log::<u64>::new();
    let n = CHUNK as u64 * 2 + 17;
    for i in 0..n {
        // SAFETY: this test's thread is the only producer.
        let _ = unsafe { log.push(i) };
    }
    assert_eq!(log.len(), n as usize);
    // Spares are used and refilled without losing or repeating a value.
    assert!(log.refill());
    for i in n..n + CHUNK as u64 {
        // SAFETY: as above.
        let _ = unsafe { log.push(i) };
    }
    assert!(log.refill());
    assert!(!log.refill());
    let n = n + CHUNK as u64;
    let mut seen = Vec::new();
    log.for_each(|v| seen.push(*v));
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
    // Reading does not consume.
    let mut again = 0;
    log.for_each(|_| again += 1);
    assert_eq!(again, n);
}

/// A reader of a log being written sees a prefix, in order.
#[test]
fn a_profiler_log_reader_sees_a_prefix_while_the_producer_writes() {
    use xpu::profile::log::{Log, CHUNK};
    let log = std::sync::Arc::new(Log::<u64>::new());
    let producer = {
        let log = log.clone();
        std::thread::spawn(move || {
            for i in 0..(CHUNK as u64 * 3) {
                // SAFETY: this thread is the only producer.
                let _ = unsafe { log.push(i) };
            }
        })
    };
    for _ in 0..50 {
        let mut next = 0u64;
        log.for_each(|v| {
            assert_eq!(*v, next);
            next += 1;
        });
    }
    producer.join().unwrap();
    assert_eq!(log.len(), CHUNK * 3);
}

/// The profiler's counter, converted by its fit, follows the monotonic clock.
#[test]
fn the_profiler_clock_follows_the_monotonic_clock() {
    use xpu::profile::clock::{init, ticks, Fit};
    init();
    let a = ticks();
    let t0 = std::time::Instant::now();
    while t0.elapsed().as_millis() < 20 {}
    let b = ticks();
    let fit = Fit::now();
    let ns = fit.ns(b) - fit.ns(a);
    assert!((19_000_000..80_000_000).contains(&ns), "{ns} ns");
    assert!(fit.ticks_of(ns).abs_diff(b - a) <= (b - a) / 100 + 1);
}
