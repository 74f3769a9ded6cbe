//! One folder per device, each implementing the `hal` seam over the code `codegen` produces:
//! [`interp`] (the reference interpreter as a device), [`cpu`] (Cranelift code on host
//! threads), `cuda` (PTX through the CUDA driver), `hip` (AMDGPU code objects through HIP),
//! [`vulkan`] (SPIR-V through ash). [`host`] holds what the two host-memory backends share;
//! `cache` the on-disk cache of device code.

pub mod cache;
pub mod common;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cupti;
pub mod deadlines;
pub mod defer;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod gpu_abi;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod gpu_args;
#[cfg(feature = "hip")]
pub mod hip;
#[cfg(feature = "hip")]
pub mod hip_code;
pub mod host;
pub mod interp;
pub mod vulkan;
