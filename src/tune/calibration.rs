//! The calibration store (contract §5.3, §6.3): device-wide measured facts, keyed by device,
//! driver, compiler and power mode.
//!
//! [`DeviceCalibration::current`] answers from records built into an artifact first (a bundle
//! registers them with [`register_bundled`] at load), then from the platform cache directory
//! (`<cache>/calibration/<key>`, the cache being `XPU_CACHE_DIR` or the XDG cache: never
//! `/tmp`). [`DeviceCalibration::measure`] (`xpu calibrate`) measures one and
//! [`DeviceCalibration::store`] files it. A record that does not parse or was written for
//! another key is reported (`XPU-T07`) and ignored.
//!
//! [`Timing::within_calibrated_peak`] and [`Timing::fraction_of_copy_peak`] judge a reading
//! against the calibration rather than a caller's number.

use super::codes;
use super::Report;
use crate::hal::{DeviceError, Init, TimerTier};
use crate::runtime::buffer::{KernelBuffer, RawBuffer};
use crate::runtime::device::Device;
use crate::runtime::stream::KernelStream;
use crate::runtime::timer::{KernelTimer, Timing};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::time::Instant;

/// What the calibration of one device holds; every figure `None` where it was not measured.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCalibration {
    /// `device key|uuid|driver|compiler|power mode` (see [`calibration_key`]).
    pub key: String,
    /// Device-to-device copy bandwidth, bytes read plus written per second, in GB/s (10^9),
    /// on an otherwise idle host.
    pub copy_gbps_idle: Option<f64>,
    /// The same while every other host core spins.
    pub copy_gbps_host_load: Option<f64>,
    /// Peak f32 rate of the plain units (an FMA is two operations), operations per second.
    pub peak_flops: Option<f64>,
    /// Peak rate of the matrix units, where the device has them and it was measured.
    pub peak_matrix_flops: Option<f64>,
    /// Host time of one empty launch, enqueued back to back (nanoseconds).
    pub launch_ns: Option<f64>,
    /// Host time of recording one event (nanoseconds).
    pub event_ns: Option<f64>,
    /// One round trip between two streams through an event (nanoseconds).
    pub inter_queue_ns: Option<f64>,
    /// The timer tier the figures were read at (`host`, `event`, ...).
    pub tier: String,
}

static BUNDLED: Mutex<Vec<DeviceCalibration>> = Mutex::new(Vec::new());

/// Registers calibration records built into an artifact (the bundle's seam): they are served
/// before the cache for a device whose key matches.
pub fn register_bundled(records: Vec<DeviceCalibration>) {
    BUNDLED.lock().extend(records);
}

/// The key a calibration is filed under: the device key, UUID, driver version, compiler
/// version and power mode, `-` for a part that is absent.
pub fn calibration_key(device: &Device) -> String {
    let f = device.facts();
    let clean = |s: Option<&str>| s.unwrap_or("-").replace(['|', '\n', ' '], "_");
    format!(
        "{}|{}|{}|{}|{}",
        f.device_key(),
        clean(f.uuid.as_deref()),
        clean(f.driver_version.as_deref()),
        clean(Some(&compiler_version(device))),
        clean(power_mode(device).as_deref())
    )
}

/// The compiler that produces the device's code: this crate's version and the code generator.
fn compiler_version(device: &Device) -> String {
    use crate::hal::Backend;
    let generator = match device.backend() {
        Backend::Cpu => "cranelift-0.135",
        Backend::Cuda | Backend::Hip => "llvm-19",
        Backend::Vulkan => "rspirv-0.13",
        Backend::Interp => "interp",
    };
    format!("xpu-{}-{generator}", env!("CARGO_PKG_VERSION"))
}

/// The host's power mode where Linux says (`/sys/firmware/acpi/platform_profile`, else cpu0's
/// frequency governor); `None` for GPUs and where neither is readable.
fn power_mode(device: &Device) -> Option<String> {
    use crate::hal::Backend;
    if !matches!(device.backend(), Backend::Cpu | Backend::Interp)
        && !device.implementation().emulated_on_host()
    {
        return None;
    }
    [
        "/sys/firmware/acpi/platform_profile",
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    ]
    .iter()
    .find_map(|p| {
        let s = std::fs::read_to_string(p).ok()?;
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_string())
    })
}

const MAGIC: &str = "xpu-calibration 1";

/// The rows of a record, in file order.
const FIELDS: [&str; 7] = [
    "copy_gbps_idle",
    "copy_gbps_host_load",
    "peak_flops",
    "peak_matrix_flops",
    "launch_ns",
    "event_ns",
    "inter_queue_ns",
];

