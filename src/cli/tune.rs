//! `xpu tune FILE --family NAME --problem MxNxK --store DIR [--backend B] [--json]`: judges a
//! family declared in FILE on one device (every verdict), chooses among the survivors
//! (override, single, store or timing: contract §6.2) and prints the result; `xpu tune --reset
//! DIR` clears a store. `--exhaustive N` also times every survivor over N interleaved rounds
//! and reports the chosen member's speed against the best so found.

use super::json::Json;
use crate::tune::choice::{ShapeChoice, ShapeProbe, ShapeResult, FOREIGN_LOAD_LIMIT};
use crate::tune::filter::{Problem, ShapeFamily, ShapeFilter};
use crate::tune::probe::GemmProbe;
use crate::tune::store::{self, AutotuneStore};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// `xpu tune` arguments.
#[derive(clap::Args)]
pub struct TuneArgs {
    /// The kernel file declaring the family.
    #[arg(required_unless_present = "reset")]
    file: Option<PathBuf>,
    /// The family's name (`family NAME = ...` in FILE).
    #[arg(long, required_unless_present = "reset")]
    family: Option<String>,
    /// The problem, `MxNxK`.
    #[arg(long, required_unless_present = "reset")]
    problem: Option<String>,
    /// The autotune store directory (`<dir>/<deviceKey>/<name>`).
    #[arg(long, required_unless_present = "reset")]
    store: Option<PathBuf>,
    /// The backend (default: the one this process selects).
    #[arg(long)]
    backend: Option<String>,
    /// Print the verdicts and the result as JSON.
    #[arg(long)]
    json: bool,
    /// Also time every survivor over this many interleaved rounds and compare.
    #[arg(long)]
    exhaustive: Option<u32>,
    /// Launches per timed bracket.
    #[arg(long, default_value_t = 1)]
    launches: u32,
    /// Another process's share of the device (percent) from which a timing is not stored.
    #[arg(long, default_value_t = FOREIGN_LOAD_LIMIT)]
    foreign_load_limit: u32,
    /// Clear the store DIR and exit.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "family", "problem", "store"])]
    reset: Option<PathBuf>,
}

fn fail(code: u8, message: String) -> ExitCode {
    eprintln!("xpu tune: {message}");
    ExitCode::from(code)
}

