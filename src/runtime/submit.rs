//! [`KernelSubmission`] and [`Scheduler::submit`] (contract §2.4): a submission stands in
//! the stream's place and adds a policy, a deadline window and a budget to a launch.
//!
//! The scheduler that acts on the policy and the budget is design under the tile-scheduling
//! specifications; today [`Scheduler::submit`] records the submission and the launch executes
//! immediately. The deadline is real: a launch whose work has not finished within its window
//! is refusal 6, [`LaunchError::Deadline`] (`XPU-L018`). The interpreter and the CPU cancel it
//! through the launch watchdog ([`crate::deadline`]), at the launch call, where their work
//! completes; a GPU, whose kernels cannot be cancelled, reports it and leaves the kernel to
//! finish (`cancelled: false`), and the next sync waits for it.

use crate::hal::launch::{ArgValue, Launch, LaunchError};
use crate::runtime::device::Kernel;
use crate::runtime::stream::KernelStream;
use parking_lot::Mutex;
use std::time::Duration;

/// How a submission asks to be scheduled. Recorded; today every policy executes
/// immediately, in stream order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Run as soon as the stream reaches it.
    #[default]
    Immediate,
    /// Prefer finishing this launch early over throughput.
    Latency,
    /// Prefer throughput over this launch's latency.
    Throughput,
}

/// A launch's stream with a policy, a deadline window and a budget.
#[derive(Clone, Debug)]
pub struct KernelSubmission {
    stream: KernelStream,
    policy: Policy,
    deadline: Option<Duration>,
    budget: Option<Duration>,
}

impl KernelSubmission {
    /// A submission on `stream`: immediate, no deadline, no budget.
    pub fn on(stream: &KernelStream) -> KernelSubmission {
        KernelSubmission {
            stream: stream.clone(),
            policy: Policy::Immediate,
            deadline: None,
            budget: None,
        }
    }

    /// The scheduling policy (recorded; the launch runs immediately).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The window from submission in which the launch's work must finish (refusal 6 past it).
    pub fn deadline(mut self, window: Duration) -> Self {
        self.deadline = Some(window);
        self
    }

    /// The device time the submission may take (recorded).
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The stream the launch goes on.
    pub fn stream(&self) -> &KernelStream {
        &self.stream
    }

    /// The policy given.
    pub fn policy_of(&self) -> Policy {
        self.policy
    }

    /// The deadline window given, if any.
    pub fn deadline_of(&self) -> Option<Duration> {
        self.deadline
    }

    /// The budget given, if any.
    pub fn budget_of(&self) -> Option<Duration> {
        self.budget
    }
}

/// One submission as the scheduler recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The kernel launched.
    pub kernel: String,
    /// Its policy.
    pub policy: Policy,
    /// Its deadline window.
    pub deadline: Option<Duration>,
    /// Its budget.
    pub budget: Option<Duration>,
}

/// The most recent submissions the scheduler keeps.
pub const KEPT: usize = 1024;

static LOG: Mutex<Vec<Submitted>> = Mutex::new(Vec::new());

/// The explicit form of a submission.
pub struct Scheduler;

impl Scheduler {
    /// Records `submission` and launches `kernel` on its stream now. The submission's
    /// deadline window becomes the launch's deadline (the shorter of the two where the
    /// launch names one too).
    pub fn submit<'a>(
        kernel: &Kernel,
        submission: &KernelSubmission,
        mut launch: Launch,
        args: impl AsMut<[ArgValue<'a>]>,
    ) -> Result<(), LaunchError> {
        {
            let mut log = LOG.lock();
            if log.len() >= KEPT {
                log.remove(0);
            }
            log.push(Submitted {
                kernel: kernel.name().to_string(),
                policy: submission.policy,
                deadline: submission.deadline,
                budget: submission.budget,
            });
        }
        launch.deadline = match (launch.deadline, submission.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        kernel.launch(&submission.stream, launch, args)
    }

    /// The submissions recorded so far (the most recent [`KEPT`]), oldest first.
    pub fn submitted() -> Vec<Submitted> {
        LOG.lock().clone()
    }
}
