//! The launch parameters of an LLVM-lowered kernel (CUDA and HIP): checked [`DeviceArg`]s
//! packed into the slots the kernel's [`KernelAbi`] describes.

use crate::codegen::llvm::{KernelAbi, ParamAbi};
use crate::hal::launch::LaunchError;
use crate::hal::DeviceArg;

/// The launch's parameter slots in the order the kernel takes them (each 8-byte aligned):
/// a buffer as its device address and an `i32` element count, a value as its bytes
/// (vectors padded to a power-of-two number of lanes, LLVM's layout). `device_address`
/// gives the base address of a buffer's memory, or `None` for another device's memory.
pub fn pack(
    abi: &KernelAbi,
    args: &[DeviceArg],
    device_address: impl Fn(&dyn std::any::Any) -> Option<u64>,
) -> Result<Vec<Vec<u64>>, LaunchError> {
    use crate::hal::launch::LaunchError;
    use crate::hal::DeviceArg;
    let slot = |bytes: &[u8]| {
        let mut v = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: `v` holds at least `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len())
        };
        v
    };
    let mut slots = Vec::with_capacity(args.len() * 2);
    for (i, arg) in args.iter().enumerate() {
        match arg {
            DeviceArg::Buffer(b) => {
                let base = device_address(b.memory.as_any()).ok_or_else(|| {
                    LaunchError::ForeignObject {
                        kernel: abi.name.clone(),
                        what: format!("argument {i}"),
                    }
                })?;
                let addr = base + b.offset as u64;
                if let Some(ParamAbi::Buffer { base_align, .. }) = abi.params.get(i) {
                    if addr % *base_align as u64 != 0 {
                        return Err(LaunchError::MisalignedBase {
                            kernel: abi.name.clone(),
                            param: format!("#{i}"),
                            offset: b.offset as u64,
                            align: *base_align as u64,
                        });
                    }
                }
                let elems = (b.len / b.elem.size().max(1) as usize).min(u32::MAX as usize) as u32;
                slots.push(slot(&addr.to_le_bytes()));
                slots.push(slot(&elems.to_le_bytes()));
            }
            DeviceArg::Value(v) => {
                let mut bytes = v.to_le_bytes();
                let lanes = v.ty().lanes as usize;
                if lanes > 1 {
                    bytes.resize(v.ty().scalar.size() as usize * lanes.next_power_of_two(), 0);
                }
                slots.push(slot(&bytes));
            }
        }
    }
    Ok(slots)
}
