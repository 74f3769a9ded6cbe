//! `xpu run PATH... [--backend NAME]`: executes the run blocks of kernel files on a backend and
//! judges their expectations (the runner is [`crate::filetest::runner`]).
//!
//! Prints one line per case, `PASS|FAIL|SKIP  file:line  kernel  backend`, and closes with
//! `N passed, N failed` (`, N skipped` when any were). Exit status: 0 when nothing failed, 1
//! when a case failed (a file that does not parse or verify counts as a failed case), 2 on a
//! usage or I/O error (an unknown or absent backend, an unreadable path).
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
//! A CUDA or HIP device whose driver does not let the process recover from a fault (`XPU-D016`)
//! runs nothing more in that process: `xpu run` goes on in a new process of itself from the
//! next case (a note on stderr), and the last closing line counts every case.

use std::io::Write;
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
    /// Load programs in checked mode: GPU backends bounds-check every buffer, shared and
    /// private access and refuse the launch with XPU-L013 (default: CAJETA_XPU_CHECKED).
    #[arg(long)]
    pub checked: bool,
    /// Test every `align = N` statement the proof does not confirm (XPU-L010). Default on.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub ub_traps: Option<String>,
    /// Internal: the cases an earlier process ran before its device was lost (it runs this
    /// executable again to go on).
    #[arg(long, hide = true, default_value = "0")]
    pub resume_after: usize,
    /// Internal: the passed, failed and skipped counts of the earlier processes.
    #[arg(long, hide = true, value_delimiter = ',', num_args = 3)]
    pub resume_counts: Vec<usize>,
}

pub fn run(args: &RunArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let deadline = if args.deadline == 0.0 {
        None
    } else {
        match crate::deadline::parse_seconds(args.deadline) {
            Some(d) => Some(d),
            None => {
                eprintln!(
                    "xpu run: --deadline {}: a number of seconds, 0 (no limit) or more, at most a year",
                    args.deadline
                );
                return ExitCode::from(2);
            }
        }
    };
    let options = crate::filetest::runner::RunOptions {
        checked: args.checked.then_some(true),
        ub_traps: args.ub_traps.as_deref().map(|v| v == "on"),
    };
    let mut counts = [0; 3];
    for (c, v) in counts.iter_mut().zip(&args.resume_counts) {
        *c = *v;
    }
    let resume = crate::filetest::runner::Resume {
        after: args.resume_after,
        counts,
    };
    let code = crate::filetest::runner::run_command_resumed(
        &args.paths,
        &args.backend,
        deadline,
        options,
        resume,
        &mut out,
    );
    let _ = out.flush();
    ExitCode::from(code)
}
