//! `print` and `assert` on NVPTX and AMDGPU (issue 23 item 9).
//!
//! The launch's debug buffer is a module global, [`DEBUG_SYMBOL`] ([`BUFFER_WORDS`] `i32`s in
//! the global address space, zero-initialised, externally visible), which the CUDA and HIP
//! backends find by name (`cuModuleGetGlobal`, `hipModuleGetGlobal`), whose two cursor words
//! they clear before a launch, and whose claimed words they read back after it
//! ([`crate::hal::debug::read_back`]). The records are those [`crate::ir::debug`] lays out and
//! the Vulkan path writes: claimed by an atomic add on a cursor, written where they fit, put
//! in work-item order on the host. No argument is added, so helpers print as kernels do; a
//! site's index is module-wide ([`ModuleContext::debug_sites`]), like the checks' sites.

use super::*;
use crate::ir::debug::{
    DebugSite, SiteKind, ASSERT_BASE, ASSERT_REGION_WORDS, BUFFER_WORDS, HEADER_WORDS,
    PRINT_REGION_WORDS,
};
use inkwell::values::IntValue;

/// The debug buffer's symbol in the device code.
pub const DEBUG_SYMBOL: &str = "xpu_debug";

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
    /// The debug buffer global, declared on first use.
    fn debug_global(&self) -> PointerValue<'ctx> {
        if let Some(g) = self.cx.module.get_global(DEBUG_SYMBOL) {
            return g.as_pointer_value();
        }
        let ty = self.cx.context.i32_type().array_type(BUFFER_WORDS);
        let g = self
            .cx
            .module
            .add_global(ty, Some(self.t.global_space()), DEBUG_SYMBOL);
        g.set_linkage(Linkage::External);
        g.set_initializer(&ty.const_zero());
        g.set_alignment(16);
        g.as_pointer_value()
    }

    /// A new site at the current statement's line; its index is the record's site word.
    fn debug_site(&self, kind: SiteKind) -> u32 {
        let mut sites = self.cx.debug_sites.borrow_mut();
        sites.push(DebugSite {
            line: self.span.line,
            kind,
        });
        (sites.len() - 1) as u32
    }

    /// The two words (low, high) of value `v` of type `s`: integers sign- or zero-extended
    /// to 64 bits by their type, floats as their bits, `bool` as 0 or 1.
    fn debug_value_words(
        &self,
        s: Scalar,
        v: BasicValueEnum<'ctx>,
    ) -> LowerResult<[IntValue<'ctx>; 2]> {
        let c = self.cx.context;
        let (i32t, i64t) = (c.i32_type(), c.i64_type());
        let bits = match s {
            Scalar::F16 | Scalar::F32 | Scalar::F64 => {
                let it = match s {
                    Scalar::F16 => c.i16_type(),
                    Scalar::F32 => c.i32_type(),
                    _ => i64t,
                };
                let b = self
                    .b()
                    .build_bit_cast(v.into_float_value(), it, "")?
                    .into_int_value();
                self.b().build_int_z_extend_or_bit_cast(b, i64t, "")?
            }
            s if s.is_signed() => {
                self.b()
                    .build_int_s_extend_or_bit_cast(v.into_int_value(), i64t, "")?
            }
            _ => self
                .b()
                .build_int_z_extend_or_bit_cast(v.into_int_value(), i64t, "")?,
        };
        let lo = self.b().build_int_truncate(bits, i32t, "")?;
        let hi = self
            .b()
            .build_right_shift(bits, i64t.const_int(32, false), false, "")?;
        let hi = self.b().build_int_truncate(hi, i32t, "")?;
        Ok([lo, hi])
    }

    /// The workgroup's linear id and the work-item's linear local id, x fastest.
    fn debug_ids(&self) -> LowerResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let linear = |id: fn(usize) -> Coord, size: fn(usize) -> Coord| -> LowerResult<_> {
            let mut acc = self.t.coord(self.cx, id(2))?;
            for d in [1, 0] {
                let n = self.t.coord(self.cx, size(d))?;
                let m = self.b().build_int_mul(acc, n, "")?;
                let i = self.t.coord(self.cx, id(d))?;
                acc = self.b().build_int_add(m, i, "")?;
            }
            Ok(acc)
        };
        Ok((
            linear(Coord::GroupId, Coord::NumGroups)?,
            linear(Coord::LocalId, Coord::GroupSize)?,
        ))
    }

    /// Claims `words.len()` words of the region behind cursor word `cursor` (from buffer word
    /// `base`, `cap` words long) by an atomic add, and writes `words` there where they fit.
    fn debug_record(
        &self,
        cursor: u32,
        base: u32,
        cap: u32,
        words: &[IntValue<'ctx>],
    ) -> LowerResult<()> {
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        let buf = self.debug_global();
        let n = words.len() as u64;
        // SAFETY: `cursor` is word 0 or 1 of the buffer's `BUFFER_WORDS` i32s.
        let pc = unsafe {
            self.b()
                .build_gep(i32t, buf, &[i32t.const_int(cursor as u64, false)], "")?
        };
        let at = self.b().build_atomicrmw(
            inkwell::AtomicRMWBinOp::Add,
            pc,
            i32t.const_int(n, false),
            inkwell::AtomicOrdering::Monotonic,
        )?;
        // `at <= cap - n`: no overflow of `at + n`.
        let fits = self.b().build_int_compare(
            IntPredicate::ULE,
            at,
            i32t.const_int(cap as u64 - n, false),
            "",
        )?;
        let write = ctx.append_basic_block(self.llfn, "xpu.debug.write");
        let cont = ctx.append_basic_block(self.llfn, "xpu.debug.done");
        self.b().build_conditional_branch(fits, write, cont)?;
        self.b().position_at_end(write);
        let start = self
            .b()
            .build_int_add(at, i32t.const_int(base as u64, false), "")?;
        for (j, w) in words.iter().enumerate() {
            let i = self
                .b()
                .build_int_add(start, i32t.const_int(j as u64, false), "")?;
            // SAFETY: `at + n <= cap` was tested, so `base + at + j` is inside the region.
            let p = unsafe { self.b().build_gep(i32t, buf, &[i], "")? };
            self.b().build_store(p, *w)?;
        }
        self.b().build_unconditional_branch(cont)?;
        self.b().position_at_end(cont);
        Ok(())
    }

    /// Lowers a `print` or an `assert` statement.
    pub(super) fn debug_stmt(&mut self, kind: &StmtKind) -> LowerResult<()> {
        let i32t = self.cx.context.i32_type();
        match kind {
            StmtKind::Print { format, args } => {
                let mut types = Vec::with_capacity(args.len());
                let mut words = Vec::with_capacity(args.len() * 2);
                for &a in args {
                    let Type::Scalar(s) = self.ty(a)? else {
                        return self.err(codes::INPUT, "print of a value that is not a scalar");
                    };
                    let v = self.value(a)?;
                    words.extend(self.debug_value_words(s, v)?);
                    types.push(s);
                }
                let site = self.debug_site(SiteKind::Print {
                    format: format.clone(),
                    args: types,
                });
                let (group, item) = self.debug_ids()?;
                let mut rec = vec![i32t.const_int(site as u64, false), group, item];
                rec.extend(words);
                self.debug_record(0, HEADER_WORDS, PRINT_REGION_WORDS, &rec)
            }
            StmtKind::Assert { cond, message } => {
                let c = self.value(*cond)?.into_int_value();
                let site = self.debug_site(SiteKind::Assert {
                    message: message.clone(),
                });
                let ctx = self.cx.context;
                let bad = ctx.append_basic_block(self.llfn, "xpu.assert.fail");
                let cont = ctx.append_basic_block(self.llfn, "xpu.assert.ok");
                let br = self.b().build_conditional_branch(c, cont, bad)?;
                // A failure is not expected: weighted so that it is laid out out of line.
                let md = ctx.metadata_node(&[
                    ctx.metadata_string("branch_weights").into(),
                    i32t.const_int(1 << 20, false).into(),
                    i32t.const_int(1, false).into(),
                ]);
                br.set_metadata(md, ctx.get_kind_id("prof"))
                    .map_err(|e| Error::new(codes::INTERNAL, e.to_string()))?;
                self.b().position_at_end(bad);
                let (group, item) = self.debug_ids()?;
                let rec = [i32t.const_int(site as u64, false), group, item];
                self.debug_record(1, ASSERT_BASE, ASSERT_REGION_WORDS, &rec)?;
                self.b().build_unconditional_branch(cont)?;
                self.b().position_at_end(cont);
                Ok(())
            }
            _ => self.err(codes::INPUT, "debug_stmt on another statement"),
        }
    }
}
