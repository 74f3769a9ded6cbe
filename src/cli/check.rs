//! `xpu check FILE...`: parse and verify kernel files (folders are walked for `.xk` files).
//!
//! Each problem prints on stderr as `path:line:col: error[CODE]: message`, parser problems
//! (`XPU-P...`) first for a file that does not parse, verifier problems otherwise. Exit
//! status: 0 when every file is clean, 1 when any has a problem, 2 on an I/O error (an
//! unreadable file or folder) — I/O errors win over problems.

use crate::ir::text;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What checking one file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    /// The rendered diagnostics, one per line.
    Problems(String),
    /// The file could not be read.
    Io(String),
}

/// Parses and verifies the file at `path`.
pub fn check_file(path: &Path) -> Outcome {
    let shown = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return Outcome::Io(format!("{shown}: error: {e}")),
    };
    match check_source(&bytes) {
        Ok(()) => Outcome::Clean,
        Err(d) => Outcome::Problems(d.render(&shown)),
    }
}

/// Parses and verifies one file's bytes.
pub fn check_source(bytes: &[u8]) -> Result<(), crate::ir::Diagnostics> {
    let src = text::decode(bytes)?;
    let module = text::parse(src)?;
    module.verify().map(|_| ())
}

pub fn check(paths: &[PathBuf]) -> ExitCode {
    let files = match crate::filetest::kernel_files(paths) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("xpu check: error: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut problems, mut io) = (false, false);
    for path in &files {
        match check_file(path) {
            Outcome::Clean => {}
            Outcome::Problems(text) => {
                eprintln!("{text}");
                problems = true;
            }
            Outcome::Io(text) => {
                eprintln!("{text}");
                io = true;
            }
        }
    }
    ExitCode::from(if io {
        2
    } else if problems {
        1
    } else {
        0
    })
}
