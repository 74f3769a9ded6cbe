//! The per-kernel summary of a trace (`xpu profile`): count, total, median, share of the
//! device time, and the tiers that timed it.

use super::ProfileError;
use std::collections::BTreeMap;
use std::path::Path;

/// One kernel's line of the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLine {
    /// The kernel's name.
    pub kernel: String,
    /// Launches of it in the trace.
    pub count: usize,
    /// Microseconds.
    pub total_us: f64,
    /// The median launch, in microseconds.
    pub median_us: f64,
    /// Of the device time of every kernel in the trace, 0 to 1.
    pub share: f64,
    /// The tiers of its spans, sorted and joined with `+`.
    pub tier: String,
}

/// The summary of a trace: one line per kernel, most time first, and the capture's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// One line per kernel, most time first.
    pub kernels: Vec<KernelLine>,
    /// The capture's counters, by name.
    pub counters: BTreeMap<String, u64>,
    /// Every span in the trace (host and device).
    pub spans: usize,
}

/// Reads the trace at `path` and summarises its device launch spans.
pub fn read(path: &Path) -> Result<Summary, ProfileError> {
    let bad = |message: String| ProfileError::Read {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    summarise(&value).map_err(bad)
}

/// Summarises a parsed trace.
pub fn summarise(trace: &serde_json::Value) -> Result<Summary, String> {
    let events = trace
        .get("traceEvents")
        .and_then(|e| e.as_array())
        .ok_or("no traceEvents array")?;
    let mut by_kernel: BTreeMap<String, (Vec<f64>, Vec<String>)> = BTreeMap::new();
    let mut spans = 0;
    for e in events {
        if e.get("ph").and_then(|p| p.as_str()) != Some("X") {
            continue;
        }
        spans += 1;
        let args = e.get("args");
        let Some(tier) = args.and_then(|a| a.get("tier")).and_then(|t| t.as_str()) else {
            continue;
        };
        let Some(kernel) = args.and_then(|a| a.get("kernel")).and_then(|k| k.as_str()) else {
            continue;
        };
        let dur = e.get("dur").and_then(|d| d.as_f64()).unwrap_or(0.0);
        let entry = by_kernel.entry(kernel.to_string()).or_default();
        entry.0.push(dur);
        if !entry.1.iter().any(|t| t == tier) {
            entry.1.push(tier.to_string());
        }
    }
    let all: f64 = by_kernel.values().flat_map(|(d, _)| d.iter()).sum();
    let mut kernels: Vec<KernelLine> = by_kernel
        .into_iter()
        .map(|(kernel, (mut durs, mut tiers))| {
            durs.sort_by(f64::total_cmp);
            tiers.sort();
            let total: f64 = durs.iter().sum();
            let median = if durs.is_empty() {
                0.0
            } else if durs.len() % 2 == 1 {
                durs[durs.len() / 2]
            } else {
                (durs[durs.len() / 2 - 1] + durs[durs.len() / 2]) / 2.0
            };
            KernelLine {
                kernel,
                count: durs.len(),
                total_us: total,
                median_us: median,
                share: if all > 0.0 { total / all } else { 0.0 },
                tier: tiers.join("+"),
            }
        })
        .collect();
    kernels.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    let counters = trace
        .get("otherData")
        .and_then(|o| o.as_object())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_u64().map(|v| (k.clone(), v)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Summary {
        kernels,
        counters,
        spans,
    })
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<40} {:>8} {:>12} {:>12} {:>7}  tier",
            "kernel", "count", "total us", "median us", "share"
        )?;
        for k in &self.kernels {
            writeln!(
                f,
                "{:<40} {:>8} {:>12.1} {:>12.2} {:>6.1}%  {}",
                k.kernel,
                k.count,
                k.total_us,
                k.median_us,
                k.share * 100.0,
                k.tier
            )?;
        }
        let counters: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        write!(f, "{} spans; {}", self.spans, counters.join(", "))
    }
}
