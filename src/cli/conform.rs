//! `xpu conform DIR [--held FILE] [--budget SECONDS] [--json]`: replays every launch record of
//! `DIR` (written under `CAJETA_XPU_RECORD`) through the interpreter and compares
//! ([`crate::record::replay`]).
//!
//! Prints one line per record that does not simply agree (a disagreement names the kernel,
//! the buffer, the first differing index, expected and actual values and the record file),
//! the stale held kernels, the records the budget did not reach, and a closing count; `--json`
//! prints the same as one JSON object. Exit status: 0 when every replayed record agrees
//! (within the held list's ulps; undefined behaviour reported by the interpreter is shown,
//! not failed), 1 on a disagreement, a refusal or a stale held kernel, 2 on a usage or I/O
//! error.

use crate::record::replay::{replay_dir, Options};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ConformArgs {
    /// A folder of launch records.
    pub dir: PathBuf,
    /// The held list: `KERNEL ulps=N -- REASON` or `KERNEL excused -- REASON` per line.
    #[arg(long, value_name = "FILE")]
    pub held: Option<PathBuf>,
    /// Seconds the replay may take; records not reached are listed.
    #[arg(long, value_name = "SECONDS")]
    pub budget: Option<f64>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn conform(args: &ConformArgs) -> ExitCode {
    let budget = match args.budget {
        None => None,
        Some(s) => match crate::deadline::parse_seconds(s) {
            Some(d) => Some(d),
            None => {
                eprintln!("xpu conform: --budget {s}: a number of seconds, at most a year");
                return ExitCode::from(2);
            }
        },
    };
    let options = Options {
        held: args.held.clone(),
        budget,
    };
    match replay_dir(&args.dir, &options) {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            ExitCode::from(if report.ok() { 0 } else { 1 })
        }
        Err(e) => {
            eprintln!("xpu conform: {e}");
            ExitCode::from(2)
        }
    }
}
