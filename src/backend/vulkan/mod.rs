//! The Vulkan backend (contract §2.3, §3.2, §5; DESIGN.md Decisions 5): any Vulkan 1.1 device,
//! through `ash` with `libvulkan` loaded at run time, running SPIR-V from [`spirv`].
//!
//! - **No loader, no device → not offered**: [`VulkanDevice::open`] answers
//!   [`DeviceError::Unavailable`]; nothing panics. A discrete GPU is preferred, then an
//!   integrated one, then anything with a compute queue (Mesa's lavapipe on a box without a
//!   GPU).
//! - **Memory** is `DEVICE_LOCAL` buffers; uploads and downloads go through host-visible
//!   staging buffers copied on the queue (host-visible device buffers are far slower on
//!   discrete GPUs). Fresh memory is filled with 0xFF when poison is asked for.
//! - **Ordering.** All streams share the device's one compute queue. Each stream records its
//!   operations into a command buffer, every operation behind a full memory barrier, and
//!   submits it at a synchronising point (sync, a download, a wait on or poll of one of its
//!   events, another stream's `wait_for` one of its events) or after 64 operations; barriers
//!   order commands across submissions on one queue, so operations run in submission order,
//!   and `wait_for` has only to submit the event's work.
//! - **Per-launch cost.** Nothing is created per launch or event in the steady state: fences
//!   come from a free list, each stream reuses its own command buffers (its own pool, so
//!   streams record on different threads at once), event timestamps take slots of shared
//!   query pools, and buffers are pushed into the command buffer (`VK_KHR_push_descriptor`)
//!   where the device has it, a descriptor pool per launch otherwise. `XPU_VK_TRACE=1`
//!   prints one stderr line per launch, submission, event and wait with host microseconds.
//! - **Device code** is emitted per kernel at first use and cached; pipelines are specialised
//!   per block and dynamic shared size (spec constants) and kept, with a `VkPipelineCache`
//!   whose data the next process starts from (`pipelines`). The SPIR-V persists in the code
//!   cache (`backend::cache`). A view whose offset is not a multiple of `minStorageBufferOffsetAlignment` is refused
//!   (`XPU-L012`).
//! - **Waves** (§3.2): a declared W the device can require as its subgroup size
//!   (`VK_EXT_subgroup_size_control`) is built natively at W; otherwise the emitter's narrow
//!   (W < S) or virtual (W > S, wave verbs refused by name) mode applies.
//! - **Timing**: the Event tier of `KernelTimer` (contract §5.3) where the compute queue
//!   writes timestamps: an event is a full barrier and a `vkCmdWriteTimestamp` in the stream's
//!   recording command buffer, so the work between two events is submitted with both and
//!   their interval is device time; otherwise Unavailable (callers time on the host).

pub mod aot;
mod kernel;
mod pipelines;
pub mod stored;

use kernel::{hash_words, VkKernel};

use crate::backend::common;
use crate::codegen::checks::{Checks, Report, REPORT_WORDS};
use crate::codegen::spirv::{self, Caps, Emitted, ParamSlot};
use crate::hal::checked::{report_error, ProgramOptions};
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{HostValue, Launch, LaunchError};
use crate::hal::manifest::{KernelManifest, NativeOp};
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, EventImpl, Init, KernelImpl,
    Prebuilt, ProgramImpl, ReadTicket, StreamImpl, TimerTier,
};
use crate::ir::{Function, Scalar, VerifiedModule};
use ash::vk;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

fn vk_err(what: &str, e: vk::Result) -> DeviceError {
    DeviceError::Driver {
        message: format!("{what}: VkResult {}", e.as_raw()),
    }
}

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: Backend::Vulkan,
        reason: reason.into(),
    }
}

/// The instance, device and queue, shared by every object of the backend.
struct Inner {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: Mutex<vk::Queue>,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// The pipeline cache every pipeline is made through, and how many pipelines it has
    /// taken: it keeps an entry per distinct pipeline for as long as it lives, so it is
    /// replaced by an empty one every [`PIPELINE_CACHE_ENTRIES`] pipelines (else every
    /// program loaded and dropped left its pipelines' entries behind).
    pipeline_cache: Mutex<(vk::PipelineCache, u32)>,
    /// For one-off work of the device (poison fills); streams have their own pools.
    command_pool: Mutex<vk::CommandPool>,
    /// The compute queue's family.
    family: u32,
    /// Nanoseconds per timestamp tick and the valid-bits mask, where the queue family writes
    /// timestamps (then events carry one and the timer tier is Event).
    timestamps: Option<(f64, u64)>,
    /// Wait for fences by polling first (a GPU, not a CPU device whose work runs on the
    /// host's cores): a blocking `vkWaitForFences` sleeps and wakes late, as a CUDA stream
    /// sync in its default spin mode does not.
    spin: bool,
    /// `VK_KHR_pipeline_executable_properties`, enabled where offered and
    /// `XPU_VK_PIPELINE_STATS=1` asks for the driver's statistics of every pipeline built
    /// (registers, local memory, ...) on stderr: what the SPIR-V became on this device.
    exec_stats: Option<ash::khr::pipeline_executable_properties::Device>,
    /// `VK_KHR_push_descriptor` where offered (`XPU_VK_PUSH_DESCRIPTORS=0` turns it off), with
    /// `maxPushDescriptors`: a launch writes its buffers into the command buffer instead of
    /// creating a descriptor pool and set.
    push_descriptor: Option<(ash::khr::push_descriptor::Device, u32)>,
    /// Unsignalled fences for reuse: creating one per submission is a driver call that can
    /// allocate, so a signalled fence is reset and kept.
    fences: Mutex<Vec<vk::Fence>>,
    /// Timestamp query slots for events, in pools of [`QUERY_CHUNK`].
    queries: Mutex<QuerySlots>,
    /// `XPU_VK_TRACE=1`: one stderr line per launch, submission, event and wait with the host
    /// microseconds of its steps.
    trace: bool,
    /// Numbers streams in trace lines.
    next_stream: AtomicU64,
    /// Bytes of SPIR-V held by live kernels ([`DeviceImpl::code_memory`]).
    code_bytes: AtomicU64,
    /// Kernels whose objects were destroyed since the allocator last gave free memory back
    /// ([`Inner::kernel_destroyed`]).
    destroyed_since_trim: AtomicU64,
    /// SPIR-V kept across processes, under `cache_key` (the capability key, the driver and
    /// device, the emitter).
    cache: crate::backend::cache::CodeCache,
    cache_key: crate::backend::cache::DeviceKey,
}

/// Pipelines a device's pipeline cache takes before it is replaced by an empty one (see
/// `Inner::pipeline_cache`).
const PIPELINE_CACHE_ENTRIES: u32 = 256;

/// Kernels destroyed between two requests that the C allocator give its free memory back to
/// the system (`Inner::kernel_destroyed`).
const KERNELS_PER_TRIM: u64 = 64;

/// Timestamp queries per pool; events take a free slot and give it back when their
/// submission has completed and they are dropped.
const QUERY_CHUNK: u32 = 64;

#[derive(Default)]
struct QuerySlots {
    pools: Vec<vk::QueryPool>,
    free: Vec<(vk::QueryPool, u32)>,
}

/// One timestamp query of an event, returned to the free list when dropped. A slot whose
/// write may still be pending is dropped only with the submission that writes it (the
/// stream's keep list), so a reused slot is never written twice.
struct QuerySlot {
    inner: Arc<Inner>,
    pool: vk::QueryPool,
    index: u32,
    /// The tick, once read (events sharing the slot read it once).
    tick: std::sync::OnceLock<u64>,
}

impl Drop for QuerySlot {
    fn drop(&mut self) {
        self.inner.queries.lock().free.push((self.pool, self.index));
    }
}

/// `XPU_VK_TRACE` timing: microseconds since the last step, where tracing is on.
struct Steps(Option<std::time::Instant>);

impl Steps {
    fn start(on: bool) -> Steps {
        Steps(on.then(std::time::Instant::now))
    }

