//! The text format (docs/text-format.md): every construct parses and prints back in
//! canonical form, literals take their types from context, diagnostics carry exact
//! `line:col`s, and (property tests) printing is a fixed point over generated modules while
//! neither the parser nor the printer panics on any input.

use proptest::prelude::*;
use xpu::filetest::spec::{ArgInit, Expect, Value};
use xpu::ir::text::literal::round_to_f16;
use xpu::ir::{
    parse, parse_file, print, print_file, Access, Arena, AtomicOp, Attributes, Base, BinaryOp,
    Block, Builtin, ConstBinOp, ConstExpr, Dim, ElemType, Expr, ExprId, FenceScope, Function,
    FunctionKind, Handle, Len, Literal, Local, LoopKind, MathFn, MatrixRole, MemoryOrder, Module,
    Occupancy, Param, Place, ReduceOp, Scalar, SharedDecl, Span, Stmt, StmtKind, TagSet,
    TemplateInfo, Type, UnaryOp, Unlowered, WaveOp,
};

/// Parses `src`, panicking with the rendered diagnostics on failure.
fn must_parse(src: &str) -> Module {
    match parse(src) {
        Ok(m) => m,
        Err(d) => panic!("parse failed:\n{}\n--- source ---\n{src}", d.render("src")),
    }
}

/// `src` is canonical: it prints back unchanged.
fn canonical(src: &str) {
    let m = must_parse(src);
    let printed = print(&m);
    assert_eq!(printed, src, "printed form differs:\n{printed}");
}

/// Print, parse, print again: the two prints agree.
fn fixed_point(m: &Module) -> Result<(), String> {
    let first = print(m);
    let reparsed = parse(&first).map_err(|d| format!("{}\n--- printed ---\n{first}", d.render("printed")))?;
    let second = print(&reparsed);
    if first != second {
        return Err(format!("not a fixed point:\n--- first ---\n{first}\n--- second ---\n{second}"));
    }
    Ok(())
}

/// The diagnostics of `src` as `line:col code` strings.
fn errors(src: &str) -> Vec<String> {
    match parse_file(src) {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(d) => d.0.iter().map(|d| format!("{} {}", d.span, d.code)).collect(),
    }
}

// ---- every construct prints back ----

#[test]
fn doc_saxpy_is_canonical_and_comments_are_dropped() {
    let src = "// saxpy: y = a * x + y\nkernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {\n    let i: u32 = global_id.x;\n    if i < n {\n        y[i] = a * x[i] + y[i];\n    }\n}\n";
    let m = must_parse(src);
    assert_eq!(print(&m), src.split_once('\n').unwrap().1);
}

