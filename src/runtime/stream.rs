//! `KernelStream` and `Event` (contract §2.4): ordered queues of device work and the points
//! that mark their progress.
//!
//! Every thread has a default stream per device ([`KernelStream::current`]); [`KernelStream::create`]
//! makes another. Work on one stream runs in order; [`KernelStream::record`] marks a point,
//! [`KernelStream::wait_for`] makes a stream wait for another's point, and
//! [`KernelStream::sync`] blocks the host until a stream is drained. A stream is destroyed when
//! its last handle drops. On the host backends a stream executes eagerly, so its events are
//! complete when recorded; the same code is correct on an asynchronous GPU.

use crate::hal::{DeviceError, EventImpl, StreamImpl};
use crate::runtime::device::Device;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A stream of one device. Cheap to clone; clones are the same stream.
///
/// ```
/// use xpu::{Backend, Device, KernelStream};
///
/// let device = Device::open(Backend::Interp).unwrap();
/// let stream = KernelStream::current(&device);
/// assert!(stream.device() == &device);
/// let before = stream.record().unwrap();
/// // ... launches on `stream` ...
/// let after = stream.record().unwrap();
/// stream.sync().unwrap();
/// assert!(after.is_complete());
/// let _elapsed = after.elapsed_since(&before); // None where the backend does not time events
/// ```
#[derive(Clone)]
pub struct KernelStream {
    device: Device,
    imp: Arc<dyn StreamImpl>,
}

impl std::fmt::Debug for KernelStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelStream({:?})", self.device)
    }
}

thread_local! {
    /// Each thread's default stream per device id.
    static DEFAULT_STREAMS: RefCell<HashMap<u64, KernelStream>> = RefCell::new(HashMap::new());
}

impl KernelStream {
    /// This thread's default stream on `device`, created at first use. A device that cannot
    /// make a stream (a driver failure) gets an error on first use of the stream instead: see
    /// [`KernelStream::try_current`].
    pub fn current(device: &Device) -> KernelStream {
        match KernelStream::try_current(device) {
            Ok(stream) => stream,
            Err(e) => KernelStream {
                device: device.clone(),
                imp: Arc::new(BrokenStream(e)),
            },
        }
    }

    /// This thread's default stream on `device`, or the error that prevented making it.
    pub fn try_current(device: &Device) -> Result<KernelStream, DeviceError> {
        DEFAULT_STREAMS.with(|streams| {
            if let Some(stream) = streams.borrow().get(&device.id()) {
                return Ok(stream.clone());
            }
            let stream = KernelStream::create(device)?;
            streams.borrow_mut().insert(device.id(), stream.clone());
            Ok(stream)
        })
    }

