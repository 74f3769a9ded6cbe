//! The verifier, rule by rule: each test builds a module that breaks one rule (with the
//! builder, at a known span) and checks the code and the location of the diagnostic. Also:
//! modules that pass, template instantiation, and that all problems are collected in source
//! order.

use xpu::ir::builder::{FunctionBuilder, ModuleBuilder, ParamRef};
use xpu::ir::verify::codes;
use xpu::ir::{
    Access, AtomicOp, BinaryOp, ConstBinOp, ConstExpr, Dim, ElemType, Expr, FunctionKind, Handle,
    Len, MatrixRole, MemoryOrder, Module, Occupancy, Place, ReduceOp, Scalar, Span, StmtKind, Type,
    Unlowered, WaveOp,
};

/// The `(code, line, col)` of every diagnostic, in order; empty when the module verifies.
fn problems(m: Module) -> Vec<(&'static str, u32, u32)> {
    match m.verify() {
        Ok(_) => vec![],
        Err(d) => {
            d.0.iter()
                .map(|d| (d.code, d.span.line, d.span.col))
                .collect()
        }
    }
}

/// A module with one kernel built by `build`.
fn kernel(build: impl FnOnce(&mut FunctionBuilder)) -> Module {
    let mut mb = ModuleBuilder::new();
    mb.kernel("k", build);
    mb.finish()
}

/// Asserts that `m` has exactly one problem, `code` at `line:col`.
fn assert_one(m: Module, code: &str, line: u32, col: u32) {
    assert_eq!(problems(m), vec![(code, line, col)]);
}

fn buf(f: &mut FunctionBuilder, name: &str, s: Scalar, rw: bool) -> ParamRef {
    let access = if rw { Access::ReadWrite } else { Access::Read };
    f.buffer(name, s, access)
}

fn saxpy(mb: &mut ModuleBuilder) {
    mb.kernel("saxpy", |f| {
        let y = buf(f, "y", Scalar::F32, true);
        let x = buf(f, "x", Scalar::F32, false);
        let a = f.param("a", Type::F32);
        let n = f.param("n", Type::U32);
        let gid = f.global_id(Dim::X);
        let i = f.let_("i", Type::U32, gid);
        let (iv, nv) = (f.get(i), f.param_value(n));
        let c = f.lt(iv, nv);
        f.if_then(c, |f| {
            let av = f.param_value(a);
            let iv = f.get(i);
            let xi = f.index(x, iv);
            let ax = f.mul(av, xi);
            let iv = f.get(i);
            let yi = f.index(y, iv);
            let s = f.add(ax, yi);
            let iv = f.get(i);
            f.store(y, iv, s);
        });
    });
}

/// A workgroup sum: shared memory, a barrier, a tree loop, a wave reduction, an atomic.
fn reduction(mb: &mut ModuleBuilder) {
    mb.kernel("reduce", |f| {
        let out = buf(f, "out", Scalar::U32, true);
        let x = buf(f, "x", Scalar::U32, false);
        let tile = f.shared("tile", ElemType::scalar(Scalar::U32), Some(Len::Fixed(256)));
        let lid = f.local_id(Dim::X);
        let l = f.let_("l", Type::U32, lid);
        let (li, gi) = (f.get(l), f.global_id(Dim::X));
        let xi = f.index(x, gi);
        f.store(tile, li, xi);
        f.barrier();
        let (s0, s1) = (f.u32(128), f.u32(0));
        let stride = f.let_("s", Type::U32, s0);
        let (sv, zero) = (f.get(stride), s1);
        let more = f.gt(sv, zero);
        f.while_(Some("tree"), more, |f| {
            let (lv, sv) = (f.get(l), f.get(stride));
            let c = f.lt(lv, sv);
            f.if_then(c, |f| {
                let li = f.get(l);
                let a = f.index(tile, li);
                let (li, sv) = (f.get(l), f.get(stride));
                let j = f.add(li, sv);
                let b = f.index(tile, j);
                let sum = f.add(a, b);
                let li = f.get(l);
                f.store(tile, li, sum);
            });
            f.barrier();
            let (sv, one) = (f.get(stride), f.u32(1));
            let half = f.shr(sv, one);
            f.assign(stride, half);
        });
        let (lv, zero) = (f.get(l), f.u32(0));
        let first = f.eq(lv, zero);
        f.if_then(first, |f| {
            let z = f.u32(0);
            let t = f.index(tile, z);
            let w = f.wave_reduce(ReduceOp::Sum, t);
            let z = f.u32(0);
            let old = f.atomic(AtomicOp::Add, out, z, w);
            f.eval(old);
        });
    });
}

#[test]
fn saxpy_and_reduction_verify() {
    let mut mb = ModuleBuilder::new();
    saxpy(&mut mb);
    reduction(&mut mb);
    let v = mb.finish().verify().expect("verifies");
    let names: Vec<_> = v.kernels().map(|(_, f)| f.name.as_str()).collect();
    assert_eq!(names, ["saxpy", "reduce"]);
    let k = v.kernel("reduce").unwrap();
    // Every expression has a type; only void calls would be None.
    assert!(v.expr_types(k).iter().all(Option::is_some));
}

/// The text of `reduce_shared` as the parser reads it (and the printer writes it).
const REDUCE_SHARED: &str = "\
kernel reduce_shared(partial: buf<u32, rw>, total: buf<u32, rw>, x: buf<u32>, n: u32) {
    shared s: [u32; 256];
    let l: u32 = local_id.x;
    let i: u32 = global_id.x;
    let v: u32 = 0;
    if i < n {
        v = x[i];
    }
    s[l] = v;
    barrier();
    let stride: u32 = group_size.x / 2;
    while stride > 0 {
        if l < stride {
            s[l] += s[l + stride];
        }
        barrier();
        stride /= 2;
    }
    if l == 0 {
        partial[group_id.x] = s[0];
        atomic_add(total[0], s[0]);
    }
}
";

const SAXPY: &str = "\
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}
";

/// `reduce_shared` built in Rust, node for node what the parser makes of [`REDUCE_SHARED`].
fn reduce_shared(mb: &mut ModuleBuilder) {
    mb.kernel("reduce_shared", |f| {
        let partial = buf(f, "partial", Scalar::U32, true);
        let total = buf(f, "total", Scalar::U32, true);
        let x = buf(f, "x", Scalar::U32, false);
        let n = f.param("n", Type::U32);
        let s = f.shared("s", ElemType::scalar(Scalar::U32), Some(Len::Fixed(256)));
        let lid = f.local_id(Dim::X);
        let l = f.let_("l", Type::U32, lid);
        let gid = f.global_id(Dim::X);
        let i = f.let_("i", Type::U32, gid);
        let zero = f.u32(0);
        let v = f.let_("v", Type::U32, zero);
        let (iv, nv) = (f.get(i), f.param_value(n));
        let c = f.lt(iv, nv);
        f.if_then(c, |f| {
            let iv = f.get(i);
            let xi = f.index(x, iv);
            f.assign(v, xi);
        });
        let (lv, vv) = (f.get(l), f.get(v));
        f.store(s, lv, vv);
        f.barrier();
        let (gs, two) = (f.group_size(Dim::X), f.u32(2));
        let half = f.div(gs, two);
        let stride = f.let_("stride", Type::U32, half);
        let (sv, zero) = (f.get(stride), f.u32(0));
        let more = f.gt(sv, zero);
        f.while_(None, more, |f| {
            let (lv, sv) = (f.get(l), f.get(stride));
            let c = f.lt(lv, sv);
            f.if_then(c, |f| {
                let lv = f.get(l);
                let a = f.index(s, lv);
                let (lv, sv) = (f.get(l), f.get(stride));
                let j = f.add(lv, sv);
                let b = f.index(s, j);
                let sum = f.add(a, b);
                let lv = f.get(l);
                f.store(s, lv, sum);
            });
            f.barrier();
            let (sv, two) = (f.get(stride), f.u32(2));
            let h = f.div(sv, two);
            f.assign(stride, h);
        });
        let (lv, zero) = (f.get(l), f.u32(0));
        let first = f.eq(lv, zero);
        f.if_then(first, |f| {
            let g = f.group_id(Dim::X);
            let z = f.u32(0);
            let s0 = f.index(s, z);
            f.store(partial, g, s0);
            let (z, z2) = (f.u32(0), f.u32(0));
            let s0 = f.index(s, z2);
            let old = f.atomic(AtomicOp::Add, total, z, s0);
            f.eval(old);
        });
    });
}

#[test]
fn built_and_parsed_kernels_print_identically() {
    for (text, build) in [
        (SAXPY, saxpy as fn(&mut ModuleBuilder)),
        (REDUCE_SHARED, reduce_shared),
    ] {
        let mut mb = ModuleBuilder::new();
        build(&mut mb);
        let built = mb.finish();
        let parsed = xpu::ir::parse(text).expect("parses");
        assert_eq!(xpu::ir::print(&built), xpu::ir::print(&parsed));
        assert_eq!(xpu::ir::print(&built), text);
        // Both verify, to the same concrete kernels.
        let (b, p) = (built.verify().unwrap(), parsed.verify().unwrap());
        assert_eq!(b.kernels().count(), p.kernels().count());
    }
}