    /// Microseconds since the previous call (or the start); 0 when tracing is off.
    fn lap(&mut self) -> f64 {
        match &mut self.0 {
            Some(t) => {
                let now = std::time::Instant::now();
                let us = (now - *t).as_secs_f64() * 1e6;
                *t = now;
                us
            }
            None => 0.0,
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: every object made from the device holds an Arc<Inner>, so none is left.
        unsafe {
            let _ = self.device.device_wait_idle();
            for f in self.fences.lock().drain(..) {
                self.device.destroy_fence(f, None);
            }
            for p in self.queries.lock().pools.drain(..) {
                self.device.destroy_query_pool(p, None);
            }
            self.device
                .destroy_command_pool(*self.command_pool.lock(), None);
            let cache = self.pipeline_cache.lock().0;
            pipelines::save(&self.device, cache, &self.cache, &self.cache_key);
            self.device.destroy_pipeline_cache(cache, None);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

impl Inner {
    /// Counts one kernel's objects destroyed; every [`KERNELS_PER_TRIM`], asks glibc's
    /// allocator to give its free memory back to the system (issue 15). A pipeline is made and
    /// freed by the driver across its threads (lavapipe compiles with LLVM and frees a used
    /// pipeline at its queue's next submission), and glibc keeps the freed memory in its arenas:
    /// loading and dropping programs with launches pending grew resident memory by 5 to 20 KB per
    /// program while the bytes in use did not grow, and `malloc_trim` gave all of it back. A
    /// trim costs far less than the 64 pipeline compiles between two of them.
    fn kernel_destroyed(&self) {
        let n = self
            .destroyed_since_trim
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n + 1 >= KERNELS_PER_TRIM {
            self.destroyed_since_trim
                .store(0, std::sync::atomic::Ordering::Relaxed);
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only returns free pages of glibc's arenas to the system; it
            // touches no allocation in use.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }

    fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
        let fits = |i: u32, strict: bool| {
            let flags = self.memory.memory_types[i as usize].property_flags;
            // Prefer a type with no property beyond those asked for (device memory that is
            // not also host-visible through the BAR), then any type that has them.
            bits & (1 << i) != 0 && flags.contains(want) && (!strict || want.contains(flags))
        };
        let n = self.memory.memory_type_count;
        (0..n)
            .find(|&i| fits(i, true))
            .or_else(|| (0..n).find(|&i| fits(i, false)))
    }

    fn buffer(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
        props: vk::MemoryPropertyFlags,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), DeviceError> {
        let info = vk::BufferCreateInfo::default()
            .size(size.max(4))
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info on a live device; the buffer is destroyed by its owner.
        unsafe {
            let buf = self
                .device
                .create_buffer(&info, None)
                .map_err(|e| match e {
                    vk::Result::ERROR_OUT_OF_HOST_MEMORY
                    | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => DeviceError::OutOfMemory {
                        bytes: size,
                        reason: format!("vkCreateBuffer: VkResult {}", e.as_raw()),
                    },
                    e => vk_err("vkCreateBuffer", e),
                })?;
            let req = self.device.get_buffer_memory_requirements(buf);
            let Some(ty) = self.memory_type(req.memory_type_bits, props) else {
                self.device.destroy_buffer(buf, None);
                return Err(DeviceError::OutOfMemory {
                    bytes: size,
                    reason: format!("no memory type with property flags {:#x}", props.as_raw()),
                });
            };
            // One allocation per buffer, so say so (core in 1.1): drivers place dedicated
            // allocations on their own pages.
            let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buf);
            let mut alloc = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty);
            alloc = alloc.push_next(&mut dedicated);
            let mem = match self.device.allocate_memory(&alloc, None) {
                Ok(m) => m,
                Err(e) => {
                    self.device.destroy_buffer(buf, None);
                    return Err(DeviceError::OutOfMemory {
                        bytes: size,
                        reason: format!("vkAllocateMemory: VkResult {}", e.as_raw()),
                    });
                }
            };
            if let Err(e) = self.device.bind_buffer_memory(buf, mem, 0) {
                self.device.destroy_buffer(buf, None);
                self.device.free_memory(mem, None);
                return Err(vk_err("vkBindBufferMemory", e));
            }
            Ok((buf, mem))
        }
    }

    /// Begins `cb` for one submission (a pool with `RESET_COMMAND_BUFFER` resets it here).
    fn begin(&self, cb: vk::CommandBuffer) -> Result<(), DeviceError> {
        // SAFETY: `cb` is not pending (new, or its last submission has completed).
        unsafe {
            self.device.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .map_err(|e| vk_err("vkBeginCommandBuffer", e))
    }

    fn allocate_command_buffer(
        &self,
        pool: vk::CommandPool,
    ) -> Result<vk::CommandBuffer, DeviceError> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the caller holds the pool's lock.
        unsafe { self.device.allocate_command_buffers(&info) }
            .map(|v| v[0])
            .map_err(|e| vk_err("vkAllocateCommandBuffers", e))
    }

    /// Records `f` into a command buffer of the device's own pool, submits it and waits (the
    /// poison fill of a fresh allocation). The pool's lock is held throughout: recording into
    /// a command buffer uses its pool.
    fn one_shot(&self, f: impl FnOnce(vk::CommandBuffer)) -> Result<(), DeviceError> {
        let pool = self.command_pool.lock();
        let cb = self.allocate_command_buffer(*pool)?;
        let r = self.begin(cb).and_then(|()| {
            f(cb);
            let (fence, _) = self.submit(cb)?;
            let r = self.wait_fence(fence);
            self.recycle_fence(fence, r.is_ok());
            r
        });
        // SAFETY: completed (or never submitted); the pool is locked.
        unsafe { self.device.free_command_buffers(*pool, &[cb]) };
        r
    }

    /// A fence from the free list, or a new one; `true` when it was reused.
    fn fence(&self) -> Result<(vk::Fence, bool), DeviceError> {
        if let Some(f) = self.fences.lock().pop() {
            return Ok((f, true));
        }
        // SAFETY: valid create info; the fence goes back to the free list or is destroyed.
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .map(|f| (f, false))
        .map_err(|e| vk_err("vkCreateFence", e))
    }

    /// A fence whose submission has completed (`signalled`), reset and kept for reuse; one
    /// that failed is destroyed.
    fn recycle_fence(&self, fence: vk::Fence, signalled: bool) {
        // SAFETY: no queue operation uses the fence any more.
        unsafe {
            if signalled && self.device.reset_fences(&[fence]).is_ok() {
                self.fences.lock().push(fence);
            } else {
                self.device.destroy_fence(fence, None);
            }
        }
    }

    /// A free timestamp query slot; a new pool of [`QUERY_CHUNK`] when none is left.
    fn query_slot(self: &Arc<Self>) -> Result<QuerySlot, DeviceError> {
        let mut q = self.queries.lock();
        if q.free.is_empty() {
            let info = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(QUERY_CHUNK);
            // SAFETY: valid create info; destroyed with the device.
            let pool = unsafe { self.device.create_query_pool(&info, None) }
                .map_err(|e| vk_err("vkCreateQueryPool", e))?;
            q.pools.push(pool);
            q.free.extend((0..QUERY_CHUNK).rev().map(|i| (pool, i)));
        }
        let (pool, index) = q.free.pop().expect("refilled above");
        Ok(QuerySlot {
            inner: self.clone(),
            pool,
            index,
            tick: std::sync::OnceLock::new(),
        })
    }

    /// A full memory barrier: every earlier command's writes before every later access.
    fn barrier(&self, cb: vk::CommandBuffer) {
        let mb = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE);
        // SAFETY: `cb` is recording.
        unsafe {
            self.device.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                &[mb],
                &[],
                &[],
            );
        }
    }

    /// Ends and submits `cb`, returning a fence that signals when it completes (and whether
    /// the fence was reused).
    fn submit(&self, cb: vk::CommandBuffer) -> Result<(vk::Fence, bool), DeviceError> {
        // SAFETY: `cb` is recording; the queue is externally synchronised by its mutex.
        unsafe {
            self.device
                .end_command_buffer(cb)
                .map_err(|e| vk_err("vkEndCommandBuffer", e))?;
            let (fence, reused) = self.fence()?;
            let cbs = [cb];
            let submit = vk::SubmitInfo::default().command_buffers(&cbs);
            let q = self.queue.lock();
            if let Err(e) = self.device.queue_submit(*q, &[submit], fence) {
                // Unsignalled and unused: still good for the free list.
                self.fences.lock().push(fence);
                return Err(vk_err("vkQueueSubmit", e));
            }
            Ok((fence, reused))
        }
    }

    fn wait_fence(&self, fence: vk::Fence) -> Result<(), DeviceError> {
        if self.spin {
            // Poll for up to 20 ms, then block.
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_millis(20) {
                // SAFETY: the fence is live until its owner destroys it.
                match unsafe { self.device.get_fence_status(fence) } {
                    Ok(true) => return Ok(()),
                    Ok(false) => std::hint::spin_loop(),
                    Err(e) => return Err(vk_err("vkGetFenceStatus (device lost)", e)),
                }
            }
        }
        // SAFETY: the fence is live until its owner destroys it.
        unsafe {
            self.device
                .wait_for_fences(&[fence], true, u64::MAX)
                .map_err(|e| vk_err("vkWaitForFences (device lost or hung kernel)", e))
        }
    }
}

/// A device buffer.
struct VkMemory {
    inner: Arc<Inner>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: usize,
}

impl Drop for VkMemory {
    fn drop(&mut self) {
        // SAFETY: no recorded command uses the buffer any more: in-flight work holds an Arc.
        unsafe {
            self.inner.device.destroy_buffer(self.buffer, None);
            self.inner.device.free_memory(self.memory, None);
        }
    }
}

impl DeviceMemory for VkMemory {
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A host-visible staging buffer, mapped on use.
struct Staging {
    inner: Arc<Inner>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: usize,
}

impl Staging {
    fn new(inner: &Arc<Inner>, size: usize) -> Result<Staging, DeviceError> {
        Staging::with_usage(
            inner,
            size,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        )
    }

    /// A host-visible buffer for `usage` (the loop-limit status buffer is a storage buffer).
    fn with_usage(
        inner: &Arc<Inner>,
        size: usize,
        usage: vk::BufferUsageFlags,
    ) -> Result<Staging, DeviceError> {
        let (buffer, memory) = inner.buffer(
            size as u64,
            usage,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        )?;
        Ok(Staging {
            inner: inner.clone(),
            buffer,
            memory,
            size,
        })
    }

