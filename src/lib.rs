//! xpu: GPU-style kernels as typed IR, run from one source on the host CPU, NVIDIA, AMD and
//! Vulkan devices. The contract is `CajetaXPU.md`; the layout is described in `DESIGN.md`.

pub mod cli;
pub mod interp;
pub mod ir;
