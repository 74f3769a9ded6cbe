//! The one walk of the kernel IR into LLVM IR (contract §3.1), shared by every LLVM GPU
//! target. The body, control flow, operators, casts, buffer addressing, wave algorithms
//! (shuffle trees, scans, lane loops) and the semantics rules of `docs/semantics.md` live
//! here; what differs between GPUs goes through [`target::LoweringTarget`]:
//! [`nvptx::Nvptx`] for NVIDIA, and AMDGPU as the second implementation.
//!
//! # The kernel ABI
//!
//! Every IR parameter becomes kernel parameters, in order:
//! - a buffer `buf<E>` → a pointer to global memory and an `i32` element count (`len(b)`);
//! - `bool` → `i8` (0 or 1);
//! - other scalars, vectors and tags (`i32`) → their LLVM type.
//!
//! [`KernelAbi::params`] records each slot's size and alignment so that a runtime can pack
//! them. Element `i` of a buffer, shared array or private array of element type `E` lives at
//! byte `i * size_of(E)`, with vectors packed (a `vec3<f32>` is 12 bytes), `bool` one byte.
//!
//! # Semantics owned here (`docs/semantics.md`)
//!
//! Integer arithmetic wraps; a shift amount is taken modulo the width; integer division and
//! remainder by zero (UB, reported by the interpreter) and `MIN / -1` never trap (the divisor
//! is replaced before the instruction, see `FnCx::int_div`); float → int casts saturate (`llvm.fpto[su]i.sat`,
//! NaN → 0); float `min`/`max` return the other operand when one is NaN (`llvm.minnum`).
//! Transcendental functions are built from arithmetic in `f64` (`math.rs`), within the
//! accuracy `docs/semantics.md` requires of native backends.

pub mod amdgpu;
#[cfg(feature = "hip")]
pub mod codeobj;
mod math;
mod matrix;
pub mod nvptx;
pub mod ptxas;
pub mod target;

use crate::ir::{
    self, AtomicOp, Base, BinaryOp, Builtin, ConstBinOp, ConstExpr, ConstUnOp, ElemType, Expr,
    ExprId, FenceScope, Function, Handle, Len, Literal, LoopKind, MathFn, MemoryOrder, Place,
    ReduceOp, Scalar, Span, Stmt, StmtKind, Type, UnaryOp, WaveOp,
};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::llvm_sys;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetTriple};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, IntValue,
    PointerValue,
};
use inkwell::{IntPredicate, OptimizationLevel};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use target::{Coord, Exchange, KernelBounds, LoweringTarget};

/// Diagnostic codes of the LLVM lowering.
pub mod codes {
    /// A construct this target does not lower (refused by name, never miscompiled).
    pub const UNSUPPORTED: &str = "XPU-L01";
    /// LLVM rejected the module or failed to emit code (a bug in the lowering).
    pub const LLVM: &str = "XPU-L02";
    /// `@wave(N)` with a width this target cannot build.
    pub const WAVE: &str = "XPU-L03";
    /// Input the lowering cannot use: an unverified module, a missing kernel, a template
    /// without arguments.
    pub const INPUT: &str = "XPU-L04";
}

/// Why a kernel did not lower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerError {
    pub code: &'static str,
    /// The kernel being lowered (or the helper it called).
    pub function: String,
    pub span: Span,
    pub message: String,
}

impl LowerError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        LowerError {
            code,
            function: String::new(),
            span: Span::UNKNOWN,
            message: message.into(),
        }
    }

    /// The error as a diagnostic (`line:col: error[CODE]: in `k`: message`).
    pub fn to_diagnostic(&self) -> ir::Diagnostic {
        ir::Diagnostic::new(
            self.code,
            self.span,
            format!("in `{}`: {}", self.function, self.message),
        )
    }
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_diagnostic())
    }
}

impl std::error::Error for LowerError {}

impl From<BuilderError> for LowerError {
    fn from(e: BuilderError) -> Self {
        LowerError::new(codes::LLVM, format!("LLVM builder: {e}"))
    }
}

pub type LResult<T> = Result<T, LowerError>;

fn unsupported<T>(message: impl Into<String>) -> LResult<T> {
    Err(LowerError::new(codes::UNSUPPORTED, message))
}

fn internal<T>(message: impl Into<String>) -> LResult<T> {
    Err(LowerError::new(codes::LLVM, message))
}

/// The emission context a target's hooks write into.
pub struct Cx<'ctx> {
    pub context: &'ctx Context,
    pub module: Module<'ctx>,
    pub builder: Builder<'ctx>,
    /// Every cooperative-matrix fragment takes the portable software tier (`matrix.rs`),
    /// because some fragment type of the module has no native lowering on this target.
    pub software_matrices: std::cell::Cell<bool>,
}

impl<'ctx> Cx<'ctx> {
    /// The declaration of LLVM intrinsic `name`, overloaded on `types` (empty when not).
    pub fn intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
    ) -> LResult<FunctionValue<'ctx>> {
        let Some(i) = Intrinsic::find(name) else {
            return internal(format!("LLVM has no intrinsic `{name}`"));
        };
        match i.get_declaration(&self.module, types) {
            Some(f) => Ok(f),
            None => internal(format!("cannot declare `{name}` for {types:?}")),
        }
    }

    /// Calls intrinsic `name` (overloaded on `types`) and returns its value, if any.
    pub fn call_intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<Option<BasicValueEnum<'ctx>>> {
        let f = self.intrinsic(name, types)?;
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = self.builder.build_call(f, &args, "")?;
        Ok(call.try_as_basic_value().basic())
    }

    /// Calls an intrinsic that returns a value.
    pub fn call_value(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        match self.call_intrinsic(name, types, args)? {
            Some(v) => Ok(v),
            None => internal(format!("`{name}` returned nothing")),
        }
    }

    pub fn i32(&self, v: u64) -> IntValue<'ctx> {
        self.context.i32_type().const_int(v, false)
    }

    pub fn i64(&self, v: u64) -> IntValue<'ctx> {
        self.context.i64_type().const_int(v, false)
    }
}

/// How a runtime passes one kernel parameter slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamAbi {
    /// A buffer: a device pointer then an `i32` element count. `base_align` is the widest
    /// access the kernel makes through it, which the base address must honour.
    Buffer {
        elem: ElemType,
        writable: bool,
        base_align: u32,
    },
    /// A value of `size` bytes (`bool` as one byte), aligned to `align`.
    Value { ty: Type, size: u32, align: u32 },
}

/// What a runtime needs to launch one lowered kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAbi {
    /// The IR name (`saxpy`, `QkTile<64,64,32,32,128>`).
    pub name: String,
    /// The entry symbol in the device code.
    pub symbol: String,
    /// One entry per IR parameter.
    pub params: Vec<ParamAbi>,
    /// Bytes of statically sized shared arrays, as declared (the assembler's figure is the
    /// manifest's).
    pub static_shared_bytes: u64,
    /// The element size of the dynamically sized shared array, if the kernel has one.
    pub dynamic_shared_elem: Option<u32>,
    /// The wave width the kernel was built at.
    pub wave_width: u32,
    pub bounds: KernelBounds,
    /// The `@wave(N)` declaration, if any.
    pub declared_wave: Option<u32>,
}

/// A kernel to lower: an IR kernel, or a template with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRef {
    pub function: Handle<Function>,
    /// The template's arguments (empty for a plain kernel).
    pub args: Vec<u32>,
}

impl KernelRef {
    pub fn plain(function: Handle<Function>) -> Self {
        KernelRef {
            function,
            args: Vec::new(),
        }
    }

    /// The registered name: `k`, or `K<a,b,...>` for a template instance.
    pub fn name(&self, module: &ir::Module) -> String {
        let base = &module.functions[self.function].name;
        if module.functions[self.function].template.is_some() {
            let args: Vec<String> = self.args.iter().map(|a| a.to_string()).collect();
            format!("{base}<{}>", args.join(","))
        } else {
            base.clone()
        }
    }
}

/// Every kernel of `module`: plain kernels, and each `instantiate` entry of each template.
pub fn kernel_refs(module: &ir::Module) -> Vec<KernelRef> {
    let mut out = Vec::new();
    for (h, f) in module.kernels() {
        match &f.template {
            None => out.push(KernelRef::plain(h)),
            Some(t) => {
                for (args, _) in &t.instantiate {
                    out.push(KernelRef {
                        function: h,
                        args: args.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Lowering options.
#[derive(Clone, Debug)]
pub struct Options {
    /// LLVM's optimisation level, 0 to 3.
    pub opt_level: u8,
    /// Keep the optimised LLVM IR text in [`Lowered::llvm_ir`].
    pub keep_llvm_ir: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            opt_level: 3,
            keep_llvm_ir: false,
        }
    }
}

/// The device code of a set of kernels.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// Assembly text (PTX) or an object, as the target emits.
    pub code: Vec<u8>,
    pub kernels: Vec<KernelAbi>,
    /// The processor the code was built for.
    pub cpu: String,
    pub llvm_ir: Option<String>,
}

impl Lowered {
    /// The code as text (PTX is ASCII).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.code).into_owned()
    }
}

/// A stable version of this lowering; part of every code-cache key, so that a change to the
/// walk or a target invalidates cached device code. Bump it with any change to emitted code.
pub const LOWERING_VERSION: u32 = 1;

/// The entry symbol for a kernel name: identifier characters kept, others `_`.
pub fn symbol_for(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) || s.is_empty() {
        s.insert(0, '_');
    }
    s
}

fn init_targets() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cfg = InitializationConfig::default();
        Target::initialize_nvptx(&cfg);
        Target::initialize_amd_gpu(&cfg);
    });
}

/// Lowers `kernels` of `module` (which must have passed the verifier) for `target` into one
/// piece of device code.
pub fn lower(
    module: &ir::Module,
    kernels: &[KernelRef],
    target: &dyn LoweringTarget,
    opts: &Options,
) -> LResult<Lowered> {
    init_targets();
    let context = Context::create();
    let cx = Cx {
        context: &context,
        module: context.create_module("xpu"),
        builder: context.create_builder(),
        software_matrices: std::cell::Cell::new(false),
    };
    let triple = TargetTriple::create(target.triple());
    cx.module.set_triple(&triple);
    let tm = Target::from_triple(&triple)
        .map_err(|e| {
            LowerError::new(
                codes::LLVM,
                format!("no LLVM target {}: {e}", target.triple()),
            )
        })?
        .create_target_machine(
            &triple,
            &target.cpu(),
            &target.features(),
            match opts.opt_level {
                0 => OptimizationLevel::None,
                1 => OptimizationLevel::Less,
                2 => OptimizationLevel::Default,
                _ => OptimizationLevel::Aggressive,
            },
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| LowerError::new(codes::LLVM, "cannot create the target machine"))?;
    cx.module
        .set_data_layout(&tm.get_target_data().get_data_layout());

    // Helpers reachable from the kernels, declared before any body so calls resolve.
    let mut reach = BTreeSet::new();
    for k in kernels {
        let Some(f) = module.functions.try_get(k.function) else {
            return Err(LowerError::new(codes::INPUT, "no such kernel"));
        };
        if !f.is_kernel() {
            return Err(LowerError::new(
                codes::INPUT,
                format!("`{}` is not a kernel", f.name),
            ));
        }
        collect_callees(module, f, &mut reach);
    }
    let functions = kernels
        .iter()
        .map(|k| &module.functions[k.function])
        .chain(reach.iter().map(|&h| &module.functions[h]));
    cx.software_matrices
        .set(matrix::needs_software(&cx, target, functions));
    let mut helpers = HashMap::new();
    for &h in &reach {
        let f = &module.functions[h];
        let fn_ty = helper_fn_type(&cx, target, module, f).map_err(|e| named(e, &f.name))?;
        let llfn = cx.module.add_function(
            &format!("xpu.helper.{}", symbol_for(&f.name)),
            fn_ty,
            Some(Linkage::Internal),
        );
        // A helper may contain a barrier or a wave verb: calls to it must not be moved into
        // or out of control flow, which LLVM only respects for `convergent` functions.
        let kind = inkwell::attributes::Attribute::get_named_enum_kind_id("convergent");
        llfn.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            context.create_enum_attribute(kind, 0),
        );
        helpers.insert(h, llfn);
    }
    for &h in &reach {
        let f = &module.functions[h];
        lower_function(&cx, target, module, f, &[], helpers[&h], &helpers, None)
            .map_err(|e| named(e, &f.name))?;
    }

    let mut abis = Vec::new();
    let mut symbols = BTreeSet::new();
    for k in kernels {
        let f = &module.functions[k.function];
        let name = k.name(module);
        let args: &[u32] = &k.args;
        let expected = f.template.as_ref().map_or(0, |t| t.params.len());
        if args.len() != expected {
            return Err(named(
                LowerError::new(
                    codes::INPUT,
                    format!("takes {expected} template arguments, {} given", args.len()),
                ),
                &name,
            ));
        }
        let mut symbol = symbol_for(&name);
        while !symbols.insert(symbol.clone()) {
            symbol.push('_');
        }
        let abi = lower_kernel(&cx, target, module, f, args, &name, &symbol, &helpers)
            .map_err(|e| named(e, &name))?;
        abis.push(abi);
    }

    if let Err(e) = cx.module.verify() {
        return internal(format!("LLVM rejected the module: {}", e.to_string()));
    }
    if opts.opt_level > 0 {
        let passes = format!("default<O{}>", opts.opt_level.min(3));
        cx.module
            .run_passes(&passes, &tm, PassBuilderOptions::create())
            .map_err(|e| LowerError::new(codes::LLVM, format!("LLVM passes: {}", e.to_string())))?;
    }
    let llvm_ir = opts
        .keep_llvm_ir
        .then(|| cx.module.print_to_string().to_string());
    let buf = tm
        .write_to_memory_buffer(&cx.module, target.file_type())
        .map_err(|e| {
            LowerError::new(
                codes::LLVM,
                format!("LLVM code generation: {}", e.to_string()),
            )
        })?;
    Ok(Lowered {
        code: buf.as_slice().to_vec(),
        kernels: abis,
        cpu: target.cpu(),
        llvm_ir,
    })
}

