//! The command line. Exit codes: 0 success, 1 a problem in the input (diagnostics printed) or
//! a failed case, 2 a usage or I/O error. No input makes `xpu` panic.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod bench;
mod build;
mod build_bundle;
mod census;
mod check;
mod conform;
mod devices;
mod fmt;
mod gated;
pub mod json;
mod profile;
mod repl;
mod routes;
mod run;
mod tune;

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
        /// Print one JSON object on stdout instead (docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a kernel file in canonical form.
    Fmt { file: PathBuf },
    /// Execute the run blocks of kernel files and compare with their expectations.
    Run(run::RunArgs),
    /// Benchmarks against the peers that are the limit, measured in the same run (`xpu bench
    /// cpu|vulkan|cuda|all [--json] [--plot FILE.svg]`, `xpu bench first-result`).
    Bench(bench::BenchArgs),
    /// Lower files' kernels for the declared backends and apply the build gates
    /// (`--backends cpu,cuda,amdgpu,vulkan`), or report one backend's footprint (`--backend`).
    Build(build::BuildArgs),
    /// An interactive session: define kernels, make buffers, launch, look at the code
    /// (docs/repl.md). From a pipe it reads a script.
    Repl(repl::ReplArgs),
    /// Print a shell completion script: `xpu completions bash > /etc/bash_completion.d/xpu`,
    /// `xpu completions zsh > ~/.zfunc/_xpu`, `xpu completions fish > ~/.config/fish/completions/xpu.fish`.
    Completions {
        /// The shell: bash, zsh, fish (also elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Replay launch records through the interpreter and compare (`CAJETA_XPU_RECORD`).
    Conform(conform::ConformArgs),
    /// Require every registered kernel to be value-checked or excused (`tests/census/`).
    Census(census::CensusArgs),
    /// Run a command with the profiler armed and summarise its trace per kernel.
    Profile(profile::ProfileArgs),
    /// Every device present: its geometry, capabilities, device key and calibration.
    Devices(devices::DevicesArgs),
    /// Judge a shape family on a device and choose among its survivors (`--reset DIR` clears a store).
    Tune(tune::TuneArgs),
    /// Measure the device's calibration and store it in the cache directory.
    Calibrate(devices::CalibrateArgs),
    /// Audit a route table (`--audit`).
    Routes(routes::RoutesArgs),
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
    let code = match cli.command {
        Command::Check { paths, json } => check::check(&paths, json),
        Command::Fmt { file } => fmt::fmt(&file),
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Build(args) => build::build(&args),
        Command::Repl(args) => repl::repl(&args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "xpu", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Conform(args) => conform::conform(&args),
        Command::Census(args) => census::census(&args),
        Command::Profile(args) => profile::profile(&args),
        Command::Devices(args) => devices::devices(&args),
        Command::Tune(args) => tune::tune(&args),
        Command::Calibrate(args) => devices::calibrate(&args),
        Command::Routes(args) => routes::routes(&args),
    };
    // Launch records and the profiler's trace are written as the command ends.
    let mut code = code;
    match crate::record::finish() {
        Ok(f) if f.conformance.as_ref().is_some_and(|r| !r.ok()) => code = ExitCode::from(1),
        Ok(_) => {}
        Err(e) => eprintln!("xpu: {e}"),
    }
    if let Err(e) = crate::profile::finish() {
        eprintln!("xpu: {e}");
    }
    code
}
