//! Host memory, streams and events: what the two backends that run in this process (the
//! interpreter and the CPU JIT) share.
//!
//! A [`HostMemory`] is a 64-byte-aligned byte allocation behind a mutex, optionally with a
//! per-byte *defined* mask (the interpreter's poison tracking: fresh memory is undefined, an
//! upload or a kernel store defines it). Copies lock it briefly; a launch locks every distinct
//! allocation it binds for its whole duration ([`lock_bindings`]), so two views of one
//! allocation alias exactly as they would on a GPU, and host code never races a kernel.
//!
//! Host streams execute eagerly: every operation has finished when the call returns, so an
//! event is complete when recorded and `sync` has nothing to wait for. The types still go
//! through the stream so that code written against them is correct on asynchronous devices.

use crate::backend::common::check_range as range_check;
use crate::hal::StreamImpl;
use crate::hal::{BufferBinding, DeviceArg, DeviceError, DeviceMemory, EventImpl, Init};
use parking_lot::{Mutex, MutexGuard};
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

/// The alignment of every host allocation's base: a cache line, and at least what any vector
/// access of the IR needs (16 bytes).
pub const HOST_ALIGN: usize = 64;

/// Allocations of at least this many bytes start on a 2 MiB boundary and, on Linux, ask for
/// transparent huge pages (`MADV_HUGEPAGE`) before their first touch, as a GPU driver backs
/// large buffers with large pages: a streaming kernel then walks 512 times fewer pages (about
/// 4 % of a single-core streaming loop here, docs/cpu-backend.md).
pub const HUGE_PAGE: usize = 2 << 20;

/// The memory of one host allocation: `layout.size()` bytes (whole huge pages for a large
/// one) at `ptr`, owned.
struct Block {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: a `Block` owns its bytes outright (no aliasing handle exists); access goes through
// `HostBytes`, which its `Mutex` guards.
unsafe impl Send for Block {}
// SAFETY: as above; `&Block` gives no access of its own.
unsafe impl Sync for Block {}

impl Block {
    /// At least `size` bytes, every one `fill`.
    fn new(size: usize, fill: u8) -> Result<Block, DeviceError> {
        let oom = |reason: String| DeviceError::OutOfMemory {
            bytes: size as u64,
            reason,
        };
        let align = if size >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            HOST_ALIGN
        };
        let bytes = size
            .max(1)
            .checked_next_multiple_of(align)
            .ok_or_else(|| oom("larger than the address space".into()))?;
        let layout = std::alloc::Layout::from_size_align(bytes, align)
            .map_err(|_| oom("larger than the address space".into()))?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) })
            .ok_or_else(|| oom("the allocator refused".into()))?;
        #[cfg(target_os = "linux")]
        if align == HUGE_PAGE {
            // SAFETY: the range is this fresh allocation, aligned to the huge page. Advice
            // only: a kernel without transparent huge pages leaves small pages.
            unsafe { libc::madvise(ptr.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) };
        }
        // SAFETY: `ptr` is valid for `bytes` writes.
        unsafe { ptr.as_ptr().write_bytes(fill, bytes) };
        Ok(Block { ptr, layout })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// The bytes of a host allocation and, where tracked, which of them are defined (one bit
/// per byte, 1 = defined, the interpreter's own layout).
pub struct HostBytes {
    block: Block,
    len: usize,
    defined: Option<Vec<u64>>,
}

