//! Interpreter throughput, side by side with Oclgrind 21.10 on the same kernels.
//!
//! `cargo bench --bench interp` runs saxpy (1M elements), a shared-memory tree reduction
//! (256K elements, 256 per workgroup), the same reduction with wave verbs (ours only: Oclgrind
//! has no sub-groups) and a 16×16-tiled SGEMM (128×128) on the reference
//! interpreter, with its UB checks on (races and poison tracked) and off (bounds, alignment,
//! division, divergence only), and reports work-item steps and work-items per second. It then
//! runs `benches/peers/oclgrind_bench.py` (if present, with `oclgrind-kernel` on the PATH) on
//! the same kernels and sizes, single-threaded like us, and prints the ratios. The comparable
//! pairs are *ours, checks off* vs *Oclgrind default* (both check bounds and barrier
//! divergence) and *ours, checks on* vs *Oclgrind --data-races --uninitialized*.
//!
//! Options (after `--`): `--quick` (small sizes, one repetition), `--reps N` (3),
//! `--no-peers` (skip Oclgrind).

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use xpu::interp::{self, Arg, Buffer, Geometry, Options};
use xpu::ir::{Literal, Scalar, VerifiedModule};

const SAXPY: &str = r#"
kernel saxpy(n: u32, a: f32, x: buf<f32>, y: buf<f32, rw>) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}
"#;

const REDUCE: &str = r#"
kernel reduce(n: u32, inp: buf<f32>, partial: buf<f32, rw>) {
    shared scratch: [f32; 256];
    let lid: u32 = local_id.x;
    let i: u32 = global_id.x;
    if i < n {
        scratch[lid] = inp[i];
    } else {
        scratch[lid] = 0.0;
    }
    barrier();
    let stride: u32 = 128;
    while stride > 0 {
        if lid < stride {
            scratch[lid] = scratch[lid] + scratch[lid + stride];
        }
        barrier();
        stride = stride >> 1;
    }
    if lid == 0 {
        partial[group_id.x] = scratch[0];
    }
}
"#;

const SGEMM: &str = r#"
kernel sgemm(n: u32, a: buf<f32>, b: buf<f32>, c: buf<f32, rw>) {
    shared at: [f32; 256];
    shared bt: [f32; 256];
    let tx: u32 = local_id.x;
    let ty: u32 = local_id.y;
    let col: u32 = global_id.x;
    let row: u32 = global_id.y;
    let acc: f32 = 0.0;
    for t: u32 in 0..n step 16 {
        at[ty * 16 + tx] = a[row * n + t + tx];
        bt[ty * 16 + tx] = b[(t + ty) * n + col];
        barrier();
        for k: u32 in 0..16 {
            acc = acc + at[ty * 16 + k] * bt[k * 16 + tx];
        }
        barrier();
    }
    c[row * n + col] = acc;
}
"#;

const WAVE_REDUCE: &str = r#"
kernel wave_reduce(n: u32, inp: buf<f32>, partial: buf<f32, rw>) {
    shared sums: [f32; 256];
    let i: u32 = global_id.x;
    let v: f32 = 0.0;
    if i < n {
        v = inp[i];
    }
    v = wave_reduce_sum(v);
    let wave: u32 = local_id.x / wave_width;
    if lane_id == 0 {
        sums[wave] = v;
    }
    barrier();
    if wave == 0 {
        let t: f32 = 0.0;
        for s: u32 in lane_id..group_size.x / wave_width step wave_width {
            t = t + sums[s];
        }
        t = wave_reduce_sum(t);
        if lane_id == 0 {
            partial[group_id.x] = t;
        }
    }
}
"#;

fn module(src: &str) -> VerifiedModule {
    let m = xpu::ir::parse(src).unwrap_or_else(|d| panic!("bench kernel does not parse:\n{d}"));
    xpu::ir::verify(m).unwrap_or_else(|d| panic!("bench kernel does not verify:\n{d}"))
}

fn u32_arg(v: u32) -> Arg<'static> {
    Arg::Scalar(Literal::int(i128::from(v), Scalar::U32))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One measured configuration of ours.
struct Ours {
    secs: f64,
    steps: u64,
    work_items: u64,
}