#[test]
fn all_problems_collected_in_source_order() {
    let m = kernel(|f| {
        f.at(3, 5);
        let x = f.i32(1);
        let y = f.f32(2.0);
        let s = f.add(x, y);
        f.let_("s", Type::I32, s);
        f.at(2, 5);
        f.break_(None);
        f.at(4, 1);
        let c = f.u32(1);
        f.if_then(c, |_| {});
    });
    assert_eq!(
        problems(m),
        vec![
            (codes::OUTSIDE_LOOP, 2, 5),
            (codes::OPERAND_TYPE, 3, 5),
            (codes::COND_TYPE, 4, 1)
        ]
    );
}

// ----- expression trees -----

#[test]
fn v001_dangling_handles() {
    let m = kernel(|f| {
        f.at(2, 3);
        let ghost = f.expr(Expr::Local(Handle::from_index(7)));
        f.eval(ghost);
    });
    assert_one(m, codes::HANDLE, 2, 3);
    let m = kernel(|f| {
        f.at(1, 1);
        f.stmt(StmtKind::Expr(Handle::from_index(42)));
    });
    assert_one(m, codes::HANDLE, 1, 1);
}

#[test]
fn v002_expression_used_twice() {
    let m = kernel(|f| {
        let l = f.let_uninit("x", Type::U32);
        f.at(5, 9);
        let v = f.u32(1);
        let id = v.id();
        f.assign(l, v);
        f.at(6, 1);
        f.stmt(StmtKind::Assign {
            place: Place::Local(l),
            value: id,
        });
    });
    assert_one(m, codes::EXPR_REUSED, 5, 9);
}

#[test]
fn v003_expression_unused() {
    let m = kernel(|f| {
        f.at(2, 2);
        let _ = f.u32(1);
    });
    assert_one(m, codes::EXPR_UNUSED, 2, 2);
}

// ----- expression types -----

#[test]
fn v010_operand_types() {
    let m = kernel(|f| {
        let (x, y) = (f.i32(1), f.f32(2.0));
        f.at(3, 7);
        let s = f.add(x, y);
        f.at(3, 1);
        f.let_("s", Type::I32, s);
    });
    assert_one(m, codes::OPERAND_TYPE, 3, 7);
    // `&&` takes bool; math `sqrt` takes floats.
    let m = kernel(|f| {
        let (x, y) = (f.u32(1), f.u32(2));
        f.at(1, 1);
        let a = f.and(x, y);
        f.let_("a", Type::U32, a);
        let z = f.u32(4);
        f.at(2, 1);
        let r = f.math(xpu::ir::MathFn::Sqrt, vec![z]);
        f.let_("r", Type::U32, r);
    });
    assert_eq!(
        problems(m),
        vec![(codes::OPERAND_TYPE, 1, 1), (codes::OPERAND_TYPE, 2, 1)]
    );
}

#[test]
fn v011_void_call_as_value() {
    let mut mb = ModuleBuilder::new();
    let h = mb.device("nothing", |_| {});
    mb.kernel("k", |f| {
        let c = f.call(h, vec![]);
        f.at(4, 11);
        let n = f.neg(c);
        f.let_("x", Type::I32, n);
    });
    assert_one(mb.finish(), codes::VOID_VALUE, 4, 11);
}

#[test]
fn v012_vector_lanes() {
    let m = kernel(|f| {
        let x = f.f32(1.0);
        f.at(2, 4);
        let v = f.splat(5, x);
        f.eval(v);
    });
    assert_one(m, codes::VECTOR_LANES, 2, 4);
    let m = kernel(|f| {
        f.at(1, 1);
        f.let_uninit("v", Type::Vector(Scalar::F32, 6));
    });
    assert_one(m, codes::VECTOR_LANES, 1, 1);
}

#[test]
fn v013_lane_index() {
    let m = kernel(|f| {
        let x = f.f32(1.0);
        let v = f.splat(2, x);
        f.at(2, 6);
        let e = f.extract(v, 3);
        f.let_("e", Type::F32, e);
    });
    assert_one(m, codes::LANE_INDEX, 2, 6);
    let m = kernel(|f| {
        let v = f.let_uninit("v", Type::Vector(Scalar::F32, 3));
        let x = f.f32(1.0);
        f.at(3, 1);
        f.assign_lane(v, 3, x);
    });
    assert_one(m, codes::LANE_INDEX, 3, 1);
}

#[test]
fn v014_index() {
    let m = kernel(|f| {
        let x = buf(f, "x", Scalar::F32, false);
        let i = f.i32(0);
        f.at(2, 9);
        let e = f.index(x, i);
        f.let_("e", Type::F32, e);
    });
    assert_one(m, codes::INDEX, 2, 9);
    // A scalar parameter is not indexable (and parameters are not places).
    let m = kernel(|f| {
        let a = f.param("a", Type::F32);
        let (i, v) = (f.u32(0), f.f32(1.0));
        f.at(3, 1);
        f.store(a, i, v);
    });
    assert_one(m, codes::INDEX, 3, 1);
}

#[test]
fn v015_call_arguments() {
    let mut mb = ModuleBuilder::new();
    let h = mb.device("sq", |f| {
        let x = f.param("x", Type::F32);
        f.returns(Type::F32);
        let (a, b) = (f.param_value(x), f.param_value(x));
        let m = f.mul(a, b);
        f.return_(Some(m));
    });
    mb.kernel("k", |f| {
        let a = f.u32(2);
        f.at(7, 13);
        let c = f.call(h, vec![a]);
        f.let_("r", Type::F32, c);
    });
    assert_one(mb.finish(), codes::CALL_ARGS, 7, 13);
}

#[test]
fn v016_dispatch() {
    let mut mb = ModuleBuilder::new();
    let relu = mb.device("relu", |f| {
        let x = f.param("x", Type::F32);
        f.returns(Type::F32);
        let v = f.param_value(x);
        f.return_(Some(v));
    });
    let set = mb.tag_set("Act", &[relu]);
    mb.kernel("k", |f| {
        f.at(2, 2);
        let t = f.tag(set, 3);
        f.let_("t", Type::Tag(set), t);
        let t = f.tag(set, 0);
        let x = f.u32(1);
        f.at(3, 3);
        let d = f.dispatch(t, vec![x]);
        f.let_("y", Type::F32, d);
    });
    assert_eq!(
        problems(mb.finish()),
        vec![(codes::DISPATCH, 2, 2), (codes::DISPATCH, 3, 3)]
    );
}

#[test]
fn v017_atomic_types_and_targets() {
    let m = kernel(|f| {
        let b = buf(f, "b", Scalar::F32, true);
        let (i, v) = (f.u32(0), f.f32(1.0));
        f.at(4, 5);
        let a = f.atomic(AtomicOp::Xor, b, i, v);
        f.eval(a);
        // f32 is allowed for atomic_add, atomic_min and atomic_max (issue #23).
        let (i, v) = (f.u32(0), f.f32(1.0));
        let a = f.atomic(AtomicOp::Max, b, i, v);
        f.eval(a);
        let (i, v) = (f.u32(0), f.f32(1.0));
        let a = f.atomic(AtomicOp::Add, b, i, v);
        f.eval(a);
        let arr = f.let_uninit(
            "arr",
            Type::Array {
                elem: ElemType::scalar(Scalar::U32),
                len: Len::Fixed(4),
            },
        );
        let (i, v) = (f.u32(0), f.u32(1));
        f.at(5, 5);
        let a = f.atomic(AtomicOp::Add, arr, i, v);
        f.eval(a);
    });
    assert_eq!(
        problems(m),
        vec![(codes::ATOMIC, 4, 5), (codes::ATOMIC, 5, 5)]
    );
}

#[test]
fn v018_atomic_compare_only_for_compare_exchange() {
    let m = kernel(|f| {
        let b = buf(f, "b", Scalar::U32, true);
        let (i, c, v) = (f.u32(0), f.u32(1), f.u32(2));
        f.at(2, 1);
        let a = f.compare_exchange(MemoryOrder::SeqCst, b, i, c, v);
        f.eval(a);
        let (i, c, v) = (f.u32(0), f.u32(1), f.u32(2));
        f.at(3, 1);
        let a = f.expr(Expr::Atomic {
            op: AtomicOp::Add,
            order: MemoryOrder::Relaxed,
            place: Place::Element {
                base: b.into(),
                index: i.into_id(),
            },
            value: v.into_id(),
            compare: Some(c.into_id()),
        });
        f.eval(a);
    });
    assert_one(m, codes::ATOMIC_COMPARE, 3, 1);
}

#[test]
fn v019_wave_arguments() {
    let m = kernel(|f| {
        let x = f.u32(1);
        f.at(2, 8);
        let b = f.wave(WaveOp::Ballot, vec![x]);
        f.let_("b", Type::U64, b);
        let (x, l) = (f.f32(1.0), f.i32(0));
        f.at(3, 8);
        let s = f.wave(WaveOp::Shuffle, vec![x, l]);
        f.let_("s", Type::F32, s);
    });
    assert_eq!(
        problems(m),
        vec![(codes::WAVE_ARGS, 2, 8), (codes::WAVE_ARGS, 3, 8)]
    );
}

#[test]
fn v020_vload_vstore_shape() {
    let m = kernel(|f| {
        let x = buf(f, "x", Scalar::F32, true);
        let i = f.u32(0);
        f.at(1, 5);
        let v = f.vload(x, i, 5, None);
        f.eval(v);
        let y = f.param(
            "y",
            Type::Buffer {
                elem: ElemType::vector(Scalar::F32, 4),
                access: Access::Read,
            },
        );
        let i = f.u32(0);
        f.at(2, 5);
        let v = f.vload(y, i, 4, None);
        f.eval(v);
        let (i, s) = (f.u32(0), f.f32(1.0));
        f.at(3, 5);
        f.vstore(x, i, s, None);
    });
    assert_eq!(
        problems(m),
        vec![
            (codes::VLOAD, 1, 5),
            (codes::VLOAD, 2, 5),
            (codes::VLOAD, 3, 5)
        ]
    );
}

