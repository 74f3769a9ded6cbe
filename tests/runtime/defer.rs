//! Deferred streams' sequence recognition against a fake recorder (contract §2.4): sightings,
//! patch against re-record, the exceptions that go direct, failures at a flush, the
//! counters, and `CAJETA_XPU_DEFER`.

use xpu::backend::defer::recognise::{
    exception, Deferred, Exception, LaunchTraits, Node, Recorder, MAX_ARGS, MAX_ARG_BYTES,
    MAX_QUEUE,
};
use xpu::hal::defer::DeferStat;

#[derive(Clone, Debug)]
struct Fake {
    kernel: u64,
    shape: Vec<u32>,
    params: (u32, u64),
}

fn launch(kernel: u64, grid: u32, arg: u64) -> Fake {
    Fake {
        kernel,
        shape: vec![2, 1],
        params: (grid, arg),
    }
}

impl Node for Fake {
    type Params = (u32, u64);
    fn kernel(&self) -> u64 {
        self.kernel
    }
    fn shape(&self) -> &[u32] {
        &self.shape
    }
    fn params(&self) -> &(u32, u64) {
        &self.params
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Direct(u64, (u32, u64)),
    Record(usize),
    Patch(usize, (u32, u64)),
    Replay(Vec<(u32, u64)>),
}

/// A recorder that logs what it is asked and whose graphs are the node parameters (so a
/// replay shows what a real graph would run).
#[derive(Default)]
struct Log {
    ops: Vec<Op>,
    fail_kernel: Option<u64>,
    refuse_patches: bool,
    refuse_records: bool,
}

impl Recorder<Fake> for Log {
    type Graph = Vec<(u32, u64)>;
    type Error = String;
    fn direct(&mut self, n: &Fake) -> Result<(), String> {
        if self.fail_kernel == Some(n.kernel) {
            return Err(format!("kernel {} refused", n.kernel));
        }
        self.ops.push(Op::Direct(n.kernel, n.params));
        Ok(())
    }
    fn record(&mut self, nodes: &[Fake]) -> Result<Self::Graph, String> {
        if self.refuse_records {
            return Err("no graphs".into());
        }
        self.ops.push(Op::Record(nodes.len()));
        Ok(nodes.iter().map(|n| n.params).collect())
    }
    fn patch(&mut self, g: &mut Self::Graph, i: usize, n: &Fake) -> bool {
        if self.refuse_patches {
            return false;
        }
        g[i] = n.params;
        self.ops.push(Op::Patch(i, n.params));
        true
    }
    fn replay(&mut self, g: &Self::Graph) -> Result<(), String> {
        self.ops.push(Op::Replay(g.clone()));
        Ok(())
    }
}

/// Queues `seq` on `d` and flushes it through `log`, returning what the recorder did.
fn run(d: &mut Deferred<Fake, Vec<(u32, u64)>>, log: &mut Log, seq: &[Fake]) -> Vec<Op> {
    for n in seq {
        assert!(!d.push(n.clone()));
    }
    log.ops.clear();
    d.flush(log).unwrap();
    assert_eq!(d.pending(), 0);
    std::mem::take(&mut log.ops)
}

fn three(arg: u64) -> Vec<Fake> {
    vec![launch(1, 4, arg), launch(2, 8, 7), launch(3, 1, 9)]
}

#[test]
fn a_sequence_runs_direct_twice_then_records_and_replays() {
    let mut d = Deferred::new(true);
    let mut log = Log::default();
    for _ in 0..2 {
        let ops = run(&mut d, &mut log, &three(5));
        assert_eq!(
            ops,
            vec![
                Op::Direct(1, (4, 5)),
                Op::Direct(2, (8, 7)),
                Op::Direct(3, (1, 9))
            ]
        );
    }
    let ops = run(&mut d, &mut log, &three(5));
    assert_eq!(
        ops,
        vec![Op::Record(3), Op::Replay(vec![(4, 5), (8, 7), (1, 9)])]
    );
    // Unchanged: replayed as it is.
    let ops = run(&mut d, &mut log, &three(5));
    assert_eq!(ops, vec![Op::Replay(vec![(4, 5), (8, 7), (1, 9)])]);
    assert_eq!(
        d.stat(),
        DeferStat {
            queued: 12,
            replayed: 6,
            direct: 6,
            graphs: 1,
            graph_launches: 2,
            patches: 0,
            flushes: 4,
        }
    );
}

#[test]
fn changed_arguments_and_grids_are_patched_into_the_graph() {
    let mut d = Deferred::new(true);
    let mut log = Log::default();
    for _ in 0..3 {
        run(&mut d, &mut log, &three(5));
    }
    // The first node's argument changes, then the second node's grid.
    let ops = run(&mut d, &mut log, &three(6));
    assert_eq!(
        ops,
        vec![
            Op::Patch(0, (4, 6)),
            Op::Replay(vec![(4, 6), (8, 7), (1, 9)])
        ]
    );
    let mut seq = three(6);
    seq[1].params.0 = 16;
    let ops = run(&mut d, &mut log, &seq);
    assert_eq!(
        ops,
        vec![
            Op::Patch(1, (16, 7)),
            Op::Replay(vec![(4, 6), (16, 7), (1, 9)])
        ]
    );
    // Back to the first parameters: both patched back.
    let ops = run(&mut d, &mut log, &three(5));
    assert_eq!(
        ops,
        vec![
            Op::Patch(0, (4, 5)),
            Op::Patch(1, (8, 7)),
            Op::Replay(vec![(4, 5), (8, 7), (1, 9)])
        ]
    );
    assert_eq!(d.stat().patches, 4);
    assert_eq!(d.stat().graphs, 1);
}

#[test]
fn a_refused_patch_records_the_graph_again() {
    let mut d = Deferred::new(true);
    let mut log = Log::default();
    for _ in 0..3 {
        run(&mut d, &mut log, &three(5));
    }
    log.refuse_patches = true;
    let ops = run(&mut d, &mut log, &three(6));
    assert_eq!(
        ops,
        vec![Op::Record(3), Op::Replay(vec![(4, 6), (8, 7), (1, 9)])]
    );
    assert_eq!(d.stat().graphs, 2);
    assert_eq!(d.stat().patches, 0);
}

#[test]
fn a_refused_record_runs_direct_and_waits_three_more_sightings() {
    let mut d = Deferred::new(true);
    let mut log = Log {
        refuse_records: true,
        ..Log::default()
    };
    for _ in 0..5 {
        let ops = run(&mut d, &mut log, &three(5));
        assert!(ops.iter().all(|o| matches!(o, Op::Direct(..))), "{ops:?}");
    }
    assert_eq!(d.stat().graphs, 0);
    log.refuse_records = false;
    // Sightings restarted at the refusal (the third): the sixth records.
    let ops = run(&mut d, &mut log, &three(5));
    assert_eq!(ops[0], Op::Record(3));
}

#[test]
fn sequences_are_told_apart_by_kernels_order_and_shapes() {
    let mut d = Deferred::new(true);
    let mut log = Log::default();
    let a = three(5);
    let mut b = three(5);
    b.swap(0, 1);
    let mut c = three(5);
    c[2].shape = vec![2, 2];
    for _ in 0..2 {
        for s in [&a, &b, &c] {
            let ops = run(&mut d, &mut log, s);
            assert!(ops.iter().all(|o| matches!(o, Op::Direct(..))), "{ops:?}");
        }
    }
    for s in [&a, &b, &c] {
        assert_eq!(run(&mut d, &mut log, s)[0], Op::Record(3));
    }
    assert_eq!(d.stat().graphs, 3);
}

#[test]
fn one_launch_is_never_a_graph() {
    let mut d = Deferred::new(true);
    let mut log = Log::default();
    for _ in 0..5 {
        let ops = run(&mut d, &mut log, &[launch(1, 1, 1)]);
        assert_eq!(ops, vec![Op::Direct(1, (1, 1))]);
    }
    assert_eq!(d.stat().graphs, 0);
    assert_eq!(d.stat().flushes, 5);
}

#[test]
fn a_failed_launch_stops_the_sequence_and_names_it() {
    let mut d = Deferred::new(true);
    let mut log = Log {
        fail_kernel: Some(2),
        ..Log::default()
    };
    for n in three(5) {
        d.push(n);
    }
    let f = d.flush(&mut log).unwrap_err();
    assert_eq!(f.node.kernel, 2);
    assert_eq!(f.index, 1);
    assert_eq!(f.not_run, 1);
    assert_eq!(f.error, "kernel 2 refused");
    // Kernel 3 never ran, and the queue is empty.
    assert_eq!(log.ops, vec![Op::Direct(1, (4, 5))]);
    assert_eq!(d.pending(), 0);
    assert_eq!(d.stat().direct, 1);
}

#[test]
fn an_empty_flush_is_not_counted_and_a_full_queue_asks_for_one() {
    let mut d: Deferred<Fake, Vec<(u32, u64)>> = Deferred::new(true);
    let mut log = Log::default();
    d.flush(&mut log).unwrap();
    assert_eq!(d.stat(), DeferStat::default());
    for i in 0..MAX_QUEUE - 1 {
        assert!(!d.push(launch(1, 1, i as u64)));
    }
    assert!(d.push(launch(1, 1, 0)), "the queue is full at MAX_QUEUE");
    d.note_direct();
    assert_eq!(d.stat().queued, MAX_QUEUE as u64);
    assert_eq!(d.stat().direct, 1);
}

#[test]
fn each_exception_goes_direct() {
    let plain = LaunchTraits {
        args: MAX_ARGS,
        arg_bytes: MAX_ARG_BYTES,
        ..LaunchTraits::default()
    };
    assert_eq!(
        exception(&plain),
        None,
        "48 arguments of 384 bytes are queued"
    );
    let with = |f: fn(&mut LaunchTraits)| {
        let mut t = plain;
        f(&mut t);
        exception(&t)
    };
    assert_eq!(with(|t| t.checked = true), Some(Exception::Checked));
    assert_eq!(with(|t| t.deadline = true), Some(Exception::Deadline));
    assert_eq!(
        with(|t| t.buffer_array = true),
        Some(Exception::BufferArray)
    );
    assert_eq!(with(|t| t.args = 49), Some(Exception::TooManyArgs(49)));
    assert_eq!(
        with(|t| t.arg_bytes = 385),
        Some(Exception::TooManyArgBytes(385))
    );
    assert_eq!(with(|t| t.observed = true), Some(Exception::Observed));
}

#[test]
fn defer_setting_parses_and_a_bad_value_names_the_variable() {
    use xpu::config::{parse_defer, DeferSetting};
    assert_eq!(parse_defer(None), Ok(DeferSetting::ByStream));
    assert_eq!(parse_defer(Some("")), Ok(DeferSetting::ByStream));
    assert_eq!(parse_defer(Some("0")), Ok(DeferSetting::Never));
    assert_eq!(parse_defer(Some(" all ")), Ok(DeferSetting::All));
    let e = parse_defer(Some("sometimes")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "error[XPU-C001]: CAJETA_XPU_DEFER=\"sometimes\" is not one of 0, all"
    );
}

#[test]
fn deferral_is_a_no_op_on_the_host_backends() {
    for backend in [xpu::Backend::Interp, xpu::Backend::Cpu] {
        let device = xpu::Device::open(backend).unwrap();
        let s = xpu::KernelStream::create(&device).unwrap();
        assert_eq!(s.set_deferred(true), Ok(false));
        assert_eq!(s.defer_stat(), DeferStat::default());
    }
}

#[test]
fn a_submission_past_its_deadline_is_refusal_6_cancelled_on_the_host_backends() {
    use std::time::Duration;
    use xpu::runtime::{KernelSubmission, Policy, Scheduler};
    let module = std::sync::Arc::new(
        xpu::ir::parse(
            "kernel spin(out: buf<u32, rw>) {\n    loop {\n    }\n}\n\
             kernel double(out: buf<u32, rw>) {\n    out[global_id.x] = global_id.x * 2;\n}\n",
        )
        .unwrap()
        .verify()
        .unwrap(),
    );
    for backend in [xpu::Backend::Interp, xpu::Backend::Cpu] {
        let device = xpu::Device::open(backend).unwrap();
        let program = device.load(module.clone()).unwrap();
        let stream = xpu::KernelStream::create(&device).unwrap();
        let mut out = device.upload(&[0u32; 64]).unwrap();
        let window = Duration::from_millis(150);
        let submission = KernelSubmission::on(&stream)
            .policy(Policy::Latency)
            .deadline(window)
            .budget(Duration::from_millis(5));
        let t0 = std::time::Instant::now();
        let e = Scheduler::submit(
            &program.kernel("spin").unwrap(),
            &submission,
            xpu::Launch::grid([2]).block([32]),
            xpu::args![&mut out],
        )
        .unwrap_err();
        let took = t0.elapsed();
        assert_eq!(e.code(), "XPU-L018", "{backend}: {e}");
        assert!(
            matches!(e, xpu::LaunchError::Deadline { cancelled: true, deadline, .. } if deadline == window),
            "{backend}: {e:?}"
        );
        assert!(took >= window && took < Duration::from_secs(20), "{took:?}");
        // The stream goes on, and a submission within its window runs.
        let ok = KernelSubmission::on(&stream).deadline(Duration::from_secs(600));
        Scheduler::submit(
            &program.kernel("double").unwrap(),
            &ok,
            xpu::Launch::grid([2]).block([32]),
            xpu::args![&mut out],
        )
        .unwrap();
        stream.sync().unwrap();
        assert_eq!(out.download().unwrap()[63], 126);
        let log = Scheduler::submitted();
        assert!(log.iter().any(|s| s.kernel == "spin"
            && s.policy == Policy::Latency
            && s.deadline == Some(window)
            && s.budget == Some(Duration::from_millis(5))));
    }
}
