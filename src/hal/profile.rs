//! `DeviceProfile`, the compile-time model (contract §6.5): for the architectures it knows it
//! fills a manifest's `feasible_blocks` and `occupancy_limiter` from the kernel's measured
//! footprint (registers a work-item, static shared bytes). On a part it does not know both
//! fields stay absent, which is why the run-time filter (`crate::tune::filter`) reads the
//! driver instead.
//!
//! The figures are the vendors' published per-multiprocessor limits (NVIDIA's CUDA C
//! Programming Guide, "Technical Specifications per Compute Capability"; AMD's CDNA2/CDNA3
//! ISA guides and the RDNA3 ISA guide). They model residency only: a block size is feasible
//! when at least one block of it fits one multiprocessor.

use super::manifest::KernelManifest;

/// One architecture's per-multiprocessor limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceProfile {
    /// `sm_90`, `gfx942`.
    pub arch: &'static str,
    /// The wave (warp) width in lanes.
    pub wave: u32,
    /// 32-bit registers per multiprocessor (per CU on AMD: the VGPR file of all SIMDs, per
    /// lane × lanes).
    pub registers_per_multiprocessor: u32,
    /// Registers are allocated per wave in multiples of this (per work-item).
    pub register_granule: u32,
    /// The most registers one work-item may use.
    pub max_registers_per_thread: u32,
    /// The most work-items one block may have.
    pub max_threads_per_block: u32,
    /// The most work-items resident on one multiprocessor.
    pub max_threads_per_multiprocessor: u32,
    /// The most blocks resident on one multiprocessor.
    pub max_blocks_per_multiprocessor: u32,
    /// Shared memory per multiprocessor, in bytes.
    pub shared_bytes_per_multiprocessor: u64,
    /// The most shared memory one block may use (with the opt-in where there is one).
    pub max_shared_bytes_per_block: u64,
}

/// Every architecture the model knows.
pub const PROFILES: [DeviceProfile; 6] = [
    DeviceProfile {
        arch: "sm_80",
        wave: 32,
        registers_per_multiprocessor: 65536,
        register_granule: 8,
        max_registers_per_thread: 255,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 2048,
        max_blocks_per_multiprocessor: 32,
        shared_bytes_per_multiprocessor: 164 << 10,
        max_shared_bytes_per_block: 163 << 10,
    },
    DeviceProfile {
        arch: "sm_89",
        wave: 32,
        registers_per_multiprocessor: 65536,
        register_granule: 8,
        max_registers_per_thread: 255,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 1536,
        max_blocks_per_multiprocessor: 24,
        shared_bytes_per_multiprocessor: 100 << 10,
        max_shared_bytes_per_block: 99 << 10,
    },
    DeviceProfile {
        arch: "sm_90",
        wave: 32,
        registers_per_multiprocessor: 65536,
        register_granule: 8,
        max_registers_per_thread: 255,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 2048,
        max_blocks_per_multiprocessor: 32,
        shared_bytes_per_multiprocessor: 228 << 10,
        max_shared_bytes_per_block: 227 << 10,
    },
    // CDNA2: 4 SIMDs a CU, 512 VGPRs (arch + acc) a lane, 8 waves a SIMD, 64 KB LDS.
    DeviceProfile {
        arch: "gfx90a",
        wave: 64,
        registers_per_multiprocessor: 4 * 512 * 64,
        register_granule: 8,
        max_registers_per_thread: 512,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 4 * 8 * 64,
        max_blocks_per_multiprocessor: 32,
        shared_bytes_per_multiprocessor: 64 << 10,
        max_shared_bytes_per_block: 64 << 10,
    },
    // CDNA3: as CDNA2 for these limits.
    DeviceProfile {
        arch: "gfx942",
        wave: 64,
        registers_per_multiprocessor: 4 * 512 * 64,
        register_granule: 8,
        max_registers_per_thread: 512,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 4 * 8 * 64,
        max_blocks_per_multiprocessor: 32,
        shared_bytes_per_multiprocessor: 64 << 10,
        max_shared_bytes_per_block: 64 << 10,
    },
    // RDNA3, per CU in wave32: 2 SIMDs of 1536 VGPRs a lane, 16 waves a SIMD, 64 KB LDS.
    DeviceProfile {
        arch: "gfx1100",
        wave: 32,
        registers_per_multiprocessor: 2 * 1536 * 32,
        register_granule: 16,
        max_registers_per_thread: 256,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 2 * 16 * 32,
        max_blocks_per_multiprocessor: 32,
        shared_bytes_per_multiprocessor: 64 << 10,
        max_shared_bytes_per_block: 64 << 10,
    },
];

