//! The AMDGPU implementation of [`LoweringTarget`]: AMD GPUs through LLVM's AMDGPU backend
//! (`amdgcn-amd-amdhsa`), emitting an object that [`crate::codegen::llvm::codeobj`] links into a
//! code object with `ld.lld`.
//!
//! - **Wave width is per kernel** (contract §3.2). One `Amdgpu` value builds at one width,
//!   pinned with `+wavefrontsize32` or `+wavefrontsize64`; [`Amdgpu::for_kernel`] picks the
//!   width a kernel gets (its `@wave(N)`, else the processor's default: 64 on gfx9, 32 on
//!   gfx10 and later), and the code-object layer lowers each width group separately. gfx9
//!   parts have no wave 32: a kernel declaring `@wave(32)` for them is refused by the walk
//!   (`XPU-L03`), never built at another width.
//! - **Address spaces**: global 1, LDS (shared) 3, constant 4 (the dispatch packet),
//!   private 5 (allocas; the data layout says so, so the walk's allocas land there).
//! - **Coordinates**: `llvm.amdgcn.workitem.id.*`, `llvm.amdgcn.workgroup.id.*`; group size
//!   and grid size from the HSA dispatch packet (`llvm.amdgcn.dispatch.ptr`:
//!   `workgroup_size_*` are `u16` at byte 4, `grid_size_*` are `u32` work-items at byte 12);
//!   the lane from `mbcnt`.
//! - **Barrier**: `fence syncscope("workgroup") release; s_barrier; fence
//!   syncscope("workgroup") acquire` (docs/semantics.md: a barrier orders shared and global
//!   memory within the workgroup). Fences are `acq_rel` at `workgroup` or `agent` scope.
//!   LLVM 19's C API cannot set a sync scope, so these are tiny functions parsed from IR text
//!   and linked into the module once (`Amdgpu::ir_helper`); they are always-inlined.
//! - **Lane exchange** through `ds_bpermute` (byte address = source lane × 4). In wave 64 on
//!   gfx10+, `ds_bpermute` reaches only the lane's own half; there the other half comes
//!   through `v_permlane64` (gfx11+), and gfx10 at wave 64 refuses the exchange by name.
//!   Votes through `llvm.amdgcn.ballot`; reductions and scans are the walk's shuffle trees.
//! - **Atomics** are the walk's relaxed read-modify-writes at system scope (the strongest,
//!   hence correct at every scope) with this target's scoped fences around them.
//! - **`@occupancy`**: `amdgpu-flat-work-group-size = "1,N"` from `max_threads` (or
//!   `max_waves` × the built width, finished by the walk once the width is known), and
//!   `amdgpu-waves-per-eu` from `min_resident` (blocks per compute unit, four SIMDs each).
//!   AMDGPU has no register pin: `max_registers` is not lowered (contract §3.4).
//! - **Cooperative matrices**: refused by name (`XPU-L01`).

use super::target::{Coord, Exchange, KernelBounds, LoweringTarget};
use super::{Error, LowerResult, ModuleContext};
use crate::ir::{FenceScope, MatrixRole, Scalar};
use inkwell::attributes::AttributeLoc;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Linkage;
use inkwell::targets::FileType;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};

/// The processors Debian's LLVM 19 AMDGPU backend knows that this target accepts.
pub const KNOWN_GFX: [&str; 28] = [
    "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c", "gfx940",
    "gfx941", "gfx942", "gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031",
    "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036", "gfx1100", "gfx1101", "gfx1102",
    "gfx1103", "gfx1150", "gfx1151",
];

/// The AMDGPU target for one processor at one wave width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amdgpu {
    /// The processor (`gfx90a`, `gfx942`, `gfx1100`).
    pub arch: String,
    /// The wave width kernels are built at (32 or 64).
    pub wave: u32,
    /// Emit assembly text instead of an object (for `--emit` and snapshots).
    pub assembly: bool,
}

impl Amdgpu {
    /// The target for `arch` at its default wave width, or `None` for a processor this
    /// target does not know. Accepts `gfx90a` and `gfx90a:sramecc+:xnack-` (the feature
    /// suffix a HIP runtime reports; the code is built for "any").
    pub fn new(arch: &str) -> Option<Self> {
        let arch = Self::parse_arch(arch)?;
        let wave = Self::default_wave(&arch);
        Some(Amdgpu {
            arch,
            wave,
            assembly: false,
        })
    }

