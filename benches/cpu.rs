//! CPU backend throughput, with peers measured in the same run.
//!
//! `cargo bench --bench cpu` runs, through the public API on `Backend::Cpu`:
//! - STREAM triad `a = b + s*c` and saxpy on 64M floats, against STREAM itself in C with
//!   OpenMP on the same threads (`benches/peers/stream/stream.c`, built here with
//!   `gcc -O3 -march=native -fopenmp`; the best of plain and non-temporal stores: the `STREAM`
//!   column) and the same loops in Rust with rayon;
//! - a 16×16-tiled SGEMM at 1024³ (shared memory, barriers);
//! - a wave reduction (`wave_reduce_sum`, one partial per wave) over 64M floats;
//! - mandelbrot 2048×2048, 256 iterations;
//!
//! the compute kernels beside the same kernels in C with OpenMP built by gcc
//! (`benches/peers/omp/compute.c`, the `gcc` column), and then `benches/peers/pocl_bench.py` (PoCL 3.1's CPU device through pyopencl) on the same
//! kernels and sizes, if it runs here, and prints a ratio table, plus our JIT compile time
//! against PoCL's build time. Medians over `--reps` runs after one warm-up.
//!
//! Options (after `--`): `--quick` (sizes / 16, sgemm 256, mandelbrot 512², 2 reps),
//! `--reps N` (5), `--threads N` (our worker cap and PoCL's; default all cores),
//! `--no-peers` (skip PoCL), `--only K1,K2` (only these kernels: triad, saxpy, sgemm,
//! wave_reduce, mandelbrot), `--block N` (work-items per workgroup of triad and saxpy; 256),
//! `--elements N` (of triad's and saxpy's arrays; 64M).

use std::process::Command;
use std::time::{Duration, Instant};
use xpu::{args, Backend, Device, KernelStream, Launch};

struct Opts {
    quick: bool,
    reps: usize,
    threads: Option<usize>,
    peers: bool,
    /// Kernels to run (`--only triad,saxpy`); empty: all.
    only: Vec<String>,
    /// Work-items per workgroup of the streaming kernels (`--block N`).
    block: u32,
    /// Elements of triad's and saxpy's arrays (`--elements N`).
    elements: Option<usize>,
}

impl Opts {
    fn runs(&self, kernel: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|k| k == kernel)
    }
}

