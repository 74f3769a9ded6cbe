//! xpu: GPU-style kernels as typed IR, run from one source on the host CPU, NVIDIA, AMD and
//! Vulkan devices. The contract is `CajetaXPU.md`; the layout is described in `DESIGN.md`.
//!
//! The crate is one folder per stage, and imports only go down the list:
//!
//! | module | owns |
//! | --- | --- |
//! | [`config`] | every environment variable, read once, typed |
//! | [`profile`] | the profiler's spans and trace (a leaf beside `config`) |
//! | [`ir`] | the IR, builder, text format, verifier |
//! | [`interp`] | the reference interpreter (the oracle) |
//! | [`codegen`] | every lowering of a verified module: Cranelift, LLVM (NVPTX, AMDGPU), SPIR-V |
//! | [`hal`] | what runtime and backends both speak: `Backend`, the seam traits, launches, facts, manifests |
//! | [`bundle`] | the bundle file: device code per backend, manifests and the canonical IR |
//! | [`backend`] | one module per device over codegen output: interp, cpu, cuda, hip, vulkan |
//! | [`record`] | launch records, their replay through the interpreter, the census |
//! | [`runtime`] | what a program touches: `Device`, `Program`, `Kernel`, buffers, streams, timers |
//! | [`tune`] | the reconciliation: shape families, the filter, the measured choice, stores, routes |
//! | [`filetest`], [`bench`], [`cli`] | the kernel-file runner, the benchmarks, the command |

pub mod backend;
pub mod bench;
pub mod bundle;
pub mod cli;
pub mod codegen;
pub mod config;
pub mod deadline;
pub mod filetest;
pub mod gate;
pub mod hal;
pub mod interp;
pub mod ir;
pub mod profile;
pub mod record;
pub mod runtime;
pub mod tune;

pub use hal::facts::DeviceFacts;
pub use hal::launch::{ArgValue, Launch, LaunchError};
pub use hal::manifest::KernelManifest;
pub use hal::{Backend, DeviceError, ProgramOptions};
pub use runtime::{Device, Event, Kernel, KernelBuffer, KernelStream, KernelTimer, Program};

/// Paths of the tree before the layout of `DESIGN.md` (`xpu::devices`, `xpu::jit`,
/// `xpu::launch`, …), kept so that code written against them still builds; new code uses the
/// paths above.
#[doc(hidden)]
pub mod devices {
    pub use crate::backend::cache;
    #[cfg(feature = "cuda")]
    pub use crate::backend::cuda;
    #[cfg(feature = "hip")]
    pub use crate::backend::hip;
    pub use crate::backend::{cpu, host, interp, vulkan};
    pub use crate::bench::data as bench_data;
    #[cfg(feature = "hip")]
    pub use crate::codegen::llvm::codeobj;
    #[cfg(any(feature = "cuda", feature = "hip"))]
    pub use crate::codegen::llvm::{self as llvm, ptxas};
    pub use crate::hal::*;
    pub use crate::runtime::coarse;
    pub use crate::runtime::device::*;
}
#[doc(hidden)]
pub use codegen::cpu as jit;
#[doc(hidden)]
pub use hal::{facts, launch, manifest};
#[doc(hidden)]
pub use runtime::{buffer, stream, timer};
