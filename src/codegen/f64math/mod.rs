//! `f64` `exp exp2 log log2 tanh sin cos` and the core of `pow`, correctly rounded but for
//! rare last-bit cases, for targets whose own functions are looser than the interpreter's libm
//! (NVPTX and AMDGPU through LLVM, Vulkan through SPIR-V).
//!
//! They are written once over [`Arith`], scalar `f64` arithmetic that each backend implements
//! by emitting instructions (`codegen::llvm::math`, `codegen::spirv::math`) and that the unit
//! tests implement on Rust `f64`, so the tests run each device's very operation sequence and
//! compare it with the interpreter. A target without a fused multiply-add (Vulkan allows `Fma`
//! to be unfused, and lavapipe's is) sets [`Arith::FUSED`] false: its exact products are then
//! Dekker's and its residuals double-double, and the tests run that sequence too.

pub mod arith;
pub mod explog;
pub mod trig;

pub use arith::{Arith, Cmp};
