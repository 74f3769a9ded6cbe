//! `Device::foreign_load_percent` (contract §6.2): how much of the device other processes
//! held since the last reading, so that a timing taken while the device was shared is used
//! but not remembered.
//!
//! - Host backends (CPU, interpreter, and a Vulkan device that runs on the host, lavapipe):
//!   the busy time of every CPU in `/proc/stat` less this process's own (`/proc/self/stat`),
//!   as a share of all CPUs' time over the interval.
//! - NVIDIA GPUs (CUDA, and Vulkan on an NVIDIA part): NVML's per-process utilisation samples
//!   (`nvmlDeviceGetProcessUtilization`) of every process but this one, for the device whose
//!   UUID matches, loaded with `dlopen` where `libnvidia-ml.so.1` is present.
//! - Anything else: `None` (unknown; the choice then remembers, as with an idle device).
//!
//! A reading is taken at most once per five seconds per device; a call within that window
//! answers the last reading.

use crate::hal::facts::DeviceFacts;
use crate::runtime::device::Device;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a device's load is read at most.
pub const READ_INTERVAL: Duration = Duration::from_secs(5);

struct Sample {
    at: Instant,
    /// The answer given at `at`.
    percent: Option<u32>,
    /// Host counters at `at`: every CPU's busy and total ticks, and this process's ticks.
    host: Option<(u64, u64, u64)>,
}

static SAMPLES: Mutex<Option<HashMap<u64, Sample>>> = Mutex::new(None);

impl Device {
    /// The share (0..=100) of this device other processes held since the previous reading
    /// (or over a short window at the first), read at most once per five seconds; `None` where
    /// the backend offers no way to tell.
    pub fn foreign_load_percent(&self) -> Option<u32> {
        let mut samples = SAMPLES.lock();
        let samples = samples.get_or_insert_with(HashMap::new);
        let now = Instant::now();
        if let Some(s) = samples.get(&self.id()) {
            if now.duration_since(s.at) < READ_INTERVAL {
                return s.percent;
            }
        }
        let facts = self.facts();
        let sample = if on_host(self) {
            let previous = samples.get(&self.id()).and_then(|s| s.host);
            let start = match previous {
                Some(p) => Some(p),
                None => {
                    // A first reading: a short window of its own.
                    let first = host_counters();
                    std::thread::sleep(Duration::from_millis(100));
                    first
                }
            };
            let end = host_counters();
            Sample {
                at: Instant::now(),
                percent: start.zip(end).and_then(|(a, b)| host_share(a, b)),
                host: end,
            }
        } else {
            Sample {
                at: now,
                percent: nvml::foreign_percent(facts),
                host: None,
            }
        };
        let percent = sample.percent;
        samples.insert(self.id(), sample);
        percent
    }
}

/// Whether the device's work runs on the host CPUs.
fn on_host(device: &Device) -> bool {
    use crate::hal::Backend;
    matches!(device.backend(), Backend::Cpu | Backend::Interp)
        || device.implementation().emulated_on_host()
}

/// (busy ticks of all CPUs, total ticks of all CPUs, this process's ticks), from `/proc`.
fn host_counters() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (busy, total) = parse_proc_stat(&stat)?;
    Some((busy, total, parse_self_ticks(&own)?))
}

/// The `cpu` line of `/proc/stat`: (busy, total) ticks, idle and iowait not busy.
fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// utime + stime of `/proc/self/stat` (fields 14 and 15, after the parenthesised name).
fn parse_self_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, index 11 here.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Other processes' share of all CPUs between two readings.
fn host_share(a: (u64, u64, u64), b: (u64, u64, u64)) -> Option<u32> {
    let total = b.1.checked_sub(a.1)?;
    if total == 0 {
        return None;
    }
    let busy = b.0.saturating_sub(a.0);
    let own = b.2.saturating_sub(a.2);
    let foreign = busy.saturating_sub(own);
    Some(((foreign * 100) / total).min(100) as u32)
}

