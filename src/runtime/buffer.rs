//! `KernelBuffer<T>`: a typed device allocation with upload, download, their asynchronous
//! forms on a stream, slices, and the `word_view`/`half_view` reinterpretations (contract §2.2).
//!
//! A buffer is a view — a byte range — of one allocation; views made by [`KernelBuffer::slice`]
//! and the reinterpretations share the allocation, which is freed (RAII) when the last view
//! drops. Like device pointers, views do not exclude each other: a kernel writing one view is
//! seen through every other. Every operation checks its bounds and returns a
//! [`DeviceError`]; none panics.
//!
//! Fresh memory is filled with 0xFF when `CAJETA_XPU_POISON=1` (the test suites' default,
//! contract §7), and the interpreter additionally marks it undefined.

use crate::hal::{DeviceError, DeviceMemory, Init, ReadTicket};
use crate::ir::{ElemType, Scalar};
use crate::runtime::device::Device;
use crate::runtime::stream::KernelStream;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A plain-old-data element type of a buffer: a scalar or a vector `[T; N]` of one.
///
/// # Safety
/// Implementors have no padding and no invalid bit patterns, and their size is `ELEM.size()`.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The IR element type this Rust type stores.
    const ELEM: ElemType;
}

/// A scalar [`Element`].
///
/// # Safety
/// As for [`Element`].
pub unsafe trait ScalarElement: Element {
    /// The element type as the IR names it.
    const SCALAR: Scalar;
}

macro_rules! scalar_elements {
    ($($t:ty => $s:ident),*) => {$(
        // SAFETY: a primitive integer or float: no padding, every bit pattern valid.
        unsafe impl Element for $t {
            const ELEM: ElemType = ElemType::scalar(Scalar::$s);
        }
        // SAFETY: as above.
        unsafe impl ScalarElement for $t {
            const SCALAR: Scalar = Scalar::$s;
        }
    )*};
}

scalar_elements!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16,
    u32 => U32, u64 => U64, half::f16 => F16, f32 => F32, f64 => F64);

macro_rules! vector_elements {
    ($($n:literal),*) => {$(
        // SAFETY: an array of a scalar element has no padding and is valid for every bit
        // pattern its scalars are; its size is N times the scalar's.
        unsafe impl<T: ScalarElement> Element for [T; $n] {
            const ELEM: ElemType = ElemType::vector(T::SCALAR, $n);
        }
    )*};
}

