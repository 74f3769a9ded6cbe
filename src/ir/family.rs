//! Shape families declared in the text format (contract §6.1): a named list of candidate
//! shapes of one kernel design, built over a template's instances.
//!
//! ```text
//! family gemm = Gemm(tile_m = TM, tile_n = TN, threads = (TM / RM) * (TN / RN), k_block = KB,
//!     max_splits = 1);
//! ```
//!
//! Each key is a constant expression over the template's parameters, evaluated for every
//! `instantiate` entry: the family has one member per instance, in the template's order. The
//! verifier checks that the template exists, that every required key is given once, and that
//! each value evaluates, fits `u32` and (but for `dynamic_shared`) is not zero
//! (`XPU-S001`..`XPU-S004`). The runtime side (the filter and the choice) is `crate::tune`.

use super::template::{eval_const_in, Consts};
use super::{Arena, ConstExpr, Handle, Module, Span};

/// Codes of the family checks (the `XPU-S` family is shared with `crate::tune`).
pub mod codes {
    /// A family over a name that is not a kernel template of the module.
    pub const UNKNOWN_TEMPLATE: &str = "XPU-S001";
    /// A key that is not one of the family keys, or one given twice.
    pub const BAD_KEY: &str = "XPU-S002";
    /// A required key (`tile_m`, `tile_n`, `threads`, `k_block`, `max_splits`) missing.
    pub const MISSING_KEY: &str = "XPU-S003";
    /// A key whose value, for some instance, does not evaluate, does not fit `u32` or is zero.
    pub const BAD_VALUE: &str = "XPU-S004";
    /// Two families of one name.
    pub const DUPLICATE: &str = "XPU-S005";
}

/// The keys a family declaration gives per member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FamilyKey {
    /// `tile_m`: rows of the output tile a block computes.
    TileM,
    /// `tile_n`: columns of the output tile a block computes.
    TileN,
    /// `threads`: work-items per block.
    Threads,
    /// `k_block`: the depth of the reduction step.
    KBlock,
    /// `max_splits`: the most ways the reduction may be split.
    MaxSplits,
    /// Dynamic shared bytes a launch of the member passes (optional, default 0).
    DynamicShared,
}

impl FamilyKey {
    /// Every key, in canonical order.
    pub const ALL: [FamilyKey; 6] = [
        FamilyKey::TileM,
        FamilyKey::TileN,
        FamilyKey::Threads,
        FamilyKey::KBlock,
        FamilyKey::MaxSplits,
        FamilyKey::DynamicShared,
    ];

    /// The key as written.
    pub const fn name(self) -> &'static str {
        match self {
            FamilyKey::TileM => "tile_m",
            FamilyKey::TileN => "tile_n",
            FamilyKey::Threads => "threads",
            FamilyKey::KBlock => "k_block",
            FamilyKey::MaxSplits => "max_splits",
            FamilyKey::DynamicShared => "dynamic_shared",
        }
    }

    /// The key named `name` as written, if any.
    pub fn from_name(name: &str) -> Option<FamilyKey> {
        FamilyKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a declaration must give the key.
    pub const fn required(self) -> bool {
        !matches!(self, FamilyKey::DynamicShared)
    }
}

/// `family NAME = Template(key = expr, ...);`
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyDecl {
    /// The family's name.
    pub name: String,
    /// The kernel template the members are instances of.
    pub template: String,
    /// The keys as written, each a constant expression in `consts`; `Param(i)` is the
    /// template's `i`-th parameter.
    pub keys: Vec<(FamilyKey, Handle<ConstExpr>, Span)>,
    /// The constant expressions the keys refer to.
    pub consts: Arena<ConstExpr>,
    /// Where the declaration is written.
    pub span: Span,
}

