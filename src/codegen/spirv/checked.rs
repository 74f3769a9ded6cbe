//! Checked mode and ub-traps in SPIR-V (`crate::codegen::checks`): the report buffer, the
//! bounds test around each buffer, shared and private access, and the `align` trap.
//!
//! A checked access is one selection construct: the access in the branch where the index is
//! below the object's length (a load's value reaches the merge through an `OpPhi`, 0 from the
//! other branch), the report in the other. Code built without checks is unchanged.

use super::*;
use crate::codegen::checks::{
    align_confirmed, round_down_mask, KIND_MISALIGNED, KIND_OUT_OF_BOUNDS, LOSER_SLOT, WINNER_SLOT,
};

impl Emitter<'_> {
    /// The report buffer's variable (a storage buffer of `u32`s in set 0), declared on first
    /// use; its binding is decorated when the entry point is finished (`emit_entry`).
    fn report_var(&mut self) -> Word {
        if let Some(v) = self.report_var {
            return v;
        }
        let var = self.u32_storage_var();
        self.report_var = Some(var);
        var
    }

    /// A new check site at the current statement's line.
    fn check_site(&mut self, what: String) -> u32 {
        self.sites.push(CheckSite {
            line: self.cur_line,
            what,
        });
        (self.sites.len() - 1) as u32
    }

    /// A pointer to word `at` (a `u32` id) of the report buffer.
    fn report_word(&mut self, at: Word) -> Word {
        let var = self.report_var();
        let u = self.u32t();
        let pt = self.tk(TyKey::Ptr(StorageClass::StorageBuffer, u));
        let z = self.cu32(0);
        self.opi(Op::AccessChain, pt, &[var, z, at])
    }

    /// Records a failed check in the current block: word 0 from 0 to `kind` by
    /// compare-and-swap; the winner writes site, index and length at [`WINNER_SLOT`], a later
    /// writer at [`LOSER_SLOT`] (scratch), so the first failure of the launch is kept.
    fn emit_report(&mut self, kind: u32, site: u32, index: Word, len: Word) {
        let u = self.u32t();
        let bt = self.boolt();
        let z = self.cu32(0);
        let p0 = self.report_word(z);
        let scope = self.cu32(SCOPE_DEVICE);
        let relaxed = self.cu32(0);
        let k = self.cu32(kind);
        let old = self.op(
            Op::AtomicCompareExchange,
            u,
            vec![
                Operand::IdRef(p0),
                Operand::IdScope(scope),
                Operand::IdMemorySemantics(relaxed),
                Operand::IdMemorySemantics(relaxed),
                Operand::IdRef(k),
                Operand::IdRef(z),
            ],
        );
        let won = self.opi(Op::IEqual, bt, &[old, z]);
        let (w, l) = (self.cu32(WINNER_SLOT), self.cu32(LOSER_SLOT));
        let slot = self.opi(Op::Select, u, &[won, w, l]);
        let site = self.cu32(site);
        for (j, v) in [site, index, len].into_iter().enumerate() {
            let jj = self.cu32(j as u32);
            let at = self.opi(Op::IAdd, u, &[slot, jj]);
            let p = self.report_word(at);
            self.store(p, v);
        }
    }

    /// `if !ok { report }`.
    fn report_unless(&mut self, ok: Word, kind: u32, site: u32, index: Word, len: Word) {
        let (bad, m) = (self.b.id(), self.b.id());
        self.sel_merge(m);
        self.branch_cond(ok, m, bad);
        self.block(bad);
        self.emit_report(kind, site, index, len);
        self.branch(m);
        self.block(m);
    }

    /// The element count of `base` (a `u32` id) and its name in a report.
    fn object_len(&mut self, base: Base) -> SpirvResult<(Word, String)> {
        let kernel = self.m.function(self.frames[0].func);
        match base {
            Base::Param(p) => {
                let name = kernel
                    .params
                    .get(p as usize)
                    .map(|x| x.name.clone())
                    .unwrap_or_default();
                match self.len_member.get(p as usize).copied().flatten() {
                    Some(m) => Ok((self.push_load(m), format!("buffer {name}"))),
                    None => refuse("an index into a parameter that is not a buffer"),
                }
            }
            Base::Shared(h) => {
                let name = kernel
                    .shared
                    .try_get(h)
                    .map(|d| d.name.clone())
                    .unwrap_or_default();
                Ok((self.shared_len[h.index()], format!("shared {name}")))
            }
            Base::Local(h) => {
                let name = self.func().locals[h].name.clone();
                match self.local_ty(h) {
                    Type::Array {
                        len: Len::Fixed(n), ..
                    } => Ok((self.cu32(n), format!("array {name}"))),
                    _ => refuse("an index into a local that is not an array"),
                }
            }
        }
    }

    /// Opens the bounds test of an access to element `index` of `base`: the branch that
    /// accesses is current on return. `None` without checked mode (nothing emitted).
    fn bounds_open(&mut self, base: Base, index: Word) -> SpirvResult<Option<BoundsTest>> {
        if !self.checks.bounds {
            return Ok(None);
        }
        let (len, what) = self.object_len(base)?;
        let site = self.check_site(what);
        let bt = self.boolt();
        let ok = self.opi(Op::ULessThan, bt, &[index, len]);
        let (good, bad, merge) = (self.b.id(), self.b.id(), self.b.id());
        self.sel_merge(merge);
        self.branch_cond(ok, good, bad);
        self.block(good);
        Ok(Some(BoundsTest {
            bad,
            merge,
            site,
            index,
            len,
        }))
    }

    /// Closes a bounds test after the access: the report branch, then the merge. Returns the
    /// block the access ended in.
    fn bounds_close(&mut self, t: &BoundsTest) -> Word {
        let good_end = self.cur_label;
        self.branch(t.merge);
        self.block(t.bad);
        self.emit_report(KIND_OUT_OF_BOUNDS, t.site, t.index, t.len);
        self.branch(t.merge);
        self.block(t.merge);
        good_end
    }

    /// A checked access yielding a value of type `ty`: `access` where the index is in
    /// bounds, 0 elsewhere.
    pub(super) fn checked_value(
        &mut self,
        base: Base,
        index: Word,
        ty: Word,
        access: impl FnOnce(&mut Self) -> SpirvResult<Word>,
    ) -> SpirvResult<Word> {
        let Some(t) = self.bounds_open(base, index)? else {
            return access(self);
        };
        let v = access(self)?;
        let good_end = self.bounds_close(&t);
        let z = self.b.constant_null(ty);
        Ok(self.op(Op::Phi, ty, ids(&[v, good_end, z, t.bad])))
    }

    /// A checked access yielding nothing (a store): skipped where the index is out of bounds.
    pub(super) fn checked_effect(
        &mut self,
        base: Base,
        index: Word,
        access: impl FnOnce(&mut Self) -> SpirvResult<()>,
    ) -> SpirvResult<()> {
        let Some(t) = self.bounds_open(base, index)? else {
            return access(self);
        };
        access(self)?;
        self.bounds_close(&t);
        Ok(())
    }

    /// ub-traps: tests `align = stated` at scalar index `i` (the value of `index`) over
    /// `scalar`s where the proof does not confirm it, reporting a broken statement, and gives
    /// the index the access proceeds at (rounded down to the statement where it was tested).
    pub(super) fn align_trap(
        &mut self,
        index: ExprId,
        i: Word,
        scalar: Scalar,
        stated: Option<u8>,
    ) -> Word {
        let Some(a) = stated else { return i };
        if !self.checks.ub_traps {
            return i;
        }
        let Some(mask) = round_down_mask(scalar, a) else {
            return i;
        };
        if align_confirmed(self.func(), index, &[], scalar, a) {
            return i;
        }
        let site = self.check_site(format!("align = {a}"));
        let u = self.u32t();
        let bt = self.boolt();
        let low = self.cu32(!mask);
        let r = self.opi(Op::BitwiseAnd, u, &[i, low]);
        let z = self.cu32(0);
        let ok = self.opi(Op::IEqual, bt, &[r, z]);
        let av = self.cu32(a as u32);
        self.report_unless(ok, KIND_MISALIGNED, site, i, av);
        let keep = self.cu32(mask);
        self.opi(Op::BitwiseAnd, u, &[i, keep])
    }
}

/// An open bounds test ([`Emitter::bounds_open`]).
pub(super) struct BoundsTest {
    bad: Word,
    merge: Word,
    site: u32,
    index: Word,
    len: Word,
}
