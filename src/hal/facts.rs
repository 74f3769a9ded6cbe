//! `DeviceFacts`: what the device a kernel lands on reports about itself (contract §5.2, §6.1).
//!
//! Every field is an `Option`, and the rule is the contract's: **absent is `None`, never
//! zero**. A backend fills in what its driver (or, for the host, the operating system) reports
//! and leaves the rest empty; a rule that needs an absent fact does not apply (§6.1: "a fact the
//! backend does not report prunes nothing"). Nothing here is looked up in a table of parts.

#![warn(missing_docs)]

use crate::hal::Backend;
use std::fmt;

/// The geometry surface of one device (contract §5.2) plus the identity a tuning store keys by
/// (§6.3). Built by each backend when it opens a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceFacts {
    /// The backend that answers for this device.
    pub backend: Option<Backend>,
    /// The part's name as the driver reports it (`"NVIDIA H200"`, a CPU model name).
    pub name: Option<String>,
    /// The vendor as the driver reports it (`"NVIDIA"`, `"Mesa"`, `"GenuineIntel"`).
    pub vendor: Option<String>,
    /// The driver's version, as it reports it.
    pub driver_version: Option<String>,
    /// A stable identity of the physical device (CUDA's UUID, Vulkan's `deviceUUID`).
    pub uuid: Option<String>,
    /// Multiprocessors (CUDA SMs, AMD CUs, host cores on the CPU backend).
    pub multiprocessors: Option<u32>,
    /// SIMD units per multiprocessor (AMD: 4 per CU; CUDA: 4 sub-partitions).
    pub simds_per_multiprocessor: Option<u32>,
    /// The wave (warp, subgroup, host SIMD) width kernels get by default.
    pub wave_width: Option<u32>,
    /// Every wave width a kernel may declare with `@wave(N)` and be built at. `None`: the
    /// backend does not say, and a declaration is not checked at launch.
    pub supported_wave_widths: Option<Vec<u32>>,
    /// The most work-items one workgroup may have.
    pub max_threads_per_block: Option<u32>,
    /// The most work-items per block dimension (x, y, z).
    pub max_block_dims: Option<[u32; 3]>,
    /// The most workgroups per grid dimension (x, y, z).
    pub max_grid_dims: Option<[u32; 3]>,
    /// Shared (workgroup) memory one block may use without opting in.
    pub shared_bytes_per_block: Option<u64>,
    /// Shared memory one block may use when the launch opts in (CUDA's 99 KB on Ada).
    pub shared_bytes_per_block_optin: Option<u64>,
    /// Shared memory all resident blocks of one multiprocessor may use together.
    pub shared_bytes_per_multiprocessor: Option<u64>,
    /// 32-bit registers per multiprocessor.
    pub registers_per_multiprocessor: Option<u32>,
    /// 32-bit registers one block may use.
    pub registers_per_block: Option<u32>,
    /// The most work-items resident on one multiprocessor.
    pub max_threads_per_multiprocessor: Option<u32>,
    /// The most blocks resident on one multiprocessor.
    pub max_blocks_per_multiprocessor: Option<u32>,
    /// Device (global) memory in bytes; physical memory on the host backends.
    pub global_memory_bytes: Option<u64>,
    /// Whether device memory is the host's memory.
    pub integrated: Option<bool>,
    /// The core clock in kHz.
    pub clock_khz: Option<u32>,
    /// The alignment a buffer view's base must have to be bound (Vulkan's
    /// `minStorageBufferOffsetAlignment`).
    pub buffer_offset_alignment: Option<u64>,
    /// The most bytes one constant buffer (`buf<_, const>`, contract §2.2 `Constant`) may
    /// have at launch (`XPU-L040` past it): CUDA's and HIP's total constant memory, Vulkan's
    /// `maxUniformBufferRange`. `None` on the host backends: constant data is plain memory.
    pub constant_bytes: Option<u64>,
    /// The alignment a constant buffer view's base must have to be bound (Vulkan's
    /// `minUniformBufferOffsetAlignment`; `XPU-L041` otherwise).
    pub constant_offset_alignment: Option<u64>,
    /// Native 64-bit integer atomics (contract §2.2: CUDA, HIP, CPU; Vulkan with Int64Atomics).
    pub int64_atomics: Option<bool>,
    /// The last-level (L2) cache in bytes (CUDA's `L2_CACHE_SIZE`; the host's largest cache).
    pub l2_cache_bytes: Option<u64>,
    /// The memory bus width in bits, where the driver reports it.
    pub memory_bus_bits: Option<u32>,
    /// The memory clock in kHz, where the driver reports it.
    pub memory_clock_khz: Option<u32>,
    /// What the backend answers for each [`Feature`] on this device ([`DeviceFacts::supports`]).
    pub features: FeatureSupport,
}

