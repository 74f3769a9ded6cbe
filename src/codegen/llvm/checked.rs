//! Checked mode and ub-traps for NVPTX and AMDGPU (`crate::codegen::checks`).
//!
//! The report buffer is a module global, [`REPORT_SYMBOL`] (`[8 x i32]` in the global address
//! space, zero-initialised, externally visible), which the CUDA and HIP backends find by name
//! (`cuModuleGetGlobal`, `hipModuleGetGlobal`), clear before a launch and read after it. No
//! argument is added, so helpers report as kernels do.
//!
//! A checked access tests its index against the object's length; an access out of bounds is
//! reported (a cold branch) and redirected to a scratch area of the object's address space, so
//! a store lands nowhere that matters and a load's value is replaced by 0. A buffer's length
//! is its hidden count argument, a shared or private array's its declared length; the dynamic
//! shared array's length is not known to the code, and its accesses are not checked.

use super::*;
use crate::codegen::checks::{
    align_confirmed, round_down_mask, CheckSite, KIND_MISALIGNED, KIND_OUT_OF_BOUNDS, LOSER_SLOT,
    REPORT_WORDS, WINNER_SLOT,
};
use inkwell::values::IntValue;

/// The report buffer's symbol in the device code.
pub const REPORT_SYMBOL: &str = "xpu_report";
/// Bytes of each scratch area: the widest access (16 lanes of 64 bits) twice over.
const SCRATCH_BYTES: u32 = 256;

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    /// A new check site at the current statement's line.
    fn check_site(&self, what: String) -> u32 {
        let mut sites = self.cx.sites.borrow_mut();
        sites.push(CheckSite {
            line: self.span.line,
            what,
        });
        (sites.len() - 1) as u32
    }

    /// The report global, declared on first use.
    fn report_global(&self) -> PointerValue<'ctx> {
        if let Some(g) = self.cx.module.get_global(REPORT_SYMBOL) {
            return g.as_pointer_value();
        }
        let ty = self.cx.context.i32_type().array_type(REPORT_WORDS as u32);
        let g = self
            .cx
            .module
            .add_global(ty, Some(self.t.global_space()), REPORT_SYMBOL);
        g.set_linkage(Linkage::External);
        g.set_initializer(&ty.const_zero());
        g.set_alignment(16);
        g.as_pointer_value()
    }

    /// A scratch area in `space` for redirected accesses: module globals for buffers and
    /// shared arrays, an entry-block alloca for private arrays.
    fn scratch(&self, base: Base) -> LowerResult<PointerValue<'ctx>> {
        let ty = self.cx.context.i8_type().array_type(SCRATCH_BYTES);
        let (name, space) = match base {
            Base::Param(_) => ("xpu_scratch", self.t.global_space()),
            Base::Shared(_) => ("xpu_shared_scratch", self.t.shared_space()),
            Base::Local(_) => {
                let p = self.entry_alloca(ty.into(), "xpu.scratch")?;
                // Aligned for the widest access redirected to it.
                if let Some(i) = p.as_instruction() {
                    i.set_alignment(16)
                        .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
                }
                return Ok(p);
            }
        };
        if let Some(g) = self.cx.module.get_global(name) {
            return Ok(g.as_pointer_value());
        }
        let g = self.cx.module.add_global(ty, Some(space), name);
        g.set_linkage(Linkage::Internal);
        if matches!(base, Base::Shared(_)) {
            g.set_initializer(&ty.get_undef());
        } else {
            g.set_initializer(&ty.const_zero());
        }
        g.set_alignment(16);
        Ok(g.as_pointer_value())
    }

    /// Records a failed check: word 0 from 0 to `kind` by compare-and-swap, the winner's
    /// site, index and length at [`WINNER_SLOT`], a later writer's at [`LOSER_SLOT`].
    fn emit_report(
        &self,
        kind: u32,
        site: u32,
        index: IntValue<'ctx>,
        len: IntValue<'ctx>,
    ) -> LowerResult<()> {
        let i32t = self.cx.context.i32_type();
        let report = self.report_global();
        let mono = inkwell::AtomicOrdering::Monotonic;
        let pair = self.b().build_cmpxchg(
            report,
            i32t.const_zero(),
            i32t.const_int(kind as u64, false),
            mono,
            mono,
        )?;
        let old = self.b().build_extract_value(pair, 0, "")?.into_int_value();
        let won = self
            .b()
            .build_int_compare(IntPredicate::EQ, old, i32t.const_zero(), "")?;
        let slot = self.b().build_select(
            won,
            i32t.const_int(WINNER_SLOT as u64, false),
            i32t.const_int(LOSER_SLOT as u64, false),
            "",
        )?;
        let slot = slot.into_int_value();
        for (j, v) in [i32t.const_int(site as u64, false), index, len]
            .into_iter()
            .enumerate()
        {
            let at = self
                .b()
                .build_int_add(slot, i32t.const_int(j as u64, false), "")?;
            // SAFETY: `at` is below REPORT_WORDS (slot 1 or 4, plus 0..3) in an i32 array.
            let p = unsafe { self.b().build_gep(i32t, report, &[at], "")? };
            self.b().build_store(p, v)?;
        }
        Ok(())
    }

    /// `if !ok { report }`, the report in a cold block.
    fn report_unless(
        &self,
        ok: IntValue<'ctx>,
        kind: u32,
        site: u32,
        index: IntValue<'ctx>,
        len: IntValue<'ctx>,
    ) -> LowerResult<()> {
        let ctx = self.cx.context;
        let bad = ctx.append_basic_block(self.llfn, "xpu.check.fail");
        let cont = ctx.append_basic_block(self.llfn, "xpu.check.ok");
        let br = self.b().build_conditional_branch(ok, cont, bad)?;
        // The failure is not expected: weight the branch so that it is laid out out of line.
        let md = ctx.metadata_node(&[
            ctx.metadata_string("branch_weights").into(),
            ctx.i32_type().const_int(1 << 20, false).into(),
            ctx.i32_type().const_int(1, false).into(),
        ]);
        let kind_id = ctx.get_kind_id("prof");
        br.set_metadata(md, kind_id)
            .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
        self.b().position_at_end(bad);
        self.emit_report(kind, site, index, len)?;
        self.b().build_unconditional_branch(cont)?;
        self.b().position_at_end(cont);
        Ok(())
    }

    /// The element count of `base` as an `i32` and its name in a report; `None` where the
    /// code does not know it (the dynamic shared array, a parameter of a helper).
    fn object_len(&self, base: Base) -> Option<(IntValue<'ctx>, String)> {
        let i32t = self.cx.context.i32_type();
        match base {
            Base::Param(p) => match self.params.get(p as usize) {
                Some(ParamVal::Buffer { len, .. }) => {
                    let name = self.f.params.get(p as usize)?.name.clone();
                    Some((*len, format!("buffer {name}")))
                }
                _ => None,
            },
            Base::Shared(h) => {
                let d = self.f.shared.try_get(h)?;
                let n = len_of(self.f, d.len?, self.args).ok()?;
                Some((
                    i32t.const_int(n as u64, false),
                    format!("shared {}", d.name),
                ))
            }
            Base::Local(l) => {
                let local = self.f.locals.try_get(l)?;
                match local.ty {
                    Type::Array { len, .. } => {
                        let n = len_of(self.f, len, self.args).ok()?;
                        Some((
                            i32t.const_int(n as u64, false),
                            format!("array {}", local.name),
                        ))
                    }
                    _ => None,
                }
            }
        }
    }

    /// Checked mode: `ptr` (the address of elements `index .. index + count` of `base`) where
    /// they are in bounds, the scratch area otherwise (reported), and whether they were in
    /// bounds. Without checked mode, or for an object of unknown length: `ptr` unchanged.
    pub(super) fn checked_ptr(
        &mut self,
        base: Base,
        ptr: PointerValue<'ctx>,
        index: IntValue<'ctx>,
        count: u32,
    ) -> LowerResult<(PointerValue<'ctx>, Option<IntValue<'ctx>>)> {
        if !self.cx.checks.bounds {
            return Ok((ptr, None));
        }
        let Some((len, what)) = self.object_len(base) else {
            return Ok((ptr, None));
        };
        let site = self.check_site(what);
        let i64t = self.cx.context.i64_type();
        let i32t = self.cx.context.i32_type();
        let i = self.b().build_int_z_extend(index, i64t, "")?;
        let last = self
            .b()
            .build_int_add(i, i64t.const_int(count.max(1) as u64 - 1, false), "")?;
        let n = self.b().build_int_z_extend(len, i64t, "")?;
        let ok = self.b().build_int_compare(IntPredicate::ULT, last, n, "")?;
        let last32 = self.b().build_int_truncate(last, i32t, "")?;
        self.report_unless(ok, KIND_OUT_OF_BOUNDS, site, last32, len)?;
        let mut scratch = self.scratch(base)?;
        if scratch.get_type() != ptr.get_type() {
            // A constant buffer in another address space (AMDGPU's 4) reads the scratch
            // area through that space.
            scratch = self
                .b()
                .build_address_space_cast(scratch, ptr.get_type(), "")?;
        }
        let p = self.b().build_select(ok, ptr, scratch, "")?;
        Ok((p.into_pointer_value(), Some(ok)))
    }

    /// `v` where the checked access was in bounds, 0 otherwise.
    pub(super) fn zero_unless(
        &self,
        v: BasicValueEnum<'ctx>,
        ok: Option<IntValue<'ctx>>,
    ) -> LowerResult<BasicValueEnum<'ctx>> {
        let Some(ok) = ok else { return Ok(v) };
        let z = v.get_type().const_zero();
        Ok(self.b().build_select(ok, v, z, "")?)
    }

    /// ub-traps: tests `align = stated` at scalar index `i` (the value of `index`) over
    /// `scalar`s where the proof does not confirm it, and gives the index the access
    /// proceeds at (rounded down to the statement where it was tested).
    pub(super) fn align_trap(
        &mut self,
        index: ExprId,
        i: IntValue<'ctx>,
        scalar: Scalar,
        stated: Option<u8>,
    ) -> LowerResult<IntValue<'ctx>> {
        let Some(a) = stated else { return Ok(i) };
        if !self.cx.checks.ub_traps {
            return Ok(i);
        }
        let Some(mask) = round_down_mask(scalar, a) else {
            return Ok(i);
        };
        if align_confirmed(self.f, index, self.args, scalar, a) {
            return Ok(i);
        }
        let site = self.check_site(format!("align = {a}"));
        let i32t = self.cx.context.i32_type();
        let low = self
            .b()
            .build_and(i, i32t.const_int(!mask as u64, false), "")?;
        let ok = self
            .b()
            .build_int_compare(IntPredicate::EQ, low, i32t.const_zero(), "")?;
        self.report_unless(
            ok,
            KIND_MISALIGNED,
            site,
            i,
            i32t.const_int(a as u64, false),
        )?;
        Ok(self
            .b()
            .build_and(i, i32t.const_int(mask as u64, false), "")?)
    }
}