    fn with_map<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> Result<T, DeviceError> {
        if self.size == 0 {
            return Ok(f(&mut []));
        }
        // SAFETY: the memory is host-visible and coherent, mapped only here, and no queued
        // command touches it while it is mapped (callers map before recording or after the
        // fence).
        unsafe {
            let p = self
                .inner
                .device
                .map_memory(
                    self.memory,
                    0,
                    self.size as u64,
                    vk::MemoryMapFlags::empty(),
                )
                .map_err(|e| vk_err("vkMapMemory", e))?;
            let slice = std::slice::from_raw_parts_mut(p as *mut u8, self.size);
            let r = f(slice);
            self.inner.device.unmap_memory(self.memory);
            Ok(r)
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: as for VkMemory.
        unsafe {
            self.inner.device.destroy_buffer(self.buffer, None);
            self.inner.device.free_memory(self.memory, None);
        }
    }
}

struct DescriptorPool {
    inner: Arc<Inner>,
    pool: vk::DescriptorPool,
}

impl Drop for DescriptorPool {
    fn drop(&mut self) {
        // SAFETY: the launch using the pool's set has completed.
        unsafe { self.inner.device.destroy_descriptor_pool(self.pool, None) };
    }
}

type Keep = Box<dyn Any + Send + Sync>;

/// How many operations a stream records before it submits on its own, so the device starts on
/// a long run of launches while the host records the rest (a submission costs a few
/// microseconds of driver time, paid once per this many operations).
const OPS_PER_SUBMISSION: u32 = 64;

/// A submitted command buffer, numbered in its stream's order.
struct InFlight {
    seq: u64,
    fence: vk::Fence,
    cb: vk::CommandBuffer,
    /// What the commands use, dropped when they have completed.
    keep: Vec<Keep>,
}

struct Recording {
    cb: vk::CommandBuffer,
    ops: u32,
    /// The timestamp recorded last, while no operation has been recorded after it: the next
    /// event shares it (a profiled launch's "after" is the next one's "before").
    mark: Option<Arc<QuerySlot>>,
}

struct StreamState {
    /// The stream's own command pool (recording uses the pool, so one per stream lets
    /// streams record on different threads at once); its buffers are reused, not freed.
    pool: vk::CommandPool,
    spare: Vec<vk::CommandBuffer>,
    recording: Option<Recording>,
    /// What the recording commands use.
    keep: Vec<Keep>,
    /// Oldest first.
    in_flight: std::collections::VecDeque<InFlight>,
    /// Submissions made so far; the recording one, if any, becomes number `submitted + 1`.
    submitted: u64,
    /// Every submission up to this number has completed and been retired.
    completed: u64,
}

/// A stream's state, shared by its handle and its events (an event waits on, and may have
/// to submit, the stream's work).
struct StreamCore {
    inner: Arc<Inner>,
    id: u64,
    state: Mutex<StreamState>,
}

// SAFETY: Vulkan handles are plain integers; the command pool and its buffers are used only
// under the state mutex, the queue under its own.
unsafe impl Send for StreamState {}
// SAFETY: as above.
unsafe impl Sync for StreamState {}

impl StreamCore {
    fn new(inner: &Arc<Inner>, family: u32) -> Result<StreamCore, DeviceError> {
        // SAFETY: valid create info; destroyed in Drop once everything has completed.
        let pool = unsafe {
            inner.device.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .map_err(|e| vk_err("vkCreateCommandPool", e))?;
        Ok(StreamCore {
            inner: inner.clone(),
            id: inner
                .next_stream
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            state: Mutex::new(StreamState {
                pool,
                spare: Vec::new(),
                recording: None,
                keep: Vec::new(),
                in_flight: Default::default(),
                submitted: 0,
                completed: 0,
            }),
        })
    }

    /// The recording command buffer, begun on a reused (or new) one if none is open.
    fn open(&self, st: &mut StreamState) -> Result<vk::CommandBuffer, DeviceError> {
        if let Some(r) = &st.recording {
            return Ok(r.cb);
        }
        let cb = match st.spare.pop() {
            Some(cb) => cb,
            None => self.inner.allocate_command_buffer(st.pool)?,
        };
        if let Err(e) = self.inner.begin(cb) {
            st.spare.push(cb);
            return Err(e);
        }
        st.recording = Some(Recording {
            cb,
            ops: 0,
            mark: None,
        });
        Ok(cb)
    }

    /// Records with `f` into the open command buffer, behind a full barrier; submits after
    /// [`OPS_PER_SUBMISSION`] operations.
    fn record(
        &self,
        keep: Vec<Keep>,
        f: impl FnOnce(vk::CommandBuffer),
    ) -> Result<(), DeviceError> {
        let mut st = self.state.lock();
        let cb = self.open(&mut st)?;
        self.inner.barrier(cb);
        f(cb);
        st.keep.extend(keep);
        let r = st.recording.as_mut().expect("opened above");
        r.ops += 1;
        let (ops, mark) = (r.ops, r.mark.take());
        if let Some(mark) = mark {
            // Its write is pending until this submission completes.
            st.keep.push(Box::new(mark));
        }
        if ops >= OPS_PER_SUBMISSION {
            self.submit(&mut st)?;
        }
        Ok(())
    }

    /// Submits the recording command buffer, if any, and retires what has completed.
    fn submit(&self, st: &mut StreamState) -> Result<(), DeviceError> {
        let Some(Recording { cb, ops, mark }) = st.recording.take() else {
            return Ok(());
        };
        if let Some(mark) = mark {
            st.keep.push(Box::new(mark));
        }
        let mut steps = Steps::start(self.inner.trace);
        let keep = std::mem::take(&mut st.keep);
        let (fence, reused) = match self.inner.submit(cb) {
            Ok(f) => f,
            Err(e) => {
                // Not submitted: the buffer is begun afresh on its next use.
                st.spare.push(cb);
                return Err(e);
            }
        };
        let submit_us = steps.lap();
        st.submitted += 1;
        st.in_flight.push_back(InFlight {
            seq: st.submitted,
            fence,
            cb,
            keep,
        });
        let retired = self.retire(st, u64::MAX, false);
        if self.inner.trace {
            eprintln!(
                "xpu-vk stream {} submit #{} ({ops} ops, fence {}): submit {submit_us:.1} us, \
                 retire {:.1} us, in flight {}",
                self.id,
                st.submitted,
                if reused { "reused" } else { "new" },
                steps.lap(),
                st.in_flight.len()
            );
        }
        retired
    }

    /// Retires submissions up to number `upto` in order, waiting for each when `wait`,
    /// otherwise stopping at the first not yet complete. Fences and command buffers go back
    /// for reuse. A failed wait (device lost) retires the submission and is answered.
    fn retire(&self, st: &mut StreamState, upto: u64, wait: bool) -> Result<(), DeviceError> {
        let mut result = Ok(());
        while let Some(f) = st.in_flight.front() {
            if f.seq > upto {
                break;
            }
            let ok = if wait {
                let r = self.inner.wait_fence(f.fence);
                let ok = r.is_ok();
                if result.is_ok() {
                    result = r;
                }
                ok
            } else {
                // SAFETY: the fence is live.
                match unsafe { self.inner.device.get_fence_status(f.fence) } {
                    Ok(true) => true,
                    Ok(false) => break,
                    Err(e) => {
                        if result.is_ok() {
                            result = Err(vk_err("vkGetFenceStatus (device lost)", e));
                        }
                        false
                    }
                }
            };
            let f = st.in_flight.pop_front().expect("front exists");
            self.inner.recycle_fence(f.fence, ok);
            st.spare.push(f.cb);
            st.completed = f.seq;
        }
        result
    }

    /// Submits what the recording holds if submission `seq` is still being recorded.
    fn ensure_submitted(&self, st: &mut StreamState, seq: u64) -> Result<(), DeviceError> {
        if seq > st.submitted {
            self.submit(st)?;
        }
        Ok(())
    }

    /// Blocks until submission `seq` (and every earlier one) has completed.
    fn wait(&self, seq: u64) -> Result<(), DeviceError> {
        let mut st = self.state.lock();
        if seq <= st.completed {
            return Ok(());
        }
        // A submission made here prints its own line; the figure here is the wait alone.
        self.ensure_submitted(&mut st, seq)?;
        let mut steps = Steps::start(self.inner.trace);
        let r = self.retire(&mut st, seq, true);
        if self.inner.trace {
            eprintln!(
                "xpu-vk stream {} wait #{seq}: {:.1} us",
                self.id,
                steps.lap()
            );
        }
        r
    }

    /// Submits what is recorded and waits, until `until` at the latest, for the stream's
    /// last operation: `true` when it completed, `false` when the time ran out (the work stays
    /// in flight, everything it uses kept alive, and a later wait or sync finds it).
    fn wait_last_until(&self, until: std::time::Instant) -> Result<bool, DeviceError> {
        let mut st = self.state.lock();
        let seq = st.submitted + u64::from(st.recording.is_some());
        self.ensure_submitted(&mut st, seq)?;
        while let Some(f) = st.in_flight.front() {
            if f.seq > seq {
                break;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            let ns = u64::try_from(left.as_nanos()).unwrap_or(u64::MAX);
            // SAFETY: the fence is live while its submission is in flight.
            match unsafe { self.inner.device.wait_for_fences(&[f.fence], true, ns) } {
                Ok(()) => {
                    let done = f.seq;
                    self.retire(&mut st, done, false)?;
                }
                Err(vk::Result::TIMEOUT) => return Ok(false),
                Err(e) => return Err(vk_err("vkWaitForFences (device lost)", e)),
            }
        }
        Ok(true)
    }

    /// Whether submission `seq` has completed, submitting it first if it is still being
    /// recorded (so polling an event alone makes progress).
    fn poll(&self, seq: u64) -> Result<bool, DeviceError> {
        let mut st = self.state.lock();
        if seq <= st.completed {
            return Ok(true);
        }
        self.ensure_submitted(&mut st, seq)?;
        self.retire(&mut st, seq, false)?;
        Ok(seq <= st.completed)
    }

    /// Submits everything and waits for it.
    fn sync(&self) -> Result<(), DeviceError> {
        let mut st = self.state.lock();
        self.submit(&mut st)?;
        let mut steps = Steps::start(self.inner.trace);
        let r = self.retire(&mut st, u64::MAX, true);
        if self.inner.trace {
            eprintln!(
                "xpu-vk stream {} sync to #{}: wait {:.1} us",
                self.id,
                st.submitted,
                steps.lap()
            );
        }
        r
    }
}

impl Drop for StreamCore {
    fn drop(&mut self) {
        let _ = self.sync();
        let mut st = self.state.lock();
        // Anything a failed submission left unretired is waited for by the device.
        if !st.in_flight.is_empty() {
            // SAFETY: a live device.
            let _ = unsafe { self.inner.device.device_wait_idle() };
            for f in std::mem::take(&mut st.in_flight) {
                self.inner.recycle_fence(f.fence, false);
            }
        }
        st.keep.clear();
        // SAFETY: nothing recorded from the pool is pending; destroying it frees its buffers.
        unsafe { self.inner.device.destroy_command_pool(st.pool, None) };
    }
}

/// A stream: its core, shared with the events recorded on it.
struct VkStream {
    core: Arc<StreamCore>,
}

impl VkStream {
    fn record(
        &self,
        keep: Vec<Keep>,
        f: impl FnOnce(vk::CommandBuffer),
    ) -> Result<(), DeviceError> {
        self.core.record(keep, f)
    }

    /// Submits what was recorded and waits for all of it.
    fn sync(&self) -> Result<(), DeviceError> {
        self.core.sync()
    }
}

impl Drop for VkStream {
    fn drop(&mut self) {
        // The handle's work is submitted and waited for even while events keep the core.
        let _ = self.core.sync();
    }
}

impl StreamImpl for VkStream {
    fn sync(&self) -> Result<(), DeviceError> {
        self.core.sync()
    }

    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        // An event is "everything so far": the submission that holds (or held) the stream's
        // last operation. Its timestamp, where the queue writes them, goes into the recording
        // command buffer (written once everything before it has finished), so work recorded
        // between two events lands in
        // one submission with both timestamps and their interval is device time only. Nothing
        // is submitted here: waiting on, polling or being waited for by another stream
        // submits the event's work.
        let core = &self.core;
        let mut steps = Steps::start(core.inner.trace);
        let mut st = core.state.lock();
        let shared = st.recording.as_ref().and_then(|r| r.mark.clone());
        let query = match core.inner.timestamps {
            // Nothing recorded since the last timestamp: the same tick.
            Some(_) if shared.is_some() => shared,
            Some(_) => {
                let slot = core.inner.query_slot()?;
                let cb = core.open(&mut st)?;
                let dev = &core.inner.device;
                // SAFETY: `cb` is recording; the slot is free (its last write completed), and
                // commands on one query run in submission order, reset before write.
                unsafe { dev.cmd_reset_query_pool(cb, slot.pool, slot.index, 1) };
                // No barrier of its own: a timestamp at BOTTOM_OF_PIPE is written once every
                // earlier command has finished (its first synchronisation scope is all of
                // them), and every operation after it waits behind a full barrier
                // (`StreamCore::record`). A barrier here doubled the device's work per
                // profiled launch.
                // SAFETY: as above.
                unsafe {
                    dev.cmd_write_timestamp(
                        cb,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                        slot.pool,
                        slot.index,
                    )
                };
                let slot = Arc::new(slot);
                if let Some(r) = st.recording.as_mut() {
                    r.mark = Some(slot.clone());
                }
                Some(slot)
            }
            None => None,
        };
        let seq = st.submitted + st.recording.is_some() as u64;
        drop(st);
        if core.inner.trace {
            eprintln!(
                "xpu-vk stream {} event at #{seq}: {:.1} us",
                core.id,
                steps.lap()
            );
        }
        Ok(Arc::new(VkEvent {
            core: core.clone(),
            seq,
            query,
        }))
    }

    fn wait_for(&self, event: &dyn EventImpl) -> Result<(), DeviceError> {
        // One queue, and every operation behind a full barrier: later work on this stream
        // follows the event's work once that is submitted, which it may not be yet.
        let event =
            event
                .as_any()
                .downcast_ref::<VkEvent>()
                .ok_or_else(|| DeviceError::ForeignObject {
                    what: "the event".into(),
                })?;
        if Arc::ptr_eq(&event.core, &self.core) {
            return Ok(());
        }
        let mut st = event.core.state.lock();
        event.core.ensure_submitted(&mut st, event.seq)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A point in a stream: complete when the stream's submission number `seq` is.
struct VkEvent {
    core: Arc<StreamCore>,
    seq: u64,
    /// The timestamp written after everything before the event (shared with the events
    /// recorded next to it, with nothing between).
    query: Option<Arc<QuerySlot>>,
}

impl VkEvent {
    /// The event's device tick, once its submission has completed.
    fn tick(&self) -> Option<u64> {
        let slot = self.query.as_ref()?;
        if let Some(&t) = slot.tick.get() {
            return Some(t);
        }
        self.core.wait(self.seq).ok()?;
        let mut v = [0u64; 1];
        // SAFETY: the query was written by a completed submission.
        unsafe {
            self.core.inner.device.get_query_pool_results(
                slot.pool,
                slot.index,
                &mut v,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .ok()?;
        Some(*slot.tick.get_or_init(|| v[0]))
    }
}

// SAFETY: handles are integers; the stream state is behind its mutex.
unsafe impl Send for VkEvent {}
// SAFETY: as above.
unsafe impl Sync for VkEvent {}

impl Drop for VkEvent {
    fn drop(&mut self) {
        let Some(slot) = self.query.take() else {
            return;
        };
        // The slot is free again only once the submission writing it has completed: until
        // then it travels with that submission's keep list.
        let mut st = self.core.state.lock();
        if self.seq <= st.completed {
            drop(st);
            drop(slot);
        } else if self.seq > st.submitted {
            st.keep.push(Box::new(slot));
        } else if let Some(f) = st.in_flight.iter_mut().find(|f| f.seq == self.seq) {
            f.keep.push(Box::new(slot));
        }
    }
}

impl EventImpl for VkEvent {
    fn is_complete(&self) -> bool {
        // A failure (device lost) reads as complete: the next wait reports it.
        self.core.poll(self.seq).unwrap_or(true)
    }
    fn sync(&self) -> Result<(), DeviceError> {
        self.core.wait(self.seq)
    }
    fn elapsed_since(&self, earlier: &dyn EventImpl) -> Option<Duration> {
        let earlier = earlier.as_any().downcast_ref::<VkEvent>()?;
        let (period, mask) = self.core.inner.timestamps?;
        let ticks = self.tick()?.wrapping_sub(earlier.tick()?) & mask;
        Some(Duration::from_nanos((ticks as f64 * period).round() as u64))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What a Vulkan device is opened with: taken from the environment by [`VulkanDevice::open`]
/// (the `XPU_VK_*` variables and `CAJETA_XPU_VK_F32_IN_F64`, `config`), given by the caller to
/// [`VulkanDevice::open_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanSettings {
    /// Push descriptors where the device has them; off, each launch takes a set from a pool.
    pub push_descriptors: bool,
    /// Compute f32 `+ - *` in f64 (`Some(true)`), never (`Some(false)`), or where the driver is
    /// known to flush f32 subnormals under `DenormPreserve` (`None`: NVIDIA's).
    pub f32_in_f64: Option<bool>,
    /// Read the driver's statistics of each pipeline (registers, ...).
    pub pipeline_stats: bool,
    /// Print the host time of each launch, submission and wait.
    pub trace: bool,
    /// The persistent cache of SPIR-V (`XPU_CACHE_DIR`, `backend::cache`); `None`: memory
    /// only.
    pub cache_dir: Option<std::path::PathBuf>,
}

impl VulkanSettings {
    /// The settings of the environment; a malformed value is an error naming it.
    pub fn from_config() -> Result<VulkanSettings, DeviceError> {
        let c = crate::config::get();
        Ok(VulkanSettings {
            push_descriptors: c.vk_push_descriptors.clone()?,
            f32_in_f64: c.vk_f32_in_f64.clone()?,
            pipeline_stats: c.vk_pipeline_stats.clone()?,
            trace: c.vk_trace.clone()?,
            cache_dir: c.cache_dir.clone(),
        })
    }
}

/// One Vulkan device.
pub struct VulkanDevice {
    inner: Arc<Inner>,
    facts: DeviceFacts,
    caps: Caps,
    min_offset_align: u64,
    max_push: u32,
    /// `VK_EXT_subgroup_size_control` for compute: the sizes a pipeline may require.
    size_control: Option<(u32, u32)>,
    /// A software implementation on the host CPU (lavapipe): selection prefers the CPU backend.
    emulated: bool,
    /// The kernel that large device-to-device copies run ([`copy_kernel`]), built on first
    /// use; `None` where it could not be built (copies then stay `vkCmdCopyBuffer`).
    copier: std::sync::OnceLock<Option<Arc<dyn KernelImpl>>>,
}

/// Device-to-device copies of at least this many bytes, with 4-byte aligned offsets and
/// length, run the copy kernel ([`copy_kernel`]) rather than `vkCmdCopyBuffer`. On an H200 (`xpu bench
/// vulkan`, copies of 1.5 GiB) the command took 3.85 ms; kernels of one 32-bit word per
/// work-item 1.43 ms, of one 16-byte quad 1.18, of four quads 1.47, and of four words (this
/// one, as the coarsening pass shapes a streaming kernel) 0.81–0.85: a kernel's bandwidth.
const KERNEL_COPY_MIN: usize = 1 << 20;

/// Work-items per workgroup of the copy kernel.
const COPY_BLOCK: u32 = 256;

/// The copy kernel: `n` 32-bit words from word `ss` of `src` to word `ds` of `dst` (the
/// buffers bound from offsets the device can bind). Each work-item copies four words of
/// four consecutive blocks' worth, [`COPY_BLOCK`] apart, all its loads before its stores.
fn copy_kernel() -> String {
    format!(
        "kernel xpu_copy_words(dst: buf<u32, rw>, src: buf<u32>, n: u32, ds: u32,
                    ss: u32) {{
    let b: u32 = {COPY_BLOCK};
    let j: u32 = group_id.x * 4 * b + local_id.x;
    if j + 3 * b < n {{
        let v0: u32 = src[ss + j];
        let v1: u32 = src[ss + j + b];
        let v2: u32 = src[ss + j + 2 * b];
        let v3: u32 = src[ss + j + 3 * b];
        dst[ds + j] = v0;
        dst[ds + j + b] = v1;
        dst[ds + j + 2 * b] = v2;
        dst[ds + j + 3 * b] = v3;
    }} else {{
        for k: u32 in 0..4 {{
            if j + k * b < n {{
                dst[ds + j + k * b] = src[ss + j + k * b];
            }}
        }}
    }}
}}
"
    )
}

fn vendor_name(id: u32) -> String {
    match id {
        0x10de => "NVIDIA".into(),
        0x1002 => "AMD".into(),
        0x8086 => "Intel".into(),
        0x10005 => "Mesa".into(),
        0x13b5 => "ARM".into(),
        0x5143 => "Qualcomm".into(),
        other => format!("0x{other:x}"),
    }
}

impl VulkanDevice {
    /// Opens the preferred Vulkan device: discrete, then integrated, then any with compute.
    /// Opens the first Vulkan device with the settings of the environment
    /// ([`VulkanSettings::from_config`]).
    pub fn open() -> Result<VulkanDevice, DeviceError> {
        VulkanDevice::open_with(VulkanSettings::from_config()?)
    }

    /// Opens the first Vulkan device with `settings`.
    pub fn open_with(settings: VulkanSettings) -> Result<VulkanDevice, DeviceError> {
        // SAFETY: loads the system's libvulkan; failure is an error, not a crash.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| unavailable(format!("no Vulkan loader: {e}")))?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"xpu")
            .api_version(vk::API_VERSION_1_1);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: valid create info.
        let instance = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| unavailable(format!("vkCreateInstance: VkResult {}", e.as_raw())))?;
        match Self::open_on(entry, instance.clone(), &settings) {
            Ok(d) => Ok(d),
            Err(e) => {
                // SAFETY: nothing else was created from the instance.
                unsafe { instance.destroy_instance(None) };
                Err(e)
            }
        }
    }

    fn open_on(
        entry: ash::Entry,
        instance: ash::Instance,
        settings: &VulkanSettings,
    ) -> Result<VulkanDevice, DeviceError> {
        // SAFETY: queries on a live instance.
        let pds = unsafe { instance.enumerate_physical_devices() }.map_err(|e| {
            unavailable(format!(
                "vkEnumeratePhysicalDevices: VkResult {}",
                e.as_raw()
            ))
        })?;
        let rank = |t: vk::PhysicalDeviceType| match t {
            vk::PhysicalDeviceType::DISCRETE_GPU => 0,
            vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
            vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
            vk::PhysicalDeviceType::CPU => 3,
            _ => 4,
        };
        let mut best: Option<(u32, vk::PhysicalDevice, u32)> = None;
        for pd in pds {
            // SAFETY: `pd` came from this instance.
            let props = unsafe { instance.get_physical_device_properties(pd) };
            if props.api_version < vk::API_VERSION_1_1 {
                continue;
            }
            // SAFETY: `pd` came from this instance.
            let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
            let Some(family) = families
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            else {
                continue;
            };
            let r = rank(props.device_type);
            if best.is_none_or(|(br, _, _)| r < br) {
                best = Some((r, pd, family as u32));
            }
        }
        let (_, pd, family) =
            best.ok_or_else(|| unavailable("no Vulkan 1.1 device with a compute queue"))?;
        // SAFETY: as above.
        let valid_bits = unsafe { instance.get_physical_device_queue_family_properties(pd) }
            [family as usize]
            .timestamp_valid_bits;

        // SAFETY: queries on a live physical device.
        let exts = unsafe { instance.enumerate_device_extension_properties(pd) }
            .map_err(|e| vk_err("vkEnumerateDeviceExtensionProperties", e))?;
        let has_ext = |name: &std::ffi::CStr| {
            exts.iter()
                .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
        };
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut idp = vk::PhysicalDeviceIDProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut subgroup)
            .push_next(&mut idp);
        // SAFETY: `pd` came from this live instance; the chain holds structures that live across the call.
        unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
        let props = props2.properties;
        let limits = props.limits;
        // Multiprocessors where a vendor extension reports them (contract §5.2): NVIDIA's SM
        // count and warps per SM, AMD's shader-core layout.
        let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let has_sm = has_ext(ash::nv::shader_sm_builtins::NAME);
        if has_sm {
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sm);
            // SAFETY: as above; `sm` outlives the call.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        }
        let mut core = vk::PhysicalDeviceShaderCorePropertiesAMD::default();
        let has_core = has_ext(ash::amd::shader_core_properties::NAME);
        if has_core {
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut core);
            // SAFETY: as above; `core` outlives the call.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        }
        let nonzero = |v: u32| (v > 0).then_some(v);
        let (mps, simds, mp_threads, mp_registers) = if has_sm {
            (
                nonzero(sm.shader_sm_count),
                None,
                nonzero(sm.shader_warps_per_sm * subgroup.subgroup_size),
                None,
            )
        } else if has_core {
            let cus = core.shader_engine_count
                * core.shader_arrays_per_engine_count
                * core.compute_units_per_shader_array;
            (
                nonzero(cus),
                nonzero(core.simd_per_compute_unit),
                nonzero(
                    core.simd_per_compute_unit * core.wavefronts_per_simd * core.wavefront_size,
                ),
                nonzero(core.simd_per_compute_unit * core.vgprs_per_simd * core.wavefront_size),
            )
        } else {
            (None, None, None, None)
        };

        let esc = has_ext(ash::ext::subgroup_size_control::NAME);
        let mut scp = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
        if esc {
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut scp);
            // SAFETY: as above; `scp` outlives the call.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        }
        // Float controls (core in 1.2): whether subnormals can be preserved per width.
        let efc = has_ext(ash::khr::shader_float_controls::NAME);
        let mut fcp = vk::PhysicalDeviceFloatControlsProperties::default();
        if efc || props.api_version >= vk::API_VERSION_1_2 {
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut fcp);
            // SAFETY: as above; `fcp` outlives the call.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        }
        // Push descriptors: a launch's buffers written into its command buffer (no pool or
        // set per launch). XPU_VK_PUSH_DESCRIPTORS=0 keeps the per-launch pool (tests use it).
        let push_descriptors =
            has_ext(ash::khr::push_descriptor::NAME) && settings.push_descriptors;
        let mut pdp = vk::PhysicalDevicePushDescriptorPropertiesKHR::default();
        if push_descriptors {
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut pdp);
            // SAFETY: as above; `pdp` outlives the call.
            unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        }
        let want_stats =
            settings.pipeline_stats && has_ext(ash::khr::pipeline_executable_properties::NAME);
        let e8 = has_ext(ash::khr::_8bit_storage::NAME);
        let ef16 = has_ext(ash::khr::shader_float16_int8::NAME);
        let ea64 = has_ext(ash::khr::shader_atomic_int64::NAME);
        let mut s16 = vk::PhysicalDevice16BitStorageFeatures::default();
        let mut s8 = vk::PhysicalDevice8BitStorageFeatures::default();
        let mut f16i8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut a64 = vk::PhysicalDeviceShaderAtomicInt64Features::default();
        let mut scf = vk::PhysicalDeviceSubgroupSizeControlFeatures::default();
        {
            let mut feats = vk::PhysicalDeviceFeatures2::default().push_next(&mut s16);
            if e8 {
                feats = feats.push_next(&mut s8);
            }
            if ef16 {
                feats = feats.push_next(&mut f16i8);
            }
            if ea64 {
                feats = feats.push_next(&mut a64);
            }
            if esc {
                feats = feats.push_next(&mut scf);
            }
            // SAFETY: `pd` came from this instance; every structure chained to `feats` outlives the call.
            unsafe { instance.get_physical_device_features2(pd, &mut feats) };
        }
        // SAFETY: as above.
        let base = unsafe { instance.get_physical_device_features(pd) };
        let compute_ops = subgroup
            .supported_stages
            .contains(vk::ShaderStageFlags::COMPUTE);
        let ops = subgroup.supported_operations;
        // Mesa's llvmpipe (lavapipe): the one device whose known defects the lowering works
        // around by name (each `Caps` field below says which).
        let llvmpipe = props
            .device_name_as_c_str()
            .is_ok_and(|n| n.to_string_lossy().contains("llvmpipe"));
        let caps = Caps {
            int8: ef16 && f16i8.shader_int8 != 0,
            int16: base.shader_int16 != 0,
            int64: base.shader_int64 != 0,
            float16: ef16 && f16i8.shader_float16 != 0,
            float64: base.shader_float64 != 0,
            storage8: e8 && s8.storage_buffer8_bit_access != 0,
            storage16: s16.storage_buffer16_bit_access != 0,
            int64_atomics: ea64 && a64.shader_buffer_int64_atomics != 0,
            float32_atomic_add: false,
            subgroup_size: subgroup.subgroup_size,
            subgroup_basic: compute_ops && ops.contains(vk::SubgroupFeatureFlags::BASIC),
            subgroup_vote: compute_ops && ops.contains(vk::SubgroupFeatureFlags::VOTE),
            subgroup_arithmetic: compute_ops && ops.contains(vk::SubgroupFeatureFlags::ARITHMETIC),
            subgroup_ballot: compute_ops && ops.contains(vk::SubgroupFeatureFlags::BALLOT),
            subgroup_shuffle: compute_ops && ops.contains(vk::SubgroupFeatureFlags::SHUFFLE),
            barrier_suspends: llvmpipe,
            f64_rounding_from_floor: llvmpipe,
            // Seen on both drivers we run on (lavapipe and NVIDIA's, H200 driver 580).
            float_sum_from_positive_zero: true,
            // The module is SPIR-V 1.3, so `SPV_KHR_float_controls` must be enabled as an
            // extension (below) even on a 1.2 device.
            denorm_preserve16: efc && fcp.shader_denorm_preserve_float16 != 0,
            denorm_preserve32: efc && fcp.shader_denorm_preserve_float32 != 0,
            denorm_preserve64: efc && fcp.shader_denorm_preserve_float64 != 0,
            szinan_preserve16: efc && fcp.shader_signed_zero_inf_nan_preserve_float16 != 0,
            szinan_preserve32: efc && fcp.shader_signed_zero_inf_nan_preserve_float32 != 0,
            szinan_preserve64: efc && fcp.shader_signed_zero_inf_nan_preserve_float64 != 0,
            folds_float_identities: llvmpipe,
            // NVIDIA reports `shaderDenormPreserveFloat32` and still flushes f32 subnormal
            // operands and results of `+ - *` under `DenormPreserve` (H200, driver 580), so
            // the feature bit cannot tell; the vendor id does. CAJETA_XPU_VK_F32_IN_F64=1
            // forces the f64 path (tests exercise it on lavapipe); =0 turns it off (f32
            // subnormals may then flush: for measuring what the path costs).
            flushes_f32_subnormals: settings.f32_in_f64.unwrap_or(props.vendor_id == 0x10DE),
            // Mesa's llvmpipe ends an invocation's loops after 65,535 passes over all of them
            // (its loop limiter), silently: such launches are checked (XPU-L016).
            loop_limit: llvmpipe.then_some(spirv::LLVMPIPE_LOOP_LIMIT),
            // A CPU device (lavapipe) runs shaders in this process: shared and private
            // indices are clamped there (DESIGN.md, Decisions 8). GPUs keep their code.
            clamp_indices: props.device_type == vk::PhysicalDeviceType::CPU,
        };

        // Enable exactly what is offered and used by the emitter.
        let enabled = vk::PhysicalDeviceFeatures::default()
            .shader_int16(caps.int16)
            .shader_int64(caps.int64)
            .shader_float64(caps.float64);
        let mut en16 = vk::PhysicalDevice16BitStorageFeatures::default()
            .storage_buffer16_bit_access(caps.storage16);
        let mut en8 = vk::PhysicalDevice8BitStorageFeatures::default()
            .storage_buffer8_bit_access(caps.storage8);
        let mut enf = vk::PhysicalDeviceShaderFloat16Int8Features::default()
            .shader_int8(caps.int8)
            .shader_float16(caps.float16);
        let mut ena = vk::PhysicalDeviceShaderAtomicInt64Features::default()
            .shader_buffer_int64_atomics(caps.int64_atomics)
            .shader_shared_int64_atomics(ea64 && a64.shader_shared_int64_atomics != 0);
        let size_control = (esc
            && scf.subgroup_size_control != 0
            && scp
                .required_subgroup_size_stages
                .contains(vk::ShaderStageFlags::COMPUTE))
        .then_some((scp.min_subgroup_size, scp.max_subgroup_size));
        let mut ensc =
            vk::PhysicalDeviceSubgroupSizeControlFeatures::default().subgroup_size_control(true);
        let mut ext_names = Vec::new();
        let prio = [1.0f32];
        let qinfo = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let mut dinfo = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qinfo)
            .enabled_features(&enabled)
            .push_next(&mut en16);
        if e8 {
            ext_names.push(ash::khr::_8bit_storage::NAME.as_ptr());
            dinfo = dinfo.push_next(&mut en8);
        }
        if ef16 {
            ext_names.push(ash::khr::shader_float16_int8::NAME.as_ptr());
            dinfo = dinfo.push_next(&mut enf);
        }
        if ea64 {
            ext_names.push(ash::khr::shader_atomic_int64::NAME.as_ptr());
            dinfo = dinfo.push_next(&mut ena);
        }
        if efc {
            ext_names.push(ash::khr::shader_float_controls::NAME.as_ptr());
        }
        if size_control.is_some() {
            ext_names.push(ash::ext::subgroup_size_control::NAME.as_ptr());
            dinfo = dinfo.push_next(&mut ensc);
        }
        let mut enstats = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        if push_descriptors {
            ext_names.push(ash::khr::push_descriptor::NAME.as_ptr());
        }
        if want_stats {
            ext_names.push(ash::khr::pipeline_executable_properties::NAME.as_ptr());
            dinfo = dinfo.push_next(&mut enstats);
        }
        let dinfo = dinfo.enabled_extension_names(&ext_names);
        // SAFETY: valid create info with features the device reported.
        let device = unsafe { instance.create_device(pd, &dinfo, None) }
            .map_err(|e| unavailable(format!("vkCreateDevice: VkResult {}", e.as_raw())))?;
        // SAFETY: family/index 0 were requested above.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: `pd` came from this live instance.
        let memory = unsafe { instance.get_physical_device_memory_properties(pd) };
        // SAFETY: valid create info on the device just created; destroyed with the device.
        let pool = unsafe {
            device.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
        }
        .map_err(|e| vk_err("vkCreateCommandPool", e))?;

        let name = props
            .device_name_as_c_str()
            .ok()
            .map(|c| c.to_string_lossy().into_owned());
        let heaps = &memory.memory_heaps[..memory.memory_heap_count as usize];
        let device_local: u64 = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .sum();
        let v = props.driver_version;
        let facts = DeviceFacts {
            backend: Some(Backend::Vulkan),
            name,
            vendor: Some(vendor_name(props.vendor_id)),
            driver_version: Some(format!(
                "{v} (api {}.{}.{})",
                vk::api_version_major(props.api_version),
                vk::api_version_minor(props.api_version),
                vk::api_version_patch(props.api_version)
            )),
            uuid: Some(idp.device_uuid.iter().map(|b| format!("{b:02x}")).collect()),
            multiprocessors: mps,
            simds_per_multiprocessor: simds,
            wave_width: Some(caps.subgroup_size),
            // Every width builds: W = S natively (or as a required subgroup size), W < S in
            // narrow mode, W > S as a virtual wave whose wave verbs are refused by name.
            supported_wave_widths: Some((0..7).map(|k| 1u32 << k).collect()),
            max_threads_per_block: Some(limits.max_compute_work_group_invocations),
            max_block_dims: Some(limits.max_compute_work_group_size),
            max_grid_dims: Some(limits.max_compute_work_group_count),
            shared_bytes_per_block: Some(limits.max_compute_shared_memory_size as u64),
            shared_bytes_per_block_optin: None,
            shared_bytes_per_multiprocessor: None,
            registers_per_multiprocessor: mp_registers,
            registers_per_block: None,
            max_threads_per_multiprocessor: mp_threads,
            max_blocks_per_multiprocessor: None,
            global_memory_bytes: (device_local > 0).then_some(device_local),
            integrated: Some(props.device_type != vk::PhysicalDeviceType::DISCRETE_GPU),
            clock_khz: None,
            buffer_offset_alignment: Some(limits.min_storage_buffer_offset_alignment),
            // The uniform block declares 64 KiB (`spirv::constant::CONSTANT_BYTES`).
            constant_bytes: Some(u64::from(
                limits
                    .max_uniform_buffer_range
                    .min(crate::codegen::spirv::constant::CONSTANT_BYTES),
            )),
            constant_offset_alignment: Some(limits.min_uniform_buffer_offset_alignment),
            int64_atomics: Some(caps.int64_atomics),
            l2_cache_bytes: None,
            memory_bus_bits: None,
            memory_clock_khz: None,
            features: {
                use crate::hal::facts::{FeatureSupport, Support};
                let yes = |b: bool| Some(if b { Support::Native } else { Support::No });
                FeatureSupport {
                    int64_atomics: yes(caps.int64_atomics),
                    f16: yes(caps.float16),
                    f64: yes(caps.float64),
                    // Without a required subgroup size other widths run as narrow or virtual
                    // waves (spirv.rs).
                    subgroup_size_control: Some(if size_control.is_some() {
                        Support::Native
                    } else {
                        Support::Emulated
                    }),
                    // The emitter builds matrices in software (codegen/spirv/matrix.rs).
                    cooperative_matrix: Some(Support::Emulated),
                    shared_opt_in: Some(Support::No),
                }
            },
        };
        let store = crate::backend::cache::CodeCache::disk_only(settings.cache_dir.clone());
        let cache_key = crate::backend::cache::DeviceKey {
            arch: stored::target(&caps, size_control),
            driver: format!(
                "{:x}-{}",
                props.driver_version,
                idp.device_uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
            compiler: stored::compiler_id(),
        };
        let cache = pipelines::create(&device, &store, &cache_key)
            .map_err(|e| vk_err("vkCreatePipelineCache", e))?;
        Ok(VulkanDevice {
            inner: Arc::new(Inner {
                _entry: entry,
                queue: Mutex::new(queue),
                memory,
                pipeline_cache: Mutex::new((cache, 0)),
                command_pool: Mutex::new(pool),
                family,
                timestamps: (valid_bits > 0 && limits.timestamp_period > 0.0).then(|| {
                    let mask = if valid_bits >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << valid_bits) - 1
                    };
                    (limits.timestamp_period as f64, mask)
                }),
                spin: props.device_type != vk::PhysicalDeviceType::CPU,
                exec_stats: want_stats.then(|| {
                    ash::khr::pipeline_executable_properties::Device::new(&instance, &device)
                }),
                push_descriptor: push_descriptors.then(|| {
                    (
                        ash::khr::push_descriptor::Device::new(&instance, &device),
                        pdp.max_push_descriptors,
                    )
                }),
                fences: Mutex::new(Vec::new()),
                queries: Mutex::new(QuerySlots::default()),
                trace: settings.trace,
                next_stream: AtomicU64::new(0),
                code_bytes: AtomicU64::new(0),
                destroyed_since_trim: AtomicU64::new(0),
                cache: store,
                cache_key,
                instance,
                device,
            }),
            facts,
            caps,
            min_offset_align: limits.min_storage_buffer_offset_alignment.max(1),
            max_push: limits.max_push_constants_size,
            size_control,
            emulated: props.device_type == vk::PhysicalDeviceType::CPU,
            copier: std::sync::OnceLock::new(),
        })
    }

