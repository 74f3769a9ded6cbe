//! Benchmarks the `xpu bench` command runs: the Vulkan streaming kernels against a buffer copy
//! and the CUDA backend ([`vulkan`]), and the data they share ([`data`]).

pub mod data;
#[cfg(feature = "cuda")]
pub mod defer;
pub mod vulkan;