#[test]
fn items_are_canonical() {
    canonical(
        "tagset Activation = [relu, gelu];

device fn relu(x: f32) -> f32 {
    return max(x, 0.0);
}

device fn gelu(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh(0.7978846 * (x + 0.044715 * x * x * x)));
}

@wave(32)
@occupancy(max_threads = 256, min_resident = 2)
@unlowered(backend = \"vulkan\", tracked = \"PLAN-12\", may_lower = true, host_wave_below = 8)
@unlowered(backend = \"cpu\", tracked = \"PLAN-\\\"7\\\"\", hold = true)
@unbounded(tracked = \"PLAN-3\")
kernel act(p: buf<f32>, out: buf<vec4<f32>, rw>, t: tag<Activation>, n: u32) {
    let i: u32 = global_id.x;
    let v: f32 = dispatch(t, p[i]);
    out[i] = vec4<f32>(v);
    out[i + 1] = vec4<f32>(dispatch(Activation::gelu, v), 1.0, 2.0, 3.0);
}

@occupancy(max_waves = TM / WM * (TN / WN))
kernel QkTile<TM, TN, WM, WN, KS>(a: buf<f32>, c: buf<f32, rw>)
    requires TM == TN && TM % WM == 0, KS == 128
    instantiate <64, 64, 32, 32, 128>, <128, 128, 32, 64, 128>
    max 8
{
    shared tile: [f32; TM * KS];
    shared dynamic: [f32];
    let k: u32 = TM * 2;
    let acc: [f32; TM / 16];
    tile[k] = a[k];
    dynamic[0] = tile[k];
    acc[0] = 1.0;
    c[k] = acc[0];
}

kernel QkTile<64,64,32,32,128>(a: buf<f32>) {
}
",
    );
}

#[test]
fn statements_are_canonical() {
    canonical(
        "kernel stmts(b: buf<u32, rw>, f: buf<f32, rw>, n: u32) {
    shared tile: [u32; 256];
    let x: u32 = 1;
    let acc: [f32; 8];
    let v: vec4<f32> = vec4<f32>(0.0);
    x = n + 1;
    x += 1;
    x -= 2;
    x *= 3;
    x /= 4;
    x %= 5;
    x &= 6;
    x |= 7;
    x ^= 8;
    x <<= 1;
    x >>= 2;
    b[x + 1] += 1;
    v.y = 2.0;
    v.w *= 2.0;
    acc[x] = f[0];
    tile[x] = b[x];
    if x < n {
        x = 0;
    } else if x == n {
        x = 1;
    } else {
        x = 2;
    }
    'outer: loop {
        while x > 0 {
            x -= 1;
            if x == 3 {
                continue 'outer;
            }
            if x == 5 {
                break 'outer;
            }
            continue;
        }
        break;
    }
    for i: u32 in 0..n {
        b[i] = i;
    }
    'rows: for j: i32 in -4..n as i32 step 4 {
        if j > 8 {
            break 'rows;
        }
    }
    barrier();
    fence(workgroup);
    fence(device);
    vstore(f, 0, v);
    vstore(f, 4, v, align = 16);
    atomic_add(b[0], 1);
    return;
}
",
    );
}

#[test]
fn expressions_are_canonical() {
    canonical(
        "device fn h(a: f32, b: u8) -> f32 {
    return a;
}

device fn nothing() {
}

kernel exprs(b: buf<u32, rw>, f: buf<f32, rw>, h16: buf<f16, rw>, m: buf<f16>, c: buf<f32, rw>, s: i64, w: buf<u64, rw>) {
    shared sh: [i32; 64];
    let i: u32 = global_id.x + local_id.y * group_id.z - group_size.x / num_groups.y % wave_width;
    let l: u32 = lane_id;
    let k: bool = i < 3 || !(i >= 4) && i != 5 && l <= 6 && l > 7 && i == l;
    let bits: u32 = i & 255 | l ^ 3 << 2 >> 1;
    let neg: i64 = -s * -1 - -(1);
    let c0: f32 = f[i] as f32 + i as f32;
    let c1: i32 = (f[i] + 1.0) as i32;
    let bc: u32 = bitcast<u32>(f[i]);
    let sel: f32 = select(k, 1.0, f[i]);
    let v: vec4<f32> = vec4<f32>(1.0, 2.0, 3.0, 4.0);
    let v8: vec8<f32> = vec8<f32>(v, v.wzyx);
    let sw: vec2<f32> = v.xy;
    let e: f32 = v.x + v8[5] + swizzle(v8, 4, 5, 6, 7).w;
    let n: u32 = len(b);
    let call: f32 = h(e, 7);
    nothing();
    let m0: f32 = sqrt(e) + rsqrt(e) + exp(e) + exp2(e) + log(e) + log2(e) + sin(e) + cos(e) + tanh(e);
    let m1: f32 = pow(e, 2.0) + fma(e, e, 1.0) + min(e, 0.0) + max(e, 1.0) + abs(e) + floor(e) + ceil(e) + round(e) + trunc(e) + clamp(e, 0.0, 1.0);
    let a0: u32 = atomic_add(b[i], 1) + atomic_sub(b[i], 1, seq_cst) + atomic_min(b[i], 2, acquire) + atomic_max(b[i], 3, release) + atomic_and(b[i], 4, acq_rel) + atomic_or(b[i], 5) + atomic_xor(b[i], 6) + atomic_exchange(b[i], 7);
    let a1: u32 = atomic_compare_exchange(b[i], 0, 1);
    let a2: i32 = atomic_add(sh[i], -1);
    let r: u32 = wave_reduce_sum(i) + wave_reduce_min(i) + wave_reduce_max(i) + wave_reduce_and(i) + wave_reduce_or(i) + wave_reduce_xor(i);
    let sc: u32 = wave_inclusive_scan_sum(i) + wave_exclusive_scan_max(i);
    let x: u32 = wave_broadcast(i, 0) + wave_shuffle(i, l) + wave_shuffle_xor(i, 1) + wave_shuffle_up(i, 1) + wave_shuffle_down(i, 2) + wave_rotate(i, 3);
    let bal: u64 = wave_ballot(k);
    let any: bool = wave_any(k) && wave_all(k) || wave_elect();
    let vl: vec4<f32> = vload<4>(f, i) + vload<4>(f, i, align = 16);
    let fa: matrix<acc, f32, 16, 16> = matrix_fill<acc, f32, 16, 16>(0.0);
    let fm: matrix<a, f16, 16, 16> = matrix_load<a, f16, 16, 16>(m, 0, 16);
    let fb: matrix<b, f16, 16, 16> = matrix_load<b, f16, 16, 16>(m, 256, 16);
    fa = matrix_mma(fm, fb, fa);
    matrix_store(fa, c, i * 256, 16);
    w[0] = bal;
}
",
    );
}

