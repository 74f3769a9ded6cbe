//! Launch deadlines (contract §2.4, refusal 6: a missed deadline): a [`Watch`] armed for a
//! launch holds a cancellation flag that one process-wide watchdog thread sets when the
//! deadline passes. The backends that run kernels in this process (the interpreter, the CPU's
//! generated code) read the flag at loop back-edges and barriers and stop the launch with
//! [`LaunchError::Deadline`](crate::hal::launch::LaunchError::Deadline); GPU backends, which cannot
//! cancel a kernel, wait for it with the deadline as a timeout and report it when it passes.
//!
//! Arming costs one lock and one condition-variable signal, and nothing at all for a launch
//! without a deadline (its flag is never registered, so never set).

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The cancellation flag of one launch: nonzero once its deadline has passed. Generated code
/// reads it as a plain `u32`.
pub type Flag = AtomicU32;

/// A launch's deadline, armed: dropping it disarms the watchdog.
pub struct Watch {
    flag: Arc<Flag>,
    key: Option<(Instant, u64)>,
    deadline: Option<Duration>,
}

impl Watch {
    /// Arms a watch that cancels after `deadline` (`None`: never).
    pub fn arm(deadline: Option<Duration>) -> Watch {
        let flag = Arc::new(Flag::new(0));
        let key = deadline.map(|d| {
            let at = Instant::now()
                .checked_add(d)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 40));
            watchdog().register(at, flag.clone())
        });
        Watch {
            flag,
            key,
            deadline,
        }
    }

    /// The flag the launch polls.
    pub fn flag(&self) -> &Flag {
        &self.flag
    }

    /// A shared handle to the flag.
    pub fn shared_flag(&self) -> Arc<Flag> {
        self.flag.clone()
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.flag.load(Ordering::Relaxed) != 0
    }

    /// The deadline the watch was armed with.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            watchdog().unregister(key);
        }
    }
}

/// The armed flags by deadline (and a sequence number), and the last number given out.
type Pending = (BTreeMap<(Instant, u64), Arc<Flag>>, u64);

struct Watchdog {
    pending: Mutex<Pending>,
    wake: Condvar,
}

impl Watchdog {
    fn register(&self, at: Instant, flag: Arc<Flag>) -> (Instant, u64) {
        let mut p = self.pending.lock();
        p.1 += 1;
        let key = (at, p.1);
        let earliest = p.0.keys().next().is_none_or(|k| key < *k);
        p.0.insert(key, flag);
        drop(p);
        if earliest {
            self.wake.notify_one();
        }
        key
    }

    fn unregister(&self, key: (Instant, u64)) {
        self.pending.lock().0.remove(&key);
    }

    fn serve(&self) {
        let mut p = self.pending.lock();
        loop {
            let now = Instant::now();
            while let Some(key) = p.0.keys().next().copied() {
                if key.0 > now {
                    break;
                }
                if let Some(flag) = p.0.remove(&key) {
                    flag.store(1, Ordering::Relaxed);
                }
            }
            match p.0.keys().next() {
                Some(&(at, _)) => {
                    let _ = self.wake.wait_until(&mut p, at);
                }
                None => self.wake.wait(&mut p),
            }
        }
    }
}

fn watchdog() -> &'static Watchdog {
    static DOG: OnceLock<&'static Watchdog> = OnceLock::new();
    DOG.get_or_init(|| {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            pending: Mutex::new((BTreeMap::new(), 0)),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("xpu-deadline".into())
            .spawn(move || dog.serve());
        if spawned.is_err() {
            // No thread: deadlines cannot fire; launches run as if none were set.
            eprintln!("xpu: note: could not start the deadline watchdog thread; launch deadlines are not enforced");
        }
        dog
    })
}

/// Seconds as the text format and the CLI write them (`0.5`, `60`): finite, positive and at
/// most a year; `None` otherwise.
pub fn parse_seconds(s: f64) -> Option<Duration> {
    if s.is_finite() && s > 0.0 && s <= 365.0 * 86400.0 {
        Duration::try_from_secs_f64(s).ok()
    } else {
        None
    }
}

/// A duration as seconds, the shortest text that reads back as the same duration.
pub fn format_seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        return d.as_secs().to_string();
    }
    format!("{}", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_fires_after_its_deadline_and_not_before() {
        let w = Watch::arm(Some(Duration::from_millis(30)));
        let late = Watch::arm(Some(Duration::from_secs(3600)));
        let never = Watch::arm(None);
        assert!(!w.expired());
        let t0 = Instant::now();
        while !w.expired() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the watchdog never fired"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert!(!late.expired() && !never.expired());
    }

    #[test]
    fn seconds_round_trip() {
        for s in ["0.5", "60", "1.25", "0.001"] {
            let d = parse_seconds(s.parse().unwrap()).unwrap();
            assert_eq!(format_seconds(d), s);
        }
        assert!(parse_seconds(0.0).is_none());
        assert!(parse_seconds(-1.0).is_none());
        assert!(parse_seconds(f64::NAN).is_none());
    }
}
