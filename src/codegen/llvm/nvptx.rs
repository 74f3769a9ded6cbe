//! The NVPTX implementation of [`LoweringTarget`]: NVIDIA GPUs through LLVM's NVPTX
//! backend, emitting PTX text for the driver (or `ptxas`) to assemble.
//!
//! - Wave 32 always; `@wave(N)` other than 32 is refused at build (contract §3.2).
//! - Address spaces: global 1, shared 3 (static arrays and the `extern` dynamic one),
//!   allocas generic (NVPTX infers local memory).
//! - Coordinates from `%tid`, `%ctaid`, `%ntid`, `%nctaid`, `%laneid`.
//! - `barrier()` is `bar.sync 0`; fences and atomic orders are `membar.cta`/`membar.gl`.
//! - Lane exchange through `shfl.sync.*` with the active mask, votes through
//!   `vote.sync.ballot`, 32-bit integer reductions through `redux.sync` on sm_80 and later.
//! - `@occupancy` lowers to `nvvm.annotations`: `maxntidx`, `minctasm`, `maxnreg`.
//! - Cooperative matrices: WMMA `m16n16k16` with `f16` A/B and an `f32` or `f16`
//!   accumulator, row-major; a module using any other shape or type takes the portable
//!   software tier of the shared walk instead (`matrix.rs`, replicated per lane). WMMA requires each
//!   fragment's address to be 32-byte aligned and its stride a multiple of 8 elements (16
//!   bytes); a kernel that breaks this faults on the device (misaligned address).
//!
//! Transcendental math is not target-specific: the shared walk builds it from arithmetic
//! (`math.rs`), so no libdevice is needed and the accuracy is the same on every target.

use super::target::{Coord, Exchange, KernelBounds, LoweringTarget};
use super::{Error, LowerResult, ModuleContext};
use crate::ir::{FenceScope, MatrixRole, ReduceOp, Scalar};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue,
};
use inkwell::AddressSpace;

/// The processors Debian's LLVM 19 NVPTX backend knows, oldest first.
const KNOWN_SM: [u32; 14] = [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];

/// The NVPTX target for one compute capability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nvptx {
    /// The compute capability as `major * 10 + minor` (90 for the H100/H200).
    pub arch: u32,
}

impl Nvptx {
    /// The target for compute capability `arch` (`major * 10 + minor`). A part newer than
    /// LLVM 19 knows gets the newest PTX it can emit, which the driver JIT-compiles forward.
    pub fn new(arch: u32) -> Self {
        Nvptx { arch }
    }

    /// Parses `sm_90`, `sm90`, `90` or `9.0`.
    pub fn parse_arch(s: &str) -> Option<u32> {
        let t = s.trim().trim_start_matches("sm_").trim_start_matches("sm");
        if let Some((a, b)) = t.split_once('.') {
            return Some(a.parse::<u32>().ok()? * 10 + b.parse::<u32>().ok()?);
        }
        let v: u32 = t.parse().ok()?;
        (v >= 10).then_some(v)
    }

    /// The processor LLVM builds for: the newest known one not newer than `arch`.
    pub fn sm(&self) -> u32 {
        KNOWN_SM
            .iter()
            .rev()
            .copied()
            .find(|&s| s <= self.arch)
            .unwrap_or(KNOWN_SM[0])
    }

    fn ptx_version(&self) -> u32 {
        match self.sm() {
            89.. => 78,
            80..=88 => 70,
            75..=79 => 63,
            _ => 60,
        }
    }
}

