//! The fuzzing kit: random kernels, a cross-backend comparison, and a minimiser, public so
//! that an outside crate can fuzz the backends (`examples/fuzz_interp.rs`).
//!
//! - [`gen`]: the seeded kernel generator (one copy; the project's fuzz tests use it).
//! - `strategy` (feature `fuzz`): the generator as `proptest` strategies, and random
//!   launch geometry.
//! - [`compare`]: runs a launch on each backend and on the interpreter and reports the first
//!   disagreement as a kernel file ([`Disagreement::file`]).
//! - [`minimise`]: shrinks a disagreeing kernel file, line by line and block by block, to a
//!   small `.xk` that still disagrees.
//!
//! ```no_run
//! use xpu::{fuzz, Backend, Device};
//! let backends = [Device::open(Backend::Cpu).unwrap()];
//! for seed in 0..200 {
//!     let case = fuzz::gen::generate_for_cpu(seed);
//!     let module = std::sync::Arc::new(xpu::ir::parse(&case.src).unwrap().verify().unwrap());
//!     if let Err(d) = fuzz::compare(&module, &case.run_spec(seed).unwrap(), &backends) {
//!         let small = fuzz::minimise(&d.file, |text| fuzz::disagrees(text, &backends));
//!         panic!("{d}\nminimised:\n{small}");
//!     }
//! }
//! ```

#![warn(missing_docs)]

pub mod gen;
#[cfg(feature = "fuzz")]
pub mod strategy;

use crate::filetest::runner::{run_case, Outcome};
use crate::hal::Backend;
use crate::ir::text::run::{Expect, RunSpec};
use crate::ir::{Access, Type, VerifiedModule};
use crate::runtime::device::Device;
use std::sync::Arc;

/// How a launch that every backend agreed on went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every backend that ran the launch agreed with the interpreter; `skipped` names those
    /// that could not run it (a capability or limit they lack), with the reason.
    Agree {
        /// The backends that could not run the launch, each with the reason.
        skipped: Vec<(Backend, String)>,
    },
    /// The interpreter gives the launch no meaning (undefined behaviour, a construct it
    /// refuses): nothing to compare, with its report.
    Undefined(String),
}

/// The first backend that disagreed with the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The backend that disagreed.
    pub backend: Backend,
    /// What differed (the first mismatching index, or the backend's error).
    pub detail: String,
    /// The module and launch as a kernel file whose run block compares every written buffer
    /// with the interpreter: `xpu run FILE --backend NAME` reproduces it.
    pub file: String,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} disagrees with the interpreter: {}\n{}",
            self.backend.name(),
            self.detail,
            self.file
        )
    }
}

/// Runs `launch` (a run block: kernel, geometry, arguments; its own expectations are
/// replaced) on every device of `backends` and on the interpreter, comparing every buffer the
/// kernel can write with the interpreter's (floats bit for bit, within the block's `ulps`).
///
/// ```
/// use std::sync::Arc;
/// use xpu::fuzz::{self, Verdict};
/// use xpu::{Backend, Device};
///
/// let (module, runs) = xpu::ir::parse_file(
///     "kernel k(y: buf<i32, rw>, x: buf<i32>) {
///          let i: u32 = global_id.x;
///          y[i] = x[i] * 3 - 1;
///      }
///      run k {
///          grid = [2];
///          block = [8];
///          arg y = fill(16, 0);
///          arg x = iota(16);
///      }",
/// )
/// .unwrap();
/// let module = Arc::new(module.verify().unwrap());
/// // The CPU backend where this machine has it (x86-64, aarch64); any device list works.
/// let backends: Vec<Device> = Device::open(Backend::Cpu).into_iter().collect();
/// match fuzz::compare(&module, &runs[0], &backends) {
///     Ok(Verdict::Agree { skipped }) => assert!(skipped.is_empty()),
///     Ok(Verdict::Undefined(report)) => panic!("no meaning: {report}"),
///     // `d.file` is a kernel file that `xpu run` reproduces the disagreement with.
///     Err(d) => panic!("{d}"),
/// }
/// ```
pub fn compare(
    module: &Arc<VerifiedModule>,
    launch: &RunSpec,
    backends: &[Device],
) -> Result<Verdict, Disagreement> {
    let mut spec = launch.clone();
    spec.expects.clear();
    let interp = match Device::open(Backend::Interp).and_then(|d| d.load(module)) {
        Ok(p) => p,
        Err(e) => return Ok(Verdict::Undefined(e.to_string())),
    };
    // The interpreter first, with no expectation: does the launch have a meaning?
    if let Outcome::Fail(report) = run_case(&spec, &interp, &interp) {
        return Ok(Verdict::Undefined(report));
    }
    if let Some(f) = crate::hal::kernel_function(module, &spec.kernel) {
        for p in &f.params {
            if let Type::Buffer {
                access: Access::ReadWrite,
                ..
            } = p.ty
            {
                spec.expects.push(Expect::Interp {
                    name: p.name.clone(),
                    span: crate::ir::Span::UNKNOWN,
                });
            }
        }
    }
    let mut skipped = Vec::new();
    for device in backends {
        let backend = device.backend();
        let disagree = |detail: String| Disagreement {
            backend,
            detail,
            file: crate::ir::text::print_file(module.module(), std::slice::from_ref(&spec)),
        };
        let program = device.load(module).map_err(|e| disagree(e.to_string()))?;
        match run_case(&spec, &program, &interp) {
            Outcome::Pass => {}
            Outcome::Skip(reason) => skipped.push((backend, reason)),
            // The interpreter at the width this backend built the kernel at found undefined
            // behaviour: no meaning to compare.
            Outcome::Fail(detail) if detail.starts_with("the interpreter: ") => {
                return Ok(Verdict::Undefined(detail))
            }
            Outcome::Fail(detail) => return Err(disagree(detail)),
        }
    }
    Ok(Verdict::Agree { skipped })
}

