//! What a deferred stream reports (contract §2.4, "Deferred streams"): [`DeferStat`]. The
//! queue, the sequence recogniser and the graphs live in `backend::defer` and the backends
//! that defer (CUDA); this is the part the runtime and every backend share.

/// A deferred stream's counters since it was made ([`crate::KernelStream::defer_stat`]). All
/// zero on a stream that never deferred (every backend but CUDA, or `CAJETA_XPU_DEFER=0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeferStat {
    /// Launches that entered the stream's queue.
    pub queued: u64,
    /// Queued launches that ran as nodes of a replayed graph.
    pub replayed: u64,
    /// Launches that ran direct: the exceptions (a checked program, a deadline, a buffer
    /// array, more than 48 arguments or 384 bytes of them, a live profiler), and queued
    /// launches of a sequence seen fewer than three times.
    pub direct: u64,
    /// Graphs recorded (and instantiated), a re-record after a refused patch included.
    pub graphs: u64,
    /// Graph launches.
    pub graph_launches: u64,
    /// Graph nodes patched with changed grids or arguments before a replay.
    pub patches: u64,
    /// Flushes of a non-empty queue.
    pub flushes: u64,
}
