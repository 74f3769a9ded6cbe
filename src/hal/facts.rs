//! `DeviceFacts`: what the device a kernel lands on reports about itself (contract §5.2, §6.1).
//!
//! Every field is an `Option`, and the rule is the contract's: **absent is `None`, never
//! zero**. A backend fills in what its driver (or, for the host, the operating system) reports
//! and leaves the rest empty; a rule that needs an absent fact does not apply (§6.1: "a fact the
//! backend does not report prunes nothing"). Nothing here is looked up in a table of parts.

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
    pub vendor: Option<String>,
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
    pub shared_bytes_per_multiprocessor: Option<u64>,
    pub registers_per_multiprocessor: Option<u32>,
    pub registers_per_block: Option<u32>,
    pub max_threads_per_multiprocessor: Option<u32>,
    pub max_blocks_per_multiprocessor: Option<u32>,
    /// Device (global) memory in bytes; physical memory on the host backends.
    pub global_memory_bytes: Option<u64>,
    /// Whether device memory is the host's memory.
    pub integrated: Option<bool>,
    pub clock_khz: Option<u32>,
    /// The alignment a buffer view's base must have to be bound (Vulkan's
    /// `minStorageBufferOffsetAlignment`).
    pub buffer_offset_alignment: Option<u64>,
    /// Native 64-bit integer atomics (contract §2.2: CUDA, HIP, CPU; Vulkan with Int64Atomics).
    pub int64_atomics: Option<bool>,
}

impl DeviceFacts {
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

/// `MemTotal:  16318412 kB` → bytes.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
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
        let rows: [(&str, String); 22] = [
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
            ("integrated", show(&self.integrated)),
            (
                "buffer offset alignment",
                show(&self.buffer_offset_alignment),
            ),
        ];
        for (name, value) in rows {
            writeln!(f, "{name:32} {value}")?;
        }
        write!(f, "{:32} {}", "int64 atomics", show(&self.int64_atomics))
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