pub fn tune(args: &TuneArgs) -> ExitCode {
    if let Some(dir) = &args.reset {
        return match store::reset(dir) {
            Ok(n) => {
                println!("removed {n} files from {}", dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(2, format!("{}: {e}", dir.display())),
        };
    }
    let (Some(file), Some(family_name), Some(problem), Some(store_dir)) =
        (&args.file, &args.family, &args.problem, &args.store)
    else {
        return fail(
            2,
            "FILE, --family, --problem and --store are required".into(),
        );
    };
    let Some(problem) = Problem::parse(problem) else {
        return fail(
            2,
            format!(
                "error[{}]: `{problem}` is not MxNxK with three positive integers",
                crate::tune::codes::BAD_PROBLEM
            ),
        );
    };
    let shown = file.display().to_string();
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return fail(2, format!("{shown}: {e}")),
    };
    let module = match crate::ir::text::decode(&bytes)
        .and_then(crate::ir::text::parse)
        .and_then(|m| m.verify())
    {
        Ok(m) => m,
        Err(d) => {
            eprintln!("{}", d.render(&shown));
            return ExitCode::from(1);
        }
    };
    let Some(family) = ShapeFamily::from_module(&module, family_name) else {
        return fail(
            1,
            format!(
                "error[{}]: {shown} declares no family `{family_name}`",
                crate::tune::codes::UNKNOWN_FAMILY
            ),
        );
    };
    let device = match super::devices::device_for(args.backend.as_deref()) {
        Ok(d) => d,
        Err(e) => return fail(2, e),
    };
    let program = match device.load(module) {
        Ok(p) => p,
        Err(e) => return fail(1, e.to_string()),
    };
    let filter = ShapeFilter::for_program(&family, problem, &program);
    let store = AutotuneStore::open(Some(store_dir), device.facts());
    let mut probe = match GemmProbe::new(&program, problem, &filter) {
        Ok(p) => p,
        Err(e) => return fail(1, e.to_string()),
    };
    probe.launches_per_bracket = args.launches;
    // The choice alone: a store hit reads two small files.
    let started = Instant::now();
    let result =
        ShapeChoice::choose_with_limit(&store, &filter, &mut probe, args.foreign_load_limit);
    let took = started.elapsed();
    let exhaustive = args
        .exhaustive
        .filter(|_| result.kernel.is_some())
        .map(|rounds| exhaustive_times(&filter, &mut probe, rounds));
    if args.json {
        println!(
            "{}",
            to_json(&filter, &result, &store, took, exhaustive.as_ref()).pretty()
        );
    } else {
        print_text(&filter, &result, &store, took, exhaustive.as_ref());
    }
    match result.refusal {
        Some(_) => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    }
}

/// Every survivor's median over `rounds` interleaved rounds, fastest first.
fn exhaustive_times(
    filter: &ShapeFilter,
    probe: &mut GemmProbe,
    rounds: u32,
) -> Vec<(String, Option<u64>)> {
    let survivors = filter.survivors();
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); survivors.len()];
    for _ in 0..rounds.max(1) {
        for (i, v) in survivors.iter().enumerate() {
            if let Ok(ns) = probe.time(&v.candidate) {
                times[i].push(ns);
            }
        }
    }
    let mut out: Vec<(String, Option<u64>)> = survivors
        .iter()
        .zip(times.iter_mut())
        .map(|(v, t)| {
            t.sort_unstable();
            let median = (!t.is_empty()).then(|| t[(t.len() - 1) / 2]);
            (v.candidate.kernel.clone(), median)
        })
        .collect();
    out.sort_by_key(|(_, m)| m.unwrap_or(u64::MAX));
    out
}

/// The chosen kernel's speed against the exhaustive best (best median / chosen median).
fn speed_ratio(result: &ShapeResult, ex: &[(String, Option<u64>)]) -> Option<f64> {
    let best = ex.first()?.1?;
    let chosen = ex
        .iter()
        .find(|(k, _)| Some(k) == result.kernel.as_ref())?
        .1?;
    Some(best as f64 / chosen.max(1) as f64)
}

fn print_text(
    filter: &ShapeFilter,
    result: &ShapeResult,
    store: &AutotuneStore,
    took: std::time::Duration,
    ex: Option<&Vec<(String, Option<u64>)>>,
) {
    println!(
        "family {} at {} on {} ({})",
        filter.family,
        filter.problem,
        filter.device.backend.map_or("unknown", |b| b.name()),
        filter.device.device_key()
    );
    for v in &filter.verdicts {
        println!("  {v}");
        for c in &v.checks {
            println!("      {c}");
        }
    }
    match (&result.kernel, &result.refusal) {
        (Some(k), _) => println!(
            "chosen {k} from {}{}{}",
            result.source.name(),
            result
                .margin_per_mille
                .map_or(String::new(), |m| format!(", margin {m} per mille")),
            if result.tie { " (a tie)" } else { "" }
        ),
        (None, Some(e)) => println!("refused: {e}"),
        (None, None) => println!("refused"),
    }
    for (k, m) in &result.medians {
        println!("  median {k}: {:.3} ms", *m as f64 / 1e6);
    }
    println!(
        "choice took {:.3} ms; store {} ({})",
        took.as_secs_f64() * 1e3,
        store
            .folder()
            .map_or("memory only".to_string(), |p| p.display().to_string()),
        if result.stored {
            "stored"
        } else if store.persists() {
            "persisting"
        } else {
            "not persisting"
        }
    );
    for n in &result.notes {
        println!("{n}");
    }
    if let Some(ex) = ex {
        println!("exhaustive:");
        for (k, m) in ex {
            println!(
                "  {k}: {}",
                m.map_or("failed".into(), |m| format!("{:.3} ms", m as f64 / 1e6))
            );
        }
        if let Some(r) = speed_ratio(result, ex) {
            println!("chosen / best speed: {r:.3}");
        }
    }
}

