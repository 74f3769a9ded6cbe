//! The `LoweringTarget` seam (contract §3.1): everything the shared walk in
//! [`super`] asks of a GPU target. The walk owns the body, control flow, operators, casts,
//! buffer addressing and the generic wave algorithms (shuffle trees, scans, lane loops); a
//! target answers only for the coordinate source, address spaces, barriers and fences,
//! lane-exchange and vote primitives, native reductions where it has them, cooperative-matrix intrinsics and kernel attributes.
//!
//! Two implementations are planned: [`super::nvptx::Nvptx`] (here) and AMDGPU. Keep
//! vendor names out of this file except in documentation.

use super::{LowerResult, ModuleContext};
use crate::ir::{FenceScope, MatrixRole, ReduceOp, Scalar};
use inkwell::targets::FileType;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;

/// A coordinate the launch gives every work-item; each is an `i32` (`u32` in the IR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coord {
    /// The work-item's index within its workgroup, per dimension.
    LocalId(usize),
    /// The workgroup's index within the grid.
    GroupId(usize),
    /// Work-items per workgroup.
    GroupSize(usize),
    /// Workgroups per grid.
    NumGroups(usize),
    /// The lane within the wave.
    LaneId,
}

/// How a 32-bit lane exchange picks its source lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// From lane `arg` (taken modulo the wave width).
    Index,
    /// From lane `lane ^ arg`.
    Xor,
    /// From lane `lane - arg`; a lane with no such source keeps its own value.
    Up,
    /// From lane `lane + arg`; a lane with no such source keeps its own value.
    Down,
}

/// The static bounds a kernel declares (`@occupancy`, contract §3.4), evaluated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelBounds {
    /// The largest block the kernel may be launched with, in work-items (`max_threads`, or
    /// `max_waves` times the wave width).
    pub max_threads: Option<u32>,
    pub min_resident: Option<u32>,
    pub max_registers: Option<u32>,
    /// `@block(X, Y, Z)`: the one block the kernel is launched with (contract §3.4), lowered
    /// as `.reqntid` on NVPTX and `amdgpu-flat-work-group-size = V,V` on AMDGPU. With it,
    /// `max_threads` is the block's volume unless the kernel declares its own ceiling.
    pub pinned: Option<[u32; 3]>,
}

/// What a target lowers a kernel for. Each method gets the emission context positioned
/// where the walk wants the instructions.
pub trait LoweringTarget {
    /// A short name for messages and manifests (`nvptx`, `amdgpu`).
    fn name(&self) -> &'static str;
    /// The LLVM target triple.
    fn triple(&self) -> &'static str;
    /// The processor (`sm_90`, `gfx942`).
    fn cpu(&self) -> String;
    /// LLVM target features (`+ptx78`).
    fn features(&self) -> String;
    /// What LLVM emits: assembly text (PTX) or an object (AMDGPU).
    fn file_type(&self) -> FileType {
        FileType::Assembly
    }
    /// The emitted code, rewritten where the target's own assembler is known to mistranslate
    /// an instruction LLVM chose (a peephole over PTX text on NVPTX); unchanged by default.
    fn finish(&self, code: Vec<u8>) -> Vec<u8> {
        code
    }
    /// The wave width kernels are built at; `Group.width()` folds to it.
    fn wave_width(&self) -> u32;
    /// Whether this target can build a kernel that declares `@wave(width)`.
    fn supports_wave(&self, width: u32) -> bool {
        width == self.wave_width()
    }

    /// The address space of global (buffer) memory.
    fn global_space(&self) -> AddressSpace;
    /// The address space a constant buffer (`buf<_, const>`) is read through: the global
    /// space (NVPTX, whose invariant loads become `ld.global.nc`), or AMDGPU's constant
    /// space 4 (scalar `s_load` where the address is uniform).
    fn constant_space(&self) -> AddressSpace {
        self.global_space()
    }
    /// The address space of workgroup (shared) memory.
    fn shared_space(&self) -> AddressSpace;
    /// The address space allocas live in.
    fn private_space(&self) -> AddressSpace;