fn named(mut e: LowerError, function: &str) -> LowerError {
    if e.function.is_empty() {
        e.function = function.to_string();
    }
    e
}

/// Device helpers reachable from `f` through calls and tag dispatches.
fn collect_callees(module: &ir::Module, f: &Function, out: &mut BTreeSet<Handle<Function>>) {
    for (_, e) in f.exprs.iter() {
        let mut add = |h: Handle<Function>| {
            if module.functions.contains(h) && out.insert(h) {
                collect_callees(module, &module.functions[h], out);
            }
        };
        match e {
            Expr::Call { function, .. } => add(*function),
            Expr::Tag { set, .. } => {
                if let Some(ts) = module.tag_sets.try_get(*set) {
                    ts.members.clone().into_iter().for_each(add);
                }
            }
            _ => {}
        }
    }
    // A dispatch's callees come from its tag's set: every tag-typed value has a set.
    for (_, l) in f.locals.iter() {
        if let Type::Tag(set) = l.ty {
            if let Some(ts) = module.tag_sets.try_get(set) {
                for &m in &ts.members {
                    if module.functions.contains(m) && out.insert(m) {
                        collect_callees(module, &module.functions[m], out);
                    }
                }
            }
        }
    }
    for p in &f.params {
        if let Type::Tag(set) = p.ty {
            if let Some(ts) = module.tag_sets.try_get(set) {
                for &m in &ts.members {
                    if module.functions.contains(m) && out.insert(m) {
                        collect_callees(module, &module.functions[m], out);
                    }
                }
            }
        }
    }
}

/// The LLVM type of a scalar value (`bool` is `i1`).
fn scalar_type<'ctx>(cx: &Cx<'ctx>, s: Scalar) -> BasicTypeEnum<'ctx> {
    let c = cx.context;
    match s {
        Scalar::Bool => c.bool_type().into(),
        Scalar::I8 | Scalar::U8 => c.i8_type().into(),
        Scalar::I16 | Scalar::U16 => c.i16_type().into(),
        Scalar::I32 | Scalar::U32 => c.i32_type().into(),
        Scalar::I64 | Scalar::U64 => c.i64_type().into(),
        Scalar::F16 => c.f16_type().into(),
        Scalar::F32 => c.f32_type().into(),
        Scalar::F64 => c.f64_type().into(),
    }
}

/// The LLVM type of a scalar in memory (`bool` is `i8`).
fn mem_scalar_type<'ctx>(cx: &Cx<'ctx>, s: Scalar) -> BasicTypeEnum<'ctx> {
    if s == Scalar::Bool {
        cx.context.i8_type().into()
    } else {
        scalar_type(cx, s)
    }
}

fn vector_of<'ctx>(t: BasicTypeEnum<'ctx>, n: u32) -> BasicTypeEnum<'ctx> {
    match t {
        BasicTypeEnum::IntType(i) => i.vec_type(n).into(),
        BasicTypeEnum::FloatType(f) => f.vec_type(n).into(),
        other => other,
    }
}

/// The LLVM type of a value of IR type `ty`.
fn value_type<'ctx>(
    cx: &Cx<'ctx>,
    target: &dyn LoweringTarget,
    ty: Type,
) -> LResult<BasicTypeEnum<'ctx>> {
    Ok(match ty {
        Type::Scalar(s) => scalar_type(cx, s),
        Type::Vector(s, n) => vector_of(scalar_type(cx, s), n as u32),
        Type::Tag(_) => cx.context.i32_type().into(),
        Type::Matrix {
            role,
            scalar,
            rows,
            cols,
        } => {
            let t = if cx.software_matrices.get() {
                matrix::software_type(cx, scalar, rows, cols)
            } else {
                target.matrix_type(cx, role, scalar, rows, cols)
            };
            match t {
                Ok(t) => t,
                Err(m) => return unsupported(m),
            }
        }
        Type::Buffer { .. } | Type::Array { .. } => {
            return internal("a buffer or array is not a value")
        }
    })
}

fn helper_fn_type<'ctx>(
    cx: &Cx<'ctx>,
    target: &dyn LoweringTarget,
    _module: &ir::Module,
    f: &Function,
) -> LResult<inkwell::types::FunctionType<'ctx>> {
    let mut params: Vec<BasicMetadataTypeEnum> = Vec::new();
    for p in &f.params {
        params.push(value_type(cx, target, p.ty)?.into());
    }
    Ok(match f.ret {
        Some(t) => value_type(cx, target, t)?.fn_type(&params, false),
        None => cx.context.void_type().fn_type(&params, false),
    })
}

/// Evaluates a constant expression over template arguments.
pub fn const_eval(f: &Function, h: Handle<ConstExpr>, args: &[u32]) -> Option<u64> {
    let e = f.consts.try_get(h)?;
    Some(match e {
        ConstExpr::Lit(v) => *v,
        ConstExpr::Param(i) => *args.get(*i as usize)? as u64,
        ConstExpr::Unary(op, a) => {
            let a = const_eval(f, *a, args)?;
            match op {
                ConstUnOp::Not => (a == 0) as u64,
                ConstUnOp::Neg => (a as u32).wrapping_neg() as u64,
            }
        }
        ConstExpr::Binary(op, a, b) => {
            let a = const_eval(f, *a, args)?;
            let b = const_eval(f, *b, args)?;
            match op {
                ConstBinOp::Add => a.checked_add(b)?,
                ConstBinOp::Sub => a.checked_sub(b)?,
                ConstBinOp::Mul => a.checked_mul(b)?,
                ConstBinOp::Div => a.checked_div(b)?,
                ConstBinOp::Rem => a.checked_rem(b)?,
                ConstBinOp::Eq => (a == b) as u64,
                ConstBinOp::Ne => (a != b) as u64,
                ConstBinOp::Lt => (a < b) as u64,
                ConstBinOp::Le => (a <= b) as u64,
                ConstBinOp::Gt => (a > b) as u64,
                ConstBinOp::Ge => (a >= b) as u64,
                ConstBinOp::And => (a != 0 && b != 0) as u64,
                ConstBinOp::Or => (a != 0 || b != 0) as u64,
            }
        }
    })
}

fn len_of(f: &Function, len: Len, args: &[u32]) -> LResult<u32> {
    match len {
        Len::Fixed(n) => Ok(n),
        Len::Const(h) => match const_eval(f, h, args).and_then(|v| u32::try_from(v).ok()) {
            Some(n) => Ok(n),
            None => Err(LowerError::new(
                codes::INPUT,
                "an array length does not evaluate",
            )),
        },
    }
}

/// The ABI slot of a value parameter.
fn value_abi(ty: Type) -> ParamAbi {
    let (size, align) = match ty {
        Type::Scalar(s) => (s.size(), s.size()),
        Type::Vector(s, n) => {
            // LLVM rounds a vector's allocation to a power of two lanes.
            let lanes = (n as u32).next_power_of_two();
            let size = s.size() * lanes;
            (size, size.min(16))
        }
        Type::Tag(_) => (4, 4),
        _ => (8, 8),
    };
    ParamAbi::Value { ty, size, align }
}

#[allow(clippy::too_many_arguments)]
fn lower_kernel<'ctx>(
    cx: &Cx<'ctx>,
    target: &dyn LoweringTarget,
    module: &ir::Module,
    f: &Function,
    args: &[u32],
    name: &str,
    symbol: &str,
    helpers: &HashMap<Handle<Function>, FunctionValue<'ctx>>,
) -> LResult<KernelAbi> {
    let declared_wave = f.attrs.wave.map(|(w, _)| w);
    if let Some((w, span)) = f.attrs.wave {
        if !target.supports_wave(w) {
            let mut e = LowerError::new(
                codes::WAVE,
                format!(
                    "declares @wave({w}) but {} builds kernels at wave {} only",
                    target.name(),
                    target.wave_width()
                ),
            );
            e.span = span;
            return Err(e);
        }
    }
    let mut params: Vec<BasicMetadataTypeEnum> = Vec::new();
    let mut abi = Vec::new();
    for p in &f.params {
        match p.ty {
            Type::Buffer { elem, access } => {
                params.push(cx.context.ptr_type(target.global_space()).into());
                params.push(cx.context.i32_type().into());
                abi.push(ParamAbi::Buffer {
                    elem,
                    writable: access == ir::Access::ReadWrite,
                    base_align: 1,
                });
            }
            Type::Scalar(Scalar::Bool) => {
                params.push(cx.context.i8_type().into());
                abi.push(value_abi(p.ty));
            }
            Type::Scalar(_) | Type::Vector(..) | Type::Tag(_) => {
                params.push(value_type(cx, target, p.ty)?.into());
                abi.push(value_abi(p.ty));
            }
            _ => {
                return unsupported(format!(
                    "parameter `{}` of this type cannot be a kernel parameter",
                    p.name
                ))
            }
        }
    }
    let fn_ty = cx.context.void_type().fn_type(&params, false);
    let llfn = cx
        .module
        .add_function(symbol, fn_ty, Some(Linkage::External));

    let eval = |h: Option<Handle<ConstExpr>>| -> LResult<Option<u32>> {
        match h {
            None => Ok(None),
            Some(h) => match const_eval(f, h, args).and_then(|v| u32::try_from(v).ok()) {
                Some(v) => Ok(Some(v)),
                None => Err(LowerError::new(
                    codes::INPUT,
                    "an @occupancy argument does not evaluate",
                )),
            },
        }
    };
    let mut bounds = KernelBounds::default();
    if let Some(o) = &f.attrs.occupancy {
        bounds.max_threads = match (eval(o.max_threads)?, eval(o.max_waves)?) {
            (Some(t), _) => Some(t),
            (None, Some(w)) => Some(w.saturating_mul(target.wave_width())),
            (None, None) => None,
        };
        bounds.min_resident = eval(o.min_resident)?;
        bounds.max_registers = eval(o.max_registers)?;
    }

    let info = lower_function(cx, target, module, f, args, llfn, helpers, Some(symbol))?;
    target.finish_kernel(cx, llfn, &bounds)?;
    for (slot, align) in abi.iter_mut().zip(info.base_align) {
        if let ParamAbi::Buffer {
            base_align, elem, ..
        } = slot
        {
            *base_align = align.max(natural_align(elem.scalar.size()));
        }
    }
    Ok(KernelAbi {
        name: name.to_string(),
        symbol: symbol.to_string(),
        params: abi,
        static_shared_bytes: info.static_shared,
        dynamic_shared_elem: info.dynamic_elem,
        wave_width: target.wave_width(),
        bounds,
        declared_wave,
    })
}

fn natural_align(bytes: u32) -> u32 {
    if bytes == 0 {
        1
    } else {
        (1u32 << bytes.trailing_zeros()).min(16)
    }
}

struct FnInfo {
    base_align: Vec<u32>,
    static_shared: u64,
    dynamic_elem: Option<u32>,
}

/// A lowered parameter.
#[derive(Clone, Copy)]
enum ParamVal<'ctx> {
    Buffer {
        ptr: PointerValue<'ctx>,
        len: IntValue<'ctx>,
    },
    Value(BasicValueEnum<'ctx>),
}

struct LoopFrame<'ctx> {
    label: Option<String>,
    brk: BasicBlock<'ctx>,
    cont: BasicBlock<'ctx>,
}

/// An if or loop whose lanes the target makes reconverge at its merge (`converge_begin`).
/// A lane that leaves it early (`break`/`continue` to an outer loop, a helper's `return`)
/// does not jump past the merge: it records where it is going in the escape slot and goes to
/// the merge, so every lane that entered arrives there and the wait is for exactly them;
/// after the merge it goes on (`dispatch_escape`).
struct SyncFrame<'ctx> {
    merge: BasicBlock<'ctx>,
    /// The loops open around the construct (`FnCx::loops.len()` on entry).
    loops: usize,
}

/// The escape slot's code of a helper's `return` routed through merges (a `break` to loop
/// `k` is `1 + 2k`, a `continue` `2 + 2k`; 0 is no escape).
const ESCAPE_RETURN: u64 = u32::MAX as u64;

