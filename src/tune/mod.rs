//! The reconciliation (contract §6): one kernel design run at each device's ceiling without a
//! table of parts.
//!
//! | module | owns |
//! | --- | --- |
//! | [`kernel_facts`] | [`KernelFacts::measured`]: a kernel's footprint from its manifest |
//! | [`filter`] | [`ShapeFamily`], [`ShapeCandidate`], [`ShapeFilter`] and its verdicts (§6.1) |
//! | [`choice`] | [`ShapeChoice::choose`], [`ShapeProbe`], [`ShapeResult`], overrides, `prewarm` (§6.2) |
//! | [`store`] | [`AutotuneStore`]: `<dir>/<deviceKey>/<name>`, memo, build ids, `claim_once` (§6.3) |
//! | [`calibration`] | [`DeviceCalibration`]: measured device-wide facts in the platform cache (§5.3, §6.3) |
//! | [`routes`] | [`RouteTable`]: which kernel serves which format in which regime, and its audit (§6.4) |
//! | [`profile`] (in `hal`, since backends fill manifests with it) | [`DeviceProfile`]: the compile-time model of known architectures (§6.5) |
//! | [`probe`] | [`GemmProbe`]: the probe `xpu tune` times GEMM-convention families with |
//! | [`load`] | [`foreign_load_percent`](crate::Device::foreign_load_percent): other processes' share of a device |
//!
//! Every fact a device does not report is `None` and prunes nothing; every refusal names what
//! refused, with a code (`XPU-S...` for families, choices and routes, `XPU-T...` for stores,
//! `XPU-L025` for a family with no member that fits).

pub mod calibration;
pub mod choice;
pub mod filter;
pub mod kernel_facts;
pub mod load;
pub mod probe;
pub mod routes;
pub mod store;

pub use crate::hal::profile::{self, DeviceProfile};
pub use calibration::DeviceCalibration;
pub use choice::{set_shape_override, ShapeChoice, ShapeProbe, ShapeResult, Source};
pub use filter::{Problem, Rule, ShapeCandidate, ShapeFamily, ShapeFilter};
pub use kernel_facts::KernelFacts;
pub use probe::GemmProbe;
pub use routes::RouteTable;
pub use store::AutotuneStore;

/// The codes of this module (the `XPU-S001`..`XPU-S005` family checks are in
/// [`crate::ir::family::codes`]).
pub mod codes {
    /// An override names a kernel that is not a member of its family.
    pub const OVERRIDE_UNKNOWN: &str = "XPU-S006";
    /// A survivor's timing failed; it is left out of the choice (a note says why).
    pub const PROBE_FAILED: &str = "XPU-S007";
    /// Every survivor's timing failed: nothing was chosen.
    pub const NOTHING_TIMED: &str = "XPU-S008";
    /// A family the caller named is not declared in the module.
    pub const UNKNOWN_FAMILY: &str = "XPU-S009";
    /// A problem that is not `MxNxK` with three positive integers.
    pub const BAD_PROBLEM: &str = "XPU-S010";
    /// A route row refused by its static shape gate.
    pub const SHAPE_REFUSAL: &str = "XPU-S011";
    /// A route row refused at bind by its ready gate (the device or the registry).
    pub const READY_REFUSAL: &str = "XPU-S012";
    /// No row of the route table serves the format in the regime.
    pub const NO_ROUTE: &str = "XPU-S013";
    /// A malformed route file (`xpu routes`).
    pub const ROUTE_FILE: &str = "XPU-S014";
    /// A format that lacks a row another format has (the audit).
    pub const MISSING_ROW: &str = "XPU-S015";
    /// A row naming a kernel the module does not have (the audit).
    pub const UNKNOWN_KERNEL: &str = "XPU-S016";

    /// A tuned value that measured below its promise (the contract's).
    pub const UNDERPERFORMING: &str = "XPU-T01";
    /// A value recalled against a different build id, discarded (the contract's).
    pub const BUILD_MISMATCH: &str = "XPU-T02";
    /// The store could not write: values live in the memo only (`persists()` is false).
    pub const NOT_PERSISTING: &str = "XPU-T03";
    /// A store file that does not parse; ignored.
    pub const CORRUPT: &str = "XPU-T04";
    /// A store file written for another device key or name; ignored.
    pub const FOREIGN: &str = "XPU-T05";
    /// A `claim_once` lock that could not be taken; the probe ran unserialised.
    pub const LOCK: &str = "XPU-T06";
    /// A calibration record that does not parse or belongs to another key; ignored.
    pub const CALIBRATION_CORRUPT: &str = "XPU-T07";
    /// A calibration measurement that failed or read outside physical bounds.
    pub const CALIBRATION_FAILED: &str = "XPU-T08";
}

/// A coded problem a tuning component reports without failing (a discarded store value, a
/// corrupt file, a probe that failed): what `xpu tune` prints as notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The finding's code.
    pub code: &'static str,
    /// What happened, in one sentence.
    pub message: String,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "note[{}]: {}", self.code, self.message)
    }
}
