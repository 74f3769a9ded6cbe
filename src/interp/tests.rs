//! Engine tests over modules built directly in Rust (no parser), so the scheduler, memory
//! model and UB detection are tested independently of the front end. Semantics tests from
//! kernel text live in `tests/interp.rs`.

use super::*;
use crate::ir::{
    Access, Base, BinaryOp, Block, Builtin, Dim, ElemType, Expr, ExprId, Function, FunctionKind,
    Len, Literal, Local, LoopKind, Module, Param, Place, ReduceOp, Scalar, SharedDecl, Span, Stmt,
    StmtKind, Type, WaveOp,
};

/// A kernel under construction. Every statement gets its own line number (1, 2, ...) so UB
/// reports can be checked by line.
struct K {
    f: Function,
    blocks: Vec<Block>,
    line: u32,
}

fn buf(s: Scalar, rw: bool) -> Type {
    Type::Buffer {
        elem: ElemType::scalar(s),
        access: if rw { Access::ReadWrite } else { Access::Read },
    }
}

impl K {
    fn new(name: &str) -> K {
        K {
            f: Function::new(name, FunctionKind::Kernel),
            blocks: vec![Vec::new()],
            line: 0,
        }
    }
    fn param(&mut self, name: &str, ty: Type) -> u32 {
        self.f.params.push(Param {
            name: name.into(),
            ty,
            span: Span::UNKNOWN,
        });
        self.f.params.len() as u32 - 1
    }
    fn local(&mut self, name: &str, ty: Type) -> Handle<Local> {
        self.f.locals.append(Local {
            name: name.into(),
            ty,
            span: Span::UNKNOWN,
        })
    }
    fn shared(&mut self, name: &str, s: Scalar, len: Option<u32>) -> Handle<SharedDecl> {
        self.f.shared.append(SharedDecl {
            name: name.into(),
            elem: ElemType::scalar(s),
            len: len.map(Len::Fixed),
            span: Span::UNKNOWN,
        })
    }
    fn e(&mut self, x: Expr) -> ExprId {
        self.f.add_expr(x, Span::new(self.line + 1, 5))
    }
    fn u(&mut self, v: u32) -> ExprId {
        self.e(Expr::Literal(Literal::int(v as i128, Scalar::U32)))
    }
    fn i(&mut self, v: i32) -> ExprId {
        self.e(Expr::Literal(Literal::int(v as i128, Scalar::I32)))
    }
    fn gid(&mut self) -> ExprId {
        self.e(Expr::Builtin(Builtin::GlobalId(Dim::X)))
    }
    fn lid(&mut self) -> ExprId {
        self.e(Expr::Builtin(Builtin::LocalId(Dim::X)))
    }
    fn lane(&mut self) -> ExprId {
        self.e(Expr::Builtin(Builtin::LaneId))
    }
    fn get(&mut self, l: Handle<Local>) -> ExprId {
        self.e(Expr::Local(l))
    }
    fn p(&mut self, i: u32) -> ExprId {
        self.e(Expr::Param(i))
    }
    fn bin(&mut self, op: BinaryOp, a: ExprId, b: ExprId) -> ExprId {
        self.e(Expr::Binary { op, lhs: a, rhs: b })
    }
    fn at(&mut self, base: Base, index: ExprId) -> ExprId {
        self.e(Expr::Index { base, index })
    }
    fn wave(&mut self, op: WaveOp, args: Vec<ExprId>) -> ExprId {
        self.e(Expr::Wave {
            op,
            args,
            width: None,
        })
    }
    fn cast(&mut self, to: Scalar, arg: ExprId) -> ExprId {
        self.e(Expr::Cast { to, arg })
    }
    fn stmt(&mut self, kind: StmtKind) {
        self.line += 1;
        let span = Span::new(self.line, 1);
        self.blocks.last_mut().unwrap().push(Stmt { kind, span });
    }
    fn let_(&mut self, l: Handle<Local>, init: Option<ExprId>) {
        self.stmt(StmtKind::Let { local: l, init });
    }
    fn set(&mut self, l: Handle<Local>, v: ExprId) {
        self.stmt(StmtKind::Assign {
            place: Place::Local(l),
            value: v,
        });
    }
    fn store(&mut self, base: Base, index: ExprId, value: ExprId) {
        self.stmt(StmtKind::Assign {
            place: Place::Element { base, index },
            value,
        });
    }
    fn nested(&mut self, body: impl FnOnce(&mut K)) -> Block {
        self.blocks.push(Vec::new());
        body(self);
        self.blocks.pop().unwrap()
    }
    fn if_(&mut self, cond: ExprId, then: impl FnOnce(&mut K), els: impl FnOnce(&mut K)) {
        let t = self.nested(then);
        let e = self.nested(els);
        self.stmt(StmtKind::If {
            cond,
            then_block: t,
            else_block: e,
        });
    }
    fn for_(&mut self, var: Handle<Local>, start: ExprId, end: ExprId, body: impl FnOnce(&mut K)) {
        let b = self.nested(body);
        self.stmt(StmtKind::Loop {
            label: None,
            kind: LoopKind::For {
                var,
                start,
                end,
                step: None,
            },
            body: b,
        });
    }
    fn barrier(&mut self) {
        self.stmt(StmtKind::Barrier);
    }
    fn module(mut self) -> VerifiedModule {
        self.f.body = self.blocks.pop().unwrap();
        let mut m = Module::new();
        m.functions.append(self.f);
        match m.verify() {
            Ok(v) => v,
            Err(d) => panic!("test kernel does not verify:\n{d}"),
        }
    }
}

