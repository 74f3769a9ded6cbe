//! The command line. Exit codes: 0 success, 1 a problem in the input (diagnostics printed) or
//! a failed case, 2 a usage or I/O error. No input makes `xpu` panic.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod bench;
mod build;
mod build_bundle;
mod check;
mod fmt;
mod gated;
mod run;

#[derive(Parser)]
#[command(
    name = "xpu",
    version,
    about = "Typed GPU-style kernels on the host CPU and GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and verify kernel files; print one `path:line:col: error[CODE]: message` per problem.
    Check {
        /// Files or folders (walked for `.xk` files).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Print a kernel file in canonical form.
    Fmt { file: PathBuf },
    /// Execute the run blocks of kernel files and compare with their expectations.
    Run(run::RunArgs),
    /// GPU benchmarks against peers measured in the same run (`xpu bench cuda`).
    Bench(bench::BenchArgs),
    /// Lower files' kernels for the declared backends and apply the build gates
    /// (`--backends cpu,cuda,amdgpu,vulkan`), or report one backend's footprint (`--backend`).
    Build(build::BuildArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Check { paths } => check::check(&paths),
        Command::Fmt { file } => fmt::fmt(&file),
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Build(args) => build::build(&args),
    }
}
