//! Kernel templates (contract §3.5): constant expressions, `requires` clauses and
//! instantiation.
//!
//! An instance is a clone of the template with its arguments substituted: every
//! `TemplateParam` expression becomes a `u32` literal, every constant expression is folded
//! to a literal, and every `Len::Const` array length becomes `Len::Fixed`. It is named
//! `Name<a,b,...>` and is an ordinary kernel from then on; the template stays in the module
//! for printing and is skipped by backends.
//!
//! Constant expressions are `u32` arithmetic with every operation checked: an overflow, a
//! negative result or a division by zero is a [`ConstError`] (reported by the verifier as
//! `XPU-V073`), never a panic or a wrapped value. `&&` and `||` short-circuit, so a clause
//! such as `WM != 0 && TM % WM == 0` is safe.

use crate::ir::verify::{codes, Sink};
use crate::ir::{
    Arena, ConstBinOp, ConstExpr, ConstUnOp, Expr, Function, FunctionKind, Handle, Len, Literal,
    Module, Scalar, Type,
};
use std::fmt;

/// Why a constant expression has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConstError {
    /// A handle outside the function's constant arena.
    Handle(Handle<ConstExpr>),
    /// A template parameter in a function that is not a template.
    NotTemplate,
    /// A template parameter index past the template's parameters.
    ParamIndex(u32),
    /// A literal or result that does not fit `u32` (the operation's text).
    Overflow(String),
    /// A division or remainder by zero (the operation's text).
    DivideByZero(String),
    /// Nesting deeper than [`MAX_CONST_DEPTH`], or a cycle.
    TooDeep,
}

/// The deepest constant expression evaluated (a cycle of handles hits this too).
pub const MAX_CONST_DEPTH: usize = 256;

impl fmt::Display for ConstError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstError::Handle(h) => write!(f, "constant expression {h:?} does not exist"),
            ConstError::NotTemplate => write!(f, "a template parameter outside a template"),
            ConstError::ParamIndex(i) => write!(f, "template parameter index {i} out of range"),
            ConstError::Overflow(t) => write!(f, "`{t}` overflows u32"),
            ConstError::DivideByZero(t) => write!(f, "`{t}` divides by zero"),
            ConstError::TooDeep => write!(
                f,
                "constant expression nested deeper than {MAX_CONST_DEPTH} (or cyclic)"
            ),
        }
    }
}

/// The value of constant expression `h` of `func` with template arguments `args` (`None`
/// outside a template).
pub fn eval_const(
    func: &Function,
    h: Handle<ConstExpr>,
    args: Option<&[u32]>,
) -> Result<u32, ConstError> {
    eval_const_in(Consts::of(func), h, args)
}

/// A constant arena with the names of the template parameters its expressions use: a
/// function's (`Consts::of`), or a declaration's own arena over a template's parameters (a
/// shape family).
#[derive(Clone, Copy)]
pub struct Consts<'a> {
    /// The expressions.
    pub arena: &'a Arena<ConstExpr>,
    /// The template's parameter names (empty outside a template), for error texts.
    pub params: &'a [String],
}

impl<'a> Consts<'a> {
    /// The constant arena and template parameters of `func`.
    pub fn of(func: &'a Function) -> Self {
        Consts {
            arena: &func.consts,
            params: func.template.as_ref().map_or(&[], |t| t.params.as_slice()),
        }
    }
}

/// [`eval_const`] over any constant arena: the one evaluator of constant expressions.
pub fn eval_const_in(
    consts: Consts<'_>,
    h: Handle<ConstExpr>,
    args: Option<&[u32]>,
) -> Result<u32, ConstError> {
    eval(consts, h, args, 0)
}

