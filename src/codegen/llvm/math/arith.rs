//! [`Ir`]: the scalar `f64` arithmetic of `codegen::f64math` as LLVM IR appended to the
//! function being lowered (NVPTX and AMDGPU have a fused `fma`).

use super::super::{Error, FunctionContext, LowerResult};
use crate::codegen::f64math::trig::{table_entry, TABLE_LEN};
use crate::codegen::f64math::{Arith, Cmp};
use inkwell::values::{BasicValueEnum, InstructionOpcode as O};
use inkwell::FloatPredicate;

/// The name of the module's 2/π table global (one per module, made on first use).
const TABLE_NAME: &str = "xpu_two_over_pi";

/// The device side: LLVM IR appended to the function being lowered.
pub(super) struct Ir<'f, 'a, 'ctx>(pub(super) &'f FunctionContext<'a, 'ctx>);

impl<'ctx> Ir<'_, '_, 'ctx> {
    fn call(&self, name: &str, args: &[BasicValueEnum<'ctx>]) -> LowerResult<BasicValueEnum<'ctx>> {
        let t = self.0.cx.context.f64_type().into();
        self.0.cx.call_value(name, &[t], args)
    }

    /// The module's 2/π table (a constant global in the target's global space).
    fn table_global(&self) -> inkwell::values::GlobalValue<'ctx> {
        let cx = self.0.cx;
        if let Some(g) = cx.module.get_global(TABLE_NAME) {
            return g;
        }
        let f64t = cx.context.f64_type();
        let vals: Vec<_> = (0..TABLE_LEN)
            .map(|i| f64t.const_float(table_entry(i)))
            .collect();
        let ty = f64t.array_type(TABLE_LEN as u32);
        let g = cx
            .module
            .add_global(ty, Some(self.0.t.global_space()), TABLE_NAME);
        g.set_initializer(&f64t.const_array(&vals));
        g.set_constant(true);
        g.set_linkage(inkwell::module::Linkage::Internal);
        g.set_alignment(8);
        g
    }
}

impl<'ctx> Arith for Ir<'_, '_, 'ctx> {
    type V = BasicValueEnum<'ctx>;
    type B = BasicValueEnum<'ctx>;
    type E = Error;
    const FUSED: bool = true;

