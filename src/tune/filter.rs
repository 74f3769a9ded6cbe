//! The feasibility filter (contract §6.1): a [`ShapeFamily`] is a list of [`ShapeCandidate`]s
//! of one kernel design; at a [`Problem`] the [`ShapeFilter`] judges each against the device's
//! [`DeviceFacts`] and the candidate's [`KernelFacts`], rule by rule, and keeps every verdict
//! with its rule, its need and the limit.
//!
//! A fact the backend does not report (a `None` on either side) prunes nothing: the check is
//! kept with the absent side shown as `absent`. An empty survivor set is
//! [`ShapeFilter::refusal`], a [`LaunchError::NoShapeFits`] naming the family, the problem and
//! every verdict.

use super::kernel_facts::KernelFacts;
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::LaunchError;
use crate::ir::VerifiedModule;
use crate::runtime::device::Program;
use std::fmt;

/// One candidate shape of a family (the contract's `ShapeCandidate`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeCandidate {
    /// The kernel (a template instance's name, `Gemm<64,64,16,4,4>`).
    pub kernel: String,
    /// Rows of the output tile a block computes.
    pub tile_m: u32,
    /// Columns of the output tile a block computes.
    pub tile_n: u32,
    /// Work-items per block.
    pub threads: u32,
    /// The depth of the reduction step.
    pub k_block: u32,
    /// The most split-K slices a launch of this shape may use.
    pub max_splits: u32,
    /// Dynamic shared bytes a launch of this shape passes.
    pub dynamic_shared_bytes: u64,
}

/// A named list of candidates of one kernel design.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeFamily {
    /// The family's name.
    pub name: String,
    /// Its candidates, in declaration order.
    pub candidates: Vec<ShapeCandidate>,
}

impl ShapeFamily {
    /// The family `name` declared in `module` (`family NAME = Template(...)`), one candidate
    /// per instance of its template; `None` where the module declares no such family.
    pub fn from_module(module: &VerifiedModule, name: &str) -> Option<ShapeFamily> {
        let decl = module.module().families.iter().find(|f| f.name == name)?;
        // The verifier evaluated every member, so this cannot fail on a verified module.
        let members = decl.members(module.module()).ok()?;
        Some(ShapeFamily {
            name: name.to_string(),
            candidates: members
                .into_iter()
                .map(|m| ShapeCandidate {
                    kernel: m.kernel,
                    tile_m: m.tile_m,
                    tile_n: m.tile_n,
                    threads: m.threads,
                    k_block: m.k_block,
                    max_splits: m.max_splits,
                    dynamic_shared_bytes: m.dynamic_shared_bytes,
                })
                .collect(),
        })
    }
}

/// A problem size, `MxNxK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    /// Rows of the output.
    pub m: u64,
    /// Columns of the output.
    pub n: u64,
    /// The reduction depth.
    pub k: u64,
}

impl Problem {
    /// `1024x1024x512` (three positive integers).
    pub fn parse(text: &str) -> Option<Problem> {
        let mut it = text.trim().split(['x', 'X']);
        let mut next = || it.next()?.trim().parse::<u64>().ok().filter(|&v| v > 0);
        let p = Problem {
            m: next()?,
            n: next()?,
            k: next()?,
        };
        it.next().is_none().then_some(p)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

/// The rules of the filter, in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The backend has device code for the kernel (the registry, contract §5.2: nothing falls
    /// through to a kernel it denies). Need and limit are 1 and 0 when it has none.
    DeviceCode,
    /// The block's work-items against the device's per-block cap.
    ThreadsPerBlock,
    /// The block's work-items against the kernel's own largest block (its code's record).
    KernelBlockLimit,
    /// Registers a block needs (per work-item × work-items) against the per-block file.
    RegistersPerBlock,
    /// Registers a block needs against the multiprocessor's file.
    RegistersPerMultiprocessor,
    /// Shared bytes against the per-block limit without opt-in.
    SharedPerBlock,
    /// Shared bytes above the default per-block limit against the opt-in ceiling.
    SharedPerBlockOptIn,
    /// Shared bytes against what one multiprocessor holds.
    SharedPerMultiprocessor,
    /// The block's work-items against what one multiprocessor runs.
    ThreadsPerMultiprocessor,
    /// Blocks of this shape resident on one multiprocessor under every limit reported
    /// (blocks, threads, registers, shared), against one.
    BlocksPerMultiprocessor,
}

impl Rule {
    /// The rule's name as verdicts print it.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::DeviceCode => "device code",
            Rule::ThreadsPerBlock => "threads per block",
            Rule::KernelBlockLimit => "kernel block limit",
            Rule::RegistersPerBlock => "registers per block",
            Rule::RegistersPerMultiprocessor => "registers per multiprocessor",
            Rule::SharedPerBlock => "shared per block",
            Rule::SharedPerBlockOptIn => "shared per block (opt-in)",
            Rule::SharedPerMultiprocessor => "shared per multiprocessor",
            Rule::ThreadsPerMultiprocessor => "threads per multiprocessor",
            Rule::BlocksPerMultiprocessor => "blocks per multiprocessor",
        }
    }
}