/// The capabilities kernels ask about (contract §5.2, `Device.supports`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// 64-bit integer atomics on buffers.
    Int64Atomics,
    /// `f16` arithmetic.
    F16,
    /// `f64` arithmetic.
    F64,
    /// Requiring a subgroup (wave) size per kernel (Vulkan's `subgroupSizeControl`; AMD's
    /// wave32/wave64 builds).
    SubgroupSizeControl,
    /// Cooperative-matrix (`matrix_mma`) units.
    CooperativeMatrix,
    /// A per-block shared-memory limit above the default one that a launch may opt in to.
    SharedOptIn,
}

impl Feature {
    /// Every feature, in the order `xpu devices` prints them.
    pub const ALL: [Feature; 6] = [
        Feature::Int64Atomics,
        Feature::F16,
        Feature::F64,
        Feature::SubgroupSizeControl,
        Feature::CooperativeMatrix,
        Feature::SharedOptIn,
    ];

    /// The name `xpu devices` prints (`int64_atomics`, `f16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Feature::Int64Atomics => "int64_atomics",
            Feature::F16 => "f16",
            Feature::F64 => "f64",
            Feature::SubgroupSizeControl => "subgroup_size_control",
            Feature::CooperativeMatrix => "cooperative_matrix",
            Feature::SharedOptIn => "shared_opt_in",
        }
    }
}

/// How a device does a [`Feature`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Support {
    /// The hardware (or its driver) does it.
    Native,
    /// The backend does it in software (cooperative matrices on the host, in SPIR-V without
    /// `VK_KHR_cooperative_matrix`).
    Emulated,
    /// Kernels that need it are refused here.
    No,
}

impl Support {
    /// `native`, `emulated` or `no`.
    pub const fn name(self) -> &'static str {
        match self {
            Support::Native => "native",
            Support::Emulated => "emulated",
            Support::No => "no",
        }
    }
}

/// A backend's answer per [`Feature`]; `None` where it does not say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureSupport {
    /// 64-bit integer atomics.
    pub int64_atomics: Option<Support>,
    /// 16-bit floats.
    pub f16: Option<Support>,
    /// 64-bit floats.
    pub f64: Option<Support>,
    /// Choosing the subgroup (wave) size per kernel.
    pub subgroup_size_control: Option<Support>,
    /// Cooperative matrices (tensor-core matrix multiply).
    pub cooperative_matrix: Option<Support>,
    /// Shared memory past the default per-block limit on request.
    pub shared_opt_in: Option<Support>,
}

impl FeatureSupport {
    /// The backend's answer for `feature`, `None` where it does not say.
    pub fn get(&self, feature: Feature) -> Option<Support> {
        match feature {
            Feature::Int64Atomics => self.int64_atomics,
            Feature::F16 => self.f16,
            Feature::F64 => self.f64,
            Feature::SubgroupSizeControl => self.subgroup_size_control,
            Feature::CooperativeMatrix => self.cooperative_matrix,
            Feature::SharedOptIn => self.shared_opt_in,
        }
    }

    /// Everything `native` except cooperative matrices (`emulated`) and the shared opt-in
    /// (`no`): the host backends, which run every scalar type and atomic natively.
    pub fn host() -> Self {
        FeatureSupport {
            int64_atomics: Some(Support::Native),
            f16: Some(Support::Native),
            f64: Some(Support::Native),
            subgroup_size_control: Some(Support::Native),
            cooperative_matrix: Some(Support::Emulated),
            shared_opt_in: Some(Support::No),
        }
    }
}

impl DeviceFacts {
    /// How this device does `feature` (contract §5.2, `Device.supports`): a backend that does
    /// not say answers [`Support::No`], so nothing is built on a capability nobody reported.
    pub fn supports(&self, feature: Feature) -> Support {
        self.features.get(feature).unwrap_or(Support::No)
    }

    /// Facts with nothing known but the backend.
    pub fn unknown(backend: Backend) -> Self {
        DeviceFacts {
            backend: Some(backend),
            ..DeviceFacts::default()
        }
    }

