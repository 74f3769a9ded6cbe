//! Benchmarks the `xpu bench` command runs: the Vulkan streaming kernels against a buffer copy
//! and the CUDA backend ([`vulkan`]), the data they share ([`data`]), and the time to a first
//! result ([`first`]).

pub mod data;
#[cfg(feature = "cuda")]
pub mod defer;
pub mod first;
pub mod peers;
pub mod suite;
pub mod vulkan;
