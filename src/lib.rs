//! xpu: GPU-style kernels as typed IR, run from one source on the host CPU, NVIDIA, AMD and
//! Vulkan devices. The contract is `CajetaXPU.md`; the layout is described in `DESIGN.md`.

pub mod buffer;
pub mod cli;
pub mod deadline;
pub mod devices;
pub mod facts;
pub mod filetest;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod launch;
pub mod manifest;
pub mod stream;
pub mod timer;

pub use buffer::KernelBuffer;
pub use devices::{Backend, Device, DeviceError, Kernel, Program};
pub use facts::DeviceFacts;
pub use launch::{ArgValue, Launch, LaunchError};
pub use manifest::KernelManifest;
pub use stream::{Event, KernelStream};
pub use timer::KernelTimer;