fn to_json(
    filter: &ShapeFilter,
    result: &ShapeResult,
    store: &AutotuneStore,
    took: std::time::Duration,
    ex: Option<&Vec<(String, Option<u64>)>>,
) -> Json {
    let verdicts = filter
        .verdicts
        .iter()
        .map(|v| {
            let c = &v.candidate;
            Json::obj(vec![
                ("kernel", Json::str(c.kernel.clone())),
                ("tile_m", Json::num(c.tile_m)),
                ("tile_n", Json::num(c.tile_n)),
                ("threads", Json::num(c.threads)),
                ("k_block", Json::num(c.k_block)),
                ("max_splits", Json::num(c.max_splits)),
                ("survives", Json::Bool(v.survives())),
                ("needs_opt_in", Json::Bool(v.needs_opt_in)),
                (
                    "resident_blocks",
                    Json::opt(v.resident_blocks, |r| Json::Num(r as f64)),
                ),
                (
                    "registers_per_thread",
                    Json::opt(v.facts.registers_per_thread, Json::num),
                ),
                (
                    "shared_bytes",
                    Json::opt(v.facts.shared_bytes, |s| Json::Num(s as f64)),
                ),
                ("spill_bytes", Json::opt(v.facts.spill_bytes, Json::num)),
                (
                    "checks",
                    Json::Arr(
                        v.checks
                            .iter()
                            .map(|k| {
                                Json::obj(vec![
                                    ("rule", Json::str(k.rule.name())),
                                    ("need", Json::opt(k.need, |n| Json::Num(n as f64))),
                                    ("limit", Json::opt(k.limit, |n| Json::Num(n as f64))),
                                    ("passed", Json::Bool(k.passed)),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let mut pairs = vec![
        ("family", Json::str(filter.family.clone())),
        ("problem", Json::str(filter.problem.to_string())),
        ("device_key", Json::str(filter.device.device_key())),
        ("verdicts", Json::Arr(verdicts)),
        ("kernel", Json::opt(result.kernel.clone(), Json::Str)),
        ("source", Json::str(result.source.name())),
        (
            "margin_per_mille",
            Json::opt(result.margin_per_mille, Json::num),
        ),
        ("tie", Json::Bool(result.tie)),
        ("needs_opt_in", Json::Bool(result.needs_opt_in)),
        (
            "refusal",
            Json::opt(result.refusal.as_ref(), |e| Json::str(e.to_string())),
        ),
        (
            "medians_ns",
            Json::Obj(
                result
                    .medians
                    .iter()
                    .map(|(k, m)| (k.clone(), Json::Num(*m as f64)))
                    .collect(),
            ),
        ),
        ("stored", Json::Bool(result.stored)),
        ("persists", Json::Bool(store.persists())),
        ("choice_ms", Json::Num(took.as_secs_f64() * 1e3)),
        (
            "notes",
            Json::Arr(
                result
                    .notes
                    .iter()
                    .map(|n| Json::str(n.to_string()))
                    .collect(),
            ),
        ),
    ];
    if let Some(ex) = ex {
        pairs.push((
            "exhaustive_ns",
            Json::Obj(
                ex.iter()
                    .map(|(k, m)| (k.clone(), Json::opt(*m, |m| Json::Num(m as f64))))
                    .collect(),
            ),
        ));
        pairs.push((
            "chosen_over_best_speed",
            Json::opt(speed_ratio(result, ex), Json::Num),
        ));
    }
    Json::obj(pairs)
}
