//! Cooperative matrices, in software.
//!
//! Vulkan's cooperative matrices (VK_KHR_cooperative_matrix) are absent on many devices
//! (lavapipe among them), so a fragment is lowered the way the interpreter holds it: every
//! invocation of the wave keeps the whole `rows × cols` tile (a row-major array) and performs
//! each verb itself. The operands are wave-uniform by the semantics, so every lane computes
//! the same tile; `matrix_mma` accumulates in ascending `k`, rounding each product and each
//! sum in the accumulator type (`NoContraction`), exactly as the interpreter does; every lane
//! of the wave writes the same values in `matrix_store`, so each lane also reads its own
//! writes back.

use super::*;

impl Emitter<'_> {
    pub(super) fn matrix_shape(&self, e: ExprId) -> SpirvResult<(Scalar, u32, u32)> {
        match self.ty_of(e) {
            Some(Type::Matrix {
                scalar, rows, cols, ..
            }) => Ok((scalar, rows as u32, cols as u32)),
            _ => refuse("a matrix verb on a value that is not a fragment"),
        }
    }

    /// `offset + (e / cols) * stride + e % cols`: the memory index of tile element `e`.
    pub(super) fn tile_index(&mut self, e: Word, cols: u32, offset: Word, stride: Word) -> Word {
        let u = self.u32t();
        let c = self.cu32(cols);
        let i = self.opi(Op::UDiv, u, &[e, c]);
        let j = self.opi(Op::UMod, u, &[e, c]);
        let row = self.opi(Op::IMul, u, &[i, stride]);
        let at = self.opi(Op::IAdd, u, &[offset, row]);
        self.opi(Op::IAdd, u, &[at, j])
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn matrix_load(
        &mut self,
        scalar: Scalar,
        rows: u8,
        cols: u8,
        base: Base,
        offset: ExprId,
        stride: ExprId,
        ty: Option<Type>,
    ) -> SpirvResult<Word> {
        let off = self.expr_u32(offset)?;
        let st = self.expr_u32(stride)?;
        let t = self.value_ty(ty.unwrap_or(Type::U32))?;
        let et = self.scalar_ty(scalar)?;
        let var = self.fn_var(t);
        let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
        let cols = cols as u32;
        self.counted_loop(rows as u32 * cols, |em, e| {
            let at = em.tile_index(e, cols, off, st);
            // Not bounds-checked in checked mode: a checked access inside this loop hung
            // lavapipe (docs/checked-mode.md).
            let x = em.load_elem_raw(base, ElemType::scalar(scalar), at)?;
            let p = em.opi(Op::AccessChain, pt, &[var, e]);
            em.store(p, x);
            Ok(())
        })?;
        Ok(self.load(t, var))
    }

    pub(super) fn matrix_store(
        &mut self,
        value: ExprId,
        base: Base,
        offset: ExprId,
        stride: ExprId,
    ) -> SpirvResult<()> {
        let (scalar, rows, cols) = self.matrix_shape(value)?;
        let v = self.expr(value)?;
        let off = self.expr_u32(offset)?;
        let st = self.expr_u32(stride)?;
        let t = self.value_ty(self.ty_of(value).unwrap_or(Type::U32))?;
        let et = self.scalar_ty(scalar)?;
        let var = self.fn_var(t);
        self.store(var, v);
        let pt = self.tk(TyKey::Ptr(StorageClass::Function, et));
        self.counted_loop(rows * cols, |em, e| {
            let at = em.tile_index(e, cols, off, st);
            let p = em.opi(Op::AccessChain, pt, &[var, e]);
            let x = em.load(et, p);
            em.store_elem_raw(base, ElemType::scalar(scalar), at, x)
        })
    }

    /// `d[i][j] = c[i][j] + Σ_k a[i][k] * b[k][j]`, `a` and `b` converted to the accumulator's
    /// type, in ascending `k`, each product and sum rounded.
    pub(super) fn matrix_mma(&mut self, a: ExprId, b: ExprId, c: ExprId) -> SpirvResult<Word> {
        let (sa, m, kk) = self.matrix_shape(a)?;
        let (sb, _, n) = self.matrix_shape(b)?;
        let (sc, _, _) = self.matrix_shape(c)?;
        let ta = self.value_ty(self.ty_of(a).unwrap_or(Type::U32))?;
        let tb = self.value_ty(self.ty_of(b).unwrap_or(Type::U32))?;
        let tc = self.value_ty(self.ty_of(c).unwrap_or(Type::U32))?;
        let (va, vb, vc) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
        let (xa, xb, xc) = (self.fn_var(ta), self.fn_var(tb), self.fn_var(tc));
        self.store(xa, va);
        self.store(xb, vb);
        self.store(xc, vc);
        let (ea, eb, ec) = (
            self.scalar_ty(sa)?,
            self.scalar_ty(sb)?,
            self.scalar_ty(sc)?,
        );
        let (pa, pb, pc) = (
            self.tk(TyKey::Ptr(StorageClass::Function, ea)),
            self.tk(TyKey::Ptr(StorageClass::Function, eb)),
            self.tk(TyKey::Ptr(StorageClass::Function, ec)),
        );
        let u = self.u32t();
        let acc = self.fn_var(ec);
        let float = sc.is_float();
        self.counted_loop(m * n, |em, e| {
            let nn = em.cu32(n);
            let i = em.opi(Op::UDiv, u, &[e, nn]);
            let j = em.opi(Op::UMod, u, &[e, nn]);
            let p = em.opi(Op::AccessChain, pc, &[xc, e]);
            let c0 = em.load(ec, p);
            em.store(acc, c0);
            em.counted_loop(kk, |em, k| {
                let kc = em.cu32(kk);
                let ia = em.opi(Op::IMul, u, &[i, kc]);
                let ia = em.opi(Op::IAdd, u, &[ia, k]);
                let ib = em.opi(Op::IMul, u, &[k, nn]);
                let ib = em.opi(Op::IAdd, u, &[ib, j]);
                let qa = em.opi(Op::AccessChain, pa, &[xa, ia]);
                let qb = em.opi(Op::AccessChain, pb, &[xb, ib]);
                let x = em.load(ea, qa);
                let y = em.load(eb, qb);
                let x = em.cast(x, sa, sc, 1)?;
                let y = em.cast(y, sb, sc, 1)?;
                let cur = em.load(ec, acc);
                let s = if float {
                    let prod = em.fop(Op::FMul, ec, &[x, y]);
                    em.fop(Op::FAdd, ec, &[cur, prod])
                } else {
                    let prod = em.opi(Op::IMul, ec, &[x, y]);
                    em.opi(Op::IAdd, ec, &[cur, prod])
                };
                em.store(acc, s);
                Ok(())
            })?;
            let r = em.load(ec, acc);
            em.store(p, r);
            Ok(())
        })?;
        Ok(self.load(tc, xc))
    }
}
