//! Deferred CUDA streams (contract §2.4): the queue of a [`CudaStream`], its flush at every
//! observable point, and the recorder that turns a sequence seen three times into a CUDA
//! graph (`cuGraphCreate`, one kernel node per launch in a chain, `cuGraphInstantiate`),
//! replayed with `cuGraphLaunch` and patched with `cuGraphExecKernelNodeSetParams`. The
//! sequence logic itself is `backend::defer::recognise`.

use super::{check, Ctx, CudaKernel, CudaStream};
use crate::backend::defer::recognise::{self, Deferred, Node};
use crate::hal::defer::DeferStat;
use crate::hal::launch::{Launch, LaunchError};
use crate::hal::{DeviceArg, DeviceError, DeviceMemory};
use cudarc::driver::sys;
use std::ffi::c_void;
use std::sync::Arc;

/// What a replay compares and a patch changes.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct NodeParams {
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    /// The packed parameter words ([`crate::backend::gpu_args::pack_into`]).
    words: Vec<u64>,
}

/// One queued launch: the kernel (kept alive with its module), the shape of its argument
/// list, its parameters, and the memory its buffers name (kept alive until it has run).
pub(super) struct CudaNode {
    kernel: Arc<CudaKernel>,
    shape: Arc<[u32]>,
    params: NodeParams,
    _memory: Vec<Arc<dyn DeviceMemory>>,
}

impl CudaNode {
    pub(super) fn new(
        kernel: Arc<CudaKernel>,
        shape: Arc<[u32]>,
        launch: &Launch,
        words: Vec<u64>,
        args: &[DeviceArg],
    ) -> CudaNode {
        CudaNode {
            kernel,
            shape,
            params: NodeParams {
                grid: launch.grid,
                block: launch.block,
                shared: launch.shared_bytes,
                words,
            },
            _memory: args
                .iter()
                .filter_map(|a| match a {
                    DeviceArg::Buffer(b) => Some(b.memory.clone()),
                    DeviceArg::Value(_) => None,
                })
                .collect(),
        }
    }

    fn name(&self) -> &str {
        &self.kernel.manifest.kernel
    }
}

impl Node for CudaNode {
    type Params = NodeParams;
    fn kernel(&self) -> u64 {
        Arc::as_ptr(&self.kernel) as usize as u64
    }
    fn shape(&self) -> &[u32] {
        &self.shape
    }
    fn params(&self) -> &NodeParams {
        &self.params
    }
}

/// Calls `f` with the `void*` array `cuLaunchKernel` and kernel nodes take: one pointer per
/// slot into `words` (on the stack for up to 128 slots).
pub(super) fn with_param_ptrs<R>(
    words: &[u64],
    sizes: &[u32],
    f: impl FnOnce(&mut [*mut c_void]) -> R,
) -> R {
    let base = words.as_ptr() as *mut u64;
    let mut at = 0usize;
    let mut fill = |out: &mut [*mut c_void]| {
        for (p, &n) in out.iter_mut().zip(sizes) {
            // SAFETY: `at` stays within `words` (the sizes sum to its length).
            *p = unsafe { base.add(at) } as *mut c_void;
            at += n as usize;
        }
    };
    if sizes.len() <= 128 {
        let mut ptrs = [std::ptr::null_mut::<c_void>(); 128];
        fill(&mut ptrs[..sizes.len()]);
        f(&mut ptrs[..sizes.len()])
    } else {
        let mut ptrs = vec![std::ptr::null_mut::<c_void>(); sizes.len()];
        fill(&mut ptrs);
        f(&mut ptrs)
    }
}

/// An instantiated graph of one sequence, in the context epoch it was made in.
pub(super) struct CudaGraph {
    ctx: Arc<Ctx>,
    epoch: u64,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    nodes: Vec<sys::CUgraphNode>,
    /// The kernels its nodes run (their modules must outlive the graph).
    kernels: Vec<Arc<CudaKernel>>,
}

