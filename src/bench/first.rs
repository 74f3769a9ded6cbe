//! `xpu bench first-result`: the time from a kernel's IR, built in Rust with
//! [`crate::ir::builder`], to its first result downloaded, over many distinct small kernels
//! (issue 21, "first result in a millisecond").
//!
//! Each kernel `first_K` computes `y[i] = x[i] * a + K` for its own constant `K`, so no two
//! share code or a cache entry. One sample is: verify the module, load it, get the kernel,
//! upload `x` and `y`, launch one block of 64 work-items over 64 elements, download `y` and
//! check it. The device is opened once, outside the samples. Percentiles are over the
//! samples; on CUDA a second process with the same `XPU_CACHE_DIR` measures the warm disk
//! cache (the first one, with an empty folder, the cold path).

use crate::hal::Backend;
use crate::ir::builder::ModuleBuilder;
use crate::ir::{Access, Dim, Scalar, Type, VerifiedModule};
use crate::runtime::device::Device;
use crate::runtime::stream::KernelStream;
use crate::Launch;
use std::time::{Duration, Instant};

/// Elements (and work-items) of one sample's launch.
pub const ELEMS: usize = 64;

/// The kernel `first_{k}`: `y[i] = x[i] * a + k` for `i < n`, built with the IR builder.
pub fn kernel_module(k: u32) -> crate::ir::Module {
    let mut mb = ModuleBuilder::new();
    mb.kernel(&format!("first_{k}"), |f| {
        let y = f.buffer("y", Scalar::F32, Access::ReadWrite);
        let x = f.buffer("x", Scalar::F32, Access::Read);
        let a = f.param("a", Type::F32);
        let n = f.param("n", Type::U32);
        let gid = f.global_id(Dim::X);
        let i = f.let_("i", Type::U32, gid);
        let (iv, nv) = (f.get(i), f.param_value(n));
        let in_range = f.lt(iv, nv);
        f.if_then(in_range, |f| {
            let av = f.param_value(a);
            let iv = f.get(i);
            let xi = f.index(x, iv);
            let ax = f.mul(xi, av);
            let kv = f.f32(k as f32);
            let sum = f.add(ax, kv);
            let iv = f.get(i);
            f.store(y, iv, sum);
        });
    });
    mb.finish()
}

/// The percentiles of one backend's samples.
#[derive(Clone, Debug, PartialEq)]
pub struct FirstResult {
    /// The backend measured.
    pub backend: Backend,
    /// Samples taken (distinct kernels).
    pub kernels: usize,
    /// The median sample.
    pub p50: Duration,
    /// The 99th-percentile sample.
    pub p99: Duration,
    /// The slowest sample.
    pub max: Duration,
    /// Lowerings the programs made in all (CPU: Cranelift compiles; `None` where the backend
    /// does not count them).
    pub lowerings: Option<u64>,
}

/// The value at quantile `q` (0..=1) of sorted `v`, nearest rank.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// One sample: `module` (unverified) to its first result downloaded and checked.
fn sample(
    device: &Device,
    stream: &KernelStream,
    k: u32,
    module: crate::ir::Module,
) -> Result<(Duration, Option<u64>), String> {
    let x: Vec<f32> = (0..ELEMS).map(|i| i as f32).collect();
    let t = Instant::now();
    let verified: VerifiedModule = module
        .verify()
        .map_err(|e| format!("first_{k} does not verify: {e:?}"))?;
    let program = device.load(verified).map_err(|e| e.to_string())?;
    let kernel = program
        .kernel(&format!("first_{k}"))
        .map_err(|e| e.to_string())?;
    let mut y = device
        .upload(&vec![0f32; ELEMS])
        .map_err(|e| e.to_string())?;
    let xb = device.upload(&x).map_err(|e| e.to_string())?;
    kernel
        .launch(
            stream,
            Launch::grid([1]).block([ELEMS as u32]),
            crate::args![&mut y, &xb, 2.0f32, ELEMS as u32],
        )
        .map_err(|e| e.to_string())?;
    let out = y.download().map_err(|e| e.to_string())?;
    let took = t.elapsed();
    for (i, v) in out.iter().enumerate() {
        let want = i as f32 * 2.0 + k as f32;
        if *v != want {
            return Err(format!("first_{k}: y[{i}] = {v}, want {want}"));
        }
    }
    Ok((took, program.lowerings()))
}

/// Runs `kernels` samples (kernels `first_{offset}..`) on `device`; the first one, which pays
/// the process's one-time costs (the JIT's and the driver's first use), is excluded when
/// `skip_first`.
pub fn measure(
    device: &Device,
    kernels: usize,
    offset: u32,
    skip_first: bool,
) -> Result<FirstResult, String> {
    let stream = KernelStream::create(device).map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(kernels);
    let mut lowerings: Option<u64> = Some(0);
    if skip_first {
        sample(device, &stream, u32::MAX, kernel_module(u32::MAX))?;
    }
    for k in 0..kernels as u32 {
        let id = offset + k;
        let (t, l) = sample(device, &stream, id, kernel_module(id))?;
        times.push(t);
        lowerings = match (lowerings, l) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    times.sort();
    Ok(FirstResult {
        backend: device.backend(),
        kernels,
        p50: quantile(&times, 0.5),
        p99: quantile(&times, 0.99),
        max: *times.last().unwrap_or(&Duration::ZERO),
        lowerings,
    })
}

/// `xpu bench first-result [--backend B] [--kernels N] [--offset K] [--json]`: prints p50 and
/// p99 per backend (default: interp and cpu, and cuda where present).
pub fn run(
    backends: &[Backend],
    kernels: usize,
    offset: u32,
    json: bool,
) -> std::process::ExitCode {
    let mut rows = Vec::new();
    let mut failed = false;
    for &b in backends {
        let device = match Device::open(b) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("xpu bench first-result: {}: {e}", b.name());
                failed = true;
                continue;
            }
        };
        match measure(&device, kernels, offset, true) {
            Ok(r) => rows.push(r),
            Err(e) => {
                eprintln!("xpu bench first-result: {}: {e}", b.name());
                failed = true;
            }
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"backend\": \"{}\", \"kernels\": {}, \"p50_ms\": {:.4}, \"p99_ms\": {:.4}, \"max_ms\": {:.4}, \"lowerings\": {}}}",
                    r.backend.name(),
                    r.kernels,
                    ms(r.p50),
                    ms(r.p99),
                    ms(r.max),
                    r.lowerings.map_or("null".into(), |l| l.to_string())
                )
            })
            .collect();
        println!("[{}]", items.join(",\n "));
    } else {
        println!(
            "first result: IR built in Rust -> verify, load, kernel, upload, launch, download ({} distinct kernels, {ELEMS} elements)",
            kernels
        );
        println!(
            "{:<8} {:>10} {:>10} {:>10} {:>10}",
            "backend", "p50 ms", "p99 ms", "max ms", "lowerings"
        );
        for r in &rows {
            println!(
                "{:<8} {:>10.3} {:>10.3} {:>10.3} {:>10}",
                r.backend.name(),
                ms(r.p50),
                ms(r.p99),
                ms(r.max),
                r.lowerings.map_or("-".into(), |l| l.to_string())
            );
        }
    }
    if failed {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=200).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(100));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(198));
        assert_eq!(quantile(&v[..1], 0.99), Duration::from_millis(1));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