#[test]
fn precedence_is_minimal_and_correct() {
    canonical(
        "kernel p(o: buf<i32, rw>, a: i32, b: i32, c: i32) {
    o[0] = (a + b) * c;
    o[1] = a + b * c;
    o[2] = a - (b - c);
    o[3] = a - b - c;
    o[4] = (a << b) + c;
    o[5] = a << b + c;
    o[6] = -(a + b);
    o[7] = -a as i32;
    o[8] = -a as i32 * b;
    o[9] = -(a as i32);
    o[10] = select((a < b) == (b < c), a, b);
    o[11] = a & (b | c);
    o[12] = (a | b) & c;
    o[13] = a ^ b | c;
}
",
    );
}

// ---- literals ----

/// The literal of the first `let` initialiser of the first function.
fn first_let_literals(src: &str) -> Vec<Literal> {
    let m = must_parse(src);
    let f = &m.functions[Handle::from_index(0)];
    f.exprs
        .iter()
        .filter_map(|(_, e)| match e {
            Expr::Literal(l) => Some(*l),
            _ => None,
        })
        .collect()
}

#[test]
fn unsuffixed_literals_take_their_type_from_context() {
    let int = |v: i128, t: Scalar| Literal::int(v, t);
    let lits = first_let_literals(
        "kernel k(a: u64, b: buf<i16, rw>, x: f16, v: vec2<u8>) {
    let p: u8 = 200;
    let q: u64 = a + 1;
    let r: u64 = 2 + a;
    let s: u64 = (3 + 4) * a;
    let t: bool = 5 < 6;
    b[7] = 8;
    let u: f16 = max(1.5, x);
    let w: vec2<u8> = v + vec2<u8>(9);
    let y: i64 = 10;
    let z: u64 = a << 2;
    let g: u8 = select(true, 11, 12);
}",
    );
    assert_eq!(
        lits,
        vec![
            int(200, Scalar::U8),
            int(1, Scalar::U64),
            int(2, Scalar::U64),
            int(3, Scalar::U64),
            int(4, Scalar::U64),
            int(5, Scalar::I32),
            int(6, Scalar::I32),
            int(7, Scalar::U32),
            int(8, Scalar::I16),
            Literal::float(1.5, Scalar::F16),
            int(9, Scalar::U8),
            int(10, Scalar::I64),
            int(2, Scalar::U64),
            Literal::Bool(true),
            int(11, Scalar::U8),
            int(12, Scalar::U8),
        ]
    );
}

