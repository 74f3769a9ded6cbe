//! The verifier: the only way to make a [`VerifiedModule`], the type every backend takes.
//!
//! [`verify`] checks a [`Module`] against every rule of the IR and collects *all* problems as
//! [`Diagnostic`]s with stable codes ([`codes`], documented in `docs/verifier.md`), sorted by
//! location. A module that passes is then instantiated: each `instantiate` entry of a kernel
//! template becomes a concrete kernel named `Name<a,b,...>`
//! ([`crate::ir::template`]).
//!
//! Rule families live one per file:
//! - `items`: module-level rules (unique names, tag sets, recursion);
//! - `decls`: a function's declarations (parameter, return, local and shared types,
//!   attributes, constant expressions);
//! - `body`: statements and expression trees (scopes, labels, single use, places, and the
//!   expression type rules of [`crate::ir::typeck`]).
//!
//! What a `VerifiedModule` guarantees a backend: every handle is in range; every expression
//! has one parent and a type (see [`VerifiedModule::expr_types`]); in every concrete function
//! (not a template) there is no `TemplateParam` expression, every array length is
//! `Len::Fixed`, and every constant expression is a `ConstExpr::Lit`.

mod body;
pub mod codes;
mod decls;
mod items;
pub mod memcall;
pub(crate) use body::stmt_roots;
mod nesting;
mod spaces;

pub use items::{MAX_CALL_DEPTH, MAX_INLINED_SIZE};
pub use nesting::MAX_NESTING;

use super::template;
use super::typeck;
use super::{ConstExpr, Diagnostic, Diagnostics, ExprId, Function, Handle, Module, Span, Type};
use crate::ir::analysis::FunctionInfo;

/// A module that passed the verifier, with its templates instantiated and every
/// expression's type computed. Only [`verify`] constructs one.
#[derive(Clone, Debug)]
pub struct VerifiedModule {
    module: Module,
    /// Per function (by handle index): each expression's type, `None` for void calls.
    types: Vec<Vec<Option<Type>>>,
    /// Per function: the template and arguments it was instantiated from.
    origins: Vec<Option<(Handle<Function>, Vec<u32>)>>,
    /// Per function: the facts its consumers share ([`FunctionInfo`]).
    infos: Vec<FunctionInfo>,
}

impl VerifiedModule {
    /// The module, templates included (backends skip those: see [`Self::is_template`]).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The module, giving up the verifier's facts.
    pub fn into_module(self) -> Module {
        self.module
    }

    /// This module with every `print` and `assert` dropped (`ProgramOptions::print` off:
    /// [`crate::ir::debug::strip`]); `None` when it holds none, so nothing is copied. Types
    /// and facts stay as they were: the dropped statements' operands are left unreached.
    pub fn without_debug(&self) -> Option<VerifiedModule> {
        if !crate::ir::debug::has_debug(&self.module) {
            return None;
        }
        let mut m = self.clone();
        crate::ir::debug::strip(&mut m.module);
        Some(m)
    }

    /// This module with its shared-array layouts applied ([`crate::ir::layout::apply`]: every
    /// access of a `swizzled`/`block_padded` array at its physical index, the array at its
    /// physical length), as the compiled backends lower it; `None` when no function has a
    /// layout, so nothing is copied. The new index expressions are typed `u32`.
    pub fn with_layouts(&self) -> Option<VerifiedModule> {
        if !self
            .module
            .functions
            .iter()
            .any(|(_, f)| !f.layouts.is_empty())
        {
            return None;
        }
        let mut m = self.clone();
        for (k, h) in m
            .module
            .functions
            .handles()
            .collect::<Vec<_>>()
            .into_iter()
            .enumerate()
        {
            let types = m.types.get_mut(k);
            crate::ir::layout::apply(&mut m.module.functions[h], types);
        }
        Some(m)
    }

    /// The function behind `handle`.
    pub fn function(&self, handle: Handle<Function>) -> &Function {
        &self.module.functions[handle]
    }

