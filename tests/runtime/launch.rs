//! Issue 19 items 3 and 4: the launch path above the driver call, and deadlines reported at
//! a GPU stream's next observable point.
//!
//! - A counting allocator (per thread) shows that a steady-state launch of a cached kernel
//!   allocates nothing in the runtime layer (`Kernel::launch`: checks, binding, the
//!   coarsening decision, the hooks when off), measured through a null backend whose launch
//!   does nothing, and counts what the CPU backend's launch adds.
//! - The deadline book (`xpu::backend::deadlines`) is driven with a fake completion and a
//!   fake clock: met, missed after finishing, missed while still running, still pending.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xpu::backend::deadlines::{Completion, Deadlines, Finish};
use xpu::backend::interp::InterpDevice;
use xpu::hal::launch::{ArgValue, Launch, LaunchError};
use xpu::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, DeviceMemory, Init, KernelImpl, ProgramImpl,
    ReadTicket, StreamImpl,
};
use xpu::ir::{Function, VerifiedModule};
use xpu::{Device, DeviceFacts, KernelManifest, KernelStream};

/// Counts this thread's allocations (and reallocations), forwarding to the system allocator.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

/// This thread's allocations so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator (that is, from `System`) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A backend whose memory is the interpreter's and whose launch does nothing but count:
/// what `Kernel::launch` costs above the backend's own call.
struct NullDevice {
    inner: InterpDevice,
    launches: Arc<AtomicU64>,
}

struct NullProgram {
    launches: Arc<AtomicU64>,
}

struct NullKernel {
    manifest: KernelManifest,
    launches: Arc<AtomicU64>,
}

impl DeviceImpl for NullDevice {
    fn backend(&self) -> Backend {
        Backend::Interp
    }
    fn facts(&self) -> &DeviceFacts {
        self.inner.facts()
    }
    fn alloc(&self, bytes: usize, init: Init) -> Result<Arc<dyn DeviceMemory>, DeviceError> {
        self.inner.alloc(bytes, init)
    }
    fn write(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        src: &[u8],
    ) -> Result<(), DeviceError> {
        self.inner.write(stream, mem, offset, src)
    }
    fn read(
        &self,
        stream: &dyn StreamImpl,
        mem: &Arc<dyn DeviceMemory>,
        offset: usize,
        len: usize,
    ) -> Result<Box<dyn ReadTicket>, DeviceError> {
        self.inner.read(stream, mem, offset, len)
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
        self.inner
            .copy(stream, src, src_offset, dst, dst_offset, len)
    }
    fn create_stream(&self) -> Result<Arc<dyn StreamImpl>, DeviceError> {
        self.inner.create_stream()
    }
    fn load(&self, _: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        Ok(Arc::new(NullProgram {
            launches: self.launches.clone(),
        }))
    }
}

impl ProgramImpl for NullProgram {
    fn kernel(&self, _: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        Ok(Arc::new(NullKernel {
            manifest: KernelManifest::from_kernel(kernel, Backend::Interp),
            launches: self.launches.clone(),
        }))
    }
    fn manifest(&self, _: &str) -> Option<KernelManifest> {
        None
    }
}

