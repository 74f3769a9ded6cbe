//! xpu: GPU-style kernels as typed IR, run from one source on the host CPU, NVIDIA, AMD and
//! Vulkan devices. The contract is `CajetaXPU.md`; the layout is described in `DESIGN.md`.
//!
//! # The pipeline
//!
//! 1. **Source to IR.** A kernel is written in the text format ([`ir::parse`],
//!    `docs/text-format.md`) or built in Rust ([`ir::builder`], for front ends). Either gives
//!    an [`ir::Module`].
//! 2. **Verification.** [`ir::Module::verify`] is the single judge of well-formedness: it
//!    returns a [`ir::VerifiedModule`] or [`ir::Diagnostics`] (`line:col: error[CODE]`).
//!    Every backend lowers only verified modules.
//! 3. **Device.** [`Device::open`] names a backend ([`Backend`]: `Interp`, `Cpu`, `Cuda`,
//!    `Hip`, `Vulkan`); [`Device::current`] picks the best one present (contract §5.1).
//! 4. **Program and kernel.** [`Device::load`] prepares a module ([`Program`]); kernels are
//!    compiled on first use ([`Program::kernel`]), each with a [`KernelManifest`].
//! 5. **Launch.** Buffers ([`KernelBuffer`]) are uploaded, [`Kernel::launch`] takes a
//!    [`Launch`] (grid, block, shared memory, wave, deadline, the interpreter's options) and
//!    the arguments ([`args!`]) on a [`KernelStream`]; a refusal is a [`LaunchError`] with a
//!    stable code, and run-time errors say where they happened ([`LaunchError::site`]).
//!
//! The reference interpreter ([`interp`], `Backend::Interp`) defines what every kernel
//! means, detects undefined behaviour, and is the oracle of every comparison: the file-test
//! runner ([`filetest`], `xpu run`), the fuzzing kit ([`fuzz`]) and the REPL ([`repl`]).
//!
//! # A complete example
//!
//! ```
//! use xpu::{args, Backend, Device, KernelStream, Launch};
//!
//! let module = xpu::ir::parse(
//!     "kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32) {
//!          let i: u32 = global_id.x;
//!          y[i] = a * x[i] + y[i];
//!      }",
//! )
//! .expect("parses")
//! .verify()
//! .expect("verifies");
//!
//! // The interpreter is always present; `Backend::Cpu` (Cranelift) too on x86-64 and
//! // aarch64, `Device::current()` picks the best device of the machine.
//! let device = Device::open(Backend::Interp).unwrap();
//! let program = device.load(module).unwrap();
//! let kernel = program.kernel("saxpy").unwrap();
//!
//! let x = device.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
//! let mut y = device.upload(&[10.0f32; 4]).unwrap();
//! let stream = KernelStream::current(&device);
//! kernel
//!     .launch(&stream, Launch::grid([1]).block([4]), args![&mut y, &x, 2.0f32])
//!     .unwrap();
//! stream.sync().unwrap();
//! assert_eq!(y.download().unwrap(), vec![12.0, 14.0, 16.0, 18.0]);
//! ```
//!
//! # Feature flags
//!
//! | feature | what it adds |
//! | --- | --- |
//! | (none) | the IR, verifier, interpreter, the CPU backend (Cranelift) and the Vulkan backend (`ash` loads `libvulkan` at run time), the runner, the REPL |
//! | `cuda` | NVIDIA GPUs through the CUDA driver, PTX from LLVM 19 (needs `llvm-19-dev`); `:asm K ptx` in the REPL |
//! | `hip` | AMD GPUs through HIP, code objects from LLVM 19 |
//! | `vulkan` | accepted for symmetry; Vulkan is always built |
//! | `fuzz` | `fuzz::strategy`: the kernel generator as `proptest` strategies (the generator, [`fuzz::compare`] and [`fuzz::minimise`] need no feature) |
//!
//! # Layout
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
//! | [`filetest`], [`bench`](mod@bench), [`fuzz`], [`repl`], [`cli`] | the kernel-file runner, the benchmarks, the fuzzing kit, the REPL session, the command |

#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod bundle;
/// The `xpu` command line (`src/main.rs` calls [`cli::main`]). Hidden: the binary's internals,
/// not an API; programs use the library's types, and scripts the command's `--json`.
#[doc(hidden)]
pub mod cli;
pub mod codegen;
pub mod config;
pub mod deadline;
pub mod filetest;
pub mod fuzz;
pub mod gate;
pub mod hal;
pub mod interp;
pub mod ir;
pub mod profile;
pub mod record;
pub mod repl;
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
