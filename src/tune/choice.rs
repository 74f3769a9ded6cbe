//! The measured choice (contract §6.2): which survivor of a [`ShapeFilter`] a launch uses.
//!
//! [`ShapeChoice::choose`] decides in the contract's order:
//!
//! 1. an override set by [`set_shape_override`] wins (a sweep's lever);
//! 2. no survivor refuses ([`ShapeFilter::refusal`], `XPU-L025`);
//! 3. one survivor is taken outright;
//! 4. several are looked up in the store under `shape.<family>.<M>x<N>x<K>` against a build
//!    id of the device UUID, the driver version and every survivor's code hash; a hit is
//!    taken with its recorded margin (`shape.<...>.margin`, per mille; under 30 is a tie);
//! 5. a miss times every survivor through the family's [`ShapeProbe`], five interleaved
//!    rounds, and the fastest median wins. The winner and its margin are remembered unless
//!    another process held 25 percent or more of the device while it was timed
//!    ([`ShapeProbe::foreign_load_percent`], by default
//!    [`Device::foreign_load_percent`](crate::Device::foreign_load_percent)); then the result
//!    is used, not stored, with a note.

use super::codes;
use super::filter::{ShapeCandidate, ShapeFilter};
use super::store::AutotuneStore;
use super::Report;
use crate::hal::launch::LaunchError;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Rounds of interleaved timing on a store miss.
pub const ROUNDS: usize = 5;
/// A margin under this (per mille) is a tie.
pub const TIE_PER_MILLE: u32 = 30;
/// Another process's share of the device (percent) from which a timing is not remembered.
pub const FOREIGN_LOAD_LIMIT: u32 = 25;

/// How a family times one of its candidates: one bracketed run at the `KernelTimer` tier (the
/// host clock where the tier is unavailable), in nanoseconds.
pub trait ShapeProbe {
    /// Runs `candidate` once and answers its time in nanoseconds.
    fn time(&mut self, candidate: &ShapeCandidate) -> Result<u64, LaunchError>;
    /// Other processes' share of the device while the candidates were timed (percent);
    /// `None` where it cannot be read.
    fn foreign_load_percent(&mut self) -> Option<u32>;
}

/// Where a [`ShapeResult`]'s kernel came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Set by [`set_shape_override`].
    Override,
    /// The only survivor.
    Single,
    /// The store.
    Cache,
    /// Timed now.
    Timing,
    /// Nothing was chosen (see [`ShapeResult::refusal`]).
    Refused,
}

impl Source {
    /// The source's name as printed (`override`, `single`, `cache`, `timing`, `refused`).
    pub const fn name(self) -> &'static str {
        match self {
            Source::Override => "override",
            Source::Single => "single",
            Source::Cache => "cache",
            Source::Timing => "timing",
            Source::Refused => "refused",
        }
    }
}

/// What [`ShapeChoice::choose`] decided.
#[derive(Clone, Debug)]
pub struct ShapeResult {
    /// The family chosen from.
    pub family: String,
    /// `MxNxK`.
    pub problem: String,
    /// The chosen kernel, `None` on a refusal.
    pub kernel: Option<String>,
    /// Where the kernel came from.
    pub source: Source,
    /// The winner's lead over the runner-up (per mille of the winner's median), where two or
    /// more were timed (now or when the stored value was).
    pub margin_per_mille: Option<u32>,
    /// A margin under [`TIE_PER_MILLE`].
    pub tie: bool,
    /// Why nothing was chosen, on a refusal.
    pub refusal: Option<LaunchError>,
    /// Whether the chosen shape's launch must opt in to the larger shared limit.
    pub needs_opt_in: bool,
    /// Each timed survivor's median (nanoseconds), fastest first, on a timing.
    pub medians: Vec<(String, u64)>,
    /// Whether a timing's winner was remembered.
    pub stored: bool,
    /// What happened on the way: store reports, failed probes, an unstored result.
    pub notes: Vec<Report>,
}