#[test]
fn v021_align() {
    let m = kernel(|f| {
        let x = buf(f, "x", Scalar::F32, true);
        let i = f.u32(0);
        f.at(1, 1);
        let v = f.vload(x, i, 4, Some(12));
        f.eval(v);
        let i = f.u32(0);
        let v = f.vload(x, i, 4, Some(16)); // 4 × 4 bytes: fine
        f.eval(v);
        let (i, z) = (f.u32(0), f.f32(0.0));
        let v = f.splat(2, z);
        f.at(2, 1);
        f.vstore(x, i, v, Some(16)); // 8-byte access
    });
    assert_eq!(
        problems(m),
        vec![(codes::ALIGN, 1, 1), (codes::ALIGN, 2, 1)]
    );
}

#[test]
fn v022_matrix_shapes() {
    let frag = |role, rows, cols| Type::Matrix {
        role,
        scalar: Scalar::F16,
        rows,
        cols,
    };
    let m = kernel(|f| {
        let z = f.float(0.0, Scalar::F16);
        let a = f.matrix_fill(MatrixRole::A, Scalar::F16, 16, 8, z);
        let z = f.float(0.0, Scalar::F16);
        let b = f.matrix_fill(MatrixRole::B, Scalar::F16, 16, 16, z);
        let z = f.float(0.0, Scalar::F16);
        let c = f.matrix_fill(MatrixRole::Acc, Scalar::F16, 16, 16, z);
        f.at(6, 2);
        let d = f.matrix_mma(a, b, c);
        f.let_("d", frag(MatrixRole::Acc, 16, 16), d);
    });
    assert_one(m, codes::MATRIX, 6, 2);
}

#[test]
fn v023_len_of_a_scalar() {
    let m = kernel(|f| {
        let n = f.param("n", Type::U32);
        f.at(1, 9);
        let l = f.len(n);
        f.let_("l", Type::U32, l);
    });
    assert_one(m, codes::LEN, 1, 9);
}

// ----- declarations and statements -----

#[test]
fn v030_declared_types() {
    let m = kernel(|f| {
        f.at(2, 5);
        f.let_uninit(
            "b",
            Type::Buffer {
                elem: ElemType::scalar(Scalar::F32),
                access: Access::Read,
            },
        );
        f.at(3, 5);
        f.let_uninit(
            "a",
            Type::Array {
                elem: ElemType::scalar(Scalar::F32),
                len: Len::Fixed(0),
            },
        );
    });
    assert_eq!(
        problems(m),
        vec![(codes::DECL_TYPE, 2, 5), (codes::DECL_TYPE, 3, 5)]
    );
}

#[test]
fn v031_assignment_types() {
    let m = kernel(|f| {
        let v = f.u32(1);
        f.at(1, 1);
        let x = f.let_("x", Type::F32, v);
        let v = f.i32(1);
        f.at(2, 1);
        f.assign(x, v);
    });
    assert_eq!(
        problems(m),
        vec![(codes::ASSIGN_TYPE, 1, 1), (codes::ASSIGN_TYPE, 2, 1)]
    );
}

#[test]
fn v032_condition_types() {
    let m = kernel(|f| {
        let c = f.u32(1);
        f.at(1, 1);
        f.if_then(c, |_| {});
        let c = f.f32(1.0);
        f.at(2, 1);
        f.while_(None, c, |f| f.break_(None));
    });
    assert_eq!(
        problems(m),
        vec![(codes::COND_TYPE, 1, 1), (codes::COND_TYPE, 2, 1)]
    );
}

#[test]
fn v033_returns() {
    let mut mb = ModuleBuilder::new();
    mb.device("f", |f| {
        f.returns(Type::F32);
        let v = f.i32(1);
        f.at(2, 5);
        f.return_(Some(v));
    });
    mb.device("g", |f| {
        f.span(4, 1);
        f.returns(Type::F32);
        let c = f.bool_(true);
        f.if_then(c, |f| {
            let v = f.f32(1.0);
            f.return_(Some(v));
        });
    });
    mb.kernel("k", |f| {
        let v = f.u32(1);
        f.at(8, 5);
        f.return_(Some(v));
    });
    assert_eq!(
        problems(mb.finish()),
        vec![
            (codes::RETURN, 2, 5),
            (codes::RETURN, 4, 1),
            (codes::RETURN, 8, 5)
        ]
    );
}

#[test]
fn v034_for_loops() {
    let m = kernel(|f| {
        let (s, e) = (f.f32(0.0), f.f32(4.0));
        f.at(1, 1);
        f.for_(None, "x", Type::F32, s, e, None, |_, _| {});
        let (s, e) = (f.u32(0), f.i32(4));
        f.at(2, 1);
        f.for_(None, "i", Type::U32, s, e, None, |_, _| {});
        f.at(3, 1);
        let (s, e, st) = (f.u32(0), f.u32(4), f.u32(0));
        f.for_(None, "j", Type::U32, s, e, Some(st), |_, _| {});
    });
    assert_eq!(
        problems(m),
        vec![
            (codes::FOR_LOOP, 1, 1),
            (codes::FOR_LOOP, 2, 1),
            (codes::FOR_LOOP, 3, 1)
        ]
    );
}

#[test]
fn v035_read_only_buffers() {
    let m = kernel(|f| {
        let x = buf(f, "x", Scalar::U32, false);
        let (i, v) = (f.u32(0), f.u32(1));
        f.at(2, 1);
        f.store(x, i, v);
        let (i, v) = (f.u32(0), f.u32(1));
        f.at(3, 1);
        let a = f.atomic(AtomicOp::Add, x, i, v);
        f.eval(a);
    });
    assert_eq!(
        problems(m),
        vec![(codes::READ_ONLY, 2, 1), (codes::READ_ONLY, 3, 1)]
    );
}

#[test]
fn v036_labels() {
    let m = kernel(|f| {
        f.loop_(Some("outer"), |f| {
            f.at(2, 5);
            f.loop_(Some("outer"), |f| f.break_(Some("outer")));
            f.at(3, 5);
            f.continue_(Some("nope"));
        });
    });
    assert_eq!(
        problems(m),
        vec![(codes::LABEL, 2, 5), (codes::LABEL, 3, 5)]
    );
}

#[test]
fn v037_break_outside_loop() {
    let m = kernel(|f| {
        f.at(1, 1);
        f.break_(None);
        f.at(2, 1);
        f.continue_(None);
    });
    assert_eq!(
        problems(m),
        vec![(codes::OUTSIDE_LOOP, 1, 1), (codes::OUTSIDE_LOOP, 2, 1)]
    );
}

#[test]
fn v038_local_scope() {
    let m = kernel(|f| {
        let c = f.bool_(true);
        let mut inner = None;
        f.if_then(c, |f| {
            let v = f.u32(1);
            inner = Some(f.let_("t", Type::U32, v));
        });
        let inner = inner.unwrap();
        f.at(4, 13);
        let t = f.get(inner);
        f.let_("u", Type::U32, t);
        // Used before its `let`.
        let later = f.local("later", Type::U32);
        f.at(5, 13);
        let v = f.get(later);
        f.let_("w", Type::U32, v);
        let z = f.u32(0);
        f.let_local(later, Some(z));
    });
    assert_eq!(
        problems(m),
        vec![(codes::LOCAL_SCOPE, 4, 13), (codes::LOCAL_SCOPE, 5, 13)]
    );
}

#[test]
fn v039_matrix_store() {
    let m = kernel(|f| {
        let out = buf(f, "out", Scalar::F32, true);
        let (v, o, s) = (f.f32(1.0), f.u32(0), f.u32(16));
        f.at(2, 3);
        f.matrix_store(v, out, o, s);
    });
    assert_one(m, codes::MATRIX_STORE, 2, 3);
}

// ----- functions and the module -----

#[test]
fn v050_duplicate_names() {
    let mut mb = ModuleBuilder::new();
    mb.kernel("k", |_| {});
    mb.kernel("k", |f| f.span(9, 1));
    assert_one(mb.finish(), codes::DUPLICATE_NAME, 9, 1);
}

#[test]
fn v051_recursion() {
    let mut mb = ModuleBuilder::new();
    let f = mb.declare("f", FunctionKind::Device);
    let g = mb.declare("g", FunctionKind::Device);
    mb.define(f, |b| {
        b.span(1, 1);
        let c = b.call(g, vec![]);
        b.eval(c);
    });
    mb.define(g, |b| {
        b.span(5, 1);
        let c = b.call(f, vec![]);
        b.eval(c);
    });
    let m = mb.finish();
    let d = m.clone().verify().unwrap_err();
    assert!(d.0[0].message.contains("f → g → f"), "{}", d.0[0].message);
    assert_eq!(
        problems(m),
        vec![(codes::RECURSION, 1, 1), (codes::RECURSION, 5, 1)]
    );
}

#[test]
fn v052_kernels_are_not_callable() {
    let mut mb = ModuleBuilder::new();
    let k = mb.kernel("k", |_| {});
    mb.kernel("main", |f| {
        f.at(3, 3);
        let c = f.call(k, vec![]);
        f.eval(c);
    });
    assert_one(mb.finish(), codes::KERNEL_CALL, 3, 3);
}

