//! The reference interpreter: the oracle every backend is judged against (contract §2.5).
//!
//! It runs one kernel launch on the host, one work-item at a time: workgroups one after
//! another, shared memory per workgroup, private memory per work-item, barriers and wave
//! verbs as rendezvous, under deterministic scheduling. Its meaning of every construct is
//! `docs/semantics.md`, which is normative for every backend.
//!
//! - A construct it cannot give a meaning to is refused by name before anything runs
//!   ([`InterpError::Refused`], code `XPU-REF01`).
//! - Undefined behaviour it observes stops the launch at the first occurrence
//!   ([`InterpError::Ub`], code `XPU-REF02`): out-of-bounds accesses, data races, barrier
//!   divergence, reads of memory nothing wrote, broken `align` promises, integer division by
//!   zero, and non-uniform wave-collective operands ([`UbKind`]). Buffers keep what was
//!   written before it.
//!
//! # Using it (for the runtime seam and tests)
//!
//! ```
//! use xpu::interp::{self, Arg, Buffer, Geometry, InterpError, Options};
//! use xpu::ir::{Literal, Scalar};
//! let source = "kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
//!     let i: u32 = global_id.x;
//!     if i < n { y[i] = a * x[i] + y[i]; }
//! }";
//! let module = xpu::ir::verify(xpu::ir::parse(source).unwrap()).unwrap();
//! let mut y = Buffer::from_values(&[1.0f32; 256]);
//! let mut x = Buffer::from_values(&[2.0f32; 256]);
//! let mut args = [
//!     Arg::Buffer(&mut y),
//!     Arg::Buffer(&mut x),
//!     Arg::Scalar(Literal::float(3.0, Scalar::F32)),
//!     Arg::Scalar(Literal::int(256, Scalar::U32)),
//! ];
//! let geometry = Geometry::linear(2, 128); // 2 workgroups of 128 work-items
//! let report = interp::launch(&module, "saxpy", &geometry, &mut args, &Options::default())?;
//! assert_eq!(report.work_items, 256);
//! assert_eq!(y.to_values::<f32>()[0], 7.0);
//! # Ok::<(), InterpError>(())
//! ```
//!
//! A launch returns a [`Report`] (steps executed, work-items, wave width) or an
//! [`InterpError`]: `Refused` (`XPU-REF01`, a [`Diagnostic`](crate::ir::Diagnostic)), `Ub`
//! (`XPU-REF02`, a [`UbReport`] with the kind, kernel and helper, `line:col`, work-item and
//! details; [`UbReport::to_diagnostic`]), `BadLaunch` (arguments or geometry that do not fit)
//! or `StepLimit`. [`Buffer`]s carry a defined bit per byte: [`Buffer::uninit`] makes poison,
//! [`Buffer::from_values`] / [`Buffer::from_bytes`] defined memory.
//!
//! Scheduling is deterministic: the same module, arguments, geometry and options give the
//! same result, the same report and the same first UB. [`Options::shuffle_seed`] permutes the
//! order in which workgroups and work-items run (deterministically per seed) to expose code
//! whose result depends on it.
//!
//! Inside, a launch compiles the kernel and the helpers it reaches into slot bytecode
//! (`compile`), then runs it (`exec`) over memories with poison and race shadows (`memory`)
//! with the scalar semantics of `value`.

mod compile;
mod error;
mod exec;
mod memory;
mod value;

pub use error::{InterpError, UbKind, UbReport, WorkItem, REFUSED, UB};
pub use memory::{Buffer, Element};

use crate::ir::{Function, Handle, Literal, Type, VerifiedModule};
use exec::{Halt, Item, Machine};
use memory::Region;

/// The launch geometry: `grid` counts workgroups, `block` work-items per workgroup (x
/// fastest), `shared_bytes` sizes the kernel's dynamically sized shared array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Workgroups per dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup, per dimension.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory (0 when the kernel has no sized-at-launch array).
    pub shared_bytes: u32,
}

