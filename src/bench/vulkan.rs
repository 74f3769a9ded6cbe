//! Streaming benchmarks on the Vulkan device: `saxpy` and STREAM `triad` on `elems` floats,
//! each beside a device-to-device copy (`KernelBuffer::copy_from`: at these sizes the
//! backend's copy kernel) of the same bytes on the same device, and beside the CUDA backend's figure for the same kernel text in the same run when a
//! CUDA device is present. Each figure is the median of `reps` rounds after half a second
//! of warm-up launches (`WARM_UP`), and the first launch is printed beside it; each is
//! read two ways: by `KernelTimer` at the device's tier (Vulkan: timestamp queries, the Event
//! tier, where the queue writes timestamps; CUDA: events), and on the host around the
//! launch and a stream sync (which adds submission and wake-up latency). The device-timed
//! figures are the ones compared; the host-timed ones are printed beside them. Bytes moved:
//! saxpy 12 per element (read x, y; write y), triad 12 (read b, c; write a); the copy of the
//! same bytes moves 2 × its size.

use crate::hal::launch::{ArgValue, Launch};
use crate::hal::{Backend, Init};
use crate::ir::{ElemType, Scalar};
use crate::runtime::buffer::RawBuffer;
use crate::runtime::device::Device;
use crate::runtime::stream::KernelStream;
use crate::runtime::timer::KernelTimer;
use std::time::Instant;

/// The kernels timed, with the bytes each moves per element.
const NAMES: [(&str, f64); 3] = [("saxpy", 12.0), ("triad", 12.0), ("copy", 8.0)];

/// One benchmark's medians, in milliseconds, with the bytes it moves.
#[derive(Clone, Debug)]
pub struct Row {
    /// The benchmark (`saxpy`, `triad`, `copy`).
    pub name: &'static str,
    /// Bytes the kernel moves.
    pub bytes: f64,
    /// Device-timed where the tier allows, else host-timed (see `timed_on_device`).
    pub vulkan_ms: f64,
    /// The host-timed median.
    pub vulkan_host_ms: f64,
    /// The first launch after the pipeline was built, before the warm-up.
    pub vulkan_cold_ms: f64,
    /// The same bytes moved by a device-side buffer copy.
    pub copy_ms: f64,
    /// The CUDA backend's median, where it ran.
    pub cuda_ms: Option<f64>,
    /// Whether `vulkan_ms`/`copy_ms`/`cuda_ms` came from the device clock.
    pub timed_on_device: bool,
}

/// One measured operation: (device-timed median if available, host-timed median), and the
/// first launch's time (device-timed where the tier allows).
#[derive(Clone, Copy, Debug)]
struct Times {
    device: Option<f64>,
    host: f64,
    cold: f64,
}

