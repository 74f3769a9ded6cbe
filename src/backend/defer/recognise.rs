//! Sequence recognition for deferred streams, independent of any driver.
//!
//! A [`Deferred`] holds a stream's queue. [`Deferred::flush`] hands the queued launches (one
//! *sequence*) to a [`Recorder`]: a sequence is known by its [signature](Node) (each
//! launch's kernel and the shape of its argument list, in order). The first two sightings
//! run direct; the third records a graph and replays it; later sightings patch the nodes
//! whose grid, block or argument bytes changed ([`Recorder::patch`]) and replay, or record
//! again where a patch is refused. A launch that fails at a flush stops the sequence there:
//! [`FlushFailure`] names it, and the launches after it do not run.

use crate::hal::defer::DeferStat;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Sightings of a sequence before it is recorded as a graph.
pub const SIGHTINGS_TO_RECORD: u32 = 3;
/// More arguments than this go direct.
pub const MAX_ARGS: usize = 48;
/// More bytes of arguments than this go direct.
pub const MAX_ARG_BYTES: usize = 384;
/// A queue this long is flushed at the next launch (a loop with no observable point).
pub const MAX_QUEUE: usize = 256;
/// Sequences remembered per stream; past it the oldest sightings are forgotten.
pub const MAX_SEQUENCES: usize = 64;

/// Why a launch on a deferred stream goes direct instead of into the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    /// Code built with checks (checked mode, or tested `align:` statements): the launch
    /// waits for the kernel and reads its report.
    Checked,
    /// A launch with a deadline waits for the kernel with it.
    Deadline,
    /// A buffer-array (or texture, image) argument.
    BufferArray,
    /// More than [`MAX_ARGS`] arguments.
    TooManyArgs(usize),
    /// More than [`MAX_ARG_BYTES`] bytes of arguments.
    TooManyArgBytes(usize),
    /// The profiler's device sink (or a launch recorder) is live: it attributes each launch
    /// at submission.
    Observed,
}

/// What decides whether a launch may be queued.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaunchTraits {
    /// Arguments the launch passes.
    pub args: usize,
    /// Bytes of the argument list.
    pub arg_bytes: usize,
    /// Whether the program is in checked mode (or ub-traps).
    pub checked: bool,
    /// Whether the launch has a deadline.
    pub deadline: bool,
    /// Whether an argument is a buffer array (or texture, image).
    pub buffer_array: bool,
    /// Whether the profiler's device sink or a launch recorder is live.
    pub observed: bool,
}

/// The exception that sends a launch direct, if any (checked first, then the deadline, the
/// argument kinds, the argument list's size, and a live observer).
pub fn exception(t: &LaunchTraits) -> Option<Exception> {
    if t.checked {
        Some(Exception::Checked)
    } else if t.deadline {
        Some(Exception::Deadline)
    } else if t.buffer_array {
        Some(Exception::BufferArray)
    } else if t.args > MAX_ARGS {
        Some(Exception::TooManyArgs(t.args))
    } else if t.arg_bytes > MAX_ARG_BYTES {
        Some(Exception::TooManyArgBytes(t.arg_bytes))
    } else if t.observed {
        Some(Exception::Observed)
    } else {
        None
    }
}

/// One queued launch as the recogniser sees it.
pub trait Node {
    /// What a replay compares and a patch changes: the grid, the block, the shared bytes
    /// and the argument bytes.
    type Params: PartialEq + Clone;
    /// The kernel's identity (unique among live kernels).
    fn kernel(&self) -> u64;
    /// The shape of the argument list (each parameter's size in bytes, in order).
    fn shape(&self) -> &[u32];
    /// The launch's parameters (grid, block, shared bytes, argument bytes).
    fn params(&self) -> &Self::Params;
}

/// What a backend does with a flushed sequence.
pub trait Recorder<N: Node> {
    /// The backend's executable graph.
    type Graph;
    /// The backend's launch error.
    type Error;
    /// Launches one node as a direct launch would.
    fn direct(&mut self, node: &N) -> Result<(), Self::Error>;
    /// Records `nodes`, in order, as one executable graph.
    fn record(&mut self, nodes: &[N]) -> Result<Self::Graph, Self::Error>;
    /// Patches node `index` of `graph` to `node`'s parameters; `false` where the driver
    /// refuses the patch (the graph is then recorded again).
    fn patch(&mut self, graph: &mut Self::Graph, index: usize, node: &N) -> bool;
    /// Launches the graph.
    fn replay(&mut self, graph: &Self::Graph) -> Result<(), Self::Error>;
}

/// A flush that stopped at a failed launch: the launch, the error, and how many launches
/// after it did not run.
#[derive(Debug)]
pub struct FlushFailure<N, E> {
    /// The launch that failed.
    pub node: N,
    /// Its position in the flushed sequence.
    pub index: usize,
    /// The backend's error.
    pub error: E,
    /// Launches after it that did not run.
    pub not_run: usize,
}

struct Sequence<P, G> {
    /// The signature, kept to tell a hash collision from a sighting.
    signature: Vec<(u64, Vec<u32>)>,
    sightings: u32,
    graph: Option<G>,
    /// The parameters the graph's nodes hold now.
    applied: Vec<P>,
    /// When it was last seen (the flush count), for forgetting the oldest.
    seen: u64,
}

/// A stream's deferral: whether it defers, its queue, the sequences it has seen, and its
/// counters.
pub struct Deferred<N: Node, G> {
    deferred: bool,
    queue: Vec<N>,
    sequences: HashMap<u64, Sequence<N::Params, G>>,
    stat: DeferStat,
}