static OVERRIDES: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// Makes every later choice of `family` take `kernel` (a sweep's lever); `None` clears it.
pub fn set_shape_override(family: &str, kernel: Option<&str>) {
    let mut o = OVERRIDES.lock();
    let o = o.get_or_insert_with(HashMap::new);
    match kernel {
        Some(k) => {
            o.insert(family.to_string(), k.to_string());
        }
        None => {
            o.remove(family);
        }
    }
}

fn shape_override(family: &str) -> Option<String> {
    OVERRIDES.lock().as_ref()?.get(family).cloned()
}

/// The choice among a filter's survivors.
pub struct ShapeChoice;

impl ShapeChoice {
    /// The store name of a family's choice at a problem: `shape.<family>.<M>x<N>x<K>`.
    pub fn store_name(filter: &ShapeFilter) -> String {
        format!("shape.{}.{}", filter.family, filter.problem)
    }

    /// The build id a stored choice is valid for: the device's UUID, its driver version and
    /// every survivor's code hash (`-` for a part that is absent).
    pub fn build_id(filter: &ShapeFilter) -> String {
        let d = &filter.device;
        let hashes: Vec<String> = filter
            .survivors()
            .iter()
            .map(|v| {
                v.facts
                    .code_hash
                    .map_or("-".into(), |h| format!("{h:016x}"))
            })
            .collect();
        format!(
            "{}/{}/{}",
            d.uuid.as_deref().unwrap_or("-"),
            d.driver_version
                .as_deref()
                .unwrap_or("-")
                .replace([' ', '/'], "_"),
            hashes.join(",")
        )
    }

    /// Decides among `filter`'s survivors in the contract's order (see the module doc).
    pub fn choose(
        store: &AutotuneStore,
        filter: &ShapeFilter,
        probe: &mut dyn ShapeProbe,
    ) -> ShapeResult {
        ShapeChoice::choose_with_limit(store, filter, probe, FOREIGN_LOAD_LIMIT)
    }