// SAFETY: graph handles may be used from any thread with the context bound; the stream's
// lock serialises their use.
unsafe impl Send for CudaGraph {}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // A graph of a lost context went with it.
        if self.ctx.lost(self.epoch).is_none() && self.ctx.bind().is_ok() {
            // SAFETY: made in `record`, destroyed once; a launched graph may be destroyed
            // while it runs (the driver finishes it first).
            unsafe {
                if !self.exec.is_null() {
                    let _ = sys::cuGraphExecDestroy(self.exec);
                }
                let _ = sys::cuGraphDestroy(self.graph);
            }
        }
    }
}

/// The kernel-node parameters of `node` with `func`, pointing at `ptrs`.
fn node_params(
    node: &CudaNode,
    func: sys::CUfunction,
    ptrs: &mut [*mut c_void],
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    let p = &node.params;
    sys::CUDA_KERNEL_NODE_PARAMS {
        func,
        gridDimX: p.grid[0],
        gridDimY: p.grid[1],
        gridDimZ: p.grid[2],
        blockDimX: p.block[0],
        blockDimY: p.block[1],
        blockDimZ: p.block[2],
        sharedMemBytes: p.shared,
        kernelParams: ptrs.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// The recorder of one flush, on the stream's current handle.
struct GraphRecorder<'a> {
    ctx: &'a Arc<Ctx>,
    stream: sys::CUstream,
}

impl recognise::Recorder<CudaNode> for GraphRecorder<'_> {
    type Graph = CudaGraph;
    type Error = LaunchError;

    fn direct(&mut self, n: &CudaNode) -> Result<(), LaunchError> {
        let p = &n.params;
        n.kernel
            .enqueue(self.stream, p.grid, p.block, p.shared, &p.words, &n.shape)
            .map(|_| ())
    }

    fn record(&mut self, nodes: &[CudaNode]) -> Result<CudaGraph, LaunchError> {
        let first = &nodes[0].kernel;
        let mut g = CudaGraph {
            ctx: self.ctx.clone(),
            epoch: self.ctx.epoch(),
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
            nodes: Vec::with_capacity(nodes.len()),
            kernels: nodes.iter().map(|n| n.kernel.clone()).collect(),
        };
        // SAFETY: writes one graph handle (destroyed by `CudaGraph::drop`).
        check(unsafe { sys::cuGraphCreate(&mut g.graph, 0) })
            .map_err(|e| first.fail("cuGraphCreate", e))?;
        for n in nodes {
            let (func, _) = n.kernel.prepare(n.params.shared)?;
            let mut handle: sys::CUgraphNode = std::ptr::null_mut();
            let prev = g.nodes.last().copied();
            with_param_ptrs(&n.params.words, &n.shape, |ptrs| {
                let params = node_params(n, func, ptrs);
                // SAFETY: a live graph; the parameters (copied by the driver) were packed per
                // the kernel's ABI; the one dependency, where given, is a node of this graph.
                check(unsafe {
                    sys::cuGraphAddKernelNode_v2(
                        &mut handle,
                        g.graph,
                        prev.as_ref().map_or(std::ptr::null(), |p| p as *const _),
                        prev.is_some() as usize,
                        &params,
                    )
                })
            })
            .map_err(|e| n.kernel.fail("cuGraphAddKernelNode", e))?;
            g.nodes.push(handle);
        }
        // SAFETY: a complete graph; writes one executable graph handle.
        check(unsafe { sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0) })
            .map_err(|e| first.fail("cuGraphInstantiate", e))?;
        Ok(g)
    }

    fn patch(&mut self, g: &mut CudaGraph, index: usize, n: &CudaNode) -> bool {
        let Ok((func, _)) = n.kernel.prepare(n.params.shared) else {
            return false;
        };
        with_param_ptrs(&n.params.words, &n.shape, |ptrs| {
            let params = node_params(n, func, ptrs);
            // SAFETY: a live executable graph and one of its kernel nodes; the driver copies
            // the parameters, and refuses a change it cannot make in place.
            let r =
                unsafe { sys::cuGraphExecKernelNodeSetParams_v2(g.exec, g.nodes[index], &params) };
            r == sys::CUresult::CUDA_SUCCESS
        })
    }

    fn replay(&mut self, g: &CudaGraph) -> Result<(), LaunchError> {
        let first = &g.kernels[0];
        // SAFETY: a live executable graph and stream of the bound context.
        check(unsafe { sys::cuGraphLaunch(g.exec, self.stream) })
            .map_err(|e| first.fail("cuGraphLaunch", e))?;
        // A fault seen from now on is reported against the sequence's last kernel.
        if let Some(last) = g.kernels.last() {
            *self.ctx.last_kernel.lock() = last.name.clone();
        }
        Ok(())
    }
}

