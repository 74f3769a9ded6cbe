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
    let (mut words, mut sizes) = (Vec::new(), Vec::new());
    pack_into(abi, args, device_address, &mut words, &mut sizes)?;
    let mut at = 0;
    Ok(sizes
        .iter()
        .map(|&n| {
            let slot = words[at..at + n as usize].to_vec();
            at += n as usize;
            slot
        })
        .collect())
}

/// [`pack`] into one flat list of 8-byte words (`words`, cleared first) and the words of each
/// slot in order (`sizes`): no allocation when the lists are reused (the launch path's
/// scratch), and the form a deferred launch keeps.
pub fn pack_into(
    abi: &KernelAbi,
    args: &[DeviceArg],
    device_address: impl Fn(&dyn std::any::Any) -> Option<u64>,
    words: &mut Vec<u64>,
    sizes: &mut Vec<u32>,
) -> Result<(), LaunchError> {
    words.clear();
    sizes.clear();
    let mut slot = |bytes: &[u8]| {
        let n = bytes.len().div_ceil(8).max(1);
        let at = words.len();
        words.resize(at + n, 0);
        // SAFETY: `words[at..]` holds `n * 8 >= bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr().add(at) as *mut u8,
                bytes.len(),
            )
        };
        sizes.push(n as u32);
    };
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
                slot(&addr.to_le_bytes());
                slot(&elems.to_le_bytes());
            }
            DeviceArg::Value(v) => {
                let lanes = v.ty().lanes as usize;
                if lanes > 1 {
                    let mut bytes = v.to_le_bytes();
                    bytes.resize(v.ty().scalar.size() as usize * lanes.next_power_of_two(), 0);
                    slot(&bytes);
                } else {
                    // A scalar: its bits, little-endian, without an allocation.
                    let size = v.ty().scalar.size() as usize;
                    slot(&v.lane_bits(0).to_le_bytes()[..size]);
                }
            }
        }
    }
    Ok(())
}
