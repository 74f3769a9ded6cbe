//! The kernel generator ([`super::gen`]) and launch geometry as `proptest` strategies
//! (feature `fuzz`).
//!
//! A generated kernel is a function of its seed, so these strategies shrink the seed, which
//! says nothing about the kernel's size: shrink a failing kernel with
//! [`super::minimise`] instead.

use super::gen::{self, Case};
use proptest::prelude::*;

/// A generated kernel with the seed of its inputs: for every backend (no inexact float
/// reductions, whose order GPUs do not keep).
pub fn kernels() -> impl Strategy<Value = (Case, u64)> {
    any::<u64>().prop_map(|seed| (gen::generate(seed), seed))
}

/// A generated kernel for the CPU backend, which also computes inexact float reductions in
/// the interpreter's order.
pub fn kernels_for_cpu() -> impl Strategy<Value = (Case, u64)> {
    any::<u64>().prop_map(|seed| (gen::generate_for_cpu(seed), seed))
}

/// A launch geometry: a grid of 1 to `max_groups` workgroups along x (1 or 2 along y) and a
/// block of 1 to `max_block` work-items along x (1 to 4 along y), never more than
/// `max_block` in all.
pub fn geometry(max_groups: u32, max_block: u32) -> impl Strategy<Value = ([u32; 3], [u32; 3])> {
    let (g, b) = (max_groups.max(1), max_block.max(1));
    (1..=g, 1..=2u32, 1..=b, 1..=4u32).prop_map(move |(gx, gy, bx, by)| {
        let by = by.min((b / bx).max(1));
        ([gx, gy, 1], [bx, by, 1])
    })
}
