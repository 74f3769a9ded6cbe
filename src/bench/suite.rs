//! `xpu bench cpu|vulkan|all [--json] [--plot FILE.svg]` (issue 21): every backend present,
//! each launch fitted to its device's limits, with the peers that are the limit measured in
//! the same run, printed as a ratio table, as JSON, and drawn on each device's roofline.
//!
//! - **CPU**: triad and saxpy against STREAM's best (C + OpenMP, plain or non-temporal stores,
//!   [`super::peers`]) on the same threads; sgemm (16×16 tiles), the wave reduction and
//!   Mandelbrot against the same kernels in C with OpenMP built by gcc.
//! - **Vulkan**: saxpy, triad and copy against a device-to-device copy of the same bytes
//!   ([`super::vulkan`]; the grid fitted to the device, lavapipe's 65,535 workgroups).
//!
//! The roofline's ceilings are the device's calibration (`xpu calibrate`: copy bandwidth and
//! f32 peak) where one is stored, else the measured peers (the best STREAM figure, the copy).

use crate::hal::Backend;
use crate::runtime::device::Device;
use crate::runtime::stream::KernelStream;
use crate::Launch;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// One kernel's figure beside its peer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The kernel's name (`triad`, `gemm`, ...).
    pub kernel: String,
    /// The unit of `value` and `peer` (`GB/s`, `GFLOP/s`, `Mpixel/s`).
    pub unit: String,
    /// The kernel's rate, in `unit`.
    pub value: f64,
    /// The peer's name (`STREAM`, `gcc`, `copy`) and figure, where it ran.
    pub peer_name: String,
    /// The peer's rate, in `unit`, where the peer ran.
    pub peer: Option<f64>,
    /// Why the peer is absent.
    pub peer_error: Option<String>,
    /// Floating-point operations and bytes moved per second (the roofline's axes: intensity
    /// is their ratio), where the kernel's are counted.
    pub gflops: Option<f64>,
    /// Bytes moved per second (GB/s).
    pub gbps: Option<f64>,
}

impl Entry {
    /// `value / peer`.
    pub fn ratio(&self) -> Option<f64> {
        self.peer.filter(|p| *p > 0.0).map(|p| self.value / p)
    }
}

/// One device's figures and ceilings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The backend's name.
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// Worker threads (CPU) or absent.
    pub threads: Option<usize>,
    /// The memory bandwidth ceiling, GB/s.
    pub bandwidth_gbps: Option<f64>,
    /// The compute ceiling, GFLOP/s.
    pub peak_gflops: Option<f64>,
    /// Where the ceilings came from (`calibration`, `measured peers`).
    pub ceilings_from: String,
    /// One figure per kernel.
    pub entries: Vec<Entry>,
    /// Notes (a size fitted to the device, a peer not run).
    pub notes: Vec<String>,
}

/// The sizes measured.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Floats per array of the streaming kernels.
    pub elems: usize,
    /// The side of the square GEMM matrices (rounded down to a multiple of 16).
    pub gemm: u32,
    /// Mandelbrot's width and height.
    pub image: u32,
    /// Work-items per block of the streaming kernels.
    pub block: u32,
    /// Timed repetitions per figure (the median is reported).
    pub reps: usize,
}

