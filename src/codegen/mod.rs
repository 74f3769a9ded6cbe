//! Every lowering of a [`VerifiedModule`](crate::ir::VerifiedModule), side by side: no driver,
//! no device memory.
//!
//! - `cpu`: Cranelift, work-item loops over SIMD lane vectors (the CPU backend);
//! - `llvm`: LLVM 19 through inkwell, NVPTX and AMDGPU behind one `LoweringTarget`
//!   (features `cuda`, `hip`);
//! - `spirv`: SPIR-V through rspirv (the Vulkan backend);
//! - [`Error`]: why a lowering made no code, one type for all three (codes in [`codes`]);
//! - [`checks`]: what the checked lowerings share (checked mode, ub-traps, the report buffer);
//! - `f64math` and `mathconst`: the f64 transcendentals written once over an `Arith` trait,
//!   emitted by the LLVM and SPIR-V lowerings and unit-tested on Rust `f64`.
//!
//! The three lowerings are internal (the backends drive them; programs see their output
//! through manifests, `xpu build` and the REPL's `:asm`) and hidden from the documentation:
//! they are public for the test suite's snapshot, fault and GPU tests only.

pub mod checks;
mod error;
pub use error::{codes, Error, Result};
#[doc(hidden)] // internal: public for the test suite (see above)
pub mod cpu;
pub(crate) mod f64math;
#[cfg(any(feature = "cuda", feature = "hip"))]
#[doc(hidden)] // internal: public for the test suite (see above)
pub mod llvm;
pub(crate) mod mathconst;
#[doc(hidden)] // internal: public for the test suite (see above)
pub mod spirv;
