//! When a launch runs its kernel's coarsened variant ([`crate::ir::coarsen`]): each
//! work-item doing the work of [`FACTOR`] work-items of consecutive workgroups.
//!
//! GPU backends ask for it ([`super::DeviceImpl::coarsens`]) and get it on launches large
//! enough that a quarter of the work-items still fill the device several times over, of
//! kernels without loops (streaming kernels, where it was measured to pay); the CPU
//! and the interpreter never do (their work-item loops are already the coarsening). The
//! variant is built once per program and kernel, through the backend's own `load`, so its
//! device code is cached like any kernel's.
//!
//! `CAJETA_XPU_COARSEN` overrides the choice: `off` never coarsens, `force` coarsens every
//! eligible launch of two or more workgroups along x on every backend (the tests run the
//! file tests this way, so the pass is checked against the interpreter's expectations), and
//! `auto` (or unset) is the default above.

use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::{DeviceImpl, KernelImpl, ProgramImpl};
use crate::ir::{coarsen, FunctionInfo, VerifiedModule};
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

/// The coarsened variant of `kernel` in `module` on `device`, or `None` where the kernel is
/// not eligible. A variant that fails verification is a bug of the pass, reported as such.
pub fn variant(
    device: &dyn DeviceImpl,
    module: &VerifiedModule,
    kernel: &str,
) -> Result<Option<Arc<dyn KernelImpl>>, LaunchError> {
    let Some(handle) = module.kernel(kernel) else {
        return Ok(None);
    };
    let Ok(function) = coarsen::coarsen(module, handle, FACTOR) else {
        return Ok(None);
    };
    let no_code = |reason: String| LaunchError::NoCode {
        kernel: kernel.to_string(),
        backend: device.backend(),
        reason,
    };
    let name = function.name.clone();
    let (extended, h) = module.with_function(function).map_err(|d| {
        no_code(format!(
            "its coarsened variant failed verification (a bug of the pass): {}",
            d.render(kernel)
        ))
    })?;
    let extended = Arc::new(extended);
    let program: Arc<dyn ProgramImpl> = device
        .load(&extended)
        .map_err(|e| no_code(format!("loading its coarsened variant: {e}")))?;
    program.kernel(&name, extended.function(h)).map(Some)
}

/// The coarsened launch of `launch`: `ceil(grid.x / FACTOR)` workgroups along x.
pub fn launch_of(launch: &Launch) -> Launch {
    let mut l = *launch;
    l.grid[0] = launch.grid[0].div_ceil(FACTOR);
    l
}