fn opts() -> Opts {
    let mut o = Opts {
        quick: false,
        reps: 5,
        threads: None,
        peers: true,
        only: Vec::new(),
        block: 256,
        elements: None,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => o.quick = true,
            "--no-peers" => o.peers = false,
            "--reps" => {
                i += 1;
                o.reps = args.get(i).and_then(|s| s.parse().ok()).unwrap_or(5);
            }
            "--only" => {
                i += 1;
                o.only = args
                    .get(i)
                    .map(|s| s.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
            }
            "--block" => {
                i += 1;
                o.block = args.get(i).and_then(|s| s.parse().ok()).unwrap_or(256);
            }
            "--elements" => {
                i += 1;
                o.elements = args.get(i).and_then(|s| s.parse().ok());
            }
            "--threads" => {
                i += 1;
                o.threads = args.get(i).and_then(|s| s.parse().ok());
            }
            _ => {}
        }
        i += 1;
    }
    if o.quick {
        o.reps = o.reps.min(2);
    }
    o
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One warm-up, then the median of `reps` timings.
fn time(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    median(
        (0..reps.max(1))
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// One warm-up of each, then `reps` rounds that time `f` and `g` back to back, so that a
/// machine whose load changes during the run slows both alike; the medians of each.
fn time_pair(reps: usize, mut f: impl FnMut(), mut g: impl FnMut()) -> (Duration, Duration) {
    f();
    g();
    let (mut tf, mut tg) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f();
        tf.push(t.elapsed());
        let t = Instant::now();
        g();
        tg.push(t.elapsed());
    }
    (median(tf), median(tg))
}

struct Row {
    name: &'static str,
    unit: &'static str,
    ours: f64,
    compile_ms: f64,
    stream: Option<f64>,
    gcc: Option<f64>,
    rayon: Option<f64>,
    pocl: Option<f64>,
    pocl_build_ms: Option<f64>,
}

/// The kernels, the same text `xpu bench cpu` runs.
use xpu::bench::suite::CPU_KERNELS;

fn load(cpu: &Device, src: &str, name: &str) -> (xpu::Kernel, f64) {
    let m = xpu::ir::parse(src)
        .expect("parse")
        .verify()
        .expect("verify");
    let p = cpu.load(m).expect("load");
    let t = Instant::now();
    let k = p.kernel(name).expect("kernel");
    (k, t.elapsed().as_secs_f64() * 1e3)
}

fn main() {
    let o = opts();
    if let Some(t) = o.threads {
        std::env::set_var("CAJETA_XPU_CPU_WORKERS", t.to_string());
    }
    let threads = o.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if let Some(t) = o.threads {
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global();
    }
    let cpu = Device::open(Backend::Cpu).expect("the cpu backend");
    let stream = KernelStream::current(&cpu);
    let stream_n: usize = o
        .elements
        .unwrap_or(if o.quick { 4 << 20 } else { 64 << 20 });
    let sgemm_n: u32 = if o.quick { 256 } else { 1024 };
    let (mw, mh) = if o.quick {
        (512u32, 512u32)
    } else {
        (2048, 2048)
    };
    let max_iter = 256u32;
    let mut rows = Vec::new();
    println!(
        "xpu cpu backend: wave {}, {} worker threads, {} reps",
        cpu.facts().wave_width.unwrap_or(0),
        threads,
        o.reps
    );

    // STREAM in C + OpenMP on the same threads: the bandwidth limit.
    let stream_figs = match xpu::bench::peers::stream(stream_n, o.reps, threads) {
        Ok(f) => f,
        Err(e) => {
            println!("STREAM peer not run: {e}");
            Vec::new()
        }
    };
    for f in &stream_figs {
        println!(
            "STREAM {} ({} stores): {:.2} GB/s",
            f.kernel,
            if f.nt == Some(true) {
                "non-temporal"
            } else {
                "plain"
            },
            f.rate
        );
    }
    let stream_best = |k: &str| xpu::bench::peers::best(&stream_figs, k);
    let wave = cpu.facts().wave_width.unwrap_or(1);
    let gcc = |k: &str, size: usize| match xpu::bench::peers::gcc(k, size, o.reps, threads, wave) {
        Ok(v) => Some(v),
        Err(e) => {
            println!("gcc peer of {k} not run: {e}");
            None
        }
    };

    // STREAM triad: 3 arrays of 4 bytes move per element.
    if o.runs("triad") {
        let n = stream_n as u32;
        let (k, compile_ms) = load(&cpu, CPU_KERNELS, "triad");
        let b = cpu.upload(&vec![1.0f32; stream_n]).unwrap();
        let c = cpu.upload(&vec![2.0f32; stream_n]).unwrap();
        let mut a = cpu.upload(&vec![0.0f32; stream_n]).unwrap();
        let groups = n.div_ceil(o.block);
        let hb = vec![1.0f32; stream_n];
        let hc = vec![2.0f32; stream_n];
        let mut ha = vec![0.0f32; stream_n];
        let (t, tr) = time_pair(
            o.reps,
            || {
                k.launch(
                    &stream,
                    Launch::grid([groups]).block([o.block]),
                    args![n, 3.0f32, &mut a, &b, &c],
                )
                .unwrap()
            },
            || {
                use rayon::prelude::*;
                ha.par_iter_mut()
                    .zip(hb.par_iter().zip(hc.par_iter()))
                    .for_each(|(a, (b, c))| *a = b + 3.0 * c);
            },
        );
        let got = a.download().unwrap();
        assert!(got.iter().all(|&x| x == 7.0), "triad result");
        let ours = (stream_n * 12) as f64 / t.as_secs_f64() / 1e9;
        rows.push(Row {
            name: "triad",
            unit: "GB/s",
            ours,
            compile_ms,
            stream: stream_best("triad"),
            gcc: None,
            rayon: Some((stream_n * 12) as f64 / tr.as_secs_f64() / 1e9),
            pocl: None,
            pocl_build_ms: None,
        });
    }

    // saxpy: 12 bytes per element.
    if o.runs("saxpy") {
        let n = stream_n as u32;
        let (k, compile_ms) = load(&cpu, CPU_KERNELS, "saxpy");
        let x = cpu.upload(&vec![1.0f32; stream_n]).unwrap();
        let mut y = cpu.upload(&vec![0.0f32; stream_n]).unwrap();
        let groups = n.div_ceil(o.block);
        let hx = vec![1.0f32; stream_n];
        let mut hy = vec![0.0f32; stream_n];
        let (t, tr) = time_pair(
            o.reps,
            || {
                k.launch(
                    &stream,
                    Launch::grid([groups]).block([o.block]),
                    args![n, 2.0f32, &x, &mut y],
                )
                .unwrap()
            },
            || {
                use rayon::prelude::*;
                hy.par_iter_mut()
                    .zip(hx.par_iter())
                    .for_each(|(y, x)| *y += 2.0 * x);
            },
        );
        let ours = (stream_n * 12) as f64 / t.as_secs_f64() / 1e9;
        rows.push(Row {
            name: "saxpy",
            unit: "GB/s",
            ours,
            compile_ms,
            stream: stream_best("saxpy"),
            gcc: None,
            rayon: Some((stream_n * 12) as f64 / tr.as_secs_f64() / 1e9),
            pocl: None,
            pocl_build_ms: None,
        });
    }

    // SGEMM: 2 n³ flops.
    if o.runs("sgemm") {
        let n = sgemm_n;
        let nn = (n * n) as usize;
        let (k, compile_ms) = load(&cpu, CPU_KERNELS, "sgemm");
        let ha: Vec<f32> = (0..nn).map(|i| (i % 7) as f32 * 0.25).collect();
        let hb: Vec<f32> = (0..nn).map(|i| (i % 5) as f32 * 0.5).collect();
        let a = cpu.upload(&ha).unwrap();
        let b = cpu.upload(&hb).unwrap();
        let mut c = cpu.upload(&vec![0.0f32; nn]).unwrap();
        let t = time(o.reps.min(3), || {
            k.launch(
                &stream,
                Launch::grid([n / 16, n / 16]).block([16, 16]),
                args![n, &a, &b, &mut c],
            )
            .unwrap()
        });
        // Spot-check one element.
        let got = c.download().unwrap();
        let (r, col) = (n as usize / 3, n as usize / 2);
        let want: f32 = (0..n as usize)
            .map(|kk| ha[r * n as usize + kk] * hb[kk * n as usize + col])
            .sum();
        assert!(
            (got[r * n as usize + col] - want).abs() <= want.abs() * 1e-4 + 1e-3,
            "sgemm result"
        );
        rows.push(Row {
            name: "sgemm",
            unit: "GFLOP/s",
            ours: 2.0 * (n as f64).powi(3) / t.as_secs_f64() / 1e9,
            compile_ms,
            stream: None,
            gcc: gcc("sgemm", n as usize),
            rayon: None,
            pocl: None,
            pocl_build_ms: None,
        });
    }

    // Wave reduction: 4 bytes read per element.
    if o.runs("wave_reduce") {
        let n = stream_n as u32;
        let (k, compile_ms) = load(&cpu, CPU_KERNELS, "wave_reduce");
        let wave = k.manifest().built_wave.unwrap_or(1) as usize;
        let inp = cpu.upload(&vec![1.0f32; stream_n]).unwrap();
        let mut partial = cpu.upload(&vec![0.0f32; stream_n.div_ceil(wave)]).unwrap();
        let groups = n.div_ceil(256);
        let t = time(o.reps, || {
            k.launch(
                &stream,
                Launch::grid([groups]).block([256]),
                args![n, &inp, &mut partial],
            )
            .unwrap()
        });
        let total: f64 = partial.download().unwrap().iter().map(|&x| x as f64).sum();
        assert_eq!(total, stream_n as f64, "wave reduction result");
        let hin = vec![1.0f32; stream_n];
        let tr = time(o.reps, || {
            use rayon::prelude::*;
            let s: f32 = hin.par_chunks(1 << 16).map(|c| c.iter().sum::<f32>()).sum();
            std::hint::black_box(s);
        });
        rows.push(Row {
            name: "wave_reduce",
            unit: "GB/s",
            ours: (stream_n * 4) as f64 / t.as_secs_f64() / 1e9,
            compile_ms,
            stream: None,
            gcc: gcc("wave_reduce", stream_n),
            rayon: Some((stream_n * 4) as f64 / tr.as_secs_f64() / 1e9),
            pocl: None,
            pocl_build_ms: None,
        });
    }

    // Mandelbrot: pixels per second (in millions).
    if o.runs("mandelbrot") {
        let (k, compile_ms) = load(&cpu, CPU_KERNELS, "mandelbrot");
        let mut out = cpu.upload(&vec![0u32; (mw * mh) as usize]).unwrap();
        let t = time(o.reps.min(3), || {
            k.launch(
                &stream,
                Launch::grid([mw.div_ceil(16), mh.div_ceil(16)]).block([16, 16]),
                args![mw, mh, max_iter, &mut out],
            )
            .unwrap()
        });
        let img = out.download().unwrap();
        assert_eq!(
            img[((mh / 2) * mw + mw / 4) as usize],
            max_iter,
            "mandelbrot: a point inside the set"
        );
        rows.push(Row {
            name: "mandelbrot",
            unit: "Mpixel/s",
            ours: (mw * mh) as f64 / t.as_secs_f64() / 1e6,
            compile_ms,
            stream: None,
            gcc: gcc("mandelbrot", mw as usize),
            rayon: None,
            pocl: None,
            pocl_build_ms: None,
        });
    }

    if o.peers {
        pocl(&o, &mut rows, stream_n, sgemm_n, mw, mh, max_iter, threads);
    }

    println!();
    println!(
        "{:<12} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "kernel",
        "unit",
        "xpu cpu",
        "STREAM",
        "gcc",
        "rayon",
        "PoCL",
        "/STREAM",
        "/gcc",
        "/rayon",
        "/PoCL",
        "JIT ms",
        "PoCL ms"
    );
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let ratio =
        |ours: f64, peer: Option<f64>| peer.map_or("-".into(), |p| format!("{:.2}x", ours / p));
    for r in &rows {
        println!(
            "{:<12} {:>6} {:>9.2} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>8}",
            r.name,
            r.unit,
            r.ours,
            f(r.stream),
            f(r.gcc),
            f(r.rayon),
            f(r.pocl),
            ratio(r.ours, r.stream),
            ratio(r.ours, r.gcc),
            ratio(r.ours, r.rayon),
            ratio(r.ours, r.pocl),
            r.compile_ms,
            f(r.pocl_build_ms)
        );
    }
}

/// Runs the PoCL peer script and fills in its figures (JSON lines on stdout).
#[allow(clippy::too_many_arguments)]
fn pocl(
    o: &Opts,
    rows: &mut [Row],
    stream_n: usize,
    sgemm_n: u32,
    mw: u32,
    mh: u32,
    max_iter: u32,
    threads: usize,
) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers/pocl_bench.py");
    let out = Command::new("python3")
        .arg(script)
        .args(["--kernels", "triad,saxpy,sgemm,wave_reduce,mandelbrot"])
        .args(["--reps", &o.reps.to_string()])
        .args(["--threads", &threads.to_string()])
        .args(["--stream-n", &stream_n.to_string()])
        .args(["--reduce-n", &stream_n.to_string()])
        .args(["--sgemm-n", &sgemm_n.to_string()])
        .args(["--mandelbrot", &format!("{mw}x{mh}")])
        .args(["--max-iter", &max_iter.to_string()])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            println!("PoCL peer not run: {e}");
            return;
        }
    };
    if !out.status.success() {
        println!(
            "PoCL peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let field = |key: &str| -> Option<f64> {
            let at = line.find(&format!("\"{key}\": "))? + key.len() + 4;
            let rest = &line[at..];
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            rest[..end].trim().trim_matches('"').parse().ok()
        };
        let kernel = line
            .split("\"kernel\": \"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("");
        let Some(row) = rows.iter_mut().find(|r| r.name == kernel) else {
            continue;
        };
        let Some(median) = field("median_s") else {
            continue;
        };
        row.pocl = Some(match kernel {
            "triad" | "saxpy" => (stream_n * 12) as f64 / median / 1e9,
            "wave_reduce" => (stream_n * 4) as f64 / median / 1e9,
            "sgemm" => 2.0 * (sgemm_n as f64).powi(3) / median / 1e9,
            _ => (mw * mh) as f64 / median / 1e6,
        });
        row.pocl_build_ms = field("build_s").map(|s| s * 1e3);
    }
}