impl Times {
    fn best(&self) -> f64 {
        self.device.unwrap_or(self.host)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// How long every measured operation runs before its timed rounds. NVIDIA's driver raises the
/// clocks of a process with no CUDA context only after some tenths of a second of Vulkan work:
/// at 256M floats the first ~0.3 s of launches ran at 0.3–0.4× the steady speed on the H200
/// (docs/vulkan-backend.md, Benchmark). The steady figure is the one compared; the first
/// launch is printed beside it.
const WARM_UP: std::time::Duration = std::time::Duration::from_millis(500);

fn timed(
    stream: &KernelStream,
    reps: usize,
    mut f: impl FnMut() -> Result<(), String>,
) -> Result<Times, String> {
    let e = |x: crate::hal::DeviceError| x.to_string();
    // The first launch (module load and pipeline creation are done by then: `kernel()`
    // builds the pipeline), timed on the device where it can be.
    let t0 = Instant::now();
    let timer = KernelTimer::start(stream).map_err(e)?;
    let r = f();
    let timing = timer.stop();
    r?;
    let cold_host = t0.elapsed().as_secs_f64() * 1e3;
    let cold = timing
        .ok()
        .and_then(|t| t.nanos)
        .map_or(cold_host, |ns| ns as f64 / 1e6);
    let warm = Instant::now();
    while warm.elapsed() < WARM_UP {
        f()?;
        stream.sync().map_err(e)?;
    }
    let mut host = Vec::new();
    let mut device = Vec::new();
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        f()?;
        stream.sync().map_err(e)?;
        host.push(t0.elapsed().as_secs_f64() * 1e3);
        // A second, device-timed round (`KernelTimer` at the device's tier).
        let timer = KernelTimer::start(stream).map_err(e)?;
        let r = f();
        let timing = timer.stop();
        r?;
        // A calibration the timer refuses leaves the host figure.
        if let Some(ns) = timing.ok().and_then(|t| t.nanos) {
            device.push(ns as f64 / 1e6);
        }
    }
    Ok(Times {
        device: (device.len() == host.len()).then(|| median(device)),
        host: median(host),
        cold,
    })
}

/// `(kernel, copy of the same bytes)` times (ms) on `device`, one pair per entry of `NAMES`.
fn kernels_on(
    device: &Device,
    elems: usize,
    block: u32,
    reps: usize,
) -> Result<Vec<(Times, Times)>, String> {
    let e = |x: crate::hal::DeviceError| x.to_string();
    let module = crate::ir::parse(crate::bench::data::STREAMING_KERNELS)
        .and_then(|m| m.verify())
        .map_err(|d| d.render("bench"))?;
    let program = device.load(module).map_err(e)?;
    let stream = KernelStream::create(device).map_err(e)?;
    let bytes = elems * 4;
    let mut bufs: Vec<RawBuffer> = (0..3)
        .map(|_| RawBuffer::alloc_with(device, bytes, Init::Any).map_err(e))
        .collect::<Result<_, _>>()?;
    for (i, b) in bufs.iter().enumerate() {
        b.write(&crate::bench::data::random_f32_bytes(elems, i as u64))
            .map_err(e)?;
    }
    let f32e = ElemType::scalar(Scalar::F32);
    let n = elems as u32;
    let grid = n.div_ceil(block);
    let mut out = Vec::new();
    for (name, per_elem) in NAMES {
        let kernel = program.kernel(name).map_err(|x| x.to_string())?;
        let scalar: &[ArgValue] = match name {
            "saxpy" => &[ArgValue::from(2.0f32)],
            "triad" => &[ArgValue::from(3.0f32)],
            _ => &[],
        };
        let inputs = if name == "triad" { 2 } else { 1 };
        let tk = timed(&stream, reps, || {
            let (out, ins) = bufs.split_first_mut().expect("three buffers");
            let mut args = vec![ArgValue::raw_mut(out, f32e)];
            args.extend(ins[..inputs].iter().map(|b| ArgValue::raw(b, f32e)));
            args.extend(scalar.iter().cloned());
            args.push(ArgValue::from(n));
            kernel
                .launch(&stream, Launch::grid([grid]).block([block]), args)
                .map_err(|x| x.to_string())
        })?;
        // The same bytes moved as a copy: a read and a write of half of them.
        let half = (per_elem as usize * elems) / 2;
        let src = RawBuffer::alloc_with(device, half, Init::Any).map_err(e)?;
        let dst = RawBuffer::alloc_with(device, half, Init::Any).map_err(e)?;
        let tc = timed(&stream, reps, || {
            dst.copy_from_async(&stream, &src).map_err(e)
        })?;
        out.push((tk, tc));
    }
    Ok(out)
}

/// The elements a one-dimensional launch of `block`-wide workgroups covers on `device` at
/// most: `elems`, or fewer where the device's grid is smaller (lavapipe allows 65,535
/// workgroups per dimension: 256M floats in blocks of 256 would need 2^20).
pub fn fit_elems(device: &Device, elems: usize, block: u32) -> usize {
    let max_groups = device
        .facts()
        .max_grid_dims
        .map_or(u32::MAX, |d| d[0])
        .max(1) as usize;
    elems.min(max_groups * block.max(1) as usize)
}

/// Measures both benchmarks on the Vulkan device (and on CUDA when present), at `elems` or
/// the most the Vulkan device's grid covers ([`fit_elems`]); the elements measured are
/// returned beside the rows.
pub fn measure(elems: usize, block: u32, reps: usize) -> Result<(String, usize, Vec<Row>), String> {
    let vk = Device::open(Backend::Vulkan).map_err(|e| e.to_string())?;
    let name = vk.facts().name.clone().unwrap_or_else(|| "unnamed".into());
    let elems = fit_elems(&vk, elems, block);
    let v = kernels_on(&vk, elems, block, reps)?;
    drop(vk);
    let cuda = match Device::open(Backend::Cuda) {
        Ok(d) => Some(kernels_on(&d, elems, block, reps)?),
        Err(_) => None,
    };
    // Compare like with like: device clocks only when every side has one.
    let on_device = v
        .iter()
        .all(|(k, c)| k.device.is_some() && c.device.is_some())
        && cuda
            .as_ref()
            .is_none_or(|c| c.iter().all(|(k, _)| k.device.is_some()));
    let pick = |t: &Times| if on_device { t.best() } else { t.host };
    Ok((
        name,
        elems,
        (0..NAMES.len())
            .map(|i| Row {
                name: NAMES[i].0,
                bytes: NAMES[i].1 * elems as f64,
                vulkan_ms: pick(&v[i].0),
                vulkan_host_ms: v[i].0.host,
                vulkan_cold_ms: v[i].0.cold,
                copy_ms: pick(&v[i].1),
                cuda_ms: cuda.as_ref().map(|c| pick(&c[i].0)),
                timed_on_device: on_device,
            })
            .collect(),
    ))
}

/// The measurements as one JSON object (docs/json.md): `backend`, `device`, `elems`,
/// `block`, `reps`, and `rows`, each with the fields of [`Row`] (`cuda_ms` null when absent)
/// and `gbps` (GB/s of `vulkan_ms`).
pub fn json(name: &str, elems: usize, block: u32, reps: usize, rows: &[Row]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "bytes": r.bytes,
                "vulkan_ms": r.vulkan_ms,
                "vulkan_host_ms": r.vulkan_host_ms,
                "vulkan_cold_ms": r.vulkan_cold_ms,
                "copy_ms": r.copy_ms,
                "cuda_ms": r.cuda_ms,
                "timed_on_device": r.timed_on_device,
                "gbps": r.bytes / (r.vulkan_ms * 1e6),
            })
        })
        .collect();
    serde_json::json!({
        "backend": "vulkan",
        "device": name,
        "elems": elems,
        "block": block,
        "reps": reps,
        "rows": rows,
    })
}