impl DeviceProfile {
    /// The profile of `arch` (`sm_90`, `gfx942`; a CUDA compute capability `90` is `sm_90`),
    /// `None` for a part the model does not know.
    pub fn of(arch: &str) -> Option<&'static DeviceProfile> {
        let arch = arch.trim();
        let name = if arch.bytes().all(|b| b.is_ascii_digit()) {
            format!("sm_{arch}")
        } else {
            arch.to_string()
        };
        PROFILES.iter().find(|p| p.arch == name)
    }

    /// Blocks of `threads` work-items one multiprocessor holds with `registers` a work-item
    /// and `shared` bytes a block, and what limits them (`threads`, `blocks`, `registers`,
    /// `shared`); zero where a block cannot be resident at all (with the limit it breaks).
    pub fn resident(
        &self,
        threads: u32,
        registers: Option<u32>,
        shared: Option<u64>,
    ) -> (u32, &'static str) {
        if threads == 0 || threads > self.max_threads_per_block {
            return (0, "threads");
        }
        let waves = threads.div_ceil(self.wave);
        let mut limits: Vec<(u32, &'static str)> = vec![
            (
                self.max_threads_per_multiprocessor / (waves * self.wave),
                "threads",
            ),
            (self.max_blocks_per_multiprocessor, "blocks"),
        ];
        if let Some(r) = registers {
            if r > self.max_registers_per_thread {
                return (0, "registers");
            }
            let per_thread = r.max(1).div_ceil(self.register_granule) * self.register_granule;
            let per_block = per_thread * waves * self.wave;
            limits.push((self.registers_per_multiprocessor / per_block, "registers"));
        }
        if let Some(s) = shared.filter(|&s| s > 0) {
            if s > self.max_shared_bytes_per_block {
                return (0, "shared");
            }
            limits.push(((self.shared_bytes_per_multiprocessor / s) as u32, "shared"));
        }
        // The tightest limit; on a tie the earlier named (threads before blocks, ...).
        let mut best = limits[0];
        for l in &limits[1..] {
            if l.0 < best.0 {
                best = *l;
            }
        }
        best
    }

    /// Fills `m.feasible_blocks` (the block sizes, in waves up to the per-block cap, of which
    /// one block fits a multiprocessor) and `m.occupancy_limiter` (what limits residency at the
    /// kernel's block: its pinned block, else its `max_threads`, else the largest feasible).
    pub fn fill(&self, m: &mut KernelManifest) {
        // A kernel built at another wave than the part's default (wave64 on RDNA) is
        // allocated per its own wave.
        let p = DeviceProfile {
            wave: m
                .built_wave
                .filter(|&w| w == 32 || w == 64)
                .unwrap_or(self.wave),
            ..*self
        };
        let regs = m.registers_per_thread;
        let shared = m.static_shared_bytes;
        let feasible: Vec<u32> = (1..=p.max_threads_per_block / p.wave)
            .map(|w| w * p.wave)
            .filter(|&t| p.resident(t, regs, shared).0 >= 1)
            .collect();
        let block = m
            .pinned_block
            .map(|b| b[0] * b[1] * b[2])
            .or(m.max_threads)
            .or(feasible.last().copied());
        m.occupancy_limiter = block.map(|t| p.resident(t, regs, shared).1.to_string());
        m.feasible_blocks = Some(feasible);
    }
}

/// Fills `m` from the profile of `arch` where the model knows it; leaves both fields absent
/// otherwise.
pub fn fill_manifest(arch: &str, m: &mut KernelManifest) {
    if let Some(p) = DeviceProfile::of(arch) {
        p.fill(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::Backend;

    #[test]
    fn known_parts_fill_and_unknown_parts_stay_absent() {
        let mut m = KernelManifest::empty("k", Backend::Cuda);
        m.registers_per_thread = Some(128);
        m.static_shared_bytes = Some(48 << 10);
        fill_manifest("sm_90", &mut m);
        let f = m.feasible_blocks.clone().unwrap();
        // 128 registers: 65536 / 128 = 512 work-items at most.
        assert_eq!(f.last(), Some(&512));
        assert_eq!(m.occupancy_limiter.as_deref(), Some("registers"));
        let mut u = KernelManifest::empty("k", Backend::Cuda);
        fill_manifest("sm_75", &mut u);
        assert_eq!(u.feasible_blocks, None);
        assert_eq!(u.occupancy_limiter, None);
        assert!(DeviceProfile::of("90").is_some());
        assert!(DeviceProfile::of("gfx1100").is_some());
    }

    #[test]
    fn shared_memory_limits_residency() {
        let p = DeviceProfile::of("sm_89").unwrap();
        assert_eq!(p.resident(128, Some(32), Some(60 << 10)), (1, "shared"));
        assert_eq!(p.resident(128, Some(32), Some(120 << 10)), (0, "shared"));
        assert_eq!(p.resident(1024, None, None), (1, "threads"));
        assert_eq!(p.resident(2048, None, None).0, 0);
    }
}