    /// A new stream on `device`.
    pub fn create(device: &Device) -> Result<KernelStream, DeviceError> {
        Ok(KernelStream {
            device: device.clone(),
            imp: device.implementation().create_stream()?,
        })
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The backend's stream.
    pub fn implementation(&self) -> &Arc<dyn StreamImpl> {
        &self.imp
    }

    /// Blocks until everything enqueued on this stream has completed; a device fault in that
    /// work is reported here.
    pub fn sync(&self) -> Result<(), DeviceError> {
        if !crate::record::armed() && !crate::profile::armed() {
            return self.imp.sync();
        }
        let start = crate::profile::stamp();
        let result = self.imp.sync();
        self.drained(start, result.is_ok());
        result
    }

    /// The stream has drained (a sync returned, or a download on it completed) with recording
    /// or profiling on: what waited for that is resolved, and `start` begins the sync's span.
    pub(crate) fn drained(&self, start: crate::profile::Stamp, ok: bool) {
        if crate::profile::armed() {
            crate::profile::host_span_named(
                crate::profile::Kind::Sync,
                crate::profile::Name::Static("sync"),
                start,
                crate::profile::Args {
                    backend: self.device.backend().name(),
                    ..Default::default()
                },
            );
            if ok {
                crate::profile::stream_completed(self.profile_key(), start);
            }
        }
        if ok && crate::record::armed() {
            crate::record::capture::on_sync(&self.imp);
        }
    }

    /// The key of this stream's track in a profile (unique while the stream lives; the trace
    /// names the track after the backend and the key).
    pub(crate) fn profile_key(&self) -> u64 {
        Arc::as_ptr(&self.imp) as *const () as usize as u64
    }

    /// An event that completes when everything enqueued so far has.
    pub fn record(&self) -> Result<Event, DeviceError> {
        Ok(Event {
            device: self.device.clone(),
            imp: self.imp.record()?,
        })
    }

    /// Makes work enqueued on this stream from now on wait for `event` (which may come from
    /// another stream of the same device).
    pub fn wait_for(&self, event: &Event) -> Result<(), DeviceError> {
        if event.device != self.device {
            return Err(DeviceError::ForeignObject {
                what: "the event".into(),
            });
        }
        self.imp.wait_for(event.imp.as_ref())
    }

    /// Asks the stream to defer its launches (contract §2.4, deferred streams): on CUDA,
    /// launches queue and run at the next observable point (a download, an upload or copy on
    /// the stream, a sync, an event record or wait, the stream's drop), and a sequence seen
    /// three times replays as a CUDA graph. `Ok(true)` where the stream now defers; every
    /// other backend, `CAJETA_XPU_DEFER=0`, and `false` answer `Ok(false)`. Turning it off
    /// flushes first. A malformed `CAJETA_XPU_DEFER` is `XPU-C001`. See
    /// `docs/deferred-streams.md`.
    pub fn set_deferred(&self, on: bool) -> Result<bool, DeviceError> {
        crate::config::get().defer.clone()?;
        self.imp.set_deferred(on)
    }

    /// The deferral counters: queued, replayed, direct, graphs, graph launches, patches,
    /// flushes (all zero on a stream that never deferred).
    pub fn defer_stat(&self) -> crate::hal::defer::DeferStat {
        self.imp.defer_stat()
    }

    /// Acknowledges a failed flush of a deferred stream (`XPU-D020`, after which reads and
    /// syncs refuse with `XPU-D021`): the stream takes launches and reads again.
    pub fn clear_failure(&self) {
        self.imp.clear_failure()
    }

    /// Drains and releases this handle (the contract's `destroy()`); the stream itself goes
    /// when its last handle does.
    pub fn destroy(self) -> Result<(), DeviceError> {
        self.sync()
    }
}

/// A point in a stream's work.
#[derive(Clone)]
pub struct Event {
    device: Device,
    imp: Arc<dyn EventImpl>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Event({:?}, complete: {})",
            self.device,
            self.is_complete()
        )
    }
}

impl Event {
    /// Whether the work before the event has completed (without waiting).
    pub fn is_complete(&self) -> bool {
        self.imp.is_complete()
    }

    /// Blocks until the work before the event has completed.
    pub fn sync(&self) -> Result<(), DeviceError> {
        self.imp.sync()
    }

    /// Device-clock time from `earlier` to this event, where the backend timestamps events.
    pub fn elapsed_since(&self, earlier: &Event) -> Option<Duration> {
        if earlier.device != self.device {
            return None;
        }
        self.imp.elapsed_since(earlier.imp.as_ref())
    }

    /// The backend's side of the event.
    pub fn implementation(&self) -> &Arc<dyn EventImpl> {
        &self.imp
    }
}

/// The stand-in for a default stream the device could not create: every operation reports the
/// original error.
struct BrokenStream(DeviceError);

impl StreamImpl for BrokenStream {
    fn sync(&self) -> Result<(), DeviceError> {
        Err(self.0.clone())
    }
    fn record(&self) -> Result<Arc<dyn EventImpl>, DeviceError> {
        Err(self.0.clone())
    }
    fn wait_for(&self, _event: &dyn EventImpl) -> Result<(), DeviceError> {
        Err(self.0.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::Backend;

    #[test]
    fn default_stream_is_per_thread_and_cached() {
        let device = Device::open(Backend::Interp).unwrap();
        let a = KernelStream::current(&device);
        let b = KernelStream::current(&device);
        assert!(Arc::ptr_eq(a.implementation(), b.implementation()));
        let other = std::thread::spawn({
            let device = device.clone();
            move || KernelStream::current(&device)
        })
        .join()
        .unwrap();
        assert!(!Arc::ptr_eq(a.implementation(), other.implementation()));
    }

    #[test]
    fn events_on_host_streams_complete_when_recorded() {
        let device = Device::open(Backend::Interp).unwrap();
        let s1 = KernelStream::create(&device).unwrap();
        let s2 = KernelStream::create(&device).unwrap();
        let e = s1.record().unwrap();
        assert!(e.is_complete());
        s2.wait_for(&e).unwrap();
        e.sync().unwrap();
        s2.sync().unwrap();
        s1.destroy().unwrap();
    }
}