    /// What verification worked out about function `handle` (computed once).
    pub fn info(&self, handle: Handle<Function>) -> &FunctionInfo {
        &self.infos[handle.index()]
    }

    /// The concrete kernel named `name` (a plain kernel, or an instance such as
    /// `QkTile<64,64,32,32,128>`); `None` for templates, helpers and unknown names.
    pub fn kernel(&self, name: &str) -> Option<Handle<Function>> {
        self.kernels().find(|(_, f)| f.name == name).map(|(h, _)| h)
    }

    /// The concrete kernels, in module order (instances follow the module's own functions).
    pub fn kernels(&self) -> impl Iterator<Item = (Handle<Function>, &Function)> {
        self.module
            .functions
            .iter()
            .filter(|(_, f)| f.is_kernel() && f.template.is_none())
    }

    /// Whether `handle` is a kernel template (generic: backends do not lower it).
    pub fn is_template(&self, handle: Handle<Function>) -> bool {
        self.module
            .functions
            .try_get(handle)
            .is_some_and(|f| f.template.is_some())
    }

    /// The template and arguments an instance was made from.
    pub fn instance_of(&self, handle: Handle<Function>) -> Option<(Handle<Function>, &[u32])> {
        self.origins
            .get(handle.index())?
            .as_ref()
            .map(|(t, args)| (*t, args.as_slice()))
    }

    /// Each expression's type in `func`, indexed by [`ExprId::index`]; `None` only for a
    /// call that returns nothing.
    pub fn expr_types(&self, func: Handle<Function>) -> &[Option<Type>] {
        self.types
            .get(func.index())
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The type of one expression (`None` for a void call).
    pub fn expr_type(&self, func: Handle<Function>, expr: ExprId) -> Option<Type> {
        self.expr_types(func).get(expr.index()).copied().flatten()
    }

    /// The value of a constant expression of a concrete function (an attribute argument).
    pub fn const_value(&self, func: Handle<Function>, expr: Handle<ConstExpr>) -> Option<u32> {
        match self.module.functions.try_get(func)?.consts.try_get(expr)? {
            ConstExpr::Lit(v) => u32::try_from(*v).ok(),
            _ => None,
        }
    }
}

impl VerifiedModule {
    /// This module with one more concrete function appended, checked by every per-function
    /// rule against the module (a pass's output, such as [`crate::ir::coarsen`]'s). The
    /// name must be new.
    pub fn with_function(
        &self,
        f: Function,
    ) -> Result<(VerifiedModule, Handle<Function>), Diagnostics> {
        let (out, handles) = self.with_functions(vec![f])?;
        Ok((out, handles[0]))
    }

    /// [`Self::with_function`] for several functions at once (one copy of the module); their
    /// handles in order.
    pub fn with_functions(
        &self,
        fs: Vec<Function>,
    ) -> Result<(VerifiedModule, Vec<Handle<Function>>), Diagnostics> {
        let mut sink = Sink::default();
        let mut out = self.clone();
        let mut handles = Vec::with_capacity(fs.len());
        for f in fs {
            if out.module.function(&f.name).is_some() {
                sink.push(
                    codes::DUPLICATE_NAME,
                    f.span,
                    format!("a function named `{}` already exists", f.name),
                );
            }
            decls::check(&out.module, &f, &mut sink);
            let typed = typeck::check_function(&out.module, &f);
            if nesting::check_local(&f, &nesting::measure(&out.module, &f), &mut sink) {
                body::check(&out.module, &f, &typed, &mut sink);
            }
            out.types.push(typed.types());
            out.origins.push(None);
            out.infos.push(FunctionInfo::of(&f));
            handles.push(out.module.functions.append(f));
        }
        sink.finish()?;
        for h in crate::ir::inline::inline_memory_calls(&mut out.module) {
            out.types[h.index()] =
                typeck::check_function(&out.module, &out.module.functions[h]).types();
            out.infos[h.index()] = FunctionInfo::of(&out.module.functions[h]);
        }
        Ok((out, handles))
    }
}

impl Module {
    /// Verifies the module: see [`verify`].
    pub fn verify(self) -> Result<VerifiedModule, Diagnostics> {
        verify(self)
    }
}

/// Collects diagnostics; a function's name is added to messages whose span is unknown (a
/// module built in Rust) or shared (a template instance), so that they still say where.
#[derive(Default)]
pub(crate) struct Sink {
    diags: Vec<Diagnostic>,
}

impl Sink {
    pub(crate) fn push(&mut self, code: &'static str, span: Span, message: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, message));
    }