/// One rule applied to one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// The rule applied.
    pub rule: Rule,
    /// What the candidate needs, `None` where its kernel fact is absent.
    pub need: Option<u64>,
    /// The device's limit, `None` where the device does not report it.
    pub limit: Option<u64>,
    /// Whether the candidate passes (always, where either side is absent).
    pub passed: bool,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<u64>| v.map_or("absent".to_string(), |v| v.to_string());
        write!(
            f,
            "{}: needs {}, limit {} ({})",
            self.rule.name(),
            show(self.need),
            show(self.limit),
            if self.passed { "ok" } else { "pruned" }
        )
    }
}

/// Every check of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The candidate judged.
    pub candidate: ShapeCandidate,
    /// Its kernel's facts (shared memory, registers, ...).
    pub facts: KernelFacts,
    /// Every rule applied, in rule order.
    pub checks: Vec<Check>,
    /// Whether a launch of this shape must opt in to the larger shared limit.
    pub needs_opt_in: bool,
    /// Blocks of this shape one multiprocessor holds under the limits reported, where any
    /// multiprocessor limit is reported.
    pub resident_blocks: Option<u64>,
}

impl Verdict {
    /// The first check that pruned the candidate, `None` for a survivor.
    pub fn pruned_by(&self) -> Option<&Check> {
        self.checks.iter().find(|c| !c.passed)
    }

    /// Whether every check passed.
    pub fn survives(&self) -> bool {
        self.pruned_by().is_none()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pruned_by() {
            Some(c) => write!(f, "{} pruned by {c}", self.candidate.kernel),
            None => write!(
                f,
                "{} kept{}",
                self.candidate.kernel,
                if self.needs_opt_in {
                    " (with the shared opt-in)"
                } else {
                    ""
                }
            ),
        }
    }
}

/// A family judged at one problem on one device.
#[derive(Clone, Debug)]
pub struct ShapeFilter {
    /// The family's name.
    pub family: String,
    /// The problem it was judged at.
    pub problem: Problem,
    /// The device it was judged on.
    pub device: DeviceFacts,
    /// One verdict per candidate, in family order.
    pub verdicts: Vec<Verdict>,
}

impl ShapeFilter {
    /// Judges each candidate of `family` with its facts (`facts[i]` for candidate `i`;
    /// missing entries are all-absent).
    pub fn new(
        family: &ShapeFamily,
        problem: Problem,
        device: &DeviceFacts,
        facts: &[KernelFacts],
    ) -> ShapeFilter {
        let verdicts = family
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| judge(c, facts.get(i).cloned().unwrap_or_default(), device))
            .collect();
        ShapeFilter {
            family: family.name.clone(),
            problem,
            device: device.clone(),
            verdicts,
        }
    }

    /// Judges `family` on `program`'s device, reading each candidate's
    /// [`KernelFacts::measured`] (building its code now where it was not yet).
    ///
    /// A backend that records no code hash (the CPU, whose code is made where it runs) gets
    /// the hash of the kernel's verified IR instead, so that a store's build id still changes
    /// with the kernel.
    pub fn for_program(family: &ShapeFamily, problem: Problem, program: &Program) -> ShapeFilter {
        let facts: Vec<KernelFacts> = family
            .candidates
            .iter()
            .map(|c| {
                let mut f = KernelFacts::measured(program, &c.kernel, c.dynamic_shared_bytes);
                if f.code_hash.is_none() {
                    f.code_hash =
                        crate::hal::kernel_function(program.module(), &c.kernel).map(|function| {
                            use std::hash::{Hash, Hasher};
                            let mut h = std::collections::hash_map::DefaultHasher::new();
                            format!("{function:?}").hash(&mut h);
                            h.finish()
                        });
                }
                f
            })
            .collect();
        ShapeFilter::new(family, problem, program.device().facts(), &facts)
    }

    /// The candidates that passed every rule, in family order.
    pub fn survivors(&self) -> Vec<&Verdict> {
        self.verdicts.iter().filter(|v| v.survives()).collect()
    }

    /// The refusal of a family none of whose candidates fits (`XPU-L025`), naming the family,
    /// the problem and every verdict.
    pub fn refusal(&self) -> LaunchError {
        LaunchError::NoShapeFits {
            family: self.family.clone(),
            problem: self.problem.to_string(),
            verdicts: if self.verdicts.is_empty() {
                "the family has no candidates".to_string()
            } else {
                self.verdicts
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        }
    }
}

