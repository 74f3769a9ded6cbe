//! The distributed software tile (contract §3.3): the default form of the portable software
//! tier on NVPTX and AMDGPU (`CAJETA_GPU_MATRIX_DIST=off` keeps the replicated control in
//! `matrix.rs`).
//!
//! Each lane of a wave of `W` lanes holds its `1/W` share of a `ROWS × COLS` fragment: slot
//! `s` of lane `l` is element `e = s * W + l` of the row-major tile (row `e / COLS`, column
//! `e % COLS`), so a lane holds `ceil(ROWS * COLS / W)` scalars (8 for a 16×16 tile at wave
//! 32, 4 at wave 64) and the tile stays in registers. Lanes whose `e` is past the tile (the
//! last slot of a tile that is not a multiple of `W`) hold nothing meaningful and store
//! nothing.
//!
//! - `matrix_fill`: every slot is the value.
//! - `matrix_load` / `matrix_store`: each lane reads or writes its own elements (each element
//!   once per wave, as the semantics ask).
//! - `matrix_mma`: a lane computes its own accumulator elements. For output `(i, j)` and each
//!   `k` in ascending order it fetches `a[i][k]` and `b[k][j]` from the lanes that hold them
//!   with indexed shuffles; which slot of the source lane holds them is known at compile time
//!   for every lane, so one shuffle per operand and `k` suffices where all lanes read the same
//!   slot (every tile whose column count divides `W` or is a multiple of it), and one per
//!   distinct slot, selected, elsewhere. Products and sums are rounded in the accumulator type
//!   in ascending `k`, exactly as the interpreter computes them.
//!
//! The shuffles name every lane of the wave, so the tile needs whole waves: a kernel on this
//! tier refuses a block that is not a multiple of the wave width (`XPU-N01`, at launch).

use super::target::{Coord, Exchange};
use super::{FunctionContext, LowerResult};
use crate::ir::{Base, Scalar, Type};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;

