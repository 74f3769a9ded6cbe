//! `xpu run PATH... [--backend NAME] [--json]`: executes the run blocks of kernel files on a
//! backend and judges their expectations (the runner is [`crate::filetest::runner`]).
//!
//! Prints one line per case, `PASS|FAIL|SKIP  file:line  kernel  backend`, and closes with
//! `N passed, N failed` (`, N skipped` when any were). Exit status: 0 when nothing failed, 1
//! when a case failed (a file that does not parse or verify counts as a failed case), 2 on a
//! usage or I/O error (an unknown or absent backend, an unreadable path).
//!
//! `--json` prints JSON lines instead (docs/json.md): one object per case as it completes
//! (`{"type": "case", file, line, kernel, backend, outcome, detail}`), then the totals
//! (`{"type": "totals", passed, failed, skipped, total}`); an error that stops the run is
//! `{"type": "error", message}`. The exit status is the same.
//!
//! Over more than one file with stdout a terminal (and without `--json`), a progress bar
//! counts the files; the case lines print above it.
//!
//! `--deadline SECONDS` (default 60) bounds every launch whose run block names no
//! `deadline = SECONDS;`: the interpreter and the CPU cancel a launch past it, GPU backends
//! report it, and the case ends refused with `XPU-L018` (a failure unless it expects that
//! refusal). `--deadline 0` sets no limit.
//!
//! `--ub-traps on|off` (default on) tests unconfirmed `align = N` statements (`XPU-L010`);
//! `--checked` loads programs in checked mode (GPU bounds checks, `XPU-L013`); see
//! docs/checked-mode.md. A case of `expect ub` on a GPU backend always runs checked.

use crate::filetest::runner::{select_devices, RunOptions, Runner, Summary};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Files or folders (walked for `.xk` files).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The backend to run on: `interp`, `cpu`, `cuda`, `hip`, `vulkan`, `all`, or `best`.
    #[arg(long, default_value = "best")]
    pub backend: String,
    /// Seconds a launch may run when its run block names no `deadline` (0: no limit). A
    /// launch past it is refused with XPU-L018.
    #[arg(long, default_value = "60", value_name = "SECONDS")]
    pub deadline: f64,
    /// Print JSON lines (one object per case, then the totals) instead (docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// Load programs in checked mode: GPU backends bounds-check every buffer, shared and
    /// private access and refuse the launch with XPU-L013 (default: CAJETA_XPU_CHECKED).
    #[arg(long)]
    pub checked: bool,
    /// Test every `align = N` statement the proof does not confirm (XPU-L010). Default on.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub ub_traps: Option<String>,
}

pub fn run(args: &RunArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut out = stdout.lock();
    let fail = |out: &mut dyn Write, message: String| {
        if args.json {
            let _ = writeln!(
                out,
                "{}",
                serde_json::json!({"type": "error", "message": message})
            );
        } else {
            let _ = out.flush();
            eprintln!("xpu run: {message}");
        }
        ExitCode::from(2)
    };
    let deadline = if args.deadline == 0.0 {
        None
    } else {
        match crate::deadline::parse_seconds(args.deadline) {
            Some(d) => Some(d),
            None => {
                return fail(
                    &mut out,
                    format!(
                        "--deadline {}: a number of seconds, 0 (no limit) or more, at most a year",
                        args.deadline
                    ),
                )
            }
        }
    };
    let options = RunOptions {
        checked: args.checked.then_some(true),
        ub_traps: args.ub_traps.as_deref().map(|v| v == "on"),
    };
    let runner = match select_devices(&args.backend).and_then(Runner::new) {
        Ok(r) => r.with_deadline(deadline).with_run_options(options),
        Err(e) => return fail(&mut out, e.to_string()),
    };
    let files = match crate::filetest::kernel_files(&args.paths) {
        Ok(f) if f.is_empty() => {
            return fail(&mut out, "no .xk files under the given paths".into())
        }
        Ok(f) => f,
        Err(e) => return fail(&mut out, e.to_string()),
    };
    let bar = (terminal && !args.json && files.len() > 1).then(|| {
        let bar = indicatif::ProgressBar::new(files.len() as u64);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} files  {msg}")
        {
            bar.set_style(style);
        }
        bar
    });
    let mut summary = Summary::default();
    for file in &files {
        if let Some(bar) = &bar {
            bar.set_message(file.display().to_string());
        }
        let result = runner.run_file(file, &mut |case| {
            summary.add(case);
            // What the case's launches printed (the oracle's too), before its verdict.
            for line in crate::hal::debug::take_printed() {
                if args.json {
                    let j = serde_json::json!({"type": "print", "line": line.to_string()});
                    writeln!(out, "{j}")?;
                } else if let Some(bar) = &bar {
                    bar.println(format!("  print {line}"));
                } else {
                    writeln!(out, "  print {line}")?;
                }
            }
            if args.json {
                writeln!(out, "{}", case.to_json())
            } else if let Some(bar) = &bar {
                bar.println(case.to_string());
                Ok(())
            } else {
                writeln!(out, "{case}")
            }
        });
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        if let Err(e) = result {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            return fail(&mut out, e.to_string());
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({
                "type": "totals",
                "passed": summary.passed,
                "failed": summary.failed,
                "skipped": summary.skipped,
                "total": summary.total(),
            })
        );
    } else {
        let _ = writeln!(out, "{}", summary.closing_line());
    }
    let _ = out.flush();
    ExitCode::from(u8::from(summary.failed > 0))
}
