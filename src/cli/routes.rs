//! `xpu routes FILE --audit`: parses a route table (`crate::tune::routes`), reads the kernel
//! file its `module` line names, and prints every finding of the audit (a format lacking a
//! row, a row naming a kernel the module lacks, a declared shape every row of a pair refuses).
//! Exit status 0 when the audit finds nothing, 1 when it finds something, 2 on a usage or I/O
//! error.

use crate::tune::routes::RouteTable;
use std::path::PathBuf;
use std::process::ExitCode;

/// `xpu routes` arguments.
#[derive(clap::Args)]
pub struct RoutesArgs {
    /// The route table file.
    file: PathBuf,
    /// Walk the table and name what it lacks (the only action).
    #[arg(long, required = true)]
    audit: bool,
}

pub fn routes(args: &RoutesArgs) -> ExitCode {
    let shown = args.file.display().to_string();
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xpu routes: {shown}: {e}");
            return ExitCode::from(2);
        }
    };
    let table = match RouteTable::parse(&text) {
        Ok(t) => t,
        Err(e) => {
            for line in e.lines() {
                eprintln!("{shown}:{line}");
            }
            return ExitCode::from(1);
        }
    };
    let module = match &table.module {
        Some(m) => {
            let path = args
                .file
                .parent()
                .map_or_else(|| PathBuf::from(m), |d| d.join(m));
            let verified = std::fs::read(&path)
                .map_err(|e| format!("{}: {e}", path.display()))
                .and_then(|b| {
                    crate::ir::text::decode(&b)
                        .and_then(crate::ir::text::parse)
                        .and_then(|m| m.verify())
                        .map_err(|d| d.render(&path.display().to_string()))
                });
            match verified {
                Ok(v) => Some(v),
                Err(e) => {
                    eprintln!("xpu routes: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        None => None,
    };
    let findings = table.audit(module.as_ref());
    println!(
        "{} rows, {} formats, {} regimes, {} shapes: {} findings",
        table.rows.len(),
        table.formats.len(),
        table.regimes.len(),
        table.shapes.len(),
        findings.len()
    );
    for f in &findings {
        println!("{shown}: {f}");
    }
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
