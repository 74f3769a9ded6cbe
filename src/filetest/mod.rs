//! Kernel test files (`tests/filetests/**/*.xk`): the run blocks they carry and, in the
//! runner, how those are executed and judged.

#![warn(missing_docs)]

pub mod runner;

/// The run blocks, which the text format parses (`ir::text::run`).
pub use crate::ir::text::run as spec;

use std::path::PathBuf;

/// Every `.xk` file under `paths` (files as given, folders walked in sorted order).
pub fn kernel_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|x| x == "xk") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut out)?;
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}