#[test]
fn v053_kernels_return_nothing() {
    let m = kernel(|f| {
        f.span(1, 1);
        f.returns(Type::U32);
    });
    assert_one(m, codes::KERNEL_RETURN, 1, 1);
}

#[test]
fn v054_shared_outside_kernel() {
    let mut mb = ModuleBuilder::new();
    mb.device("h", |f| {
        f.at(2, 5);
        f.shared("t", ElemType::scalar(Scalar::F32), Some(Len::Fixed(4)));
    });
    assert_one(mb.finish(), codes::SHARED_OUTSIDE_KERNEL, 2, 5);
}

#[test]
fn v055_one_dynamic_shared_array() {
    let m = kernel(|f| {
        f.at(1, 5);
        f.shared("a", ElemType::scalar(Scalar::F32), None);
        f.at(2, 5);
        f.shared("b", ElemType::scalar(Scalar::F32), None);
    });
    assert_one(m, codes::DYNAMIC_SHARED, 2, 5);
}

#[test]
fn v056_tag_set_signatures() {
    let mut mb = ModuleBuilder::new();
    let a = mb.device("a", |f| {
        f.param("x", Type::F32);
    });
    let b = mb.device("b", |f| {
        f.param("x", Type::U32);
    });
    mb.tag_set("S", &[a, b]);
    let mut m = mb.finish();
    m.tag_sets[Handle::from_index(0)].span = Span::new(1, 1);
    assert_one(m, codes::TAG_SET, 1, 1);
}

#[test]
fn v057_attributes_only_on_kernels() {
    let mut mb = ModuleBuilder::new();
    mb.device("h", |f| {
        f.at(1, 1);
        f.wave_attr(32);
    });
    assert_one(mb.finish(), codes::ATTR_NOT_KERNEL, 1, 1);
}

#[test]
fn v058_wave_width() {
    let m = kernel(|f| {
        f.at(1, 1);
        f.wave_attr(48);
    });
    assert_one(m, codes::WAVE_ATTR, 1, 1);
    let m = kernel(|f| f.wave_attr(64));
    assert_eq!(problems(m), vec![]);
}

#[test]
fn v059_occupancy_threads_and_waves() {
    let m = kernel(|f| {
        let t = f.const_expr(ConstExpr::Lit(256));
        let w = f.const_expr(ConstExpr::Lit(8));
        f.attrs_mut().occupancy = Some(Occupancy {
            max_threads: Some(t),
            max_waves: Some(w),
            span: Span::new(1, 1),
            ..Occupancy::default()
        });
    });
    assert_one(m, codes::OCCUPANCY, 1, 1);
}

#[test]
fn v060_unlowered_backend() {
    let m = kernel(|f| {
        f.attrs_mut().unlowered.push(Unlowered {
            backend: "metal".into(),
            tracked: "PLAN-1".into(),
            may_lower: false,
            hold: false,
            host_wave_below: None,
            span: Span::new(2, 1),
        });
    });
    assert_one(m, codes::UNLOWERED_BACKEND, 2, 1);
}

// ----- templates -----

/// `kernel T<TM, WM>(out: buf<u32, rw>) requires TM % WM == 0` with a private array of
/// `TM / WM` elements and `@occupancy(max_threads = TM * 4)`; instances as given.
fn template(instances: &[(&[u32], u32)], max: Option<u32>) -> Module {
    let mut mb = ModuleBuilder::new();
    mb.kernel("T", |f| {
        f.template(&["TM", "WM"]);
        let out = buf(f, "out", Scalar::U32, true);
        let tm = f.const_expr(ConstExpr::Param(0));
        let wm = f.const_expr(ConstExpr::Param(1));
        let rem = f.const_expr(ConstExpr::Binary(ConstBinOp::Rem, tm, wm));
        let zero = f.const_expr(ConstExpr::Lit(0));
        let req = f.const_expr(ConstExpr::Binary(ConstBinOp::Eq, rem, zero));
        let div = f.const_expr(ConstExpr::Binary(ConstBinOp::Div, tm, wm));
        let four = f.const_expr(ConstExpr::Lit(4));
        let threads = f.const_expr(ConstExpr::Binary(ConstBinOp::Mul, tm, four));
        f.attrs_mut().occupancy = Some(Occupancy {
            max_threads: Some(threads),
            ..Occupancy::default()
        });
        let t = f.template_mut().unwrap();
        t.requires.push((req, Span::new(2, 14)));
        t.max = max;
        for (args, line) in instances {
            t.instantiate.push((args.to_vec(), Span::new(*line, 17)));
        }
        f.let_uninit(
            "acc",
            Type::Array {
                elem: ElemType::scalar(Scalar::U32),
                len: Len::Const(div),
            },
        );
        let (i, v) = (f.u32(0), f.template_param(0));
        f.store(out, i, v);
    });
    mb.finish()
}

#[test]
fn template_instances_are_concrete_kernels() {
    let v = template(&[(&[64, 16], 3), (&[32, 32], 3)], None)
        .verify()
        .unwrap();
    let names: Vec<_> = v.kernels().map(|(_, f)| f.name.clone()).collect();
    assert_eq!(names, ["T<64,16>", "T<32,32>"]);
    let t = v.module().function("T").unwrap();
    assert!(v.is_template(t) && v.kernel("T").is_none());
    let k = v.kernel("T<64,16>").unwrap();
    assert_eq!(v.instance_of(k), Some((t, &[64u32, 16][..])));
    let f = v.function(k);
    let acc = f.locals.iter().next().unwrap().1;
    assert_eq!(
        acc.ty,
        Type::Array {
            elem: ElemType::scalar(Scalar::U32),
            len: Len::Fixed(4)
        }
    );
    assert!(f
        .exprs
        .iter()
        .all(|(_, e)| !matches!(e, Expr::TemplateParam(_))));
    let threads = f.attrs.occupancy.as_ref().unwrap().max_threads.unwrap();
    assert_eq!(v.const_value(k, threads), Some(256));
}

#[test]
fn template_requirement_names_member_and_clause() {
    let m = template(&[(&[64, 16], 3), (&[48, 32], 4)], None);
    let d = m.clone().verify().unwrap_err();
    assert_eq!(d.0.len(), 1);
    assert_eq!(d.0[0].code, "CAJETA_ERROR_TEMPLATE_REQUIREMENT");
    assert_eq!(d.0[0].span, Span::new(4, 17));
    assert_eq!(
        d.0[0].message,
        "`T<48,32>` fails requires clause `TM % WM == 0`"
    );
}

#[test]
fn v070_template_argument_count() {
    assert_one(template(&[(&[64], 5)], None), codes::TEMPLATE_ARGS, 5, 17);
}

#[test]
fn v071_template_cap() {
    let lists: Vec<[u32; 2]> = (1..=9).map(|i| [16 * i, 16]).collect();
    let inst: Vec<(&[u32], u32)> = lists
        .iter()
        .enumerate()
        .map(|(i, a)| (&a[..], 10 + i as u32))
        .collect();
    assert_one(template(&inst, None), codes::TEMPLATE_CAP, 18, 17);
    assert_eq!(problems(template(&inst, Some(9))), vec![]);
}

#[test]
fn v072_duplicate_instance() {
    assert_one(
        template(&[(&[64, 16], 3), (&[64, 16], 4)], None),
        codes::DUPLICATE_INSTANCE,
        4,
        17,
    );
}

#[test]
fn v073_const_eval_errors_are_diagnostics() {
    // TM % WM with WM = 0 divides by zero in the requires clause.
    let m = template(&[(&[64, 0], 6)], None);
    let d = m.verify().unwrap_err();
    assert_eq!(d.0[0].code, codes::CONST_EVAL);
    assert_eq!(d.0[0].span, Span::new(6, 17));
    assert!(
        d.0[0].message.contains("divides by zero"),
        "{}",
        d.0[0].message
    );
    // TM * 4 overflows u32 in @occupancy.
    let m = template(&[(&[u32::MAX, 1], 7)], None);
    let d = m.verify().unwrap_err();
    assert_eq!(d.0[0].code, codes::CONST_EVAL);
    assert!(d.0[0].message.contains("overflows"), "{}", d.0[0].message);
}

#[test]
fn v074_template_parameter_outside_template() {
    let m = kernel(|f| {
        f.at(2, 9);
        let p = f.template_param(0);
        f.let_("x", Type::U32, p);
    });
    assert_one(m, codes::NOT_TEMPLATE, 2, 9);
}

#[test]
fn concrete_const_lengths_fold() {
    let m = kernel(|f| {
        let a = f.const_expr(ConstExpr::Lit(3));
        let b = f.const_expr(ConstExpr::Lit(4));
        let mul = f.const_expr(ConstExpr::Binary(ConstBinOp::Mul, a, b));
        f.let_uninit(
            "arr",
            Type::Array {
                elem: ElemType::scalar(Scalar::F32),
                len: Len::Const(mul),
            },
        );
    });
    let v = m.verify().unwrap();
    let k = v.kernel("k").unwrap();
    let (_, l) = v.function(k).locals.iter().next().unwrap();
    assert!(matches!(
        l.ty,
        Type::Array {
            len: Len::Fixed(12),
            ..
        }
    ));
}