vector_elements!(2, 3, 4, 8, 16);

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Element` has no padding, so every byte of the slice is initialised.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

fn from_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let len = bytes.len().checked_div(size).unwrap_or(0);
    let mut out: Vec<T> = Vec::with_capacity(len);
    // SAFETY: `out` has capacity for `len` elements; every bit pattern is a valid `T`, and
    // exactly `len * size` bytes are written before the length is set.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), len * size);
        out.set_len(len);
    }
    out
}

/// An untyped view: a byte range of one allocation on one device. The typed
/// [`KernelBuffer`] wraps it; the file-test runner uses it directly for buffers typed by a
/// kernel's parameters.
#[derive(Clone)]
pub struct RawBuffer {
    device: Device,
    memory: Arc<dyn DeviceMemory>,
    offset: usize,
    len: usize,
}

impl std::fmt::Debug for RawBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RawBuffer({:?}, bytes {}..{})",
            self.device,
            self.offset,
            self.offset + self.len
        )
    }
}

impl RawBuffer {
    /// A fresh allocation of `bytes`, poisoned under `CAJETA_XPU_POISON=1`.
    pub fn alloc(device: &Device, bytes: usize) -> Result<RawBuffer, DeviceError> {
        let init = if crate::hal::poison_requested()? {
            Init::Poison
        } else {
            Init::Any
        };
        RawBuffer::alloc_with(device, bytes, init)
    }

    /// A fresh allocation of `bytes` filled per `init`.
    pub fn alloc_with(device: &Device, bytes: usize, init: Init) -> Result<RawBuffer, DeviceError> {
        let memory = device.implementation().alloc(bytes, init)?;
        Ok(RawBuffer {
            device: device.clone(),
            memory,
            offset: 0,
            len: bytes,
        })
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The allocation this view lies in.
    pub fn memory(&self) -> &Arc<dyn DeviceMemory> {
        &self.memory
    }

    /// Where the view starts in its allocation.
    pub fn offset_bytes(&self) -> usize {
        self.offset
    }

    /// The view's length in bytes.
    pub fn byte_len(&self) -> usize {
        self.len
    }

    /// The sub-view of `len` bytes at `offset` within this view.
    pub fn sub(&self, offset: usize, len: usize) -> Result<RawBuffer, DeviceError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(RawBuffer {
                device: self.device.clone(),
                memory: self.memory.clone(),
                offset: self.offset + offset,
                len,
            }),
            _ => Err(DeviceError::OutOfRange {
                what: format!(
                    "bytes {offset}..{} of a view of {} bytes",
                    offset as u128 + len as u128,
                    self.len
                ),
            }),
        }
    }

    fn check_stream(&self, stream: &KernelStream) -> Result<(), DeviceError> {
        if stream.device() != &self.device {
            return Err(DeviceError::ForeignObject {
                what: "the stream".into(),
            });
        }
        Ok(())
    }

    /// Enqueues on `stream` a copy of `data` into the whole view (lengths must match).
    pub fn write_async(&self, stream: &KernelStream, data: &[u8]) -> Result<(), DeviceError> {
        self.check_stream(stream)?;
        if data.len() != self.len {
            return Err(DeviceError::SizeMismatch {
                what: format!("{} bytes into a view of {}", data.len(), self.len),
            });
        }
        let start = crate::profile::stamp();
        let result = self.device.implementation().write(
            stream.implementation().as_ref(),
            &self.memory,
            self.offset,
            data,
        );
        self.copy_span("upload", start, data.len());
        result
    }

    /// A host span of a copy, when the profiler is armed.
    fn copy_span(&self, name: &'static str, start: crate::profile::Stamp, bytes: usize) {
        if crate::profile::armed() {
            crate::profile::host_span_named(
                crate::profile::Kind::Copy,
                crate::profile::Name::Static(name),
                start,
                crate::profile::Args {
                    backend: self.device.backend().name(),
                    bytes: Some(bytes as u64),
                    ..Default::default()
                },
            );
        }
    }

    /// Enqueues on `stream` a copy of the whole view to the host.
    pub fn read_async(&self, stream: &KernelStream) -> Result<Box<dyn ReadTicket>, DeviceError> {
        self.check_stream(stream)?;
        let start = crate::profile::stamp();
        let result = self.device.implementation().read(
            stream.implementation().as_ref(),
            &self.memory,
            self.offset,
            self.len,
        );
        self.copy_span("download", start, self.len);
        result
    }

    /// Copies `data` into the view on this thread's default stream and waits.
    pub fn write(&self, data: &[u8]) -> Result<(), DeviceError> {
        let stream = KernelStream::current(&self.device);
        self.write_async(&stream, data)?;
        stream.sync()
    }

    /// The view's bytes, after the work enqueued on this thread's default stream.
    pub fn read(&self) -> Result<Vec<u8>, DeviceError> {
        let stream = KernelStream::current(&self.device);
        let start = crate::profile::stamp();
        let bytes = self.read_async(&stream)?.wait();
        if crate::record::armed() || crate::profile::armed() {
            // The download waited for everything before it on the stream.
            stream.drained(start, bytes.is_ok());
        }
        bytes
    }

    /// Enqueues on `stream` a device-side copy of `src` into this view (lengths must match).
    pub fn copy_from_async(
        &self,
        stream: &KernelStream,
        src: &RawBuffer,
    ) -> Result<(), DeviceError> {
        self.check_stream(stream)?;
        if src.device != self.device {
            return Err(DeviceError::ForeignObject {
                what: "the source buffer".into(),
            });
        }
        if src.len != self.len {
            return Err(DeviceError::SizeMismatch {
                what: format!("a copy of {} bytes into a view of {}", src.len, self.len),
            });
        }
        let start = crate::profile::stamp();
        let result = self.device.implementation().copy(
            stream.implementation().as_ref(),
            &src.memory,
            src.offset,
            &self.memory,
            self.offset,
            self.len,
        );
        self.copy_span("copy", start, self.len);
        result
    }
}

/// A device→host copy in flight, yielding typed elements.
pub struct PendingDownload<T> {
    ticket: Box<dyn ReadTicket>,
    _elem: PhantomData<fn() -> T>,
}

impl<T: Element> PendingDownload<T> {
    /// Waits for the copy and returns the elements.
    pub fn wait(self) -> Result<Vec<T>, DeviceError> {
        let bytes = self.ticket.wait()?;
        Ok(from_bytes(&bytes))
    }
}

/// A typed device buffer of `T` elements (contract §2.2's `KernelBuffer<T>`).
///
/// ```
/// use xpu::{Backend, Device, KernelBuffer};
///
/// let device = Device::open(Backend::Interp).unwrap();
/// let mut b = KernelBuffer::from_slice(&device, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// assert_eq!(b.len(), 4);
/// b.upload(&[5.0, 6.0, 7.0, 8.0]).unwrap();
/// // A slice is a view of the same memory; a view reinterprets the bytes.
/// let tail = b.slice(2..).unwrap();
/// assert_eq!(tail.download().unwrap(), vec![7.0, 8.0]);
/// assert_eq!(b.word_view().unwrap().download().unwrap()[0], 5.0f32.to_bits());
/// ```
pub struct KernelBuffer<T: Element> {
    raw: RawBuffer,
    _elem: PhantomData<T>,
}

