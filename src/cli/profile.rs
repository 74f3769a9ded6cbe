//! `xpu profile [--out FILE] -- COMMAND [ARGS...]`: runs `COMMAND` with the profiler armed
//! (`CAJETA_PROFILER=1`, `CAJETA_PROFILER_OUT=FILE`, default `xpu-trace.json`), then prints
//! the trace's summary per kernel: count, total, median, share of the device time, tier
//! ([`crate::profile::summary`]). The trace opens in Perfetto. Exit status: the command's, or
//! 2 when it could not be started or left no readable trace.

use crate::profile::{summary, ProfileError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ProfileArgs {
    /// Where the trace goes.
    #[arg(long, value_name = "FILE", default_value = "xpu-trace.json")]
    pub out: PathBuf,
    /// The command to profile, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn profile(args: &ProfileArgs) -> ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("xpu profile: {}", ProfileError::NoCommand);
        return ExitCode::from(2);
    };
    let status = std::process::Command::new(program)
        .args(rest)
        .env("CAJETA_PROFILER", "1")
        .env("CAJETA_PROFILER_OUT", &args.out)
        .status();
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let e = ProfileError::Spawn {
                command: args.command.join(" "),
                message: e.to_string(),
            };
            eprintln!("xpu profile: {e}");
            return ExitCode::from(2);
        }
    };
    match summary::read(&args.out) {
        Ok(s) => {
            println!("{s}");
            println!("trace: {}", args.out.display());
        }
        Err(e) => {
            eprintln!("xpu profile: {e}");
            return ExitCode::from(2);
        }
    }
    ExitCode::from(status.code().map_or(2, |c| c.clamp(0, 255) as u8))
}