    /// Reads one launch coordinate as an `i32`.
    fn coord<'ctx>(&self, cx: &ModuleContext<'ctx>, which: Coord) -> LowerResult<IntValue<'ctx>>;

    /// A workgroup barrier that also orders shared and global memory within the workgroup.
    fn barrier(&self, cx: &ModuleContext<'_>) -> LowerResult<()>;
    /// A memory fence at `scope` with acquire-release strength (also used around atomics
    /// whose order asks for it).
    fn fence(&self, cx: &ModuleContext<'_>, scope: FenceScope) -> LowerResult<()>;
    /// `wave_barrier()`: the lanes of `mask` (the logical lane mask, an `i64`) meet, and
    /// their memory accesses before it are ordered before those after it.
    fn wave_barrier<'ctx>(&self, cx: &ModuleContext<'ctx>, mask: IntValue<'ctx>)
        -> LowerResult<()>;

    /// Whether the lowering must keep the logical lane mask itself: lanes that diverged
    /// need not run together again after the merge, and the hardware's own active mask
    /// says who happens to be running, not who is logically in the construct (NVIDIA's
    /// independent thread scheduling). Where this is false, the hardware reconverges at
    /// the merge and `active_mask` is the logical mask.
    fn tracks_lanes(&self) -> bool {
        false
    }
    /// At the merge point of a tracked construct: makes the lanes in `mask` (an `i64`, as
    /// `active_mask` gives it) wait for each other.
    fn converge_end<'ctx>(
        &self,
        _cx: &ModuleContext<'ctx>,
        _mask: IntValue<'ctx>,
    ) -> LowerResult<()> {
        Ok(())
    }
    /// The mask of the wave's active lanes, as an `i64` (bit `l` for lane `l`).
    fn active_mask<'ctx>(&self, cx: &ModuleContext<'ctx>) -> LowerResult<IntValue<'ctx>>;
    /// Exchanges one `i32` among the lanes in `mask` (the value `active_mask` gave).
    fn exchange<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        kind: Exchange,
        mask: IntValue<'ctx>,
        value: IntValue<'ctx>,
        arg: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>>;
    /// The `i64` mask of lanes in `mask` whose `pred` (an `i1`) is true.
    fn ballot<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        mask: IntValue<'ctx>,
        pred: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>>;
    /// A native wave reduction of a 32-bit integer over the lanes in `mask`, if the target
    /// has one; `None` makes the walk build a shuffle tree.
    fn native_reduce<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        op: ReduceOp,
        scalar: Scalar,
        mask: IntValue<'ctx>,
        value: IntValue<'ctx>,
    ) -> LowerResult<Option<IntValue<'ctx>>> {
        let _ = (cx, op, scalar, mask, value);
        Ok(None)
    }

    /// The register type of a cooperative-matrix fragment, or an error naming the shape
    /// the target refuses.
    fn matrix_type<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
    ) -> Result<BasicTypeEnum<'ctx>, String>;
    /// A fragment with every element `value` (of the fragment's scalar type).
    fn matrix_fill<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        value: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>>;
    /// A fragment loaded row-major from `ptr` (already offset), rows `stride` elements apart.
    #[allow(clippy::too_many_arguments)]
    fn matrix_load<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        ptr: PointerValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>>;
    /// `a × b + c`; the scalars are those of the fragments.
    fn matrix_mma<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        ab_scalar: Scalar,
        acc_scalar: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>>;
    /// Stores an accumulator fragment row-major to `ptr`, rows `stride` elements apart.
    fn matrix_store<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        scalar: Scalar,
        value: BasicValueEnum<'ctx>,
        ptr: PointerValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<()>;

    /// The instruction a native matrix verb (`fill`, `load`, `mma`, `store`) of fragment
    /// `(role, scalar)` becomes, for the manifest (contract §4); `acc` is the accumulator type
    /// and `shape` `(rows, cols, inner)`.
    fn matrix_instruction(
        &self,
        verb: &str,
        role: MatrixRole,
        scalar: Scalar,
        acc: Scalar,
        shape: (u8, u8, u8),
    ) -> String {
        let _ = (role, acc);
        format!(
            "{}.matrix_{verb}.{}.{}x{}",
            self.name(),
            scalar.name(),
            shape.0,
            shape.1
        )
    }

    /// Marks `function` as a kernel entry point and attaches its bounds.
    fn finish_kernel<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        function: FunctionValue<'ctx>,
        bounds: &KernelBounds,
    ) -> LowerResult<()>;
}
