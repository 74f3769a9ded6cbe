//! The backends, their names and the order in which a process selects one (contract §5.1).

#![warn(missing_docs)]

use std::fmt;

/// The backends, by the names the CLI and `CAJETA_XPU_BACKEND` use.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The reference interpreter (the oracle; always present).
    Interp,
    /// The host CPU through the Cranelift JIT.
    Cpu,
    /// NVIDIA GPUs through the CUDA driver.
    Cuda,
    /// AMD GPUs through HIP.
    Hip,
    /// Any Vulkan 1.1+ device.
    Vulkan,
}

impl Backend {
    /// Every backend: the interpreter, the CPU, CUDA, HIP, Vulkan.
    pub const ALL: [Backend; 5] = [
        Backend::Interp,
        Backend::Cpu,
        Backend::Cuda,
        Backend::Hip,
        Backend::Vulkan,
    ];

    /// The order of selection at the first device touch (contract §5.1). The interpreter is
    /// not a device a program lands on by default; it is chosen only when named, or when no
    /// other backend is present.
    pub const SELECTION_ORDER: [Backend; 4] =
        [Backend::Cuda, Backend::Hip, Backend::Vulkan, Backend::Cpu];

    /// The backend's name as the CLI and the text format write it (`interp`, `cpu`, `cuda`,
    /// `hip`, `vulkan`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
            Backend::Vulkan => "vulkan",
        }
    }

    /// The backend named `name` (as [`Backend::name`] writes it), if there is one.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
