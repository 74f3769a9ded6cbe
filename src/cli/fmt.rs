//! `xpu fmt FILE`: print a kernel file in canonical form on stdout (the module, then its run
//! blocks). Comments are not part of the IR and are dropped. Exit 0 on success, 1 with
//! diagnostics on stderr when the file does not parse, 2 when it cannot be read.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::ir::text::decode;
use crate::ir::{parse_file, print_file};

pub fn fmt(file: &Path) -> ExitCode {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xpu fmt: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let path = file.display().to_string();
    let parsed = decode(&bytes).and_then(parse_file);
    match parsed {
        Ok((module, runs)) => {
            let text = print_file(&module, &runs);
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .is_err()
            {
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(diags) => {
            eprintln!("{}", diags.render(&path));
            ExitCode::from(1)
        }
    }
}