impl<T: Element> Clone for KernelBuffer<T> {
    /// Another view of the same memory (not a copy of the contents).
    fn clone(&self) -> Self {
        KernelBuffer {
            raw: self.raw.clone(),
            _elem: PhantomData,
        }
    }
}

impl<T: Element> std::fmt::Debug for KernelBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KernelBuffer<{}>[{}] at byte {} on {:?}",
            crate::hal::launch::elem_name(T::ELEM),
            self.len(),
            self.raw.offset,
            self.raw.device
        )
    }
}

impl<T: Element> KernelBuffer<T> {
    /// A fresh buffer of `len` elements, poisoned (0xFF) under `CAJETA_XPU_POISON=1`.
    pub fn new(device: &Device, len: usize) -> Result<Self, DeviceError> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>())
                .ok_or_else(|| DeviceError::OutOfMemory {
                    bytes: u64::MAX,
                    reason: format!("{len} elements overflow the address space"),
                })?;
        Ok(KernelBuffer {
            raw: RawBuffer::alloc(device, bytes)?,
            _elem: PhantomData,
        })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self, DeviceError> {
        let mut buffer = KernelBuffer::new(device, data.len())?;
        buffer.upload(data)?;
        Ok(buffer)
    }

    /// Reinterprets an untyped view; its length must be a whole number of `T`s.
    pub fn from_raw(raw: RawBuffer) -> Result<Self, DeviceError> {
        if raw.len % std::mem::size_of::<T>() != 0 {
            return Err(DeviceError::SizeMismatch {
                what: format!(
                    "a view of {} bytes is not a whole number of {} ({} bytes each)",
                    raw.len,
                    crate::hal::launch::elem_name(T::ELEM),
                    std::mem::size_of::<T>()
                ),
            });
        }
        Ok(KernelBuffer {
            raw,
            _elem: PhantomData,
        })
    }

    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.raw.len / std::mem::size_of::<T>()
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// The buffer's length in bytes.
    pub fn byte_len(&self) -> usize {
        self.raw.len
    }

    /// Where the view starts in its allocation, in bytes.
    pub fn offset_bytes(&self) -> usize {
        self.raw.offset
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.raw.device
    }

    /// The untyped view of the same memory.
    pub fn raw(&self) -> &RawBuffer {
        &self.raw
    }

    /// Copies `data` (exactly [`len`](Self::len) elements) into the buffer on this thread's
    /// default stream and waits for it.
    pub fn upload(&mut self, data: &[T]) -> Result<(), DeviceError> {
        self.check_len(data.len())?;
        self.raw.write(as_bytes(data))
    }

    /// Enqueues the upload on `stream`; `data` may be reused when this returns.
    pub fn upload_async(&mut self, stream: &KernelStream, data: &[T]) -> Result<(), DeviceError> {
        self.check_len(data.len())?;
        self.raw.write_async(stream, as_bytes(data))
    }

    /// The buffer's elements, after the work enqueued on this thread's default stream.
    pub fn download(&self) -> Result<Vec<T>, DeviceError> {
        Ok(from_bytes(&self.raw.read()?))
    }

    /// Copies the buffer into `out` (exactly [`len`](Self::len) elements) after the work
    /// enqueued on this thread's default stream.
    pub fn download_into(&self, out: &mut [T]) -> Result<(), DeviceError> {
        self.check_len(out.len())?;
        let data = self.download()?;
        out.copy_from_slice(&data);
        Ok(())
    }

    /// Enqueues a download on `stream`; [`PendingDownload::wait`] yields the elements.
    pub fn download_async(&self, stream: &KernelStream) -> Result<PendingDownload<T>, DeviceError> {
        Ok(PendingDownload {
            ticket: self.raw.read_async(stream)?,
            _elem: PhantomData,
        })
    }

    /// Copies `src` (same length) into this buffer on the device, on this thread's default
    /// stream, and waits.
    pub fn copy_from(&mut self, src: &KernelBuffer<T>) -> Result<(), DeviceError> {
        let stream = KernelStream::current(self.device());
        self.raw.copy_from_async(&stream, &src.raw)?;
        stream.sync()
    }

    /// Enqueues a device-side copy of `src` (same length) into this buffer on `stream`.
    pub fn copy_from_async(
        &mut self,
        stream: &KernelStream,
        src: &KernelBuffer<T>,
    ) -> Result<(), DeviceError> {
        self.raw.copy_from_async(stream, &src.raw)
    }

    /// The view of elements `range` of this buffer, sharing its memory.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<KernelBuffer<T>, DeviceError> {
        let len = self.len();
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(len),
        };
        match (start, end) {
            (Some(start), Some(end)) if start <= end && end <= len => {
                let size = std::mem::size_of::<T>();
                Ok(KernelBuffer {
                    raw: self.raw.sub(start * size, (end - start) * size)?,
                    _elem: PhantomData,
                })
            }
            _ => Err(DeviceError::OutOfRange {
                what: format!(
                    "slice {:?}..{:?} of a buffer of {len} elements",
                    range.start_bound(),
                    range.end_bound()
                ),
            }),
        }
    }

    /// The same bytes as elements of `U` (the view's byte length must be a whole number of
    /// `U`s). The base is not checked here: a launch checks it against what the kernel needs.
    pub fn view<U: Element>(&self) -> Result<KernelBuffer<U>, DeviceError> {
        KernelBuffer::from_raw(self.raw.clone())
    }

    /// The same bytes as 32-bit words (the kernels' `wordView`).
    pub fn word_view(&self) -> Result<KernelBuffer<u32>, DeviceError> {
        self.view()
    }

    /// The same bytes as IEEE halves (the kernels' `halfView`); `view::<u16>()` gives their
    /// bits as integers.
    pub fn half_view(&self) -> Result<KernelBuffer<half::f16>, DeviceError> {
        self.view()
    }

    fn check_len(&self, got: usize) -> Result<(), DeviceError> {
        if got != self.len() {
            return Err(DeviceError::SizeMismatch {
                what: format!(
                    "{got} elements for a buffer of {} {}",
                    self.len(),
                    crate::hal::launch::elem_name(T::ELEM)
                ),
            });
        }
        Ok(())
    }
}

impl<'a, T: Element> From<&'a KernelBuffer<T>> for crate::hal::launch::ArgValue<'a> {
    /// A buffer lent read-only (a `buf<T>` parameter).
    fn from(b: &'a KernelBuffer<T>) -> Self {
        crate::hal::launch::ArgValue::raw(&b.raw, T::ELEM)
    }
}

impl<'a, T: Element> From<&'a mut KernelBuffer<T>> for crate::hal::launch::ArgValue<'a> {
    /// A buffer lent for writing (a `buf<T, rw>` parameter, or a `buf<T>` one).
    fn from(b: &'a mut KernelBuffer<T>) -> Self {
        crate::hal::launch::ArgValue::raw_mut(&mut b.raw, T::ELEM)
    }
}
