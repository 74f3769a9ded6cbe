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
//!
//! `--bundle BUNDLE` loads each file's module from a bundle (`xpu build FILE -o BUNDLE`)
//! instead of lowering it, and prints a line per file and device: the kernels with code for
//! that device in the bundle, and how many the run lowered after all (docs/bundle.md).
//!
//! A CUDA or HIP device whose driver does not let the process recover from a fault (`XPU-D016`)
//! runs nothing more in that process: `xpu run` goes on in a new process of itself from the
//! next case (a note on stderr), and the last closing line counts every case.

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
    /// Load each file's module from this bundle (`xpu build FILE -o BUNDLE`) instead of
    /// lowering it: the bundle's code for the device runs, and a line per file says how many
    /// kernels had to be lowered after all. A file that is not the bundle's module fails with
    /// XPU-B013.
    #[arg(long, value_name = "BUNDLE")]
    pub bundle: Option<PathBuf>,
    /// Internal: the cases an earlier process ran before its device was lost (it runs this
    /// executable again to go on).
    #[arg(long, hide = true, default_value = "0")]
    pub resume_after: usize,
    /// Internal: the passed, failed and skipped counts of the earlier processes.
    #[arg(long, hide = true, num_args = 3)]
    pub resume_counts: Vec<usize>,
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
    let mut runner = match select_devices(&args.backend).and_then(Runner::new) {
        Ok(r) => r
            .with_deadline(deadline)
            .with_run_options(options)
            .with_resume(args.resume_after),
        Err(e) => return fail(&mut out, e.to_string()),
    };
    if let Some(path) = &args.bundle {
        match crate::bundle::Bundle::open(path) {
            Ok(b) => runner = runner.with_bundle(b),
            Err(e) => return fail(&mut out, e.to_string()),
        }
    }
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
    // A process going on after one that lost its device starts from that one's counts.
    let mut summary = Summary::default();
    for (c, v) in [
        &mut summary.passed,
        &mut summary.failed,
        &mut summary.skipped,
    ]
    .into_iter()
    .zip(&args.resume_counts)
    {
        *c = *v;
    }
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
        for line in runner.take_bundle_lines() {
            if args.json {
                let j = serde_json::json!({"type": "bundle", "line": line});
                let _ = writeln!(out, "{j}");
            } else if let Some(bar) = &bar {
                bar.println(line);
            } else {
                let _ = writeln!(out, "{line}");
            }
        }
        if let Err(e) = result {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            return fail(&mut out, e.to_string());
        }
        // A CUDA/HIP device the driver does not let this process recover (XPU-D016): the
        // run goes on in a new process of this executable from the next case.
        if let Some(at) = runner.lost_at() {
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            let _ = out.flush();
            return ExitCode::from(go_on_in_a_new_process(at, &summary));
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

/// Runs this executable again with this process's arguments, going on after case `at` with
/// `summary`'s counts; its exit status (2 if it cannot start).
fn go_on_in_a_new_process(at: usize, summary: &Summary) -> u8 {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        if a == "--resume-after" {
            it.next();
            continue;
        }
        if a == "--resume-counts" {
            it.nth(2);
            continue;
        }
        args.push(a);
    }
    eprintln!(
        "xpu run: the device could not be recovered after a fault (XPU-D016); going on in a \
         new process after case {at}"
    );
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("xpu run: cannot start a new process: {e}");
            return 2;
        }
    };
    let status = std::process::Command::new(exe)
        .args(args)
        .arg("--resume-after")
        .arg(at.to_string())
        .arg("--resume-counts")
        .args([summary.passed, summary.failed, summary.skipped].map(|n| n.to_string()))
        .status();
    match status {
        Ok(s) => s.code().map_or(2, |c| c.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("xpu run: cannot start a new process: {e}");
            2
        }
    }
}
