//! `KernelManifest`: what a backend measured about one kernel's device code (contract §4).
//!
//! One manifest per (kernel, backend), produced with the device code and read back with
//! [`Program::manifest`](crate::runtime::device::Program::manifest). The rule is the contract's:
//! **absent is a value**. A field a backend cannot report is `None`, never zero, and the
//! manifest itself is `None` where the backend has no device code for the kernel.
//!
//! [`KernelManifest::from_kernel`] fills in the facts the IR alone decides (declared wave,
//! occupancy bounds, static shared memory); a backend adds what its toolchain measured
//! (registers, spills, stack frame from `ptxas -v` or an AMDGPU kernel descriptor; the width
//! the kernel was built at; native operations and their tiers).

#![warn(missing_docs)]

use crate::hal::Backend;
use crate::ir::template::eval_const;
use crate::ir::{ConstExpr, Function, Handle, Len};

/// One native operation in a kernel's device code and the tier it was lowered at (§3.3): a
/// route can learn a kernel is on the slow tier before it launches it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NativeOp {
    /// The IR operation (`matrix_mma<f16, 16, 16>`, `wave_reduce_sum`).
    pub op: String,
    /// The instruction it became (`wmma.mma.sync`, `v_wmma_f32_16x16x16_f16`).
    pub instruction: String,
    /// `native`, `software-distributed`, `software-replicated`, ...
    pub tier: String,
}

/// The tier of a cooperative-matrix operation whose tile each lane holds a share of (§3.3):
/// a launch of such a kernel needs whole waves.
pub const TIER_DISTRIBUTED: &str = "software-distributed";

/// The manifest of one kernel on one backend (contract §4).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelManifest {
    /// The kernel's name.
    pub kernel: String,
    /// The backend the code was built for.
    pub backend: Backend,
    /// Registers a work-item uses.
    pub registers_per_thread: Option<u32>,
    /// Scalar (wave-uniform) registers a wave uses, where the device has them (AMDGPU SGPRs).
    pub scalar_registers: Option<u32>,
    /// The largest block the device code accepts, as the toolchain recorded it (AMDGPU's
    /// `.max_flat_workgroup_size`).
    pub max_block_threads: Option<u32>,
    /// Bytes spilled to scratch (stores), per work-item.
    pub spill_store_bytes: Option<u32>,
    /// Bytes reloaded from scratch, per work-item.
    pub spill_load_bytes: Option<u32>,
    /// The stack frame (private segment) a work-item needs.
    pub stack_frame_bytes: Option<u32>,
    /// Shared memory the kernel declares with a fixed size.
    pub static_shared_bytes: Option<u64>,
    /// Whether the kernel declares a shared array sized at launch.
    pub dynamic_shared: bool,
    /// `@wave(N)`: the width the body assumes.
    pub declared_wave: Option<u32>,
    /// The width the device code was built at (the host's SIMD width or the declared wave on
    /// the CPU backend, 32 on NVIDIA, ...). 1 for a CPU kernel with no wave verb.
    pub built_wave: Option<u32>,
    /// The block the kernel was pinned to (§3.4); a launch with another block is refused.
    pub pinned_block: Option<[u32; 3]>,
    /// `@occupancy(max_threads = N)`: the largest block the kernel is budgeted for.
    pub max_threads: Option<u32>,
    /// `@occupancy(max_waves = N)`.
    pub max_waves: Option<u32>,
    /// `@occupancy(min_resident = N)`: blocks the kernel asks to keep resident per multiprocessor.
    pub min_resident: Option<u32>,
    /// `@occupancy(max_registers = N)`: the register budget per thread the kernel declares.
    pub max_registers: Option<u32>,
    /// Blocks this device can run the kernel with, from its measured footprint (§6.5).
    pub feasible_blocks: Option<Vec<u32>>,
    /// What limits occupancy (`registers`, `shared`, `threads`), where it was modelled.
    pub occupancy_limiter: Option<String>,
    /// Operations lowered to a native instruction of this device, with their tier.
    pub native_ops: Vec<NativeOp>,
    /// A hash of the device code, part of a tuning store's build id (§6.2).
    pub code_hash: Option<u64>,
    /// The device code's size in bytes, where the backend knows it.
    pub code_bytes: Option<u64>,
    /// The shared arrays declared with a layout (contract §2.2) and whether this backend
    /// placed them so or kept the identity layout.
    #[serde(default)]
    pub shared_layouts: Vec<SharedLayout>,
}

/// One laid-out shared array in a [`KernelManifest`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedLayout {
    /// The array's name.
    pub array: String,
    /// The layout declared (`swizzled<32>`, `block_padded<32, 1>`).
    pub layout: String,
    /// Whether the backend places the elements so (`false`: the identity layout, as the
    /// reference interpreter keeps).
    pub applied: bool,
    /// Elements the array takes in shared memory (the logical count plus any padding).
    pub physical_elems: Option<u32>,
}

