//! `xpu census DIR --backend B [--table FILE] [--records RDIR] [--write-table ITEM]`: runs the
//! kernel files under `DIR` on backend `B` (as `xpu run` does, quietly), optionally replays
//! the launch records of `RDIR`, and takes the census of `B` ([`crate::record::census`]):
//! every kernel registered there must have been value-checked — by a file test that compared
//! its output, or a record that replayed and agreed — or be excused in the table
//! (`tests/census/<B>.txt` by default).
//!
//! Prints each uncovered kernel and each stale excuse, then a closing count. `--write-table
//! ITEM` writes the table that would pass instead (new excuses against `ITEM`). Exit status:
//! 0 when the census passes, 1 when a kernel is uncovered or an excuse stale, 2 on a usage or
//! I/O error.

use crate::record::census;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CensusArgs {
    /// Files or folders of kernel files (walked for `.xk` files).
    pub dir: PathBuf,
    /// The backend: `interp`, `cpu`, `cuda`, `hip` or `vulkan`.
    #[arg(long)]
    pub backend: String,
    /// The table of excused kernels (default `tests/census/<backend>.txt`).
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// Also replay the launch records of this folder; those that agree count as checked.
    #[arg(long, value_name = "RDIR")]
    pub records: Option<PathBuf>,
    /// Write the table that would make the census pass, excusing new kernels against ITEM.
    #[arg(long, value_name = "ITEM")]
    pub write_table: Option<String>,
}

pub fn census(args: &CensusArgs) -> ExitCode {
    let Some(backend) = crate::Backend::from_name(&args.backend) else {
        eprintln!(
            "xpu census: {}",
            crate::DeviceError::UnknownBackend {
                name: args.backend.clone()
            }
        );
        return ExitCode::from(2);
    };
    let table_path = args
        .table
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("tests/census/{}.txt", backend.name())));
    let table = match census::read_table(&table_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xpu census: {e}");
            return ExitCode::from(2);
        }
    };
    let mut sink = std::io::sink();
    let code = crate::filetest::runner::run_command(
        std::slice::from_ref(&args.dir),
        backend.name(),
        Some(std::time::Duration::from_secs(60)),
        crate::filetest::runner::RunOptions::default(),
        &mut sink,
    );
    if code == 2 {
        eprintln!(
            "xpu census: the kernel files under {} could not be run",
            args.dir.display()
        );
        return ExitCode::from(2);
    }
    if let Some(records) = &args.records {
        if let Err(e) = crate::record::replay::replay_dir(records, &Default::default()) {
            eprintln!("xpu census: {e}");
            return ExitCode::from(2);
        }
    }
    let result = census::take(backend.name(), &table);
    if let Some(item) = &args.write_table {
        if let Some(parent) = table_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&table_path, result.table_text(&table, item)) {
            eprintln!("xpu census: {}: {e}", table_path.display());
            return ExitCode::from(2);
        }
        println!("wrote {}", table_path.display());
        return ExitCode::SUCCESS;
    }
    println!("{result}");
    ExitCode::from(if result.ok() { 0 } else { 1 })
}