    /// What the operating system reports about the host: logical cores as multiprocessors,
    /// physical memory, the CPU's model name, integrated memory. Fields the OS does not report
    /// stay `None`. Host backends start from this and add what they know (wave width, limits).
    pub fn host(backend: Backend) -> Self {
        let cores = std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok();
        let field = |key: &str| -> Option<String> {
            cpuinfo.as_deref()?.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| parse_meminfo_total(&text));
        DeviceFacts {
            backend: Some(backend),
            name: field("model name"),
            vendor: field("vendor_id"),
            multiprocessors: cores,
            global_memory_bytes: memory,
            integrated: Some(true),
            int64_atomics: Some(true),
            l2_cache_bytes: host_last_level_cache(),
            clock_khz: field("cpu MHz")
                .and_then(|m| m.parse::<f64>().ok())
                .filter(|&m| m > 0.0)
                .map(|m| (m * 1000.0) as u32),
            features: FeatureSupport::host(),
            ..DeviceFacts::default()
        }
    }

    /// The block limit a launch is checked against: the tighter of the per-block thread cap
    /// and the per-dimension caps, each only where reported.
    pub fn block_fits(&self, block: [u32; 3]) -> Result<(), String> {
        if let Some(max) = self.max_block_dims {
            for d in 0..3 {
                if block[d] > max[d] {
                    return Err(format!(
                        "block dimension {} is {} but the device allows {}",
                        "xyz".as_bytes()[d] as char,
                        block[d],
                        max[d]
                    ));
                }
            }
        }
        if let Some(max) = self.max_threads_per_block {
            let threads = block.iter().map(|&b| b as u64).product::<u64>();
            if threads > max as u64 {
                return Err(format!(
                    "block of {threads} work-items but the device allows {max} per block"
                ));
            }
        }
        Ok(())
    }

    /// The key a tuning store files answers under (contract §6.3): the backend plus the
    /// geometry an answer depends on. A device that reports none of it is keyed `unknown` and
    /// shares nothing.
    pub fn device_key(&self) -> String {
        let geometry = [
            self.multiprocessors.map(|v| format!("mp{v}")),
            self.simds_per_multiprocessor.map(|v| format!("x{v}")),
            self.wave_width.map(|v| format!("w{v}")),
            self.registers_per_multiprocessor.map(|v| format!("r{v}")),
            self.shared_bytes_per_block.map(|v| format!("s{v}")),
            self.max_threads_per_block.map(|v| format!("t{v}")),
        ];
        let known: Vec<String> = geometry.into_iter().flatten().collect();
        let backend = self.backend.map(|b| b.name()).unwrap_or("unknown");
        if known.is_empty() {
            format!("{backend}-unknown")
        } else {
            format!("{backend}-{}", known.join("-"))
        }
    }
}

/// The largest cache of CPU 0 that sysfs lists (`/sys/devices/system/cpu/cpu0/cache/index*/size`),
/// in bytes; `None` where sysfs does not say.
fn host_last_level_cache() -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| {
        let text = std::fs::read_to_string(e.ok()?.path().join("size")).ok()?;
        parse_cache_size(text.trim())
    })
    .max()
}

/// `32K`, `1024K`, `36M`, `512` → bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1024),
        b'M' => (&text[..text.len() - 1], 1024 * 1024),
        b'G' => (&text[..text.len() - 1], 1024 * 1024 * 1024),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()?
        .checked_mul(scale)
        .filter(|&b| b > 0)
}

/// `MemTotal:  16318412 kB` → bytes.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    parse_meminfo(text, "MemTotal:")
}

/// The host memory an allocation can take now without swapping (`MemAvailable` of
/// `/proc/meminfo`), `None` where the OS does not report it. Every allocation sized by input on
/// a host backend (buffers, the CPU workers' areas, the interpreter's shadows, run-block
/// values) is checked against it first: within overcommit an oversized allocation succeeds
/// and the OOM killer ends the process page by page as it is filled.
pub fn host_available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text, "MemAvailable:")
}

/// Whether `bytes` more of host memory may be allocated: `Err` with what the host has when
/// the OS reports less available.
pub fn check_host_memory(bytes: u64) -> Result<(), u64> {
    match host_available_memory() {
        Some(available) if bytes > available => Err(available),
        _ => Ok(()),
    }
}

