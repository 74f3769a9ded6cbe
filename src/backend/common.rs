//! What every backend's host code needs alike: the range check of a copy or view, the
//! downcast of a seam object to the backend's own type, and a read that has already completed.

use crate::hal::launch::LaunchError;
use crate::hal::{DeviceError, ReadTicket};
use crate::ir::{Function, Len, Type, VerifiedModule};
use std::any::Any;

/// Bytes of private arrays one work-item may hold on a GPU: a thread's local memory on
/// NVIDIA (512 KiB on every architecture since sm_20, CUDA's programming guide), taken as the
/// bound on AMD and Vulkan GPUs too, whose drivers may refuse less at launch.
pub const PRIVATE_BYTES_GPU: u64 = 512 << 10;

/// Bytes of private arrays one work-item of `kernel` holds at most: its own and every
/// helper's of the module (helpers are inlined; an upper bound), in 64 bits.
pub fn private_bytes(module: &VerifiedModule, kernel: &Function) -> u64 {
    let arrays = |f: &Function| -> u64 {
        f.locals
            .iter()
            .map(|(_, l)| match l.ty {
                Type::Array {
                    elem,
                    len: Len::Fixed(n),
                } => n as u64 * elem.size() as u64,
                _ => 0,
            })
            .fold(0u64, u64::saturating_add)
    };
    let helpers = module
        .module()
        .functions
        .iter()
        .filter(|(_, f)| !f.is_kernel())
        .map(|(_, f)| arrays(f))
        .fold(0u64, u64::saturating_add);
    arrays(kernel).saturating_add(helpers)
}

/// Refuses `kernel` (`XPU-L017`) when its private arrays exceed `limit` bytes per work-item,
/// before any code is made for it: a device compiler may crash on such an array (lavapipe's
/// did) or, where the array is optimised away, a launch would pass that another kernel of
/// the same size fails (CUDA ran a 16 GiB private array whose stores were forwarded).
pub fn check_private(
    name: &str,
    module: &VerifiedModule,
    kernel: &Function,
    limit: u64,
    backend: &str,
) -> Result<(), LaunchError> {
    let need = private_bytes(module, kernel);
    if need > limit {
        return Err(LaunchError::PrivateMemory {
            kernel: name.to_string(),
            need,
            limit: format!(
                "{backend} allows {limit} bytes of private arrays per work-item on this device"
            ),
        });
    }
    Ok(())
}

/// `len` bytes at `offset` must lie inside an allocation of `size` bytes (`what` names the
/// operation in the error).
pub fn check_range(what: &str, offset: usize, len: usize, size: usize) -> Result<(), DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::OutOfRange {
            what: format!("{what} of {len} bytes at byte {offset} of a {size}-byte allocation"),
        }),
    }
}

/// `object` as this backend's `T`, or the error that it belongs to another device (`what`
/// names it: "the stream", "the buffer").
pub fn downcast<'a, T: Any>(object: &'a dyn Any, what: &str) -> Result<&'a T, DeviceError> {
    object
        .downcast_ref::<T>()
        .ok_or_else(|| DeviceError::ForeignObject { what: what.into() })
}

/// A device→host read whose bytes are already on the host.
pub struct Ready(pub Vec<u8>);

impl ReadTicket for Ready {
    fn wait(self: Box<Self>) -> Result<Vec<u8>, DeviceError> {
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_arrays_past_the_limit_are_refused_before_any_code() {
        let src = "device fn h(x: u32) -> u32 {\n    let q: [u64; 4];\n    q[x % 4] = 1u64;\n    return q[0] as u32;\n}\n\nkernel k(out: buf<u32, rw>) {\n    let p: [u32; 4294967295];\n    p[global_id.x] = h(1u32);\n    out[0] = p[global_id.x];\n}\n";
        let m = crate::ir::parse(src).unwrap().verify().unwrap();
        let k = m.function(m.kernel("k").unwrap());
        // The kernel's array and the helper's, in 64 bits (4 * (2^32 - 1) + 32).
        assert_eq!(private_bytes(&m, k), 4 * 4_294_967_295 + 32);
        let e = check_private("k", &m, k, PRIVATE_BYTES_GPU, "the CUDA backend").unwrap_err();
        assert_eq!(e.code(), "XPU-L017");
        assert!(
            e.to_string()
                .contains("the CUDA backend allows 524288 bytes"),
            "{e}"
        );
        assert!(check_private("k", &m, k, u64::MAX, "x").is_ok());
    }

    #[test]
    fn ranges_at_the_edges() {
        assert!(check_range("a copy", 0, 8, 8).is_ok());
        assert!(check_range("a copy", 8, 0, 8).is_ok());
        assert!(check_range("a copy", 1, 8, 8).is_err());
        let e = check_range("a copy", usize::MAX, 2, 8).unwrap_err();
        assert_eq!(e.code(), "XPU-D006");
        assert!(e.to_string().contains("a copy of 2 bytes at byte"), "{e}");
    }
}

/// Why a GPU backend made no code for a kernel: the lowering refused it, a configuration
/// value it reads is malformed, the driver refused the code, or an earlier kernel's device
/// fault surfaced while loading it. Turned into the launch's error by [`BuildError::launch`].
#[derive(Debug)]
pub enum BuildError {
    /// The lowering (or the linker after it) refused the kernel.
    Lowering(crate::codegen::Error),
    /// A configuration value the build reads is malformed (`XPU-C001`).
    Config(crate::config::BadValue),
    /// The driver failed or refused the code.
    Device(DeviceError),
}

impl BuildError {
    /// The launch error of kernel `kernel` on `backend` for this failure.
    pub fn launch(self, kernel: &str, backend: crate::hal::Backend) -> LaunchError {
        match self {
            BuildError::Lowering(e) => LaunchError::lowering(kernel, backend, e, false),
            BuildError::Config(e) => LaunchError::no_code(kernel, backend, e.to_string()),
            BuildError::Device(DeviceError::DeviceFault { kernel, message }) => {
                LaunchError::DeviceFault { kernel, message }
            }
            BuildError::Device(e) => LaunchError::no_code(kernel, backend, e.to_string()),
        }
    }
}

impl From<crate::codegen::Error> for BuildError {
    fn from(e: crate::codegen::Error) -> Self {
        BuildError::Lowering(e)
    }
}

impl From<crate::config::BadValue> for BuildError {
    fn from(e: crate::config::BadValue) -> Self {
        BuildError::Config(e)
    }
}

impl From<DeviceError> for BuildError {
    fn from(e: DeviceError) -> Self {
        BuildError::Device(e)
    }
}