    /// The copy kernel, built on first use (see [`KERNEL_COPY_MIN`]).
    fn copier(&self) -> Option<&Arc<dyn KernelImpl>> {
        self.copier
            .get_or_init(|| {
                let module = Arc::new(crate::ir::parse(&copy_kernel()).ok()?.verify().ok()?);
                let function = crate::hal::kernel_function(&module, "xpu_copy_words")?;
                let program = self.load(&module).ok()?;
                program.kernel("xpu_copy_words", function).ok()
            })
            .as_ref()
    }

    /// `len` bytes (a multiple of 4) from `src` to `dst` (different allocations, offsets
    /// multiples of 4) by the copy kernel, in dispatches of at most the device's grid.
    fn kernel_copy(
        &self,
        kernel: &Arc<dyn KernelImpl>,
        stream: &dyn StreamImpl,
        (src, src_offset): (&Arc<dyn DeviceMemory>, usize),
        (dst, dst_offset): (&Arc<dyn DeviceMemory>, usize),
        len: usize,
    ) -> Result<(), DeviceError> {
        let groups = self.facts.max_grid_dims.map_or(65535, |g| g[0]);
        let most = groups as usize * COPY_BLOCK as usize * 4 * 4;
        let elem = crate::ir::ElemType::scalar(crate::ir::Scalar::U32);
        let align = self.min_offset_align as usize;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(most);
            // Bound from the offset below that the device can bind; the word shift is an
            // argument.
            let binding = |memory: &Arc<dyn DeviceMemory>, offset: usize, writable| {
                let at = offset + done;
                let shift = at % align;
                let arg = DeviceArg::Buffer(crate::hal::BufferBinding {
                    memory: memory.clone(),
                    offset: at - shift,
                    len: shift + n,
                    elem,
                    writable,
                });
                (arg, DeviceArg::Value(HostValue::from((shift / 4) as u32)))
            };
            let (d, ds) = binding(dst, dst_offset, true);
            let (s, ss) = binding(src, src_offset, false);
            let words = (n / 4) as u32;
            let args = [d, s, DeviceArg::Value(HostValue::from(words)), ds, ss];
            let launch = Launch::grid([words.div_ceil(COPY_BLOCK * 4)]).block([COPY_BLOCK]);
            kernel
                .launch(stream, &launch, &args)
                .map_err(|e| DeviceError::Driver {
                    message: format!("the copy kernel: {e}"),
                })?;
            done += n;
        }
        Ok(())
    }

