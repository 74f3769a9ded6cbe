//! Every lowering of a [`VerifiedModule`](crate::ir::VerifiedModule), side by side: no driver,
//! no device memory.
//!
//! - [`cpu`]: Cranelift, work-item loops over SIMD lane vectors (the CPU backend);
//! - `llvm`: LLVM 19 through inkwell, NVPTX and AMDGPU behind one `LoweringTarget`
//!   (features `cuda`, `hip`);
//! - [`spirv`]: SPIR-V through rspirv (the Vulkan backend);
//! - [`checks`]: what the checked lowerings share (checked mode, ub-traps, the report buffer);
//! - `f64math` and `mathconst`: the f64 transcendentals written once over an `Arith` trait,
//!   emitted by the LLVM and SPIR-V lowerings and unit-tested on Rust `f64`.

pub mod checks;
pub mod cpu;
pub(crate) mod f64math;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod llvm;
pub(crate) mod mathconst;
pub mod spirv;
