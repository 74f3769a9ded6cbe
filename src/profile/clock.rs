//! The profiler's clock: a cheap raw counter read on the launch path, converted to
//! nanoseconds only when the trace is written.
//!
//! On x86-64 with an invariant TSC (`constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`, one
//! rate on every core) the counter is `rdtsc`: a few nanoseconds, no system call. Elsewhere
//! it is the monotonic clock's nanoseconds since capture was armed (`Instant`). Ticks become
//! nanoseconds by a linear fit between the moment capture was armed and the moment of the
//! conversion, both read on the counter and on `Instant`; over a capture of any length the
//! fit's error is that of the two `Instant` reads.

use std::sync::OnceLock;
use std::time::Instant;

/// The counter's origin: read once, when capture is armed.
struct Origin {
    instant: Instant,
    ticks: u64,
    tsc: bool,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

/// Whether this machine's TSC is usable as a clock shared by every core.
fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

#[inline]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; it is present on every x86-64 processor.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Fixes the origin (the first call wins); returns whether the TSC is the counter.
pub fn init() -> bool {
    ORIGIN
        .get_or_init(|| {
            let tsc_ok = invariant_tsc();
            Origin {
                instant: Instant::now(),
                ticks: if tsc_ok { tsc() } else { 0 },
                tsc: tsc_ok,
            }
        })
        .tsc
}

/// The raw counter now (0 before [`init`]).
#[inline]
pub fn ticks() -> u64 {
    match ORIGIN.get() {
        Some(o) if o.tsc => tsc(),
        Some(o) => o.instant.elapsed().as_nanos() as u64,
        None => 0,
    }
}

/// Converts counter readings to nanoseconds since the origin, by the fit as of now.
#[derive(Clone, Copy, Debug)]
pub struct Fit {
    origin: u64,
    ns_per_tick: f64,
}

impl Fit {
    /// The fit from the origin to now.
    pub fn now() -> Fit {
        let Some(o) = ORIGIN.get() else {
            return Fit {
                origin: 0,
                ns_per_tick: 1.0,
            };
        };
        if !o.tsc {
            return Fit {
                origin: 0,
                ns_per_tick: 1.0,
            };
        }
        let t = tsc();
        let ns = o.instant.elapsed().as_nanos() as f64;
        let dt = t.wrapping_sub(o.ticks) as f64;
        Fit {
            origin: o.ticks,
            // Under a microsecond since the origin the fit is noise: take 1 GHz until then.
            ns_per_tick: if ns > 1e3 && dt > 0.0 { ns / dt } else { 1.0 },
        }
    }

    /// Nanoseconds since the origin at counter reading `t`.
    pub fn ns(&self, t: u64) -> u64 {
        (t.saturating_sub(self.origin) as f64 * self.ns_per_tick) as u64
    }

    /// Nanoseconds that `ticks` counter ticks last.
    pub fn dur_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }

    /// The counter ticks of `ns` nanoseconds.
    pub fn ticks_of(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_tick) as u64
    }
}
