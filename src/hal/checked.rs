//! How a program is loaded ([`ProgramOptions`]: checked mode and ub-traps, contract §2.3) and
//! how a backend turns a device-side report ([`crate::codegen::checks`]) into the launch's
//! refusal: `XPU-L013` for an out-of-bounds access, `XPU-L010` for a broken `align` statement,
//! both naming the kernel, the line and the index, as the CPU backend does.

use crate::codegen::checks::{CheckSite, Checks, Report, KIND_MISALIGNED};
use crate::hal::launch::LaunchError;

/// How a program's kernels are lowered. [`ProgramOptions::from_env`] is what
/// [`Device::load`](crate::runtime::device::Device::load) uses; `Device::load_with` takes one.
///
/// - `checked`: every buffer, shared and private access is bounds-checked on the GPU backends
///   (CUDA, HIP, Vulkan); the first out-of-bounds access of a launch is reported as
///   `XPU-L013` (kernel, line, index, length), the access skipped (a store) or read as 0 (a
///   load). The host backends check bounds always (the interpreter, the CPU).
/// - `ub_traps`: every `align = N` statement the alignment proof does not confirm is tested
///   (CPU, CUDA, HIP, Vulkan); a broken one is `XPU-L010` (kernel, line, index). Without it a
///   broken promise behaves as the device does.
///
/// A launch of a kernel with checks waits for the kernel before it returns, so that its report
/// is read with the launch (GPU backends; documented in docs/checked-mode.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProgramOptions {
    /// Checked mode: every access is bounds-checked (`XPU-L013`).
    pub checked: bool,
    /// ub-traps: unproven `align = N` statements are tested (`XPU-L010`).
    pub ub_traps: bool,
}

impl Default for ProgramOptions {
    /// Checked mode off; ub-traps on in debug builds of the library (contract §2.3: "every
    /// debug build"), off in release builds.
    fn default() -> Self {
        ProgramOptions {
            checked: false,
            ub_traps: cfg!(debug_assertions),
        }
    }
}

impl ProgramOptions {
    /// The options `CAJETA_XPU_CHECKED` and `CAJETA_XPU_UB_TRAPS` ask for (each `0`/`1`,
    /// unset: [`ProgramOptions::default`]).
    pub fn from_env() -> Result<ProgramOptions, crate::config::BadValue> {
        let c = crate::config::get();
        Ok(ProgramOptions {
            checked: c.checked.clone()?,
            ub_traps: c.ub_traps.clone()?,
        })
    }

    /// Everything tested: checked mode and ub-traps.
    pub fn all() -> ProgramOptions {
        ProgramOptions {
            checked: true,
            ub_traps: true,
        }
    }

    /// What a lowering tests for these options.
    pub fn checks(&self) -> Checks {
        Checks {
            bounds: self.checked,
            ub_traps: self.ub_traps,
        }
    }
}

/// The refusal a launch's report names, `None` when the report is clear. `sites` is the
/// lowering's table ([`CheckSite`]); a site outside it (never written by our code) reads as
/// line 0.
pub fn report_error(
    kernel: &str,
    report: Option<Report>,
    sites: &[CheckSite],
) -> Option<LaunchError> {
    let r = report?;
    let site = sites.get(r.site as usize);
    let line = site.map_or(0, |s| s.line);
    Some(if r.kind == KIND_MISALIGNED {
        LaunchError::BrokenAlign {
            kernel: kernel.to_string(),
            line,
            index: r.index as u64,
            align: r.len,
        }
    } else {
        LaunchError::OutOfBounds {
            kernel: kernel.to_string(),
            line,
            what: site.map_or_else(|| "an object".to_string(), |s| s.what.clone()),
            index: r.index as u64,
            len: r.len as u64,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::checks::KIND_OUT_OF_BOUNDS;

    #[test]
    fn reports_name_kernel_line_index_and_length() {
        let sites = vec![CheckSite {
            line: 7,
            what: "buffer x".into(),
        }];
        let oob = Report {
            kind: KIND_OUT_OF_BOUNDS,
            site: 0,
            index: 64,
            len: 64,
        };
        let e = report_error("k", Some(oob), &sites).unwrap();
        assert_eq!(e.code(), "XPU-L013");
        let text = e.to_string();
        assert!(
            text.contains("kernel k") && text.contains("line 7"),
            "{text}"
        );
        assert!(
            text.contains("index 64") && text.contains("buffer x"),
            "{text}"
        );
        let mis = Report {
            kind: KIND_MISALIGNED,
            site: 0,
            index: 5,
            len: 16,
        };
        let e = report_error("k", Some(mis), &sites).unwrap();
        assert_eq!(e.code(), "XPU-L010");
        assert!(e.to_string().contains("index 5"), "{e}");
        assert_eq!(report_error("k", None, &sites), None);
    }
}