    /// A diagnostic inside function `f`.
    pub(crate) fn at(
        &mut self,
        f: &Function,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
    ) {
        let mut message = message.into();
        // Instances share their template's spans, so their messages name them.
        if !span.is_known() || f.name.contains('<') {
            message = format!("in `{}`: {message}", f.name);
        }
        self.push(code, span, message);
    }

    pub(crate) fn len(&self) -> usize {
        self.diags.len()
    }

    fn finish(mut self) -> Result<(), Diagnostics> {
        if self.diags.is_empty() {
            return Ok(());
        }
        // Stable: problems at one location keep the order they were found in.
        self.diags.sort_by_key(|d| d.span);
        self.diags.dedup();
        Err(Diagnostics(self.diags))
    }
}

/// Checks `module` against every rule, collecting all problems; on success instantiates its
/// templates and returns the [`VerifiedModule`].
pub fn verify(module: Module) -> Result<VerifiedModule, Diagnostics> {
    let mut sink = Sink::default();
    items::check(&module, &mut sink);
    for (code, span, message) in crate::ir::family::check(&module) {
        sink.push(code, span, message);
    }
    let mut types = Vec::with_capacity(module.functions.len());
    let mut broken = Vec::with_capacity(module.functions.len());
    for (_, f) in module.functions.iter() {
        let before = sink.len();
        let shallow = nesting::check_local(f, &nesting::measure(&module, f), &mut sink);
        decls::check(&module, f, &mut sink);
        let typed = typeck::check_function(&module, f);
        // The statement walk recurses on block nesting: only on a function within the limit.
        if shallow {
            body::check(&module, f, &typed, &mut sink);
        }
        types.push(typed.types());
        broken.push(sink.len() > before);
    }

    // Instantiate the templates that passed, so that their instances' problems are
    // reported beside any others; then fold the constants of concrete functions.
    let mut module = module;
    let mut origins: Vec<Option<(Handle<Function>, Vec<u32>)>> = vec![None; module.functions.len()];
    let instances = template::instantiate_all(&module, |h| !broken[h.index()], &mut sink);
    template::fold_concrete(&mut module);
    for (origin, args, f) in instances {
        let typed = typeck::check_function(&module, &f);
        // The template passed, so an instance can only fail through its constants (checked
        // while instantiating); re-checking keeps that promise honest.
        decls::check(&module, &f, &mut sink);
        if nesting::check_local(&f, &nesting::measure(&module, &f), &mut sink) {
            body::check(&module, &f, &typed, &mut sink);
        }
        types.push(typed.types());
        origins.push(Some((origin, args)));
        module.functions.append(f);
    }
    items::check_instance_names(&module, &mut sink);
    items::check_call_limits(&module, &mut sink);
    sink.finish()?;
    // Helpers that take memory are inlined (issue 23 item 4): what backends and facts see.
    for h in crate::ir::inline::inline_memory_calls(&mut module) {
        types[h.index()] = typeck::check_function(&module, &module.functions[h]).types();
    }
    let infos = module
        .functions
        .iter()
        .map(|(_, f)| FunctionInfo::of(f))
        .collect();
    Ok(VerifiedModule {
        module,
        types,
        origins,
        infos,
    })
}
