//! The portable software tier of cooperative matrices (contract §3.3), for fragments a target
//! has no native instruction for (on NVPTX: anything but WMMA `m16n16k16` with `f16` A/B).
//!
//! The tile is *distributed* by default (`matrix_dist.rs`: each lane holds its share); with
//! `CAJETA_GPU_MATRIX_DIST=off` ([`super::Options::matrix_dist`]) it is *replicated*, the
//! control: every lane holds the whole `ROWS × COLS` fragment as an LLVM
//! array and performs each verb itself, exactly as `docs/semantics.md` defines it (`mma`
//! converts `a` and `b` elements to the accumulator type and accumulates in ascending `k`,
//! rounding every product and sum), so results agree with the interpreter bit for bit. The
//! price is registers: a 16×16 `f32` tile is 1 KB per lane and lands in local memory. A store
//! is made by the wave's lowest active lane only ("once per wave").
//!
//! The tier is chosen for the module as a whole: when any fragment type in the kernels being
//! lowered (or their helpers) lacks a native lowering, every fragment takes this tier, so a
//! group of operands never straddles tiers and helpers agree with their callers.

use super::target::Coord;
use super::{codes, scalar_type, FunctionContext, LowerResult, LoweringTarget, ModuleContext};
use crate::ir::{Base, Expr, Function, MatrixRole, Scalar, Type};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;

/// One cooperative-matrix operation of the lowered code and the tier it took (contract §3.3,
/// the manifest's native operations, §4).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MatrixOp {
    /// The IR operation with its types (`matrix_mma<f16 16x16x16, f32>`,
    /// `matrix_load<a, f16, 16, 16>`).
    pub op: String,
    /// The instruction it became (`wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32`), or the
    /// software tier's form.
    pub instruction: String,
    /// `native`, `software-distributed` or `software-replicated`.
    pub tier: &'static str,
}

/// The tier names a [`MatrixOp`] carries.
pub const TIER_NATIVE: &str = "native";
/// Each lane holds its share of the tile (`matrix_dist.rs`).
pub const TIER_DISTRIBUTED: &str = "software-distributed";
/// Every lane holds the whole tile (`CAJETA_GPU_MATRIX_DIST=off`).
pub const TIER_REPLICATED: &str = "software-replicated";

/// The verbs of [`FunctionContext::note_matrix`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    Fill,
    Load,
    Mma,
    Store,
}

/// The largest replicated tile, in elements.
const MAX_ELEMENTS: u32 = 1024;

/// The software fragment type: `rows * cols` scalars replicated (`lanes` 1), or a lane's
/// share of them distributed over `lanes` lanes (`matrix_dist.rs`).
pub(super) fn software_type<'ctx>(
    cx: &ModuleContext<'ctx>,
    scalar: Scalar,
    rows: u8,
    cols: u8,
    lanes: u32,
) -> Result<BasicTypeEnum<'ctx>, String> {
    let n = rows as u32 * cols as u32;
    if n == 0 || n > MAX_ELEMENTS || scalar == Scalar::Bool {
        return Err(format!(
            "cooperative matrix {rows}x{cols} of {} has no native lowering and is too large for the software tier ({MAX_ELEMENTS} elements)",
            scalar.name()
        ));
    }
    Ok(scalar_type(cx, scalar)
        .array_type(super::matrix_dist::slots(rows, cols, lanes))
        .into())
}

/// Whether any fragment type used by `functions` lacks a native lowering on `target`.
pub(super) fn needs_software<'a>(
    cx: &ModuleContext<'_>,
    target: &dyn LoweringTarget,
    functions: impl Iterator<Item = &'a Function>,
) -> bool {
    first_software_reason(cx, target, functions).is_some()
}