/// One member of a declared family: an instance and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyMember {
    /// The instance's kernel name (`Gemm<64,64,16,4,4>`).
    pub kernel: String,
    /// Rows of the output tile.
    pub tile_m: u32,
    /// Columns of the output tile.
    pub tile_n: u32,
    /// Work-items per block.
    pub threads: u32,
    /// The depth of the reduction step.
    pub k_block: u32,
    /// The most ways the reduction may be split.
    pub max_splits: u32,
    /// Dynamic shared bytes a launch of the member passes.
    pub dynamic_shared_bytes: u64,
}

impl FamilyDecl {
    /// The members, one per instance of the template in `module`; `Err((span, message))` at
    /// the first key that does not evaluate for an instance.
    pub fn members(&self, module: &Module) -> Result<Vec<FamilyMember>, (Span, String)> {
        let template = module
            .function(&self.template)
            .map(|h| &module.functions[h])
            .and_then(|f| f.template.as_ref().map(|t| (f, t)));
        let Some((_, info)) = template else {
            return Err((
                self.span,
                format!("`{}` is not a kernel template", self.template),
            ));
        };
        let mut out = Vec::new();
        for (args, _) in &info.instantiate {
            let value = |key: FamilyKey| -> Result<Option<u64>, (Span, String)> {
                let Some(&(_, h, span)) = self.keys.iter().find(|(k, _, _)| *k == key) else {
                    return Ok(None);
                };
                let consts = Consts {
                    arena: &self.consts,
                    params: &info.params,
                };
                let v = eval_const_in(consts, h, Some(args))
                    .ok()
                    .filter(|&v| v > 0 || key == FamilyKey::DynamicShared)
                    .map(u64::from);
                match v {
                    Some(v) => Ok(Some(v)),
                    None => Err((
                        span,
                        format!(
                            "family `{}`: `{}` of {} does not evaluate to a non-zero u32",
                            self.name,
                            key.name(),
                            super::template::instance_name(&self.template, args)
                        ),
                    )),
                }
            };
            let get = |key| value(key).map(|v| v.unwrap_or(0) as u32);
            out.push(FamilyMember {
                kernel: super::template::instance_name(&self.template, args),
                tile_m: get(FamilyKey::TileM)?,
                tile_n: get(FamilyKey::TileN)?,
                threads: get(FamilyKey::Threads)?,
                k_block: get(FamilyKey::KBlock)?,
                max_splits: get(FamilyKey::MaxSplits)?,
                dynamic_shared_bytes: value(FamilyKey::DynamicShared)?.unwrap_or(0),
            });
        }
        Ok(out)
    }
}

/// The verifier's family checks: every problem as `(code, span, message)`.
pub(crate) fn check(module: &Module) -> Vec<(&'static str, Span, String)> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for fam in &module.families {
        if !seen.insert(fam.name.as_str()) {
            out.push((
                codes::DUPLICATE,
                fam.span,
                format!("family `{}` declared twice", fam.name),
            ));
        }
        let is_template = module.function(&fam.template).is_some_and(|h| {
            module.functions[h].is_kernel() && module.functions[h].template.is_some()
        });
        if !is_template {
            out.push((
                codes::UNKNOWN_TEMPLATE,
                fam.span,
                format!(
                    "family `{}` is over `{}`, which is not a kernel template of this module",
                    fam.name, fam.template
                ),
            ));
            continue;
        }
        let mut given = std::collections::HashSet::new();
        for (k, _, span) in &fam.keys {
            if !given.insert(*k) {
                out.push((
                    codes::BAD_KEY,
                    *span,
                    format!("family `{}` gives `{}` twice", fam.name, k.name()),
                ));
            }
        }
        let missing: Vec<&str> = FamilyKey::ALL
            .into_iter()
            .filter(|k| k.required() && !given.contains(k))
            .map(|k| k.name())
            .collect();
        if !missing.is_empty() {
            out.push((
                codes::MISSING_KEY,
                fam.span,
                format!("family `{}` lacks {}", fam.name, missing.join(", ")),
            ));
            continue;
        }
        if let Err((span, message)) = fam.members(module) {
            out.push((codes::BAD_VALUE, span, message));
        }
    }
    out
}