    fn c(&mut self, v: f64) -> Self::V {
        self.0.cx.context.f64_type().const_float(v).into()
    }
    fn add(&mut self, a: Self::V, b: Self::V) -> LowerResult<Self::V> {
        self.0.binop(O::FAdd, a, b)
    }
    fn sub(&mut self, a: Self::V, b: Self::V) -> LowerResult<Self::V> {
        self.0.binop(O::FSub, a, b)
    }
    fn mul(&mut self, a: Self::V, b: Self::V) -> LowerResult<Self::V> {
        self.0.binop(O::FMul, a, b)
    }
    fn div(&mut self, a: Self::V, b: Self::V) -> LowerResult<Self::V> {
        self.0.binop(O::FDiv, a, b)
    }
    fn mul_add(&mut self, a: Self::V, b: Self::V, c: Self::V) -> LowerResult<Self::V> {
        self.call("llvm.fma", &[a, b, c])
    }
    fn neg(&mut self, a: Self::V) -> LowerResult<Self::V> {
        Ok(self.0.b().build_float_neg(a.into_float_value(), "")?.into())
    }
    fn abs(&mut self, a: Self::V) -> LowerResult<Self::V> {
        self.call("llvm.fabs", &[a])
    }
    fn floor(&mut self, a: Self::V) -> LowerResult<Self::V> {
        self.call("llvm.floor", &[a])
    }
    fn rint(&mut self, a: Self::V) -> LowerResult<Self::V> {
        self.call("llvm.rint", &[a])
    }
    fn cmp(&mut self, p: Cmp, a: Self::V, b: Self::V) -> LowerResult<Self::B> {
        let p = match p {
            Cmp::Lt => FloatPredicate::OLT,
            Cmp::Gt => FloatPredicate::OGT,
            Cmp::Ne => FloatPredicate::UNE,
            Cmp::Ge => FloatPredicate::OGE,
            Cmp::Eq => FloatPredicate::OEQ,
        };
        self.0.fcmp(p, a, b)
    }
    fn clamp(&mut self, a: Self::V, lo: f64, hi: f64) -> LowerResult<Self::V> {
        let (lo, hi) = (self.c(lo), self.c(hi));
        let m = self.call("llvm.maxnum", &[a, lo])?;
        self.call("llvm.minnum", &[m, hi])
    }
    fn and(&mut self, a: Self::B, b: Self::B) -> LowerResult<Self::B> {
        self.0.binop(O::And, a, b)
    }
    fn or(&mut self, a: Self::B, b: Self::B) -> LowerResult<Self::B> {
        self.0.binop(O::Or, a, b)
    }
    fn sel(&mut self, c: Self::B, a: Self::V, b: Self::V) -> LowerResult<Self::V> {
        self.0.select(c, a, b)
    }
    fn frexp(&mut self, a: Self::V) -> LowerResult<(Self::V, Self::V)> {
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let bits = b.build_bit_cast(a, i64t, "")?.into_int_value();
        let eb = b.build_right_shift(bits, i64t.const_int(52, false), false, "")?;
        let eb = b.build_and(eb, i64t.const_int(0x7ff, false), "")?;
        let e = b.build_int_sub(eb, i64t.const_int(1022, false), "")?;
        let e = b.build_signed_int_to_float(e, f64t, "")?.into();
        let mb = b.build_and(bits, i64t.const_int(0x000f_ffff_ffff_ffff, false), "")?;
        let mb = b.build_or(mb, i64t.const_int(0x3fe0_0000_0000_0000, false), "")?;
        let m = b.build_bit_cast(mb, f64t, "")?;
        Ok((m, e))
    }
    fn pow2(&mut self, k: Self::V) -> LowerResult<Self::V> {
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let ki = b.build_float_to_signed_int(k.into_float_value(), i64t, "")?;
        let biased = b.build_int_add(ki, i64t.const_int(1023, false), "")?;
        let bits = b.build_left_shift(biased, i64t.const_int(52, false), "")?;
        Ok(b.build_bit_cast(bits, f64t, "")?)
    }
    fn table(&mut self, i: Self::V) -> LowerResult<Self::V> {
        let g = self.table_global();
        let ctx = self.0.cx.context;
        let (i64t, f64t) = (ctx.i64_type(), ctx.f64_type());
        let b = self.0.b();
        let idx = b.build_float_to_signed_int(i.into_float_value(), i64t, "")?;
        // SAFETY: `idx` is in [0, TABLE_LEN) (reduce_ph's window), inside the array.
        let p = unsafe {
            b.build_in_bounds_gep(
                f64t.array_type(TABLE_LEN as u32),
                g.as_pointer_value(),
                &[i64t.const_zero(), idx],
                "",
            )?
        };
        Ok(b.build_load(f64t, p, "")?)
    }
    fn guarded<const N: usize>(
        &mut self,
        cond: Self::B,
        otherwise: [Self::V; N],
        then: impl FnOnce(&mut Self) -> LowerResult<[Self::V; N]>,
    ) -> LowerResult<[Self::V; N]> {
        let ctx = self.0.cx.context;
        let b = self.0.b();
        let from = b.get_insert_block().expect("positioned");
        let body = ctx.append_basic_block(self.0.llfn, "trig.ph");
        let join = ctx.append_basic_block(self.0.llfn, "trig.join");
        // The lanes that take the branch wait for the others at `join` when the function
        // uses wave verbs, as at the end of an IR `if`.
        let sync = self.0.converge_begin()?;
        b.build_conditional_branch(cond.into_int_value(), body, join)?;
        b.position_at_end(body);
        let vals = then(self)?;
        let b = self.0.b();
        let body_end = b.get_insert_block().expect("positioned");
        b.build_unconditional_branch(join)?;
        b.position_at_end(join);
        let mut out = otherwise;
        for (o, v) in out.iter_mut().zip(vals) {
            let phi = b.build_phi(ctx.f64_type(), "")?;
            phi.add_incoming(&[(&*o, from), (&v, body_end)]);
            *o = phi.as_basic_value();
        }
        self.0.converge_end(sync, false)?;
        Ok(out)
    }
}