    /// What the device offers the emitter.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The subgroup sizes the device can require of a pipeline (`VK_EXT_subgroup_size_control`).
    pub fn size_control(&self) -> Option<(u32, u32)> {
        self.size_control
    }

    fn stream<'s>(&self, s: &'s dyn StreamImpl) -> Result<&'s VkStream, DeviceError> {
        s.as_any()
            .downcast_ref::<VkStream>()
            .ok_or_else(|| DeviceError::ForeignObject {
                what: "the stream".into(),
            })
    }
}

fn memory_of(m: &Arc<dyn DeviceMemory>) -> Result<&VkMemory, DeviceError> {
    m.as_any()
        .downcast_ref::<VkMemory>()
        .ok_or_else(|| DeviceError::ForeignObject {
            what: "the buffer".into(),
        })
}

fn range_check(mem: &VkMemory, offset: usize, len: usize) -> Result<(), DeviceError> {
    crate::backend::common::check_range("an access", offset, len, mem.size)
}

impl DeviceImpl for VulkanDevice {
    fn backend(&self) -> Backend {
        Backend::Vulkan
    }

    fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    fn coarsens(&self) -> bool {
        true
    }

    fn emulated_on_host(&self) -> bool {
        self.emulated
    }

    fn alloc(&self, bytes: usize, init: Init) -> Result<Arc<dyn DeviceMemory>, DeviceError> {
        // A device on the host CPU allocates host memory, within overcommit, and the poison
        // fill below then runs into the OOM killer: refuse what the host does not have.
        if self.emulated {
            if let Err(available) = crate::facts::check_host_memory(bytes as u64) {
                return Err(DeviceError::OutOfMemory {
                    bytes: bytes as u64,
                    reason: format!("the host has {available} bytes available"),
                });
            }
        }
        let (buffer, memory) = self.inner.buffer(
            bytes as u64,
            // Any buffer may be bound as a constant buffer (a uniform buffer).
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::UNIFORM_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
        )?;
        let mem = VkMemory {
            inner: self.inner.clone(),
            buffer,
            memory,
            size: bytes,
        };
        if init == Init::Poison && bytes > 0 {
            // Poisoned before anyone can use it: one fill, waited on here.
            let dev = &self.inner.device;
            self.inner.one_shot(|cb| {
                // SAFETY: `cb` is recording; the buffer is live.
                unsafe { dev.cmd_fill_buffer(cb, buffer, 0, vk::WHOLE_SIZE, 0xffff_ffff) }
            })?;
        }
        Ok(Arc::new(mem))
    }

