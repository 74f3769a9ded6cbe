//! `xpu check`: parse and verify. (Owned by the verifier work; placeholder until it lands.)

use std::path::PathBuf;
use std::process::ExitCode;

pub fn check(paths: &[PathBuf]) -> ExitCode {
    let _ = paths;
    eprintln!("xpu check: not built yet");
    ExitCode::from(2)
}
