//! The portable software tier of cooperative matrices (contract §3.3), for fragments a target
//! has no native instruction for (on NVPTX: anything but WMMA `m16n16k16` with `f16` A/B).
//!
//! The tile is *replicated*: every lane holds the whole `ROWS × COLS` fragment as an LLVM
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
use super::{codes, scalar_type, Cx, FnCx, LResult, LoweringTarget};
use crate::ir::{Base, Expr, Function, Scalar, Type};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;

/// The largest replicated tile, in elements.
const MAX_ELEMENTS: u32 = 1024;

/// The software fragment type: `rows * cols` scalars.
pub(super) fn software_type<'ctx>(
    cx: &Cx<'ctx>,
    scalar: Scalar,
    rows: u8,
    cols: u8,
) -> Result<BasicTypeEnum<'ctx>, String> {
    let n = rows as u32 * cols as u32;
    if n == 0 || n > MAX_ELEMENTS || scalar == Scalar::Bool {
        return Err(format!(
            "cooperative matrix {rows}x{cols} of {} has no native lowering and is too large for the software tier ({MAX_ELEMENTS} elements)",
            scalar.name()
        ));
    }
    Ok(scalar_type(cx, scalar).array_type(n).into())
}

/// Whether any fragment type used by `functions` lacks a native lowering on `target`.
pub(super) fn needs_software<'a>(
    cx: &Cx<'_>,
    target: &dyn LoweringTarget,
    functions: impl Iterator<Item = &'a Function>,
) -> bool {
    let native = |t: Type| match t {
        Type::Matrix {
            role,
            scalar,
            rows,
            cols,
        } => target.matrix_type(cx, role, scalar, rows, cols).is_ok(),
        _ => true,
    };
    for f in functions {
        let types = f
            .params
            .iter()
            .map(|p| p.ty)
            .chain(f.locals.iter().map(|(_, l)| l.ty))
            .chain(f.ret);
        for t in types {
            if !native(t) {
                return true;
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
            if !native(t) {
                return true;
            }
        }
    }
    false
}

impl<'a, 'ctx> FnCx<'a, 'ctx> {
    fn sw_type(&self, scalar: Scalar, rows: u8, cols: u8) -> LResult<BasicTypeEnum<'ctx>> {
        software_type(self.cx, scalar, rows, cols).or_else(|m| self.err(codes::UNSUPPORTED, m))
    }

    pub(super) fn sw_fill(
        &self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        v: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
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
    ) -> LResult<IntValue<'ctx>> {
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
    ) -> LResult<BasicValueEnum<'ctx>> {
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
    ) -> LResult<BasicValueEnum<'ctx>> {
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
            |this: &Self, ty: BasicTypeEnum<'ctx>, base, idx: IntValue<'ctx>| -> LResult<_> {
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
    ) -> LResult<()> {
        let ctx = self.cx.context;
        let mask = self.t.active_mask(self.cx)?;
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
                    .map_err(|e| super::LowerError::new(codes::LLVM, e.to_string()))?;
            }
        }
        self.b().build_unconditional_branch(after)?;
        self.b().position_at_end(after);
        Ok(())
    }
}