fn eval(
    consts: Consts<'_>,
    h: Handle<ConstExpr>,
    args: Option<&[u32]>,
    depth: usize,
) -> Result<u32, ConstError> {
    if depth > MAX_CONST_DEPTH {
        return Err(ConstError::TooDeep);
    }
    let e = consts.arena.try_get(h).ok_or(ConstError::Handle(h))?;
    let sub = |x| eval(consts, x, args, depth + 1);
    let text = || const_text_in(consts, h);
    Ok(match *e {
        ConstExpr::Lit(v) => u32::try_from(v).map_err(|_| ConstError::Overflow(text()))?,
        ConstExpr::Param(i) => {
            let args = args.ok_or(ConstError::NotTemplate)?;
            *args.get(i as usize).ok_or(ConstError::ParamIndex(i))?
        }
        ConstExpr::Unary(op, x) => {
            let v = sub(x)?;
            match op {
                ConstUnOp::Not => u32::from(v == 0),
                ConstUnOp::Neg => 0u32
                    .checked_sub(v)
                    .ok_or_else(|| ConstError::Overflow(text()))?,
            }
        }
        ConstExpr::Binary(op, a, b) => {
            let x = sub(a)?;
            // Short-circuit before evaluating the right side.
            match op {
                ConstBinOp::And if x == 0 => return Ok(0),
                ConstBinOp::Or if x != 0 => return Ok(1),
                _ => {}
            }
            let y = sub(b)?;
            let over = || ConstError::Overflow(text());
            match op {
                ConstBinOp::Add => x.checked_add(y).ok_or_else(over)?,
                ConstBinOp::Sub => x.checked_sub(y).ok_or_else(over)?,
                ConstBinOp::Mul => x.checked_mul(y).ok_or_else(over)?,
                ConstBinOp::Div => x
                    .checked_div(y)
                    .ok_or_else(|| ConstError::DivideByZero(text()))?,
                ConstBinOp::Rem => x
                    .checked_rem(y)
                    .ok_or_else(|| ConstError::DivideByZero(text()))?,
                ConstBinOp::Eq => u32::from(x == y),
                ConstBinOp::Ne => u32::from(x != y),
                ConstBinOp::Lt => u32::from(x < y),
                ConstBinOp::Le => u32::from(x <= y),
                ConstBinOp::Gt => u32::from(x > y),
                ConstBinOp::Ge => u32::from(x >= y),
                ConstBinOp::And | ConstBinOp::Or => u32::from(y != 0),
            }
        }
    })
}

/// Checks that `h` is well-formed over a template of `params` parameters: handles in range,
/// parameter indices in range, not too deep. (Values are checked per instance.)
pub fn check_const(func: &Function, h: Handle<ConstExpr>, params: usize) -> Result<(), ConstError> {
    fn walk(
        func: &Function,
        h: Handle<ConstExpr>,
        params: usize,
        depth: usize,
    ) -> Result<(), ConstError> {
        if depth > MAX_CONST_DEPTH {
            return Err(ConstError::TooDeep);
        }
        match *func.consts.try_get(h).ok_or(ConstError::Handle(h))? {
            ConstExpr::Lit(_) => Ok(()),
            ConstExpr::Param(i) if (i as usize) < params => Ok(()),
            ConstExpr::Param(i) => Err(ConstError::ParamIndex(i)),
            ConstExpr::Unary(_, x) => walk(func, x, params, depth + 1),
            ConstExpr::Binary(_, a, b) => {
                walk(func, a, params, depth + 1)?;
                walk(func, b, params, depth + 1)
            }
        }
    }
    walk(func, h, params, 0)
}

fn binop(op: ConstBinOp) -> (&'static str, u8) {
    match op {
        ConstBinOp::Or => ("||", 1),
        ConstBinOp::And => ("&&", 2),
        ConstBinOp::Eq => ("==", 3),
        ConstBinOp::Ne => ("!=", 3),
        ConstBinOp::Lt => ("<", 3),
        ConstBinOp::Le => ("<=", 3),
        ConstBinOp::Gt => (">", 3),
        ConstBinOp::Ge => (">=", 3),
        ConstBinOp::Add => ("+", 4),
        ConstBinOp::Sub => ("-", 4),
        ConstBinOp::Mul => ("*", 5),
        ConstBinOp::Div => ("/", 5),
        ConstBinOp::Rem => ("%", 5),
    }
}

/// The source text of constant expression `h` (parameters by name), with the parentheses
/// the text format's precedence needs: `TM == TN && TM % WM == 0`.
pub fn const_text(func: &Function, h: Handle<ConstExpr>) -> String {
    const_text_in(Consts::of(func), h)
}

