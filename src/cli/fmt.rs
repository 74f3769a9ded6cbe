//! `xpu fmt`: print the canonical form. (Owned by the text-format work; placeholder.)

use std::path::Path;
use std::process::ExitCode;

pub fn fmt(file: &Path) -> ExitCode {
    let _ = file;
    eprintln!("xpu fmt: not built yet");
    ExitCode::from(2)
}
