//! The build for declared backends and its gates (contract §3.4, §3.6, §4): `xpu build FILE...
//! --backends cpu,cuda,amdgpu,vulkan`.
//!
//! [`build_file`] lowers every kernel of a file (every template instance) for every declared
//! [`Target`], then judges each (kernel, target) by the four gates of §3.6 and returns a
//! [`Build`]: the device code and manifest of every kernel that has code ([`BuiltKernel`], the
//! seam a bundle writer consumes) and one [`Line`] per gate finding, each printed as
//! `path:line:col: error[xpu-kernel-…]: kernel K on TARGET: …`. A build with any error line
//! fails under one summary error, `CAJETA_ERROR_XPU_KERNEL_GATE`, after every offender is
//! listed.
//!
//! The gates:
//!
//! - `[xpu-kernel-skipped]`: no device code for a declared target, with the lowering's code and
//!   reason (refused by name, `XPU-L001`/`XPU-N..`/`XPU-L011`, ...).
//! - `[xpu-kernel-unbounded]`: on `cuda` and `amdgpu`, whose compilers budget registers for the
//!   largest block a kernel may get, a kernel with neither a pinned block (`@block`, or one
//!   derived from the file's run blocks) nor a declared ceiling (`@occupancy(max_threads |
//!   max_waves)`). The CPU compiles per launch block and Vulkan's workgroup size is a
//!   specialisation constant, so neither has a budget to get wrong.
//! - `[xpu-kernel-spill]`: scratch on NVPTX (`ptxas -v`: stack frame or spill stores) or AMDGPU
//!   (private segment), diagnosed three ways ([`diagnose`]).
//! - `[xpu-kernel-hung]`: a CPU compile past `CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S` (600 s);
//!   the compile runs on a worker thread that the build abandons at the deadline.
//!
//! The escapes (§3.6): `@unlowered(backend, tracked)` turns that backend's skipped, spill and
//! hung lines into notes tagged `[tracked: ITEM]`, and a held kernel that lowers and passes is
//! `STALE` (an error until the declaration goes) unless `may_lower = true`; `hold = true`
//! skips lowering altogether (and the runtime refuses the launch, `XPU-L019`);
//! `host_wave_below = N` holds on the CPU only on a host narrower than `N` lanes;
//! `@unbounded(tracked)` turns the unbounded line into a note. `CAJETA_XPU_KERNEL_GATE=warn`
//! demotes every error line to a warning. A machine without `ptxas` or `ld.lld` gets one note
//! per target, never a gate failure.

pub mod diagnose;
mod targets;

use crate::hal::manifest::KernelManifest;
use crate::ir::text::run::RunSpec;
use crate::ir::{Diagnostics, Function, Module, Span, VerifiedModule};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Codes of the gate family (`docs/errors.md`, "Gates").
pub mod codes {
    /// The summary error of a build whose gates failed (contract §3.6).
    pub const KERNEL_GATE: &str = "CAJETA_ERROR_XPU_KERNEL_GATE";
    /// `[xpu-kernel-unbounded]`: neither a pinned block nor a declared ceiling.
    pub const UNBOUNDED: &str = "XPU-G003";
    /// `[xpu-kernel-spill]`: scratch on NVPTX or AMDGPU.
    pub const SPILL: &str = "XPU-G004";
    /// `[xpu-kernel-hung]`: a CPU compile past its deadline.
    pub const HUNG: &str = "XPU-G005";
    /// `STALE`: an `@unlowered` hold on a kernel that now lowers and passes.
    pub const STALE: &str = "XPU-G006";
    /// A note: a hold with `hold = true` skipped lowering.
    pub const HELD: &str = "XPU-G007";
    /// A note: no assembler or linker, so the spill gate is not judged on that target.
    pub const NO_TOOL: &str = "XPU-G008";
    /// A note: a block pinned from the file's run blocks.
    pub const PINNED: &str = "XPU-G009";
    /// `[mma-tiering]`: the tier a cooperative-matrix multiply took, once per distinct
    /// (type, shape, backend) of a build (contract §3.3).
    pub const MMA_TIERING: &str = "XPU-N02";
}

/// A backend `xpu build` can declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The host CPU (Cranelift).
    Cpu,
    /// NVIDIA GPUs (PTX from LLVM's NVPTX).
    Cuda,
    /// AMD GPUs (code objects from LLVM's AMDGPU).
    Amdgpu,
    /// Vulkan devices (SPIR-V).
    Vulkan,
}