fn u32s(b: &Buffer) -> Vec<u32> {
    b.to_values::<u32>()
}

fn run(
    m: &VerifiedModule,
    geo: Geometry,
    args: &mut [Arg<'_>],
    opts: &Options,
) -> Result<Report, InterpError> {
    let name = m.kernels().next().unwrap().1.name.clone();
    launch(m, &name, &geo, args, opts)
}

fn ub_of(r: Result<Report, InterpError>) -> UbReport {
    match r {
        Err(InterpError::Ub(u)) => *u,
        other => panic!("expected UB, got {other:?}"),
    }
}

/// `y[i] = a * x[i] + y[i]` for `i < n`.
fn saxpy() -> VerifiedModule {
    let mut k = K::new("saxpy");
    let y = k.param("y", buf(Scalar::F32, true));
    let x = k.param("x", buf(Scalar::F32, false));
    let a = k.param("a", Type::F32);
    let n = k.param("n", Type::U32);
    let i = k.local("i", Type::U32);
    let g = k.gid();
    k.let_(i, Some(g));
    let (ie, ne) = (k.get(i), k.p(n));
    let c = k.bin(BinaryOp::Lt, ie, ne);
    k.if_(
        c,
        |k| {
            let ae = k.p(a);
            let i1 = k.get(i);
            let xi = k.at(Base::Param(x), i1);
            let m = k.bin(BinaryOp::Mul, ae, xi);
            let i2 = k.get(i);
            let yi = k.at(Base::Param(y), i2);
            let s = k.bin(BinaryOp::Add, m, yi);
            let i3 = k.get(i);
            k.store(Base::Param(y), i3, s);
        },
        |_| {},
    );
    k.module()
}

#[test]
fn saxpy_runs() {
    let m = saxpy();
    let n = 1000u32;
    let mut y = Buffer::from_values(&vec![1.0f32; 1024]);
    let mut x = Buffer::from_values(&(0..1024).map(|v| v as f32).collect::<Vec<_>>());
    let mut args = [
        Arg::Buffer(&mut y),
        Arg::Buffer(&mut x),
        Arg::Scalar(Literal::float(2.0, Scalar::F32)),
        Arg::Scalar(Literal::int(n as i128, Scalar::U32)),
    ];
    let r = run(&m, Geometry::linear(4, 256), &mut args, &Options::default()).unwrap();
    assert_eq!(r.work_items, 1024);
    let out = y.to_values::<f32>();
    for (i, v) in out.iter().enumerate() {
        let want = if (i as u32) < n {
            2.0 * i as f32 + 1.0
        } else {
            1.0
        };
        assert_eq!(*v, want, "y[{i}]");
    }
}

#[test]
fn saxpy_out_of_bounds_is_reported_with_its_location() {
    let m = saxpy();
    let mut y = Buffer::from_values(&vec![1.0f32; 100]);
    let mut x = Buffer::from_values(&vec![1.0f32; 100]);
    let mut args = [
        Arg::Buffer(&mut y),
        Arg::Buffer(&mut x),
        Arg::Scalar(Literal::float(2.0, Scalar::F32)),
        Arg::Scalar(Literal::int(128, Scalar::U32)),
    ];
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 128),
        &mut args,
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::OutOfBounds);
    assert_eq!(u.item.global, [100, 0, 0]);
    assert_eq!(u.span.line, 2, "{u}");
    assert!(u.detail.contains("`x`"), "{u}");
    // Stopped at the first UB: work-items 0..100 wrote theirs.
    assert_eq!(y.to_values::<f32>()[99], 3.0);
}