    /// The processor name without its feature suffix, if this target knows it.
    pub fn parse_arch(s: &str) -> Option<String> {
        let base = s.trim().split(':').next()?.to_ascii_lowercase();
        KNOWN_GFX.contains(&base.as_str()).then_some(base)
    }

    /// The wave width a processor builds at unless a kernel declares another.
    pub fn default_wave(arch: &str) -> u32 {
        if Self::is_gfx9(arch) {
            64
        } else {
            32
        }
    }

    fn is_gfx9(arch: &str) -> bool {
        arch.len() == 6 && arch.starts_with("gfx9")
    }

    /// The wave widths `arch` can build: gfx9 has wave 64 only; gfx10 and later both.
    pub fn buildable_waves(arch: &str) -> &'static [u32] {
        if Self::is_gfx9(arch) {
            &[64]
        } else {
            &[32, 64]
        }
    }

    /// The target a kernel declaring `declared` (its `@wave`, if any) is built with: the
    /// declared width when the processor can build it, else the default width, so that the
    /// walk refuses the kernel by name (`XPU-L03`) rather than building it at another width.
    pub fn for_kernel(&self, declared: Option<u32>) -> Amdgpu {
        let wave = match declared {
            Some(w) if Self::buildable_waves(&self.arch).contains(&w) => w,
            _ => Self::default_wave(&self.arch),
        };
        Amdgpu {
            wave,
            ..self.clone()
        }
    }

    fn gfx_major(&self) -> u32 {
        let digits = &self.arch[3..];
        if digits.len() <= 3 {
            9
        } else {
            digits[..2].parse().unwrap_or(10)
        }
    }

    /// Returns the function `name`, defining it from IR text `body` (a complete `define`
    /// plus any `declare`s it needs) the first time. This is how scoped fences reach the
    /// module: LLVM 19's C API has no way to give an instruction a sync scope, but its IR
    /// parser does. The helper is made internal after linking, so it disappears once inlined.
    fn ir_helper<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        name: &str,
        body: &str,
    ) -> LowerResult<FunctionValue<'ctx>> {
        if let Some(f) = cx.module.get_function(name) {
            return Ok(f);
        }
        let dl = cx.module.get_data_layout();
        let text = format!(
            "target datalayout = \"{}\"\ntarget triple = \"{}\"\n{body}\n\
             attributes #0 = {{ alwaysinline nounwind convergent }}\n",
            dl.as_str().to_string_lossy(),
            self.triple()
        );
        let buf = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), name);
        let m = cx
            .context
            .create_module_from_ir(buf)
            .map_err(|e| Error::new(super::codes::INTERNAL, format!("helper `{name}`: {e}")))?;
        cx.module
            .link_in_module(m)
            .map_err(|e| Error::new(super::codes::INTERNAL, format!("linking `{name}`: {e}")))?;
        let f = cx.module.get_function(name).ok_or_else(|| {
            Error::new(super::codes::INTERNAL, format!("helper `{name}` vanished"))
        })?;
        f.as_global_value().set_linkage(Linkage::Internal);
        Ok(f)
    }

    fn call_helper(&self, cx: &ModuleContext<'_>, name: &str, body: &str) -> LowerResult<()> {
        let f = self.ir_helper(cx, name, body)?;
        cx.builder.build_call(f, &[], "")?;
        Ok(())
    }

    /// The `i32` at byte `offset` of the dispatch packet, read as `bits` (16 or 32) wide.
    fn dispatch_field<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        offset: u64,
        bits: u32,
    ) -> LowerResult<IntValue<'ctx>> {
        let p = cx
            .call_value("llvm.amdgcn.dispatch.ptr", &[], &[])?
            .into_pointer_value();
        let i8t = cx.context.i8_type();
        // SAFETY: the dispatch packet is 64 bytes; the offsets used are within it.
        let q = unsafe {
            cx.builder
                .build_in_bounds_gep(i8t, p, &[cx.i64(offset)], "")?
        };
        let ty = if bits == 16 {
            cx.context.i16_type()
        } else {
            cx.context.i32_type()
        };
        let v = cx.builder.build_load(ty, q, "")?.into_int_value();
        if let Some(i) = v.as_instruction() {
            let _ = i.set_alignment(bits / 8);
        }
        if bits < 32 {
            Ok(cx
                .builder
                .build_int_z_extend(v, cx.context.i32_type(), "")?)
        } else {
            Ok(v)
        }
    }

    fn lane<'ctx>(&self, cx: &ModuleContext<'ctx>) -> LowerResult<IntValue<'ctx>> {
        let all = cx.i32(u32::MAX as u64);
        let lo = cx
            .call_value("llvm.amdgcn.mbcnt.lo", &[], &[all.into(), cx.i32(0).into()])?
            .into_int_value();
        if self.wave == 32 {
            return Ok(lo);
        }
        Ok(cx
            .call_value("llvm.amdgcn.mbcnt.hi", &[], &[all.into(), lo.into()])?
            .into_int_value())
    }

    fn bpermute<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        src_lane: IntValue<'ctx>,
        value: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let addr = cx.builder.build_left_shift(src_lane, cx.i32(2), "")?;
        Ok(cx
            .call_value("llvm.amdgcn.ds.bpermute", &[], &[addr.into(), value.into()])?
            .into_int_value())
    }
}