#[test]
fn literal_edge_values_round_trip() {
    canonical(
        "kernel lits(o: buf<u64, rw>, p: buf<i64, rw>, q: buf<f32, rw>, r: buf<f64, rw>, h: buf<f16, rw>, z: buf<i8, rw>) {
    o[0] = 18446744073709551615;
    p[0] = -9223372036854775808;
    p[1] = 9223372036854775807;
    z[0] = -128;
    q[0] = nan;
    q[1] = -inf;
    q[2] = 0.1;
    q[3] = 1e-45;
    q[4] = 3.4028235e38;
    q[5] = -0.0;
    r[0] = 0.1;
    r[1] = 1.7976931348623157e308;
    r[2] = 5e-324;
    r[3] = 1.2345678901234568e17;
    h[0] = 0.1;
    h[1] = 65500.0;
    h[2] = 6e-8;
    q[6] = 2.0f16 as f32;
    q[7] = inf_f64 as f32;
    q[8] = 1u8 as f32 + 2.5f64 as f32;
    q[9] = -1i64 as f32;
}
",
    );
    // Hex, separators and suffix spellings read as the same values.
    let m = must_parse("kernel k(o: buf<u8, rw>, p: buf<i32, rw>) {\n    o[0] = 0xff_u8;\n    p[0] = 0xffff_ffff;\n    p[1] = 1_000;\n}\n");
    assert!(print(&m).contains("o[0] = 255;"));
    assert!(print(&m).contains("p[0] = -1;"));
    assert!(print(&m).contains("p[1] = 1000;"));
}

/// A one-kernel module whose body assigns `value` (built in Rust) to `out[0]`.
fn module_with(out_elem: Scalar, build: impl FnOnce(&mut Function) -> ExprId) -> Module {
    let mut m = Module::new();
    let mut f = Function::new("k", FunctionKind::Kernel);
    f.params.push(Param {
        name: "out".into(),
        ty: Type::Buffer {
            elem: ElemType::scalar(out_elem),
            access: Access::ReadWrite,
        },
        span: Span::UNKNOWN,
    });
    f.params.push(Param {
        name: "a".into(),
        ty: Type::Scalar(out_elem),
        span: Span::UNKNOWN,
    });
    let value = build(&mut f);
    let index = f.add_expr(Expr::Literal(Literal::int(0, Scalar::U32)), Span::UNKNOWN);
    f.body.push(Stmt {
        kind: StmtKind::Assign {
            place: Place::Element {
                base: Base::Param(0),
                index,
            },
            value,
        },
        span: Span::UNKNOWN,
    });
    m.functions.append(f);
    m
}

fn lit(f: &mut Function, l: Literal) -> ExprId {
    f.add_expr(Expr::Literal(l), Span::UNKNOWN)
}

fn bin(f: &mut Function, op: BinaryOp, lhs: ExprId, rhs: ExprId) -> ExprId {
    f.add_expr(Expr::Binary { op, lhs, rhs }, Span::UNKNOWN)
}

