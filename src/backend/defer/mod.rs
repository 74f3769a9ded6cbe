//! Deferred streams (contract §2.4): a stream's launches are queued and flushed at the next
//! point where a result becomes observable; a launch sequence seen three times is recorded
//! as a graph and replayed, its changed grids and arguments patched into the nodes.
//!
//! [`recognise`] is the backend-independent part (the queue, the sightings, patch against
//! re-record, the exceptions that go direct, the counters), written against a
//! [`recognise::Recorder`] that a backend implements (CUDA: `cuGraph*`) and the tests fake.
//! It lives beside the backends rather than in `runtime/` because the backend's own stream
//! holds the queue: every observable point (a copy, a read, a sync, an event) reaches the
//! backend's stream, so none can bypass a flush. The docs are `docs/deferred-streams.md`.

pub mod recognise;
