//! `xpu run PATH... [--backend NAME]`: executes the run blocks of kernel files on a backend and
//! judges their expectations (the runner is [`crate::filetest::runner`]).
//!
//! Prints one line per case, `PASS|FAIL|SKIP  file:line  kernel  backend`, and closes with
//! `N passed, N failed` (`, N skipped` when any were). Exit status: 0 when nothing failed, 1
//! when a case failed (a file that does not parse or verify counts as a failed case), 2 on a
//! usage or I/O error (an unknown or absent backend, an unreadable path).

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
}

pub fn run(args: &RunArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = crate::filetest::runner::run_command(&args.paths, &args.backend, &mut out);
    let _ = out.flush();
    ExitCode::from(code)
}