/// [`const_text`] over any constant arena.
pub fn const_text_in(consts: Consts<'_>, h: Handle<ConstExpr>) -> String {
    fn go(c: Consts<'_>, h: Handle<ConstExpr>, depth: usize, out: &mut String) -> u8 {
        let Some(e) = c.arena.try_get(h).filter(|_| depth <= MAX_CONST_DEPTH) else {
            out.push('?');
            return 9;
        };
        match *e {
            ConstExpr::Lit(v) => {
                out.push_str(&v.to_string());
                9
            }
            ConstExpr::Param(i) => {
                let name = c.params.get(i as usize);
                match name {
                    Some(n) => out.push_str(n),
                    None => out.push_str(&format!("${i}")),
                }
                9
            }
            ConstExpr::Unary(op, x) => {
                out.push(match op {
                    ConstUnOp::Not => '!',
                    ConstUnOp::Neg => '-',
                });
                let mut s = String::new();
                if go(c, x, depth + 1, &mut s) < 9 {
                    out.push('(');
                    out.push_str(&s);
                    out.push(')');
                } else {
                    out.push_str(&s);
                }
                8
            }
            ConstExpr::Binary(op, a, b) => {
                let (sym, p) = binop(op);
                let mut l = String::new();
                let lp = go(c, a, depth + 1, &mut l);
                let mut r = String::new();
                let rp = go(c, b, depth + 1, &mut r);
                // Left-associative; comparisons do not chain, so they bracket both sides.
                let lparen = lp < p || (p == 3 && lp == 3);
                let rparen = rp <= p;
                for (text, paren, right) in [(l, lparen, false), (r, rparen, true)] {
                    if right {
                        out.push_str(&format!(" {sym} "));
                    }
                    if paren {
                        out.push('(');
                        out.push_str(&text);
                        out.push(')');
                    } else {
                        out.push_str(&text);
                    }
                }
                p
            }
        }
    }
    let mut out = String::new();
    go(consts, h, 0, &mut out);
    out
}

/// The name of an instance: `QkTile<64,64,32,32,128>`.
pub fn instance_name(template: &str, args: &[u32]) -> String {
    let args: Vec<String> = args.iter().map(u32::to_string).collect();
    format!("{template}<{}>", args.join(","))
}