    fn write(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        src: &[u8],
    ) -> Result<(), DeviceError> {
        let s = self.stream(stream)?;
        let m = memory_of(mem)?;
        range_check(m, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let staging = Staging::new(&self.inner, src.len())?;
        staging.with_map(|map| map.copy_from_slice(src))?;
        let (sb, db) = (staging.buffer, m.buffer);
        let region = vk::BufferCopy {
            src_offset: 0,
            dst_offset: offset as u64,
            size: src.len() as u64,
        };
        let dev = &self.inner.device;
        s.record(vec![Box::new(staging), Box::new(mem.clone())], |cb| {
            // SAFETY: both buffers are live and kept until the copy completes.
            unsafe { dev.cmd_copy_buffer(cb, sb, db, &[region]) }
        })
    }

    fn read(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        len: usize,
    ) -> Result<Box<dyn ReadTicket>, DeviceError> {
        let s = self.stream(stream)?;
        let m = memory_of(mem)?;
        range_check(m, offset, len)?;
        let staging = Arc::new(Staging::new(&self.inner, len)?);
        if len > 0 {
            let (sb, db) = (m.buffer, staging.buffer);
            let region = vk::BufferCopy {
                src_offset: offset as u64,
                dst_offset: 0,
                size: len as u64,
            };
            let dev = &self.inner.device;
            s.record(
                vec![Box::new(staging.clone()), Box::new(mem.clone())],
                |cb| {
                    // SAFETY: both buffers are live and kept until the copy completes.
                    unsafe { dev.cmd_copy_buffer(cb, sb, db, &[region]) }
                },
            )?;
        }
        // Downloads are synchronous here: submit, wait, and hand back a finished ticket.
        s.sync()?;
        let bytes = staging.with_map(|map| map[..len].to_vec())?;
        Ok(Box::new(crate::backend::common::Ready(bytes)))
    }

    fn copy(
        &self,
        stream: &dyn StreamImpl,
        src: &Arc<dyn DeviceMemory>,
        src_offset: usize,
        dst: &Arc<dyn DeviceMemory>,
        dst_offset: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let s = self.stream(stream)?;
        let (a, b) = (memory_of(src)?, memory_of(dst)?);
        range_check(a, src_offset, len)?;
        range_check(b, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let by_kernel = len >= KERNEL_COPY_MIN
            && (src_offset | dst_offset | len) % 4 == 0
            && a.buffer != b.buffer
            && self
                .facts
                .max_threads_per_block
                .is_none_or(|m| m >= COPY_BLOCK);
        if let Some(k) = self.copier().filter(|_| by_kernel) {
            return self.kernel_copy(k, stream, (src, src_offset), (dst, dst_offset), len);
        }
        let (sb, db) = (a.buffer, b.buffer);
        let region = vk::BufferCopy {
            src_offset: src_offset as u64,
            dst_offset: dst_offset as u64,
            size: len as u64,
        };
        let dev = &self.inner.device;
        s.record(vec![Box::new(src.clone()), Box::new(dst.clone())], |cb| {
            // SAFETY: both buffers are live and kept until the copy completes.
            unsafe { dev.cmd_copy_buffer(cb, sb, db, &[region]) }
        })
    }

    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        Ok(Arc::new(VkStream {
            core: Arc::new(StreamCore::new(&self.inner, self.inner.family)?),
        }))
    }

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        self.load_with(module, &ProgramOptions::from_env()?)
    }

