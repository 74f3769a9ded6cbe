//! `KernelFacts` (contract §6.1): what the filter needs to know about one kernel's device
//! code, read from its manifest. Each fact is `None` where the backend did not measure it (the
//! CPU reports no registers), and a `None` prunes nothing.

use crate::hal::manifest::KernelManifest;
use crate::runtime::device::Program;

/// One kernel's measured footprint at one launch's dynamic shared memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// Registers a work-item uses.
    pub registers_per_thread: Option<u32>,
    /// Bytes spilled to scratch per work-item (stores).
    pub spill_bytes: Option<u32>,
    /// Static plus dynamic shared bytes a block uses.
    pub shared_bytes: Option<u64>,
    /// The device code's hash (a store's build id includes it, §6.2).
    pub code_hash: Option<u64>,
    /// The largest block the code accepts, where the toolchain recorded it.
    pub max_block_threads: Option<u32>,
    /// Whether the backend has device code for the kernel (`Some(false)`: it could not build
    /// it, and the filter prunes the candidate; `None`: not asked, for hand-made facts).
    pub has_code: Option<bool>,
}

impl KernelFacts {
    /// The facts of `kernel` in `program` (its device code built now if it was not yet) with
    /// `dynamic_shared_bytes` of dynamic shared memory; every fact `None` where the backend
    /// has no code for it.
    pub fn measured(program: &Program, kernel: &str, dynamic_shared_bytes: u64) -> KernelFacts {
        match program.manifest(kernel) {
            Some(m) => KernelFacts::from_manifest(&m, dynamic_shared_bytes),
            None => KernelFacts {
                has_code: Some(false),
                ..KernelFacts::default()
            },
        }
    }

    /// The facts a manifest records, with `dynamic_shared_bytes` added to its static shared
    /// memory.
    pub fn from_manifest(m: &KernelManifest, dynamic_shared_bytes: u64) -> KernelFacts {
        KernelFacts {
            registers_per_thread: m.registers_per_thread,
            spill_bytes: m.spill_store_bytes,
            shared_bytes: m.shared_bytes_with(dynamic_shared_bytes),
            code_hash: m.code_hash,
            max_block_threads: m.max_block_threads,
            has_code: Some(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::Backend;

    #[test]
    fn absent_stays_absent() {
        let mut m = KernelManifest::empty("k", Backend::Cpu);
        assert_eq!(
            KernelFacts::from_manifest(&m, 64),
            KernelFacts {
                has_code: Some(true),
                ..KernelFacts::default()
            }
        );
        m.static_shared_bytes = Some(1024);
        m.registers_per_thread = Some(40);
        let f = KernelFacts::from_manifest(&m, 64);
        assert_eq!(f.shared_bytes, Some(1088));
        assert_eq!(f.registers_per_thread, Some(40));
        assert_eq!(f.spill_bytes, None);
    }
}