/// Every instance of every `sound` template of `module` (one that passed the generic
/// checks), each with its template and arguments; problems go to `sink` (requirements,
/// caps, argument counts, duplicates, constants).
pub(crate) fn instantiate_all(
    module: &Module,
    sound: impl Fn(Handle<Function>) -> bool,
    sink: &mut Sink,
) -> Vec<(Handle<Function>, Vec<u32>, Function)> {
    let mut out = Vec::new();
    for (h, f) in module.functions.iter() {
        let Some(t) = &f.template else { continue };
        if f.kind != FunctionKind::Kernel || !sound(h) {
            continue;
        }
        let cap = t.max.unwrap_or(crate::ir::TemplateInfo::DEFAULT_MAX);
        // Instances are copies of the body without the template clauses: cloned from this
        // once per instance, not from the template (whose `instantiate` list each copy would
        // carry, quadratic in the instances).
        let mut bare = f.clone();
        bare.template = None;
        let mut seen: std::collections::HashSet<&[u32]> = std::collections::HashSet::new();
        for (i, (args, span)) in t.instantiate.iter().enumerate() {
            let name = instance_name(&f.name, args);
            if i as u32 == cap {
                sink.push(
                    codes::TEMPLATE_CAP,
                    *span,
                    format!(
                        "`{}` has {} instantiations, over its cap of {cap} (raise it with `max N`)",
                        f.name,
                        t.instantiate.len()
                    ),
                );
            }
            if i as u32 >= cap {
                continue;
            }
            if args.len() != t.params.len() {
                sink.push(
                    codes::TEMPLATE_ARGS,
                    *span,
                    format!(
                        "`{name}` gives {} arguments; `{}` has {} parameters",
                        args.len(),
                        f.name,
                        t.params.len()
                    ),
                );
                continue;
            }
            if !seen.insert(args.as_slice()) {
                sink.push(
                    codes::DUPLICATE_INSTANCE,
                    *span,
                    format!("`{name}` is instantiated twice"),
                );
                continue;
            }
            let mut ok = true;
            for (clause, _) in &t.requires {
                let text = const_text(f, *clause);
                match eval_const(f, *clause, Some(args)) {
                    Ok(0) => {
                        ok = false;
                        sink.push(
                            codes::TEMPLATE_REQUIREMENT,
                            *span,
                            format!("`{name}` fails requires clause `{text}`"),
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        ok = false;
                        sink.push(
                            codes::CONST_EVAL,
                            *span,
                            format!("`{name}`: requires clause `{text}`: {e}"),
                        );
                    }
                }
            }
            if ok {
                if let Some(inst) = instantiate(f, &bare, args, &name, *span, sink) {
                    out.push((h, args.clone(), inst));
                }
            }
        }
    }
    out
}

/// One instance of template `f` (whose arguments passed its clauses), or `None` with the
/// reasons in `sink`.
fn instantiate(
    f: &Function,
    bare: &Function,
    args: &[u32],
    name: &str,
    span: crate::ir::Span,
    sink: &mut Sink,
) -> Option<Function> {
    let mut inst = bare.clone();
    inst.name = name.to_string();
    let handles: Vec<_> = inst.exprs.handles().collect();
    for h in handles {
        if let Expr::TemplateParam(i) = inst.exprs[h] {
            // `i` was checked against the parameters when the template was verified.
            let v = args.get(i as usize).copied().unwrap_or(0);
            inst.exprs[h] = Expr::Literal(Literal::Int {
                bits: u64::from(v),
                ty: Scalar::U32,
            });
        }
    }
    let mut failed = false;
    let mut value = |h: Handle<ConstExpr>, what: &str| match eval_const(f, h, Some(args)) {
        Ok(v) => Some(v),
        Err(e) => {
            failed = true;
            sink.push(codes::CONST_EVAL, span, format!("`{name}`: {what}: {e}"));
            None
        }
    };
    // Referenced constants first, so each failure names its use.
    let mut lens = Vec::new();
    for (h, l) in f.locals.iter() {
        if let Type::Array {
            len: Len::Const(c), ..
        } = l.ty
        {
            lens.push((
                Some(h),
                None,
                value(c, &format!("the length of `{}`", l.name)),
            ));
        }
    }
    for (h, s) in f.shared.iter() {
        if let Some(Len::Const(c)) = s.len {
            lens.push((
                None,
                Some(h),
                value(c, &format!("the length of `{}`", s.name)),
            ));
        }
    }
    if let Some(o) = &f.attrs.occupancy {
        for (n, c) in [
            ("max_threads", o.max_threads),
            ("max_waves", o.max_waves),
            ("min_resident", o.min_resident),
            ("max_registers", o.max_registers),
        ] {
            if let Some(c) = c {
                value(c, &format!("@occupancy {n}"));
            }
        }
    }
    if failed {
        return None;
    }
    for (local, shared, v) in lens {
        let v = v.unwrap_or(0);
        if let Some(h) = local {
            if let Type::Array { elem, .. } = inst.locals[h].ty {
                inst.locals[h].ty = Type::Array {
                    elem,
                    len: Len::Fixed(v),
                };
            }
        }
        if let Some(h) = shared {
            inst.shared[h].len = Some(Len::Fixed(v));
        }
    }
    fold_consts(&mut inst, Some(args));
    Some(inst)
}

/// Folds every constant of `f` that evaluates to a literal; template parameters become
/// their arguments even where the whole expression does not evaluate.
fn fold_consts(f: &mut Function, args: Option<&[u32]>) {
    let values: Vec<Option<u32>> = f
        .consts
        .handles()
        .map(|h| eval_const(f, h, args).ok())
        .collect();
    for (i, v) in values.into_iter().enumerate() {
        let h = Handle::from_index(i);
        match (v, &f.consts[h], args) {
            (Some(v), _, _) => f.consts[h] = ConstExpr::Lit(u64::from(v)),
            (None, ConstExpr::Param(p), Some(args)) => {
                if let Some(&a) = args.get(*p as usize) {
                    f.consts[h] = ConstExpr::Lit(u64::from(a));
                }
            }
            _ => {}
        }
    }
}

/// Folds constants and array lengths of every concrete (non-template) function, after the
/// verifier has checked that each referenced one evaluates.
pub(crate) fn fold_concrete(module: &mut Module) {
    let handles: Vec<_> = module.functions.handles().collect();
    for h in handles {
        let f = &mut module.functions[h];
        if f.template.is_some() {
            continue;
        }
        let fixed = |f: &Function, len: Len| match len {
            Len::Const(c) => eval_const(f, c, None).map(Len::Fixed).unwrap_or(len),
            l => l,
        };
        let locals: Vec<_> = f.locals.handles().collect();
        for l in locals {
            if let Type::Array { elem, len } = f.locals[l].ty {
                let len = fixed(f, len);
                f.locals[l].ty = Type::Array { elem, len };
            }
        }
        let shared: Vec<_> = f.shared.handles().collect();
        for s in shared {
            if let Some(len) = f.shared[s].len {
                let len = fixed(f, len);
                f.shared[s].len = Some(len);
            }
        }
        fold_consts(f, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TemplateInfo;

    fn template() -> Function {
        let mut f = Function::new("T", FunctionKind::Kernel);
        f.template = Some(TemplateInfo {
            params: vec!["TM".into(), "WM".into()],
            requires: vec![],
            instantiate: vec![],
            max: None,
        });
        f
    }

    #[test]
    fn eval_checks_arithmetic() {
        let mut f = template();
        let tm = f.consts.append(ConstExpr::Param(0));
        let wm = f.consts.append(ConstExpr::Param(1));
        let div = f.consts.append(ConstExpr::Binary(ConstBinOp::Div, tm, wm));
        assert_eq!(eval_const(&f, div, Some(&[64, 16])), Ok(4));
        assert_eq!(
            eval_const(&f, div, Some(&[64, 0])),
            Err(ConstError::DivideByZero("TM / WM".into()))
        );
        let sub = f.consts.append(ConstExpr::Binary(ConstBinOp::Sub, wm, tm));
        assert!(matches!(
            eval_const(&f, sub, Some(&[64, 16])),
            Err(ConstError::Overflow(_))
        ));
        let big = f.consts.append(ConstExpr::Lit(1 << 40));
        assert!(matches!(
            eval_const(&f, big, Some(&[1, 1])),
            Err(ConstError::Overflow(_))
        ));
        let mul = f.consts.append(ConstExpr::Binary(ConstBinOp::Mul, tm, tm));
        assert!(eval_const(&f, mul, Some(&[1 << 20, 1])).is_err());
        // WM != 0 && TM % WM == 0 short-circuits.
        let zero = f.consts.append(ConstExpr::Lit(0));
        let ne = f.consts.append(ConstExpr::Binary(ConstBinOp::Ne, wm, zero));
        let rem = f.consts.append(ConstExpr::Binary(ConstBinOp::Rem, tm, wm));
        let eq = f
            .consts
            .append(ConstExpr::Binary(ConstBinOp::Eq, rem, zero));
        let and = f.consts.append(ConstExpr::Binary(ConstBinOp::And, ne, eq));
        assert_eq!(eval_const(&f, and, Some(&[64, 0])), Ok(0));
        assert_eq!(eval_const(&f, and, Some(&[64, 16])), Ok(1));
        assert_eq!(const_text(&f, and), "WM != 0 && TM % WM == 0");
        assert_eq!(eval_const(&f, tm, None), Err(ConstError::NotTemplate));
    }

    #[test]
    fn text_brackets_by_precedence() {
        let mut f = template();
        let tm = f.consts.append(ConstExpr::Param(0));
        let wm = f.consts.append(ConstExpr::Param(1));
        let add = f.consts.append(ConstExpr::Binary(ConstBinOp::Add, tm, wm));
        let mul = f.consts.append(ConstExpr::Binary(ConstBinOp::Mul, add, wm));
        assert_eq!(const_text(&f, mul), "(TM + WM) * WM");
        let sub = f.consts.append(ConstExpr::Binary(ConstBinOp::Sub, tm, add));
        assert_eq!(const_text(&f, sub), "TM - (TM + WM)");
        let cyc = Handle::from_index(f.consts.len());
        f.consts.append(ConstExpr::Unary(ConstUnOp::Not, cyc));
        assert_eq!(eval_const(&f, cyc, Some(&[1, 1])), Err(ConstError::TooDeep));
        assert!(const_text(&f, cyc).contains('?'));
    }

    #[test]
    fn names() {
        assert_eq!(
            instance_name("QkTile", &[64, 64, 32, 32, 128]),
            "QkTile<64,64,32,32,128>"
        );
    }
}
