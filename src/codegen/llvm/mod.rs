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
//! is replaced before the instruction, see `FunctionContext::int_div`); float → int casts saturate (`llvm.fpto[su]i.sat`,
//! NaN → 0); float `min`/`max` return the other operand when one is NaN (`llvm.minnum`).
//! Transcendental functions are built from arithmetic in `f64` (`math.rs`), within the
//! accuracy `docs/semantics.md` requires of native backends.

pub mod amdgpu;
mod atomic;
mod atomic_access;
mod bits;
mod checked;
#[cfg(feature = "hip")]
pub mod codeobj;
mod expr;
mod math;
mod matrix;
pub use matrix::{MatrixOp, TIER_DISTRIBUTED, TIER_NATIVE, TIER_REPLICATED};
mod matrix_dist;
mod memory;
pub mod nvptx;
mod print;
pub use print::DEBUG_SYMBOL;
pub mod ptxas;
mod stmt;
pub mod target;
mod wave;

use crate::codegen::checks::{CheckSite, Checks};
use crate::ir::{
    self, AtomicOp, Base, BinaryOp, BitOp, Builtin, ConstExpr, ElemType, Expr, ExprId, FenceScope,
    Function, Handle, Len, Literal, LoopKind, MathFn, MemoryOrder, Place, ReduceOp, Scalar, Span,
    Stmt, StmtKind, Type, UnaryOp, VerifiedModule, WaveOp,
};
pub use checked::REPORT_SYMBOL;
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
use target::{Coord, Exchange, KernelBounds, LoweringTarget};

pub use crate::codegen::{codes, Error};

impl From<BuilderError> for Error {
    fn from(e: BuilderError) -> Self {
        Error::internal(format!("LLVM builder: {e}"))
    }
}

pub type LowerResult<T> = Result<T, Error>;

fn unsupported<T>(message: impl Into<String>) -> LowerResult<T> {
    Err(Error::new(codes::UNSUPPORTED, message))
}

fn internal<T>(message: impl Into<String>) -> LowerResult<T> {
    Err(Error::new(codes::INTERNAL, message))
}

/// The emission context a target's hooks write into.
pub struct ModuleContext<'ctx> {
    pub context: &'ctx Context,
    pub module: Module<'ctx>,
    pub builder: Builder<'ctx>,
    /// Every cooperative-matrix fragment takes the portable software tier (`matrix.rs`),
    /// because some fragment type of the module has no native lowering on this target.
    pub software_matrices: std::cell::Cell<bool>,
    /// The software tier's tiles are distributed over the wave's lanes (`matrix_dist.rs`),
    /// not replicated: [`Options::matrix_dist`], when `software_matrices` holds.
    pub distributed_matrices: std::cell::Cell<bool>,
    /// The cooperative-matrix operations lowered so far and their tiers.
    pub matrix_ops: std::cell::RefCell<Vec<MatrixOp>>,
    /// What the code tests at run time (checked mode, ub-traps: `checked`).
    pub checks: Checks,
    /// The check sites emitted so far, module-wide (a report names one by index).
    pub sites: std::cell::RefCell<Vec<CheckSite>>,
    /// The `print`/`assert` sites emitted so far, module-wide (a record names one by index).
    pub debug_sites: std::cell::RefCell<Vec<crate::ir::debug::DebugSite>>,
}