/// A stream's deferral.
pub(super) struct StreamDefer {
    d: Deferred<CudaNode, CudaGraph>,
    /// A failed flush (the kernel, the error): reads, copies, syncs and launches on the
    /// stream refuse until it is cleared.
    failed: Option<(String, String)>,
    /// The context epoch the graphs belong to.
    epoch: u64,
}

impl StreamDefer {
    pub(super) fn new(deferred: bool, epoch: u64) -> StreamDefer {
        StreamDefer {
            d: Deferred::new(deferred),
            failed: None,
            epoch,
        }
    }

    pub(super) fn set_deferred(&mut self, on: bool) {
        if !on {
            self.d.forget();
        }
        self.d.set_deferred(on);
    }

    pub(super) fn stat(&self) -> DeferStat {
        self.d.stat()
    }

    pub(super) fn note_direct(&mut self) {
        self.d.note_direct();
    }

    pub(super) fn forget(&mut self) {
        self.d.forget();
    }
}

fn after_failure((kernel, error): &(String, String)) -> DeviceError {
    DeviceError::AfterFailedFlush {
        kernel: kernel.clone(),
        error: error.clone(),
    }
}

impl CudaStream {
    /// Runs the queue (an observable point). A launch the driver refuses stops the
    /// sequence: the error names it, the launches after it do not run, and the stream
    /// refuses reads, copies, syncs and launches until [`CudaStream::clear_failure`].
    pub(super) fn flush(&self) -> Result<(), DeviceError> {
        let mut st = self.defer.lock();
        self.flush_locked(&mut st)
    }

    fn flush_locked(&self, st: &mut StreamDefer) -> Result<(), DeviceError> {
        if let Some(f) = &st.failed {
            return Err(after_failure(f));
        }
        if st.d.pending() == 0 {
            return Ok(());
        }
        let stream = self.handle()?;
        // Graphs of a context lost with a fault went with it.
        if st.epoch != self.ctx.epoch() {
            st.d.forget();
            st.epoch = self.ctx.epoch();
        }
        let mut rec = GraphRecorder {
            ctx: &self.ctx,
            stream,
        };
        st.d.flush(&mut rec).map_err(|f| {
            let kernel = f.node.name().to_string();
            let error = f.error.to_string();
            st.failed = Some((kernel.clone(), error.clone()));
            DeviceError::FlushFailed {
                kernel,
                error,
                not_run: f.not_run,
            }
        })
    }

    /// Queues a launch (flushing a full queue). A stream whose flush failed refuses it.
    pub(super) fn queue(&self, node: CudaNode) -> Result<(), DeviceError> {
        let mut st = self.defer.lock();
        if let Some(f) = &st.failed {
            return Err(after_failure(f));
        }
        if st.d.push(node) {
            self.flush_locked(&mut st)?;
        }
        Ok(())
    }

    /// Acknowledges a failed flush: the stream takes launches and reads again.
    pub(super) fn clear_failure_now(&self) {
        self.defer.lock().failed = None;
    }
}