/// The state of lowering one function.
struct FnCx<'a, 'ctx> {
    cx: &'a Cx<'ctx>,
    t: &'a dyn LoweringTarget,
    module: &'a ir::Module,
    f: &'a Function,
    args: &'a [u32],
    types: Vec<Option<Type>>,
    llfn: FunctionValue<'ctx>,
    entry: BasicBlock<'ctx>,
    params: Vec<ParamVal<'ctx>>,
    locals: Vec<Option<PointerValue<'ctx>>>,
    shared: Vec<Option<PointerValue<'ctx>>>,
    loops: Vec<LoopFrame<'ctx>>,
    helpers: &'a HashMap<Handle<Function>, FunctionValue<'ctx>>,
    base_align: Vec<u32>,
    /// The span of the statement being lowered, for errors.
    span: Span,
    /// Whether this function (or a helper it calls) uses a wave verb: only then are the
    /// lanes made to reconverge at the end of each if/loop (see `converge_begin`).
    sync_waves: bool,
    /// Whether this is a kernel, where `return` ends the lane (a helper's returns to its
    /// caller instead).
    is_kernel: bool,
    /// The constructs being lowered whose merges wait for their lanes, innermost last.
    syncs: Vec<SyncFrame<'ctx>>,
    /// Where a lane leaving synced constructs early is going (`ESCAPE_RETURN`, or a loop
    /// frame's code); and a helper's return value on its way out. Made on first use.
    escape_slot: Option<PointerValue<'ctx>>,
    return_slot: Option<PointerValue<'ctx>>,
}

/// Whether `f`, or a helper it reaches, uses a wave verb. A call through a tag counts if any
/// function of the module uses a wave verb or a call through a tag itself.
fn uses_waves(module: &ir::Module, f: &Function, depth: u32) -> bool {
    if depth > 64 {
        return true;
    }
    f.exprs.iter().any(|(_, e)| match e {
        Expr::Wave { .. } => true,
        Expr::Call { function, .. } => module
            .functions
            .try_get(*function)
            .is_some_and(|g| uses_waves(module, g, depth + 1)),
        Expr::Dispatch { .. } => module.functions.iter().any(|(_, g)| {
            g.exprs
                .iter()
                .any(|(_, e)| matches!(e, Expr::Wave { .. } | Expr::Dispatch { .. }))
        }),
        _ => false,
    })
}

/// Whether control can leave `stmts` other than by falling off their end: a `break` or
/// `continue` to a loop outside them, or (when `returns_escape`) a `return`. Lanes that
/// leave so never reach the construct's merge point, so it must not wait for them there.
fn escapes(stmts: &[Stmt], inner: &mut Vec<Option<String>>, returns_escape: bool) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Break(l) | StmtKind::Continue(l) => match l {
            None => inner.is_empty(),
            Some(l) => !inner.iter().any(|x| x.as_deref() == Some(l.as_str())),
        },
        StmtKind::Return(_) => returns_escape,
        StmtKind::If {
            then_block,
            else_block,
            ..
        } => {
            escapes(then_block, inner, returns_escape) || escapes(else_block, inner, returns_escape)
        }
        StmtKind::Loop { label, body, .. } => {
            inner.push(label.clone());
            let e = escapes(body, inner, returns_escape);
            inner.pop();
            e
        }
        _ => false,
    })
}

#[allow(clippy::too_many_arguments)]
fn lower_function<'ctx>(
    cx: &Cx<'ctx>,
    target: &dyn LoweringTarget,
    module: &ir::Module,
    f: &Function,
    args: &[u32],
    llfn: FunctionValue<'ctx>,
    helpers: &HashMap<Handle<Function>, FunctionValue<'ctx>>,
    kernel_symbol: Option<&str>,
) -> LResult<FnInfo> {
    let types = ir::typeck::check_function(module, f).types();
    let entry = cx.context.append_basic_block(llfn, "entry");
    cx.builder.position_at_end(entry);
    let mut fx = FnCx {
        cx,
        t: target,
        module,
        f,
        args,
        types,
        llfn,
        entry,
        params: Vec::new(),
        locals: vec![None; f.locals.len()],
        shared: vec![None; f.shared.len()],
        loops: Vec::new(),
        helpers,
        base_align: vec![1; f.params.len()],
        span: f.span,
        sync_waves: uses_waves(module, f, 0),
        is_kernel: kernel_symbol.is_some(),
        syncs: Vec::new(),
        escape_slot: None,
        return_slot: None,
    };
    if fx.sync_waves {
        // The escape slot starts clear on every call.
        let i32t = cx.context.i32_type();
        let slot = fx.entry_alloca(i32t.into(), "escape")?;
        cx.builder.build_store(slot, i32t.const_zero())?;
        fx.escape_slot = Some(slot);
    }
    // Parameters.
    let mut i = 0u32;
    for p in &f.params {
        let v = llfn
            .get_nth_param(i)
            .ok_or_else(|| LowerError::new(codes::LLVM, "parameter count"))?;
        i += 1;
        match p.ty {
            Type::Buffer { .. } if kernel_symbol.is_some() => {
                let len = llfn
                    .get_nth_param(i)
                    .ok_or_else(|| LowerError::new(codes::LLVM, "parameter count"))?;
                i += 1;
                fx.params.push(ParamVal::Buffer {
                    ptr: v.into_pointer_value(),
                    len: len.into_int_value(),
                });
            }
            Type::Scalar(Scalar::Bool) if kernel_symbol.is_some() => {
                let b = cx.builder.build_int_compare(
                    IntPredicate::NE,
                    v.into_int_value(),
                    cx.context.i8_type().const_zero(),
                    "",
                )?;
                fx.params.push(ParamVal::Value(b.into()));
            }
            _ => fx.params.push(ParamVal::Value(v)),
        }
    }
    // Locals: one slot each in the entry block, promoted to registers by LLVM.
    for (h, l) in f.locals.iter() {
        let ty = match l.ty {
            Type::Array { elem, len } => {
                let n = len_of(f, len, args)?.max(1) * elem.lanes as u32;
                mem_scalar_type(cx, elem.scalar).array_type(n).into()
            }
            other => value_type(cx, target, other)?,
        };
        let slot = cx.builder.build_alloca(ty, &l.name)?;
        fx.locals[h.index()] = Some(slot);
    }
    // Shared arrays: module globals in the shared address space.
    let mut static_shared = 0u64;
    let mut dynamic_elem = None;
    if let Some(sym) = kernel_symbol {
        for (h, s) in f.shared.iter() {
            let scalar_ty = mem_scalar_type(cx, s.elem.scalar);
            let g = match s.len {
                Some(len) => {
                    let n = len_of(f, len, args)?;
                    static_shared += n as u64 * s.elem.size() as u64;
                    let ty = scalar_ty.array_type((n * s.elem.lanes as u32).max(1));
                    let g = cx.module.add_global(
                        ty,
                        Some(target.shared_space()),
                        &format!("{sym}__{}", s.name),
                    );
                    g.set_linkage(Linkage::Internal);
                    g.set_initializer(&ty.get_undef());
                    g
                }
                None => {
                    dynamic_elem = Some(s.elem.size());
                    let ty = scalar_ty.array_type(0);
                    let g = cx.module.add_global(
                        ty,
                        Some(target.shared_space()),
                        &format!("{sym}__{}", s.name),
                    );
                    g.set_linkage(Linkage::External);
                    g
                }
            };
            g.set_alignment(16);
            fx.shared[h.index()] = Some(g.as_pointer_value());
        }
    }
    fx.block(&f.body)?;
    // Fall off the end: a kernel returns; a helper returns zero (the verifier requires a
    // `return` on every path of a value helper, so this block is unreachable there).
    if fx.open() {
        match f.ret {
            None => {
                cx.builder.build_return(None)?;
            }
            Some(t) => {
                let z = value_type(cx, target, t)?.const_zero();
                cx.builder.build_return(Some(&z))?;
            }
        }
    }
    Ok(FnInfo {
        base_align: fx.base_align,
        static_shared,
        dynamic_elem,
    })
}

/// Integer predicates by signedness.
fn int_pred(op: BinaryOp, signed: bool) -> IntPredicate {
    match (op, signed) {
        (BinaryOp::Eq, _) => IntPredicate::EQ,
        (BinaryOp::Ne, _) => IntPredicate::NE,
        (BinaryOp::Lt, true) => IntPredicate::SLT,
        (BinaryOp::Lt, false) => IntPredicate::ULT,
        (BinaryOp::Le, true) => IntPredicate::SLE,
        (BinaryOp::Le, false) => IntPredicate::ULE,
        (BinaryOp::Gt, true) => IntPredicate::SGT,
        (BinaryOp::Gt, false) => IntPredicate::UGT,
        (BinaryOp::Ge, true) => IntPredicate::SGE,
        _ => IntPredicate::UGE,
    }
}

/// The largest power of two (up to 2^16) that provably divides the value of `e`, from its
/// own arithmetic: literals, products, sums and left shifts by constants.
fn known_multiple(f: &Function, e: ExprId, args: &[u32], depth: u32) -> u64 {
    const CAP: u64 = 1 << 16;
    if depth > 64 {
        return 1;
    }
    let Some(x) = f.exprs.try_get(e) else {
        return 1;
    };
    let pow2 = |v: u64| {
        if v == 0 {
            CAP
        } else {
            (1u64 << v.trailing_zeros().min(16)).min(CAP)
        }
    };
    match x {
        Expr::Literal(Literal::Int { bits, .. }) => pow2(*bits),
        Expr::TemplateParam(i) => args.get(*i as usize).map_or(1, |v| pow2(*v as u64)),
        Expr::Binary { op, lhs, rhs } => {
            let a = known_multiple(f, *lhs, args, depth + 1);
            let b = known_multiple(f, *rhs, args, depth + 1);
            match op {
                BinaryOp::Mul => (a * b).min(CAP),
                BinaryOp::Add | BinaryOp::Sub => a.min(b),
                BinaryOp::BitAnd => a.max(b),
                BinaryOp::Shl => match f.exprs.try_get(*rhs) {
                    Some(Expr::Literal(Literal::Int { bits, .. })) if *bits < 16 => {
                        (a << bits).min(CAP)
                    }
                    _ => a,
                },
                _ => 1,
            }
        }
        Expr::Cast { arg, .. } => known_multiple(f, *arg, args, depth + 1),
        _ => 1,
    }
}