impl<'ctx> ModuleContext<'ctx> {
    /// The declaration of LLVM intrinsic `name`, overloaded on `types` (empty when not).
    pub fn intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
    ) -> LowerResult<FunctionValue<'ctx>> {
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
    ) -> LowerResult<Option<BasicValueEnum<'ctx>>> {
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
    ) -> LowerResult<BasicValueEnum<'ctx>> {
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
    /// The code writes the report global ([`checked::REPORT_SYMBOL`]): the launch clears it
    /// before and reads it after.
    pub report: bool,
    /// The check sites the report names by index (the module's, shared by its kernels).
    pub sites: Vec<CheckSite>,
    /// The code writes the debug buffer global ([`DEBUG_SYMBOL`], `print` and `assert`): the
    /// launch clears its cursors before and reads its records after.
    pub debug: bool,
    /// The `print`/`assert` sites the records name by index (the module's).
    pub debug_sites: Vec<crate::ir::debug::DebugSite>,
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
    /// Checked mode and ub-traps (`crate::codegen::checks`); none by default.
    pub checks: Checks,
    /// The software tier of cooperative matrices distributes a tile over the wave's lanes
    /// (the default, contract §3.3); `false` (`CAJETA_GPU_MATRIX_DIST=off`) replicates it in
    /// every lane, the control.
    pub matrix_dist: bool,
    /// The cooperative-matrix tier forced (`CAJETA_GPU_MATRIX_IMPL`); `None` picks native
    /// where every fragment of the module has a native lowering, software otherwise.
    pub matrix_impl: Option<crate::config::ForcedTier>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            opt_level: 3,
            keep_llvm_ir: false,
            checks: Checks::default(),
            matrix_dist: true,
            matrix_impl: None,
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
    /// Every distinct cooperative-matrix operation of the code, with its instruction and tier
    /// (contract §3.3, §4).
    pub matrix_ops: Vec<MatrixOp>,
}

impl Lowered {
    /// The code as text (PTX is ASCII).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.code).into_owned()
    }
}

/// A stable version of this lowering; part of every code-cache key, so that a change to the
/// walk or a target invalidates cached device code. Bump it with any change to emitted code.
pub const LOWERING_VERSION: u32 = 2;

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
    vm: &VerifiedModule,
    kernels: &[KernelRef],
    target: &dyn LoweringTarget,
    opts: &Options,
) -> LowerResult<Lowered> {
    // Shared-tile layouts are placed as declared (`ir::layout`).
    let laid = vm.with_layouts();
    let vm = laid.as_ref().unwrap_or(vm);
    let module = vm.module();
    init_targets();
    let context = Context::create();
    let cx = ModuleContext {
        context: &context,
        module: context.create_module("xpu"),
        builder: context.create_builder(),
        software_matrices: std::cell::Cell::new(false),
        distributed_matrices: std::cell::Cell::new(false),
        matrix_ops: std::cell::RefCell::new(Vec::new()),
        checks: opts.checks,
        sites: std::cell::RefCell::new(Vec::new()),
        debug_sites: std::cell::RefCell::new(Vec::new()),
    };
    let triple = TargetTriple::create(target.triple());
    cx.module.set_triple(&triple);
    let tm = Target::from_triple(&triple)
        .map_err(|e| {
            Error::new(
                codes::INTERNAL,
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
        .ok_or_else(|| Error::new(codes::INTERNAL, "cannot create the target machine"))?;
    cx.module
        .set_data_layout(&tm.get_target_data().get_data_layout());

    // Helpers reachable from the kernels, declared before any body so calls resolve.
    let mut reach = BTreeSet::new();
    for k in kernels {
        let Some(f) = module.functions.try_get(k.function) else {
            return Err(Error::new(codes::INPUT, "no such kernel"));
        };
        if !f.is_kernel() {
            return Err(Error::new(
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
    let software = matrix::needs_software(&cx, target, functions.clone());
    if software && opts.matrix_impl == Some(crate::config::ForcedTier::Native) {
        return Err(Error::new(
            codes::MATRIX_TIER,
            format!(
                "CAJETA_GPU_MATRIX_IMPL=native, but {}",
                matrix::first_software_reason(&cx, target, functions)
                    .unwrap_or_else(|| "a fragment has no native lowering".into())
            ),
        ));
    }
    cx.software_matrices
        .set(software || opts.matrix_impl == Some(crate::config::ForcedTier::Software));
    cx.distributed_matrices
        .set(cx.software_matrices.get() && opts.matrix_dist);
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
        lower_function(&cx, target, vm, h, &[], helpers[&h], &helpers, None)
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
                Error::new(
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
        let abi = lower_kernel(&cx, target, vm, k.function, args, &name, &symbol, &helpers)
            .map_err(|e| named(e, &name))?;
        abis.push(abi);
    }
    let report = cx.module.get_global(REPORT_SYMBOL).is_some();
    let debug = cx.module.get_global(DEBUG_SYMBOL).is_some();
    for abi in &mut abis {
        abi.report = report;
        abi.sites = cx.sites.borrow().clone();
        abi.debug = debug;
        abi.debug_sites = cx.debug_sites.borrow().clone();
    }

    if let Err(e) = cx.module.verify() {
        return internal(format!("LLVM rejected the module: {}", e.to_string()));
    }
    if opts.opt_level > 0 {
        let passes = format!("default<O{}>", opts.opt_level.min(3));
        cx.module
            .run_passes(&passes, &tm, PassBuilderOptions::create())
            .map_err(|e| Error::new(codes::INTERNAL, format!("LLVM passes: {}", e.to_string())))?;
    }
    let llvm_ir = opts
        .keep_llvm_ir
        .then(|| cx.module.print_to_string().to_string());
    let buf = tm
        .write_to_memory_buffer(&cx.module, target.file_type())
        .map_err(|e| {
            Error::new(
                codes::INTERNAL,
                format!("LLVM code generation: {}", e.to_string()),
            )
        })?;
    Ok(Lowered {
        code: target.finish(buf.as_slice().to_vec()),
        kernels: abis,
        cpu: target.cpu(),
        llvm_ir,
        matrix_ops: cx.matrix_ops.take(),
    })
}

fn named(e: Error, function: &str) -> Error {
    e.in_function(function)
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
fn scalar_type<'ctx>(cx: &ModuleContext<'ctx>, s: Scalar) -> BasicTypeEnum<'ctx> {
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
fn mem_scalar_type<'ctx>(cx: &ModuleContext<'ctx>, s: Scalar) -> BasicTypeEnum<'ctx> {
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
    cx: &ModuleContext<'ctx>,
    target: &dyn LoweringTarget,
    ty: Type,
) -> LowerResult<BasicTypeEnum<'ctx>> {
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
                let lanes = if cx.distributed_matrices.get() {
                    target.wave_width()
                } else {
                    1
                };
                matrix::software_type(cx, scalar, rows, cols, lanes)
            } else {
                target.matrix_type(cx, role, scalar, rows, cols)
            };
            match t {
                Ok(t) => t,
                Err(m) => return unsupported(m),
            }
        }
        Type::Buffer { .. } | Type::Array { .. } | Type::Shared { .. } => {
            return internal("a buffer or array is not a value")
        }
    })
}