/// Runs `launch` `reps` times, each on fresh copies of the inputs made by `setup`, and checks
/// the outputs with `check`.
fn measure(reps: usize, checks: bool, mut once: impl FnMut(&Options) -> interp::Report) -> Ours {
    let opts = Options {
        checks,
        ..Options::default()
    };
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = once(&opts);
        times.push(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    let r = last.expect("at least one repetition");
    Ours {
        secs: median(times),
        steps: r.steps,
        work_items: r.work_items,
    }
}

fn bench_saxpy(n: u32, reps: usize, checks: bool) -> Ours {
    let m = module(SAXPY);
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    measure(reps, checks, |opts| {
        let mut x = Buffer::from_values(&xs);
        let mut y = Buffer::from_values(&vec![1.0f32; n as usize]);
        let mut args = [
            u32_arg(n),
            Arg::Scalar(Literal::float(2.0, Scalar::F32)),
            Arg::Buffer(&mut x),
            Arg::Buffer(&mut y),
        ];
        let r = interp::launch(
            &m,
            "saxpy",
            &Geometry::linear(n / 256, 256),
            &mut args,
            opts,
        )
        .expect("saxpy runs");
        let out = y.to_values::<f32>();
        assert!(out
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 2.0 * i as f32 + 1.0));
        r
    })
}

fn bench_reduce(n: u32, reps: usize, checks: bool) -> Ours {
    let m = module(REDUCE);
    let xs: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let groups = n / 256;
    measure(reps, checks, |opts| {
        let mut inp = Buffer::from_values(&xs);
        let mut partial = Buffer::uninit(groups as usize * 4);
        let mut args = [u32_arg(n), Arg::Buffer(&mut inp), Arg::Buffer(&mut partial)];
        let r = interp::launch(
            &m,
            "reduce",
            &Geometry::linear(groups, 256),
            &mut args,
            opts,
        )
        .expect("reduce runs");
        let total: f64 = partial
            .to_values::<f32>()
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        let want: f64 = xs.iter().map(|&v| f64::from(v)).sum();
        assert_eq!(total, want);
        r
    })
}

fn bench_wave_reduce(n: u32, reps: usize, checks: bool) -> Ours {
    let m = module(WAVE_REDUCE);
    let xs: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let groups = n / 256;
    measure(reps, checks, |opts| {
        let mut inp = Buffer::from_values(&xs);
        let mut partial = Buffer::uninit(groups as usize * 4);
        let mut args = [u32_arg(n), Arg::Buffer(&mut inp), Arg::Buffer(&mut partial)];
        let r = interp::launch(
            &m,
            "wave_reduce",
            &Geometry::linear(groups, 256),
            &mut args,
            opts,
        )
        .expect("wave_reduce runs");
        let total: f64 = partial
            .to_values::<f32>()
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        let want: f64 = xs.iter().map(|&v| f64::from(v)).sum();
        assert_eq!(total, want);
        r
    })
}

fn bench_sgemm(n: u32, reps: usize, checks: bool) -> Ours {
    let m = module(SGEMM);
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let nn = n as usize;
    let mut want = vec![0.0f32; nn * nn];
    for r in 0..nn {
        for c in 0..nn {
            want[r * nn + c] = (0..nn).map(|k| a[r * nn + k] * b[k * nn + c]).sum();
        }
    }
    measure(reps, checks, |opts| {
        let mut ba = Buffer::from_values(&a);
        let mut bb = Buffer::from_values(&b);
        let mut bc = Buffer::uninit(nn * nn * 4);
        let mut args = [
            u32_arg(n),
            Arg::Buffer(&mut ba),
            Arg::Buffer(&mut bb),
            Arg::Buffer(&mut bc),
        ];
        let geo = Geometry::new([n / 16, n / 16, 1], [16, 16, 1]);
        let r = interp::launch(&m, "sgemm", &geo, &mut args, opts).expect("sgemm runs");
        // Small integers: every partial sum is exact, so the order does not matter.
        assert_eq!(bc.to_values::<f32>(), want);
        r
    })
}

/// One record of `oclgrind_bench.py`.
#[derive(Debug)]
struct Peer {
    kernel: String,
    checks: String,
    work_items: f64,
    work_items_per_s: f64,
    insts_per_s: f64,
}

/// The value of `"key": value` in a flat JSON object line (numbers and strings only).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let at = line.find(&pat)? + pat.len();
    let rest = line[at..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        return s.split('"').next();
    }
    rest.split([',', '}']).next().map(str::trim)
}