impl Target {
    /// Every target, in the order `--backends` lists them.
    pub const ALL: [Target; 4] = [Target::Cpu, Target::Cuda, Target::Amdgpu, Target::Vulkan];

    /// The name `--backends` takes and gate lines print.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
            Target::Amdgpu => "amdgpu",
            Target::Vulkan => "vulkan",
        }
    }

    /// The backend's name in `@unlowered(backend = ...)` (AMDGPU is `hip` there).
    pub fn unlowered_name(self) -> &'static str {
        match self {
            Target::Amdgpu => "hip",
            t => t.name(),
        }
    }

    /// `cpu`, `cuda`, `amdgpu` (or `hip`), `vulkan`.
    pub fn from_name(name: &str) -> Option<Target> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cpu" => Some(Target::Cpu),
            "cuda" => Some(Target::Cuda),
            "amdgpu" | "hip" => Some(Target::Amdgpu),
            "vulkan" => Some(Target::Vulkan),
            _ => None,
        }
    }

    /// Whether this binary can lower for the target (`cuda` and `amdgpu` need the `cuda` and
    /// `hip` features).
    pub fn available(self) -> bool {
        match self {
            Target::Cpu | Target::Vulkan => true,
            Target::Cuda => cfg!(feature = "cuda"),
            Target::Amdgpu => cfg!(feature = "hip"),
        }
    }

    /// Whether the target's compiler budgets registers for the largest block (§3.4), so that
    /// the unbounded gate applies.
    pub fn budgets_block(self) -> bool {
        matches!(self, Target::Cuda | Target::Amdgpu)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the four gates of §3.6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// `[xpu-kernel-skipped]`: no device code for a declared target.
    Skipped,
    /// `[xpu-kernel-unbounded]`: a GPU kernel with no pinned block and no declared ceiling.
    Unbounded,
    /// `[xpu-kernel-spill]`: the kernel uses scratch memory (register spills, a stack frame).
    Spill,
    /// `[xpu-kernel-hung]`: the CPU compile ran past its deadline.
    Hung,
    /// `[mma-tiering]`: a note naming a cooperative-matrix multiply's tier (contract §3.3).
    MmaTiering,
}

impl Gate {
    /// The contract's tag (`xpu-kernel-skipped`, ...).
    pub fn tag(self) -> &'static str {
        match self {
            Gate::Skipped => "xpu-kernel-skipped",
            Gate::Unbounded => "xpu-kernel-unbounded",
            Gate::Spill => "xpu-kernel-spill",
            Gate::Hung => "xpu-kernel-hung",
            Gate::MmaTiering => "mma-tiering",
        }
    }
}

/// How a line counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Fails the build.
    Error,
    /// An error demoted by `CAJETA_XPU_KERNEL_GATE=warn`.
    Warning,
    /// Informational: a tracked hold, a missing tool, a derived pin.
    Note,
}

impl Level {
    /// The level as printed: `error`, `warning` or `note`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
        }
    }
}

/// One finding of the build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The file the line is about.
    pub path: String,
    /// Where in the file.
    pub span: Span,
    /// Whether it fails the build.
    pub level: Level,
    /// The gate the line belongs to; `None` for a note about the build itself (no assembler,
    /// a derived pin).
    pub gate: Option<Gate>,
    /// The kernel (or template instance) and target, where the line is about one.
    pub kernel: Option<String>,
    /// The target, where the line is about one.
    pub target: Option<Target>,
    /// The code behind the line: the lowering's refusal code for `skipped`, `XPU-G...` for
    /// the others.
    pub code: String,
    /// The finding, in one sentence.
    pub message: String,
    /// The plan item of the declaration that holds the line (`@unlowered`/`@unbounded`).
    pub tracked: Option<String>,
    /// A hold that no longer holds anything (§3.6 `STALE`).
    pub stale: bool,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = self.gate.map_or("xpu-kernel-build", Gate::tag);
        write!(
            f,
            "{}:{}:{}: {}[{tag}]: ",
            self.path,
            self.span.line,
            self.span.col,
            self.level.name()
        )?;
        match (&self.kernel, self.target) {
            (Some(k), Some(t)) => write!(f, "kernel {k} on {t}: ")?,
            (Some(k), None) => write!(f, "kernel {k}: ")?,
            (None, Some(t)) => write!(f, "{t}: ")?,
            (None, None) => {}
        }
        if self.stale {
            f.write_str("STALE: ")?;
        }
        write!(f, "{} ({})", self.message, self.code)?;
        if let Some(t) = &self.tracked {
            write!(f, " [tracked: {t}]")?;
        }
        Ok(())
    }
}