/// Slots a lane holds of a `rows × cols` tile distributed over `lanes` lanes.
pub(super) fn slots(rows: u8, cols: u8, lanes: u32) -> u32 {
    (rows as u32 * cols as u32).div_ceil(lanes.max(1))
}

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    fn dist_array(&self, scalar: Scalar, rows: u8, cols: u8) -> LowerResult<BasicTypeEnum<'ctx>> {
        super::matrix::software_type(self.cx, scalar, rows, cols, self.t.wave_width())
            .or_else(|m| self.err(super::codes::UNSUPPORTED, m))
    }

    /// The tile element slot `s` of this lane holds, and whether it is inside the tile; an
    /// element past the tile is replaced by element 0 so that every address stays valid.
    fn dist_element(
        &self,
        s: u32,
        n: u32,
    ) -> LowerResult<(IntValue<'ctx>, Option<IntValue<'ctx>>)> {
        let w = self.t.wave_width();
        let lane = self.t.coord(self.cx, Coord::LaneId)?;
        let e = self
            .b()
            .build_int_add(self.cx.i32((s * w) as u64), lane, "")?;
        if (s + 1) * w <= n {
            return Ok((e, None));
        }
        let inside = self
            .b()
            .build_int_compare(IntPredicate::ULT, e, self.cx.i32(n as u64), "")?;
        let e = self
            .b()
            .build_select(inside, e, self.cx.i32(0), "")?
            .into_int_value();
        Ok((e, Some(inside)))
    }

    /// `offset + (e / cols) * stride + e % cols`, in `u32` arithmetic.
    fn dist_index(
        &self,
        e: IntValue<'ctx>,
        cols: u8,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<IntValue<'ctx>> {
        let c = self.cx.i32(cols as u64);
        let i = self.b().build_int_unsigned_div(e, c, "")?;
        let j = self.b().build_int_unsigned_rem(e, c, "")?;
        let r = self.b().build_int_mul(i, stride, "")?;
        let r = self.b().build_int_add(offset, r, "")?;
        Ok(self.b().build_int_add(r, j, "")?)
    }

    pub(super) fn dist_fill(
        &self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        v: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.dist_array(scalar, rows, cols)?.into_array_type();
        let mut agg = t.get_undef();
        for s in 0..t.len() {
            agg = self
                .b()
                .build_insert_value(agg, v, s, "")?
                .into_array_value();
        }
        Ok(agg.into())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn dist_load(
        &mut self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: Base,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.dist_array(scalar, rows, cols)?.into_array_type();
        let (_, elem) = self.base_info(base)?;
        let n = rows as u32 * cols as u32;
        let mut agg = t.get_undef();
        for s in 0..t.len() {
            let (e, _) = self.dist_element(s, n)?;
            let idx = self.dist_index(e, cols, offset, stride)?;
            let ptr = self.scalar_ptr(base, idx)?;
            let (ptr, ok) = self.checked_ptr(base, ptr, idx, 1)?;
            let v = self.load_elem(ptr, elem, elem.scalar.size())?;
            let v = self.zero_unless(v, ok)?;
            agg = self
                .b()
                .build_insert_value(agg, v, s, "")?
                .into_array_value();
        }
        Ok(agg.into())
    }

    /// Each lane stores the elements it holds.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dist_store(
        &mut self,
        scalar: Scalar,
        value: BasicValueEnum<'ctx>,
        base: Base,
        offset: IntValue<'ctx>,
        stride: IntValue<'ctx>,
        rows: u8,
        cols: u8,
    ) -> LowerResult<()> {
        let ctx = self.cx.context;
        let agg = value.into_array_value();
        let n = rows as u32 * cols as u32;
        for s in 0..agg.get_type().len() {
            let (e, inside) = self.dist_element(s, n)?;
            let after = inside
                .map(|inside| -> LowerResult<_> {
                    let store_bb = ctx.append_basic_block(self.llfn, "mstore");
                    let after = ctx.append_basic_block(self.llfn, "mstore.end");
                    self.b().build_conditional_branch(inside, store_bb, after)?;
                    self.b().position_at_end(store_bb);
                    Ok(after)
                })
                .transpose()?;
            let idx = self.dist_index(e, cols, offset, stride)?;
            let ptr = self.scalar_ptr(base, idx)?;
            let (ptr, _) = self.checked_ptr(base, ptr, idx, 1)?;
            let v = self.b().build_extract_value(agg, s, "")?;
            let st = self.b().build_store(ptr, self.value_to_mem(v, scalar)?)?;
            st.set_alignment(scalar.size())
                .map_err(|e| super::Error::new(super::codes::INTERNAL, e.to_string()))?;
            if let Some(after) = after {
                self.b().build_unconditional_branch(after)?;
                self.b().position_at_end(after);
            }
        }
        Ok(())
    }

    /// Element `(row(e), k)`-style fetch: the value of tile element `src_elem` (a function of
    /// this lane's own element `own`), held by lane `src_elem % W` at slot `src_elem / W`.
    /// `slot_of` gives, for a lane's (clamped) own element, the source element; it is
    /// evaluated at compile time for every lane to learn which slots are read.
    #[allow(clippy::too_many_arguments)]
    fn dist_fetch(
        &self,
        tile: inkwell::values::ArrayValue<'ctx>,
        own: &[u32],
        src_of: impl Fn(u32) -> u32,
        src_elem: IntValue<'ctx>,
        mask: IntValue<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let w = self.t.wave_width();
        let mut slots: Vec<u32> = own.iter().map(|&e| src_of(e) / w).collect();
        slots.sort_unstable();
        slots.dedup();
        let wv = self.cx.i32(w as u64);
        let src_lane = self.b().build_int_unsigned_rem(src_elem, wv, "")?;
        let mut got: Option<BasicValueEnum<'ctx>> = None;
        let src_slot = if slots.len() > 1 {
            Some(self.b().build_int_unsigned_div(src_elem, wv, "")?)
        } else {
            None
        };
        for &slot in &slots {
            let x = self.b().build_extract_value(tile, slot, "")?;
            let y = self.exchange_value(Exchange::Index, mask, x, src_lane)?;
            got = Some(match (got, src_slot) {
                (Some(prev), Some(ss)) => {
                    let here = self.b().build_int_compare(
                        IntPredicate::EQ,
                        ss,
                        self.cx.i32(slot as u64),
                        "",
                    )?;
                    self.b().build_select(here, y, prev, "")?
                }
                _ => y,
            });
        }
        got.ok_or_else(|| super::Error::new(super::codes::INTERNAL, "an empty tile"))
    }

    /// `d = c + a × b` over distributed tiles, each product and sum rounded in the
    /// accumulator type, ascending `k`.
    pub(super) fn dist_mma(
        &mut self,
        (ab, rows, inner): (Scalar, u8, u8),
        (acc, cols): (Scalar, u8),
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let (a, b, c) = (
            a.into_array_value(),
            b.into_array_value(),
            c.into_array_value(),
        );
        let w = self.t.wave_width();
        let (m, kk, n) = (rows as u32, inner as u32, cols as u32);
        // Every lane of the wave takes part: the tile needs whole waves (checked at launch).
        let mask = self
            .cx
            .i64(if w >= 64 { u64::MAX } else { (1u64 << w) - 1 });
        let f = acc.is_float();
        let mut d = c.get_type().get_undef();
        for s in 0..c.get_type().len() {
            let (e, _) = self.dist_element(s, m * n)?;
            // This slot's element in every lane, clamped as `dist_element` clamps it.
            let own: Vec<u32> = (0..w)
                .map(|l| s * w + l)
                .map(|e| if e < m * n { e } else { 0 })
                .collect();
            let nv = self.cx.i32(n as u64);
            let i = self.b().build_int_unsigned_div(e, nv, "")?;
            let j = self.b().build_int_unsigned_rem(e, nv, "")?;
            let row_a = self.b().build_int_mul(i, self.cx.i32(kk as u64), "")?;
            let mut sum = self.b().build_extract_value(c, s, "")?;
            for k in 0..kk {
                // a[i][k] is element i * K + k of A; b[k][j] is element k * N + j of B.
                let ea = self.b().build_int_add(row_a, self.cx.i32(k as u64), "")?;
                let av = self.dist_fetch(a, &own, |e| (e / n) * kk + k, ea, mask)?;
                let eb = self.b().build_int_add(self.cx.i32((k * n) as u64), j, "")?;
                let bv = self.dist_fetch(b, &own, |e| k * n + e % n, eb, mask)?;
                let av = self.cast(av, Type::Scalar(ab), acc)?;
                let bv = self.cast(bv, Type::Scalar(ab), acc)?;
                let p = self.binop(if f { O::FMul } else { O::Mul }, av, bv)?;
                sum = self.binop(if f { O::FAdd } else { O::Add }, sum, p)?;
            }
            d = self
                .b()
                .build_insert_value(d, sum, s, "")?
                .into_array_value();
        }
        Ok(d.into())
    }
}