/// A shared-memory tree reduction: `out[group] = sum(in[group*256 ..])` with `steps` halvings.
fn reduction(skip_barrier: bool) -> VerifiedModule {
    let mut k = K::new("reduce");
    let inp = k.param("inp", buf(Scalar::U32, false));
    let out = k.param("out", buf(Scalar::U32, true));
    let tile = k.shared("tile", Scalar::U32, Some(256));
    let l = k.local("l", Type::U32);
    let s = k.local("s", Type::U32);
    let e = k.lid();
    k.let_(l, Some(e));
    let (le, g) = (k.get(l), k.gid());
    let v = k.at(Base::Param(inp), g);
    k.store(Base::Shared(tile), le, v);
    k.barrier();
    let init = k.u(128);
    k.let_(s, Some(init));
    let (se, z) = (k.get(s), k.u(0));
    let cond = k.bin(BinaryOp::Gt, se, z);
    let body = k.nested(|k| {
        let (le, se) = (k.get(l), k.get(s));
        let c = k.bin(BinaryOp::Lt, le, se);
        k.if_(
            c,
            |k| {
                let (l1, l2, se) = (k.get(l), k.get(l), k.get(s));
                let a = k.at(Base::Shared(tile), l1);
                let j = k.bin(BinaryOp::Add, l2, se);
                let b = k.at(Base::Shared(tile), j);
                let sum = k.bin(BinaryOp::Add, a, b);
                let l3 = k.get(l);
                k.store(Base::Shared(tile), l3, sum);
            },
            |_| {},
        );
        if !skip_barrier {
            k.barrier();
        }
        let (se, one) = (k.get(s), k.u(1));
        let h = k.bin(BinaryOp::Shr, se, one);
        k.set(s, h);
    });
    k.stmt(StmtKind::Loop {
        label: None,
        kind: LoopKind::While(cond),
        body,
    });
    let (le, z) = (k.get(l), k.u(0));
    let c = k.bin(BinaryOp::Eq, le, z);
    k.if_(
        c,
        |k| {
            let g = k.e(Expr::Builtin(Builtin::GroupId(Dim::X)));
            let z = k.u(0);
            let t = k.at(Base::Shared(tile), z);
            k.store(Base::Param(out), g, t);
        },
        |_| {},
    );
    k.module()
}

#[test]
fn shared_reduction_with_barriers() {
    let m = reduction(false);
    let input: Vec<u32> = (0..1024).collect();
    let mut inp = Buffer::from_values(&input);
    let mut out = Buffer::uninit(4 * 4);
    let mut args = [Arg::Buffer(&mut inp), Arg::Buffer(&mut out)];
    run(&m, Geometry::linear(4, 256), &mut args, &Options::default()).unwrap();
    let want: Vec<u32> = (0..4)
        .map(|g| input[g * 256..(g + 1) * 256].iter().sum())
        .collect();
    assert_eq!(u32s(&out), want);
    // Shuffled order: same answer.
    let mut out2 = Buffer::uninit(16);
    let mut args = [Arg::Buffer(&mut inp), Arg::Buffer(&mut out2)];
    let opts = Options {
        shuffle_seed: Some(7),
        ..Options::default()
    };
    run(&m, Geometry::linear(4, 256), &mut args, &opts).unwrap();
    assert_eq!(u32s(&out2), want);
}