/// Runs `oclgrind_bench.py` on one kernel (`n` its size option's value).
fn peers(reps: usize, kernel: &str, n: u32) -> Result<Vec<Peer>, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/oclgrind_bench.py");
    if !script.exists() {
        return Err(format!("{} is missing", script.display()));
    }
    let out = Command::new("python3")
        .arg(&script)
        .args(["--threads", "1", "--reps", &reps.to_string()])
        .args(["--kernels", kernel])
        .args([format!("--{kernel}-n"), n.to_string()])
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "oclgrind_bench.py failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let num = |l: &str, k: &str| {
        field(l, k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    Ok(text
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| Peer {
            kernel: field(l, "kernel").unwrap_or("?").to_string(),
            checks: field(l, "checks").unwrap_or("?").to_string(),
            work_items: num(l, "work_items"),
            work_items_per_s: num(l, "work_items_per_s"),
            insts_per_s: num(l, "insts_per_s"),
        })
        .collect())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let no_peers = args.iter().any(|a| a == "--no-peers");
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    let (saxpy_n, reduce_n, sgemm_n) = if quick {
        (1 << 16, 1 << 14, 32)
    } else {
        (1 << 20, 1 << 18, 128)
    };

    type Bench = fn(u32, usize, bool) -> Ours;
    // `wave_reduce` has no Oclgrind counterpart (Oclgrind 21.10 has no sub-groups).
    let cases: [(&str, u32, Bench); 4] = [
        ("saxpy", saxpy_n, bench_saxpy),
        ("reduce", reduce_n, bench_reduce),
        ("wave_reduce", reduce_n, bench_wave_reduce),
        ("sgemm", sgemm_n, bench_sgemm),
    ];
    // Ours and Oclgrind's run kernel by kernel, interleaved, so that load from other work on
    // the machine skews both sides alike.
    let mut ours = Vec::new();
    let mut peer_records: Vec<Peer> = Vec::new();
    let mut peer_error = None;
    for (name, n, f) in cases {
        let on = f(n, reps, true);
        let off = f(n, reps, false);
        ours.push((name, n, on, off));
        if !no_peers && peer_error.is_none() && name != "wave_reduce" {
            match peers(reps, name, n) {
                Ok(mut p) => peer_records.append(&mut p),
                Err(e) => peer_error = Some(e),
            }
        }
    }

    println!("interp: {reps} repetition(s), median wall time of one launch (compile included)");
    println!(
        "{:<12} {:>8} {:>7} {:>10} {:>9} {:>12} {:>12}",
        "kernel", "n", "checks", "time (s)", "Msteps/s", "Mitems/s", "steps/item"
    );
    for (name, n, on, off) in &ours {
        for (label, r) in [("on", on), ("off", off)] {
            println!(
                "{:<12} {:>8} {:>7} {:>10.4} {:>9.1} {:>12.3} {:>12.1}",
                name,
                n,
                label,
                r.secs,
                r.steps as f64 / r.secs / 1e6,
                r.work_items as f64 / r.secs / 1e6,
                r.steps as f64 / r.work_items as f64
            );
        }
    }
    if no_peers {
        return;
    }
    if let Some(e) = peer_error {
        println!("\nOclgrind: not measured ({e})");
        return;
    }
    let peers = peer_records;
    println!("\nvs Oclgrind 21.10, one thread (oclgrind_bench.py; its time = work-items / rate)");
    println!(
        "{:<8} {:<20} {:>9} {:>9} {:>11} {:>11} {:>10} {:>10} {:>8}",
        "kernel",
        "ours / oclgrind",
        "ours s",
        "ocl s",
        "ours kit/s",
        "ocl kit/s",
        "ours Mst/s",
        "ocl Min/s",
        "time x"
    );
    for (name, _, on, off) in &ours {
        if *name == "wave_reduce" {
            continue;
        }
        for (r, mode, label) in [
            (off, "default", "off / default"),
            (on, "races+uninit", "on / races+uninit"),
        ] {
            let Some(p) = peers.iter().find(|p| p.kernel == *name && p.checks == mode) else {
                println!("{name:<8} {label:<20} (no Oclgrind record)");
                continue;
            };
            let ocl_secs = p.work_items / p.work_items_per_s;
            println!(
                "{:<8} {:<20} {:>9.4} {:>9.3} {:>11.1} {:>11.2} {:>10.1} {:>10.2} {:>8.4}",
                name,
                label,
                r.secs,
                ocl_secs,
                r.work_items as f64 / r.secs / 1e3,
                p.work_items_per_s / 1e3,
                r.steps as f64 / r.secs / 1e6,
                p.insts_per_s / 1e6,
                r.secs / ocl_secs
            );
        }
    }
    println!("(time x = ours / Oclgrind, below 1: the interpreter is faster; kit/s = thousand work-items per second; Mst/s = million bytecode steps, Min/s = million LLVM IR instructions per second)");
}
