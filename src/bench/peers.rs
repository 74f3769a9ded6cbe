//! The C + OpenMP peers of the CPU benchmarks (issue 21): STREAM copy, triad and saxpy
//! (`benches/peers/stream/stream.c`, with and without non-temporal stores) and the compute
//! kernels (`benches/peers/omp/compute.c`: sgemm with the same tiling, the wave reduction,
//! Mandelbrot), built from the sources compiled into this binary with
//! `gcc -O3 -march=native -fopenmp` and run on the threads xpu uses (`OMP_NUM_THREADS`,
//! `OMP_PROC_BIND=close`).
//!
//! Nothing here is found on `PATH` but `gcc` (or `$CC`): where it is missing every peer is
//! `Err` with the reason, and the benchmark prints the column empty.

use std::path::PathBuf;
use std::process::Command;

/// The STREAM peer's source.
pub const STREAM_C: &str = include_str!("../../benches/peers/stream/stream.c");
/// The compute peers' source.
pub const COMPUTE_C: &str = include_str!("../../benches/peers/omp/compute.c");

/// One figure of a peer: a JSON line of its output.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerFigure {
    /// The kernel's name as the peer prints it.
    pub kernel: String,
    /// STREAM: whether the stores were non-temporal.
    pub nt: Option<bool>,
    /// The rate in the kernel's unit (GB/s, GFLOP/s or Mpixel/s).
    pub rate: f64,
    /// The median time of one run, in seconds.
    pub median_s: f64,
    /// Threads the peer ran on.
    pub threads: u64,
}

/// The C compiler the peers are built with: `$CC`, else `gcc`.
fn cc() -> String {
    crate::config::get()
        .cc
        .clone()
        .unwrap_or_else(|| "gcc".into())
}

/// Builds `source` as `name` (cached by a hash of the source and compiler in the temporary
/// folder) and returns the executable.
pub fn build(name: &str, source: &str) -> Result<PathBuf, String> {
    let cc = cc();
    let hash = crate::codegen::cpu::fnv1a(format!("{cc}\n{source}").as_bytes());
    let dir = std::env::temp_dir().join(format!("xpu-peers-{hash:016x}"));
    let exe = dir.join(name);
    if exe.is_file() {
        return Ok(exe);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    // Built under a temporary name and renamed: a concurrent run never sees half a binary.
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let out = Command::new(&cc)
        .args(["-O3", "-march=native", "-fopenmp", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cc} -O3 -march=native -fopenmp {name}.c failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ));
    }
    std::fs::rename(&tmp, &exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    Ok(exe)
}

/// Parses the peers' JSON lines (unparseable lines are skipped).
pub fn parse_figures(stdout: &str) -> Vec<PeerFigure> {
    stdout
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let rate = ["gbps", "gflops", "mpixels"]
                .iter()
                .find_map(|k| v.get(*k)?.as_f64())?;
            Some(PeerFigure {
                kernel: v.get("kernel")?.as_str()?.to_string(),
                nt: v.get("nt").and_then(|b| b.as_bool()),
                rate,
                median_s: v.get("median_s")?.as_f64()?,
                threads: v.get("threads").and_then(|t| t.as_u64()).unwrap_or(0),
            })
        })
        .collect()
}

fn run(exe: &PathBuf, args: &[String], threads: usize) -> Result<Vec<PeerFigure>, String> {
    let out = Command::new(exe)
        .args(args)
        .env("OMP_NUM_THREADS", threads.max(1).to_string())
        .env("OMP_PROC_BIND", "close")
        .env("OMP_PLACES", "cores")
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} exited {}: {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse_figures(&String::from_utf8_lossy(&out.stdout)))
}

/// STREAM copy, triad and saxpy over `n` floats per array on `threads` threads: one figure
/// per kernel and store kind (GB/s as STREAM counts them: 8, 12 and 12 bytes per element).
pub fn stream(n: usize, reps: usize, threads: usize) -> Result<Vec<PeerFigure>, String> {
    let exe = build("stream", STREAM_C)?;
    run(&exe, &[n.to_string(), reps.to_string()], threads)
}

/// The best STREAM figure of `kernel` in `figures` (plain or non-temporal stores).
pub fn best(figures: &[PeerFigure], kernel: &str) -> Option<f64> {
    figures
        .iter()
        .filter(|f| f.kernel == kernel)
        .map(|f| f.rate)
        .max_by(f64::total_cmp)
}

/// The gcc peer of `kernel` (`sgemm` at `size`³ in GFLOP/s, `wave_reduce` over `size` floats
/// in waves of `wave` in GB/s, `mandelbrot` at `size`² in Mpixel/s).
pub fn gcc(
    kernel: &str,
    size: usize,
    reps: usize,
    threads: usize,
    wave: u32,
) -> Result<f64, String> {
    let exe = build("compute", COMPUTE_C)?;
    let figs = run(
        &exe,
        &[
            kernel.to_string(),
            size.to_string(),
            reps.to_string(),
            wave.to_string(),
        ],
        threads,
    )?;
    figs.first()
        .map(|f| f.rate)
        .ok_or_else(|| format!("the {kernel} peer printed no figure"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse_and_the_best_store_kind_wins() {
        let out = "{\"peer\": \"stream\", \"kernel\": \"triad\", \"nt\": false, \"n\": 8, \"threads\": 2, \"median_s\": 0.5, \"gbps\": 10.0}\n\
                   noise\n\
                   {\"peer\": \"stream\", \"kernel\": \"triad\", \"nt\": true, \"n\": 8, \"threads\": 2, \"median_s\": 0.4, \"gbps\": 12.5}\n\
                   {\"peer\": \"gcc\", \"kernel\": \"sgemm\", \"n\": 64, \"threads\": 2, \"median_s\": 0.1, \"gflops\": 3.0}\n";
        let f = parse_figures(out);
        assert_eq!(f.len(), 3);
        assert_eq!(f[1].nt, Some(true));
        assert_eq!(f[2].nt, None);
        assert_eq!(best(&f, "triad"), Some(12.5));
        assert_eq!(best(&f, "sgemm"), Some(3.0));
        assert_eq!(best(&f, "copy"), None);
    }
}
