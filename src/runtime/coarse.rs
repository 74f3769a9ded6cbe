//! When a launch runs its kernel's coarsened variant ([`crate::ir::coarsen`]): each
//! work-item doing the work of [`FACTOR`] work-items of consecutive workgroups.
//!
//! GPU backends ask for it ([`crate::hal::DeviceImpl::coarsens`]) and get it on launches large
//! enough that a quarter of the work-items still fill the device several times over, of
//! kernels without loops (streaming kernels, where it was measured to pay); the CPU
//! and the interpreter never do (their work-item loops are already the coarsening). The
//! variants are made when a program is loaded ([`variants`]): the device loads the module
//! extended with them, so their device code is built lazily and cached like any kernel's, and
//! a launch only picks one.
//!
//! `CAJETA_XPU_COARSEN` overrides the choice: `off` never coarsens, `force` coarsens every
//! eligible launch of two or more workgroups along x on every backend (the tests run the
//! file tests this way, so the pass is checked against the interpreter's expectations), and
//! `auto` (or unset) is the default above.

use crate::hal::facts::DeviceFacts;
use crate::hal::launch::Launch;
use crate::hal::DeviceImpl;
use crate::ir::{coarsen, Function, FunctionInfo, Handle, VerifiedModule};
use std::collections::HashMap;
use std::sync::Arc;

/// Work-items of the original launch per work-item of a coarsened one. On an H200 a saxpy
/// moved 0.82 of a device copy's bandwidth at one element per thread, 1.01 at two, 1.03 at
/// four and 1.04 at eight (benches/peers/cuda/shapes.py); four keeps the register cost low.
pub const FACTOR: u32 = 4;

pub use crate::hal::Mode;

/// The `CAJETA_XPU_COARSEN` setting (read once per process); a value that is none of
/// `off auto force` is an error.
pub fn mode() -> Result<Mode, crate::config::BadValue> {
    crate::config::get().coarsen.clone()
}

/// Whether `launch` of `kernel` should run coarsened on `device` (the kernel's eligibility
/// aside). `auto` leaves kernels with loops alone: their work per element is not a single
/// memory round trip, and coarsening them was not measured to help (`force` still does).
pub fn wanted(mode: Mode, device: &dyn DeviceImpl, kernel: &FunctionInfo, launch: &Launch) -> bool {
    match mode {
        Mode::Off => false,
        Mode::Force => launch.grid[0] >= 2,
        Mode::Auto => device.coarsens() && large(device.facts(), launch) && !kernel.has_loop,
    }
}

/// A launch whose coarsened form still has four full device loads of work-items (or, where
/// the device does not say how many it holds, 4M work-items).
fn large(facts: &DeviceFacts, launch: &Launch) -> bool {
    let groups =
        launch.grid[0] as u64 / FACTOR as u64 * launch.grid[1] as u64 * launch.grid[2] as u64;
    let items = groups * launch.threads_per_block();
    let resident = match (facts.multiprocessors, facts.max_threads_per_multiprocessor) {
        (Some(m), Some(t)) => m as u64 * t as u64,
        _ => 1 << 20,
    };
    items >= 4 * resident
}

/// The coarsened variants of a program, made when it is loaded on a device that coarsens
/// (or under `CAJETA_XPU_COARSEN=force`): the module extended with one variant per eligible
/// kernel, which the device loads in the program's place (its code is still built per kernel,
/// lazily), and each kernel's variant name. A launch then only picks a kernel.
#[derive(Default)]
pub struct Variants {
    /// The module the device loaded: the program's own, or it extended with the variants.
    pub loaded: Option<Arc<VerifiedModule>>,
    /// Kernel name → its variant's function in `loaded`.
    pub by_kernel: HashMap<String, Handle<Function>>,
    /// Why the variants could not be made (a bug of the pass, reported by the launches that
    /// would have used one).
    pub failure: Option<String>,
}

/// Whether a program loaded on `device` gets coarsened variants: never under `off`, always
/// under `force`, on devices that coarsen under `auto`. A malformed setting makes none (the
/// launch reports it).
pub fn made_at_load(device: &dyn DeviceImpl) -> bool {
    match mode() {
        Ok(Mode::Off) | Err(_) => false,
        Ok(Mode::Force) => true,
        Ok(Mode::Auto) => device.coarsens(),
    }
}

/// The variants of every eligible kernel of `module` (see [`Variants`]).
pub fn variants(module: &Arc<VerifiedModule>) -> Variants {
    let mut names = Vec::new();
    let mut functions = Vec::new();
    for (handle, f) in module.kernels() {
        if let Ok(v) = coarsen::coarsen(module, handle, FACTOR) {
            names.push(f.name.clone());
            functions.push(v);
        }
    }
    if functions.is_empty() {
        return Variants::default();
    }
    match module.with_functions(functions) {
        Ok((extended, handles)) => Variants {
            loaded: Some(Arc::new(extended)),
            by_kernel: names.into_iter().zip(handles).collect(),
            failure: None,
        },
        Err(d) => Variants {
            failure: Some(format!(
                "its coarsened variant failed verification (a bug of the pass): {}",
                d.render("coarsened variants")
            )),
            ..Variants::default()
        },
    }
}

/// The coarsened launch of `launch`: `ceil(grid.x / FACTOR)` workgroups along x.
pub fn launch_of(launch: &Launch) -> Launch {
    let mut l = *launch;
    l.grid[0] = launch.grid[0].div_ceil(FACTOR);
    l
}
