//! The spill gate's three-way diagnosis (contract §3.6): a kernel with scratch on NVPTX or
//! AMDGPU is told which of three causes it has, and what to do about it.
//!
//! 1. **A portable software tile**: the kernel holds cooperative-matrix fragments the target
//!    has no native instruction for, so every lane holds a replicated tile (§3.3) and the
//!    scratch is the tile. The line names the fragment and suggests a natively tiered type.
//! 2. **Zero spill stores** but a stack frame: nothing was spilled, so the frame is a construct
//!    the lowering legalised through memory (a dynamically indexed private array is the usual
//!    one). The line names the private arrays, or says the lowering needs fixing.
//! 3. **Register pressure**: spill stores. The line gives the registers used against the
//!    per-thread budget of the block the kernel is built for, and suggests cutting live
//!    registers or pinning a smaller block.

use super::{BuiltKernel, Target};
use crate::ir::{Function, MatrixRole, Scalar, Type};

/// Registers an SM holds per block on every NVIDIA part this lowering targets, and the most
/// one thread may have.
const NV_REGISTER_FILE: u32 = 65536;
const NV_MAX_REGISTERS: u32 = 255;

/// Whether NVPTX lowers a fragment of this type natively (WMMA `m16n16k16`: `f16` A/B, an
/// `f32` or `f16` accumulator); see `codegen::llvm::nvptx`.
fn nvptx_native(role: MatrixRole, scalar: Scalar, rows: u8, cols: u8) -> bool {
    rows == 16
        && cols == 16
        && matches!(
            (role, scalar),
            (MatrixRole::A | MatrixRole::B, Scalar::F16)
                | (MatrixRole::Acc, Scalar::F32 | Scalar::F16)
        )
}

/// The spill line's message for `built` (a kernel with device code), or `None` when the
/// kernel has no scratch or the target measured none (no `ptxas`, no linker, or a target
/// without scratch: the CPU and Vulkan). `spill_count` is AMDGPU's spilled-register count.
pub fn spill(f: &Function, built: &BuiltKernel, spill_count: Option<u32>) -> Option<String> {
    let m = &built.manifest;
    let stack = m.stack_frame_bytes.unwrap_or(0);
    let (stores, spilled) = match built.target {
        Target::Cuda => {
            let stores = m.spill_store_bytes?;
            (stores, stores > 0)
        }
        Target::Amdgpu => {
            m.stack_frame_bytes?;
            let n = spill_count.unwrap_or(0);
            (n, n > 0)
        }
        Target::Cpu | Target::Vulkan => return None,
    };
    if stack == 0 && !spilled {
        return None;
    }
    let scratch = match built.target {
        Target::Cuda => format!(
            "{stack} bytes of stack frame, {stores} bytes of spill stores, {} bytes of spill loads per thread",
            m.spill_load_bytes.unwrap_or(0)
        ),
        _ => format!("{stack} bytes of private segment per work-item, {stores} registers spilled"),
    };

    // 1. A software tile: fragments the target has no native tier for.
    let fragments: Vec<(&str, MatrixRole, Scalar, u8, u8)> = f
        .locals
        .iter()
        .filter_map(|(_, l)| match l.ty {
            Type::Matrix {
                role,
                scalar,
                rows,
                cols,
            } => Some((l.name.as_str(), role, scalar, rows, cols)),
            _ => None,
        })
        .collect();
    let software = match built.target {
        // The tier is chosen for the module's fragments as a whole (§3.3).
        Target::Cuda => fragments
            .iter()
            .find(|(_, role, scalar, r, c)| !nvptx_native(*role, *scalar, *r, *c)),
        _ => fragments.first(),
    };
    if let Some((name, role, scalar, rows, cols)) = software {
        let bytes = *rows as u32 * *cols as u32 * scalar.size();
        let suggestion = match built.target {
            Target::Cuda => "use a natively tiered type: f16 A/B fragments with an f32 or f16 accumulator at 16x16 (WMMA m16n16k16)",
            _ => "use a natively tiered type; amdgpu lowers no fragment natively in this build, so the tile stays in scratch there until it does",
        };
        return Some(format!(
            "{scratch}: a portable software tile: fragment `{name}` (matrix<{}, {}, {rows}, {cols}>, {bytes} bytes replicated per lane) is the scratch; {suggestion}",
            role.name(),
            scalar.name()
        ));
    }

    // 2. Zero spill stores: a construct legalised through memory.
    if !spilled {
        let arrays: Vec<String> = f
            .locals
            .iter()
            .filter_map(|(_, l)| match l.ty {
                Type::Array { elem, .. } => Some(format!(
                    "`{}` ([{}; _])",
                    l.name,
                    crate::hal::launch::elem_name(elem)
                )),
                _ => None,
            })
            .collect();
        return Some(if arrays.is_empty() {
            format!(
                "{scratch}: zero spill stores, so a construct was legalised through memory, and the kernel has no private array to blame: fix the lowering"
            )
        } else {
            format!(
                "{scratch}: zero spill stores, so a construct was legalised through memory: the private array {} (indexed dynamically, it lives in local memory); index it with constants, or keep it in shared memory",
                arrays.join(", ")
            )
        });
    }

    // 3. Register pressure.
    let block = m
        .pinned_block
        .map(|b| b.iter().product::<u32>())
        .or(m.max_threads)
        .or(m.max_waves.zip(m.built_wave).map(|(w, b)| w * b));
    let regs = m
        .registers_per_thread
        .map_or("an unreported number of".into(), |r| r.to_string());
    Some(match (built.target, block) {
        (Target::Cuda, Some(t)) => {
            let budget = (NV_REGISTER_FILE / t.max(1) / 8 * 8).min(NV_MAX_REGISTERS);
            format!(
                "{scratch}: register pressure: {regs} registers per thread against a budget of {budget} for a block of {t} threads; cut live registers or pin a smaller block (@block)"
            )
        }
        (Target::Cuda, None) => format!(
            "{scratch}: register pressure: {regs} registers per thread against the per-thread ceiling of {NV_MAX_REGISTERS}; cut live registers or pin a smaller block (@block)"
        ),
        (_, t) => format!(
            "{scratch}: register pressure: {regs} VGPRs and {} SGPRs for a block of {} work-items; cut live registers or pin a smaller block (@block)",
            m.scalar_registers
                .map_or("an unreported number of".into(), |r| r.to_string()),
            t.map_or("up to 1024".into(), |t| t.to_string())
        ),
    })
}