fn parse_meminfo(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let mut parts = line[key.len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// One line per fact, `absent` where the device does not report it.
impl fmt::Display for DeviceFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn show<T: fmt::Debug>(v: &Option<T>) -> String {
            match v {
                Some(v) => format!("{v:?}"),
                None => "absent".to_string(),
            }
        }
        let rows: [(&str, String); 28] = [
            ("backend", show(&self.backend.map(|b| b.name()))),
            ("name", show(&self.name)),
            ("vendor", show(&self.vendor)),
            ("driver version", show(&self.driver_version)),
            ("uuid", show(&self.uuid)),
            ("multiprocessors", show(&self.multiprocessors)),
            (
                "simds per multiprocessor",
                show(&self.simds_per_multiprocessor),
            ),
            ("wave width", show(&self.wave_width)),
            ("supported wave widths", show(&self.supported_wave_widths)),
            ("max threads per block", show(&self.max_threads_per_block)),
            ("max block dims", show(&self.max_block_dims)),
            ("max grid dims", show(&self.max_grid_dims)),
            ("shared bytes per block", show(&self.shared_bytes_per_block)),
            (
                "shared bytes per block (opt-in)",
                show(&self.shared_bytes_per_block_optin),
            ),
            (
                "shared bytes per multiprocessor",
                show(&self.shared_bytes_per_multiprocessor),
            ),
            (
                "registers per multiprocessor",
                show(&self.registers_per_multiprocessor),
            ),
            ("registers per block", show(&self.registers_per_block)),
            (
                "max threads per multiprocessor",
                show(&self.max_threads_per_multiprocessor),
            ),
            (
                "max blocks per multiprocessor",
                show(&self.max_blocks_per_multiprocessor),
            ),
            ("global memory bytes", show(&self.global_memory_bytes)),
            ("constant bytes", show(&self.constant_bytes)),
            (
                "constant offset alignment",
                show(&self.constant_offset_alignment),
            ),
            ("integrated", show(&self.integrated)),
            ("clock khz", show(&self.clock_khz)),
            ("l2 cache bytes", show(&self.l2_cache_bytes)),
            ("memory bus bits", show(&self.memory_bus_bits)),
            ("memory clock khz", show(&self.memory_clock_khz)),
            (
                "buffer offset alignment",
                show(&self.buffer_offset_alignment),
            ),
        ];
        for (name, value) in rows {
            writeln!(f, "{name:32} {value}")?;
        }
        writeln!(f, "{:32} {}", "int64 atomics", show(&self.int64_atomics))?;
        let features: Vec<String> = Feature::ALL
            .iter()
            .map(|&x| match self.features.get(x) {
                Some(s) => format!("{}={}", x.name(), s.name()),
                None => format!("{}=absent", x.name()),
            })
            .collect();
        write!(f, "{:32} {}", "features", features.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_none_and_keys_unknown() {
        let facts = DeviceFacts::unknown(Backend::Interp);
        assert_eq!(facts.max_threads_per_block, None);
        assert_eq!(facts.device_key(), "interp-unknown");
        // No reported limit: every block fits.
        assert!(facts.block_fits([1 << 20, 1, 1]).is_ok());
        assert!(facts.to_string().contains("absent"));
    }

    #[test]
    fn block_limits_apply_only_where_reported() {
        let facts = DeviceFacts {
            max_threads_per_block: Some(1024),
            max_block_dims: Some([1024, 1024, 64]),
            ..DeviceFacts::unknown(Backend::Cuda)
        };
        assert!(facts.block_fits([1024, 1, 1]).is_ok());
        assert!(facts.block_fits([32, 33, 1]).is_err());
        assert!(facts.block_fits([1, 1, 65]).is_err());
    }

    #[test]
    fn cache_sizes_and_features() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("36M"), Some(36 << 20));
        assert_eq!(parse_cache_size("0K"), None);
        assert_eq!(parse_cache_size("big"), None);
        let unknown = DeviceFacts::unknown(Backend::Vulkan);
        assert_eq!(unknown.supports(Feature::F64), Support::No);
        let host = DeviceFacts::host(Backend::Cpu);
        assert_eq!(host.supports(Feature::F64), Support::Native);
        assert_eq!(host.supports(Feature::CooperativeMatrix), Support::Emulated);
        assert_ne!(host.l2_cache_bytes, Some(0));
    }

    #[test]
    fn meminfo() {
        assert_eq!(
            parse_meminfo_total("MemTotal:       2048 kB\nMemFree: 1 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_meminfo_total("nothing"), None);
    }

    #[test]
    fn host_facts_never_invent_zero() {
        let facts = DeviceFacts::host(Backend::Cpu);
        assert_ne!(facts.multiprocessors, Some(0));
        assert_ne!(facts.global_memory_bytes, Some(0));
        assert!(facts.device_key().starts_with("cpu-"));
    }
}