/// Whether the kernel file `text` (a module and its first run block) parses, verifies, has a
/// meaning on the interpreter, and some device of `backends` disagrees with it: the usual
/// predicate of [`minimise`].
pub fn disagrees(text: &str, backends: &[Device]) -> bool {
    let Ok((module, specs)) = crate::ir::parse_file(text) else {
        return false;
    };
    let (Ok(module), Some(spec)) = (module.verify(), specs.first()) else {
        return false;
    };
    compare(&Arc::new(module), spec, backends).is_err()
}

/// Shrinks the kernel file `text` while `keep` holds of it: repeatedly drops one line of the
/// module, or one whole block (a line opening `{` through the line that closes it), and keeps
/// the smaller file when `keep` still holds, until no single removal does. Run blocks are
/// kept whole. The result is the smallest file found (`text` itself when nothing can go).
pub fn minimise(text: &str, mut keep: impl FnMut(&str) -> bool) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    loop {
        let mut progress = false;
        let mut i = 0;
        while i < lines.len() {
            let candidates = removals(&lines, i);
            let mut removed = false;
            for (from, to) in candidates {
                let trial: Vec<String> =
                    lines[..from].iter().chain(&lines[to..]).cloned().collect();
                let joined = trial.join("\n") + "\n";
                if keep(&joined) {
                    lines = trial;
                    removed = true;
                    progress = true;
                    break;
                }
            }
            if !removed {
                i += 1;
            }
        }
        if !progress {
            break;
        }
    }
    lines.join("\n") + "\n"
}

/// The line ranges `[from, to)` to try removing at line `i`: the block it opens (through its
/// closing line), then the line alone. Lines of run blocks are not offered.
fn removals(lines: &[String], i: usize) -> Vec<(usize, usize)> {
    let line = lines[i].trim();
    if line.is_empty() {
        return vec![(i, i + 1)];
    }
    if in_run_block(lines, i) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if line.ends_with('{') {
        let mut depth = 0i64;
        for (j, l) in lines.iter().enumerate().skip(i) {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            if depth <= 0 {
                out.push((i, j + 1));
                break;
            }
        }
    }
    if !line.starts_with('}') {
        out.push((i, i + 1));
    }
    out
}

fn in_run_block(lines: &[String], i: usize) -> bool {
    let mut inside = false;
    let mut depth = 0i64;
    for l in &lines[..=i] {
        if depth == 0 {
            inside = l.trim_start().starts_with("run ");
        }
        depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
    }
    inside
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimise_keeps_what_the_predicate_needs() {
        let text = "kernel k(a: buf<u32, rw>) {\n    let x: u32 = 1;\n    if x == 1 {\n        a[0] = 2;\n        a[1] = 3;\n    }\n    a[2] = 4;\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n    arg a = fill(3, 0);\n}\n";
        // "Disagrees" while the file still verifies and stores 3 somewhere.
        let small = minimise(text, |t| {
            t.contains("= 3;")
                && crate::ir::parse_file(t).is_ok_and(|(m, s)| m.verify().is_ok() && !s.is_empty())
        });
        assert!(small.contains("a[1] = 3;"), "{small}");
        assert!(!small.contains("a[2] = 4;"), "{small}");
        assert!(!small.contains("a[0] = 2;"), "{small}");
        assert!(small.contains("arg a = fill(3, 0);"), "{small}");
        assert!(small.lines().count() < text.lines().count());
    }
}