/// `ptx` with every integer `abs.s16/s32/s64` written as a compare and select. ptxas (CUDA
/// 13, sm_90), and the NVIDIA Vulkan driver's compiler for GLSL.std.450's `SAbs`, take an
/// integer `abs` as non-negative: `(abs(x) as u64) as f32` of `i32::MIN`, whose wrapped
/// `abs` is `i32::MIN`, became the signed conversion `-2147483648.0` instead of
/// `1.8446744e19` (found by the differential fuzzer on the H200). LLVM folds every
/// select form of `abs` back into `llvm.abs`, so the rewrite happens on the PTX it emits;
/// ptxas reads the select as written (checked in SASS: `I2F.U64` stays unsigned).
pub fn without_integer_abs(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    for line in ptx.split_inclusive('\n') {
        let body = line.trim_start();
        let width = ["16", "32", "64"]
            .into_iter()
            .find(|w| body.starts_with(&format!("abs.s{w}")));
        let operands = width.and_then(|w| {
            let rest = body[format!("abs.s{w}").len()..].trim();
            let rest = rest.strip_suffix(';')?;
            let (dst, src) = rest.split_once(',')?;
            Some((w, dst.trim(), src.trim()))
        });
        match operands {
            Some((w, dst, src)) => {
                let indent = &line[..line.len() - body.len()];
                out.push_str(&format!(
                    "{indent}{{ .reg .pred %abs_p; .reg .b{w} %abs_t; setp.lt.s{w} %abs_p, {src}, 0; \
                     neg.s{w} %abs_t, {src}; selp.b{w} {dst}, %abs_t, {src}, %abs_p; }}\n"
                ));
            }
            None => out.push_str(line),
        }
    }
    out
}

fn dim_name(d: usize) -> &'static str {
    ["x", "y", "z"][d.min(2)]
}