/// `xpu bench vulkan`: prints the table (or, with `json`, [`json`]'s object); exit 0, or 2
/// when no Vulkan device runs it.
pub fn run(elems: usize, block: u32, reps: usize, json_out: bool) -> std::process::ExitCode {
    match measure(elems, block, reps) {
        Ok((name, measured, rows)) if json_out => {
            println!("{}", json(&name, measured, block, reps, &rows));
            std::process::ExitCode::SUCCESS
        }
        Ok((name, measured, rows)) => {
            if measured < elems {
                println!(
                    "{elems} floats need more workgroups than the device's grid allows: \
                     measured at {measured}"
                );
            }
            let elems = measured;
            let how = if rows.iter().all(|r| r.timed_on_device) {
                "device-timed (timestamp queries / CUDA events)"
            } else {
                "host-timed (launch + stream sync)"
            };
            println!(
                "xpu bench vulkan on {name}: {elems} floats, blocks of {block}, median of {reps} \
                 rounds, {how}"
            );
            println!(
                "{:<8} {:>10} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9}",
                "kernel",
                "vulkan ms",
                "GB/s",
                "host ms",
                "cold ms",
                "copy ms",
                "vk/copy",
                "cuda ms",
                "vk/cuda"
            );
            for r in rows {
                let gbs = r.bytes / (r.vulkan_ms * 1e6);
                let cuda = r
                    .cuda_ms
                    .map_or(("absent".to_string(), "absent".to_string()), |c| {
                        (format!("{c:.3}"), format!("{:.2}", r.vulkan_ms / c))
                    });
                println!(
                    "{:<8} {:>10.3} {:>9.1} {:>10.3} {:>10.3} {:>10.3} {:>9.2} {:>10} {:>9}",
                    r.name,
                    r.vulkan_ms,
                    gbs,
                    r.vulkan_host_ms,
                    r.vulkan_cold_ms,
                    r.copy_ms,
                    r.vulkan_ms / r.copy_ms,
                    cuda.0,
                    cuda.1
                );
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            if json_out {
                println!(
                    "{}",
                    serde_json::json!({"backend": "vulkan", "error": e.to_string()})
                );
            }
            eprintln!("xpu bench vulkan: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
