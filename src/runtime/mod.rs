//! What a program touches: [`Device`] and its selection, [`Program`] and [`Kernel`] (a launch
//! checks, picks the kernel's variant, hands it to the backend), [`KernelBuffer`],
//! [`KernelStream`]/[`Event`], [`KernelTimer`], and the coarsening policy.

#![warn(missing_docs)]

pub mod buffer;
pub mod bundle;
pub mod coarse;
pub mod device;
pub mod stream;
pub mod submit;
pub mod timer;

pub use buffer::KernelBuffer;
pub use device::{Device, Kernel, Program};
pub use stream::{Event, KernelStream};
pub use submit::{KernelSubmission, Policy, Scheduler};
pub use timer::KernelTimer;