/// Why the first fragment type of `functions` without a native lowering on `target` has
/// none (the target's refusal), if there is one.
pub(super) fn first_software_reason<'a>(
    cx: &ModuleContext<'_>,
    target: &dyn LoweringTarget,
    functions: impl Iterator<Item = &'a Function>,
) -> Option<String> {
    let native = |t: Type| match t {
        Type::Matrix {
            role,
            scalar,
            rows,
            cols,
        } => target.matrix_type(cx, role, scalar, rows, cols).err(),
        _ => None,
    };
    for f in functions {
        let types = f
            .params
            .iter()
            .map(|p| p.ty)
            .chain(f.locals.iter().map(|(_, l)| l.ty))
            .chain(f.ret);
        for t in types {
            if let Some(why) = native(t) {
                return Some(why);
            }
        }
        for (_, e) in f.exprs.iter() {
            let t = match e {
                Expr::MatrixFill {
                    role,
                    scalar,
                    rows,
                    cols,
                    ..
                }
                | Expr::MatrixLoad {
                    role,
                    scalar,
                    rows,
                    cols,
                    ..
                } => Type::Matrix {
                    role: *role,
                    scalar: *scalar,
                    rows: *rows,
                    cols: *cols,
                },
                _ => continue,
            };
            if let Some(why) = native(t) {
                return Some(why);
            }
        }
    }
    None
}

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    /// Records a matrix verb of fragment `(role, scalar, rows, cols)` (for `mma`, `scalar` is
    /// the A/B type, `acc` the accumulator's and `cols` is `N`, `inner` `K`) with its tier.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn note_matrix(
        &self,
        verb: Verb,
        role: MatrixRole,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        inner: u8,
        acc: Scalar,
    ) {
        let op = match verb {
            Verb::Fill => format!(
                "matrix_fill<{}, {}, {rows}, {cols}>",
                role.name(),
                scalar.name()
            ),
            Verb::Load => format!(
                "matrix_load<{}, {}, {rows}, {cols}>",
                role.name(),
                scalar.name()
            ),
            Verb::Store => format!("matrix_store<{}, {rows}, {cols}>", scalar.name()),
            Verb::Mma => format!(
                "matrix_mma<{} {rows}x{cols}x{inner}, {}>",
                scalar.name(),
                acc.name()
            ),
        };
        let (tier, instruction) = if !self.cx.software_matrices.get() {
            let v = match verb {
                Verb::Fill => "fill",
                Verb::Load => "load",
                Verb::Mma => "mma",
                Verb::Store => "store",
            };
            (
                TIER_NATIVE,
                self.t
                    .matrix_instruction(v, role, scalar, acc, (rows, cols, inner)),
            )
        } else if self.cx.distributed_matrices.get() {
            let i = match verb {
                Verb::Fill => "register fill of the lane's share",
                Verb::Load => "scalar loads of the lane's share",
                Verb::Mma => "lane shuffles + scalar multiply-add",
                Verb::Store => "scalar stores of the lane's share",
            };
            (TIER_DISTRIBUTED, i.to_string())
        } else {
            let i = match verb {
                Verb::Fill => "register fill of the whole tile",
                Verb::Load => "scalar loads of the whole tile per lane",
                Verb::Mma => "scalar multiply-add loop per lane",
                Verb::Store => "scalar stores by the lowest lane",
            };
            (TIER_REPLICATED, i.to_string())
        };
        let m = MatrixOp {
            op,
            instruction,
            tier,
        };
        let mut ops = self.cx.matrix_ops.borrow_mut();
        if !ops.contains(&m) {
            ops.push(m);
        }
    }

    fn sw_type(&self, scalar: Scalar, rows: u8, cols: u8) -> LowerResult<BasicTypeEnum<'ctx>> {
        software_type(self.cx, scalar, rows, cols, 1).or_else(|m| self.err(codes::UNSUPPORTED, m))
    }

    pub(super) fn sw_fill(
        &self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        v: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if self.cx.distributed_matrices.get() {
            return self.dist_fill(scalar, rows, cols, v);
        }
        let t = self.sw_type(scalar, rows, cols)?.into_array_type();
        let mut agg = t.get_undef();
        for k in 0..t.len() {
            agg = self
                .b()
                .build_insert_value(agg, v, k, "")?
                .into_array_value();
        }
        Ok(agg.into())
    }

    /// `offset + i * stride + j` in `u32` arithmetic, as the interpreter computes it.
    fn sw_index(
        &self,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
        i: u32,
        j: u32,
    ) -> LowerResult<IntValue<'ctx>> {
        let r = self.b().build_int_mul(stride, self.cx.i32(i as u64), "")?;
        let r = self.b().build_int_add(offset, r, "")?;
        Ok(self.b().build_int_add(r, self.cx.i32(j as u64), "")?)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn sw_load(
        &mut self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: Base,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if self.cx.distributed_matrices.get() {
            return self.dist_load(scalar, rows, cols, base, offset, stride);
        }
        let t = self.sw_type(scalar, rows, cols)?.into_array_type();
        let (_, elem) = self.base_info(base)?;
        let mut agg = t.get_undef();
        for i in 0..rows as u32 {
            for j in 0..cols as u32 {
                let idx = self.sw_index(offset, stride, i, j)?;
                let ptr = self.scalar_ptr(base, idx)?;
                let (ptr, ok) = self.checked_ptr(base, ptr, idx, 1)?;
                let v = self.load_elem(ptr, elem, elem.scalar.size())?;
                let v = self.zero_unless(v, ok)?;
                agg = self
                    .b()
                    .build_insert_value(agg, v, i * cols as u32 + j, "")?
                    .into_array_value();
            }
        }
        Ok(agg.into())
    }

    /// `d = c + a × b`, each product and sum rounded in the accumulator type, ascending `k`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sw_mma(
        &mut self,
        (ab, rows, inner): (Scalar, u8, u8),
        (acc, cols): (Scalar, u8),
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        if self.cx.distributed_matrices.get() {
            return self.dist_mma((ab, rows, inner), (acc, cols), a, b, c);
        }
        use inkwell::values::InstructionOpcode as O;
        let (a, b, c) = (
            a.into_array_value(),
            b.into_array_value(),
            c.into_array_value(),
        );
        let ctx = self.cx.context;
        let at = a.get_type();
        let bt = b.get_type();
        let ct = c.get_type();
        // The operands go to memory so that the k loop indexes them.
        let pa = self.entry_alloca(at.into(), "mma.a")?;
        let pb = self.entry_alloca(bt.into(), "mma.b")?;
        let pd = self.entry_alloca(ct.into(), "mma.d")?;
        self.b().build_store(pa, a)?;
        self.b().build_store(pb, b)?;
        self.b().build_store(pd, c)?;
        let ab_t = scalar_type(self.cx, ab);
        let acc_t = scalar_type(self.cx, acc);
        let i64t = ctx.i64_type();
        let elem_ptr =
            |this: &Self, ty: BasicTypeEnum<'ctx>, base, idx: IntValue<'ctx>| -> LowerResult<_> {
                let i = this.b().build_int_z_extend(idx, i64t, "")?;
                // SAFETY: `idx` < the array's length by construction of the loops below.
                Ok(unsafe { this.b().build_gep(ty, base, &[i], "")? })
            };
        let f = acc.is_float();
        for i in 0..rows as u32 {
            for j in 0..cols as u32 {
                let di = self.cx.i32((i * cols as u32 + j) as u64);
                let dptr = elem_ptr(self, acc_t, pd, di)?;
                // for k in 0..inner: d += conv(a[i][k]) * conv(b[k][j]) — an IR loop.
                let head = ctx.append_basic_block(self.llfn, "mma.k");
                let body = ctx.append_basic_block(self.llfn, "mma.kbody");
                let done = ctx.append_basic_block(self.llfn, "mma.kdone");
                let pre = self.b().get_insert_block().expect("positioned");
                let start = self.b().build_load(acc_t, dptr, "")?;
                self.b().build_unconditional_branch(head)?;
                self.b().position_at_end(head);
                let k = self.b().build_phi(ctx.i32_type(), "k")?;
                let s = self.b().build_phi(acc_t, "sum")?;
                k.add_incoming(&[(&self.cx.i32(0), pre)]);
                s.add_incoming(&[(&start, pre)]);
                let kv = k.as_basic_value().into_int_value();
                let more = self.b().build_int_compare(
                    IntPredicate::ULT,
                    kv,
                    self.cx.i32(inner as u64),
                    "",
                )?;
                self.b().build_conditional_branch(more, body, done)?;
                self.b().position_at_end(body);
                let ai = self
                    .b()
                    .build_int_add(self.cx.i32((i * inner as u32) as u64), kv, "")?;
                let bi = self.b().build_int_mul(kv, self.cx.i32(cols as u64), "")?;
                let bi = self.b().build_int_add(bi, self.cx.i32(j as u64), "")?;
                let av = self
                    .b()
                    .build_load(ab_t, elem_ptr(self, ab_t, pa, ai)?, "")?;
                let bv = self
                    .b()
                    .build_load(ab_t, elem_ptr(self, ab_t, pb, bi)?, "")?;
                let av = self.cast(av, Type::Scalar(ab), acc)?;
                let bv = self.cast(bv, Type::Scalar(ab), acc)?;
                let p = self.binop(if f { O::FMul } else { O::Mul }, av, bv)?;
                let n = self.binop(if f { O::FAdd } else { O::Add }, s.as_basic_value(), p)?;
                let k1 = self.b().build_int_add(kv, self.cx.i32(1), "")?;
                let end = self.b().get_insert_block().expect("positioned");
                k.add_incoming(&[(&k1, end)]);
                s.add_incoming(&[(&n, end)]);
                self.b().build_unconditional_branch(head)?;
                self.b().position_at_end(done);
                self.b().build_store(dptr, s.as_basic_value())?;
            }
        }
        Ok(self.b().build_load(ct, pd, "")?)
    }

    /// Row-major store of a software fragment, by the wave's lowest active lane.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sw_store(
        &mut self,
        scalar: Scalar,
        value: BasicValueEnum<'ctx>,
        base: Base,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
        rows: u8,
        cols: u8,
    ) -> LowerResult<()> {
        if self.cx.distributed_matrices.get() {
            return self.dist_store(scalar, value, base, offset, stride, rows, cols);
        }
        let ctx = self.cx.context;
        let mask = self.lanes()?;
        let first = self
            .cx
            .call_value(
                "llvm.cttz",
                &[ctx.i64_type().into()],
                &[mask.into(), ctx.bool_type().const_zero().into()],
            )?
            .into_int_value();
        let lane = self.t.coord(self.cx, Coord::LaneId)?;
        let lane = self.b().build_int_z_extend(lane, ctx.i64_type(), "")?;
        let me = self
            .b()
            .build_int_compare(IntPredicate::EQ, lane, first, "")?;
        let store_bb = ctx.append_basic_block(self.llfn, "mstore");
        let after = ctx.append_basic_block(self.llfn, "mstore.end");
        self.b().build_conditional_branch(me, store_bb, after)?;
        self.b().position_at_end(store_bb);
        let agg = value.into_array_value();
        for i in 0..rows as u32 {
            for j in 0..cols as u32 {
                let idx = self.sw_index(offset, stride, i, j)?;
                let ptr = self.scalar_ptr(base, idx)?;
                let (ptr, _) = self.checked_ptr(base, ptr, idx, 1)?;
                let v = self.b().build_extract_value(agg, i * cols as u32 + j, "")?;
                let st = self.b().build_store(ptr, self.value_to_mem(v, scalar)?)?;
                st.set_alignment(scalar.size())
                    .map_err(|e| super::Error::new(codes::INTERNAL, e.to_string()))?;
            }
        }
        self.b().build_unconditional_branch(after)?;
        self.b().position_at_end(after);
        Ok(())
    }
}