impl DeviceCalibration {
    fn figures(&self) -> [Option<f64>; 7] {
        [
            self.copy_gbps_idle,
            self.copy_gbps_host_load,
            self.peak_flops,
            self.peak_matrix_flops,
            self.launch_ns,
            self.event_ns,
            self.inter_queue_ns,
        ]
    }

    /// The figures as `(name, value)` pairs, in file order.
    pub fn rows(&self) -> Vec<(&'static str, Option<f64>)> {
        FIELDS.iter().copied().zip(self.figures()).collect()
    }

    /// The record's text form.
    pub fn to_text(&self) -> String {
        let mut out = format!("{MAGIC}\nkey {}\ntier {}\n", self.key, self.tier);
        for (name, v) in self.rows() {
            match v {
                Some(v) => out.push_str(&format!("{name} {v}\n")),
                None => out.push_str(&format!("{name} -\n")),
            }
        }
        out
    }

    /// Parses a record; `Err` with why for one that is not one.
    pub fn from_text(text: &str) -> Result<DeviceCalibration, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err("not a calibration record".into());
        }
        let mut field = |name: &str| -> Result<String, String> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .and_then(|l| l.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| format!("no `{name}` line"))
        };
        let key = field("key")?;
        let tier = field("tier")?;
        let mut values = [None; 7];
        for (i, name) in FIELDS.iter().enumerate() {
            let v = field(name)?;
            values[i] = match v.as_str() {
                "-" => None,
                v => Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x > 0.0)
                        .ok_or_else(|| format!("`{name}` is not a positive number"))?,
                ),
            };
        }
        if lines.next().is_some() {
            return Err("trailing lines".into());
        }
        let [copy_gbps_idle, copy_gbps_host_load, peak_flops, peak_matrix_flops, launch_ns, event_ns, inter_queue_ns] =
            values;
        Ok(DeviceCalibration {
            key,
            copy_gbps_idle,
            copy_gbps_host_load,
            peak_flops,
            peak_matrix_flops,
            launch_ns,
            event_ns,
            inter_queue_ns,
            tier,
        })
    }

    /// Where `device`'s calibration is cached, `None` without a cache directory.
    pub fn path(device: &Device) -> Option<PathBuf> {
        let dir = crate::config::get().cache_dir.clone()?;
        Some(
            dir.join("calibration")
                .join(encode(&calibration_key(device))),
        )
    }

    /// The calibration of `device`: a bundled record for its key, else the cached one; `None`
    /// (with a report where a file was there and not usable) where neither is.
    pub fn current(device: &Device) -> (Option<DeviceCalibration>, Vec<Report>) {
        let key = calibration_key(device);
        if let Some(c) = BUNDLED.lock().iter().find(|c| c.key == key) {
            return (Some(c.clone()), Vec::new());
        }
        let Some(path) = DeviceCalibration::path(device) else {
            return (None, Vec::new());
        };
        let Ok(bytes) = std::fs::read(&path) else {
            return (None, Vec::new());
        };
        let bad = |why: String| Report {
            code: codes::CALIBRATION_CORRUPT,
            message: format!("{}: {why}; ignored", path.display()),
        };
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(DeviceCalibration::from_text);
        match parsed {
            Ok(c) if c.key == key => (Some(c), Vec::new()),
            Ok(c) => (None, vec![bad(format!("written for {}, not {key}", c.key))]),
            Err(why) => (None, vec![bad(why)]),
        }
    }

    /// Files this calibration in the cache directory (atomically); the path written.
    pub fn store(&self, device: &Device) -> Result<PathBuf, String> {
        let path = DeviceCalibration::path(device)
            .ok_or("no cache directory (XPU_CACHE_DIR is off and no XDG cache or HOME)")?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        super::store::write_atomic(&path, self.to_text().as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// Measures `device`: copy bandwidth idle and under host load, the plain f32 peak, launch,
    /// event and inter-queue costs. A figure whose measurement failed is `None`, with a
    /// report (`XPU-T08`).
    pub fn measure(device: &Device) -> (DeviceCalibration, Vec<Report>) {
        let mut reports = Vec::new();
        let mut keep = |what: &str, r: Result<f64, String>| match r {
            Ok(v) if v.is_finite() && v > 0.0 => Some(v),
            Ok(v) => {
                reports.push(Report {
                    code: codes::CALIBRATION_FAILED,
                    message: format!("{what} read {v}: left out"),
                });
                None
            }
            Err(e) => {
                reports.push(Report {
                    code: codes::CALIBRATION_FAILED,
                    message: format!("{what}: {e}"),
                });
                None
            }
        };
        let tier = match device.implementation().timer_tier() {
            TimerTier::Device => "device",
            TimerTier::Event => "event",
            TimerTier::Host => "host",
            TimerTier::Unavailable => "host (the device has no timer)",
        };
        let copy_idle = keep("copy bandwidth", copy_gbps(device, false));
        let copy_load = keep("copy bandwidth under host load", copy_gbps(device, true));
        let peak = keep("peak f32 rate", peak_flops(device));
        let launch = keep("launch cost", launch_ns(device));
        let event = keep("event cost", event_ns(device));
        let inter = keep("inter-queue cost", inter_queue_ns(device));
        (
            DeviceCalibration {
                key: calibration_key(device),
                copy_gbps_idle: copy_idle,
                copy_gbps_host_load: copy_load,
                peak_flops: peak,
                peak_matrix_flops: None,
                launch_ns: launch,
                event_ns: event,
                inter_queue_ns: inter,
                tier: tier.to_string(),
            },
            reports,
        )
    }
}

fn encode(key: &str) -> String {
    key.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Times `work` on `stream` at the device's tier, falling back to the host clock around a
/// synchronised stream where the tier is unavailable. Nanoseconds.
pub(crate) fn bracket(
    stream: &KernelStream,
    work: impl FnOnce() -> Result<(), String>,
) -> Result<u64, String> {
    let host = stream.device().implementation().timer_tier() == TimerTier::Unavailable;
    if host {
        stream.sync().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        work()?;
        stream.sync().map_err(|e| e.to_string())?;
        return Ok(t0.elapsed().as_nanos() as u64);
    }
    let timer = KernelTimer::start(stream).map_err(|e| e.to_string())?;
    work()?;
    let t = timer.stop().map_err(|e| e.to_string())?;
    t.nanos
        .ok_or_else(|| "the timer gave no reading".to_string())
}

fn copy_gbps(device: &Device, host_load: bool) -> Result<f64, String> {
    let err = |e: DeviceError| e.to_string();
    let bytes = if device.backend() == crate::hal::Backend::Interp {
        4 << 20
    } else {
        64 << 20
    };
    let a = RawBuffer::alloc_with(device, bytes, Init::Any).map_err(err)?;
    let b = RawBuffer::alloc_with(device, bytes, Init::Any).map_err(err)?;
    let stream = KernelStream::create(device).map_err(err)?;
    b.copy_from_async(&stream, &a).map_err(err)?;
    stream.sync().map_err(err)?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let spinners = if host_load {
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
    } else {
        0
    };
    std::thread::scope(|s| {
        for _ in 0..spinners {
            s.spawn(|| {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
        let mut best: Option<u64> = None;
        let mut result = Ok(());
        for _ in 0..5 {
            match bracket(&stream, || {
                for i in 0..4 {
                    let (src, dst) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
                    dst.copy_from_async(&stream, src).map_err(err)?;
                }
                Ok(())
            }) {
                Ok(ns) => best = Some(best.map_or(ns, |b| b.min(ns))),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result?;
        let ns = best.ok_or("no reading")?.max(1);
        // Four copies, each reading and writing `bytes`.
        Ok((8 * bytes) as f64 / ns as f64)
    })
}

/// Kernels the calibration launches.
const KERNELS: &str = "
kernel xpu_calibrate_empty(x: buf<u32, rw>) {
}

kernel xpu_calibrate_fma(out: buf<f32, rw>, iters: u32) {
    let i: u32 = global_id.x;
    let a: f32 = (i % 7) as f32 * 0.001;
    let b0: f32 = 1.0;
    let b1: f32 = 0.5;
    let b2: f32 = 0.25;
    let b3: f32 = 0.125;
    let b4: f32 = 0.0625;
    let b5: f32 = 0.03125;
    let b6: f32 = 0.015625;
    let b7: f32 = 0.0078125;
    for t: u32 in 0..iters {
        b0 = fma(b0, 0.999, a);
        b1 = fma(b1, 0.999, a);
        b2 = fma(b2, 0.999, a);
        b3 = fma(b3, 0.999, a);
        b4 = fma(b4, 0.999, a);
        b5 = fma(b5, 0.999, a);
        b6 = fma(b6, 0.999, a);
        b7 = fma(b7, 0.999, a);
    }
    out[i] = b0 + b1 + b2 + b3 + b4 + b5 + b6 + b7;
}
";

fn program(device: &Device) -> Result<crate::runtime::device::Program, String> {
    let module = crate::ir::parse(KERNELS)
        .map_err(|d| d.render("calibration"))?
        .verify()
        .map_err(|d| d.render("calibration"))?;
    device.load(module).map_err(|e| e.to_string())
}

fn peak_flops(device: &Device) -> Result<f64, String> {
    let program = program(device)?;
    let kernel = program
        .kernel("xpu_calibrate_fma")
        .map_err(|e| e.to_string())?;
    let stream = KernelStream::create(device).map_err(|e| e.to_string())?;
    let block = 256u32;
    let mut blocks = device.facts().multiprocessors.unwrap_or(4).max(1) * 4;
    let iters = if device.backend() == crate::hal::Backend::Interp {
        16u32
    } else {
        1024
    };
    let mut out = KernelBuffer::<f32>::new(device, (blocks * block) as usize * 64)
        .map_err(|e| e.to_string())?;
    // Grow the grid until one launch takes long enough to read (or the buffer's end).
    loop {
        let launch = crate::Launch::grid([blocks]).block([block]);
        let run = |out: &mut KernelBuffer<f32>| {
            kernel
                .launch(&stream, launch, crate::args![&mut *out, iters])
                .map_err(|e| e.to_string())
        };
        run(&mut out)?; // warm
        let ns = bracket(&stream, || run(&mut out))?;
        let enough =
            ns >= 20_000_000 || blocks >= 64 * 4 * device.facts().multiprocessors.unwrap_or(4);
        if enough {
            let ops = 2.0 * 8.0 * iters as f64 * (blocks * block) as f64;
            return Ok(ops * 1e9 / ns.max(1) as f64);
        }
        blocks *= 4;
    }
}

fn launch_ns(device: &Device) -> Result<f64, String> {
    let program = program(device)?;
    let kernel = program
        .kernel("xpu_calibrate_empty")
        .map_err(|e| e.to_string())?;
    let stream = KernelStream::create(device).map_err(|e| e.to_string())?;
    let mut x = KernelBuffer::<u32>::new(device, 1).map_err(|e| e.to_string())?;
    let launch = crate::Launch::grid([1]).block([1]);
    let n = 200;
    kernel
        .launch(&stream, launch, crate::args![&mut x])
        .map_err(|e| e.to_string())?;
    stream.sync().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    for _ in 0..n {
        kernel
            .launch(&stream, launch, crate::args![&mut x])
            .map_err(|e| e.to_string())?;
    }
    stream.sync().map_err(|e| e.to_string())?;
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

fn event_ns(device: &Device) -> Result<f64, String> {
    let stream = KernelStream::create(device).map_err(|e| e.to_string())?;
    let n = 1000;
    let t0 = Instant::now();
    let mut last = None;
    for _ in 0..n {
        last = Some(stream.record().map_err(|e| e.to_string())?);
    }
    if let Some(e) = last {
        e.sync().map_err(|e| e.to_string())?;
    }
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

fn inter_queue_ns(device: &Device) -> Result<f64, String> {
    let s1 = KernelStream::create(device).map_err(|e| e.to_string())?;
    let s2 = KernelStream::create(device).map_err(|e| e.to_string())?;
    let n = 200;
    let t0 = Instant::now();
    for _ in 0..n {
        let e1 = s1.record().map_err(|e| e.to_string())?;
        s2.wait_for(&e1).map_err(|e| e.to_string())?;
        let e2 = s2.record().map_err(|e| e.to_string())?;
        s1.wait_for(&e2).map_err(|e| e.to_string())?;
    }
    s1.sync().map_err(|e| e.to_string())?;
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

impl Timing {
    /// Whether this reading of a kernel that moved `bytes` stays within `device`'s calibrated
    /// copy bandwidth (with 10% slack for the calibration's own noise); `None` without a
    /// reading or a calibration. A figure above it is a broken measurement, not a fast kernel.
    pub fn within_calibrated_peak(&self, device: &Device, bytes: u64) -> Option<bool> {
        let peak = DeviceCalibration::current(device).0?.copy_gbps_idle?;
        Timing::within_peak(self.implied_gbps(bytes), Some(peak * 1.1))
    }

    /// The reading's implied bandwidth as a fraction of `device`'s calibrated copy bandwidth.
    pub fn fraction_of_copy_peak(&self, device: &Device, bytes: u64) -> Option<f64> {
        let peak = DeviceCalibration::current(device).0?.copy_gbps_idle?;
        Some(self.implied_gbps(bytes)? / peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_garbage() {
        let c = DeviceCalibration {
            key: "cpu-mp2|-|-|xpu|-".into(),
            copy_gbps_idle: Some(12.5),
            copy_gbps_host_load: None,
            peak_flops: Some(1e11),
            peak_matrix_flops: None,
            launch_ns: Some(900.0),
            event_ns: Some(20.0),
            inter_queue_ns: None,
            tier: "host".into(),
        };
        assert_eq!(DeviceCalibration::from_text(&c.to_text()), Ok(c.clone()));
        assert!(DeviceCalibration::from_text("junk").is_err());
        let bad = c.to_text().replace("12.5", "-3");
        assert!(DeviceCalibration::from_text(&bad).is_err());
        let cut = &c.to_text()[..40];
        assert!(DeviceCalibration::from_text(cut).is_err());
    }
}