/// NVML, loaded on demand with `dlopen` (never linked: a machine without NVIDIA's driver has
/// no such library, and the answer is then `None`).
mod nvml {
    use super::DeviceFacts;
    use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CString};
    use std::sync::OnceLock;

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct ProcessUtilizationSample {
        pid: c_uint,
        time_stamp: c_ulonglong,
        sm_util: c_uint,
        mem_util: c_uint,
        enc_util: c_uint,
        dec_util: c_uint,
    }

    type Device = *mut c_void;

    struct Api {
        by_uuid: unsafe extern "C" fn(*const c_char, *mut Device) -> c_int,
        process_utilization: unsafe extern "C" fn(
            Device,
            *mut ProcessUtilizationSample,
            *mut c_uint,
            c_ulonglong,
        ) -> c_int,
    }

    // SAFETY: the function pointers are plain C entry points, callable from any thread.
    unsafe impl Send for Api {}
    // SAFETY: as above.
    unsafe impl Sync for Api {}

    fn api() -> Option<&'static Api> {
        static API: OnceLock<Option<Api>> = OnceLock::new();
        API.get_or_init(|| {
            let name = CString::new("libnvidia-ml.so.1").ok()?;
            // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the process.
            let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if lib.is_null() {
                return None;
            }
            let sym = |s: &str| -> Option<*mut c_void> {
                let s = CString::new(s).ok()?;
                // SAFETY: `lib` is a live handle; `s` is NUL-terminated.
                let p = unsafe { libc::dlsym(lib, s.as_ptr()) };
                (!p.is_null()).then_some(p)
            };
            let init = sym("nvmlInit_v2")?;
            // SAFETY: nvmlInit_v2 takes no arguments and returns an nvmlReturn_t.
            let init = unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(init)
            };
            // SAFETY: as declared by NVML.
            if unsafe { init() } != 0 {
                return None;
            }
            let by_uuid = sym("nvmlDeviceGetHandleByUUID")?;
            let util = sym("nvmlDeviceGetProcessUtilization")?;
            type ByUuid = unsafe extern "C" fn(*const c_char, *mut Device) -> c_int;
            type Util = unsafe extern "C" fn(
                Device,
                *mut ProcessUtilizationSample,
                *mut c_uint,
                c_ulonglong,
            ) -> c_int;
            // SAFETY: the signatures are NVML's (nvml.h) for these two symbols.
            unsafe {
                Some(Api {
                    by_uuid: std::mem::transmute::<*mut c_void, ByUuid>(by_uuid),
                    process_utilization: std::mem::transmute::<*mut c_void, Util>(util),
                })
            }
        })
        .as_ref()
    }

    /// CUDA's and Vulkan's UUIDs as hex (`0b1c...`) → NVML's `GPU-0b1c....-....`.
    fn nvml_uuid(hex: &str) -> Option<String> {
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(format!(
            "GPU-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        ))
    }

    /// Other processes' SM utilisation over NVML's recent samples, for an NVIDIA device.
    pub(super) fn foreign_percent(facts: &DeviceFacts) -> Option<u32> {
        let nvidia = facts
            .vendor
            .as_deref()
            .is_some_and(|v| v.contains("NVIDIA"));
        if !nvidia {
            return None;
        }
        let uuid = CString::new(nvml_uuid(facts.uuid.as_deref()?)?).ok()?;
        let api = api()?;
        let mut dev: Device = std::ptr::null_mut();
        // SAFETY: `uuid` is NUL-terminated; `dev` is an out-pointer.
        if unsafe { (api.by_uuid)(uuid.as_ptr(), &mut dev) } != 0 {
            return None;
        }
        let mut samples = vec![ProcessUtilizationSample::default(); 256];
        let mut count = samples.len() as c_uint;
        // SAFETY: `samples` holds `count` entries; timestamp 0 asks for every buffered sample.
        let rc = unsafe { (api.process_utilization)(dev, samples.as_mut_ptr(), &mut count, 0) };
        const NOT_FOUND: c_int = 6; // NVML_ERROR_NOT_FOUND: no process used the device.
        if rc == NOT_FOUND {
            return Some(0);
        }
        if rc != 0 {
            return None;
        }
        let me = std::process::id();
        let mut per_pid = std::collections::HashMap::<c_uint, u32>::new();
        for s in &samples[..(count as usize).min(samples.len())] {
            if s.pid != me {
                let e = per_pid.entry(s.pid).or_default();
                *e = (*e).max(s.sm_util);
            }
        }
        Some(per_pid.values().sum::<u32>().min(100))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn uuids_take_nvml_form() {
            assert_eq!(
                super::nvml_uuid("0123456789abcdef0123456789abcdef").as_deref(),
                Some("GPU-01234567-89ab-cdef-0123-456789abcdef")
            );
            assert_eq!(super::nvml_uuid("xyz"), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_parsing() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_proc_stat(stat), Some((150, 1000)));
        let own = "1234 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 70 30 0 0";
        assert_eq!(parse_self_ticks(own), Some(100));
        // 400 busy ticks of 1000, 100 of them ours: 30 percent foreign.
        assert_eq!(host_share((0, 0, 0), (400, 1000, 100)), Some(30));
        assert_eq!(host_share((5, 10, 0), (5, 10, 0)), None);
    }

    #[test]
    fn host_reading_is_cached_for_five_seconds() {
        let d = Device::open(crate::hal::Backend::Interp).unwrap();
        let a = d.foreign_load_percent();
        assert!(a.is_some_and(|p| p <= 100), "{a:?}");
        let t = Instant::now();
        let b = d.foreign_load_percent();
        assert!(t.elapsed() < Duration::from_millis(50));
        assert_eq!(a, b);
    }
}