impl LoweringTarget for Nvptx {
    fn name(&self) -> &'static str {
        "nvptx"
    }

    fn triple(&self) -> &'static str {
        "nvptx64-nvidia-cuda"
    }

    fn cpu(&self) -> String {
        format!("sm_{}", self.sm())
    }

    fn features(&self) -> String {
        format!("+ptx{}", self.ptx_version())
    }

    fn wave_width(&self) -> u32 {
        32
    }

    fn finish(&self, code: Vec<u8>) -> Vec<u8> {
        match String::from_utf8(code) {
            Ok(ptx) => without_integer_abs(&ptx).into_bytes(),
            Err(e) => e.into_bytes(),
        }
    }

    fn global_space(&self) -> AddressSpace {
        AddressSpace::from(1u16)
    }

    fn shared_space(&self) -> AddressSpace {
        AddressSpace::from(3u16)
    }

    fn private_space(&self) -> AddressSpace {
        AddressSpace::default()
    }

    fn coord<'ctx>(&self, cx: &ModuleContext<'ctx>, which: Coord) -> LowerResult<IntValue<'ctx>> {
        let name = match which {
            Coord::LocalId(d) => format!("llvm.nvvm.read.ptx.sreg.tid.{}", dim_name(d)),
            Coord::GroupId(d) => format!("llvm.nvvm.read.ptx.sreg.ctaid.{}", dim_name(d)),
            Coord::GroupSize(d) => format!("llvm.nvvm.read.ptx.sreg.ntid.{}", dim_name(d)),
            Coord::NumGroups(d) => format!("llvm.nvvm.read.ptx.sreg.nctaid.{}", dim_name(d)),
            Coord::LaneId => "llvm.nvvm.read.ptx.sreg.laneid".to_string(),
        };
        Ok(cx.call_value(&name, &[], &[])?.into_int_value())
    }

    fn barrier(&self, cx: &ModuleContext<'_>) -> LowerResult<()> {
        cx.call_intrinsic("llvm.nvvm.barrier0", &[], &[])?;
        Ok(())
    }

    fn wave_barrier<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        mask: IntValue<'ctx>,
    ) -> LowerResult<()> {
        // `bar.warp.sync` orders the memory accesses of the threads it names.
        let m = cx
            .builder
            .build_int_truncate(mask, cx.context.i32_type(), "")?;
        cx.call_intrinsic("llvm.nvvm.bar.warp.sync", &[], &[m.into()])?;
        Ok(())
    }

    fn fence(&self, cx: &ModuleContext<'_>, scope: FenceScope) -> LowerResult<()> {
        let name = match scope {
            FenceScope::Workgroup => "llvm.nvvm.membar.cta",
            FenceScope::Device => "llvm.nvvm.membar.gl",
        };
        cx.call_intrinsic(name, &[], &[])?;
        Ok(())
    }

    /// Volta and later schedule lanes independently: lanes that diverged need not run
    /// together again after the merge, and `activemask` after a `bar.warp.sync` may still
    /// miss lanes that are logically there (H200: a wave scan after a loop whose trip count
    /// depended on the lane summed a part of the wave). So the lowering keeps the logical
    /// mask (`FunctionContext::lane_mask`) and passes it to every `.sync` instruction.
    fn tracks_lanes(&self) -> bool {
        true
    }

    fn converge_end<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        mask: IntValue<'ctx>,
    ) -> LowerResult<()> {
        let m = cx
            .builder
            .build_int_truncate(mask, cx.context.i32_type(), "")?;
        cx.call_intrinsic("llvm.nvvm.bar.warp.sync", &[], &[m.into()])?;
        Ok(())
    }

    fn active_mask<'ctx>(&self, cx: &ModuleContext<'ctx>) -> LowerResult<IntValue<'ctx>> {
        let m = cx
            .call_value("llvm.nvvm.activemask", &[], &[])?
            .into_int_value();
        Ok(cx
            .builder
            .build_int_z_extend(m, cx.context.i64_type(), "")?)
    }

    fn exchange<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        kind: Exchange,
        mask: IntValue<'ctx>,
        value: IntValue<'ctx>,
        arg: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let (name, c) = match kind {
            Exchange::Index => ("llvm.nvvm.shfl.sync.idx.i32", 0x1f),
            Exchange::Xor => ("llvm.nvvm.shfl.sync.bfly.i32", 0x1f),
            Exchange::Up => ("llvm.nvvm.shfl.sync.up.i32", 0),
            Exchange::Down => ("llvm.nvvm.shfl.sync.down.i32", 0x1f),
        };
        let m = cx
            .builder
            .build_int_truncate(mask, cx.context.i32_type(), "")?;
        Ok(cx
            .call_value(
                name,
                &[],
                &[m.into(), value.into(), arg.into(), cx.i32(c).into()],
            )?
            .into_int_value())
    }

    fn ballot<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        mask: IntValue<'ctx>,
        pred: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let m = cx
            .builder
            .build_int_truncate(mask, cx.context.i32_type(), "")?;
        let b = cx
            .call_value("llvm.nvvm.vote.ballot.sync", &[], &[m.into(), pred.into()])?
            .into_int_value();
        Ok(cx
            .builder
            .build_int_z_extend(b, cx.context.i64_type(), "")?)
    }

    fn native_reduce<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        op: ReduceOp,
        scalar: Scalar,
        mask: IntValue<'ctx>,
        value: IntValue<'ctx>,
    ) -> LowerResult<Option<IntValue<'ctx>>> {
        if self.sm() < 80 || scalar.bits() != 32 || !scalar.is_int() {
            return Ok(None);
        }
        let name = match (op, scalar.is_signed()) {
            (ReduceOp::Sum, _) => "llvm.nvvm.redux.sync.add",
            (ReduceOp::Min, true) => "llvm.nvvm.redux.sync.min",
            (ReduceOp::Min, false) => "llvm.nvvm.redux.sync.umin",
            (ReduceOp::Max, true) => "llvm.nvvm.redux.sync.max",
            (ReduceOp::Max, false) => "llvm.nvvm.redux.sync.umax",
            (ReduceOp::And, _) => "llvm.nvvm.redux.sync.and",
            (ReduceOp::Or, _) => "llvm.nvvm.redux.sync.or",
            (ReduceOp::Xor, _) => "llvm.nvvm.redux.sync.xor",
        };
        let m = cx
            .builder
            .build_int_truncate(mask, cx.context.i32_type(), "")?;
        Ok(Some(
            cx.call_value(name, &[], &[value.into(), m.into()])?
                .into_int_value(),
        ))
    }

    fn matrix_type<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
    ) -> Result<BasicTypeEnum<'ctx>, String> {
        let c = cx.context;
        if rows != 16 || cols != 16 {
            return Err(format!(
                "cooperative matrix {rows}x{cols} is not lowered for nvptx (WMMA m16n16k16 only)"
            ));
        }
        let h2: BasicTypeEnum = c.f16_type().vec_type(2).into();
        match (role, scalar) {
            (MatrixRole::A | MatrixRole::B, Scalar::F16) => Ok(c.struct_type(&[h2; 8], false).into()),
            (MatrixRole::Acc, Scalar::F32) => Ok(c.struct_type(&[c.f32_type().into(); 8], false).into()),
            (MatrixRole::Acc, Scalar::F16) => Ok(c.struct_type(&[h2; 4], false).into()),
            _ => Err(format!(
                "cooperative matrix {} of {} is not lowered for nvptx (f16 A/B, f32 or f16 accumulator)",
                role.name(),
                scalar.name()
            )),
        }
    }

    fn matrix_instruction(
        &self,
        verb: &str,
        role: MatrixRole,
        scalar: Scalar,
        acc: Scalar,
        _shape: (u8, u8, u8),
    ) -> String {
        let r = match role {
            MatrixRole::A => "a",
            MatrixRole::B => "b",
            MatrixRole::Acc => "c",
        };
        match verb {
            "load" => format!("wmma.load.{r}.sync.aligned.row.m16n16k16.{}", scalar.name()),
            "mma" => format!(
                "wmma.mma.sync.aligned.row.row.m16n16k16.{}.{}",
                acc.name(),
                acc.name()
            ),
            "store" => format!("wmma.store.d.sync.aligned.row.m16n16k16.{}", scalar.name()),
            _ => "mov (fragment registers)".to_string(),
        }
    }

    fn matrix_fill<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        value: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let ty = self
            .matrix_type(cx, role, scalar, rows, cols)
            .map_err(|m| Error::new(super::codes::UNSUPPORTED, m))?
            .into_struct_type();
        let field = ty.get_field_type_at_index(0).expect("fragment field");
        let elem: BasicValueEnum = if field.is_vector_type() {
            let vt = field.into_vector_type();
            let mut v = vt.get_undef();
            for k in 0..vt.get_size() {
                v = cx
                    .builder
                    .build_insert_element(v, value, cx.i32(k as u64), "")?;
            }
            v.into()
        } else {
            value
        };
        let mut agg = ty.get_undef();
        for k in 0..ty.count_fields() {
            agg = cx
                .builder
                .build_insert_value(agg, elem, k, "")?
                .into_struct_value();
        }
        Ok(agg.into())
    }

    fn matrix_load<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        ptr: PointerValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        self.matrix_type(cx, role, scalar, rows, cols)
            .map_err(|m| Error::new(super::codes::UNSUPPORTED, m))?;
        let name = match (role, scalar) {
            (MatrixRole::A, _) => "llvm.nvvm.wmma.m16n16k16.load.a.row.stride.f16",
            (MatrixRole::B, _) => "llvm.nvvm.wmma.m16n16k16.load.b.row.stride.f16",
            (MatrixRole::Acc, Scalar::F32) => "llvm.nvvm.wmma.m16n16k16.load.c.row.stride.f32",
            (MatrixRole::Acc, _) => "llvm.nvvm.wmma.m16n16k16.load.c.row.stride.f16",
        };
        cx.call_value(
            name,
            &[ptr.get_type().as_basic_type_enum()],
            &[ptr.into(), stride.into()],
        )
    }

    fn matrix_mma<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        _ab_scalar: Scalar,
        acc_scalar: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let name = if acc_scalar == Scalar::F32 {
            "llvm.nvvm.wmma.m16n16k16.mma.row.row.f32.f32"
        } else {
            "llvm.nvvm.wmma.m16n16k16.mma.row.row.f16.f16"
        };
        let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
        for agg in [a, b, c] {
            let s = agg.into_struct_value();
            for k in 0..s.get_type().count_fields() {
                args.push(cx.builder.build_extract_value(s, k, "")?.into());
            }
        }
        let f = cx.intrinsic(name, &[])?;
        let call = cx.builder.build_call(f, &args, "")?;
        call.try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::new(super::codes::INTERNAL, "wmma.mma returned nothing"))
    }

    fn matrix_store<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        scalar: Scalar,
        value: BasicValueEnum<'ctx>,
        ptr: PointerValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<()> {
        let name = if scalar == Scalar::F32 {
            "llvm.nvvm.wmma.m16n16k16.store.d.row.stride.f32"
        } else {
            "llvm.nvvm.wmma.m16n16k16.store.d.row.stride.f16"
        };
        let mut args: Vec<BasicMetadataValueEnum> = vec![ptr.into()];
        let s = value.into_struct_value();
        for k in 0..s.get_type().count_fields() {
            args.push(cx.builder.build_extract_value(s, k, "")?.into());
        }
        args.push(stride.into());
        let f = cx.intrinsic(name, &[ptr.get_type().as_basic_type_enum()])?;
        cx.builder.build_call(f, &args, "")?;
        Ok(())
    }

    fn finish_kernel<'ctx>(
        &self,
        cx: &ModuleContext<'ctx>,
        function: FunctionValue<'ctx>,
        bounds: &KernelBounds,
    ) -> LowerResult<()> {
        // CallingConv::PTX_Kernel.
        function.set_call_conventions(71);
        let c = cx.context;
        let fp = function.as_global_value().as_pointer_value();
        let annotate = |key: &str, v: u32| -> LowerResult<()> {
            let node = c.metadata_node(&[
                fp.into(),
                c.metadata_string(key).into(),
                c.i32_type().const_int(v as u64, false).into(),
            ]);
            cx.module
                .add_global_metadata("nvvm.annotations", &node)
                .map_err(|e| Error::new(super::codes::INTERNAL, e.to_string()))
        };
        annotate("kernel", 1)?;
        if let Some([x, y, z]) = bounds.pinned {
            // The pinned block (§3.4): ptxas budgets registers for exactly this many threads.
            annotate("reqntidx", x)?;
            annotate("reqntidy", y)?;
            annotate("reqntidz", z)?;
        } else if let Some(t) = bounds.max_threads {
            annotate("maxntidx", t)?;
        }
        if let Some(m) = bounds.min_resident {
            annotate("minctasm", m)?;
        }
        if let Some(r) = bounds.max_registers {
            annotate("maxnreg", r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_parsing_and_processor_choice() {
        assert_eq!(Nvptx::parse_arch("sm_90"), Some(90));
        assert_eq!(Nvptx::parse_arch("9.0"), Some(90));
        assert_eq!(Nvptx::parse_arch("86"), Some(86));
        assert_eq!(Nvptx::parse_arch("x"), None);
        assert_eq!(Nvptx::new(90).cpu(), "sm_90");
        assert_eq!(Nvptx::new(100).cpu(), "sm_90");
        assert_eq!(Nvptx::new(88).cpu(), "sm_87");
        assert_eq!(Nvptx::new(90).features(), "+ptx78");
    }

    #[test]
    fn integer_abs_becomes_a_select_and_float_abs_stays() {
        let ptx = "\tabs.s32 \t%r7, %r2;\n\tabs.f32 \t%f1, %f2;\n\tabs.s64 %rd3, %rd1;\n";
        let got = super::without_integer_abs(ptx);
        assert_eq!(
            got,
            "\t{ .reg .pred %abs_p; .reg .b32 %abs_t; setp.lt.s32 %abs_p, %r2, 0; neg.s32 %abs_t, %r2; selp.b32 %r7, %abs_t, %r2, %abs_p; }\n\
             \tabs.f32 \t%f1, %f2;\n\
             { .reg .pred %abs_p; .reg .b64 %abs_t; setp.lt.s64 %abs_p, %rd1, 0; neg.s64 %abs_t, %rd1; selp.b64 %rd3, %abs_t, %rd1, %abs_p; }\n"
                .replace("\n{", "\n\t{")
        );
    }
}