#[test]
fn missing_barrier_is_a_race() {
    let m = reduction(true);
    let mut inp = Buffer::from_values(&(0..256).collect::<Vec<u32>>());
    let mut out = Buffer::uninit(4);
    let mut args = [Arg::Buffer(&mut inp), Arg::Buffer(&mut out)];
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 256),
        &mut args,
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::DataRace, "{u}");
    assert!(u.detail.contains("shared array `tile`"), "{u}");
    // Allowed, it runs (to some answer).
    let mut args = [Arg::Buffer(&mut inp), Arg::Buffer(&mut out)];
    let opts = Options {
        allow_races: vec!["tile".into()],
        ..Options::default()
    };
    run(&m, Geometry::linear(1, 256), &mut args, &opts).unwrap();
}

#[test]
fn barrier_in_divergent_branch() {
    let mut k = K::new("div");
    let (l, z) = (k.lid(), k.u(0));
    let c = k.bin(BinaryOp::Eq, l, z);
    k.if_(c, |k| k.barrier(), |_| {});
    let m = k.module();
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 4),
        &mut [],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::BarrierDivergence, "{u}");
    assert_eq!(u.span.line, 1);
}

fn uninit_kernel(read_shared: bool) -> VerifiedModule {
    let mut k = K::new("uninit");
    let out = k.param("out", buf(Scalar::U32, true));
    let t = k.shared("t", Scalar::U32, Some(4));
    let x = k.local("x", Type::U32);
    k.let_(x, None);
    let (g, z) = (k.gid(), k.u(0));
    let c = k.bin(BinaryOp::Eq, g, z);
    k.if_(
        c,
        |k| {
            let one = k.u(1);
            k.set(x, one);
        },
        |_| {},
    );
    if read_shared {
        let (g, z) = (k.gid(), k.u(0));
        let v = k.at(Base::Shared(t), z);
        k.store(Base::Param(out), g, v);
    }
    let (g, xe) = (k.gid(), k.get(x));
    k.store(Base::Param(out), g, xe);
    k.module()
}

#[test]
fn uninit_shared_read_and_local() {
    let mut o = Buffer::uninit(16);
    let m = uninit_kernel(true);
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut o)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::UninitRead, "{u}");
    assert_eq!(u.item.local, [0, 0, 0]);
    assert!(u.detail.contains("shared array `t`"), "{u}");
    let m = uninit_kernel(false);
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut o)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::UninitRead, "{u}");
    assert_eq!(u.item.local, [1, 0, 0]);
    assert!(u.detail.contains("local `x`"), "{u}");
    // Without checks the same kernel runs.
    let opts = Options {
        checks: false,
        ..Options::default()
    };
    run(
        &m,
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut o)],
        &opts,
    )
    .unwrap();
}

fn wave_kernel(op: WaveOp, arg2: Option<u32>, s: Scalar) -> VerifiedModule {
    let mut k = K::new("w");
    let out = k.param("out", buf(s, true));
    let lane = k.lane();
    let v = k.cast(s, lane);
    let mut args = vec![v];
    if let Some(a) = arg2 {
        let a = k.u(a);
        args.push(a);
    }
    let r = k.wave(op, args);
    let g = k.gid();
    k.store(Base::Param(out), g, r);
    k.module()
}

fn wave_run(m: &VerifiedModule, n: u32, width: u32) -> Result<Vec<u32>, InterpError> {
    let mut o = Buffer::uninit(4 * n as usize);
    let opts = Options {
        wave_width: Some(width),
        ..Options::default()
    };
    run(m, Geometry::linear(1, n), &mut [Arg::Buffer(&mut o)], &opts)?;
    Ok(u32s(&o))
}