#[test]
fn suffixes_are_printed_exactly_where_needed() {
    let cases: Vec<(Scalar, Box<dyn Fn(&mut Function) -> ExprId>, &str)> = vec![
        (Scalar::U8, Box::new(|f| lit(f, Literal::int(1, Scalar::U8))), "out[0] = 1;"),
        (Scalar::U8, Box::new(|f| lit(f, Literal::int(1, Scalar::I32))), "out[0] = 1i32;"),
        (
            Scalar::U8,
            Box::new(|f| {
                let a = lit(f, Literal::int(1, Scalar::U16));
                let b = lit(f, Literal::int(2, Scalar::U16));
                bin(f, BinaryOp::Add, a, b)
            }),
            "out[0] = 1u16 + 2;",
        ),
        (
            Scalar::U8,
            Box::new(|f| {
                let a = lit(f, Literal::int(1, Scalar::U8));
                let b = lit(f, Literal::int(2, Scalar::U8));
                bin(f, BinaryOp::Add, a, b)
            }),
            "out[0] = 1 + 2;",
        ),
        (
            Scalar::U8,
            Box::new(|f| {
                let a = lit(f, Literal::int(1, Scalar::U16));
                let b = f.add_expr(Expr::Param(1), Span::UNKNOWN);
                bin(f, BinaryOp::Add, a, b)
            }),
            "out[0] = 1u16 + a;",
        ),
        (
            Scalar::F32,
            Box::new(|f| {
                let a = lit(f, Literal::float(1.0, Scalar::F32));
                f.add_expr(Expr::Unary { op: UnaryOp::Neg, arg: a }, Span::UNKNOWN)
            }),
            "out[0] = -(1.0);",
        ),
        (
            Scalar::F32,
            Box::new(|f| {
                let a = lit(f, Literal::float(f64::INFINITY, Scalar::F64));
                f.add_expr(Expr::Cast { to: Scalar::F32, arg: a }, Span::UNKNOWN)
            }),
            "out[0] = inf_f64 as f32;",
        ),
        (
            Scalar::I32,
            Box::new(|f| {
                let a = lit(f, Literal::int(5, Scalar::I32));
                let b = lit(f, Literal::int(2, Scalar::I32));
                let lt = bin(f, BinaryOp::Lt, a, b);
                let x = lit(f, Literal::int(1, Scalar::I32));
                let y = lit(f, Literal::int(0, Scalar::I32));
                f.add_expr(Expr::Select { cond: lt, accept: x, reject: y }, Span::UNKNOWN)
            }),
            "out[0] = select(5 < 2, 1, 0);",
        ),
    ];
    for (ty, build, want) in cases {
        let m = module_with(ty, build);
        let text = print(&m);
        assert!(text.contains(want), "want `{want}` in:\n{text}");
        fixed_point(&m).unwrap();
    }
}

#[test]
fn conflicting_names_from_rust_are_renamed() {
    // let x = 1; { let x = 2; out[0] = <outer x>; } with a local named like the parameter.
    let mut m = module_with(Scalar::I32, |f| lit(f, Literal::int(0, Scalar::I32)));
    let f = &mut m.functions[Handle::from_index(0)];
    let outer = f.locals.append(Local { name: "x".into(), ty: Type::I32, span: Span::UNKNOWN });
    let inner = f.locals.append(Local { name: "x".into(), ty: Type::I32, span: Span::UNKNOWN });
    let shadow = f.locals.append(Local { name: "a".into(), ty: Type::I32, span: Span::UNKNOWN });
    let one = lit(f, Literal::int(1, Scalar::I32));
    let two = lit(f, Literal::int(2, Scalar::I32));
    let three = lit(f, Literal::int(3, Scalar::I32));
    let read_outer = f.add_expr(Expr::Local(outer), Span::UNKNOWN);
    let read_param = f.add_expr(Expr::Param(1), Span::UNKNOWN);
    let sum = bin(f, BinaryOp::Add, read_outer, read_param);
    let idx = lit(f, Literal::int(1, Scalar::U32));
    let let_ = |local, init| Stmt { kind: StmtKind::Let { local, init: Some(init) }, span: Span::UNKNOWN };
    let body = vec![
        let_(inner, two),
        let_(shadow, three),
        Stmt {
            kind: StmtKind::Assign { place: Place::Element { base: Base::Param(0), index: idx }, value: sum },
            span: Span::UNKNOWN,
        },
    ];
    f.body.insert(0, let_(outer, one));
    let cond = lit(f, Literal::Bool(true));
    f.body.push(Stmt {
        kind: StmtKind::If { cond, then_block: body, else_block: vec![] },
        span: Span::UNKNOWN,
    });
    let text = print(&m);
    assert!(text.contains("let x_1: i32 = 2;"), "{text}");
    assert!(text.contains("let a_1: i32 = 3;"), "{text}");
    assert!(text.contains("out[1] = x + a;"), "{text}");
    fixed_point(&m).unwrap();
}

// ---- run blocks ----

#[test]
fn run_blocks_parse_and_print() {
    let src = "kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
}

run saxpy {
    grid = [4];
    block = [256, 2];
    shared = 64;
    wave = 32;
    ulps = 2;
    arg y = random(1024, -1.0, 1.0, seed 7);
    arg x = iota(1024);
    arg a = 2.0;
    arg n = 1000;
    expect y = interp;
}