fn dim_name(d: usize) -> &'static str {
    ["x", "y", "z"][d.min(2)]
}

impl LoweringTarget for Amdgpu {
    fn name(&self) -> &'static str {
        "amdgpu"
    }

    fn triple(&self) -> &'static str {
        "amdgcn-amd-amdhsa"
    }

    fn cpu(&self) -> String {
        self.arch.clone()
    }

    fn features(&self) -> String {
        format!("+wavefrontsize{}", self.wave)
    }

    fn file_type(&self) -> FileType {
        if self.assembly {
            FileType::Assembly
        } else {
            FileType::Object
        }
    }

    fn wave_width(&self) -> u32 {
        self.wave
    }

    fn global_space(&self) -> AddressSpace {
        AddressSpace::from(1u16)
    }

    fn constant_space(&self) -> AddressSpace {
        AddressSpace::from(4u16)
    }

    fn shared_space(&self) -> AddressSpace {
        AddressSpace::from(3u16)
    }

    fn private_space(&self) -> AddressSpace {
        AddressSpace::from(5u16)
    }

    fn coord<'ctx>(&self, cx: &ModuleContext<'ctx>, which: Coord) -> LowerResult<IntValue<'ctx>> {
        Ok(match which {
            Coord::LocalId(d) => cx
                .call_value(
                    &format!("llvm.amdgcn.workitem.id.{}", dim_name(d)),
                    &[],
                    &[],
                )?
                .into_int_value(),
            Coord::GroupId(d) => cx
                .call_value(
                    &format!("llvm.amdgcn.workgroup.id.{}", dim_name(d)),
                    &[],
                    &[],
                )?
                .into_int_value(),
            Coord::GroupSize(d) => self.dispatch_field(cx, 4 + 2 * d.min(2) as u64, 16)?,
            Coord::NumGroups(d) => {
                // The packet counts work-items; a HIP launch makes the grid a whole number
                // of groups, and rounding up keeps a partial last group counted.
                let grid = self.dispatch_field(cx, 12 + 4 * d.min(2) as u64, 32)?;
                let size = self.dispatch_field(cx, 4 + 2 * d.min(2) as u64, 16)?;
                let one = cx.i32(1);
                let size = cx
                    .builder
                    .build_call(
                        cx.intrinsic("llvm.umax", &[cx.context.i32_type().into()])?,
                        &[size.into(), one.into()],
                        "",
                    )?
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| Error::new(super::codes::INTERNAL, "umax"))?
                    .into_int_value();
                let up = cx.builder.build_int_sub(size, one, "")?;
                let sum = cx.builder.build_int_add(grid, up, "")?;
                cx.builder.build_int_unsigned_div(sum, size, "")?
            }
            Coord::LaneId => self.lane(cx)?,
        })
    }

    fn barrier(&self, cx: &ModuleContext<'_>) -> LowerResult<()> {
        self.call_helper(
            cx,
            "xpu.amdgpu.barrier",
            "define void @xpu.amdgpu.barrier() #0 {\n  fence syncscope(\"workgroup\") release\n  \
             call void @llvm.amdgcn.s.barrier()\n  fence syncscope(\"workgroup\") acquire\n  \
             ret void\n}\ndeclare void @llvm.amdgcn.s.barrier() #0",
        )
    }

    fn wave_barrier<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        _mask: IntValue<'ctx>,
    ) -> LowerResult<()> {
        // The wave runs in lockstep: a code-motion barrier between wavefront-scope fences.
        self.call_helper(
            cx,
            "xpu.amdgpu.wave_barrier",
            "define void @xpu.amdgpu.wave_barrier() #0 {\n  fence syncscope(\"wavefront\") release\n  \
             call void @llvm.amdgcn.wave.barrier()\n  fence syncscope(\"wavefront\") acquire\n  \
             ret void\n}\ndeclare void @llvm.amdgcn.wave.barrier() #0",
        )
    }

    fn fence(&self, cx: &ModuleContext<'_>, scope: FenceScope) -> LowerResult<()> {
        let (name, s) = match scope {
            FenceScope::Workgroup => ("xpu.amdgpu.fence.workgroup", "workgroup"),
            FenceScope::Device => ("xpu.amdgpu.fence.agent", "agent"),
        };
        let body = format!(
            "define void @{name}() #0 {{\n  fence syncscope(\"{s}\") acq_rel\n  ret void\n}}"
        );
        self.call_helper(cx, name, &body)
    }

    fn active_mask<'ctx>(&self, cx: &ModuleContext<'ctx>) -> LowerResult<IntValue<'ctx>> {
        let t = cx.context.bool_type().const_int(1, false);
        self.ballot(cx, cx.i64(u64::MAX), t)
    }

    fn exchange<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        kind: Exchange,
        _mask: IntValue<'ctx>,
        value: IntValue<'ctx>,
        arg: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let b = &cx.builder;
        let w = self.wave as u64;
        let lane = self.lane(cx)?;
        let wm1 = cx.i32(w - 1);
        let src = match kind {
            Exchange::Index => b.build_and(arg, wm1, "")?,
            Exchange::Xor => {
                let x = b.build_xor(lane, arg, "")?;
                b.build_and(x, wm1, "")?
            }
            Exchange::Up => {
                let s = b.build_int_sub(lane, arg, "")?;
                let ok = b.build_int_compare(IntPredicate::UGE, lane, arg, "")?;
                b.build_select(ok, s, lane, "")?.into_int_value()
            }
            Exchange::Down => {
                let s = b.build_int_add(lane, arg, "")?;
                let ok = b.build_int_compare(IntPredicate::ULT, s, cx.i32(w), "")?;
                let ok2 = b.build_int_compare(IntPredicate::UGE, s, lane, "")?;
                let ok = b.build_and(ok, ok2, "")?;
                b.build_select(ok, s, lane, "")?.into_int_value()
            }
        };
        let same_half = self.bpermute(cx, src, value)?;
        if self.wave == 32 || self.gfx_major() == 9 {
            return Ok(same_half);
        }
        // Wave 64 on gfx10+: ds_bpermute stays within the lane's 32-lane half.
        if self.gfx_major() < 11 {
            return Err(Error::new(
                super::codes::UNSUPPORTED,
                format!(
                    "a wave exchange at wave 64 on {} (ds_bpermute reaches one half of the \
                     wave and there is no v_permlane64)",
                    self.arch
                ),
            ));
        }
        let swapped = cx
            .call_value(
                "llvm.amdgcn.permlane64",
                &[cx.context.i32_type().into()],
                &[value.into()],
            )?
            .into_int_value();
        let other_half = self.bpermute(cx, src, swapped)?;
        let sh = b.build_right_shift(src, cx.i32(5), false, "")?;
        let lh = b.build_right_shift(lane, cx.i32(5), false, "")?;
        let same = b.build_int_compare(IntPredicate::EQ, sh, lh, "")?;
        Ok(b.build_select(same, same_half, other_half, "")?
            .into_int_value())
    }

    fn ballot<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        mask: IntValue<'ctx>,
        pred: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let i64t = cx.context.i64_type();
        let rt = if self.wave == 32 {
            cx.context.i32_type()
        } else {
            i64t
        };
        let v = cx
            .call_value("llvm.amdgcn.ballot", &[rt.into()], &[pred.into()])?
            .into_int_value();
        let v = if self.wave == 32 {
            cx.builder.build_int_z_extend(v, i64t, "")?
        } else {
            v
        };
        Ok(cx.builder.build_and(v, mask, "")?)
    }

    fn matrix_type<'ctx>(
        &self,
        _cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
    ) -> Result<BasicTypeEnum<'ctx>, String> {
        Err(format!(
            "cooperative matrix {} {rows}x{cols} of {} is not lowered for amdgpu ({})",
            role.name(),
            scalar.name(),
            self.arch
        ))
    }

    fn matrix_fill<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        _value: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        Err(self.refuse(cx, role, scalar, rows, cols))
    }

    fn matrix_load<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        _ptr: PointerValue<'ctx>,
        _stride: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        Err(self.refuse(cx, role, scalar, rows, cols))
    }

    fn matrix_mma<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        ab_scalar: Scalar,
        _acc_scalar: Scalar,
        _a: BasicValueEnum<'ctx>,
        _b: BasicValueEnum<'ctx>,
        _c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        Err(self.refuse(cx, MatrixRole::A, ab_scalar, 16, 16))
    }

    fn matrix_store<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        scalar: Scalar,
        _value: BasicValueEnum<'ctx>,
        _ptr: PointerValue<'ctx>,
        _stride: IntValue<'ctx>,
    ) -> LowerResult<()> {
        Err(self.refuse(cx, MatrixRole::Acc, scalar, 16, 16))
    }

    fn finish_kernel<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        function: FunctionValue<'ctx>,
        bounds: &KernelBounds,
    ) -> LowerResult<()> {
        // CallingConv::AMDGPU_KERNEL.
        function.set_call_conventions(91);
        let attr = |k: &str, v: &str| {
            function.add_attribute(
                AttributeLoc::Function,
                cx.context.create_string_attribute(k, v),
            )
        };
        // Without a bound LLVM budgets for 1024 work-items (the part's ceiling, §3.4).
        let max_threads = bounds.max_threads.unwrap_or(1024).clamp(1, 1024);
        if bounds.pinned.is_some() {
            // The pinned block (§3.4): exactly this many work-items per workgroup.
            attr(
                "amdgpu-flat-work-group-size",
                &format!("{max_threads},{max_threads}"),
            );
        } else if bounds.max_threads.is_some() {
            attr("amdgpu-flat-work-group-size", &format!("1,{max_threads}"));
        }
        if let Some(blocks) = bounds.min_resident {
            // Blocks resident per compute unit → waves per SIMD (four SIMDs a CU, or a WGP
            // in gfx10+'s default mode), rounded up.
            let waves_per_block = max_threads.div_ceil(self.wave);
            let per_eu = (blocks.saturating_mul(waves_per_block)).div_ceil(4).max(1);
            attr("amdgpu-waves-per-eu", &per_eu.to_string());
        }
        Ok(())
    }
}