impl KernelManifest {
    /// A manifest that knows nothing but the kernel and backend.
    pub fn empty(kernel: impl Into<String>, backend: Backend) -> Self {
        KernelManifest {
            kernel: kernel.into(),
            backend,
            registers_per_thread: None,
            scalar_registers: None,
            max_block_threads: None,
            spill_store_bytes: None,
            spill_load_bytes: None,
            stack_frame_bytes: None,
            static_shared_bytes: None,
            dynamic_shared: false,
            declared_wave: None,
            built_wave: None,
            pinned_block: None,
            max_threads: None,
            max_waves: None,
            min_resident: None,
            max_registers: None,
            feasible_blocks: None,
            occupancy_limiter: None,
            native_ops: Vec::new(),
            code_hash: None,
            code_bytes: None,
            shared_layouts: Vec::new(),
        }
    }

    /// The facts the IR decides for `kernel` (a verified, instantiated kernel): its declared
    /// wave, its occupancy bounds and its static shared memory. An attribute or array length
    /// that is not a closed constant (a template not yet instantiated) stays `None`.
    pub fn from_kernel(kernel: &Function, backend: Backend) -> Self {
        let mut m = KernelManifest::empty(kernel.name.clone(), backend);
        m.declared_wave = kernel.attrs.wave.map(|(w, _)| w);
        m.pinned_block = kernel.attrs.block.map(|(b, _)| b);
        if let Some(occ) = &kernel.attrs.occupancy {
            let eval =
                |h: Option<Handle<ConstExpr>>| h.and_then(|h| eval_const(kernel, h, None).ok());
            m.max_threads = eval(occ.max_threads);
            m.max_waves = eval(occ.max_waves);
            m.min_resident = eval(occ.min_resident);
            m.max_registers = eval(occ.max_registers);
        }
        let mut total = Some(0u64);
        // Every backend but the reference interpreter places laid-out arrays as declared.
        let places = backend != Backend::Interp;
        for (h, decl) in kernel.shared.iter() {
            let placed = crate::ir::layout::placed_len(kernel, h).filter(|_| places);
            if let Some(layout) = kernel.layout_of(h) {
                m.shared_layouts.push(SharedLayout {
                    array: decl.name.clone(),
                    layout: layout.name(),
                    applied: placed.is_some(),
                    physical_elems: placed.or(match decl.len {
                        Some(Len::Fixed(n)) => Some(n),
                        _ => None,
                    }),
                });
            }
            match decl.len {
                None => m.dynamic_shared = true,
                Some(Len::Fixed(n)) => {
                    let n = placed.unwrap_or(n);
                    total = total.and_then(|t| t.checked_add(n as u64 * decl.elem.size() as u64))
                }
                Some(Len::Const(h)) => {
                    let bytes = eval_const(kernel, h, None)
                        .ok()
                        .and_then(|n| (n as u64).checked_mul(decl.elem.size() as u64));
                    total = total.zip(bytes).and_then(|(t, b)| t.checked_add(b));
                }
            }
        }
        m.static_shared_bytes = total;
        m
    }

    /// Shared bytes a launch with `dynamic_bytes` of dynamic shared memory needs, where the
    /// static part is known.
    pub fn shared_bytes_with(&self, dynamic_bytes: u64) -> Option<u64> {
        self.static_shared_bytes
            .and_then(|s| s.checked_add(dynamic_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ConstBinOp, ElemType, FunctionKind, Occupancy, Scalar, SharedDecl, Span};

    #[test]
    fn from_kernel_reads_attributes_and_shared() {
        let mut f = Function::new("k", FunctionKind::Kernel);
        let four = f.consts.append(ConstExpr::Lit(4));
        let sixty_four = f.consts.append(ConstExpr::Lit(64));
        let threads = f
            .consts
            .append(ConstExpr::Binary(ConstBinOp::Mul, four, sixty_four));
        f.attrs.wave = Some((32, Span::UNKNOWN));
        f.attrs.occupancy = Some(Occupancy {
            max_threads: Some(threads),
            ..Occupancy::default()
        });
        f.shared.append(SharedDecl {
            name: "tile".into(),
            elem: ElemType::scalar(Scalar::F32),
            len: Some(Len::Fixed(256)),
            span: Span::UNKNOWN,
        });
        f.shared.append(SharedDecl {
            name: "dynamic".into(),
            elem: ElemType::scalar(Scalar::U8),
            len: None,
            span: Span::UNKNOWN,
        });
        let m = KernelManifest::from_kernel(&f, Backend::Interp);
        assert_eq!(m.declared_wave, Some(32));
        assert_eq!(m.max_threads, Some(256));
        assert_eq!(m.max_waves, None);
        assert_eq!(m.static_shared_bytes, Some(1024));
        assert!(m.dynamic_shared);
        assert_eq!(m.shared_bytes_with(100), Some(1124));
        // What the IR cannot know stays absent.
        assert_eq!(m.registers_per_thread, None);
        assert_eq!(m.spill_store_bytes, None);
    }

    #[test]
    fn template_parameters_stay_absent() {
        let mut f = Function::new("t", FunctionKind::Kernel);
        let p = f.consts.append(ConstExpr::Param(0));
        f.shared.append(SharedDecl {
            name: "tile".into(),
            elem: ElemType::scalar(Scalar::F32),
            len: Some(Len::Const(p)),
            span: Span::UNKNOWN,
        });
        let m = KernelManifest::from_kernel(&f, Backend::Cpu);
        assert_eq!(m.static_shared_bytes, None);
        let zero = f.consts.append(ConstExpr::Lit(0));
        let div = f.consts.append(ConstExpr::Binary(ConstBinOp::Div, p, zero));
        assert!(eval_const(&f, div, None).is_err());
    }
}