run saxpy {
    grid = [1, 1, 3];
    block = [1];
    arg y = [1, -2, 3.5, -inf, nan, 18446744073709551615, -9223372036854775808];
    arg x = fill(8, -0.5);
    arg a = true;
    arg n = uninit(4);
    expect y = iota(8, 1, 0.5);
    expect ub out_of_bounds;
    expect refused XPU-REF01;
    expect refused CAJETA_ERROR_TEMPLATE_REQUIREMENT;
    expect x = [1.0, 2.0];
}
";
    let (m, runs) = parse_file(src).unwrap();
    assert_eq!(print_file(&m, &runs), src);
    assert_eq!(runs.len(), 2);
    let r = &runs[0];
    assert_eq!((r.kernel.as_str(), r.grid, r.block, r.shared_bytes, r.wave, r.ulps), ("saxpy", [4, 1, 1], [256, 2, 1], 64, Some(32), 2));
    assert_eq!(r.args[0].init, ArgInit::Random { len: 1024, lo: Value::Float(-1.0), hi: Value::Float(1.0), seed: 7 });
    assert_eq!(r.args[1].init, ArgInit::Iota { len: 1024, start: Value::Int(0), step: Value::Int(1) });
    assert_eq!(r.args[3].init, ArgInit::Scalar(Value::Int(1000)));
    assert!(matches!(&r.expects[0], Expect::Interp { name, .. } if name == "y"));
    let r = &runs[1];
    let ArgInit::List(values) = &r.args[0].init else { panic!() };
    assert_eq!(values[5], Value::Int(u64::MAX as i128));
    assert_eq!(values[6], Value::Int(i64::MIN as i128));
    assert!(matches!(&r.expects[2], Expect::Refused { code, .. } if code == "XPU-REF01"));
    assert_eq!(r.expects[0].span(), Span::new(24, 5));
    // `parse` accepts run blocks and drops them.
    assert_eq!(print(&parse(src).unwrap()), print(&m));
    // Template instances are named with their arguments.
    let (_, runs) = parse_file("run Tile<64, 32> {\n    grid = [1];\n    block = [1];\n}\n").unwrap();
    assert_eq!(runs[0].kernel, "Tile<64,32>");
}

// ---- diagnostics ----

#[test]
fn diagnostics_have_exact_positions() {
    assert_eq!(errors("kernel k() {\n    let x: u32 = 1 $ 2;\n}\n"), vec!["2:20 XPU-P001", "2:22 XPU-P003"]);
    assert_eq!(errors("kernel k() {\n    x = 1;\n}\n"), vec!["2:5 XPU-P004"]);
    assert_eq!(errors("kernel k() {\n    f(1);\n}\n"), vec!["2:5 XPU-P005"]);
    assert_eq!(errors("kernel k(a: flaot) {\n}\n"), vec!["1:13 XPU-P006"]);
    assert_eq!(errors("kernel k(a: u32, a: u32) {\n}\n"), vec!["1:18 XPU-P007"]);
    assert_eq!(errors("kernel k() {\n    let x: u8 = 256;\n}\n"), vec!["2:17 XPU-P008"]);
    assert_eq!(errors("kernel k() {\n    let x: u32 = -1;\n}\n"), vec!["2:18 XPU-P008"]);
    assert_eq!(errors("kernel k() {\n    let x: u32 = 5u9;\n}\n"), vec!["2:18 XPU-P002"]);
    assert_eq!(errors("kernel k() {\n    let s: u32 = \"abc;\n}\n"), vec!["2:18 XPU-P002", "2:18 XPU-P003"]);
    assert_eq!(errors("kernel k(a: u32) {\n    a = 1;\n}\n"), vec!["2:5 XPU-P010"]);
    assert_eq!(errors("kernel k() {\n    let lane_id: u32 = 1;\n}\n"), vec!["2:9 XPU-P011"]);
    assert_eq!(errors("device fn sqrt() {\n}\n"), vec!["1:11 XPU-P011"]);
    assert_eq!(errors("kernel k() {\n    loop {\n        break 'out;\n    }\n}\n"), vec!["3:15 XPU-P012"]);
    assert_eq!(errors("@wave(32)\n@waev(1)\nkernel k() {\n}\n"), vec!["2:1 XPU-P013"]);
    assert_eq!(errors("run k {\n    grid = [1];\n}\n"), vec!["1:1 XPU-P014"]);
    assert_eq!(errors("run k {\n    grid = [1];\n    block = [1];\n    grid = [2];\n}\n"), vec!["4:5 XPU-P014"]);
    assert_eq!(errors("kernel k<N>() {\n    let a: [u32; N << 1];\n}\n"), vec!["2:18 XPU-P015"]);
    assert_eq!(errors("kernel k() {\n    let v: u32 = vload(x, 0);\n}\n"), vec!["2:18 XPU-P017"]);
    assert_eq!(errors("kernel k() {\n    if true {\n        shared t: [f32; 4];\n    }\n}\n"), vec!["3:16 XPU-P018"]);
    assert_eq!(errors("kernel k() {\n    let x;\n}\n"), vec!["2:9 XPU-P019"]);
    assert_eq!(errors("kernel k() {\n    let a: u32 = 1 < 2 < 3;\n}\n"), vec!["2:24 XPU-P003"]);
    // Several errors in one run, in source order, across items.
    assert_eq!(
        errors("kernel a() {\n    let x: u32 = ;\n    y = 2;\n}\nkernel b() {\n    z();\n}\n"),
        vec!["2:18 XPU-P003", "6:5 XPU-P005"]
    );
    assert_eq!(
        errors("kernel a() {\n    let x: u32 = ;\n}\nkernel b() {\n    let q: u32 = (;\n    y = 1;\n}\n"),
        vec!["2:18 XPU-P003", "5:19 XPU-P003"]
    );
}