impl<'a, 'ctx> FnCx<'a, 'ctx> {
    fn b(&self) -> &Builder<'ctx> {
        &self.cx.builder
    }

    /// Whether the current block still needs a terminator.
    fn open(&self) -> bool {
        self.b()
            .get_insert_block()
            .is_some_and(|bb| bb.get_terminator().is_none())
    }

    /// After a terminator: continue in a fresh unreachable block, so later statements
    /// still have somewhere to go (LLVM deletes it).
    fn dead_block(&self) {
        let bb = self.cx.context.append_basic_block(self.llfn, "dead");
        self.b().position_at_end(bb);
    }

    fn err<T>(&self, code: &'static str, message: impl Into<String>) -> LResult<T> {
        let mut e = LowerError::new(code, message);
        e.span = self.span;
        Err(e)
    }

    fn ty(&self, e: ExprId) -> LResult<Type> {
        match self.types.get(e.index()).copied().flatten() {
            Some(t) => Ok(t),
            None => self.err(
                codes::INPUT,
                "an expression has no type (was the module verified?)",
            ),
        }
    }

    /// A slot in the entry block (promotable to a register).
    fn entry_alloca(&self, ty: BasicTypeEnum<'ctx>, name: &str) -> LResult<PointerValue<'ctx>> {
        let b = self.cx.context.create_builder();
        match self.entry.get_first_instruction() {
            Some(i) => b.position_before(&i),
            None => b.position_at_end(self.entry),
        }
        Ok(b.build_alloca(ty, name)?)
    }

    fn vt(&self, ty: Type) -> LResult<BasicTypeEnum<'ctx>> {
        value_type(self.cx, self.t, ty)
    }

    // ---- statements -------------------------------------------------------------------

    fn block(&mut self, stmts: &[Stmt]) -> LResult<()> {
        for s in stmts {
            self.span = s.span;
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> LResult<()> {
        match &s.kind {
            StmtKind::Let { local, init } => {
                if let Some(init) = init {
                    let v = self.value(*init)?;
                    let slot = self.local_slot(*local)?;
                    self.b().build_store(slot, v)?;
                }
            }
            StmtKind::Assign { place, value } => self.assign(place, *value)?,
            StmtKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let c = self.value(*cond)?.into_int_value();
                let sync = self.converge_begin()?;
                let then_bb = self.cx.context.append_basic_block(self.llfn, "then");
                let else_bb = self.cx.context.append_basic_block(self.llfn, "else");
                let merge = self.cx.context.append_basic_block(self.llfn, "endif");
                self.b().build_conditional_branch(c, then_bb, else_bb)?;
                self.enter_sync(sync, merge);
                self.b().position_at_end(then_bb);
                let r = self.block(then_block);
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.b().position_at_end(else_bb);
                let r = r.and_then(|()| self.block(else_block));
                if r.is_ok() && self.open() {
                    self.b().build_unconditional_branch(merge)?;
                }
                self.leave_sync(sync);
                r?;
                self.b().position_at_end(merge);
                self.converge_end(sync)?;
                if sync.is_some() && self.escapes_from(&[then_block, else_block], None) {
                    self.dispatch_escape()?;
                }
            }
            StmtKind::Loop { label, kind, body } => self.loop_stmt(label, kind, body)?,
            StmtKind::Break(label) | StmtKind::Continue(label) => {
                let is_break = matches!(s.kind, StmtKind::Break(_));
                let frame = match label {
                    None => self.loops.last(),
                    Some(l) => self
                        .loops
                        .iter()
                        .rev()
                        .find(|f| f.label.as_deref() == Some(l)),
                };
                let Some(frame) = frame else {
                    return self.err(codes::INPUT, "`break`/`continue` outside its loop");
                };
                let to = if is_break { frame.brk } else { frame.cont };
                let k = self
                    .loops
                    .iter()
                    .rposition(|f| f.brk == frame.brk)
                    .expect("the frame is on the stack");
                match self.syncs.last() {
                    // A synced construct inside loop `k` is in the way: through its merge.
                    Some(sync) if sync.loops > k => {
                        let merge = sync.merge;
                        self.set_escape(1 + 2 * k as u64 + (!is_break) as u64)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_unconditional_branch(to)?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Return(v) => {
                let v = v.map(|e| self.value(e)).transpose()?;
                match self.syncs.last() {
                    // A helper's return inside synced constructs goes out through their
                    // merges (a kernel's return ends the lane, which holds up no wait).
                    Some(sync) if !self.is_kernel => {
                        let merge = sync.merge;
                        if let Some(v) = v {
                            let slot = self.return_slot(v.get_type())?;
                            self.b().build_store(slot, v)?;
                        }
                        self.set_escape(ESCAPE_RETURN)?;
                        self.b().build_unconditional_branch(merge)?;
                    }
                    _ => {
                        self.b().build_return(v.as_ref().map(|v| v as _))?;
                    }
                }
                self.dead_block();
            }
            StmtKind::Expr(e) => {
                self.expr(*e)?;
            }
            StmtKind::Barrier => self.t.barrier(self.cx)?,
            StmtKind::Fence(scope) => self.t.fence(self.cx, *scope)?,
            StmtKind::VStore {
                base,
                index,
                value,
                align,
            } => {
                let v = self.value(*value)?;
                let vty = self.ty(*value)?;
                let lanes = vty.lanes().unwrap_or(1) as u32;
                let (ptr, elem) = self.vector_ptr(*base, *index)?;
                let a = self.vector_align(*base, *index, elem.scalar, lanes, *align);
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(a)
                    .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
            }
            StmtKind::MatrixStore {
                value,
                base,
                offset,
                stride,
            } => {
                let v = self.value(*value)?;
                let Type::Matrix {
                    scalar, rows, cols, ..
                } = self.ty(*value)?
                else {
                    return self.err(codes::INPUT, "matrix_store of a non-fragment");
                };
                let off = self.value(*offset)?.into_int_value();
                let stride = self.value(*stride)?.into_int_value();
                if self.cx.software_matrices.get() {
                    self.sw_store(scalar, v, *base, off, stride, rows, cols)?;
                } else {
                    let ptr = self.scalar_ptr(*base, off)?;
                    self.t.matrix_store(self.cx, scalar, v, ptr, stride)?;
                }
            }
        }
        Ok(())
    }

    fn local_slot(&self, l: Handle<ir::Local>) -> LResult<PointerValue<'ctx>> {
        match self.locals.get(l.index()).copied().flatten() {
            Some(p) => Ok(p),
            None => self.err(codes::INPUT, "a local without a slot"),
        }
    }

    fn assign(&mut self, place: &Place, value: ExprId) -> LResult<()> {
        match place {
            Place::Local(l) => {
                let v = self.value(value)?;
                let slot = self.local_slot(*l)?;
                self.b().build_store(slot, v)?;
            }
            Place::Lane { local, lane } => {
                let v = self.value(value)?;
                let slot = self.local_slot(*local)?;
                let lty = self.vt(self.f.locals[*local].ty)?;
                let cur = self.b().build_load(lty, slot, "")?.into_vector_value();
                let new = self
                    .b()
                    .build_insert_element(cur, v, self.cx.i32(*lane as u64), "")?;
                self.b().build_store(slot, new)?;
            }
            Place::Element { base, index } => {
                // Index first, then value: the printed source's order (`b[i] = v`).
                let (ptr, elem) = self.element_ptr(*base, *index)?;
                let v = self.value(value)?;
                let st = self
                    .b()
                    .build_store(ptr, self.value_to_mem(v, elem.scalar)?)?;
                st.set_alignment(natural_align(elem.size()).max(natural_align(elem.scalar.size())))
                    .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
            }
        }
        Ok(())
    }

    fn loop_stmt(&mut self, label: &Option<String>, kind: &LoopKind, body: &[Stmt]) -> LResult<()> {
        let ctx = self.cx.context;
        let header = ctx.append_basic_block(self.llfn, "loop");
        let body_bb = ctx.append_basic_block(self.llfn, "body");
        let latch = ctx.append_basic_block(self.llfn, "latch");
        let exit = ctx.append_basic_block(self.llfn, "endloop");
        let sync = self.converge_begin()?;
        let mut for_state = None;
        if let LoopKind::For {
            var,
            start,
            end,
            step,
        } = kind
        {
            let s = self.value(*start)?;
            let e = self.value(*end)?;
            let st = match step {
                Some(st) => self.value(*st)?,
                None => {
                    let t = self.vt(self.f.locals[*var].ty)?;
                    t.into_int_type().const_int(1, false).into()
                }
            };
            let slot = self.local_slot(*var)?;
            self.b().build_store(slot, s)?;
            let signed = self.f.locals[*var]
                .ty
                .scalar()
                .is_some_and(|s| s.is_signed());
            for_state = Some((slot, e.into_int_value(), st.into_int_value(), signed));
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(header);
        match kind {
            LoopKind::Infinite => {
                self.b().build_unconditional_branch(body_bb)?;
            }
            LoopKind::While(c) => {
                let c = self.value(*c)?.into_int_value();
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
            LoopKind::For { .. } => {
                let (slot, end, _, signed) = for_state.expect("for state");
                let v = self
                    .b()
                    .build_load(end.get_type(), slot, "")?
                    .into_int_value();
                let pred = if signed {
                    IntPredicate::SLT
                } else {
                    IntPredicate::ULT
                };
                let c = self.b().build_int_compare(pred, v, end, "")?;
                self.b().build_conditional_branch(c, body_bb, exit)?;
            }
        }
        self.enter_sync(sync, exit);
        self.loops.push(LoopFrame {
            label: label.clone(),
            brk: exit,
            cont: latch,
        });
        self.b().position_at_end(body_bb);
        let r = self.block(body);
        self.loops.pop();
        self.leave_sync(sync);
        r?;
        if self.open() {
            self.b().build_unconditional_branch(latch)?;
        }
        self.b().position_at_end(latch);
        if let Some((slot, end, step, _)) = for_state {
            let v = self
                .b()
                .build_load(end.get_type(), slot, "")?
                .into_int_value();
            let n = self.b().build_int_add(v, step, "")?;
            self.b().build_store(slot, n)?;
        }
        self.b().build_unconditional_branch(header)?;
        self.b().position_at_end(exit);
        self.converge_end(sync)?;
        if sync.is_some() && self.escapes_from(&[body], Some(label)) {
            self.dispatch_escape()?;
        }
        Ok(())
    }

    /// On entry to an if or a loop in a function that uses wave verbs: the mask of the lanes
    /// arriving together, which the target waits for again at the merge point
    /// (`converge_end`), since the IR's lanes reconverge at the end of every if/loop and wave
    /// verbs rely on it (NVIDIA's independent thread scheduling does not promise it). Lanes
    /// that leave the construct early pass through its merge too (`SyncFrame`), so all of
    /// them arrive. A kernel's `return` ends the lane, and ended lanes do not hold up a warp
    /// sync.
    fn converge_begin(&self) -> LResult<Option<IntValue<'ctx>>> {
        if !self.sync_waves || !self.open() {
            return Ok(None);
        }
        self.t.converge_begin(self.cx)
    }

    fn enter_sync(&mut self, sync: Option<IntValue<'ctx>>, merge: BasicBlock<'ctx>) {
        if sync.is_some() {
            self.syncs.push(SyncFrame {
                merge,
                loops: self.loops.len(),
            });
        }
    }

    fn leave_sync(&mut self, sync: Option<IntValue<'ctx>>) {
        if sync.is_some() {
            self.syncs.pop();
        }
    }

    /// Whether lanes can leave `blocks` (of a loop labelled `looping`, when it is one) other
    /// than by falling off their end.
    fn escapes_from(&self, blocks: &[&[Stmt]], looping: Option<&Option<String>>) -> bool {
        let inner: Vec<Option<String>> = looping.into_iter().cloned().collect();
        blocks
            .iter()
            .any(|b| escapes(b, &mut inner.clone(), !self.is_kernel))
    }

    fn set_escape(&mut self, code: u64) -> LResult<()> {
        let slot = self
            .escape_slot
            .ok_or_else(|| LowerError::new(codes::LLVM, "an escape without its slot"))?;
        let i32t = self.cx.context.i32_type();
        self.b().build_store(slot, i32t.const_int(code, false))?;
        Ok(())
    }

    fn return_slot(&mut self, ty: BasicTypeEnum<'ctx>) -> LResult<PointerValue<'ctx>> {
        if let Some(s) = self.return_slot {
            return Ok(s);
        }
        let s = self.entry_alloca(ty, "ret")?;
        self.return_slot = Some(s);
        Ok(s)
    }

    /// After a synced construct's merge: a lane that came there escaping goes on, to the
    /// next synced construct's merge if one is in the way, else to its target (the loop's
    /// exit or latch, or the helper's return), clearing the slot.
    fn dispatch_escape(&mut self) -> LResult<()> {
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        let slot = self
            .escape_slot
            .ok_or_else(|| LowerError::new(codes::LLVM, "an escape without its slot"))?;
        let code = self.b().build_load(i32t, slot, "escape")?.into_int_value();
        let on = ctx.append_basic_block(self.llfn, "noescape");
        let next = self.syncs.last().map(|s| (s.merge, s.loops));
        let mut cases = Vec::new();
        let mut targets = Vec::new();
        for (k, frame) in self.loops.iter().enumerate() {
            for (cont, to) in [(false, frame.brk), (true, frame.cont)] {
                targets.push((1 + 2 * k as u64 + cont as u64, next.filter(|n| n.1 > k), to));
            }
        }
        for (code, through, to) in targets {
            let bb = ctx.append_basic_block(self.llfn, "escape.to");
            cases.push((i32t.const_int(code, false), bb));
            self.b().position_at_end(bb);
            match through {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => {
                    self.b().build_store(slot, i32t.const_zero())?;
                    self.b().build_unconditional_branch(to)?;
                }
            }
        }
        if !self.is_kernel {
            let bb = ctx.append_basic_block(self.llfn, "escape.ret");
            cases.push((i32t.const_int(ESCAPE_RETURN, false), bb));
            self.b().position_at_end(bb);
            match next {
                Some((merge, _)) => {
                    self.b().build_unconditional_branch(merge)?;
                }
                None => match self.f.ret {
                    Some(t) => {
                        let ty = self.vt(t)?;
                        let slot = self.return_slot(ty)?;
                        let v = self.b().build_load(ty, slot, "ret")?;
                        self.b().build_return(Some(&v))?;
                    }
                    None => {
                        self.b().build_return(None)?;
                    }
                },
            }
        }
        // The switch goes in the merge block, which the builder left before the cases.
        let merge_end = code
            .as_instruction()
            .and_then(|i| i.get_parent())
            .ok_or_else(|| LowerError::new(codes::LLVM, "escape load without a block"))?;
        self.b().position_at_end(merge_end);
        self.b().build_switch(code, on, &cases)?;
        self.b().position_at_end(on);
        Ok(())
    }

    fn converge_end(&self, mask: Option<IntValue<'ctx>>) -> LResult<()> {
        match mask {
            Some(m) => self.t.converge_end(self.cx, m),
            None => Ok(()),
        }
    }

    // ---- memory -----------------------------------------------------------------------

    fn base_info(&self, base: Base) -> LResult<(PointerValue<'ctx>, ElemType)> {
        match base {
            Base::Param(i) => match (self.params.get(i as usize), self.f.params.get(i as usize)) {
                (Some(ParamVal::Buffer { ptr, .. }), Some(p)) => match p.ty {
                    Type::Buffer { elem, .. } => Ok((*ptr, elem)),
                    _ => self.err(codes::INPUT, "an indexed parameter that is not a buffer"),
                },
                _ => self.err(codes::INPUT, "an indexed parameter that is not a buffer"),
            },
            Base::Shared(h) => match (
                self.shared.get(h.index()).copied().flatten(),
                self.f.shared.try_get(h),
            ) {
                (Some(p), Some(d)) => Ok((p, d.elem)),
                _ => self.err(codes::INPUT, "a shared array outside a kernel"),
            },
            Base::Local(l) => match self.f.locals.try_get(l).map(|x| x.ty) {
                Some(Type::Array { elem, .. }) => Ok((self.local_slot(l)?, elem)),
                _ => self.err(codes::INPUT, "an indexed local that is not an array"),
            },
        }
    }

    /// The address of scalar `scalar_index` of `base` (`index` is an `i32`, unsigned).
    fn scalar_ptr(&self, base: Base, scalar_index: IntValue<'ctx>) -> LResult<PointerValue<'ctx>> {
        let (ptr, elem) = self.base_info(base)?;
        let i64t = self.cx.context.i64_type();
        let idx = self.b().build_int_z_extend(scalar_index, i64t, "")?;
        let ty = mem_scalar_type(self.cx, elem.scalar);
        // SAFETY: an in-bounds GEP over the base's scalar type; bounds are the program's
        // promise on a GPU (DESIGN.md, Decisions 8), and the index is 64-bit so it does not wrap.
        Ok(unsafe { self.b().build_gep(ty, ptr, &[idx], "")? })
    }

    /// The address of element `index` of `base`.
    fn element_ptr(
        &mut self,
        base: Base,
        index: ExprId,
    ) -> LResult<(PointerValue<'ctx>, ElemType)> {
        let (_, elem) = self.base_info(base)?;
        let i = self.value(index)?.into_int_value();
        let i64t = self.cx.context.i64_type();
        let mut idx = self.b().build_int_z_extend(i, i64t, "")?;
        if elem.lanes > 1 {
            idx = self
                .b()
                .build_int_mul(idx, i64t.const_int(elem.lanes as u64, false), "")?;
        }
        let (ptr, _) = self.base_info(base)?;
        let ty = mem_scalar_type(self.cx, elem.scalar);
        // SAFETY: as in `scalar_ptr`.
        let p = unsafe { self.b().build_gep(ty, ptr, &[idx], "")? };
        if let Base::Param(pi) = base {
            let a = natural_align(elem.size());
            if let Some(x) = self.base_align.get_mut(pi as usize) {
                *x = (*x).max(a);
            }
        }
        Ok((p, elem))
    }

    /// The address of scalar `index` of a scalar `base` (vload/vstore).
    fn vector_ptr(&mut self, base: Base, index: ExprId) -> LResult<(PointerValue<'ctx>, ElemType)> {
        let (_, elem) = self.base_info(base)?;
        let i = self.value(index)?.into_int_value();
        Ok((self.scalar_ptr(base, i)?, elem))
    }

    /// The alignment of a `lanes`-wide access at scalar `index`: the larger of what the
    /// index's arithmetic proves (assuming a 16-byte aligned base, which the launch checks)
    /// and the stated `align`, capped at the access width.
    fn vector_align(
        &mut self,
        base: Base,
        index: ExprId,
        scalar: Scalar,
        lanes: u32,
        stated: Option<u8>,
    ) -> u32 {
        let width = natural_align(scalar.size() * lanes.next_power_of_two()).max(1);
        let proven =
            (known_multiple(self.f, index, self.args, 0) * scalar.size() as u64).min(16) as u32;
        let a = proven
            .max(stated.unwrap_or(1) as u32)
            .max(scalar.size())
            .min(width)
            .min(16);
        if let Base::Param(pi) = base {
            if let Some(x) = self.base_align.get_mut(pi as usize) {
                *x = (*x).max(a);
            }
        }
        a
    }

    /// A value as stored in memory (`bool` lanes as `i8`).
    fn value_to_mem(&self, v: BasicValueEnum<'ctx>, s: Scalar) -> LResult<BasicValueEnum<'ctx>> {
        if s != Scalar::Bool {
            return Ok(v);
        }
        let t = match v {
            BasicValueEnum::VectorValue(vv) => {
                vector_of(self.cx.context.i8_type().into(), vv.get_type().get_size())
            }
            _ => self.cx.context.i8_type().into(),
        };
        Ok(self
            .b()
            .build_cast(inkwell::values::InstructionOpcode::ZExt, v, t, "")?)
    }

    /// A value loaded from memory as a value (`i8` lanes back to `bool`).
    fn mem_to_value(&self, v: BasicValueEnum<'ctx>, s: Scalar) -> LResult<BasicValueEnum<'ctx>> {
        if s != Scalar::Bool {
            return Ok(v);
        }
        let z = v.get_type().const_zero();
        self.icmp(IntPredicate::NE, v, z)
    }

    fn load_elem(
        &self,
        ptr: PointerValue<'ctx>,
        elem: ElemType,
        align: u32,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let st = mem_scalar_type(self.cx, elem.scalar);
        let ty = if elem.lanes > 1 {
            vector_of(st, elem.lanes as u32)
        } else {
            st
        };
        let v = self.b().build_load(ty, ptr, "")?;
        if let Some(i) = v.as_instruction_value() {
            i.set_alignment(align)
                .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
        }
        self.mem_to_value(v, elem.scalar)
    }

    // ---- raw helpers over any value type ----------------------------------------------

    fn icmp(
        &self,
        p: IntPredicate,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        // SAFETY: both operands are integer (or integer vector) values of one type, built
        // by this walk; LLVMBuildICmp returns a valid value of the matching i1 type.
        unsafe {
            let r = llvm_sys::core::LLVMBuildICmp(
                self.b().as_mut_ptr(),
                p.into(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    fn fcmp(
        &self,
        p: inkwell::FloatPredicate,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        // SAFETY: as in `icmp`, for float operands.
        unsafe {
            let r = llvm_sys::core::LLVMBuildFCmp(
                self.b().as_mut_ptr(),
                p.into(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    fn select(
        &self,
        c: BasicValueEnum<'ctx>,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        // SAFETY: `c` is i1 or a vector of i1 matching `a` and `b`, which share a type.
        unsafe {
            let r = llvm_sys::core::LLVMBuildSelect(
                self.b().as_mut_ptr(),
                c.as_value_ref(),
                a.as_value_ref(),
                b.as_value_ref(),
                c"".as_ptr(),
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    fn binop(
        &self,
        op: inkwell::values::InstructionOpcode,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        Ok(self.b().build_binop(op, a, b, "")?)
    }

    /// A constant of `ty` (scalar or vector) holding `bits` (integers) in every lane.
    fn const_int(&self, ty: BasicTypeEnum<'ctx>, bits: u64, signed: bool) -> BasicValueEnum<'ctx> {
        match ty {
            BasicTypeEnum::IntType(t) => t.const_int(bits, signed).into(),
            BasicTypeEnum::VectorType(v) => {
                let e = v.get_element_type().into_int_type().const_int(bits, signed);
                let lanes: Vec<IntValue> = (0..v.get_size()).map(|_| e).collect();
                inkwell::types::VectorType::const_vector(&lanes).into()
            }
            other => other.const_zero(),
        }
    }

    fn const_float(&self, ty: BasicTypeEnum<'ctx>, x: f64) -> BasicValueEnum<'ctx> {
        match ty {
            BasicTypeEnum::FloatType(t) => t.const_float(x).into(),
            BasicTypeEnum::VectorType(v) => {
                let e = v.get_element_type().into_float_type().const_float(x);
                let lanes: Vec<_> = (0..v.get_size()).map(|_| e).collect();
                inkwell::types::VectorType::const_vector(&lanes).into()
            }
            other => other.const_zero(),
        }
    }

    // ---- expressions ------------------------------------------------------------------

    fn value(&mut self, e: ExprId) -> LResult<BasicValueEnum<'ctx>> {
        match self.expr(e)? {
            Some(v) => Ok(v),
            None => self.err(codes::INPUT, "a call that returns nothing used as a value"),
        }
    }

    fn expr(&mut self, e: ExprId) -> LResult<Option<BasicValueEnum<'ctx>>> {
        let Some(x) = self.f.exprs.try_get(e) else {
            return self.err(codes::INPUT, "a dangling expression handle");
        };
        let span = self.f.expr_span(e);
        if span.is_known() {
            self.span = span;
        }
        let ctx = self.cx.context;
        let v: BasicValueEnum = match x {
            Expr::Literal(l) => match *l {
                Literal::Bool(b) => ctx.bool_type().const_int(b as u64, false).into(),
                Literal::Int { bits, ty } => scalar_type(self.cx, ty)
                    .into_int_type()
                    .const_int(bits, false)
                    .into(),
                Literal::Float { value, ty } => scalar_type(self.cx, ty)
                    .into_float_type()
                    .const_float(value)
                    .into(),
            },
            Expr::Param(i) => match self.params.get(*i as usize) {
                Some(ParamVal::Value(v)) => *v,
                _ => return self.err(codes::INPUT, "a buffer parameter used as a value"),
            },
            Expr::Local(l) => {
                let slot = self.local_slot(*l)?;
                let t = self.vt(self.f.locals[*l].ty)?;
                self.b().build_load(t, slot, "")?
            }
            Expr::TemplateParam(i) => match self.args.get(*i as usize) {
                Some(v) => self.cx.i32(*v as u64).into(),
                None => return self.err(codes::INPUT, "a template parameter without an argument"),
            },
            Expr::Builtin(b) => self.builtin(*b)?.into(),
            Expr::Unary { op, arg } => {
                let a = self.value(*arg)?;
                let ty = self.ty(*arg)?;
                let s = ty.scalar().unwrap_or(Scalar::Bool);
                match op {
                    UnaryOp::Neg if s.is_float() => {
                        // SAFETY: `a` is a float or float vector value.
                        unsafe {
                            BasicValueEnum::new(llvm_sys::core::LLVMBuildFNeg(
                                self.b().as_mut_ptr(),
                                a.as_value_ref(),
                                c"".as_ptr(),
                            ))
                        }
                    }
                    UnaryOp::Neg => {
                        let z = a.get_type().const_zero();
                        self.binop(inkwell::values::InstructionOpcode::Sub, z, a)?
                    }
                    UnaryOp::Not => {
                        let ones = self.const_int(a.get_type(), u64::MAX, true);
                        self.binop(inkwell::values::InstructionOpcode::Xor, a, ones)?
                    }
                }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs)?,
            Expr::Cast { to, arg } => {
                let a = self.value(*arg)?;
                let from = self.ty(*arg)?;
                self.cast(a, from, *to)?
            }
            Expr::Bitcast { to, arg } => {
                let a = self.value(*arg)?;
                let t = self.vt(*to)?;
                self.b().build_bit_cast(a, t, "")?
            }
            Expr::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.value(*cond)?;
                let a = self.value(*accept)?;
                let r = self.value(*reject)?;
                self.select(c, a, r)?
            }
            Expr::Compose {
                scalar,
                lanes,
                parts,
            } => {
                let ty = vector_of(scalar_type(self.cx, *scalar), *lanes as u32);
                let mut v = ty.into_vector_type().get_undef();
                let mut k = 0u64;
                for p in parts.clone() {
                    let pv = self.value(p)?;
                    match pv {
                        BasicValueEnum::VectorValue(pvv) => {
                            for j in 0..pvv.get_type().get_size() {
                                let x = self.b().build_extract_element(
                                    pvv,
                                    self.cx.i32(j as u64),
                                    "",
                                )?;
                                v = self.b().build_insert_element(v, x, self.cx.i32(k), "")?;
                                k += 1;
                            }
                        }
                        s => {
                            v = self.b().build_insert_element(v, s, self.cx.i32(k), "")?;
                            k += 1;
                        }
                    }
                }
                v.into()
            }
            Expr::Splat { lanes, value } => {
                let s = self.value(*value)?;
                self.splat(s, *lanes as u32)?
            }
            Expr::Extract { vector, lane } => {
                let v = self.value(*vector)?.into_vector_value();
                self.b()
                    .build_extract_element(v, self.cx.i32(*lane as u64), "")?
            }
            Expr::Swizzle { vector, lanes } => {
                let v = self.value(*vector)?.into_vector_value();
                let mask: Vec<IntValue> = lanes.iter().map(|l| self.cx.i32(*l as u64)).collect();
                let mask = inkwell::types::VectorType::const_vector(&mask);
                let undef = v.get_type().get_undef();
                // SAFETY: a shuffle of one vector with constant in-range lane indices.
                unsafe {
                    BasicValueEnum::new(llvm_sys::core::LLVMBuildShuffleVector(
                        self.b().as_mut_ptr(),
                        v.as_value_ref(),
                        undef.as_value_ref(),
                        mask.as_value_ref(),
                        c"".as_ptr(),
                    ))
                }
            }
            Expr::Index { base, index } => {
                let (ptr, elem) = self.element_ptr(*base, *index)?;
                let align = natural_align(elem.size()).max(natural_align(elem.scalar.size()));
                self.load_elem(ptr, elem, align)?
            }
            Expr::Len(i) => match self.params.get(*i as usize) {
                Some(ParamVal::Buffer { len, .. }) => (*len).into(),
                _ => return self.err(codes::INPUT, "`len` of a parameter that is not a buffer"),
            },
            Expr::Call { function, args } => {
                let Some(&callee) = self.helpers.get(function) else {
                    return self.err(
                        codes::INPUT,
                        "a call to a function that is not a device helper",
                    );
                };
                let mut vals: Vec<BasicMetadataValueEnum> = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?.into());
                }
                let call = self.b().build_call(callee, &vals, "")?;
                return Ok(call.try_as_basic_value().basic());
            }
            Expr::Tag { index, .. } => self.cx.i32(*index as u64).into(),
            Expr::Dispatch { tag, args } => return self.dispatch(*tag, args.clone(), e),
            Expr::Math { fun, args } => {
                let mut vals = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?);
                }
                let ty = self.ty(e)?;
                self.math(*fun, ty, &vals)?
            }
            Expr::Atomic {
                op,
                order,
                place,
                value,
                compare,
            } => self.atomic(*op, *order, place, *value, *compare, e)?,
            Expr::Wave { op, args } => {
                let mut vals = Vec::new();
                for a in args.clone() {
                    vals.push(self.value(a)?);
                }
                let ty = match args.first() {
                    Some(a) => Some(self.ty(*a)?),
                    None => None,
                };
                self.wave(*op, ty, &vals)?
            }
            Expr::VLoad {
                base,
                index,
                lanes,
                align,
            } => {
                let (ptr, elem) = self.vector_ptr(*base, *index)?;
                let a = self.vector_align(*base, *index, elem.scalar, *lanes as u32, *align);
                let st = mem_scalar_type(self.cx, elem.scalar);
                let v = self.b().build_load(vector_of(st, *lanes as u32), ptr, "")?;
                if let Some(i) = v.as_instruction_value() {
                    i.set_alignment(a)
                        .map_err(|e| LowerError::new(codes::LLVM, e.to_string()))?;
                }
                self.mem_to_value(v, elem.scalar)?
            }
            Expr::MatrixFill {
                role,
                scalar,
                rows,
                cols,
                value,
            } => {
                let v = self.value(*value)?;
                if self.cx.software_matrices.get() {
                    self.sw_fill(*scalar, *rows, *cols, v)?
                } else {
                    self.t
                        .matrix_fill(self.cx, *role, *scalar, *rows, *cols, v)?
                }
            }
            Expr::MatrixLoad {
                role,
                scalar,
                rows,
                cols,
                base,
                offset,
                stride,
            } => {
                let off = self.value(*offset)?.into_int_value();
                let st = self.value(*stride)?.into_int_value();
                if matches!(base, Base::Local(_)) {
                    return self.err(codes::UNSUPPORTED, "matrix_load from a private array");
                }
                if self.cx.software_matrices.get() {
                    self.sw_load(*scalar, *rows, *cols, *base, off, st)?
                } else {
                    let ptr = self.scalar_ptr(*base, off)?;
                    self.t
                        .matrix_load(self.cx, *role, *scalar, *rows, *cols, ptr, st)?
                }
            }
            Expr::MatrixMma { a, b, c } => {
                let (
                    Type::Matrix {
                        scalar: ab,
                        rows,
                        cols: inner,
                        ..
                    },
                    Type::Matrix {
                        scalar: acc, cols, ..
                    },
                ) = (self.ty(*a)?, self.ty(*c)?)
                else {
                    return self.err(codes::INPUT, "matrix_mma of non-fragments");
                };
                let av = self.value(*a)?;
                let bv = self.value(*b)?;
                let cv = self.value(*c)?;
                if self.cx.software_matrices.get() {
                    self.sw_mma((ab, rows, inner), (acc, cols), av, bv, cv)?
                } else {
                    self.t.matrix_mma(self.cx, ab, acc, av, bv, cv)?
                }
            }
        };
        Ok(Some(v))
    }

    fn splat(&self, s: BasicValueEnum<'ctx>, lanes: u32) -> LResult<BasicValueEnum<'ctx>> {
        let vt = vector_of(s.get_type(), lanes).into_vector_type();
        let mut v = vt.get_undef();
        for k in 0..lanes {
            v = self
                .b()
                .build_insert_element(v, s, self.cx.i32(k as u64), "")?;
        }
        Ok(v.into())
    }

    fn builtin(&self, b: Builtin) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        Ok(match b {
            Builtin::GlobalId(d) => {
                let g = t.coord(self.cx, Coord::GroupId(d.index()))?;
                let n = t.coord(self.cx, Coord::GroupSize(d.index()))?;
                let l = t.coord(self.cx, Coord::LocalId(d.index()))?;
                let m = self.b().build_int_mul(g, n, "")?;
                self.b().build_int_add(m, l, "")?
            }
            Builtin::LocalId(d) => t.coord(self.cx, Coord::LocalId(d.index()))?,
            Builtin::GroupId(d) => t.coord(self.cx, Coord::GroupId(d.index()))?,
            Builtin::GroupSize(d) => t.coord(self.cx, Coord::GroupSize(d.index()))?,
            Builtin::NumGroups(d) => t.coord(self.cx, Coord::NumGroups(d.index()))?,
            Builtin::WaveWidth => self.cx.i32(t.wave_width() as u64),
            Builtin::LaneId => t.coord(self.cx, Coord::LaneId)?,
        })
    }

    fn binary(&mut self, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            return self.short_circuit(op == BinaryOp::LogicalAnd, lhs, rhs);
        }
        let ty = self.ty(lhs)?;
        let a = self.value(lhs)?;
        let b = self.value(rhs)?;
        let s = ty.scalar().unwrap_or(Scalar::Bool);
        if op.is_comparison() {
            if s.is_float() {
                use inkwell::FloatPredicate as F;
                let p = match op {
                    BinaryOp::Eq => F::OEQ,
                    BinaryOp::Ne => F::UNE,
                    BinaryOp::Lt => F::OLT,
                    BinaryOp::Le => F::OLE,
                    BinaryOp::Gt => F::OGT,
                    _ => F::OGE,
                };
                return self.fcmp(p, a, b);
            }
            return self.icmp(int_pred(op, s.is_signed()), a, b);
        }
        let f = s.is_float();
        Ok(match op {
            BinaryOp::Add => self.binop(if f { O::FAdd } else { O::Add }, a, b)?,
            BinaryOp::Sub => self.binop(if f { O::FSub } else { O::Sub }, a, b)?,
            BinaryOp::Mul => self.binop(if f { O::FMul } else { O::Mul }, a, b)?,
            BinaryOp::Div if f => self.binop(O::FDiv, a, b)?,
            BinaryOp::Rem if f => self.fmod(s, a, b)?,
            BinaryOp::Div | BinaryOp::Rem => self.int_div(op == BinaryOp::Div, s, a, b)?,
            BinaryOp::BitAnd => self.binop(O::And, a, b)?,
            BinaryOp::BitOr => self.binop(O::Or, a, b)?,
            BinaryOp::BitXor => self.binop(O::Xor, a, b)?,
            BinaryOp::Shl | BinaryOp::Shr => {
                // The amount is taken modulo the width (docs/semantics.md).
                let mask = self.const_int(b.get_type(), (s.bits() - 1) as u64, false);
                let amt = self.binop(O::And, b, mask)?;
                let amt = if amt.get_type() != a.get_type() {
                    let opc = if b.get_type().into_int_type_or_vector_bits() > s.bits() {
                        O::Trunc
                    } else {
                        O::ZExt
                    };
                    self.b().build_cast(opc, amt, a.get_type(), "")?
                } else {
                    amt
                };
                let opc = match (op, s.is_signed()) {
                    (BinaryOp::Shl, _) => O::Shl,
                    (_, true) => O::AShr,
                    _ => O::LShr,
                };
                self.binop(opc, a, amt)?
            }
            _ => return self.err(codes::INPUT, "an operator on the wrong types"),
        })
    }

    /// Integer division and remainder that never trap. `MIN / -1` wraps to `MIN` and
    /// `MIN % -1` is 0 (docs/semantics.md); division by zero is UB there, which the
    /// interpreter reports, and here gives `x / 0 = 0` and `x % 0 = x` rather than a fault.
    fn int_div(
        &self,
        div: bool,
        s: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let t = a.get_type();
        let zero = t.const_zero();
        let one = self.const_int(t, 1, false);
        let is_zero = self.icmp(IntPredicate::EQ, b, zero)?;
        let mut bad = is_zero;
        if s.is_signed() {
            // MIN / -1 overflows: divide by 1 instead (MIN / 1 = MIN = the wrapped quotient;
            // MIN % 1 = 0 = the remainder).
            let min = self.const_int(t, 1u64 << (s.bits() - 1), false);
            let m1 = self.const_int(t, u64::MAX, true);
            let a_min = self.icmp(IntPredicate::EQ, a, min)?;
            let b_m1 = self.icmp(IntPredicate::EQ, b, m1)?;
            let ovf = self.binop(O::And, a_min, b_m1)?;
            bad = self.binop(O::Or, is_zero, ovf)?;
        }
        let safe_b = self.select(bad, one, b)?;
        let q = match (div, s.is_signed()) {
            (true, true) => self.binop(O::SDiv, a, safe_b)?,
            (true, false) => self.binop(O::UDiv, a, safe_b)?,
            (false, true) => self.binop(O::SRem, a, safe_b)?,
            (false, false) => self.binop(O::URem, a, safe_b)?,
        };
        // By zero: quotient 0, remainder the dividend.
        let by_zero = if div { zero } else { a };
        self.select(is_zero, by_zero, q)
    }

    fn short_circuit(
        &mut self,
        and: bool,
        lhs: ExprId,
        rhs: ExprId,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let a = self.value(lhs)?.into_int_value();
        let lhs_bb = self.b().get_insert_block().expect("positioned");
        let rhs_bb = ctx.append_basic_block(self.llfn, if and { "and.rhs" } else { "or.rhs" });
        let merge = ctx.append_basic_block(self.llfn, "sc.end");
        if and {
            self.b().build_conditional_branch(a, rhs_bb, merge)?;
        } else {
            self.b().build_conditional_branch(a, merge, rhs_bb)?;
        }
        self.b().position_at_end(rhs_bb);
        let b = self.value(rhs)?.into_int_value();
        let rhs_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(merge)?;
        self.b().position_at_end(merge);
        let phi = self.b().build_phi(ctx.bool_type(), "")?;
        let short = ctx.bool_type().const_int(!and as u64, false);
        phi.add_incoming(&[(&short, lhs_bb), (&b, rhs_end)]);
        Ok(phi.as_basic_value())
    }

    /// A value conversion (docs/semantics.md): integers truncate or extend by the source's
    /// signedness, floats → integers saturate with NaN → 0, `bool` is 0 or 1, a number → `bool`
    /// is `!= 0`.
    fn cast(
        &self,
        a: BasicValueEnum<'ctx>,
        from: Type,
        to: Scalar,
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let Some(fs) = from.scalar() else {
            return self.err(codes::INPUT, "a cast of a non-number");
        };
        let lanes = from.lanes().unwrap_or(1) as u32;
        let st = scalar_type(self.cx, to);
        let tt = if lanes > 1 { vector_of(st, lanes) } else { st };
        if fs == to {
            return Ok(a);
        }
        Ok(match (fs, to) {
            (_, Scalar::Bool) => {
                let z = a.get_type().const_zero();
                if fs.is_float() {
                    self.fcmp(inkwell::FloatPredicate::UNE, a, z)?
                } else {
                    self.icmp(IntPredicate::NE, a, z)?
                }
            }
            (Scalar::Bool, t) if t.is_float() => self.b().build_cast(O::UIToFP, a, tt, "")?,
            (Scalar::Bool, _) => self.b().build_cast(O::ZExt, a, tt, "")?,
            (f, t) if f.is_int() && t.is_int() => {
                let op = if t.bits() < f.bits() {
                    O::Trunc
                } else if t.bits() == f.bits() {
                    return Ok(a);
                } else if f.is_signed() {
                    O::SExt
                } else {
                    O::ZExt
                };
                self.b().build_cast(op, a, tt, "")?
            }
            (f, t) if f.is_int() && t.is_float() => {
                self.b()
                    .build_cast(if f.is_signed() { O::SIToFP } else { O::UIToFP }, a, tt, "")?
            }
            (f, t) if f.is_float() && t.is_int() => {
                let name = if t.is_signed() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                self.cx.call_value(name, &[tt, a.get_type()], &[a])?
            }
            (f, t) => {
                let op = if t.bits() > f.bits() {
                    O::FPExt
                } else {
                    O::FPTrunc
                };
                self.b().build_cast(op, a, tt, "")?
            }
        })
    }

    fn dispatch(
        &mut self,
        tag: ExprId,
        args: Vec<ExprId>,
        e: ExprId,
    ) -> LResult<Option<BasicValueEnum<'ctx>>> {
        let Type::Tag(set) = self.ty(tag)? else {
            return self.err(codes::INPUT, "a dispatch through a non-tag");
        };
        let t = self.value(tag)?.into_int_value();
        let mut vals: Vec<BasicMetadataValueEnum> = Vec::new();
        for a in args {
            vals.push(self.value(a)?.into());
        }
        let members = match self.module.tag_sets.try_get(set) {
            Some(ts) => ts.members.clone(),
            None => return self.err(codes::INPUT, "a dangling tag set"),
        };
        let ret = self.types.get(e.index()).copied().flatten();
        let slot = match ret {
            Some(rt) => {
                let ty = self.vt(rt)?;
                let s = self.entry_alloca(ty, "dispatch")?;
                self.b().build_store(s, ty.const_zero())?;
                Some((s, ty))
            }
            None => None,
        };
        let ctx = self.cx.context;
        let end = ctx.append_basic_block(self.llfn, "dispatch.end");
        let mut cases = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let Some(&callee) = self.helpers.get(m) else {
                return self.err(codes::INPUT, "a tag member that is not a device helper");
            };
            let bb = ctx.append_basic_block(self.llfn, "dispatch.case");
            cases.push((self.cx.i32(i as u64), bb, callee));
        }
        let switch_cases: Vec<_> = cases.iter().map(|(v, bb, _)| (*v, *bb)).collect();
        self.b().build_switch(t, end, &switch_cases)?;
        for (_, bb, callee) in cases {
            self.b().position_at_end(bb);
            let call = self.b().build_call(callee, &vals, "")?;
            if let (Some((s, _)), Some(v)) = (slot, call.try_as_basic_value().basic()) {
                self.b().build_store(s, v)?;
            }
            self.b().build_unconditional_branch(end)?;
        }
        self.b().position_at_end(end);
        match slot {
            Some((s, ty)) => Ok(Some(self.b().build_load(ty, s, "")?)),
            None => Ok(None),
        }
    }

    // ---- math -------------------------------------------------------------------------

    fn math(
        &self,
        fun: MathFn,
        ty: Type,
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        let Some(s) = ty.scalar() else {
            return self.err(codes::INPUT, "math on a non-number");
        };
        // Integer min/max/abs/clamp work on whole vectors.
        if !s.is_float() {
            return self.int_math(fun, s, args);
        }
        match ty {
            Type::Vector(_, n) => {
                let vt = self.vt(ty)?.into_vector_type();
                let mut out = vt.get_undef();
                for k in 0..n as u64 {
                    let lane: Vec<BasicValueEnum> = args
                        .iter()
                        .map(|a| {
                            self.b().build_extract_element(
                                a.into_vector_value(),
                                self.cx.i32(k),
                                "",
                            )
                        })
                        .collect::<Result<_, _>>()?;
                    let r = self.float_math(fun, s, &lane)?;
                    out = self.b().build_insert_element(out, r, self.cx.i32(k), "")?;
                }
                Ok(out.into())
            }
            _ => self.float_math(fun, s, args),
        }
    }

    fn int_math(
        &self,
        fun: MathFn,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        let t = args[0].get_type();
        let sg = s.is_signed();
        let min = |a, b| {
            self.cx
                .call_value(if sg { "llvm.smin" } else { "llvm.umin" }, &[t], &[a, b])
        };
        let max = |a, b| {
            self.cx
                .call_value(if sg { "llvm.smax" } else { "llvm.umax" }, &[t], &[a, b])
        };
        match fun {
            MathFn::Min => min(args[0], args[1]),
            MathFn::Max => max(args[0], args[1]),
            MathFn::Clamp => {
                let m = max(args[0], args[1])?;
                min(m, args[2])
            }
            MathFn::Abs if sg => {
                // abs(MIN) wraps to MIN.
                let f = self.cx.context.bool_type().const_zero();
                self.cx.call_value("llvm.abs", &[t], &[args[0], f.into()])
            }
            MathFn::Abs => Ok(args[0]),
            _ => self.err(codes::INPUT, format!("`{}` of an integer", fun.name())),
        }
    }

    /// One float math function on scalars of type `s`.
    fn float_math(
        &self,
        fun: MathFn,
        s: Scalar,
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        if s == Scalar::F16 && !matches!(fun, MathFn::Abs | MathFn::Min | MathFn::Max) {
            // Compute in f32 and round once to f16.
            let f32t = self.cx.context.f32_type();
            let wide: Vec<BasicValueEnum> = args
                .iter()
                .map(|a| self.b().build_cast(O::FPExt, *a, f32t, ""))
                .collect::<Result<_, _>>()?;
            let r = self.float_math(fun, Scalar::F32, &wide)?;
            return Ok(self
                .b()
                .build_cast(O::FPTrunc, r, self.cx.context.f16_type(), "")?);
        }
        let t = args[0].get_type();
        let one = |name: &str| self.cx.call_value(name, &[t], &[args[0]]);
        match fun {
            MathFn::Sqrt => one("llvm.sqrt"),
            MathFn::Rsqrt => self.rsqrt(s, args[0]),
            MathFn::Fma => self.cx.call_value("llvm.fma", &[t], args),
            MathFn::Min => self.cx.call_value("llvm.minnum", &[t], &[args[0], args[1]]),
            MathFn::Max => self.cx.call_value("llvm.maxnum", &[t], &[args[0], args[1]]),
            MathFn::Clamp => {
                let m = self
                    .cx
                    .call_value("llvm.maxnum", &[t], &[args[0], args[1]])?;
                self.cx.call_value("llvm.minnum", &[t], &[m, args[2]])
            }
            MathFn::Abs => one("llvm.fabs"),
            MathFn::Floor => one("llvm.floor"),
            MathFn::Ceil => one("llvm.ceil"),
            MathFn::Trunc => one("llvm.trunc"),
            MathFn::Round => one("llvm.round"),
            MathFn::Exp
            | MathFn::Exp2
            | MathFn::Log
            | MathFn::Log2
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Tanh
            | MathFn::Pow => self.transcendental(fun, s, args),
        }
    }

    // ---- atomics ----------------------------------------------------------------------

    fn atomic(
        &mut self,
        op: AtomicOp,
        order: MemoryOrder,
        place: &Place,
        value: ExprId,
        compare: Option<ExprId>,
        e: ExprId,
    ) -> LResult<BasicValueEnum<'ctx>> {
        use llvm_sys::LLVMAtomicRMWBinOp as R;
        let Place::Element { base, index } = place else {
            return self.err(
                codes::INPUT,
                "an atomic on something other than a buffer or shared element",
            );
        };
        if matches!(base, Base::Local(_)) {
            return self.err(codes::INPUT, "an atomic on a private array");
        }
        let (ptr, elem) = self.element_ptr(*base, *index)?;
        let cmp = match compare {
            Some(c) => Some(self.value(c)?),
            None => None,
        };
        let v = self.value(value)?;
        let s = self.ty(e)?.scalar().unwrap_or(elem.scalar);
        let scope = if matches!(base, Base::Shared(_)) {
            FenceScope::Workgroup
        } else {
            FenceScope::Device
        };
        // Orders are fences around a relaxed read-modify-write at the element's scope:
        // release before, acquire after (LLVM 19's C API cannot set a sync scope).
        if matches!(
            order,
            MemoryOrder::Release | MemoryOrder::AcqRel | MemoryOrder::SeqCst
        ) {
            self.t.fence(self.cx, scope)?;
        }
        let mono = llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic;
        let out: BasicValueEnum = if op == AtomicOp::CompareExchange {
            let Some(cmp) = cmp else {
                return self.err(codes::INPUT, "compare-exchange without an expected value");
            };
            // SAFETY: ptr points to an element of the value's type; orders are valid.
            let pair = unsafe {
                llvm_sys::core::LLVMBuildAtomicCmpXchg(
                    self.b().as_mut_ptr(),
                    ptr.as_value_ref(),
                    cmp.as_value_ref(),
                    v.as_value_ref(),
                    mono,
                    mono,
                    0,
                )
            };
            // SAFETY: cmpxchg yields {T, i1}; field 0 is the old value.
            unsafe {
                BasicValueEnum::new(llvm_sys::core::LLVMBuildExtractValue(
                    self.b().as_mut_ptr(),
                    pair,
                    0,
                    c"".as_ptr(),
                ))
            }
        } else {
            let f = s.is_float();
            let sg = s.is_signed();
            let rop = match op {
                AtomicOp::Add if f => R::LLVMAtomicRMWBinOpFAdd,
                AtomicOp::Add => R::LLVMAtomicRMWBinOpAdd,
                AtomicOp::Sub if f => R::LLVMAtomicRMWBinOpFSub,
                AtomicOp::Sub => R::LLVMAtomicRMWBinOpSub,
                AtomicOp::Min if f => R::LLVMAtomicRMWBinOpFMin,
                AtomicOp::Min if sg => R::LLVMAtomicRMWBinOpMin,
                AtomicOp::Min => R::LLVMAtomicRMWBinOpUMin,
                AtomicOp::Max if f => R::LLVMAtomicRMWBinOpFMax,
                AtomicOp::Max if sg => R::LLVMAtomicRMWBinOpMax,
                AtomicOp::Max => R::LLVMAtomicRMWBinOpUMax,
                AtomicOp::And => R::LLVMAtomicRMWBinOpAnd,
                AtomicOp::Or => R::LLVMAtomicRMWBinOpOr,
                AtomicOp::Xor => R::LLVMAtomicRMWBinOpXor,
                AtomicOp::Exchange => R::LLVMAtomicRMWBinOpXchg,
                AtomicOp::CompareExchange => unreachable!("handled above"),
            };
            // SAFETY: ptr points to an element of v's type; the op suits the type.
            unsafe {
                BasicValueEnum::new(llvm_sys::core::LLVMBuildAtomicRMW(
                    self.b().as_mut_ptr(),
                    rop,
                    ptr.as_value_ref(),
                    v.as_value_ref(),
                    mono,
                    0,
                ))
            }
        };
        if matches!(
            order,
            MemoryOrder::Acquire | MemoryOrder::AcqRel | MemoryOrder::SeqCst
        ) {
            self.t.fence(self.cx, scope)?;
        }
        Ok(out)
    }

    // ---- waves ------------------------------------------------------------------------

    /// Exchanges any scalar or vector value through the target's 32-bit exchange.
    fn exchange_value(
        &self,
        kind: Exchange,
        mask: IntValue<'ctx>,
        v: BasicValueEnum<'ctx>,
        arg: IntValue<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.cx.context;
        let i32t = ctx.i32_type();
        match v {
            BasicValueEnum::VectorValue(vv) => {
                let mut out = vv.get_type().get_undef();
                for k in 0..vv.get_type().get_size() as u64 {
                    let x = self.b().build_extract_element(vv, self.cx.i32(k), "")?;
                    let y = self.exchange_value(kind, mask, x, arg)?;
                    out = self.b().build_insert_element(out, y, self.cx.i32(k), "")?;
                }
                Ok(out.into())
            }
            BasicValueEnum::IntValue(iv) => {
                let bits = iv.get_type().get_bit_width();
                if bits == 32 {
                    return Ok(self.t.exchange(self.cx, kind, mask, iv, arg)?.into());
                }
                if bits < 32 {
                    let w = self.b().build_int_z_extend(iv, i32t, "")?;
                    let r = self.t.exchange(self.cx, kind, mask, w, arg)?;
                    return Ok(self.b().build_int_truncate(r, iv.get_type(), "")?.into());
                }
                // 64 bits: two halves.
                let lo = self.b().build_int_truncate(iv, i32t, "")?;
                let hi = self.b().build_right_shift(
                    iv,
                    iv.get_type().const_int(32, false),
                    false,
                    "",
                )?;
                let hi = self.b().build_int_truncate(hi, i32t, "")?;
                let lo = self.t.exchange(self.cx, kind, mask, lo, arg)?;
                let hi = self.t.exchange(self.cx, kind, mask, hi, arg)?;
                let lo = self.b().build_int_z_extend(lo, iv.get_type(), "")?;
                let hi = self.b().build_int_z_extend(hi, iv.get_type(), "")?;
                let hi = self
                    .b()
                    .build_left_shift(hi, iv.get_type().const_int(32, false), "")?;
                Ok(self.b().build_or(lo, hi, "")?.into())
            }
            BasicValueEnum::FloatValue(fv) => {
                let bits = fv.get_type().get_bit_width();
                let it = match bits {
                    16 => ctx.i16_type(),
                    32 => ctx.i32_type(),
                    _ => ctx.i64_type(),
                };
                let i = self.b().build_cast(O::BitCast, v, it, "")?;
                let r = self.exchange_value(kind, mask, i, arg)?;
                Ok(self.b().build_cast(O::BitCast, r, fv.get_type(), "")?)
            }
            _ => self.err(codes::UNSUPPORTED, "a wave exchange of this type"),
        }
    }

    fn reduce_identity(
        &self,
        op: ReduceOp,
        s: Scalar,
        ty: BasicTypeEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        if s.is_float() {
            return match op {
                ReduceOp::Min => self.const_float(ty, f64::INFINITY),
                ReduceOp::Max => self.const_float(ty, f64::NEG_INFINITY),
                _ => self.const_float(ty, 0.0),
            };
        }
        let bits = s.bits();
        let all = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let v = match op {
            ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor => 0,
            ReduceOp::And => all,
            ReduceOp::Min if s.is_signed() => all >> 1,
            ReduceOp::Min => all,
            ReduceOp::Max if s.is_signed() => 1u64 << (bits - 1),
            ReduceOp::Max => 0,
        };
        self.const_int(ty, v, false)
    }

    fn combine(
        &self,
        op: ReduceOp,
        s: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let t = a.get_type();
        let f = s.is_float();
        match op {
            ReduceOp::Sum => self.binop(if f { O::FAdd } else { O::Add }, a, b),
            ReduceOp::And => self.binop(O::And, a, b),
            ReduceOp::Or => self.binop(O::Or, a, b),
            ReduceOp::Xor => self.binop(O::Xor, a, b),
            ReduceOp::Min | ReduceOp::Max => {
                let name = match (op == ReduceOp::Min, f, s.is_signed()) {
                    (true, true, _) => "llvm.minnum",
                    (false, true, _) => "llvm.maxnum",
                    (true, false, true) => "llvm.smin",
                    (false, false, true) => "llvm.smax",
                    (true, false, false) => "llvm.umin",
                    (false, false, false) => "llvm.umax",
                };
                let m = self.cx.call_value(name, &[t], &[a, b])?;
                if !f {
                    return Ok(m);
                }
                // The interpreter orders -0 < +0; `minnum`/`maxnum` may return either zero
                // for two zeros. Two equal operands differ only in a zero's sign, so OR-ing
                // their bits gives min's answer (-0 if either is) and AND-ing gives max's.
                let int_of = |bits: u32| match bits {
                    16 => self.cx.context.i16_type(),
                    32 => self.cx.context.i32_type(),
                    _ => self.cx.context.i64_type(),
                };
                let it: BasicTypeEnum = match t {
                    BasicTypeEnum::VectorType(v) => {
                        let bits = v.get_element_type().into_float_type().get_bit_width();
                        int_of(bits).vec_type(v.get_size()).into()
                    }
                    _ => int_of(t.into_float_type().get_bit_width()).into(),
                };
                let ai = self.b().build_cast(O::BitCast, a, it, "")?;
                let bi = self.b().build_cast(O::BitCast, b, it, "")?;
                let z = self.binop(if op == ReduceOp::Min { O::Or } else { O::And }, ai, bi)?;
                let z = self.b().build_cast(O::BitCast, z, t, "")?;
                let eq = self.fcmp(inkwell::FloatPredicate::OEQ, a, b)?;
                self.select(eq, z, m)
            }
        }
    }

    fn full_mask(&self) -> IntValue<'ctx> {
        let w = self.t.wave_width();
        self.cx
            .i64(if w >= 64 { u64::MAX } else { (1u64 << w) - 1 })
    }

    fn wave(
        &mut self,
        op: WaveOp,
        ty: Option<Type>,
        args: &[BasicValueEnum<'ctx>],
    ) -> LResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.cx.context;
        let mask = self.t.active_mask(self.cx)?;
        let w = self.t.wave_width() as u64;
        let lane = || self.t.coord(self.cx, Coord::LaneId);
        Ok(match op {
            WaveOp::Broadcast | WaveOp::Shuffle => {
                self.exchange_value(Exchange::Index, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleXor => {
                self.exchange_value(Exchange::Xor, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleUp => {
                self.exchange_value(Exchange::Up, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::ShuffleDown => {
                self.exchange_value(Exchange::Down, mask, args[0], args[1].into_int_value())?
            }
            WaveOp::Rotate => {
                let l = lane()?;
                let s = self.b().build_int_add(l, args[1].into_int_value(), "")?;
                let src = self.b().build_int_unsigned_rem(s, self.cx.i32(w), "")?;
                self.exchange_value(Exchange::Index, mask, args[0], src)?
            }
            WaveOp::Ballot => self
                .t
                .ballot(self.cx, mask, args[0].into_int_value())?
                .into(),
            WaveOp::Any => {
                let b = self.t.ballot(self.cx, mask, args[0].into_int_value())?;
                self.b()
                    .build_int_compare(IntPredicate::NE, b, self.cx.i64(0), "")?
                    .into()
            }
            WaveOp::All => {
                let b = self.t.ballot(self.cx, mask, args[0].into_int_value())?;
                self.b()
                    .build_int_compare(IntPredicate::EQ, b, mask, "")?
                    .into()
            }
            WaveOp::Elect => {
                let first = self.cx.call_value(
                    "llvm.cttz",
                    &[ctx.i64_type().into()],
                    &[mask.into(), ctx.bool_type().const_zero().into()],
                )?;
                let l = self.b().build_int_z_extend(lane()?, ctx.i64_type(), "")?;
                self.b()
                    .build_int_compare(IntPredicate::EQ, l, first.into_int_value(), "")?
                    .into()
            }
            WaveOp::Reduce(r) | WaveOp::InclusiveScan(r) | WaveOp::ExclusiveScan(r) => {
                let Some(ty) = ty else {
                    return self.err(codes::INPUT, "a wave verb without a value");
                };
                let s = ty.scalar().unwrap_or(Scalar::Bool);
                let x = args[0];
                let scan = match op {
                    WaveOp::Reduce(_) => None,
                    WaveOp::InclusiveScan(_) => Some(true),
                    _ => Some(false),
                };
                if scan.is_none() && ty.lanes() == Some(1) && s.bits() == 32 && s.is_int() {
                    if let Some(v) =
                        self.t
                            .native_reduce(self.cx, r, s, mask, x.into_int_value())?
                    {
                        return Ok(v.into());
                    }
                }
                // bool reductions go through i32 (and/or/xor are the only ones that type).
                if s == Scalar::Bool {
                    let i32t: BasicTypeEnum = match ty {
                        Type::Vector(_, n) => ctx.i32_type().vec_type(n as u32).into(),
                        _ => ctx.i32_type().into(),
                    };
                    let xi = self.b().build_cast(O::ZExt, x, i32t, "")?;
                    let r32 = self.wave(
                        op,
                        Some(match ty {
                            Type::Vector(_, n) => Type::Vector(Scalar::U32, n),
                            _ => Type::U32,
                        }),
                        &[xi],
                    )?;
                    let z = r32.get_type().const_zero();
                    return self.icmp(IntPredicate::NE, r32, z);
                }
                self.wave_collective(r, s, scan, mask, x)?
            }
        })
    }

    /// A reduction (`scan == None`) or an inclusive/exclusive scan over the active lanes:
    /// a butterfly or Kogge–Stone tree when the whole wave is active, and a loop over the
    /// lanes of the mask otherwise (correct for any active set).
    fn wave_collective(
        &mut self,
        r: ReduceOp,
        s: Scalar,
        scan: Option<bool>,
        mask: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
    ) -> LResult<BasicValueEnum<'ctx>> {
        let ctx = self.cx.context;
        let w = self.t.wave_width() as u64;
        let ty = x.get_type();
        let ident = self.reduce_identity(r, s, ty);
        let lane = self.t.coord(self.cx, Coord::LaneId)?;
        let full_bb = ctx.append_basic_block(self.llfn, "wave.full");
        let part_bb = ctx.append_basic_block(self.llfn, "wave.partial");
        let end_bb = ctx.append_basic_block(self.llfn, "wave.end");
        let full = self
            .b()
            .build_int_compare(IntPredicate::EQ, mask, self.full_mask(), "")?;
        self.b().build_conditional_branch(full, full_bb, part_bb)?;

        // Whole wave.
        self.b().position_at_end(full_bb);
        let full_v = match scan {
            None => {
                let mut v = x;
                let mut off = w / 2;
                while off >= 1 {
                    let o = self.exchange_value(Exchange::Xor, mask, v, self.cx.i32(off))?;
                    v = self.combine(r, s, v, o)?;
                    off /= 2;
                }
                v
            }
            Some(inclusive) => {
                let mut v = x;
                let mut off = 1;
                while off < w {
                    let o = self.exchange_value(Exchange::Up, mask, v, self.cx.i32(off))?;
                    let c = self.combine(r, s, v, o)?;
                    let has = self.b().build_int_compare(
                        IntPredicate::UGE,
                        lane,
                        self.cx.i32(off),
                        "",
                    )?;
                    v = self.select(has.into(), c, v)?;
                    off *= 2;
                }
                if inclusive {
                    v
                } else {
                    let prev = self.exchange_value(Exchange::Up, mask, v, self.cx.i32(1))?;
                    let first =
                        self.b()
                            .build_int_compare(IntPredicate::EQ, lane, self.cx.i32(0), "")?;
                    self.select(first.into(), ident, prev)?
                }
            }
        };
        let full_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        // Some lanes inactive: visit every lane of the mask in order.
        self.b().position_at_end(part_bb);
        let acc = self.entry_alloca(ty, "wave.acc")?;
        let idx = self.entry_alloca(ctx.i32_type().into(), "wave.lane")?;
        let started = self.entry_alloca(ctx.bool_type().into(), "wave.started")?;
        self.b().build_store(acc, ident)?;
        self.b().build_store(idx, self.cx.i32(0))?;
        self.b()
            .build_store(started, ctx.bool_type().const_zero())?;
        let head = ctx.append_basic_block(self.llfn, "wave.loop");
        let done = ctx.append_basic_block(self.llfn, "wave.loopend");
        self.b().build_unconditional_branch(head)?;
        self.b().position_at_end(head);
        let l = self
            .b()
            .build_load(ctx.i32_type(), idx, "")?
            .into_int_value();
        let v = self.exchange_value(Exchange::Index, mask, x, l)?;
        let l64 = self.b().build_int_z_extend(l, ctx.i64_type(), "")?;
        let bit = self.b().build_right_shift(mask, l64, false, "")?;
        let bit = self.b().build_and(bit, self.cx.i64(1), "")?;
        let mut take = self
            .b()
            .build_int_compare(IntPredicate::NE, bit, self.cx.i64(0), "")?;
        if let Some(inclusive) = scan {
            let p = if inclusive {
                IntPredicate::ULE
            } else {
                IntPredicate::ULT
            };
            let before = self.b().build_int_compare(p, l, lane, "")?;
            take = self.b().build_and(take, before, "")?;
        }
        // The first taken lane's value starts the fold (as in the interpreter), so a lone
        // NaN survives a min/max and a lone -0.0 a sum; no lane taken leaves the identity,
        // an exclusive scan's answer in the first active lane.
        let cur = self.b().build_load(ty, acc, "")?;
        let was = self
            .b()
            .build_load(ctx.bool_type(), started, "")?
            .into_int_value();
        let comb = self.combine(r, s, cur, v)?;
        let comb = self.select(was.into(), comb, v)?;
        let next = self.select(take.into(), comb, cur)?;
        self.b().build_store(acc, next)?;
        let now = self.b().build_or(was, take, "")?;
        self.b().build_store(started, now)?;
        let l1 = self.b().build_int_add(l, self.cx.i32(1), "")?;
        self.b().build_store(idx, l1)?;
        let more = self
            .b()
            .build_int_compare(IntPredicate::ULT, l1, self.cx.i32(w), "")?;
        self.b().build_conditional_branch(more, head, done)?;
        self.b().position_at_end(done);
        let part_v = self.b().build_load(ty, acc, "")?;
        let part_end = self.b().get_insert_block().expect("positioned");
        self.b().build_unconditional_branch(end_bb)?;

        self.b().position_at_end(end_bb);
        let phi = self.b().build_phi(ty, "")?;
        phi.add_incoming(&[(&full_v, full_end), (&part_v, part_end)]);
        Ok(phi.as_basic_value())
    }
}

/// Bit width of an integer or integer-vector type's lanes.
trait IntBits {
    fn into_int_type_or_vector_bits(self) -> u32;
}

impl IntBits for BasicTypeEnum<'_> {
    fn into_int_type_or_vector_bits(self) -> u32 {
        match self {
            BasicTypeEnum::IntType(t) => t.get_bit_width(),
            BasicTypeEnum::VectorType(v) => v.get_element_type().into_int_type().get_bit_width(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Access, FunctionKind, Module, Param};

    /// saxpy and a wave sum, built by hand (the text parser is tested elsewhere).
    fn module() -> ir::Module {
        let mut m = Module::new();
        let mut f = Function::new("saxpy", FunctionKind::Kernel);
        let buf = |access| Type::Buffer {
            elem: ElemType::scalar(Scalar::F32),
            access,
        };
        for (n, t) in [
            ("y", buf(Access::ReadWrite)),
            ("x", buf(Access::Read)),
            ("a", Type::F32),
            ("n", Type::U32),
        ] {
            f.params.push(Param {
                name: n.into(),
                ty: t,
                span: Span::UNKNOWN,
            });
        }
        let i = f.locals.append(ir::Local {
            name: "i".into(),
            ty: Type::U32,
            span: Span::UNKNOWN,
        });
        let s = Span::UNKNOWN;
        let gid = f.add_expr(Expr::Builtin(Builtin::GlobalId(ir::Dim::X)), s);
        let li = f.add_expr(Expr::Local(i), s);
        let n = f.add_expr(Expr::Param(3), s);
        let cond = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Lt,
                lhs: li,
                rhs: n,
            },
            s,
        );
        let a = f.add_expr(Expr::Param(2), s);
        let li2 = f.add_expr(Expr::Local(i), s);
        let xi = f.add_expr(
            Expr::Index {
                base: Base::Param(1),
                index: li2,
            },
            s,
        );
        let ax = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Mul,
                lhs: a,
                rhs: xi,
            },
            s,
        );
        let li3 = f.add_expr(Expr::Local(i), s);
        let yi = f.add_expr(
            Expr::Index {
                base: Base::Param(0),
                index: li3,
            },
            s,
        );
        let sum = f.add_expr(
            Expr::Binary {
                op: BinaryOp::Add,
                lhs: ax,
                rhs: yi,
            },
            s,
        );
        let red = f.add_expr(
            Expr::Wave {
                op: WaveOp::Reduce(ReduceOp::Sum),
                args: vec![sum],
            },
            s,
        );
        let li4 = f.add_expr(Expr::Local(i), s);
        f.body = vec![
            Stmt {
                kind: StmtKind::Let {
                    local: i,
                    init: Some(gid),
                },
                span: s,
            },
            Stmt {
                kind: StmtKind::If {
                    cond,
                    then_block: vec![Stmt {
                        kind: StmtKind::Assign {
                            place: Place::Element {
                                base: Base::Param(0),
                                index: li4,
                            },
                            value: red,
                        },
                        span: s,
                    }],
                    else_block: vec![],
                },
                span: s,
            },
        ];
        m.functions.append(f);
        m
    }

    #[test]
    fn lowers_saxpy_to_ptx() {
        let m = module();
        let refs = kernel_refs(&m);
        let t = nvptx::Nvptx::new(90);
        let out = lower(&m, &refs, &t, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let ptx = out.text();
        if crate::config::get().show_ptx == Ok(true) {
            eprintln!("{ptx}");
        }
        assert!(ptx.contains(".entry saxpy"), "{ptx}");
        assert!(ptx.contains("shfl.sync.bfly"), "{ptx}");
        assert_eq!(out.kernels[0].params.len(), 4);
        if let Ok(r) = crate::codegen::llvm::ptxas::assemble(&ptx, "sm_90") {
            assert_eq!(r.functions[0].name, "saxpy");
            assert!(r.functions[0].registers.is_some());
        }
    }
}