#[test]
fn garbage_never_panics() {
    // Operands pointing everywhere, including at themselves and past the arena.
    let m = kernel(|f| {
        for i in 0..40u32 {
            let e = match i % 5 {
                0 => Expr::Binary {
                    op: BinaryOp::Add,
                    lhs: Handle::from_index((i * 7 % 50) as usize),
                    rhs: Handle::from_index(i as usize),
                },
                1 => Expr::Index {
                    base: xpu::ir::Base::Shared(Handle::from_index(3)),
                    index: Handle::from_index(i as usize + 1),
                },
                2 => Expr::Wave {
                    op: WaveOp::Elect,
                    args: vec![Handle::from_index(1000)],
                    width: Some(i),
                },
                3 => Expr::Atomic {
                    op: AtomicOp::CompareExchange,
                    order: MemoryOrder::AcqRel,
                    place: Place::Lane {
                        local: Handle::from_index(9),
                        lane: 200,
                    },
                    value: Handle::from_index(0),
                    compare: None,
                },
                _ => Expr::Len(77),
            };
            let v = f.expr(e);
            f.eval(v);
        }
        f.stmt(StmtKind::Let {
            local: Handle::from_index(5),
            init: Some(Handle::from_index(3)),
        });
        f.break_(Some("x"));
    });
    let d = m.verify().unwrap_err();
    assert!(d.0.len() > 10);
}
/// `(source, code, line, col)`: each source breaks one rule; the first diagnostic is that rule's, there.
const TEXT_CASES: &[(&str, &str, u32, u32)] = &[
    (
        "kernel T<A>() requires A > 1 instantiate <1> { }",
        "CAJETA_ERROR_TEMPLATE_REQUIREMENT",
        1,
        42,
    ),
    (
        "kernel k() {
    let x: i32 = 1;
    let y: f32 = 2.0;
    let z: i32 = x + y;
}",
        "XPU-V010",
        4,
        18,
    ),
    (
        "device fn f() { }
kernel k() {
    let x: i32 = -f();
}",
        "XPU-V011",
        3,
        18,
    ),
    // Issue #23 item 3: tile widths.
    (
        "kernel k(a: u32) {
    let x: u32 = wave_reduce_sum(a, width = 12);
}",
        "XPU-V120",
        2,
        18,
    ),
    (
        "kernel k(a: u32) {
    let x: u32 = wave_shuffle(a, 0, width = 128);
}",
        "XPU-V120",
        2,
        18,
    ),
    (
        "@wave(8)
kernel k(a: u32) {
    let x: u32 = wave_shuffle_down(a, 1, width = 16);
}",
        "XPU-V121",
        3,
        18,
    ),
    // Issue #23: bit operations, atomic_load / atomic_store.
    (
        "kernel k() {
    let x: f32 = popcount(1.0);
}",
        "XPU-V080",
        2,
        18,
    ),
    (
        "kernel k(a: u32, b: i32) {
    let x: u32 = mul_hi(a, b);
}",
        "XPU-V080",
        2,
        18,
    ),
    (
        "kernel k(a: u32) {
    let x: u32 = rotate_left(a, 1u8);
}",
        "XPU-V080",
        2,
        18,
    ),
    (
        "kernel k(a: u32) {
    let x: u32 = bitfield_insert(a, a, 1);
}",
        "XPU-V080",
        2,
        18,
    ),
    (
        "kernel k(v: vec4<u32>) {
    let x: vec4<u32> = clz(v);
}",
        "XPU-V080",
        2,
        24,
    ),
    (
        "kernel k(b: buf<u32, rw>) {
    let x: u32 = atomic_load(b[0], release);
}",
        "XPU-V081",
        2,
        18,
    ),
    (
        "kernel k(b: buf<u32, rw>) {
    atomic_store(b[0], 1, acq_rel);
}",
        "XPU-V081",
        2,
        5,
    ),
    (
        "kernel k(b: buf<u32>) {
    atomic_store(b[0], 1);
}",
        "XPU-V035",
        2,
        5,
    ),
    (
        "kernel k(b: buf<u8, rw>) {
    let x: u8 = atomic_load(b[0]);
}",
        "XPU-V017",
        2,
        17,
    ),
    (
        "kernel k(b: buf<f64, rw>) {
    atomic_min(b[0], 1.0);
}",
        "XPU-V017",
        2,
        5,
    ),
    (
        "device fn f() { }
kernel k(b: buf<u32, rw>) {
    let x: u32 = atomic_store(b[0], 1u32) + 1u32;
}",
        "XPU-V011",
        3,
        18,
    ),
    (
        "kernel k() {
    let v: vec2<f32> = vec2<f32>(1.0);
    let e: f32 = v.w;
}",
        "XPU-V013",
        3,
        18,
    ),
    (
        "kernel k(x: buf<f32>) {
    let i: i32 = 0;
    let e: f32 = x[i];
}",
        "XPU-V014",
        3,
        18,
    ),
    (
        "device fn sq(x: f32) -> f32 { return x * x; }
kernel k() {
    let r: f32 = sq(2u32);
}",
        "XPU-V015",
        3,
        18,
    ),
    (
        "device fn a(x: f32) -> f32 { return x; }
tagset S = [a];
kernel k() {
    let y: f32 = dispatch(S::a, 1u32);
}",
        "XPU-V016",
        4,
        18,
    ),
    (
        "kernel k(b: buf<f32, rw>) {
    atomic_and(b[0], 1.0);
}",
        "XPU-V017",
        2,
        5,
    ),
    (
        "kernel k() {
    let b: u64 = wave_ballot(1u32);
}",
        "XPU-V019",
        2,
        18,
    ),
    (
        "kernel k(x: buf<f32>) {
    let v: vec4<f32> = vload<5>(x, 0);
}",
        "XPU-V020",
        2,
        24,
    ),
    (
        "kernel k(x: buf<f32>) {
    let v: vec4<f32> = vload<4>(x, 0, align = 12);
}",
        "XPU-V021",
        2,
        24,
    ),
    (
        "kernel k() {
    let d: matrix<acc, f16, 16, 16> = matrix_mma(matrix_fill<a, f16, 16, 8>(0.0), matrix_fill<b, f16, 16, 16>(0.0), matrix_fill<acc, f16, 16, 16>(0.0));
}",
        "XPU-V022",
        2,
        39,
    ),
    (
        "kernel k(n: u32) {
    let l: u32 = len(n);
}",
        "XPU-V023",
        2,
        18,
    ),
    (
        "kernel k() {
    let x: f32 = 1u32;
}",
        "XPU-V031",
        2,
        5,
    ),
    (
        "kernel k(n: u32) {
    if n { }
}",
        "XPU-V032",
        2,
        5,
    ),
    (
        "device fn f() -> f32 {
    return 1i32;
}",
        "XPU-V033",
        2,
        5,
    ),
    (
        "kernel k() {
    for x: f32 in 0.0..4.0 { }
}",
        "XPU-V034",
        2,
        5,
    ),
    (
        "kernel k(x: buf<u32>) {
    x[0] = 1;
}",
        "XPU-V035",
        2,
        5,
    ),
    (
        "kernel k() {
    'a: loop {
        'a: loop { break; }
        break;
    }
}",
        "XPU-V036",
        3,
        9,
    ),
    (
        "kernel k() {
    break;
}",
        "XPU-V037",
        2,
        5,
    ),
    (
        "kernel k(out: buf<f32, rw>) {
    matrix_store(1.0, out, 0, 16);
}",
        "XPU-V039",
        2,
        5,
    ),
    (
        "device fn f() { g(); }
device fn g() { f(); }",
        "XPU-V051",
        1,
        1,
    ),
    (
        "kernel k() { }
kernel m() { k(); }",
        "XPU-V052",
        2,
        14,
    ),
    (
        "kernel k() -> u32 { return 1; }",
        "XPU-V053",
        1,
        1,
    ),
    (
        "device fn h() {
    shared t: [f32; 4];
}",
        "XPU-V054",
        2,
        12,
    ),
    (
        "kernel k() {
    shared a: [f32];
    shared b: [f32];
}",
        "XPU-V055",
        3,
        12,
    ),
    (
        "device fn a(x: f32) { }
device fn b(x: u32) { }
tagset S = [a, b];",
        "XPU-V056",
        3,
        1,
    ),
    (
        "@wave(32)
device fn h() { }",
        "XPU-V057",
        1,
        1,
    ),
    (
        "@wave(48)
kernel k() { }",
        "XPU-V058",
        1,
        1,
    ),
    (
        "@occupancy(max_threads = 256, max_waves = 8)
kernel k() { }",
        "XPU-V059",
        1,
        1,
    ),
    (
        "@unlowered(backend = \"metal\", tracked = \"P-1\")
kernel k() { }",
        "XPU-V060",
        1,
        1,
    ),
    (
        "kernel T<A, B>() instantiate <1> { }",
        "XPU-V070",
        1,
        30,
    ),
    (
        "kernel T<A>() instantiate <1>, <2>, <3>, <4>, <5>, <6>, <7>, <8>, <9> { }",
        "XPU-V071",
        1,
        67,
    ),
    (
        "kernel T<A>() instantiate <1>, <1> { }",
        "XPU-V072",
        1,
        32,
    ),
    (
        "kernel T<A>() instantiate <0> {
    let a: [f32; 4 / A];
}",
        "XPU-V073",
        1,
        27,
    ),
];

#[test]
fn text_sources_report_each_rule_at_its_node() {
    for (src, code, line, col) in TEXT_CASES {
        let m = xpu::ir::parse(src).unwrap_or_else(|d| panic!("{src}\n{d}"));
        let d = m.verify().expect_err(src);
        let first = &d.0[0];
        assert_eq!(
            (first.code, first.span.line, first.span.col),
            (*code, *line, *col),
            "{src}\n{d}"
        );
    }
}