/// Every rule on one candidate.
fn judge(c: &ShapeCandidate, facts: KernelFacts, d: &DeviceFacts) -> Verdict {
    let threads = c.threads as u64;
    let regs = facts.registers_per_thread.map(|r| r as u64 * threads);
    let shared = facts.shared_bytes;
    let mut checks = Vec::new();
    let mut check = |rule, need: Option<u64>, limit: Option<u64>| {
        let passed = match (need, limit) {
            (Some(n), Some(l)) => n <= l,
            _ => true,
        };
        checks.push(Check {
            rule,
            need,
            limit,
            passed,
        });
    };
    let u = |v: Option<u32>| v.map(u64::from);
    check(
        Rule::DeviceCode,
        facts.has_code.map(|_| 1),
        facts.has_code.map(u64::from),
    );
    check(
        Rule::ThreadsPerBlock,
        Some(threads),
        u(d.max_threads_per_block),
    );
    check(
        Rule::KernelBlockLimit,
        Some(threads),
        u(facts.max_block_threads),
    );
    check(Rule::RegistersPerBlock, regs, u(d.registers_per_block));
    check(
        Rule::RegistersPerMultiprocessor,
        regs,
        u(d.registers_per_multiprocessor),
    );
    // Shared memory: against the default limit, and above it against the opt-in ceiling where
    // the device has one larger than the default.
    let optin = d
        .shared_bytes_per_block_optin
        .filter(|&o| d.shared_bytes_per_block.is_none_or(|s| o > s));
    let over_default = matches!((shared, d.shared_bytes_per_block), (Some(n), Some(l)) if n > l);
    let needs_opt_in = over_default && optin.is_some();
    if needs_opt_in {
        check(Rule::SharedPerBlockOptIn, shared, optin);
    } else {
        check(Rule::SharedPerBlock, shared, d.shared_bytes_per_block);
    }
    check(
        Rule::SharedPerMultiprocessor,
        shared,
        d.shared_bytes_per_multiprocessor,
    );
    check(
        Rule::ThreadsPerMultiprocessor,
        Some(threads),
        u(d.max_threads_per_multiprocessor),
    );
    // Residency: the tightest of the multiprocessor limits the device reports.
    let per = |limit: Option<u64>, need: Option<u64>| match (limit, need) {
        (Some(l), Some(n)) if n > 0 => Some(l / n),
        _ => None,
    };
    let resident = [
        u(d.max_blocks_per_multiprocessor),
        per(u(d.max_threads_per_multiprocessor), Some(threads)),
        per(u(d.registers_per_multiprocessor), regs),
        per(d.shared_bytes_per_multiprocessor, shared),
    ]
    .into_iter()
    .flatten()
    .min();
    check(Rule::BlocksPerMultiprocessor, Some(1), resident);
    // `need <= limit` reads the other way round for residency: one block must fit.
    if let Some(last) = checks.last_mut() {
        last.passed = resident.is_none_or(|r| r >= 1);
    }
    Verdict {
        candidate: c.clone(),
        facts,
        checks,
        needs_opt_in,
        resident_blocks: resident,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::Backend;

    fn cand(kernel: &str, threads: u32) -> ShapeCandidate {
        ShapeCandidate {
            kernel: kernel.into(),
            tile_m: 64,
            tile_n: 64,
            threads,
            k_block: 16,
            max_splits: 1,
            dynamic_shared_bytes: 0,
        }
    }

    #[test]
    fn problems_parse() {
        assert_eq!(
            Problem::parse("64x32x16"),
            Some(Problem {
                m: 64,
                n: 32,
                k: 16
            })
        );
        assert_eq!(Problem::parse("64x32"), None);
        assert_eq!(Problem::parse("64x0x1"), None);
        assert_eq!(Problem::parse("1x2x3x4"), None);
        assert_eq!(Problem::parse("ax2x3"), None);
    }

    #[test]
    fn residency_takes_the_tightest_reported_limit() {
        let fam = ShapeFamily {
            name: "f".into(),
            candidates: vec![cand("a", 256)],
        };
        let d = DeviceFacts {
            max_blocks_per_multiprocessor: Some(32),
            max_threads_per_multiprocessor: Some(2048),
            shared_bytes_per_multiprocessor: Some(100 << 10),
            ..DeviceFacts::unknown(Backend::Cuda)
        };
        let facts = KernelFacts {
            shared_bytes: Some(40 << 10),
            ..KernelFacts::default()
        };
        let f = ShapeFilter::new(&fam, Problem::parse("1x1x1").unwrap(), &d, &[facts]);
        assert_eq!(f.verdicts[0].resident_blocks, Some(2));
        assert!(f.verdicts[0].survives());
    }
}