impl Geometry {
    /// `grid` workgroups of `block` work-items, no dynamic shared memory.
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        Geometry {
            grid,
            block,
            shared_bytes: 0,
        }
    }

    /// A one-dimensional launch.
    pub fn linear(groups: u32, block: u32) -> Self {
        Self::new([groups, 1, 1], [block, 1, 1])
    }
}

/// One kernel argument, in parameter order.
#[derive(Debug)]
pub enum Arg<'a> {
    /// For a `buf<..>` parameter. Its size must be a whole number of elements.
    Buffer(&'a mut Buffer),
    /// For a scalar parameter; the literal's type must be the parameter's.
    Scalar(Literal),
    /// For a vector parameter: one literal per lane.
    Vector(Vec<Literal>),
    /// For a `tag<Set>` parameter: the member index (out of range is allowed: dispatch
    /// through it does nothing).
    Tag(u32),
}

/// How to run a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The wave width (a power of two from 1 to 64). Default: the kernel's `@wave`, else 32.
    /// Giving one that contradicts the kernel's `@wave` refuses the launch.
    pub wave_width: Option<u32>,
    /// Shuffle the order in which workgroups and work-items run, deterministically for the
    /// seed. `None` runs them in order (x fastest).
    pub shuffle_seed: Option<u64>,
    /// Buffer parameters and shared arrays, by name, whose races are intended and not
    /// reported.
    pub allow_races: Vec<String>,
    /// The most work-item steps (bytecode instructions) the launch may execute.
    pub max_steps: Option<u64>,
    /// A cancellation flag, read at loop back-edges, calls, barriers and between workgroups:
    /// once it is nonzero the launch stops with [`InterpError::Cancelled`] (the launch
    /// deadline, [`crate::deadline`]). `None`: never cancelled.
    pub cancel: Option<Cancel>,
    /// Detect data races and reads of undefined memory (on by default). Off, the
    /// interpreter still checks bounds, alignment promises, division by zero, barrier
    /// divergence and wave uniformity, which cost nothing much and keep it memory-safe.
    pub checks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            wave_width: None,
            shuffle_seed: None,
            allow_races: Vec::new(),
            max_steps: None,
            cancel: None,
            checks: true,
        }
    }
}

/// A shared cancellation flag (see [`Options::cancel`]); equal when it is the same flag.
#[derive(Clone, Debug)]
pub struct Cancel(pub std::sync::Arc<std::sync::atomic::AtomicU32>);

impl PartialEq for Cancel {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Cancel {}

/// What a completed launch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Work-item steps (bytecode instructions) executed, over all work-items.
    pub steps: u64,
    /// Work-items run.
    pub work_items: u64,
    /// Workgroups run.
    pub workgroups: u64,
    /// The wave width the launch ran at.
    pub wave_width: u32,
    /// What the kernel's `print` statements printed, in work-item order (docs/semantics.md,
    /// "Print and assert"); a note line last where records past the buffer were dropped.
    pub printed: Vec<crate::ir::debug::PrintLine>,
    /// The first failed `assert` in work-item order. The launch ran to its end.
    pub assert_failed: Option<crate::ir::debug::AssertFailure>,
}