impl HostBytes {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the allocation has no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the block holds at least `len` initialised bytes, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.block.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.block.ptr.as_ptr(), self.len) }
    }

    /// Whether this allocation tracks which bytes are defined (the interpreter's memory).
    pub fn tracks_defined(&self) -> bool {
        self.defined.is_some()
    }

    /// Whether byte `i` is defined; every byte of an untracked allocation is.
    pub fn is_defined(&self, i: usize) -> bool {
        match &self.defined {
            Some(bits) => i < self.len && bits[i / 64] >> (i % 64) & 1 != 0,
            None => i < self.len,
        }
    }

    /// Marks bytes `offset..offset + len` defined or not (no-op when untracked).
    pub fn set_defined(&mut self, offset: usize, len: usize, value: bool) {
        if let Some(bits) = &mut self.defined {
            for i in offset..(offset + len).min(self.len) {
                if value {
                    bits[i / 64] |= 1 << (i % 64);
                } else {
                    bits[i / 64] &= !(1 << (i % 64));
                }
            }
        }
    }

    /// The defined bits of `offset..offset + len`, repacked to start at bit 0.
    pub fn defined_range(&self, offset: usize, len: usize) -> Vec<u64> {
        let words = len.div_ceil(64);
        let mut out = match &self.defined {
            None => vec![u64::MAX; words],
            // Word-aligned ranges (every whole buffer) copy words, not bits.
            Some(bits) if offset % 64 == 0 => bits[offset / 64..offset / 64 + words].to_vec(),
            Some(_) => {
                let mut out = vec![0u64; words];
                for i in 0..len {
                    if self.is_defined(offset + i) {
                        out[i / 64] |= 1 << (i % 64);
                    }
                }
                out
            }
        };
        if len % 64 != 0 {
            if let Some(last) = out.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        out
    }

    /// Sets the defined bits of `offset..offset + len` from `bits` (packed from bit 0).
    pub fn set_defined_range(&mut self, offset: usize, len: usize, bits: &[u64]) {
        let Some(mask) = &mut self.defined else {
            return;
        };
        if offset % 64 == 0 && len % 64 == 0 && bits.len() >= len / 64 {
            mask[offset / 64..(offset + len) / 64].copy_from_slice(&bits[..len / 64]);
            return;
        }
        for i in 0..len {
            let value = bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0);
            self.set_defined(offset + i, 1, value);
        }
    }

    /// The base address, for the JIT's raw accesses; `HOST_ALIGN`-aligned.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.block.ptr.as_ptr()
    }
}

/// One host allocation.
pub struct HostMemory {
    inner: Mutex<HostBytes>,
    size: usize,
}

impl HostMemory {
    /// `size` bytes, filled with 0xFF under [`Init::Poison`] and zero otherwise; with
    /// `track_defined`, every byte starts undefined.
    pub fn new(size: usize, init: Init, track_defined: bool) -> Result<Arc<Self>, DeviceError> {
        let fill = match init {
            Init::Poison => 0xFF,
            Init::Any => 0,
        };
        // Refuse sizes the address space cannot hold instead of aborting in the allocator.
        if size > isize::MAX as usize - HOST_ALIGN {
            return Err(DeviceError::OutOfMemory {
                bytes: size as u64,
                reason: "larger than the address space".into(),
            });
        }
        // Within overcommit the allocator grants more than the host has, and the fill below
        // then runs into the OOM killer page by page: refuse what is not available now.
        let mask_bytes = if track_defined {
            size.div_ceil(64) as u64 * 8
        } else {
            0
        };
        if let Err(available) = crate::facts::check_host_memory(size as u64 + mask_bytes) {
            return Err(DeviceError::OutOfMemory {
                bytes: size as u64,
                reason: format!("the host has {available} bytes available"),
            });
        }
        let mut defined = None;
        if track_defined {
            let mut mask = Vec::new();
            mask.try_reserve_exact(size.div_ceil(64))
                .map_err(|e| DeviceError::OutOfMemory {
                    bytes: size as u64,
                    reason: e.to_string(),
                })?;
            mask.resize(size.div_ceil(64), 0u64);
            defined = Some(mask);
        }
        let block = Block::new(size, fill)?;
        Ok(Arc::new(HostMemory {
            inner: Mutex::new(HostBytes {
                block,
                len: size,
                defined,
            }),
            size,
        }))
    }