/// Runs `xpu check` on `args`; returns the exit code and stderr.
fn xpu_check(args: &[&std::path::Path]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
        .arg("check")
        .args(args)
        .output()
        .expect("xpu runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn xpu_check_exit_codes_and_format() {
    let dir = std::env::temp_dir().join(format!("xpu-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let good = dir.join("good.xk");
    std::fs::write(&good, SAXPY).unwrap();
    let bad = dir.join("sub/bad.xk");
    std::fs::write(&bad, "kernel k(n: u32) {\n    if n { }\n}\n").unwrap();
    std::fs::write(dir.join("sub/notes.txt"), "not a kernel file").unwrap();

    assert_eq!(xpu_check(&[&good]), (0, String::new()));
    let (code, err) = xpu_check(&[&dir]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim_end(),
        format!(
            "{}:2:5: error[XPU-V032]: an if condition must be bool, not u32",
            bad.display()
        )
    );
    // A parse error is reported the same way.
    std::fs::write(&bad, "kernel k( {").unwrap();
    let (code, err) = xpu_check(&[&bad]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("{}:1:11: error[XPU-P", bad.display())),
        "{err}"
    );
    // A missing file is an I/O error, which wins over problems.
    let (code, err) = xpu_check(&[&bad, &dir.join("missing.xk")]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.xk: error:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every kernel file in the tree verifies, and mangled copies of each never panic the
/// parser or the verifier.
#[test]
fn kernel_files_verify_and_mangled_ones_never_panic() {
    let mut files = Vec::new();
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "xk") {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    walk(&root.join("tests/filetests"), &mut files);
    walk(&root.join("examples"), &mut files);
    files.sort();
    assert!(!files.is_empty());
    // splitmix64: deterministic mutations.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut verified = 0;
    for path in &files {
        let src = std::fs::read_to_string(path).unwrap();
        // Files under ub/ or meant to be refused may fail to verify on purpose.
        if xpu::ir::parse(&src).and_then(|m| m.verify()).is_ok() {
            verified += 1;
        }
        let bytes = src.as_bytes();
        for _ in 0..16 {
            let mut m = bytes.to_vec();
            let at = (next() % (m.len() as u64 + 1)) as usize;
            match next() % 4 {
                0 => {
                    let end = (at + (next() % 12) as usize).min(m.len());
                    m.drain(at..end);
                }
                1 => {
                    let from = (next() % (m.len() as u64 + 1)) as usize;
                    let end = (from + (next() % 24) as usize).min(m.len());
                    let piece = m[from..end].to_vec();
                    m.splice(at..at, piece);
                }
                2 if at < m.len() => {
                    m[at] = b"(){};,.<>[]:=+-*0123456789abcxyz'"[(next() % 33) as usize]
                }
                _ => m.truncate(at),
            }
            if let Ok(text) = std::str::from_utf8(&m) {
                if let Ok(module) = xpu::ir::parse(text) {
                    let _ = module.verify();
                }
            }
        }
    }
    assert!(
        verified * 10 >= files.len() * 9,
        "{verified} of {} verify",
        files.len()
    );
}

/// Every code a `const` in `src/` defines (`"XPU-…"`) is defined once, but for the
/// contract's `XPU-REF01`/`XPU-REF02` (the interpreter's and the launch's names for them),
/// and appears in `docs/`.
#[test]
fn every_error_code_is_unique_and_documented() {
    fn rs_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rs_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    rs_files(std::path::Path::new("src"), &mut files);
    let mut defined: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in &files {
        for (n, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let Some(rest) = line
                .trim()
                .strip_prefix("pub const ")
                .or(line.trim().strip_prefix("const "))
            else {
                continue;
            };
            let Some((_, value)) = rest.split_once(": &str = \"") else {
                continue;
            };
            let code = value.trim_end_matches("\";");
            if code.starts_with("XPU-") {
                defined.entry(code.to_string()).or_default().push(format!(
                    "{}:{}",
                    f.display(),
                    n + 1
                ));
            }
        }
    }
    assert!(defined.len() > 90, "found only {} codes", defined.len());
    let docs: String = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    let mut problems = Vec::new();
    for (code, sites) in &defined {
        let shared = matches!(code.as_str(), "XPU-REF01" | "XPU-REF02");
        if sites.len() > 1 && !(shared && sites.len() == 2) {
            problems.push(format!(
                "{code} is defined {} times: {}",
                sites.len(),
                sites.join(", ")
            ));
        }
        if !docs.contains(&format!("`{code}`")) && !docs.contains(code.as_str()) {
            problems.push(format!("{code} ({}) is not documented in docs/", sites[0]));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Parses and verifies `src`, giving the codes of its problems.
fn text_codes(src: &str) -> Vec<&'static str> {
    let m = xpu::ir::parse(src).unwrap();
    problems(m).into_iter().map(|(c, _, _)| c).collect()
}

#[test]
fn v110_v111_v112_print_and_assert() {
    // V110: a module built in Rust with a format whose `{}` count differs, or malformed.
    let src = "kernel k(n: u32) {\n    print(\"{}\", n);\n}\n";
    for (format, want) in [("{} {}", true), ("a {", true), ("{}", false)] {
        let mut m = xpu::ir::parse(src).unwrap();
        let h = m.function("k").unwrap();
        if let StmtKind::Print { format: f, .. } = &mut m.functions[h].body[0].kind {
            *f = format.to_string();
        }
        let got = problems(m);
        assert_eq!(
            got.iter().any(|p| p.0 == codes::PRINT_FORMAT),
            want,
            "{format}: {got:?}"
        );
    }
    // V111: a vector value; nine values.
    assert_eq!(
        text_codes("kernel k(v: vec4<f32>) {\n    print(\"{}\", v);\n}\n"),
        vec![codes::PRINT_VALUE]
    );
    assert_eq!(
        text_codes(
            "kernel k(n: u32) {\n    print(\"{}{}{}{}{}{}{}{}{}\", n, n, n, n, n, n, n, n, n);\n}\n"
        ),
        vec![codes::PRINT_VALUE]
    );
    // V112: a condition that is not bool.
    assert_eq!(
        text_codes("kernel k(n: u32) {\n    assert(n, \"m\");\n}\n"),
        vec![codes::ASSERT_COND]
    );
    assert!(text_codes(
        "kernel k(n: u32) {\n    assert(n > 0, \"m\");\n    print(\"{}\", n);\n}\n"
    )
    .is_empty());
}

/// Issue 23 item 6: bare scopes, counting-down and C-style `for` loops, `if` expressions.
mod flow {
    use xpu::ir::builder::ModuleBuilder;
    use xpu::ir::{BinaryOp, Literal, Scalar, Type};

    fn first(src: &str) -> (&'static str, u32, u32) {
        let d = match xpu::ir::parse(src) {
            Ok(m) => m.verify().expect_err(src),
            Err(d) => d,
        };
        let p = &d.0[0];
        (p.code, p.span.line, p.span.col)
    }

    #[test]
    fn each_rule_at_its_node() {
        let cases: &[(&str, (&str, u32, u32))] = &[
            (
                "kernel k(n: u32, o: buf<f32, rw>) {\n    o[0] = if n { 1.0 } else { 2.0 };\n}",
                ("XPU-V090", 2, 12),
            ),
            (
                "kernel k(o: buf<f32, rw>) {\n    o[0] = if true { 1.0 } else { 2u32 };\n}",
                ("XPU-V090", 2, 12),
            ),
            (
                "kernel k() {\n    for b: bool = true; b; b = false { }\n}",
                ("XPU-V091", 2, 5),
            ),
            (
                "kernel k() {\n    for i: u32 = 0; i; i += 1 { }\n}",
                ("XPU-V091", 2, 5),
            ),
            (
                "kernel k() {\n    for i: u32 = 0.5; i < 4; i += 1 { }\n}",
                ("XPU-V091", 2, 5),
            ),
            (
                "kernel k() {\n    for i: i32 in 0..4 step 0 { }\n}",
                ("XPU-V034", 2, 29),
            ),
            (
                "kernel k() {\n    let j: u32 = 0;\n    for i: u32 = 0; i < 4; j += 1 { }\n}",
                ("XPU-P030", 3, 28),
            ),
            (
                "kernel k(o: buf<f32, rw>) {\n    let a: [[f32; 4]; 3];\n    o[0] = a[1];\n}",
                ("XPU-P031", 3, 12),
            ),
            (
                "kernel T<A>()\n    instantiate <2>\n{\n    let a: [[f32; A]; 2];\n}",
                ("XPU-P031", 4, 13),
            ),
            // A `let` in a bare scope ends at its `}`.
            (
                "kernel k(o: buf<u32, rw>) {\n    {\n        let x: u32 = 1;\n    }\n    o[0] = x;\n}",
                ("XPU-P004", 5, 12),
            ),
            // The C-style loop's variable ends with the loop.
            (
                "kernel k(o: buf<u32, rw>) {\n    for i: u32 = 0; i < 4; i += 1 { }\n    o[0] = i;\n}",
                ("XPU-P004", 3, 12),
            ),
        ];
        for (src, want) in cases {
            assert_eq!(first(src), *want, "{src}");
        }
    }

    #[test]
    fn counting_down_and_c_style_loops_verify() {
        for src in [
            "kernel k() {\n    for i: i32 in 4..0 step -1 { }\n}",
            "kernel k() {\n    for i: u32 = 8; i > 0; i >>= 1 { }\n}",
            "kernel k() {\n    for i = 8u32; i > 0; i = i / 2 { }\n}",
            // `init` is evaluated before the variable is in scope: `i` is the outer one.
            "kernel k() {\n    let i: u32 = 3;\n    for i: u32 = i * 2; i > 0; i -= 1 { }\n}",
            "device fn f(a: i32) -> i32 {\n    {\n        return a;\n    }\n}",
        ] {
            let m = xpu::ir::parse(src).unwrap_or_else(|d| panic!("{src}\n{d}"));
            m.verify().unwrap_or_else(|d| panic!("{src}\n{d}"));
        }
    }

    #[test]
    fn built_forms_print_as_parsed() {
        let mut mb = ModuleBuilder::new();
        mb.kernel("k", |f| {
            let init = f.lit(Literal::int(8, Scalar::U32));
            f.for_cond(
                None,
                "i",
                Type::U32,
                init,
                |b, i| {
                    let v = b.get(i);
                    let z = b.lit(Literal::int(0, Scalar::U32));
                    let c = b.binary(BinaryOp::Gt, v, z);
                    let v = b.get(i);
                    let one = b.lit(Literal::int(1, Scalar::U32));
                    let u = b.binary(BinaryOp::Shr, v, one);
                    (c, u)
                },
                |b, _| {
                    b.scope(|b| {
                        let t = b.lit(Literal::Bool(true));
                        let x = b.lit(Literal::int(1, Scalar::U32));
                        let y = b.lit(Literal::int(2, Scalar::U32));
                        let e = b.if_else(t, x, y);
                        b.let_("x", Type::U32, e);
                    });
                },
            );
        });
        let m = mb.finish();
        let text = xpu::ir::print(&m);
        assert!(
            text.contains("for i: u32 = 8; i > 0; i >>= 1 {\n        {\n            let x: u32 = if true { 1 } else { 2 };\n        }\n    }"),
            "{text}"
        );
        let again = xpu::ir::parse(&text).unwrap_or_else(|d| panic!("{text}\n{d}"));
        assert_eq!(xpu::ir::print(&again), text);
        again.verify().unwrap_or_else(|d| panic!("{text}\n{d}"));
    }

    #[test]
    fn shapes_that_do_not_fit_their_array() {
        use xpu::ir::{Base, ElemType, Len};
        let mut mb = ModuleBuilder::new();
        mb.kernel("k", |f| {
            let a = f.local(
                "a",
                Type::Array {
                    elem: ElemType::scalar(Scalar::F32),
                    len: Len::Fixed(15),
                },
            );
            f.let_local(a, None);
            f.array_dims(Base::Local(a), &[4, 4]);
            let t = f.shared("t", ElemType::scalar(Scalar::U32), Some(Len::Fixed(8)));
            f.array_dims(Base::Shared(t), &[8]);
            f.array_dims(Base::Shared(t), &[2, 4]);
            let d = f.shared("d", ElemType::scalar(Scalar::U32), None);
            f.array_dims(Base::Shared(d), &[2, 4]);
        });
        let d = mb.finish().verify().expect_err("bad shapes");
        let codes: Vec<&str> = d.0.iter().map(|p| p.code).collect();
        assert_eq!(codes, ["XPU-V092"; 4], "{d}");
    }

    #[test]
    fn built_shapes_print_as_parsed() {
        use xpu::ir::{Base, ElemType, Len};
        let mut mb = ModuleBuilder::new();
        mb.kernel("k", |f| {
            let t = f.shared("t", ElemType::scalar(Scalar::U32), Some(Len::Fixed(12)));
            f.array_dims(Base::Shared(t), &[3, 4]);
            let i = f.lit(Literal::int(2, Scalar::U32));
            let j = f.lit(Literal::int(1, Scalar::U32));
            let k = f.index_nd(&[3, 4], vec![i, j]);
            let v = f.lit(Literal::int(7, Scalar::U32));
            f.store(Base::Shared(t), k, v);
        });
        let m = mb.finish();
        let text = xpu::ir::print(&m);
        assert!(text.contains("shared t: [[u32; 4]; 3];"), "{text}");
        assert!(text.contains("t[2][1] = 7;"), "{text}");
        let again = xpu::ir::parse(&text).unwrap_or_else(|d| panic!("{text}\n{d}"));
        assert_eq!(xpu::ir::print(&again), text);
        again.verify().unwrap_or_else(|d| panic!("{text}\n{d}"));
    }
}

/// Helpers that take memory by reference (issue 23 item 4): each refusal with its code at the
/// argument or call, and what passes.
mod memhelpers {
    fn first(src: &str) -> (&'static str, u32, u32) {
        let d = match xpu::ir::parse(src) {
            Ok(m) => m.verify().expect_err(src),
            Err(d) => d,
        };
        let p = &d.0[0];
        (p.code, p.span.line, p.span.col)
    }

    const W: &str = "device fn w(p: buf<f32, rw>, i: u32) {\n    p[i] = 1.0;\n}\n";
    // A literal index of a memory parameter is an element, not a lane.
    const S: &str = "device fn s(t: shared [f32; 4]) -> f32 {\n    return t[0];\n}\n";

    #[test]
    fn each_refusal_at_its_node() {
        let cases: Vec<(String, (&str, u32, u32))> = vec![
            // A read-only buffer where the parameter is `rw`.
            (
                format!("{W}kernel k(a: buf<f32>) {{\n    w(a, 0);\n}}"),
                ("XPU-V131", 5, 5),
            ),
            // Another element type.
            (
                format!("{W}kernel k(a: buf<u32, rw>) {{\n    w(a, 0);\n}}"),
                ("XPU-V130", 5, 5),
            ),
            // A shared array for a buffer.
            (
                format!("{W}kernel k() {{\n    shared t: [f32; 4];\n    w(t, 0);\n}}"),
                ("XPU-V130", 6, 5),
            ),
            // A shared array of another length, and a launch-sized one for a sized parameter.
            (
                format!("{S}kernel k(o: buf<f32, rw>) {{\n    shared t: [f32; 8];\n    let x: f32 = s(t);\n}}"),
                ("XPU-V130", 6, 18),
            ),
            (
                format!("{S}kernel k(o: buf<f32, rw>) {{\n    shared t: [f32];\n    let x: f32 = s(t);\n}}"),
                ("XPU-V130", 6, 18),
            ),
            // A private array for a shared one.
            (
                format!("{S}kernel k(o: buf<f32, rw>) {{\n    let t: [f32; 4];\n    let x: f32 = s(t);\n}}"),
                ("XPU-V130", 6, 18),
            ),
            // Not the name of memory.
            (
                format!("{W}kernel k(a: buf<f32, rw>) {{\n    w(a[0], 0);\n}}"),
                ("XPU-P045", 5, 7),
            ),
            // A call inside an expression.
            (
                format!("{S}kernel k(o: buf<f32, rw>) {{\n    shared t: [f32; 4];\n    o[0] = s(t) + 1.0;\n}}"),
                ("XPU-V132", 6, 12),
            ),
            (
                format!("{S}kernel k(o: buf<f32, rw>) {{\n    shared t: [f32; 4];\n    if s(t) > 0.0 {{ }}\n}}"),
                ("XPU-V132", 6, 8),
            ),
            // A tag set member that takes memory.
            (
                format!("tagset T = [w];\n{W}kernel k() {{ }}"),
                ("XPU-V133", 2, 13),
            ),
            // Atomics on a private array through a parameter.
            (
                "device fn a(p: [u32; 4]) {\n    atomic_add(p[0], 1);\n}\nkernel k() { }".to_string(),
                ("XPU-V017", 2, 5),
            ),
            // `shared` before something that is not a one-dimensional array.
            (
                "device fn a(p: shared f32) { }\nkernel k() { }".to_string(),
                ("XPU-P046", 1, 16),
            ),
            // A shared array by reference anywhere but a helper parameter.
            (
                "kernel k(p: shared [f32; 4]) { }".to_string(),
                ("XPU-V030", 1, 10),
            ),
        ];
        for (src, want) in &cases {
            assert_eq!(first(src), *want, "{src}");
        }
    }

    /// A Rust-built module with a reference outside a call argument is refused (`XPU-V134`).
    #[test]
    fn a_reference_outside_a_call_is_refused() {
        use xpu::ir::{Base, Expr, StmtKind};
        let mut m = xpu::ir::parse("kernel k(o: buf<f32, rw>) {\n    o[0] = 1.0;\n}").unwrap();
        let (h, _) = m.functions.iter().next().unwrap();
        let f = &mut m.functions[h];
        let r = f.add_expr(Expr::Ref(Base::Param(0)), xpu::ir::Span::new(2, 5));
        f.body.push(xpu::ir::Stmt {
            kind: StmtKind::Expr(r),
            span: xpu::ir::Span::new(2, 5),
        });
        let d = m.verify().expect_err("a bare reference");
        assert!(d.0.iter().any(|p| p.code == "XPU-V134"), "{d:?}");
    }

    /// What verifies: memory helpers are inlined, so no concrete function calls one, and the
    /// kernel's facts see the helper's accesses (the `align = 16` of a `vload` in a helper
    /// raises the base alignment of the kernel buffer passed to it).
    #[test]
    fn calls_are_inlined_and_facts_see_through_them() {
        let src = format!(
            "{W}device fn r(x: buf<f32>) -> vec4<f32> {{\n    return vload<4>(x, 0, align = 16);\n}}\n\
             kernel k(o: buf<f32, rw>, x: buf<f32, rw>) {{\n    w(o, 0);\n    let v: vec4<f32> = r(x);\n    o[1] = v.x;\n}}"
        );
        let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let (k, f) = vm.kernels().next().unwrap();
        assert!(f
            .exprs
            .iter()
            .all(|(_, e)| !matches!(e, xpu::ir::Expr::Call { .. })));
        assert!(f
            .exprs
            .iter()
            .all(|(_, e)| !matches!(e, xpu::ir::Expr::Ref(_))));
        assert_eq!(vm.info(k).base_align, vec![4, 16]);
    }
}

/// Issue 23 item 8: the constant space (`buf<E, const>`) and the shared-tile layouts
/// (`swizzled`, `block_padded`): parsing, printing, the verifier's refusals, the mapping.
mod spaces_and_layouts {
    use xpu::ir::layout::{self, Layout};
    use xpu::ir::{parse, print};

    /// The codes of the diagnostics `src` gets from parsing and verification.
    fn codes(src: &str) -> Vec<&'static str> {
        match parse(src) {
            Err(d) => d.0.iter().map(|p| p.code).collect(),
            Ok(m) => match m.verify() {
                Ok(_) => vec![],
                Err(d) => d.0.iter().map(|p| p.code).collect(),
            },
        }
    }

    const KERNEL: &str = "kernel k(o: buf<f32, rw>, c: buf<f32, const>) {\n    shared s: swizzled<[[f32; 32]; 32], 32>;\n    shared p: block_padded<[f32; 64], 8, 1>;\n    shared q: block_padded<[[u32; 4]; 4], 4, 2>;\n    let i: u32 = local_id.x;\n    s[i / 32][i % 32] = c[i];\n    p[i % 64] = c[0];\n    q[0][i % 4] = i;\n    barrier();\n    o[i] = s[i % 32][i / 32] + p[63 - i % 64] + q[i % 4][0] as f32;\n}\n";

    #[test]
    fn constant_buffers_and_layouts_print_back_and_verify() {
        let m = parse(KERNEL).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(print(&m), KERNEL);
        let vm = m.verify().unwrap_or_else(|d| panic!("{d}"));
        let (_, f) = vm.kernels().next().unwrap();
        assert_eq!(f.layouts.len(), 3);
    }

    #[test]
    fn writes_to_a_constant_buffer_are_v160() {
        for body in [
            "c[0] = 1.0;",
            "c[0] += 1.0;",
            "vstore(c, 0, vec4<f32>(1.0));",
            "atomic_add(c[0], 1.0);",
            "atomic_store(c[0], 1.0);",
        ] {
            let src = format!("kernel k(c: buf<f32, const>) {{\n    {body}\n}}\n");
            assert_eq!(codes(&src), ["XPU-V160"], "{src}");
        }
        // A plain read-only buffer keeps its own code.
        let src = "kernel k(c: buf<f32>) {\n    c[0] = 1.0;\n}\n";
        assert_ne!(codes(src), ["XPU-V160"]);
    }

    #[test]
    fn atomic_and_fragment_loads_of_a_constant_buffer_are_v161() {
        let src =
            "kernel k(o: buf<f32, rw>, c: buf<f32, const>) {\n    o[0] = atomic_load(c[0]);\n}\n";
        assert_eq!(codes(src), ["XPU-V161"]);
        // Plain reads, `vload` and `len` are constant data's reads.
        let ok = "kernel k(o: buf<f32, rw>, c: buf<f32, const>) {\n    o[0] = c[1] + vload<4>(c, 4).y + len(c) as f32;\n}\n";
        assert_eq!(codes(ok), Vec::<&str>::new());
    }

    #[test]
    fn layouts_that_do_not_fit_are_v162() {
        for decl in [
            "swizzled<[f32; 64], 4>",                 // one dimension
            "swizzled<[[f32; 24]; 8], 16>",           // 16 does not divide 24
            "swizzled<[[f32; 32]; 8], 6>",            // not a power of two
            "swizzled<[[f32; 32]; 8], 0>",            // zero
            "block_padded<[f32; 64], 0, 1>",          // empty block
            "block_padded<[f32], 8, 1>",              // launch-sized
            "block_padded<[u64; 0x1000_0000], 1, 2>", // 3 * 2^31 bytes padded
        ] {
            let src = format!(
                "kernel k(o: buf<f32, rw>) {{\n    shared t: {decl};\n    o[0] = 1.0;\n}}\n"
            );
            assert_eq!(codes(&src), ["XPU-V162"], "{src}");
        }
    }

    #[test]
    fn contiguous_accesses_to_a_laid_out_array_are_v163() {
        // (`vload`/`vstore` take buffers only, laid out or not: `XPU-V020`.)
        let src = "kernel k(o: buf<f32, rw>) {\n    shared t: block_padded<[f16; 256], 16, 1>;\n    shared u: swizzled<[[f32; 16]; 16], 16>;\n    let a: matrix<a, f16, 16, 16> = matrix_load<a, f16, 16, 16>(t, 0, 16);\n    let c: matrix<acc, f32, 16, 16> = matrix_fill<acc, f32, 16, 16>(0.0);\n    matrix_store(c, u, 0, 16);\n    o[0] = 1.0;\n}\n";
        assert_eq!(codes(src), ["XPU-V163", "XPU-V163"]);
        let plain = src
            .replace("block_padded<[f16; 256], 16, 1>", "[f16; 256]")
            .replace("swizzled<[[f32; 16]; 16], 16>", "[f32; 256]");
        assert_eq!(codes(&plain), Vec::<&str>::new());
    }

    #[test]
    fn an_index_with_effects_into_a_laid_out_array_is_v164() {
        let src = "kernel k(o: buf<f32, rw>, n: buf<u32, rw>) {\n    shared t: block_padded<[f32; 64], 8, 1>;\n    t[atomic_add(n[0], 1u32) % 64] = 1.0;\n    o[0] = t[0];\n}\n";
        assert_eq!(codes(src), ["XPU-V164"]);
        // Through a `let` it is fine.
        let ok = "kernel k(o: buf<f32, rw>, n: buf<u32, rw>) {\n    shared t: block_padded<[f32; 64], 8, 1>;\n    let j: u32 = atomic_add(n[0], 1u32) % 64;\n    t[j] = 1.0;\n    o[0] = t[0];\n}\n";
        assert_eq!(codes(ok), Vec::<&str>::new());
    }

    #[test]
    fn malformed_and_misplaced_layout_types_are_p060_and_p061() {
        for decl in [
            "swizzled<f32, 4>",
            "swizzled<[[f32; 4]; 4]>",
            "swizzled<[[f32; 4]; 4], 2, 2>",
            "swizzled<[[f32; 4]; 4], 2u32>",
            "block_padded<[f32; 8], n, 1>",
        ] {
            let src = format!(
                "kernel k(o: buf<f32, rw>) {{\n    shared t: {decl};\n    o[0] = 1.0;\n}}\n"
            );
            let c = codes(&src);
            assert!(c.contains(&"XPU-P060"), "{src}: {c:?}");
        }
        let src = "kernel k(o: buf<f32, rw>) {\n    let t: block_padded<[f32; 8], 4, 1>;\n    o[0] = 1.0;\n}\n";
        assert!(codes(src).contains(&"XPU-P061"), "{:?}", codes(src));
        let src = "kernel k(o: buf<f32, wo>) {\n    o[0] = 1.0;\n}\n";
        assert!(!codes(src).is_empty());
    }

    /// The rewrite the compiled backends lower: every access of a laid-out array at its
    /// physical index, the array at its physical length, the result still verifying.
    #[test]
    fn layouts_rewrite_to_physical_indices_and_lengths() {
        let vm = parse(KERNEL).unwrap().verify().unwrap();
        let laid = vm.with_layouts().expect("the kernel has layouts");
        let (h, f) = laid.kernels().next().unwrap();
        let lens: Vec<_> = f.shared.iter().map(|(_, d)| d.len).collect();
        use xpu::ir::Len::Fixed;
        // 32 x 32 swizzled: unchanged; 64 padded 1 per 8: 64 + 7; 16 padded 2 per 4: 16 + 6.
        assert_eq!(lens, [Some(Fixed(1024)), Some(Fixed(71)), Some(Fixed(22))]);
        // Every new expression has a type, and the text shows the mapping.
        let types = laid.expr_types(h);
        assert_eq!(types.len(), f.exprs.len());
        let text = print(laid.module());
        assert!(text.contains(" ^ "), "{text}");
        assert!(vm
            .module()
            .functions
            .iter()
            .all(|(_, f)| f.shared.len() == 3));
        // A module without layouts is not copied.
        let plain = parse("kernel k(o: buf<f32, rw>) {\n    o[0] = 1.0;\n}\n")
            .unwrap()
            .verify()
            .unwrap();
        assert!(plain.with_layouts().is_none());
    }

    #[test]
    fn the_mapping_is_a_bijection_into_the_physical_length() {
        for (layout, row, n) in [
            (Layout::Swizzled { s: 4 }, 16, 128),
            (Layout::Swizzled { s: 32 }, 32, 1024),
            (Layout::BlockPadded { block: 8, pad: 3 }, 128, 128),
            (Layout::BlockPadded { block: 3, pad: 1 }, 10, 10),
        ] {
            let len = layout::physical_len(layout, n).unwrap();
            let mut seen = vec![false; len as usize];
            for i in 0..n {
                let p = layout::physical_index(layout, row, i) as usize;
                assert!(p < len as usize, "{layout:?}: {i} -> {p} of {len}");
                assert!(!seen[p], "{layout:?}: {p} twice");
                seen[p] = true;
            }
            // An index past the end stays past the end.
            assert!(layout::physical_index(layout, row, n) >= u64::from(len));
        }
    }
}