impl Amdgpu {
    fn refuse(
        &self,
        cx: &ModuleContext<'_>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
    ) -> Error {
        match self.matrix_type(cx, role, scalar, rows, cols) {
            Err(m) => Error::new(super::codes::UNSUPPORTED, m),
            Ok(_) => Error::new(super::codes::INTERNAL, "matrix type without lowering"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_parsing_and_wave_choice() {
        assert_eq!(
            Amdgpu::parse_arch("gfx90a:sramecc+:xnack-").as_deref(),
            Some("gfx90a")
        );
        assert_eq!(Amdgpu::parse_arch("GFX1100").as_deref(), Some("gfx1100"));
        assert_eq!(Amdgpu::parse_arch("sm_90"), None);
        let a = Amdgpu::new("gfx90a").unwrap();
        assert_eq!((a.wave, a.features().as_str()), (64, "+wavefrontsize64"));
        assert_eq!(a.for_kernel(Some(32)).wave, 64, "gfx9 has no wave 32");
        let r = Amdgpu::new("gfx1100").unwrap();
        assert_eq!(r.wave, 32);
        assert_eq!(r.for_kernel(Some(64)).wave, 64);
        assert_eq!(r.for_kernel(None).wave, 32);
        assert_eq!(Amdgpu::new("gfx942").unwrap().gfx_major(), 9);
        assert_eq!(r.gfx_major(), 11);
        assert_eq!(Amdgpu::new("gfx1030").unwrap().gfx_major(), 10);
    }
}