impl<N: Node, G> Default for Deferred<N, G> {
    fn default() -> Self {
        Deferred::new(false)
    }
}

fn signature_hash<N: Node>(nodes: &[N]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for n in nodes {
        n.kernel().hash(&mut h);
        n.shape().hash(&mut h);
    }
    h.finish()
}

fn same_signature<N: Node>(sig: &[(u64, Vec<u32>)], nodes: &[N]) -> bool {
    sig.len() == nodes.len()
        && sig
            .iter()
            .zip(nodes)
            .all(|((k, s), n)| *k == n.kernel() && s.as_slice() == n.shape())
}

impl<N: Node, G> Deferred<N, G> {
    /// An empty queue, deferring launches when `deferred`.
    pub fn new(deferred: bool) -> Self {
        Deferred {
            deferred,
            queue: Vec::new(),
            sequences: HashMap::new(),
            stat: DeferStat::default(),
        }
    }

    /// Whether launches are queued.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// Turns deferral on or off. Turning it off does not flush: the caller flushes first.
    pub fn set_deferred(&mut self, on: bool) {
        self.deferred = on;
    }

    /// The counters so far.
    pub fn stat(&self) -> DeferStat {
        self.stat
    }

    /// Launches queued and not yet flushed.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Counts a launch that went direct on a deferred stream (an exception).
    pub fn note_direct(&mut self) {
        self.stat.direct += 1;
    }

    /// Queues a launch; `true` when the queue is full and should be flushed now.
    pub fn push(&mut self, node: N) -> bool {
        self.stat.queued += 1;
        self.queue.push(node);
        self.queue.len() >= MAX_QUEUE
    }

    /// Forgets every sequence and its graph (the device's context was recreated, or the
    /// stream stops deferring).
    pub fn forget(&mut self) {
        self.sequences.clear();
    }

    /// Runs the queue through `rec`: direct for a sequence seen fewer than
    /// [`SIGHTINGS_TO_RECORD`] times (or of one launch), else as its graph, recorded at the
    /// third sighting and patched after it. The queue is empty afterwards, whatever happened.
    pub fn flush<R: Recorder<N, Graph = G>>(
        &mut self,
        rec: &mut R,
    ) -> Result<(), FlushFailure<N, R::Error>> {
        if self.queue.is_empty() {
            return Ok(());
        }
        let nodes = std::mem::take(&mut self.queue);
        self.stat.flushes += 1;
        let now = self.stat.flushes;
        if nodes.len() < 2 {
            return self.run_direct(rec, nodes);
        }
        let key = signature_hash(&nodes);
        let known = self
            .sequences
            .get(&key)
            .is_some_and(|s| same_signature(&s.signature, &nodes));
        if !known {
            if self.sequences.len() >= MAX_SEQUENCES {
                // Forget the sequence seen longest ago.
                if let Some(old) = self
                    .sequences
                    .iter()
                    .min_by_key(|(_, s)| s.seen)
                    .map(|(k, _)| *k)
                {
                    self.sequences.remove(&old);
                }
            }
            self.sequences.insert(
                key,
                Sequence {
                    signature: nodes
                        .iter()
                        .map(|n| (n.kernel(), n.shape().to_vec()))
                        .collect(),
                    sightings: 0,
                    graph: None,
                    applied: Vec::new(),
                    seen: now,
                },
            );
        }
        let Some(seq) = self.sequences.get_mut(&key) else {
            return self.run_direct(rec, nodes);
        };
        seq.seen = now;
        seq.sightings = seq.sightings.saturating_add(1);
        if seq.graph.is_none() && seq.sightings < SIGHTINGS_TO_RECORD {
            return self.run_direct(rec, nodes);
        }
        // Patch the nodes that changed; a refused patch records the graph again.
        if let Some(graph) = seq.graph.as_mut() {
            let mut refused = false;
            for (i, node) in nodes.iter().enumerate() {
                if seq.applied[i] != *node.params() {
                    if rec.patch(graph, i, node) {
                        self.stat.patches += 1;
                        seq.applied[i] = node.params().clone();
                    } else {
                        refused = true;
                        break;
                    }
                }
            }
            if refused {
                seq.graph = None;
            }
        }
        if seq.graph.is_none() {
            match rec.record(&nodes) {
                Ok(g) => {
                    self.stat.graphs += 1;
                    seq.graph = Some(g);
                    seq.applied = nodes.iter().map(|n| n.params().clone()).collect();
                }
                // The driver would not record it: direct, and three more sightings first.
                Err(_) => {
                    seq.sightings = 0;
                    return self.run_direct(rec, nodes);
                }
            }
        }
        let graph = seq.graph.as_ref().expect("recorded above");
        match rec.replay(graph) {
            Ok(()) => {
                self.stat.graph_launches += 1;
                self.stat.replayed += nodes.len() as u64;
                Ok(())
            }
            // A replay the driver refused runs direct, which names the launch that fails.
            Err(_) => {
                seq.graph = None;
                seq.sightings = 0;
                self.run_direct(rec, nodes)
            }
        }
    }

    fn run_direct<R: Recorder<N, Graph = G>>(
        &mut self,
        rec: &mut R,
        nodes: Vec<N>,
    ) -> Result<(), FlushFailure<N, R::Error>> {
        let total = nodes.len();
        for (index, node) in nodes.into_iter().enumerate() {
            match rec.direct(&node) {
                Ok(()) => self.stat.direct += 1,
                Err(error) => {
                    return Err(FlushFailure {
                        node,
                        index,
                        error,
                        not_run: total - index - 1,
                    })
                }
            }
        }
        Ok(())
    }
}