impl KernelImpl for NullKernel {
    fn manifest(&self) -> &KernelManifest {
        &self.manifest
    }
    fn launch(
        &self,
        _: &dyn StreamImpl,
        _: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        assert_eq!(args.len(), 4);
        self.launches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

const SAXPY: &str = "kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}";

fn saxpy_on(device: &Device) -> xpu::Kernel {
    let module = xpu::ir::parse(SAXPY).unwrap().verify().unwrap();
    device.load(module).unwrap().kernel("saxpy").unwrap()
}

/// Allocations per launch over `n` steady-state launches of `kernel` (after a warm-up), and
/// nanoseconds per launch.
fn steady(device: &Device, kernel: &xpu::Kernel, n: u64) -> (f64, f64) {
    let stream = KernelStream::create(device).unwrap();
    let mut y = device.upload(&[1.0f32; 64]).unwrap();
    let x = device.upload(&[2.0f32; 64]).unwrap();
    let l = Launch::grid(2).block(32);
    let mut go = || {
        let args = [
            ArgValue::from(&mut y),
            ArgValue::from(&x),
            3.0f32.into(),
            64u32.into(),
        ];
        kernel.launch(&stream, l, args).unwrap();
    };
    for _ in 0..16 {
        go();
    }
    let (before, t0) = (allocations(), Instant::now());
    for _ in 0..n {
        go();
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    let per = (allocations() - before) as f64 / n as f64;
    stream.sync().unwrap();
    (per, ns)
}

#[test]
fn a_steady_launch_allocates_nothing_above_the_backend() {
    let launches = Arc::new(AtomicU64::new(0));
    let device = Device::from_impl(Arc::new(NullDevice {
        inner: InterpDevice::new(),
        launches: launches.clone(),
    }));
    let kernel = saxpy_on(&device);
    let (per, ns) = steady(&device, &kernel, 20_000);
    assert_eq!(launches.load(Ordering::Relaxed), 20_016);
    // What the runtime layer costs per launch here (this machine's timing is noise under
    // load; the figure is for reading, the allocation count is the test).
    println!("Kernel::launch over a null backend: {ns:.0} ns per launch, {per} allocations");
    assert_eq!(
        per, 0.0,
        "Kernel::launch allocates {per} times per steady-state launch"
    );
}

#[test]
fn a_steady_cpu_launch_allocates_at_most_what_it_did() {
    let device = Device::open(Backend::Cpu).unwrap();
    let kernel = saxpy_on(&device);
    let (per, ns) = steady(&device, &kernel, 2_000);
    println!("CPU backend: {ns:.0} ns per launch, {per} allocations");
    assert!(
        per <= CPU_ALLOCATIONS_PER_LAUNCH,
        "a steady CPU launch allocates {per} times (at most {CPU_ALLOCATIONS_PER_LAUNCH} expected)"
    );
}

/// What a steady-state launch of a cached kernel on the CPU backend allocates now, all of it
/// below `Kernel::launch` in the backend's own launch (measured 8.03 per launch: its worker
/// hand-off and specialisation lookup, not cut yet), so that more shows up as a failure.
const CPU_ALLOCATIONS_PER_LAUNCH: f64 = 8.5;

/// A completion set from the test: pending until `finish` is called with how long after its
/// submission the work finished.
#[derive(Clone)]
struct Fake(Arc<parking_lot::Mutex<Finish>>);

impl Fake {
    fn new() -> Fake {
        Fake(Arc::new(parking_lot::Mutex::new(Finish::Pending)))
    }
    fn finish(&self, took: Option<Duration>) {
        *self.0.lock() = Finish::Done(took);
    }
}

impl Completion for Fake {
    fn poll(&self) -> Finish {
        *self.0.lock()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn deadlines_are_settled_at_the_observable_point() {
    let t0 = Instant::now();
    let mut book = Deadlines::new();
    let (met, late, running, fresh) = (Fake::new(), Fake::new(), Fake::new(), Fake::new());
    book.push("met".into(), t0, ms(10), Box::new(met.clone()));
    book.push("late".into(), t0, ms(10), Box::new(late.clone()));
    book.push("running".into(), t0, ms(10), Box::new(running.clone()));
    book.push("fresh".into(), t0 + ms(15), ms(10), Box::new(fresh.clone()));
    // At 5 ms nothing has finished and nothing is past its window: all stay.
    assert_eq!(book.settle(t0 + ms(5)), None);
    assert_eq!(book.len(), 4);
    // `met` finished 8 ms after submission, `late` 12 ms after: at 20 ms `late` is the miss,
    // `running` (still running, past its window) the other; `fresh` (5 ms old) stays.
    met.finish(Some(ms(8)));
    late.finish(Some(ms(12)));
    let m = book.settle(t0 + ms(20)).expect("a miss");
    assert_eq!(m.kernel, "late");
    assert_eq!((m.deadline, m.took, m.others), (ms(10), Some(ms(12)), 1));
    assert!(m
        .describe()
        .contains("finished 0.012000 s after submission"));
    assert!(m.describe().contains("1 more launch on the stream"));
    assert_eq!(book.len(), 1);
    // Reported once: settling again says nothing more about them.
    assert_eq!(book.settle(t0 + ms(21)), None);
    // `fresh` finishes in time; a finish the backend cannot time counts as on time.
    fresh.finish(Some(ms(9)));
    assert_eq!(book.settle(t0 + ms(40)), None);
    assert!(book.is_empty());
    let unknown = Fake::new();
    book.push("unknown".into(), t0, ms(1), Box::new(unknown.clone()));
    unknown.finish(None);
    assert_eq!(book.settle(t0 + ms(50)), None);
    // Still running past its window: a miss that says so.
    let stuck = Fake::new();
    book.push("stuck".into(), t0, ms(10), Box::new(stuck));
    let m = book.settle(t0 + ms(30)).expect("a miss");
    assert_eq!((m.kernel.as_str(), m.took, m.others), ("stuck", None, 0));
    assert!(m
        .describe()
        .contains("had not finished 0.030000 s after submission"));
    assert!(book.is_empty());
}

#[test]
fn a_missed_deadline_at_a_sync_is_refusal_6() {
    let e = DeviceError::Deadline {
        kernel: "spin".into(),
        deadline: ms(20),
        what: "it had not finished 0.030000 s after submission".into(),
    };
    assert_eq!(e.code(), xpu::hal::launch::codes::DEADLINE);
    assert_eq!(e.code(), "XPU-L018");
    let text = e.to_string();
    assert!(
        text.starts_with("error[XPU-L018]: kernel spin: missed its deadline of 0.02 s"),
        "{text}"
    );
    assert!(text.contains("left to finish"), "{text}");
}

/// The bench's deadline check on the host backends: the launch itself is refused and
/// cancelled, the stream and device go on.
#[test]
fn the_deadline_check_passes_on_the_cpu_and_the_interpreter() {
    for backend in [Backend::Cpu, Backend::Interp] {
        let device = Device::open(backend).unwrap();
        let lines = xpu::bench::deadline::check(&device, u32::MAX, ms(50))
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert!(lines[0].contains("XPU-L018 at the launch"), "{lines:?}");
        assert_eq!(lines.len(), 4, "{lines:?}");
    }
}