impl Sizes {
    /// The sizes of `--quick`: every figure in well under a second on a small machine.
    pub fn quick() -> Sizes {
        Sizes {
            elems: 1 << 20,
            gemm: 128,
            image: 128,
            block: 256,
            reps: 2,
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One warm-up, then the median of `reps` timings.
fn time(reps: usize, mut f: impl FnMut() -> Result<(), String>) -> Result<Duration, String> {
    f()?;
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(median(v))
}

/// The CPU benchmark's kernels (triad, saxpy, a 16×16-tiled sgemm, the wave reduction,
/// Mandelbrot), shared with `benches/cpu.rs`.
pub const CPU_KERNELS: &str = r#"
kernel triad(n: u32, s: f32, a: buf<f32, rw>, b: buf<f32>, c: buf<f32>) {
    let i: u32 = global_id.x;
    if i < n {
        a[i] = b[i] + s * c[i];
    }
}

kernel saxpy(n: u32, a: f32, x: buf<f32>, y: buf<f32, rw>) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}

kernel sgemm(n: u32, a: buf<f32>, b: buf<f32>, c: buf<f32, rw>) {
    shared ta: [f32; 256];
    shared tb: [f32; 256];
    let tx: u32 = local_id.x;
    let ty: u32 = local_id.y;
    let row: u32 = group_id.y * 16 + ty;
    let col: u32 = group_id.x * 16 + tx;
    let acc: f32 = 0.0;
    for t: u32 in 0..n / 16 {
        ta[ty * 16 + tx] = a[row * n + t * 16 + tx];
        tb[ty * 16 + tx] = b[(t * 16 + ty) * n + col];
        barrier();
        for k: u32 in 0..16 {
            acc = acc + ta[ty * 16 + k] * tb[k * 16 + tx];
        }
        barrier();
    }
    c[row * n + col] = acc;
}

kernel wave_reduce(n: u32, inp: buf<f32>, partial: buf<f32, rw>) {
    let i: u32 = global_id.x;
    let v: f32 = 0.0;
    if i < n {
        v = inp[i];
    }
    let s: f32 = wave_reduce_sum(v);
    if lane_id == 0 {
        partial[i / wave_width] = s;
    }
}

kernel mandelbrot(width: u32, height: u32, max_iter: u32, out: buf<u32, rw>) {
    let px: u32 = global_id.x;
    let py: u32 = global_id.y;
    if px < width && py < height {
        let cr: f32 = -2.0 + 3.0 * (px as f32) / (width as f32);
        let ci: f32 = -1.5 + 3.0 * (py as f32) / (height as f32);
        let zr: f32 = 0.0;
        let zi: f32 = 0.0;
        let it: u32 = 0;
        while it < max_iter && zr * zr + zi * zi <= 4.0 {
            let t: f32 = zr * zr - zi * zi + cr;
            zi = 2.0 * zr * zi + ci;
            zr = t;
            it += 1;
        }
        out[py * width + px] = it;
    }
}
"#;

/// The calibration's ceilings of `device` where one is stored: (GB/s, GFLOP/s).
fn calibrated(device: &Device) -> Option<(Option<f64>, Option<f64>)> {
    let (cal, _) = crate::tune::calibration::DeviceCalibration::current(device);
    let cal = cal?;
    Some((cal.copy_gbps_idle, cal.peak_flops.map(|f| f / 1e9)))
}

/// Measures the CPU backend and its peers.
pub fn cpu(sizes: Sizes) -> Result<DeviceReport, String> {
    let e = |x: crate::hal::DeviceError| x.to_string();
    let l = |x: crate::LaunchError| x.to_string();
    let device = Device::open(Backend::Cpu).map_err(e)?;
    let any: &dyn std::any::Any = device.implementation().as_ref();
    let threads = any
        .downcast_ref::<crate::backend::cpu::CpuDevice>()
        .map_or(1, |d| d.worker_cap());
    let wave = device.facts().wave_width.unwrap_or(1);
    let module = crate::ir::parse(CPU_KERNELS)
        .and_then(|m| m.verify())
        .map_err(|d| d.render("bench"))?;
    let program = device.load(module).map_err(e)?;
    let stream = KernelStream::current(&device);
    let reps = sizes.reps;
    let n = sizes.elems;
    let mut notes = Vec::new();
    let mut entries = Vec::new();
    let stream_peer = super::peers::stream(n, reps, threads);
    if let Err(err) = &stream_peer {
        notes.push(format!("STREAM peer not run: {err}"));
    }
    let stream_best = |k: &str| -> (Option<f64>, Option<String>) {
        match &stream_peer {
            Ok(f) => (super::peers::best(f, k), None),
            Err(err) => (None, Some(err.clone())),
        }
    };
    let groups = (n as u32).div_ceil(sizes.block);
    let geometry = Launch::grid([groups]).block([sizes.block]);
    let data = |seed| {
        let b = super::data::random_f32_bytes(n, seed);
        b.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect::<Vec<f32>>()
    };
    // Triad and saxpy: 12 bytes per element, 2 flops.
    {
        let k = program.kernel("triad").map_err(l)?;
        let (b, c) = (
            device.upload(&data(1)).map_err(e)?,
            device.upload(&data(2)).map_err(e)?,
        );
        let mut a = device.upload(&vec![0f32; n]).map_err(e)?;
        let t = time(reps, || {
            k.launch(
                &stream,
                geometry,
                crate::args![n as u32, 3.0f32, &mut a, &b, &c],
            )
            .map_err(l)
        })?;
        let gbps = 12.0 * n as f64 / t.as_secs_f64() / 1e9;
        let (peer, peer_error) = stream_best("triad");
        entries.push(Entry {
            kernel: "triad".into(),
            unit: "GB/s".into(),
            value: gbps,
            peer_name: "STREAM".into(),
            peer,
            peer_error,
            gflops: Some(2.0 * n as f64 / t.as_secs_f64() / 1e9),
            gbps: Some(gbps),
        });
        let k = program.kernel("saxpy").map_err(l)?;
        let x = device.upload(&data(3)).map_err(e)?;
        let mut y = device.upload(&data(4)).map_err(e)?;
        let t = time(reps, || {
            k.launch(
                &stream,
                geometry,
                crate::args![n as u32, 0.5f32, &x, &mut y],
            )
            .map_err(l)
        })?;
        let gbps = 12.0 * n as f64 / t.as_secs_f64() / 1e9;
        let (peer, peer_error) = stream_best("saxpy");
        entries.push(Entry {
            kernel: "saxpy".into(),
            unit: "GB/s".into(),
            value: gbps,
            peer_name: "STREAM".into(),
            peer,
            peer_error,
            gflops: Some(2.0 * n as f64 / t.as_secs_f64() / 1e9),
            gbps: Some(gbps),
        });
    }
    let gcc = |kernel: &str, size: usize| match super::peers::gcc(kernel, size, reps, threads, wave)
    {
        Ok(v) => (Some(v), None),
        Err(err) => (None, Some(err)),
    };
    // sgemm: 2 n^3 flops; bytes as the tiles read them (each of A and B n/16 times).
    {
        let g = sizes.gemm - sizes.gemm % 16;
        let nn = g as usize * g as usize;
        let k = program.kernel("sgemm").map_err(l)?;
        let ha: Vec<f32> = (0..nn).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
        let hb: Vec<f32> = (0..nn).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
        let (a, b) = (
            device.upload(&ha).map_err(e)?,
            device.upload(&hb).map_err(e)?,
        );
        let mut c = device.upload(&vec![0f32; nn]).map_err(e)?;
        let t = time(reps, || {
            k.launch(
                &stream,
                Launch::grid([g / 16, g / 16]).block([16, 16]),
                crate::args![g, &a, &b, &mut c],
            )
            .map_err(l)
        })?;
        let got = c.download().map_err(e)?;
        let (r, col) = (g as usize / 3, g as usize / 2);
        let want: f32 = (0..g as usize)
            .map(|kk| ha[r * g as usize + kk] * hb[kk * g as usize + col])
            .sum();
        if got[r * g as usize + col] != want {
            return Err(format!(
                "sgemm: c[{r}][{col}] = {}, want {want}",
                got[r * g as usize + col]
            ));
        }
        let flops = 2.0 * (g as f64).powi(3) / t.as_secs_f64() / 1e9;
        let bytes = 2.0 * 4.0 * (g as f64).powi(3) / 16.0 / t.as_secs_f64() / 1e9;
        let (peer, peer_error) = gcc("sgemm", g as usize);
        entries.push(Entry {
            kernel: "sgemm".into(),
            unit: "GFLOP/s".into(),
            value: flops,
            peer_name: "gcc".into(),
            peer,
            peer_error,
            gflops: Some(flops),
            gbps: Some(bytes),
        });
    }
    // The wave reduction: 4 bytes read per element, one add.
    {
        let k = program.kernel("wave_reduce").map_err(l)?;
        let w = k.manifest().built_wave.unwrap_or(1).max(1) as usize;
        let inp = device.upload(&data(5)).map_err(e)?;
        let mut partial = device.upload(&vec![0f32; n.div_ceil(w)]).map_err(e)?;
        let t = time(reps, || {
            k.launch(
                &stream,
                Launch::grid([(n as u32).div_ceil(256)]).block([256]),
                crate::args![n as u32, &inp, &mut partial],
            )
            .map_err(l)
        })?;
        let gbps = 4.0 * n as f64 / t.as_secs_f64() / 1e9;
        let (peer, peer_error) = gcc("wave_reduce", n);
        entries.push(Entry {
            kernel: "wave_reduce".into(),
            unit: "GB/s".into(),
            value: gbps,
            peer_name: "gcc".into(),
            peer,
            peer_error,
            gflops: Some(n as f64 / t.as_secs_f64() / 1e9),
            gbps: Some(gbps),
        });
    }
    // Mandelbrot: pixels per second; flops and bytes not counted (data-dependent iterations).
    {
        let k = program.kernel("mandelbrot").map_err(l)?;
        let s = sizes.image;
        let mut out = device.upload(&vec![0u32; (s * s) as usize]).map_err(e)?;
        let t = time(reps, || {
            k.launch(
                &stream,
                Launch::grid([s.div_ceil(16), s.div_ceil(16)]).block([16, 16]),
                crate::args![s, s, 256u32, &mut out],
            )
            .map_err(l)
        })?;
        let (peer, peer_error) = gcc("mandelbrot", s as usize);
        entries.push(Entry {
            kernel: "mandelbrot".into(),
            unit: "Mpixel/s".into(),
            value: (s * s) as f64 / t.as_secs_f64() / 1e6,
            peer_name: "gcc".into(),
            peer,
            peer_error,
            gflops: None,
            gbps: None,
        });
    }
    let (bandwidth, peak, from) = match calibrated(&device) {
        Some((b, p)) => (b, p, "calibration"),
        None => (
            stream_peer
                .as_ref()
                .ok()
                .and_then(|f| f.iter().map(|x| x.rate).max_by(f64::total_cmp)),
            None,
            "measured peers",
        ),
    };
    Ok(DeviceReport {
        backend: "cpu".into(),
        device: device.facts().name.clone().unwrap_or_else(|| "host".into()),
        threads: Some(threads),
        bandwidth_gbps: bandwidth,
        peak_gflops: peak,
        ceilings_from: from.into(),
        entries,
        notes,
    })
}

/// Measures the Vulkan device's streaming kernels against its copy.
pub fn vulkan(sizes: Sizes) -> Result<DeviceReport, String> {
    let (name, measured, rows) = super::vulkan::measure(sizes.elems, sizes.block, sizes.reps)?;
    let mut notes = Vec::new();
    if measured < sizes.elems {
        notes.push(format!(
            "{} floats need more workgroups than the device's grid allows: measured at {measured}",
            sizes.elems
        ));
    }
    let mut entries = Vec::new();
    let mut copy_best: Option<f64> = None;
    for r in &rows {
        let gbps = r.bytes / (r.vulkan_ms * 1e6);
        let copy = r.bytes / (r.copy_ms * 1e6);
        copy_best = Some(copy_best.map_or(copy, |c: f64| c.max(copy)));
        let flops_per_byte = match r.name {
            "copy" => 0.0,
            _ => 2.0 / 12.0,
        };
        entries.push(Entry {
            kernel: r.name.to_string(),
            unit: "GB/s".into(),
            value: gbps,
            peer_name: "copy".into(),
            peer: Some(copy),
            peer_error: None,
            gflops: (flops_per_byte > 0.0).then_some(gbps * flops_per_byte),
            gbps: Some(gbps),
        });
    }
    let vk = Device::open(Backend::Vulkan).map_err(|e| e.to_string())?;
    let (bandwidth, peak, from) = match calibrated(&vk) {
        Some((b, p)) => (b, p, "calibration"),
        None => (copy_best, None, "measured peers"),
    };
    Ok(DeviceReport {
        backend: "vulkan".into(),
        device: name,
        threads: None,
        bandwidth_gbps: bandwidth,
        peak_gflops: peak,
        ceilings_from: from.into(),
        entries,
        notes,
    })
}

/// The ratio table of `reports`.
pub fn table(reports: &[DeviceReport]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for r in reports {
        let _ = writeln!(
            s,
            "{} on {}{}: ceilings from {} (bandwidth {}, peak {})",
            r.backend,
            r.device,
            r.threads
                .map_or(String::new(), |t| format!(", {t} threads")),
            r.ceilings_from,
            r.bandwidth_gbps
                .map_or("absent".into(), |b| format!("{b:.1} GB/s")),
            r.peak_gflops
                .map_or("absent".into(), |p| format!("{p:.1} GFLOP/s")),
        );
        let _ = writeln!(
            s,
            "{:<12} {:>9} {:>11} {:>8} {:>11} {:>8}",
            "kernel", "unit", "xpu", "peer", "peer value", "ratio"
        );
        for e in &r.entries {
            let _ = writeln!(
                s,
                "{:<12} {:>9} {:>11.2} {:>8} {:>11} {:>8}",
                e.kernel,
                e.unit,
                e.value,
                e.peer_name,
                e.peer.map_or("-".into(), |p| format!("{p:.2}")),
                e.ratio()
                    .map_or("-".into(), |x| format!("{x:.2}x /{}", e.peer_name)),
            );
        }
        for n in &r.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s.push('\n');
    }
    s
}

/// Draws each device's kernels on its roofline into an SVG file: log-log, arithmetic
/// intensity (flop/byte) against GFLOP/s; the bandwidth ceiling a diagonal, the compute peak
/// (where known) flat. Kernels without counted flops and bytes are left out of the picture.
pub fn plot(reports: &[DeviceReport], path: &std::path::Path) -> Result<(), String> {
    use plotters::prelude::*;
    let panels = reports.len().max(1) as u32;
    let root = SVGBackend::new(path, (640 * panels, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((1, panels as usize));
    for (area, r) in areas.iter().zip(reports) {
        let points: Vec<(String, f64, f64)> = r
            .entries
            .iter()
            .filter_map(|e| {
                let (f, b) = (e.gflops?, e.gbps?);
                (f > 0.0 && b > 0.0).then(|| (e.kernel.clone(), f / b, f))
            })
            .collect();
        let max_y = points
            .iter()
            .map(|p| p.2)
            .chain(r.peak_gflops)
            .chain(r.bandwidth_gbps.map(|b| b * 64.0))
            .fold(1.0f64, f64::max)
            * 2.0;
        let min_y = points.iter().map(|p| p.2).fold(max_y, f64::min) / 4.0;
        let (x0, x1) = (1.0f64 / 64.0, 64.0f64);
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} roofline: {}", r.backend, r.device),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), (min_y.max(1e-3)..max_y).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (flop/byte)")
            .y_desc("GFLOP/s")
            .draw()
            .map_err(|e| e.to_string())?;
        if let Some(bw) = r.bandwidth_gbps {
            let cap = r.peak_gflops.unwrap_or(f64::INFINITY);
            let line: Vec<(f64, f64)> = (0..=48)
                .map(|i| {
                    let x = x0 * (x1 / x0).powf(i as f64 / 48.0);
                    (x, (bw * x).min(cap))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(line, BLUE.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(format!("{bw:.1} GB/s ({})", r.ceilings_from))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
        }
        if let Some(p) = r.peak_gflops {
            chart
                .draw_series(LineSeries::new(vec![(x0, p), (x1, p)], RED.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(format!("{p:.0} GFLOP/s f32 peak"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
        }
        chart
            .draw_series(points.iter().map(|(name, x, y)| {
                EmptyElement::at((*x, *y))
                    + Circle::new((0, 0), 4, BLACK.filled())
                    + Text::new(name.clone(), (6, -12), ("sans-serif", 13))
            }))
            .map_err(|e| e.to_string())?;
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// `xpu bench cpu|vulkan|all`: measures, prints the table (or JSON), draws the plot; exit 0,
/// 1 when a backend failed, 2 when none ran.
pub fn run(
    which: &str,
    sizes: Sizes,
    json: bool,
    plot_to: Option<&std::path::Path>,
) -> std::process::ExitCode {
    let mut reports = Vec::new();
    let mut failed = false;
    let want = |b: &str| which == "all" || which == b;
    if want("cpu") {
        match cpu(sizes) {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("xpu bench cpu: {e}");
                failed = true;
            }
        }
    }
    if want("vulkan") {
        if which == "all" && Device::open(Backend::Vulkan).is_err() {
            eprintln!("xpu bench: no Vulkan device: skipped");
        } else {
            match vulkan(sizes) {
                Ok(r) => reports.push(r),
                Err(e) => {
                    eprintln!("xpu bench vulkan: {e}");
                    failed = true;
                }
            }
        }
    }
    if reports.is_empty() {
        return std::process::ExitCode::from(2);
    }
    if json {
        match serde_json::to_string_pretty(&reports) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("xpu bench: {e}");
                return std::process::ExitCode::from(1);
            }
        }
    } else {
        print!("{}", table(&reports));
    }
    if let Some(p) = plot_to {
        if let Err(e) = plot(&reports, p) {
            eprintln!("xpu bench: {}: {e}", p.display());
            failed = true;
        }
    }
    if failed {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}