/// The device code of one kernel on one target: what a bundle carries.
#[derive(Clone, Debug)]
pub struct BuiltKernel {
    /// The kernel's registered name (`k`, `QkTile<64,64,32,32,128>`).
    pub kernel: String,
    /// The target the code is for.
    pub target: Target,
    /// The processor (`sm_90`, `gfx90a`); `None` on the CPU and Vulkan.
    pub arch: Option<String>,
    /// What [`BuiltKernel::code`] holds.
    pub format: CodeFormat,
    /// The device code: PTX text, a linked AMDGPU code object (or the relocatable object
    /// where no linker was found), SPIR-V words little-endian; empty for the CPU, whose
    /// Cranelift code is made where it runs (a bundle carries the module's IR for it).
    pub code: Vec<u8>,
    /// The manifest the code was built with.
    pub manifest: KernelManifest,
}

/// What [`BuiltKernel::code`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeFormat {
    /// PTX text.
    Ptx,
    /// A linked AMDGPU code object (`.hsaco`).
    Hsaco,
    /// A relocatable AMDGPU object (no linker here).
    AmdgpuObject,
    /// SPIR-V words, little-endian.
    Spirv,
    /// The CPU: no portable code (Cranelift compiles on the host that runs it); the manifest
    /// holds this host's build.
    HostMachineCode,
}

impl CodeFormat {
    /// The format's name (`ptx`, `hsaco`, `amdgpu-object`, `spirv`, `host-machine-code`).
    pub fn name(self) -> &'static str {
        match self {
            CodeFormat::Ptx => "ptx",
            CodeFormat::Hsaco => "hsaco",
            CodeFormat::AmdgpuObject => "amdgpu-object",
            CodeFormat::Spirv => "spirv",
            CodeFormat::HostMachineCode => "host-machine-code",
        }
    }
}

/// What the build is for.
#[derive(Clone, Debug)]
pub struct Options {
    /// The targets to build for.
    pub targets: Vec<Target>,
    /// `--arch` for `cuda` (`sm_90`, the default).
    pub cuda_arch: String,
    /// `--arch` for `amdgpu` (`gfx90a`, the default).
    pub amdgpu_arch: String,
    /// `CAJETA_XPU_KERNEL_GATE=warn`.
    pub warn: bool,
    /// `CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S`.
    pub cpu_deadline: Duration,
}

impl Options {
    /// `targets` with the defaults and the environment's settings (a malformed value is an
    /// error naming the variable).
    pub fn new(targets: Vec<Target>) -> Result<Options, crate::config::BadValue> {
        let c = crate::config::get();
        Ok(Options {
            targets,
            cuda_arch: "sm_90".into(),
            amdgpu_arch: "gfx90a".into(),
            warn: c.kernel_gate_warn.clone()?,
            cpu_deadline: c.cpu_vectorize_deadline.clone()?,
        })
    }
}

/// The result of building one or more files.
#[derive(Clone, Debug, Default)]
pub struct Build {
    /// Every (kernel, target) that has device code, in file, kernel and target order.
    pub kernels: Vec<BuiltKernel>,
    /// Every finding, in the same order.
    pub lines: Vec<Line>,
}