fn helper_fn_type<'ctx>(
    cx: &ModuleContext<'ctx>,
    target: &dyn LoweringTarget,
    module: &ir::Module,
    f: &Function,
) -> LowerResult<inkwell::types::FunctionType<'ctx>> {
    let mut params: Vec<BasicMetadataTypeEnum> = Vec::new();
    for p in &f.params {
        params.push(value_type(cx, target, p.ty)?.into());
    }
    if takes_lane_mask(target, module, f) {
        params.push(cx.context.i64_type().into());
    }
    Ok(match f.ret {
        Some(t) => value_type(cx, target, t)?.fn_type(&params, false),
        None => cx.context.void_type().fn_type(&params, false),
    })
}

/// The value of a constant expression of `f` instanced with template arguments `args` (the
/// verifier's evaluator; `None` where it refuses, which the verifier has already reported).
fn const_eval(f: &Function, h: Handle<ConstExpr>, args: &[u32]) -> Option<u32> {
    ir::template::eval_const(f, h, Some(args)).ok()
}

fn len_of(f: &Function, len: Len, args: &[u32]) -> LowerResult<u32> {
    match len {
        Len::Fixed(n) => Ok(n),
        Len::Const(h) => match const_eval(f, h, args) {
            Some(n) => Ok(n),
            None => Err(Error::new(
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
    cx: &ModuleContext<'ctx>,
    target: &dyn LoweringTarget,
    vm: &VerifiedModule,
    h: Handle<Function>,
    args: &[u32],
    name: &str,
    symbol: &str,
    helpers: &HashMap<Handle<Function>, FunctionValue<'ctx>>,
) -> LowerResult<KernelAbi> {
    let f = vm.function(h);
    let declared_wave = f.attrs.wave.map(|(w, _)| w);
    if let Some((w, span)) = f.attrs.wave {
        if !target.supports_wave(w) {
            let mut e = Error::new(
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
                let space = match access {
                    ir::Access::Constant => target.constant_space(),
                    _ => target.global_space(),
                };
                params.push(cx.context.ptr_type(space).into());
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
    // A constant buffer's pointer is `noalias readonly`: with the `!invariant.load` on its
    // loads (`memory::mark_constant`), NVPTX reads it with `ld.global.nc`.
    let mut llparam = 0u32;
    for p in &f.params {
        if let Type::Buffer { access, .. } = p.ty {
            if access == ir::Access::Constant {
                for attr in ["noalias", "readonly", "nocapture"] {
                    let kind = inkwell::attributes::Attribute::get_named_enum_kind_id(attr);
                    llfn.add_attribute(
                        inkwell::attributes::AttributeLoc::Param(llparam),
                        cx.context.create_enum_attribute(kind, 0),
                    );
                }
            }
            llparam += 2;
        } else {
            llparam += 1;
        }
    }

    let eval = |h: Option<Handle<ConstExpr>>| -> LowerResult<Option<u32>> {
        match h {
            None => Ok(None),
            Some(h) => match const_eval(f, h, args) {
                Some(v) => Ok(Some(v)),
                None => Err(Error::new(
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
    if let Some((block, _)) = f.attrs.block {
        bounds.pinned = Some(block);
        let volume = block.iter().map(|&d| d as u64).product::<u64>();
        bounds.max_threads = bounds
            .max_threads
            .or(u32::try_from(volume).ok())
            .map(|t| t.min(volume as u32));
    }

    let info = lower_function(cx, target, vm, h, args, llfn, helpers, Some(symbol))?;
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
        report: false,
        sites: Vec::new(),
        debug: false,
        debug_sites: Vec::new(),
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
    /// The loops open around the construct (`FunctionContext::loops.len()` on entry).
    loops: usize,
}

/// The escape slot's code of a helper's `return` routed through merges (a `break` to loop
/// `k` is `1 + 2k`, a `continue` `2 + 2k`; 0 is no escape).
const ESCAPE_RETURN: u64 = u32::MAX as u64;

/// The state of lowering one function.
struct FunctionContext<'a, 'ctx> {
    cx: &'a ModuleContext<'ctx>,
    t: &'a dyn LoweringTarget,
    module: &'a ir::Module,
    f: &'a Function,
    args: &'a [u32],
    types: &'a [Option<Type>],
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
    /// On a target that tracks lanes (`LoweringTarget::tracks_lanes`), in a function that
    /// uses wave verbs: the `i64` mask of the lanes logically running with this one. Set
    /// at a kernel's entry from the hardware, at a helper's from its caller; narrowed by a
    /// vote at every branch of an if, loop test, `&&`/`||` and dispatch, and set back at
    /// the merge (without the lanes that left). Every wave verb and warp sync uses it.
    lane_mask: Option<PointerValue<'ctx>>,
    /// The outcome of the last checked access's bounds test (`checked.rs`), taken by the
    /// load or atomic that follows it.
    last_ok: Option<inkwell::values::IntValue<'ctx>>,
}

/// Whether a helper takes its caller's logical lane mask as a last, hidden parameter: on a
/// target that tracks lanes, when the helper (or one it reaches) uses a wave verb.
fn takes_lane_mask(target: &dyn LoweringTarget, module: &ir::Module, f: &Function) -> bool {
    target.tracks_lanes() && uses_waves(module, f, 0)
}

/// Whether `f`, or a helper it reaches, uses a wave verb. A call through a tag counts if any
/// function of the module uses a wave verb or a call through a tag itself.
fn uses_waves(module: &ir::Module, f: &Function, depth: u32) -> bool {
    if depth > 64 {
        return true;
    }
    // `wave_barrier()` names the wave's lanes: the logical mask, not who happens to run.
    fn wave_barrier_in(stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| {
            matches!(s.kind, StmtKind::WaveBarrier)
                || s.kind.blocks().into_iter().any(|b| wave_barrier_in(b))
        })
    }
    if wave_barrier_in(&f.body) {
        return true;
    }
    f.exprs.iter().any(|(_, e)| match e {
        // Matrix verbs exchange lanes' shares (or are warp-collective native instructions).
        Expr::Wave { .. } | Expr::MatrixLoad { .. } | Expr::MatrixMma { .. } => true,
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
        StmtKind::Block(b) => escapes(b, inner, returns_escape),
        _ => false,
    })
}

#[allow(clippy::too_many_arguments)]
fn lower_function<'a, 'ctx>(
    cx: &'a ModuleContext<'ctx>,
    target: &'a dyn LoweringTarget,
    vm: &'a VerifiedModule,
    h: Handle<Function>,
    args: &[u32],
    llfn: FunctionValue<'ctx>,
    helpers: &HashMap<Handle<Function>, FunctionValue<'ctx>>,
    kernel_symbol: Option<&str>,
) -> LowerResult<FnInfo> {
    let module = vm.module();
    let f = vm.function(h);
    // The verifier's types: the lowering never checks a function again.
    let types = vm.expr_types(h);
    let entry = cx.context.append_basic_block(llfn, "entry");
    cx.builder.position_at_end(entry);
    let mut fx = FunctionContext {
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
        lane_mask: None,
        last_ok: None,
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
            .ok_or_else(|| Error::new(codes::INTERNAL, "parameter count"))?;
        i += 1;
        match p.ty {
            Type::Buffer { .. } if kernel_symbol.is_some() => {
                let len = llfn
                    .get_nth_param(i)
                    .ok_or_else(|| Error::new(codes::INTERNAL, "parameter count"))?;
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
    if fx.sync_waves && target.tracks_lanes() {
        // A kernel starts with every lane of the wave that exists; a helper with its
        // caller's lanes (the hidden last parameter, `takes_lane_mask`).
        let mask = match kernel_symbol {
            Some(_) => target.active_mask(cx)?,
            None => llfn
                .get_nth_param(i)
                .ok_or_else(|| Error::new(codes::INTERNAL, "the lane-mask parameter"))?
                .into_int_value(),
        };
        let slot = fx.entry_alloca(cx.context.i64_type().into(), "lanes")?;
        cx.builder.build_store(slot, mask)?;
        fx.lane_mask = Some(slot);
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

/// The largest power of two (up to 2^16) that provably divides the value of `e`
/// ([`crate::codegen::checks::known_multiple`], the proof ub-traps share).
fn known_multiple(f: &Function, e: ExprId, args: &[u32], depth: u32) -> u64 {
    crate::codegen::checks::known_multiple(f, e, args, depth)
}

impl<'a, 'ctx> FunctionContext<'a, 'ctx> {
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

    fn err<T>(&self, code: &'static str, message: impl Into<String>) -> LowerResult<T> {
        let mut e = Error::new(code, message);
        e.span = self.span;
        Err(e)
    }

    fn ty(&self, e: ExprId) -> LowerResult<Type> {
        match self.types.get(e.index()).copied().flatten() {
            Some(t) => Ok(t),
            None => self.err(
                codes::INPUT,
                "an expression has no type (was the module verified?)",
            ),
        }
    }

    /// A slot in the entry block (promotable to a register).
    fn entry_alloca(&self, ty: BasicTypeEnum<'ctx>, name: &str) -> LowerResult<PointerValue<'ctx>> {
        let b = self.cx.context.create_builder();
        match self.entry.get_first_instruction() {
            Some(i) => b.position_before(&i),
            None => b.position_at_end(self.entry),
        }
        Ok(b.build_alloca(ty, name)?)
    }

    fn vt(&self, ty: Type) -> LowerResult<BasicTypeEnum<'ctx>> {
        value_type(self.cx, self.t, ty)
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
                width: None,
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
        let m = module().verify().unwrap_or_else(|e| panic!("{e}"));
        let refs = kernel_refs(m.module());
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