#[test]
fn wave_verbs_at_several_widths() {
    for w in [1u32, 4, 32, 64] {
        let n = 64;
        let m = wave_kernel(WaveOp::Reduce(ReduceOp::Sum), None, Scalar::U32);
        let r = wave_run(&m, n, w).unwrap();
        let want: Vec<u32> = (0..n).map(|_| (0..w).sum()).collect();
        assert_eq!(r, want, "reduce at width {w}");
        let m = wave_kernel(WaveOp::InclusiveScan(ReduceOp::Sum), None, Scalar::U32);
        let r = wave_run(&m, n, w).unwrap();
        let want: Vec<u32> = (0..n).map(|i| (0..=i % w).sum()).collect();
        assert_eq!(r, want, "scan at width {w}");
        let m = wave_kernel(WaveOp::ExclusiveScan(ReduceOp::Sum), None, Scalar::U32);
        let r = wave_run(&m, n, w).unwrap();
        let want: Vec<u32> = (0..n).map(|i| (0..i % w).sum()).collect();
        assert_eq!(r, want, "exclusive scan at width {w}");
        let m = wave_kernel(WaveOp::ShuffleDown, Some(1), Scalar::U32);
        let r = wave_run(&m, n, w).unwrap();
        let want: Vec<u32> = (0..n)
            .map(|i| if i % w + 1 < w { i % w + 1 } else { i % w })
            .collect();
        assert_eq!(r, want, "shuffle_down at width {w}");
        let m = wave_kernel(WaveOp::Rotate, Some(1), Scalar::U32);
        let r = wave_run(&m, n, w).unwrap();
        let want: Vec<u32> = (0..n).map(|i| (i % w + 1) % w).collect();
        assert_eq!(r, want, "rotate at width {w}");
    }
}

#[test]
fn wave_verbs_see_only_active_lanes() {
    // if lane_id < 3 { out[gid] = wave_reduce_sum(1) } else { out[gid] = 100 }
    let mut k = K::new("act");
    let out = k.param("out", buf(Scalar::U32, true));
    let (lane, three) = (k.lane(), k.u(3));
    let c = k.bin(BinaryOp::Lt, lane, three);
    k.if_(
        c,
        |k| {
            let one = k.u(1);
            let r = k.wave(WaveOp::Reduce(ReduceOp::Sum), vec![one]);
            let g = k.gid();
            k.store(Base::Param(out), g, r);
        },
        |k| {
            let one = k.u(2);
            let r = k.wave(WaveOp::Reduce(ReduceOp::Sum), vec![one]);
            let g = k.gid();
            k.store(Base::Param(out), g, r);
        },
    );
    let m = k.module();
    let r = wave_run(&m, 8, 4).unwrap();
    assert_eq!(r, vec![3, 3, 3, 2, 3, 3, 3, 2]);
}

#[test]
fn loop_reconvergence() {
    // for j in 0..lane { } ; out[gid] = wave_ballot(true): all lanes reconverge after a loop of
    // different trip counts.
    let mut k = K::new("recon");
    let out = k.param("out", buf(Scalar::U32, true));
    let j = k.local("j", Type::U32);
    let (z, lane) = (k.u(0), k.lane());
    k.for_(j, z, lane, |k| {
        let t = k.e(Expr::Literal(Literal::Bool(true)));
        let b = k.wave(WaveOp::Ballot, vec![t]);
        let _ = b;
        k.stmt(StmtKind::Expr(b));
    });
    let t = k.e(Expr::Literal(Literal::Bool(true)));
    let b = k.wave(WaveOp::Ballot, vec![t]);
    let b32 = k.cast(Scalar::U32, b);
    let g = k.gid();
    k.store(Base::Param(out), g, b32);
    let m = k.module();
    let r = wave_run(&m, 8, 8).unwrap();
    assert_eq!(r, vec![0xff; 8]);
}

#[test]
fn shuffle_from_inactive_lane_is_ub() {
    let mut k = K::new("sh");
    let out = k.param("out", buf(Scalar::U32, true));
    let (lane, two) = (k.lane(), k.u(2));
    let c = k.bin(BinaryOp::Lt, lane, two);
    k.if_(
        c,
        |k| {
            let v = k.lane();
            let d = k.u(1);
            let r = k.wave(WaveOp::ShuffleDown, vec![v, d]);
            let g = k.gid();
            k.store(Base::Param(out), g, r);
        },
        |_| {},
    );
    let m = k.module();
    let u = ub_of(wave_run(&m, 4, 4).map(|_| Report {
        steps: 0,
        work_items: 0,
        workgroups: 0,
        wave_width: 0,
        printed: Vec::new(),
        assert_failed: None,
    }));
    assert_eq!(u.kind, UbKind::OutOfBounds, "{u}");
    assert_eq!(u.item.local, [1, 0, 0]);
}

