//! `xpu run`: execute run blocks. (Owned by the interpreter work; placeholder.)

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
    let _ = args;
    eprintln!("xpu run: not built yet");
    ExitCode::from(2)
}