#[test]
fn invalid_utf8_is_a_diagnostic() {
    let err = xpu::ir::text::decode(b"kernel k() {\n  \xff\n}").unwrap_err();
    assert_eq!(err.0[0].code, "XPU-P016");
    assert_eq!(err.0[0].span, Span::new(2, 3));
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_crash() {
    let deep = format!("kernel k() {{\n    let x: i32 = {}1{};\n}}\n", "(".repeat(5000), ")".repeat(5000));
    assert!(errors(&deep).iter().any(|e| e.ends_with("XPU-P009")));
    let chain = format!("kernel k(a: i32) {{\n    let x: i32 = a{};\n}}\n", " + a".repeat(5000));
    assert!(errors(&chain).iter().any(|e| e.ends_with("XPU-P009")));
    let neg = format!("kernel k(a: i32) {{\n    let x: i32 = {}a;\n}}\n", "-".repeat(5000));
    assert!(errors(&neg).iter().any(|e| e.ends_with("XPU-P009")));
    let blocks = format!("kernel k() {{\n{}{}}}\n", "if true {\n".repeat(3000), "}\n".repeat(3000));
    assert!(errors(&blocks).iter().any(|e| e.ends_with("XPU-P009")));
    // Just inside the limit parses and prints back.
    let ok = format!("kernel k(a: i32) {{\n    let x: i32 = a{};\n}}\n", " + a".repeat(100));
    fixed_point(&must_parse(&ok)).unwrap();
}

// ---- xpu fmt ----

#[test]
fn fmt_command_exit_codes() {
    let dir = std::env::temp_dir().join(format!("xpu-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.xk");
    std::fs::write(&good, "// c\nkernel k(o: buf<u32, rw>) { o[0] = 1; }\nrun k { block = [1]; grid = [1]; }\n").unwrap();
    let bad = dir.join("bad.xk");
    std::fs::write(&bad, "kernel k() {\n    x = 1;\n}\n").unwrap();
    let exe = env!("CARGO_BIN_EXE_xpu");
    let out = std::process::Command::new(exe).arg("fmt").arg(&good).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "kernel k(o: buf<u32, rw>) {\n    o[0] = 1;\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n}\n"
    );
    let out = std::process::Command::new(exe).arg("fmt").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("bad.xk:2:5: error[XPU-P004]"), "{stderr}");
    let out = std::process::Command::new(exe).arg("fmt").arg(dir.join("missing.xk")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
