//! `xpu check FILE... [--json]`: parse and verify kernel files (folders are walked for `.xk`
//! files).
//!
//! Each problem prints on stderr as `path:line:col: error[CODE]: message`, parser problems
//! (`XPU-P...`) first for a file that does not parse, verifier problems otherwise. Exit
//! status: 0 when every file is clean, 1 when any has a problem, 2 on an I/O error (an
//! unreadable file or folder) — I/O errors win over problems.
//!
//! With `--json` the same goes to stdout as one JSON object (docs/json.md): `files` (the count
//! checked), `diagnostics` (each `{file, line, column, code, message}`), `io_errors` (each
//! `{file, message}`); the exit status is the same.

use crate::ir::text;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Reads, parses and verifies the file at `path`: its diagnostics, or the I/O error.
fn check_path(path: &Path) -> std::io::Result<Result<(), crate::ir::Diagnostics>> {
    let bytes = std::fs::read(path)?;
    Ok(check_source(&bytes))
}

/// Parses and verifies one file's bytes.
pub fn check_source(bytes: &[u8]) -> Result<(), crate::ir::Diagnostics> {
    let src = text::decode(bytes)?;
    let module = text::parse(src)?;
    module.verify().map(|_| ())
}

pub fn check(paths: &[PathBuf], json: bool) -> ExitCode {
    let files = match crate::filetest::kernel_files(paths) {
        Ok(files) => files,
        Err(e) => {
            if json {
                let doc = serde_json::json!({
                    "files": 0,
                    "diagnostics": [],
                    "io_errors": [{"file": null, "message": e.to_string()}],
                });
                println!("{doc}");
            } else {
                eprintln!("xpu check: error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let (mut problems, mut io) = (false, false);
    let mut diagnostics = Vec::new();
    let mut io_errors = Vec::new();
    for path in &files {
        let shown = path.display().to_string();
        match check_path(path) {
            Ok(Ok(())) => {}
            Ok(Err(d)) => {
                problems = true;
                if json {
                    for d in &d.0 {
                        diagnostics.push(serde_json::json!({
                            "file": shown,
                            "line": d.span.line,
                            "column": d.span.col,
                            "code": d.code,
                            "message": d.message,
                        }));
                    }
                } else {
                    eprintln!("{}", d.render(&shown));
                }
            }
            Err(e) => {
                io = true;
                if json {
                    io_errors.push(serde_json::json!({"file": shown, "message": e.to_string()}));
                } else {
                    eprintln!("{shown}: error: {e}");
                }
            }
        }
    }
    if json {
        let doc = serde_json::json!({
            "files": files.len(),
            "diagnostics": diagnostics,
            "io_errors": io_errors,
        });
        println!("{doc}");
    }
    ExitCode::from(if io {
        2
    } else if problems {
        1
    } else {
        0
    })
}
