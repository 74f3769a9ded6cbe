//! Launch deadlines on a GPU stream (contract §2.4, refusal 6), reported where they can be
//! seen: a GPU kernel cannot be cancelled, so a launch with a deadline is enqueued like any
//! other and its stream keeps a [`Deadlines`] book of it. At the stream's next observable
//! point (a sync, a host read, an event record or wait) the book is settled: a launch whose
//! work finished later than its window after submission, or that has not finished and is
//! already past it, is reported once as a [`Missed`] deadline (`XPU-L018` at that point); the
//! kernel is left to finish, and nothing about the device changes, so the stream goes on.
//!
//! The book is backend-independent: a backend gives each entry a [`Completion`] that says
//! whether the work has finished and how long after its submission it did (CUDA: an event
//! recorded at submission on an idle stream of its own and one recorded after the launch,
//! compared by the device clock). Tests drive it with a fake completion and a fake clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether a launch's work has finished, as its backend can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Not finished yet.
    Pending,
    /// Finished, this long after its submission (`None`: the backend cannot say when, and
    /// the launch counts as on time).
    Done(Option<Duration>),
}

/// A backend's view of one launch's completion.
pub trait Completion: Send {
    /// Whether the launch's work has finished (never blocks).
    fn poll(&self) -> Finish;
}

/// A deadline missed, as the observable point that saw it reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missed {
    /// The kernel of the first launch (in submission order) that missed its deadline.
    pub kernel: String,
    /// Its deadline window.
    pub deadline: Duration,
    /// How long after its submission its work finished; `None`: it had not finished when
    /// seen, `seen_after` after its submission.
    pub took: Option<Duration>,
    /// The time from its submission to this observable point.
    pub seen_after: Duration,
    /// How many other launches missed theirs at the same point.
    pub others: usize,
}

impl Missed {
    /// What happened, for the error message: `it finished 0.52 s after submission` or `it
    /// had not finished 0.61 s after submission`.
    pub fn describe(&self) -> String {
        let mut s = match self.took {
            Some(t) => format!("it finished {:.6} s after submission", t.as_secs_f64()),
            None => format!(
                "it had not finished {:.6} s after submission",
                self.seen_after.as_secs_f64()
            ),
        };
        if self.others > 0 {
            s.push_str(&format!(
                " ({} more launch{} on the stream missed theirs)",
                self.others,
                if self.others == 1 { "" } else { "es" }
            ));
        }
        s
    }
}

struct Entry {
    kernel: Arc<str>,
    submitted: Instant,
    deadline: Duration,
    done: Box<dyn Completion>,
}

/// The launches with deadlines a stream has not yet settled, in submission order.
#[derive(Default)]
pub struct Deadlines {
    pending: Vec<Entry>,
}

impl Deadlines {
    /// An empty book.
    pub fn new() -> Deadlines {
        Deadlines::default()
    }

    /// Adds a launch of `kernel` submitted at `submitted` with window `deadline`.
    pub fn push(
        &mut self,
        kernel: Arc<str>,
        submitted: Instant,
        deadline: Duration,
        done: Box<dyn Completion>,
    ) {
        self.pending.push(Entry {
            kernel,
            submitted,
            deadline,
            done,
        });
    }

    /// How many launches are not settled yet.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether every launch is settled.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Settles the book at an observable point at host time `now`: a finished launch leaves
    /// it (missed where it finished past its window), as does an unfinished one already past
    /// its window (missed; it is left to finish); an unfinished one within its window stays.
    /// The first miss is returned, with the count of the others.
    pub fn settle(&mut self, now: Instant) -> Option<Missed> {
        let mut first: Option<Missed> = None;
        let mut others = 0;
        self.pending.retain(|e| {
            let seen_after = now.saturating_duration_since(e.submitted);
            let (settled, missed_by) = match e.done.poll() {
                Finish::Done(Some(took)) => (true, (took > e.deadline).then_some(Some(took))),
                Finish::Done(None) => (true, None),
                Finish::Pending if seen_after > e.deadline => (true, Some(None)),
                Finish::Pending => (false, None),
            };
            if let Some(took) = missed_by {
                if first.is_none() {
                    first = Some(Missed {
                        kernel: e.kernel.to_string(),
                        deadline: e.deadline,
                        took,
                        seen_after,
                        others: 0,
                    });
                } else {
                    others += 1;
                }
            }
            !settled
        });
        first.map(|m| Missed { others, ..m })
    }

    /// Forgets every entry (a stream whose context was lost, or that is dropped).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}