impl Build {
    /// Lines that fail the build.
    pub fn errors(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.level == Level::Error)
            .count()
    }

    /// Lines demoted to warnings.
    pub fn warnings(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.level == Level::Warning)
            .count()
    }

    /// Whether any line fails the build.
    pub fn failed(&self) -> bool {
        self.errors() > 0
    }

    /// The summary line: `error[CAJETA_ERROR_XPU_KERNEL_GATE]: ...` when any gate failed, a
    /// warning of the same code when every failure was demoted, `None` otherwise.
    pub fn summary(&self) -> Option<String> {
        let kernels = |level| {
            let mut ks: Vec<(&str, Target)> = self
                .lines
                .iter()
                .filter(|l| l.level == level)
                .filter_map(|l| Some((l.kernel.as_deref()?, l.target?)))
                .collect();
            ks.sort();
            ks.dedup();
            ks.len()
        };
        if self.failed() {
            Some(format!(
                "error[{}]: {} gate failure(s) in {} (kernel, backend) pair(s); every offender is listed above",
                codes::KERNEL_GATE,
                self.errors(),
                kernels(Level::Error)
            ))
        } else if self.warnings() > 0 {
            Some(format!(
                "warning[{}]: {} gate failure(s) in {} (kernel, backend) pair(s), demoted by CAJETA_XPU_KERNEL_GATE=warn",
                codes::KERNEL_GATE,
                self.warnings(),
                kernels(Level::Warning)
            ))
        } else {
            None
        }
    }

    /// Appends `other`'s kernels and lines.
    pub fn extend(&mut self, other: Build) {
        self.kernels.extend(other.kernels);
        self.lines.extend(other.lines);
    }
}

/// Builds the kernel file `src` (named `path` in lines) for `opts.targets`: parses it, pins
/// each kernel its run blocks launch with one constant block ([`pin_from_runs`]), verifies
/// it, and lowers and judges every kernel on every target. A file that does not parse or
/// verify is its diagnostics.
pub fn build_file(path: &str, src: &str, opts: &Options) -> Result<Build, Diagnostics> {
    let (mut module, runs) = crate::ir::parse_file(src)?;
    let pinned = pin_from_runs(&mut module, &runs);
    let module = Arc::new(module.verify()?);
    let mut build = build_module(path, &module, opts);
    for (kernel, block, span) in pinned {
        build.lines.insert(
            0,
            Line {
                path: path.to_string(),
                span,
                level: Level::Note,
                gate: None,
                kernel: Some(kernel),
                target: None,
                code: codes::PINNED.into(),
                message: format!(
                    "block {block:?} pinned: every run block of the file launches it with that block"
                ),
                tracked: None,
                stale: false,
            },
        );
    }
    Ok(build)
}

/// Pins (§3.4) each plain kernel without `@block` whose run blocks all launch it with one
/// block, where that block fits its declared `max_threads`: sets its `@block` and returns
/// `(kernel, block, kernel span)` for each. Template instances are not pinned this way (their
/// `@block` is the template's).
pub fn pin_from_runs(module: &mut Module, runs: &[RunSpec]) -> Vec<(String, [u32; 3], Span)> {
    let mut out = Vec::new();
    let handles: Vec<_> = module.functions.handles().collect();
    for h in handles {
        let f = &mut module.functions[h];
        if !f.is_kernel() || f.template.is_some() || f.attrs.block.is_some() {
            continue;
        }
        let mut blocks = runs.iter().filter(|r| r.kernel == f.name).map(|r| r.block);
        let Some(first) = blocks.next() else { continue };
        if blocks.any(|b| b != first) || first.contains(&0) {
            continue;
        }
        let volume: u64 = first.iter().map(|&d| d as u64).product();
        let ceiling = f
            .attrs
            .occupancy
            .as_ref()
            .and_then(|o| o.max_threads)
            .and_then(|h| crate::ir::template::eval_const(f, h, None).ok());
        if ceiling.is_some_and(|c| volume > c as u64) || volume > 1 << 31 {
            continue;
        }
        f.attrs.block = Some((first, f.span));
        out.push((f.name.clone(), first, f.span));
    }
    out
}

/// What lowering one kernel for one target gave.
pub(crate) enum Lowered {
    Code {
        built: Box<BuiltKernel>,
        /// AMDGPU's VGPR + SGPR spill count, from the kernel descriptor.
        spill_count: Option<u32>,
    },
    /// No code: the lowering's code and reason.
    Refused { code: String, reason: String },
    /// The CPU compile did not finish within the deadline.
    Hung { deadline: Duration },
}