    /// [`ShapeChoice::choose`] with another foreign-load limit (percent) above which a timing
    /// is not remembered (`xpu tune --foreign-load-limit`).
    pub fn choose_with_limit(
        store: &AutotuneStore,
        filter: &ShapeFilter,
        probe: &mut dyn ShapeProbe,
        foreign_load_limit: u32,
    ) -> ShapeResult {
        let mut r = ShapeResult {
            family: filter.family.clone(),
            problem: filter.problem.to_string(),
            kernel: None,
            source: Source::Refused,
            margin_per_mille: None,
            tie: false,
            refusal: None,
            needs_opt_in: false,
            medians: Vec::new(),
            stored: false,
            notes: Vec::new(),
        };
        let opt_in = |kernel: &str| {
            filter
                .verdicts
                .iter()
                .any(|v| v.candidate.kernel == kernel && v.needs_opt_in)
        };
        // 1. An override.
        if let Some(k) = shape_override(&filter.family) {
            let member = filter.verdicts.iter().find(|v| v.candidate.kernel == k);
            match member {
                Some(v) => {
                    if let Some(c) = v.pruned_by() {
                        r.notes.push(Report {
                            code: codes::OVERRIDE_UNKNOWN,
                            message: format!(
                                "the override {k} is taken although the filter pruned it ({c})"
                            ),
                        });
                    }
                    r.needs_opt_in = v.needs_opt_in;
                    r.kernel = Some(k);
                    r.source = Source::Override;
                }
                None => {
                    r.refusal = Some(LaunchError::NoShapeFits {
                        family: filter.family.clone(),
                        problem: r.problem.clone(),
                        verdicts: format!(
                            "error[{}]: the override names {k}, which is not a member",
                            codes::OVERRIDE_UNKNOWN
                        ),
                    });
                }
            }
            return r;
        }
        let survivors = filter.survivors();
        // 2. None refuses; 3. one is taken.
        match survivors.len() {
            0 => {
                r.refusal = Some(filter.refusal());
                return r;
            }
            1 => {
                let k = survivors[0].candidate.kernel.clone();
                r.needs_opt_in = opt_in(&k);
                r.kernel = Some(k);
                r.source = Source::Single;
                return r;
            }
            _ => {}
        }
        // 4. The store.
        let name = ShapeChoice::store_name(filter);
        let margin_name = format!("{name}.margin");
        let build = ShapeChoice::build_id(filter);
        let hit = store
            .recall_for(&name, &build)
            .filter(|k| survivors.iter().any(|v| &v.candidate.kernel == k));
        if let Some(k) = hit {
            r.margin_per_mille = store
                .recall_for(&margin_name, &build)
                .and_then(|m| m.parse().ok());
            r.tie = r.margin_per_mille.is_some_and(|m| m < TIE_PER_MILLE);
            r.needs_opt_in = opt_in(&k);
            r.kernel = Some(k);
            r.source = Source::Cache;
            r.notes.extend(store.take_reports());
            return r;
        }
        // 5. Timing: five interleaved rounds, fastest median.
        let mut times: Vec<Vec<u64>> = vec![Vec::new(); survivors.len()];
        let mut failed = vec![false; survivors.len()];
        for _ in 0..ROUNDS {
            for (i, v) in survivors.iter().enumerate() {
                if failed[i] {
                    continue;
                }
                match probe.time(&v.candidate) {
                    Ok(ns) => times[i].push(ns),
                    Err(e) => {
                        failed[i] = true;
                        r.notes.push(Report {
                            code: codes::PROBE_FAILED,
                            message: format!("{} left out: {e}", v.candidate.kernel),
                        });
                    }
                }
            }
        }
        let load = probe.foreign_load_percent();
        let mut medians: Vec<(String, u64)> = survivors
            .iter()
            .zip(&mut times)
            .zip(&failed)
            .filter(|((_, t), f)| !**f && !t.is_empty())
            .map(|((v, t), _)| (v.candidate.kernel.clone(), median(t)))
            .collect();
        medians.sort_by_key(|(_, m)| *m);
        let Some((winner, best)) = medians.first().cloned() else {
            r.refusal = Some(LaunchError::NoShapeFits {
                family: filter.family.clone(),
                problem: r.problem.clone(),
                verdicts: format!(
                    "error[{}]: every survivor's timing failed",
                    codes::NOTHING_TIMED
                ),
            });
            r.notes.extend(store.take_reports());
            return r;
        };
        let margin = medians.get(1).map(|(_, second)| {
            let lead = second.saturating_sub(best) as u128 * 1000 / (best.max(1) as u128);
            lead.min(u32::MAX as u128) as u32
        });
        r.margin_per_mille = margin;
        r.tie = margin.is_some_and(|m| m < TIE_PER_MILLE);
        r.needs_opt_in = opt_in(&winner);
        r.kernel = Some(winner.clone());
        r.source = Source::Timing;
        r.medians = medians;
        match load {
            Some(p) if p >= foreign_load_limit => r.notes.push(Report {
                code: codes::NOT_PERSISTING,
                message: format!(
                    "other processes held {p}% of the device while it was timed \
                     (limit {foreign_load_limit}%): the choice is used, not stored"
                ),
            }),
            _ => {
                store.remember_for(&name, &build, &winner);
                if let Some(m) = margin {
                    store.remember_for(&margin_name, &build, &m.to_string());
                }
                r.stored = store.persists();
            }
        }
        r.notes.extend(store.take_reports());
        r
    }

    /// Runs the choice for every filter at load (contract: `prewarm`), so that the first real
    /// launch of each problem is the settled choice.
    pub fn prewarm(
        store: &AutotuneStore,
        filters: &[ShapeFilter],
        probe: &mut dyn ShapeProbe,
    ) -> Vec<ShapeResult> {
        filters
            .iter()
            .map(|f| ShapeChoice::choose(store, f, probe))
            .collect()
    }
}

/// The median of `v` (the lower middle of an even count).
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(&mut [5, 1, 3]), 3);
        assert_eq!(super::median(&mut [4, 1, 3, 2]), 2);
    }
}
