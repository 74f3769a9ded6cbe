//! The Vulkan backend (placeholder while the runtime lands).
pub mod spirv;