/// Judges every kernel of `module` (verified) on every target of `opts`.
pub fn build_module(path: &str, module: &Arc<VerifiedModule>, opts: &Options) -> Build {
    let mut build = Build::default();
    let mut tools = targets::Tools::default();
    let host_wave = crate::codegen::cpu::host_simd_width();
    let line = |span: Span, level, gate, kernel: &str, target, code: &str, message: String| Line {
        path: path.to_string(),
        span,
        level,
        gate: Some(gate),
        kernel: Some(kernel.to_string()),
        target: Some(target),
        code: code.to_string(),
        message,
        tracked: None,
        stale: false,
    };
    // (target, operation) pairs already reported by an `[mma-tiering]` note.
    let mut tiering: Vec<(Target, String)> = Vec::new();
    for (h, f) in module.kernels() {
        for &target in &opts.targets {
            let hold = f
                .attrs
                .unlowered
                .iter()
                .find(|u| u.active(target.unlowered_name(), host_wave));
            if let Some(u) = hold.filter(|u| u.hold) {
                let mut l = line(
                    u.span,
                    Level::Note,
                    Gate::Skipped,
                    &f.name,
                    target,
                    codes::HELD,
                    "held by @unlowered(hold = true): not lowered, and a launch is refused (XPU-L019)"
                        .into(),
                );
                l.tracked = Some(u.tracked.clone());
                build.lines.push(l);
                continue;
            }
            if target.budgets_block() {
                if let Some(message) = unbounded(f) {
                    let mut l = line(
                        f.span,
                        Level::Error,
                        Gate::Unbounded,
                        &f.name,
                        target,
                        codes::UNBOUNDED,
                        message,
                    );
                    if let Some((t, _)) = &f.attrs.unbounded {
                        l.level = Level::Note;
                        l.tracked = Some(t.clone());
                    }
                    build.lines.push(l);
                }
            }
            let mut found = Vec::new();
            match targets::lower(module, h, target, opts, &mut tools, path, &mut build.lines) {
                Lowered::Code { built, spill_count } => {
                    for op in built.manifest.native_ops.iter() {
                        let key = (target, op.op.clone());
                        if !op.op.starts_with("matrix_mma") || tiering.contains(&key) {
                            continue;
                        }
                        tiering.push(key);
                        build.lines.push(line(
                            f.span,
                            Level::Note,
                            Gate::MmaTiering,
                            &f.name,
                            target,
                            codes::MMA_TIERING,
                            format!("{} takes the {} tier ({})", op.op, op.tier, op.instruction),
                        ));
                    }
                    if let Some(message) = diagnose::spill(f, &built, spill_count) {
                        found.push(line(
                            f.span,
                            Level::Error,
                            Gate::Spill,
                            &f.name,
                            target,
                            codes::SPILL,
                            message,
                        ));
                    }
                    build.kernels.push(*built);
                }
                Lowered::Refused { code, reason } => found.push(line(
                    f.span,
                    Level::Error,
                    Gate::Skipped,
                    &f.name,
                    target,
                    &code,
                    format!("no device code: {reason}"),
                )),
                Lowered::Hung { deadline } => found.push(line(
                    f.span,
                    Level::Error,
                    Gate::Hung,
                    &f.name,
                    target,
                    codes::HUNG,
                    format!(
                        "the CPU compile did not finish within {} s (CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S) and was abandoned",
                        crate::deadline::format_seconds(deadline)
                    ),
                )),
            }
            match hold {
                Some(u) if !found.is_empty() => {
                    for l in &mut found {
                        l.level = Level::Note;
                        l.tracked = Some(u.tracked.clone());
                    }
                }
                Some(u) if !u.may_lower => {
                    let mut l = line(
                        u.span,
                        Level::Error,
                        Gate::Skipped,
                        &f.name,
                        target,
                        codes::STALE,
                        "held by @unlowered, but the kernel now lowers and passes every gate; remove the declaration".into(),
                    );
                    l.tracked = Some(u.tracked.clone());
                    l.stale = true;
                    found.push(l);
                }
                _ => {}
            }
            build.lines.extend(found);
        }
    }
    if opts.warn {
        for l in &mut build.lines {
            if l.level == Level::Error {
                l.level = Level::Warning;
            }
        }
    }
    build
}

/// Why `f` fails the unbounded gate, or `None`: a pinned block, `max_threads` or `max_waves`
/// bounds it.
fn unbounded(f: &Function) -> Option<String> {
    let declared = f
        .attrs
        .occupancy
        .as_ref()
        .is_some_and(|o| o.max_threads.is_some() || o.max_waves.is_some());
    if f.attrs.block.is_some() || declared {
        return None;
    }
    Some(
        "no pinned block (@block, or one constant block in every run block of the file) and no declared ceiling (@occupancy(max_threads = N) or max_waves): the compiler budgets registers for the largest block the device allows"
            .into(),
    )
}