#[test]
fn div_by_zero_and_wrapping() {
    let mut k = K::new("dz");
    let out = k.param("out", buf(Scalar::I32, true));
    let g = k.gid();
    let gi = k.cast(Scalar::I32, g);
    let mx = k.i(i32::MAX);
    let s = k.bin(BinaryOp::Add, mx, gi);
    let g2 = k.gid();
    k.store(Base::Param(out), g2, s);
    let (one, g3) = (k.i(1), k.gid());
    let g3i = k.cast(Scalar::I32, g3);
    let d = k.bin(BinaryOp::Div, one, g3i);
    let g4 = k.gid();
    k.store(Base::Param(out), g4, d);
    let m = k.module();
    let mut o = Buffer::uninit(8);
    let u = ub_of(run(
        &m,
        Geometry::linear(1, 2),
        &mut [Arg::Buffer(&mut o)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::DivByZero);
    assert_eq!(o.to_values::<i32>()[0], i32::MAX);
}

#[test]
fn cross_group_write_race() {
    // Every work-item writes out[0].
    let mut k = K::new("race");
    let out = k.param("out", buf(Scalar::U32, true));
    let (z, g) = (k.u(0), k.gid());
    k.store(Base::Param(out), z, g);
    let m = k.module();
    let mut o = Buffer::uninit(4);
    let u = ub_of(run(
        &m,
        Geometry::linear(2, 1),
        &mut [Arg::Buffer(&mut o)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::DataRace);
    assert_eq!(u.item.group, [1, 0, 0]);
    // One work-item alone: fine.
    run(
        &m,
        Geometry::linear(1, 1),
        &mut [Arg::Buffer(&mut o)],
        &Options::default(),
    )
    .unwrap();
}

#[test]
fn step_limit() {
    let mut k = K::new("spin");
    let t = k.e(Expr::Literal(Literal::Bool(true)));
    let body = Vec::new();
    k.stmt(StmtKind::Loop {
        label: None,
        kind: LoopKind::While(t),
        body,
    });
    let m = k.module();
    let opts = Options {
        max_steps: Some(1000),
        ..Options::default()
    };
    assert!(matches!(
        run(&m, Geometry::linear(1, 1), &mut [], &opts),
        Err(InterpError::StepLimit { .. })
    ));
}

/// A rough speed probe (run with `--release --ignored --nocapture`); the real figures come
/// from `benches/interp.rs`.
#[test]
#[ignore]
fn speed_probe() {
    let m = saxpy();
    let n = 1u32 << 20;
    let mut y = Buffer::from_values(&vec![1.0f32; n as usize]);
    let mut x = Buffer::from_values(&vec![2.0f32; n as usize]);
    for checks in [true, false] {
        let mut args = [
            Arg::Buffer(&mut y),
            Arg::Buffer(&mut x),
            Arg::Scalar(Literal::float(2.0, Scalar::F32)),
            Arg::Scalar(Literal::int(n as i128, Scalar::U32)),
        ];
        let opts = Options {
            checks,
            ..Options::default()
        };
        let t = std::time::Instant::now();
        let r = run(&m, Geometry::linear(n / 256, 256), &mut args, &opts).unwrap();
        let s = t.elapsed().as_secs_f64();
        eprintln!(
            "saxpy 1M checks={checks}: {s:.3} s, {:.1} M steps/s, {:.1} M work-items/s",
            r.steps as f64 / s / 1e6,
            r.work_items as f64 / s / 1e6
        );
    }
    let m = reduction(false);
    let mut inp = Buffer::from_values(&vec![1u32; 1 << 18]);
    let mut out = Buffer::uninit(4 << 10);
    let t = std::time::Instant::now();
    let r = run(
        &m,
        Geometry::linear(1 << 10, 256),
        &mut [Arg::Buffer(&mut inp), Arg::Buffer(&mut out)],
        &Options::default(),
    )
    .unwrap();
    let s = t.elapsed().as_secs_f64();
    eprintln!(
        "reduce 256K: {s:.3} s, {:.1} M steps/s, {:.1} M work-items/s",
        r.steps as f64 / s / 1e6,
        r.work_items as f64 / s / 1e6
    );
}