    /// Locks the allocation.
    pub fn lock(&self) -> MutexGuard<'_, HostBytes> {
        self.inner.lock()
    }

    /// The host allocation behind `mem`, or an error naming the backend it came from.
    pub fn of(mem: &dyn DeviceMemory) -> Result<&HostMemory, DeviceError> {
        mem.as_any()
            .downcast_ref::<HostMemory>()
            .ok_or_else(|| DeviceError::ForeignObject {
                what: "a buffer allocated by another backend".into(),
            })
    }
}

impl DeviceMemory for HostMemory {
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Copies `src` into `mem` at `offset`, marking the bytes defined.
pub fn write(mem: &dyn DeviceMemory, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
    let host = HostMemory::of(mem)?;
    range_check("a write", offset, src.len(), host.size)?;
    let mut bytes = host.lock();
    bytes.bytes_mut()[offset..offset + src.len()].copy_from_slice(src);
    bytes.set_defined(offset, src.len(), true);
    Ok(())
}

/// Copies `len` bytes of `mem` at `offset` out. Undefined bytes read as they are stored (the
/// poison fill), as a download from a GPU reads whatever the memory holds.
pub fn read(mem: &dyn DeviceMemory, offset: usize, len: usize) -> Result<Vec<u8>, DeviceError> {
    let host = HostMemory::of(mem)?;
    range_check("a read", offset, len, host.size)?;
    let bytes = host.lock();
    Ok(bytes.bytes()[offset..offset + len].to_vec())
}

/// Copies `len` bytes between two allocations (or within one; overlapping ranges copy as if
/// through a temporary), carrying the defined mask along.
pub fn copy(
    src: &dyn DeviceMemory,
    src_offset: usize,
    dst: &dyn DeviceMemory,
    dst_offset: usize,
    len: usize,
) -> Result<(), DeviceError> {
    let s = HostMemory::of(src)?;
    let d = HostMemory::of(dst)?;
    range_check("a copy source", src_offset, len, s.size)?;
    range_check("a copy destination", dst_offset, len, d.size)?;
    if std::ptr::eq(s, d) {
        let mut bytes = s.lock();
        bytes
            .bytes_mut()
            .copy_within(src_offset..src_offset + len, dst_offset);
        let mask = bytes.defined_range(src_offset, len);
        bytes.set_defined_range(dst_offset, len, &mask);
        return Ok(());
    }
    let (data, mask) = {
        let bytes = s.lock();
        (
            bytes.bytes()[src_offset..src_offset + len].to_vec(),
            bytes.defined_range(src_offset, len),
        )
    };
    let mut bytes = d.lock();
    bytes.bytes_mut()[dst_offset..dst_offset + len].copy_from_slice(&data);
    bytes.set_defined_range(dst_offset, len, &mask);
    Ok(())
}

/// The memory and stream half of [`DeviceImpl`](super::DeviceImpl) for a backend whose device
/// memory is host memory: `alloc` (tracking the defined-byte mask when `$track_defined`),
/// `write`, `read` and `copy`, all complete when they return whatever the stream, and
/// `create_stream` giving `$stream`. Expands inside an `impl DeviceImpl for ...` block.
macro_rules! host_memory_methods {
    ($track_defined:expr, $stream:expr) => {
        fn alloc(
            &self,
            bytes: usize,
            init: $crate::hal::Init,
        ) -> Result<std::sync::Arc<dyn $crate::hal::DeviceMemory>, $crate::hal::DeviceError> {
            Ok($crate::backend::host::HostMemory::new(
                bytes,
                init,
                $track_defined,
            )?)
        }

        fn write(
            &self,
            _stream: &dyn $crate::hal::StreamImpl,
            mem: &std::sync::Arc<dyn $crate::hal::DeviceMemory>,
            offset: usize,
            src: &[u8],
        ) -> Result<(), $crate::hal::DeviceError> {
            $crate::backend::host::write(mem.as_ref(), offset, src)
        }

        fn read(
            &self,
            _stream: &dyn $crate::hal::StreamImpl,
            mem: &std::sync::Arc<dyn $crate::hal::DeviceMemory>,
            offset: usize,
            len: usize,
        ) -> Result<Box<dyn $crate::hal::ReadTicket>, $crate::hal::DeviceError> {
            Ok(Box::new($crate::backend::common::Ready(
                $crate::backend::host::read(mem.as_ref(), offset, len)?,
            )))
        }

        fn copy(
            &self,
            _stream: &dyn $crate::hal::StreamImpl,
            src: &std::sync::Arc<dyn $crate::hal::DeviceMemory>,
            src_offset: usize,
            dst: &std::sync::Arc<dyn $crate::hal::DeviceMemory>,
            dst_offset: usize,
            len: usize,
        ) -> Result<(), $crate::hal::DeviceError> {
            $crate::backend::host::copy(src.as_ref(), src_offset, dst.as_ref(), dst_offset, len)
        }

        fn create_stream(
            &self,
        ) -> Result<std::sync::Arc<dyn $crate::hal::StreamImpl>, $crate::hal::DeviceError> {
            Ok(std::sync::Arc::new($stream))
        }
    };
}
pub(crate) use host_memory_methods;

/// A stream of a host backend: every operation completes before its call returns.
#[derive(Default)]
pub struct HostStream;

impl StreamImpl for HostStream {
    fn sync(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        Ok(Arc::new(HostEvent { at: Instant::now() }))
    }
    fn wait_for(&self, _event: &dyn EventImpl) -> Result<(), DeviceError> {
        // Every event of a host stream is complete when recorded.
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An event of a host stream: complete when recorded, stamped with the host clock.
pub struct HostEvent {
    /// When the event was recorded (the host clock).
    pub at: Instant,
}

impl EventImpl for HostEvent {
    fn is_complete(&self) -> bool {
        true
    }
    fn sync(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn elapsed_since(&self, _earlier: &dyn EventImpl) -> Option<std::time::Duration> {
        // A host event's stamp is the host clock, not a device clock: timing through it is the
        // Host tier, which `KernelTimer` takes directly.
        None
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A buffer argument of a launch, resolved to host memory.
pub struct HostView {
    /// Which entry of [`LockedBindings::allocations`] the view lies in.
    pub allocation: usize,
    /// The view's byte range in that allocation.
    pub offset: usize,
    /// The view's length in bytes.
    pub len: usize,
    /// The argument as the launch bound it.
    pub binding: BufferBinding,
}

/// Every distinct host allocation a launch binds, locked for the launch's duration, and each
/// buffer argument as a view into one of them (two views may share an allocation).
pub struct LockedBindings<'a> {
    /// The locked allocations, in address order.
    pub allocations: Vec<MutexGuard<'a, HostBytes>>,
    /// One entry per argument: `Some` for a buffer, `None` for a value.
    pub views: Vec<Option<HostView>>,
}

/// Locks the allocations behind `args` (each once, in address order, so concurrent launches
/// that share buffers cannot deadlock) and resolves each buffer argument to a view.
pub fn lock_bindings(args: &[DeviceArg]) -> Result<LockedBindings<'_>, DeviceError> {
    let mut distinct: Vec<&HostMemory> = Vec::new();
    for arg in args {
        if let DeviceArg::Buffer(b) = arg {
            let host = HostMemory::of(b.memory.as_ref())?;
            range_check("a view", b.offset, b.len, host.size)?;
            if !distinct.iter().any(|d| std::ptr::eq(*d, host)) {
                distinct.push(host);
            }
        }
    }
    distinct.sort_by_key(|m| *m as *const HostMemory as usize);
    let allocations = distinct.iter().map(|m| m.lock()).collect();
    let views = args
        .iter()
        .map(|arg| match arg {
            DeviceArg::Buffer(b) => {
                let host = HostMemory::of(b.memory.as_ref()).ok()?;
                let allocation = distinct.iter().position(|d| std::ptr::eq(*d, host))?;
                Some(HostView {
                    allocation,
                    offset: b.offset,
                    len: b.len,
                    binding: b.clone(),
                })
            }
            DeviceArg::Value(_) => None,
        })
        .collect();
    Ok(LockedBindings { allocations, views })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_allocations_start_on_a_huge_page_and_are_filled() {
        let mem = HostMemory::new(HUGE_PAGE + 3, Init::Poison, false).unwrap();
        let mut bytes = mem.lock();
        assert_eq!(bytes.as_mut_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(bytes.len(), HUGE_PAGE + 3);
        assert!(bytes.bytes().iter().all(|&b| b == 0xFF));
        let small = HostMemory::new(100, Init::Any, false).unwrap();
        let mut small = small.lock();
        assert_eq!(small.as_mut_ptr() as usize % HOST_ALIGN, 0);
        assert!(small.bytes().iter().all(|&b| b == 0));
        assert!(HostMemory::new(0, Init::Any, false)
            .unwrap()
            .lock()
            .is_empty());
    }

    #[test]
    fn poison_fill_and_defined_mask() {
        let mem = HostMemory::new(100, Init::Poison, true).unwrap();
        assert_eq!(read(mem.as_ref(), 0, 4).unwrap(), vec![0xFF; 4]);
        write(mem.as_ref(), 10, &[1, 2, 3]).unwrap();
        {
            let bytes = mem.lock();
            assert!(!bytes.is_defined(9) && bytes.is_defined(10));
            assert!(bytes.is_defined(12) && !bytes.is_defined(13));
            assert_eq!(bytes.bytes().as_ptr() as usize % HOST_ALIGN, 0);
        }
        assert_eq!(read(mem.as_ref(), 9, 5).unwrap(), vec![0xFF, 1, 2, 3, 0xFF]);
        let zero = HostMemory::new(3, Init::Any, false).unwrap();
        assert_eq!(read(zero.as_ref(), 0, 3).unwrap(), vec![0; 3]);
        assert!(!zero.lock().tracks_defined());
        assert!(zero.lock().is_defined(2));
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mem = HostMemory::new(8, Init::Any, false).unwrap();
        assert!(matches!(
            write(mem.as_ref(), 6, &[0; 3]),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(read(mem.as_ref(), usize::MAX, 2).is_err());
        assert!(copy(mem.as_ref(), 0, mem.as_ref(), 7, 2).is_err());
        assert!(HostMemory::new(usize::MAX, Init::Any, false).is_err());
    }

    #[test]
    fn copies_carry_the_mask_and_allow_overlap() {
        let a = HostMemory::new(8, Init::Poison, true).unwrap();
        write(a.as_ref(), 0, &[1, 2, 3, 4]).unwrap();
        copy(a.as_ref(), 0, a.as_ref(), 2, 4).unwrap();
        assert_eq!(
            read(a.as_ref(), 0, 8).unwrap(),
            vec![1, 2, 1, 2, 3, 4, 0xFF, 0xFF]
        );
        let b = HostMemory::new(8, Init::Poison, true).unwrap();
        copy(a.as_ref(), 4, b.as_ref(), 0, 4).unwrap();
        let bytes = b.lock();
        let mask: Vec<bool> = (0..5).map(|i| bytes.is_defined(i)).collect();
        assert_eq!(mask, [true, true, false, false, false]);
    }

    #[test]
    fn mask_ranges_word_aligned_and_not() {
        let m = HostMemory::new(200, Init::Poison, true).unwrap();
        write(m.as_ref(), 64, &[0; 70]).unwrap(); // bytes 64..134 defined
        let bytes = m.lock();
        let aligned = bytes.defined_range(64, 128);
        assert_eq!(aligned, vec![u64::MAX, (1 << 6) - 1]);
        let odd = bytes.defined_range(60, 10);
        assert_eq!(odd, vec![0b11_1111_0000]);
        drop(bytes);
        let n = HostMemory::new(130, Init::Poison, true).unwrap();
        n.lock().set_defined_range(0, 128, &aligned);
        assert!(n.lock().is_defined(0) && n.lock().is_defined(69) && !n.lock().is_defined(70));
    }
}