    /// Checked mode and ub-traps are built into the SPIR-V (`codegen::spirv::checked`): a
    /// kernel with checks reports into a storage buffer bound after the others, and its
    /// launch waits for the dispatch to read it (docs/checked-mode.md).
    fn load_with(
        &self,
        module: &Arc<VerifiedModule>,
        options: &ProgramOptions,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        self.program(module, options, Vec::new())
    }

    fn code_target(&self) -> Option<String> {
        Some(stored::target(&self.caps, self.size_control))
    }

    /// A bundle's SPIR-V is code without checks: under checked mode or ub-traps it is set
    /// aside and the kernels lowered again.
    fn load_prebuilt(
        &self,
        module: &Arc<VerifiedModule>,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let options = ProgramOptions::from_env()?;
        let prebuilt = if options.checks().any() {
            Vec::new()
        } else {
            prebuilt
        };
        self.program(module, &options, prebuilt)
    }

    fn code_memory(&self) -> Option<u64> {
        Some(
            self.inner
                .code_bytes
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    fn timer_tier(&self) -> TimerTier {
        // Events carry a timestamp query where the compute queue writes timestamps.
        if self.inner.timestamps.is_some() {
            TimerTier::Event
        } else {
            TimerTier::Unavailable
        }
    }
}

impl VulkanDevice {
    /// The program of `module` under `options`, with `prebuilt` kernels' SPIR-V restored.
    fn program(
        &self,
        module: &Arc<VerifiedModule>,
        options: &ProgramOptions,
        prebuilt: Vec<Prebuilt>,
    ) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        let mut restored = HashMap::new();
        for p in prebuilt {
            let function = crate::hal::kernel_function(module, &p.kernel).ok_or_else(|| {
                DeviceError::Load {
                    message: format!("no kernel `{}` for its SPIR-V", p.kernel),
                }
            })?;
            let e = stored::restore(&p.code, p.meta.as_deref().unwrap_or(""), function).map_err(
                |m| DeviceError::Load {
                    message: format!("the SPIR-V of kernel `{}`: {m}", p.kernel),
                },
            )?;
            restored.insert(p.kernel, e);
        }
        Ok(Arc::new(VkProgram {
            inner: self.inner.clone(),
            module: module.clone(),
            checks: options.checks(),
            caps: self.caps.clone(),
            min_offset_align: self.min_offset_align,
            max_push: self.max_push,
            size_control: self.size_control,
            kernels: Mutex::new(HashMap::new()),
            prebuilt: Mutex::new(restored),
            lowerings: AtomicU64::new(0),
            ir_hash: crate::backend::cache::hash_hex(
                &[format!("{:?}", module.module()).as_bytes()],
            ),
        }))
    }
}

/// Bytes of private arrays one work-item may hold on a device on the host CPU (lavapipe):
/// llvmpipe's compile time grows with a dynamically indexed array (measured on the 2-core
/// development machine: 4 KiB of `u32` in 3 s, 16 KiB in 20 s, 64 KiB past two minutes, and
/// 64 MiB aborts the process in `std::bad_alloc`; docs/vulkan-backend.md).
const PRIVATE_BYTES_HOST: u64 = 16 << 10;

/// A module on a Vulkan device: kernels emitted and built on first use.
struct VkProgram {
    inner: Arc<Inner>,
    module: Arc<VerifiedModule>,
    /// What the kernels test at run time (checked mode, ub-traps).
    checks: Checks,
    caps: Caps,
    min_offset_align: u64,
    max_push: u32,
    size_control: Option<(u32, u32)>,
    kernels: Mutex<HashMap<String, Result<Arc<VkKernel>, LaunchError>>>,
    /// SPIR-V made elsewhere (a bundle) for kernels of this device, taken by their first use.
    prebuilt: Mutex<HashMap<String, Emitted>>,
    /// How many kernels were lowered to SPIR-V here (not taken from `prebuilt` or the cache).
    lowerings: AtomicU64,
    /// The module's identity in the persistent cache.
    ir_hash: String,
}

/// The capabilities `function` is emitted with on a device of `base` capabilities that can
/// require subgroup sizes `size_control`, and the subgroup size its pipelines require: a
/// declared width the device can require is built natively at that size
/// (VK_EXT_subgroup_size_control); otherwise narrow or virtual (spirv.rs).
fn kernel_caps(
    base: &Caps,
    size_control: Option<(u32, u32)>,
    function: &Function,
) -> (Caps, Option<u32>) {
    let w = function.attrs.wave.map_or(base.subgroup_size, |(w, _)| w);
    let required = size_control
        .filter(|&(lo, hi)| lo <= w && w <= hi)
        .map(|_| w);
    let mut caps = base.clone();
    if let Some(r) = required {
        caps.subgroup_size = r;
    }
    (caps, required)
}

/// The SPIR-V of kernel `handle` as a device of `base` capabilities (that can require
/// subgroup sizes `size_control`) emits it, with its manifest: what `xpu build -o` bundles.
pub fn emit_for_device(
    module: &VerifiedModule,
    handle: crate::ir::Handle<Function>,
    base: &Caps,
    size_control: Option<(u32, u32)>,
) -> Result<(Emitted, KernelManifest), crate::codegen::Error> {
    let function = module.function(handle);
    let (caps, _) = kernel_caps(base, size_control, function);
    let e = spirv::emit_kernel(module, handle, &caps)?;
    let m = manifest_of(function, &e);
    Ok((e, m))
}

/// The manifest of a kernel's SPIR-V.
fn manifest_of(function: &Function, emitted: &Emitted) -> KernelManifest {
    let mut manifest = KernelManifest::from_kernel(function, Backend::Vulkan);
    manifest.built_wave = Some(emitted.wave_width);
    manifest.code_hash = Some(hash_words(&emitted.words));
    manifest.code_bytes = Some(emitted.words.len() as u64 * 4);
    manifest.native_ops = emitted
        .capabilities
        .iter()
        .map(|c| NativeOp {
            op: "spirv-capability".into(),
            instruction: c.clone(),
            tier: "native".into(),
        })
        .collect();
    manifest
}

impl VkProgram {
    fn build(&self, name: &str, function: &Function) -> Result<Arc<VkKernel>, LaunchError> {
        let no_code = |reason: String| LaunchError::no_code(name, Backend::Vulkan, reason);
        let handle = self
            .module
            .kernel(name)
            .ok_or_else(|| no_code("the program has no kernel of that name".into()))?;
        let (caps, required) = kernel_caps(&self.caps, self.size_control, function);
        // Private arrays the device cannot hold are refused before any pipeline is made:
        // `[u32; 4294967295]` crashed lavapipe's compiler in vkCreateComputePipelines.
        let limit = if caps.clamp_indices {
            PRIVATE_BYTES_HOST
        } else {
            common::PRIVATE_BYTES_GPU
        };
        common::check_private(name, &self.module, function, limit, "the Vulkan backend")?;
        let prebuilt = self.prebuilt.lock().remove(name);
        // Code with checks has its own cache entry.
        let checks = format!("{:?}", self.checks);
        let mut key_parts: Vec<&[u8]> = vec![self.ir_hash.as_bytes(), name.as_bytes()];
        if self.checks.any() {
            key_parts.push(checks.as_bytes());
        }
        let hash = crate::backend::cache::hash_hex(&key_parts);
        let cache = &self.inner.cache;
        let key = &self.inner.cache_key;
        // A cached module that does not restore (another layout, damaged) is a miss, and the
        // lowering below replaces it.
        // Code with checks carries its check sites, which the cache does not store: it is
        // lowered in every process.
        // So does code with `print` or `assert`, which carries its debug sites.
        let uncached = self.checks.any() || crate::ir::debug::has_debug(self.module.module());
        let cached = || {
            if uncached {
                return None;
            }
            let (payload, _) = cache.get(key, &hash, "spv")?;
            let (code, layout) = stored::unpack(&payload)?;
            stored::restore(code, layout, function).ok()
        };
        let emitted = match prebuilt.or_else(cached) {
            Some(e) => e,
            None => {
                self.lowerings
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let e = spirv::emit_kernel_checked(&self.module, handle, &caps, self.checks)
                    .map_err(|e| {
                        // What SPIR-V or this device cannot run is the device's refusal; a
                        // code-generator failure is the lowering's.
                        let by_device = e.code != crate::codegen::codes::INTERNAL;
                        LaunchError::lowering(name, Backend::Vulkan, e, by_device)
                    })?;
                if !uncached {
                    cache.put(key, &hash, "spv", stored::pack(&e));
                }
                e
            }
        };
        if emitted.push_bytes > self.max_push {
            return Err(LaunchError::NoCode {
                kernel: name.to_string(),
                backend: Backend::Vulkan,
                reason: format!(
                    "unsupported on this Vulkan device: {} bytes of arguments exceed its {}-byte push constants",
                    emitted.push_bytes, self.max_push
                ),
                lowering: None,
                by_device: true,
            });
        }
        VkKernel::new(
            &self.inner,
            name,
            function,
            emitted,
            self.min_offset_align,
            required,
            caps.loop_limit,
        )
        .map(Arc::new)
        .map_err(|e| no_code(e.to_string()))
    }
}

impl ProgramImpl for VkProgram {
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        let mut map = self.kernels.lock();
        let entry = map
            .entry(name.to_string())
            .or_insert_with(|| self.build(name, kernel));
        entry.clone().map(|k| k as Arc<dyn KernelImpl>)
    }

    fn manifest(&self, name: &str) -> Option<KernelManifest> {
        let function = crate::hal::kernel_function(&self.module, name)?;
        self.kernel(name, function)
            .ok()
            .map(|k| k.manifest().clone())
    }

    fn lowerings(&self) -> Option<u64> {
        Some(self.lowerings.load(std::sync::atomic::Ordering::Relaxed))
    }
}