/// Runs `kernel` of `module` once over `geometry`. On undefined behaviour the launch stops at
/// the first occurrence, and the buffers keep what was written until then.
pub fn launch(
    module: &VerifiedModule,
    kernel: &str,
    geometry: &Geometry,
    args: &mut [Arg<'_>],
    options: &Options,
) -> Result<Report, InterpError> {
    let Some(h) = module.module().function(kernel) else {
        return Err(InterpError::BadLaunch(format!(
            "no kernel named `{kernel}`"
        )));
    };
    launch_handle(module, h, geometry, args, options)
}

/// [`launch`] by handle.
pub fn launch_handle(
    verified: &VerifiedModule,
    kernel: Handle<Function>,
    geometry: &Geometry,
    args: &mut [Arg<'_>],
    options: &Options,
) -> Result<Report, InterpError> {
    let module = verified.module();
    let Some(kf) = module.functions.try_get(kernel) else {
        return Err(InterpError::BadLaunch(format!("no function {kernel:?}")));
    };
    if !kf.is_kernel() {
        return Err(InterpError::BadLaunch(format!(
            "`{}` is a device helper, not a kernel",
            kf.name
        )));
    }
    let wave = wave_width(kf, options)?;
    let Geometry {
        grid,
        block,
        shared_bytes,
    } = *geometry;
    if grid.contains(&0) || block.contains(&0) {
        return Err(InterpError::BadLaunch(format!(
            "empty geometry: grid {grid:?}, block {block:?}"
        )));
    }
    // Saturating: three u32 dimensions multiply past 2^64.
    let vol = u64::from(block[0])
        .saturating_mul(u64::from(block[1]))
        .saturating_mul(u64::from(block[2]));
    let groups = u64::from(grid[0])
        .saturating_mul(u64::from(grid[1]))
        .saturating_mul(u64::from(grid[2]));
    // The race shadow numbers work-items in 30 bits.
    if vol.saturating_mul(groups) >= (1 << 30) - 1 {
        return Err(InterpError::BadLaunch(format!(
            "{} work-items; the interpreter runs fewer than 2^30 per launch",
            u128::from(vol) * u128::from(groups)
        )));
    }
    let prog = compile::compile(verified, kernel, options.checks)?;
    // Each work-item of a workgroup holds its frames at once; bound that (the sum of all
    // frames bounds the deepest call chain, as helpers do not recurse) rather than let a huge
    // private array exhaust the host's memory.
    let frames: u64 = prog.funcs.iter().map(|f| u64::from(f.frame)).sum();
    if frames.saturating_mul(vol) > 1 << 27 {
        return Err(InterpError::Memory {
            space: "private",
            need: frames.saturating_mul(vol).saturating_mul(8),
            limit: format!(
                "{vol} work-items of {frames} slots each: the interpreter holds 2^27 slots (1 GiB) per workgroup"
            ),
        });
    }

    // Arguments.
    if args.len() != kf.params.len() {
        return Err(InterpError::BadLaunch(format!(
            "`{}` takes {} arguments, {} given",
            kf.name,
            kf.params.len(),
            args.len()
        )));
    }
    let kc = &prog.funcs[0];
    let mut init = vec![0u64; kc.frame as usize];
    let cb = kc.const_base as usize;
    init[cb..cb + kc.consts.len()].copy_from_slice(&kc.consts);
    let mut bufs: Vec<Option<&mut Buffer>> = Vec::with_capacity(args.len());
    let mut buf_len = vec![0u64; args.len()];
    let mut tracked = vec![false; args.len()];
    for (i, (arg, p)) in args.iter_mut().zip(&kf.params).enumerate() {
        let bad = |what: &str| {
            Err(InterpError::BadLaunch(format!(
                "argument {} (`{}`): {what}",
                i + 1,
                p.name
            )))
        };
        let (slot, _) = kc.params[i];
        match (p.ty, arg) {
            (Type::Buffer { elem, access }, Arg::Buffer(b)) => {
                let size = u64::from(elem.size());
                let len = b.len() as u64;
                if len % size != 0 {
                    return bad(&format!(
                        "a buffer of {len} bytes is not a whole number of {size}-byte elements"
                    ));
                }
                if len / size > u64::from(u32::MAX) {
                    return bad("more than 2^32-1 elements");
                }
                buf_len[i] = len / size;
                tracked[i] = options.checks
                    && access == crate::ir::Access::ReadWrite
                    && !options.allow_races.contains(&p.name);
                bufs.push(Some(b));
                continue;
            }
            (Type::Scalar(s), Arg::Scalar(lit)) => {
                if lit.scalar() != s {
                    return bad(&format!(
                        "a {} value for a {} parameter",
                        lit.scalar().name(),
                        s.name()
                    ));
                }
                init[slot as usize] = literal_slot(*lit);
            }
            (Type::Vector(s, n), Arg::Vector(lits)) => {
                if lits.len() != usize::from(n) || lits.iter().any(|l| l.scalar() != s) {
                    return bad(&format!("{} lanes for a vec{n}<{}>", lits.len(), s.name()));
                }
                for (k, l) in lits.iter().enumerate() {
                    init[slot as usize + k] = literal_slot(*l);
                }
            }
            (Type::Tag(_), Arg::Tag(t)) => init[slot as usize] = u64::from(*t),
            (t, _) => return bad(&format!("the argument does not fit a parameter of {t:?}")),
        }
        bufs.push(None);
    }

    // What the launch allocates beyond its buffers (shared regions, race shadows), checked
    // against the host's available memory before any of it is made: within overcommit an
    // oversized allocation is granted and filled until the OOM killer ends the process.
    let mut host_need = 0u64;
    let mut shadow_need = 0u64;
    for (i, b) in bufs.iter().enumerate() {
        if let (Some(b), true) = (b, tracked[i]) {
            shadow_need = shadow_need.saturating_add(shadow_bytes(b.len() as u64, true));
        }
    }

    // Shared memory.
    let mut shared = Vec::new();
    let mut shared_len = Vec::new();
    for s in &prog.shared {
        let size = u64::from(s.elem.size());
        let len = match s.len {
            Some(n) => u64::from(n),
            None => u64::from(shared_bytes) / size,
        };
        if len * size > 1 << 30 {
            return Err(InterpError::Memory {
                space: "shared",
                need: len * size,
                limit: format!(
                    "shared array `{}`: the interpreter holds 1 GiB per array",
                    s.name
                ),
            });
        }
        let track = options.checks && !options.allow_races.contains(&s.name);
        // Its bytes, their defined mask and its shadow.
        let bytes = len * size;
        host_need = host_need
            .saturating_add(bytes + bytes.div_ceil(64) * 8)
            .saturating_add(shadow_bytes(bytes, track));
        // Allocated below, once the whole launch's need has been checked.
        shared.push(((len * size) as usize, track));
        shared_len.push(len);
    }

    let extra = host_need.saturating_add(shadow_need);
    if let Err(available) = match extra > 64 << 20 {
        true => crate::facts::check_host_memory(extra),
        false => Ok(()),
    } {
        let (space, need) = if shadow_need > host_need {
            ("race", shadow_need)
        } else {
            ("shared", host_need)
        };
        return Err(InterpError::Memory {
            space,
            need,
            limit: format!(
                "the host has {available} bytes available (the race shadow takes {} bytes per byte)",
                std::mem::size_of::<memory::Cell>()
            ),
        });
    }
    let shared: Vec<Region> = shared
        .into_iter()
        .map(|(bytes, track)| Region::shared(bytes, track))
        .collect();
    let mut regions: Vec<Region> = Vec::with_capacity(bufs.len());
    for (i, b) in bufs.iter_mut().enumerate() {
        regions.push(match b {
            Some(b) => Region::from_buffer(b, tracked[i]),
            None => Region::default(),
        });
    }
    let mut m = Machine {
        prog: &prog,
        kernel: kf.name.clone(),
        bufs: regions,
        buf_len,
        buf_names: kf.params.iter().map(|p| p.name.clone()).collect(),
        shared,
        shared_len,
        grid,
        block,
        wave,
        checks: options.checks,
        group: [0; 3],
        group_linear: 0,
        phase: 0,
        group_start: 0,
        seg_start: 0,
        wave_phase: Vec::new(),
        steps: 0,
        budget: options.max_steps.unwrap_or(u64::MAX),
        cancel: match &options.cancel {
            Some(c) => &c.0,
            None => &NEVER,
        },
        init,
        debug: (!prog.debug_sites.is_empty()).then(Box::default),
    };
    let result = run_groups(&mut m, vol as u32, groups as u32, options.shuffle_seed);
    // Hand the memory back whatever happened.
    let regions = std::mem::take(&mut m.bufs);
    for (region, b) in regions.into_iter().zip(bufs) {
        if let Some(b) = b {
            region.into_buffer(b);
        }
    }
    let decoded = m
        .debug
        .as_ref()
        .map(|d| crate::ir::debug::decode(&kf.name, &d.words, &prog.debug_sites, grid, block));
    match result {
        Ok(()) => {
            let (printed, assert_failed) = match decoded {
                Some(d) => {
                    let mut lines = d.lines;
                    if d.dropped {
                        lines.push(crate::ir::debug::dropped_note(&kf.name));
                    }
                    (lines, d.failed)
                }
                None => (Vec::new(), None),
            };
            Ok(Report {
                steps: m.steps,
                work_items: vol * groups,
                workgroups: groups,
                wave_width: wave,
                printed,
                assert_failed,
            })
        }
        Err(Halt::Ub(u)) => Err(InterpError::Ub(u)),
        Err(Halt::StepLimit) => Err(InterpError::StepLimit {
            kernel: kf.name.clone(),
            limit: m.budget,
        }),
        Err(Halt::Cancelled) => Err(InterpError::Cancelled {
            kernel: kf.name.clone(),
        }),
    }
}

/// Host bytes the race shadow of a region of `len` bytes takes (none when untracked).
fn shadow_bytes(len: u64, track: bool) -> u64 {
    if track {
        len.saturating_mul(std::mem::size_of::<memory::Cell>() as u64)
    } else {
        0
    }
}
/// The flag of a launch that cannot be cancelled.
static NEVER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn wave_width(kf: &Function, options: &Options) -> Result<u32, InterpError> {
    let declared = kf.attrs.wave.map(|(w, _)| w);
    let w = match (options.wave_width, declared) {
        (Some(o), Some(d)) if o != d => {
            return Err(InterpError::BadLaunch(format!(
                "`{}` declares @wave({d}) but the launch asks for wave width {o}",
                kf.name
            )))
        }
        (Some(w), _) | (None, Some(w)) => w,
        (None, None) => 32,
    };
    if !w.is_power_of_two() || w > 64 {
        return Err(InterpError::BadLaunch(format!(
            "wave width {w}; it is a power of two from 1 to 64"
        )));
    }
    Ok(w)
}

use compile::literal_slot;

/// SplitMix64: a small, good, dependency-free generator for the shuffle option.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle(&mut self, v: &mut [u32]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

fn run_groups(m: &mut Machine<'_>, vol: u32, groups: u32, seed: Option<u64>) -> Result<(), Halt> {
    let mut rng = seed.map(SplitMix);
    let mut group_order: Vec<u32> = (0..groups).collect();
    if let Some(r) = rng.as_mut() {
        r.shuffle(&mut group_order);
    }
    let mut items: Vec<Item> = (0..vol).map(|_| Item::new()).collect();
    let mut order: Vec<u32> = (0..vol).collect();
    let mut rank: Vec<u32> = (0..vol).collect();
    for g in group_order {
        m.check_cancel()?;
        if let Some(r) = rng.as_mut() {
            r.shuffle(&mut order);
            for (k, &l) in order.iter().enumerate() {
                rank[l as usize] = k as u32;
            }
        }
        m.group_linear = g;
        m.group = [
            g % m.grid[0],
            g / m.grid[0] % m.grid[1],
            g / (m.grid[0] * m.grid[1]),
        ];
        m.phase = m.phase.wrapping_add(1);
        m.group_start = m.phase;
        m.new_segment(vol);
        for s in &mut m.shared {
            s.reset();
        }
        m.run_group(&mut items, &order, &rank)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
