//! The text format (docs/text-format.md): every construct parses and prints back in
//! canonical form, literals take their types from context, diagnostics carry exact
//! `line:col`s, and (property tests) printing is a fixed point over generated modules while
//! neither the parser nor the printer panics on any input.

use proptest::prelude::*;
use xpu::ir::text::literal::round_to_f16;
use xpu::ir::text::run::{ArgInit, Expect, Value};
use xpu::ir::{
    parse, parse_file, print, print_file, Access, AtomicOp, Attributes, Base, BinaryOp, Block,
    Builtin, ConstBinOp, ConstExpr, Dim, ElemType, Expr, ExprId, FenceScope, Function,
    FunctionKind, Handle, Len, Literal, Local, LoopKind, MathFn, MatrixRole, MemoryOrder, Module,
    Occupancy, Param, Place, ReduceOp, Scalar, SharedDecl, Span, Stmt, StmtKind, TagSet,
    TemplateInfo, Type, UnaryOp, Unlowered, WaveOp,
};

#[path = "text/structs.rs"]
mod structs;

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
    let reparsed =
        parse(&first).map_err(|d| format!("{}\n--- printed ---\n{first}", d.render("printed")))?;
    let second = print(&reparsed);
    if first != second {
        return Err(format!(
            "not a fixed point:\n--- first ---\n{first}\n--- second ---\n{second}"
        ));
    }
    Ok(())
}

/// The diagnostics of `src` as `line:col code` strings.
fn errors(src: &str) -> Vec<String> {
    match parse_file(src) {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(d) => {
            d.0.iter()
                .map(|d| format!("{} {}", d.span, d.code))
                .collect()
        }
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
    type Build = Box<dyn Fn(&mut Function) -> ExprId>;
    let cases: Vec<(Scalar, Build, &str)> = vec![
        (
            Scalar::U8,
            Box::new(|f| lit(f, Literal::int(1, Scalar::U8))),
            "out[0] = 1;",
        ),
        (
            Scalar::U8,
            Box::new(|f| lit(f, Literal::int(1, Scalar::I32))),
            "out[0] = 1i32;",
        ),
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
                f.add_expr(
                    Expr::Unary {
                        op: UnaryOp::Neg,
                        arg: a,
                    },
                    Span::UNKNOWN,
                )
            }),
            "out[0] = -(1.0);",
        ),
        (
            Scalar::F32,
            Box::new(|f| {
                let a = lit(f, Literal::float(f64::INFINITY, Scalar::F64));
                f.add_expr(
                    Expr::Cast {
                        to: Scalar::F32,
                        arg: a,
                    },
                    Span::UNKNOWN,
                )
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
                f.add_expr(
                    Expr::Select {
                        cond: lt,
                        accept: x,
                        reject: y,
                    },
                    Span::UNKNOWN,
                )
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
    let outer = f.locals.append(Local {
        name: "x".into(),
        ty: Type::I32,
        span: Span::UNKNOWN,
    });
    let inner = f.locals.append(Local {
        name: "x".into(),
        ty: Type::I32,
        span: Span::UNKNOWN,
    });
    let shadow = f.locals.append(Local {
        name: "a".into(),
        ty: Type::I32,
        span: Span::UNKNOWN,
    });
    let one = lit(f, Literal::int(1, Scalar::I32));
    let two = lit(f, Literal::int(2, Scalar::I32));
    let three = lit(f, Literal::int(3, Scalar::I32));
    let read_outer = f.add_expr(Expr::Local(outer), Span::UNKNOWN);
    let read_param = f.add_expr(Expr::Param(1), Span::UNKNOWN);
    let sum = bin(f, BinaryOp::Add, read_outer, read_param);
    let idx = lit(f, Literal::int(1, Scalar::U32));
    let let_ = |local, init| Stmt {
        kind: StmtKind::Let {
            local,
            init: Some(init),
        },
        span: Span::UNKNOWN,
    };
    let body = vec![
        let_(inner, two),
        let_(shadow, three),
        Stmt {
            kind: StmtKind::Assign {
                place: Place::Element {
                    base: Base::Param(0),
                    index: idx,
                },
                value: sum,
            },
            span: Span::UNKNOWN,
        },
    ];
    f.body.insert(0, let_(outer, one));
    let cond = lit(f, Literal::Bool(true));
    f.body.push(Stmt {
        kind: StmtKind::If {
            cond,
            then_block: body,
            else_block: vec![],
        },
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
    assert_eq!(
        (
            r.kernel.as_str(),
            r.grid,
            r.block,
            r.shared_bytes,
            r.wave,
            r.ulps
        ),
        ("saxpy", [4, 1, 1], [256, 2, 1], 64, Some(32), 2)
    );
    assert_eq!(
        r.args[0].init,
        ArgInit::Random {
            len: 1024,
            lo: Value::Float(-1.0),
            hi: Value::Float(1.0),
            seed: 7
        }
    );
    assert_eq!(
        r.args[1].init,
        ArgInit::Iota {
            len: 1024,
            start: Value::Int(0),
            step: Value::Int(1)
        }
    );
    assert_eq!(r.args[3].init, ArgInit::Scalar(Value::Int(1000)));
    assert!(matches!(&r.expects[0], Expect::Interp { name, .. } if name == "y"));
    let r = &runs[1];
    let ArgInit::List(values) = &r.args[0].init else {
        panic!()
    };
    assert_eq!(values[5], Value::Int(u64::MAX as i128));
    assert_eq!(values[6], Value::Int(i64::MIN as i128));
    assert!(matches!(&r.expects[2], Expect::Refused { code, .. } if code == "XPU-REF01"));
    assert_eq!(r.expects[0].span(), Span::new(24, 5));
    // `parse` accepts run blocks and drops them.
    assert_eq!(print(&parse(src).unwrap()), print(&m));
    // Template instances are named with their arguments.
    let (_, runs) =
        parse_file("run Tile<64, 32> {\n    grid = [1];\n    block = [1];\n}\n").unwrap();
    assert_eq!(runs[0].kernel, "Tile<64,32>");
}

// ---- diagnostics ----

#[test]
fn diagnostics_have_exact_positions() {
    assert_eq!(
        errors("kernel k() {\n    let x: u32 = 1 $ 2;\n}\n"),
        vec!["2:20 XPU-P001", "2:22 XPU-P003"]
    );
    assert_eq!(
        errors("kernel k() {\n    x = 1;\n}\n"),
        vec!["2:5 XPU-P004"]
    );
    assert_eq!(errors("kernel k() {\n    f(1);\n}\n"), vec!["2:5 XPU-P005"]);
    // Tile widths (issue 23 item 3): not on a vote, not twice, a literal.
    assert_eq!(
        errors("kernel k() {\n    let b: bool = wave_any(true, width = 4);\n}\n"),
        vec!["2:34 XPU-P040"]
    );
    assert_eq!(
        errors(
            "kernel k(a: u32) {\n    let x: u32 = wave_reduce_sum(a, width = 4, width = 8);\n}\n"
        ),
        vec!["2:48 XPU-P040"]
    );
    assert_eq!(
        errors("kernel k(a: u32) {\n    let x: u32 = wave_reduce_sum(a, width = a);\n}\n"),
        vec!["2:45 XPU-P040"]
    );
    assert_eq!(errors("kernel k(a: flaot) {\n}\n"), vec!["1:13 XPU-P006"]);
    assert_eq!(
        errors("kernel k(a: u32, a: u32) {\n}\n"),
        vec!["1:18 XPU-P007"]
    );
    assert_eq!(
        errors("kernel k() {\n    let x: u8 = 256;\n}\n"),
        vec!["2:17 XPU-P008"]
    );
    assert_eq!(
        errors("kernel k() {\n    let x: u32 = -1;\n}\n"),
        vec!["2:18 XPU-P008"]
    );
    assert_eq!(
        errors("kernel k() {\n    let x: u32 = 5u9;\n}\n"),
        vec!["2:18 XPU-P002"]
    );
    assert_eq!(
        errors("kernel k() {\n    let s: u32 = \"abc;\n}\n"),
        vec!["2:18 XPU-P002", "2:18 XPU-P003"]
    );
    assert_eq!(
        errors("kernel k(a: u32) {\n    a = 1;\n}\n"),
        vec!["2:5 XPU-P010"]
    );
    assert_eq!(
        errors("kernel k() {\n    let lane_id: u32 = 1;\n}\n"),
        vec!["2:9 XPU-P011"]
    );
    assert_eq!(errors("device fn sqrt() {\n}\n"), vec!["1:11 XPU-P011"]);
    assert_eq!(
        errors("kernel k() {\n    loop {\n        break 'out;\n    }\n}\n"),
        vec!["3:15 XPU-P012"]
    );
    assert_eq!(
        errors("@wave(32)\n@waev(1)\nkernel k() {\n}\n"),
        vec!["2:1 XPU-P013"]
    );
    assert_eq!(
        errors("run k {\n    grid = [1];\n}\n"),
        vec!["1:1 XPU-P014"]
    );
    assert_eq!(
        errors("run k {\n    grid = [1];\n    block = [1];\n    grid = [2];\n}\n"),
        vec!["4:5 XPU-P014"]
    );
    assert_eq!(
        errors("kernel k<N>() {\n    let a: [u32; N << 1];\n}\n"),
        vec!["2:18 XPU-P015"]
    );
    assert_eq!(
        errors("kernel k() {\n    let v: u32 = vload(x, 0);\n}\n"),
        vec!["2:18 XPU-P017"]
    );
    assert_eq!(
        errors("kernel k() {\n    if true {\n        shared t: [f32; 4];\n    }\n}\n"),
        vec!["3:16 XPU-P018"]
    );
    assert_eq!(
        errors("kernel k() {\n    let x;\n}\n"),
        vec!["2:9 XPU-P019"]
    );
    // Issue #23: atomic_load / atomic_store take a place, a value to store, an order.
    assert_eq!(
        errors("kernel k(b: buf<u32, rw>) {\n    let x: u32 = atomic_load(b[0], 1u32);\n}\n"),
        vec!["2:36 XPU-P020"]
    );
    assert_eq!(
        errors("kernel k(b: buf<u32, rw>) {\n    atomic_store(b[0]);\n}\n"),
        vec!["2:5 XPU-P020"]
    );
    assert_eq!(
        errors("kernel k() {\n    let a: u32 = 1 < 2 < 3;\n}\n"),
        vec!["2:24 XPU-P003"]
    );
    // Several errors in one run, in source order, across items.
    assert_eq!(
        errors("kernel a() {\n    let x: u32 = ;\n    y = 2;\n}\nkernel b() {\n    z();\n}\n"),
        vec!["2:18 XPU-P003", "6:5 XPU-P005"]
    );
    // An error just before a block's `}` leaves the `}` to close the block.
    assert_eq!(
        errors("kernel a() {\n    let x: u32 = 1 + }\nkernel b() {\n    y = 1;\n}\n"),
        vec!["2:22 XPU-P003", "4:5 XPU-P004"]
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
    let deep = format!(
        "kernel k() {{\n    let x: i32 = {}1{};\n}}\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert!(errors(&deep).iter().any(|e| e.ends_with("XPU-P009")));
    let chain = format!(
        "kernel k(a: i32) {{\n    let x: i32 = a{};\n}}\n",
        " + a".repeat(5000)
    );
    assert!(errors(&chain).iter().any(|e| e.ends_with("XPU-P009")));
    let neg = format!(
        "kernel k(a: i32) {{\n    let x: i32 = {}a;\n}}\n",
        "-".repeat(5000)
    );
    assert!(errors(&neg).iter().any(|e| e.ends_with("XPU-P009")));
    let blocks = format!(
        "kernel k() {{\n{}{}}}\n",
        "if true {\n".repeat(3000),
        "}\n".repeat(3000)
    );
    assert!(errors(&blocks).iter().any(|e| e.ends_with("XPU-P009")));
    // Just inside the limit parses and prints back.
    let ok = format!(
        "kernel k(a: i32) {{\n    let x: i32 = a{};\n}}\n",
        " + a".repeat(100)
    );
    fixed_point(&must_parse(&ok)).unwrap();
}

// ---- xpu fmt ----

#[test]
fn fmt_command_exit_codes() {
    let dir = std::env::temp_dir().join(format!("xpu-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.xk");
    std::fs::write(
        &good,
        "// c\nkernel k(o: buf<u32, rw>) { o[0] = 1; }\nrun k { block = [1]; grid = [1]; }\n",
    )
    .unwrap();
    let bad = dir.join("bad.xk");
    std::fs::write(&bad, "kernel k() {\n    x = 1;\n}\n").unwrap();
    let exe = env!("CARGO_BIN_EXE_xpu");
    let out = std::process::Command::new(exe)
        .arg("fmt")
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "kernel k(o: buf<u32, rw>) {\n    o[0] = 1;\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n}\n"
    );
    let out = std::process::Command::new(exe)
        .arg("fmt")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("bad.xk:2:5: error[XPU-P004]"), "{stderr}");
    let out = std::process::Command::new(exe)
        .arg("fmt")
        .arg(dir.join("missing.xk"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- generated modules ----

/// Builds random, mostly well-typed modules straight from the IR data model, driven by a
/// byte string (so proptest shrinks towards fewer bytes, and an exhausted string picks the
/// simplest option everywhere). Names come from small pools on purpose: locals shadow each
/// other and collide with parameters, shared arrays and template parameters, which the
/// printer must untangle.
mod gen {
    use super::*;

    pub struct Src<'a> {
        bytes: &'a [u8],
        pos: usize,
    }

    impl<'a> Src<'a> {
        pub fn new(bytes: &'a [u8]) -> Self {
            Src { bytes, pos: 0 }
        }
        fn byte(&mut self) -> u8 {
            let b = self.bytes.get(self.pos).copied().unwrap_or(0);
            self.pos += 1;
            b
        }
        fn below(&mut self, n: usize) -> usize {
            if n <= 1 {
                0
            } else {
                self.byte() as usize % n
            }
        }
        fn chance(&mut self, in_8: u8) -> bool {
            self.byte() % 8 < in_8
        }
        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[self.below(xs.len())]
        }
        fn u64(&mut self) -> u64 {
            (0..8).fold(0u64, |acc, _| acc << 8 | self.byte() as u64)
        }
    }

    const LOCAL_NAMES: &[&str] = &["x", "y", "i", "acc", "v", "n", "t"];
    const PARAM_NAMES: &[&str] = &["a", "b", "x", "n", "out", "inp", "p"];
    const TPARAM_NAMES: &[&str] = &["TM", "TN", "K", "x"];
    const NUMERIC: [Scalar; 11] = [
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::F32,
        Scalar::F64,
    ];
    const MAX_EXPR_DEPTH: u32 = 4;
    const MAX_BLOCK_DEPTH: u32 = 3;

    fn num(src: &mut Src) -> Scalar {
        src.pick(&NUMERIC)
    }

    fn scalar(src: &mut Src) -> Scalar {
        src.pick(&Scalar::ALL)
    }

    fn value_type(src: &mut Src) -> Type {
        let s = scalar(src);
        if src.chance(3) {
            Type::Vector(s, src.pick(&xpu::ir::VECTOR_LANES))
        } else {
            Type::Scalar(s)
        }
    }

    fn elem_type(src: &mut Src) -> ElemType {
        value_type(src).as_elem().unwrap()
    }

    pub fn literal(src: &mut Src, s: Scalar) -> Literal {
        match s {
            Scalar::Bool => Literal::Bool(src.chance(4)),
            s if s.is_int() => {
                let bits = s.bits();
                let max = if s.is_signed() {
                    (1i128 << (bits - 1)) - 1
                } else {
                    (1i128 << bits) - 1
                };
                let min = if s.is_signed() {
                    -(1i128 << (bits - 1))
                } else {
                    0
                };
                let v = match src.below(6) {
                    0 => 0,
                    1 => 1,
                    2 => max,
                    3 => min,
                    4 => -1,
                    _ => src.u64() as i128,
                };
                Literal::int(v, s)
            }
            s => {
                let v = match src.below(10) {
                    0 => 0.0,
                    1 => 1.5,
                    2 => -0.0,
                    3 => f64::NAN,
                    4 => f64::INFINITY,
                    5 => f64::NEG_INFINITY,
                    6 => 1e-7,
                    7 => -12345.678,
                    _ => {
                        let bits = src.u64();
                        match s {
                            Scalar::F64 => f64::from_bits(bits),
                            _ => f32::from_bits(bits as u32) as f64,
                        }
                    }
                };
                let v = match s {
                    Scalar::F16 => round_to_f16(v),
                    Scalar::F32 => v as f32 as f64,
                    _ => v,
                };
                Literal::float(v, s)
            }
        }
    }

    /// A function's signature as the bodies see it.
    #[derive(Clone)]
    struct Sig {
        params: Vec<Type>,
        ret: Option<Type>,
    }

    pub fn module(src: &mut Src) -> Module {
        let mut m = Module::new();
        let n_helpers = src.below(4);
        // Every tag set has a member, so every tag type has values.
        let n_sets = if n_helpers == 0 { 0 } else { src.below(3) };
        let n_kernels = 1 + src.below(2);
        let mut sigs = Vec::new();
        for h in 0..n_helpers + n_kernels {
            let kernel = h >= n_helpers;
            let name = if kernel && src.chance(1) {
                format!("k{h}<4,{}>", src.below(100))
            } else if kernel {
                format!("k{h}")
            } else {
                format!("h{h}")
            };
            let mut f = Function::new(
                name,
                if kernel {
                    FunctionKind::Kernel
                } else {
                    FunctionKind::Device
                },
            );
            if kernel && !f.name.contains('<') && src.chance(2) {
                let n = 1 + src.below(3);
                f.template = Some(TemplateInfo {
                    params: TPARAM_NAMES[..n].iter().map(|s| s.to_string()).collect(),
                    requires: Vec::new(),
                    instantiate: Vec::new(),
                    max: None,
                });
                let mut requires = Vec::new();
                for _ in 0..src.below(3) {
                    requires.push((const_expr(src, &mut f, 0), Span::UNKNOWN));
                }
                let instantiate = (0..src.below(3))
                    .map(|_| {
                        (
                            (0..n).map(|_| src.below(300) as u32).collect(),
                            Span::UNKNOWN,
                        )
                    })
                    .collect();
                let max = src.chance(2).then(|| src.below(20) as u32);
                let t = f.template.as_mut().unwrap();
                t.requires = requires;
                t.instantiate = instantiate;
                t.max = max;
            }
            let n_params = src.below(6);
            let mut used = Vec::new();
            for _ in 0..n_params {
                let name = src.pick(PARAM_NAMES);
                if used.contains(&name) {
                    continue;
                }
                used.push(name);
                let ty = match src.below(6) {
                    0..=2 if kernel => Type::Buffer {
                        elem: elem_type(src),
                        access: if src.chance(5) {
                            Access::ReadWrite
                        } else {
                            Access::Read
                        },
                    },
                    3 if n_sets > 0 => Type::Tag(Handle::from_index(src.below(n_sets))),
                    _ => value_type(src),
                };
                f.params.push(Param {
                    name: name.into(),
                    ty,
                    span: Span::UNKNOWN,
                });
            }
            if !kernel && src.chance(5) {
                f.ret = Some(value_type(src));
            }
            if kernel {
                f.attrs = attributes(src, &mut f);
            }
            sigs.push(Sig {
                params: f.params.iter().map(|p| p.ty).collect(),
                ret: f.ret,
            });
            m.functions.append(f);
        }
        for s in 0..n_sets {
            let members = (0..1 + src.below(3))
                .map(|_| Handle::from_index(src.below(n_helpers)))
                .collect();
            m.tag_sets.append(TagSet {
                name: format!("S{s}"),
                members,
                span: Span::UNKNOWN,
            });
        }
        for h in 0..n_helpers + n_kernels {
            let handle = Handle::from_index(h);
            let f = m.functions[handle].clone();
            let mut fx = Fx {
                src,
                m: &m,
                sigs: &sigs,
                f,
                scopes: vec![Vec::new()],
                loops: Vec::new(),
                labels: 0,
            };
            if fx.f.is_kernel() {
                for i in 0..fx.src.below(3) {
                    let name = if fx.src.chance(2) {
                        fx.src.pick(PARAM_NAMES).to_string()
                    } else {
                        format!("sh{i}")
                    };
                    let elem = elem_type(fx.src);
                    let len = match fx.src.below(3) {
                        0 => None,
                        1 if fx.f.template.is_some() => {
                            let c = const_expr(fx.src, &mut fx.f, 0);
                            Some(Len::Const(c))
                        }
                        _ => Some(Len::Fixed(fx.src.below(1024) as u32)),
                    };
                    fx.f.shared.append(SharedDecl {
                        name,
                        elem,
                        len,
                        span: Span::UNKNOWN,
                    });
                }
            }
            let body = fx.block(0);
            fx.f.body = body;
            let f = fx.f;
            m.functions[handle] = f;
        }
        m
    }

    fn attributes(src: &mut Src, f: &mut Function) -> Attributes {
        let mut a = Attributes::default();
        if src.chance(2) {
            a.wave = Some((src.pick(&[8, 16, 32, 64]), Span::UNKNOWN));
        }
        if src.chance(2) {
            let mut o = Occupancy::default();
            if src.chance(4) {
                o.max_threads = Some(const_expr(src, f, 0));
            }
            if src.chance(2) {
                o.max_waves = Some(const_expr(src, f, 0));
            }
            if src.chance(2) {
                o.min_resident = Some(const_expr(src, f, 0));
            }
            if src.chance(2) {
                o.max_registers = Some(const_expr(src, f, 0));
            }
            a.occupancy = Some(o);
        }
        for _ in 0..src.below(3) {
            a.unlowered.push(Unlowered {
                backend: src.pick(&["cpu", "vulkan", "cuda"]).into(),
                tracked: src.pick(&["PLAN-1", "a \"quoted\"\\ plan\n", ""]).into(),
                may_lower: src.chance(4),
                hold: src.chance(4),
                host_wave_below: src.chance(4).then(|| src.below(64) as u32),
                span: Span::UNKNOWN,
            });
        }
        if src.chance(2) {
            a.unbounded = Some(("PLAN-9".into(), Span::UNKNOWN));
        }
        a
    }

    fn const_expr(src: &mut Src, f: &mut Function, d: u32) -> Handle<ConstExpr> {
        let n_t = f.template.as_ref().map_or(0, |t| t.params.len());
        let c = match src.below(if d > 2 { 2 } else { 5 }) {
            0 => ConstExpr::Lit(if src.chance(1) {
                src.u64()
            } else {
                src.below(512) as u64
            }),
            1 if n_t > 0 => ConstExpr::Param(src.below(n_t) as u32),
            1 => ConstExpr::Lit(7),
            2 => {
                let a = const_expr(src, f, d + 1);
                ConstExpr::Unary(
                    src.pick(&[xpu::ir::ConstUnOp::Neg, xpu::ir::ConstUnOp::Not]),
                    a,
                )
            }
            _ => {
                let a = const_expr(src, f, d + 1);
                let b = const_expr(src, f, d + 1);
                let op = src.pick(&[
                    ConstBinOp::Add,
                    ConstBinOp::Sub,
                    ConstBinOp::Mul,
                    ConstBinOp::Div,
                    ConstBinOp::Rem,
                    ConstBinOp::Eq,
                    ConstBinOp::Ne,
                    ConstBinOp::Lt,
                    ConstBinOp::Le,
                    ConstBinOp::Gt,
                    ConstBinOp::Ge,
                    ConstBinOp::And,
                    ConstBinOp::Or,
                ]);
                ConstExpr::Binary(op, a, b)
            }
        };
        f.consts.append(c)
    }

    struct Fx<'s, 'b, 'm> {
        src: &'s mut Src<'b>,
        m: &'m Module,
        sigs: &'m [Sig],
        f: Function,
        scopes: Vec<Vec<Handle<Local>>>,
        loops: Vec<Option<String>>,
        labels: u32,
    }

    impl Fx<'_, '_, '_> {
        fn add(&mut self, e: Expr) -> ExprId {
            self.f.add_expr(e, Span::UNKNOWN)
        }

        fn visible(&self, want: impl Fn(&Type) -> bool) -> Vec<Handle<Local>> {
            self.scopes
                .iter()
                .flatten()
                .copied()
                .filter(|l| want(&self.f.locals[*l].ty))
                .collect()
        }

        fn params(&self, want: impl Fn(&Type) -> bool) -> Vec<u32> {
            (0..self.f.params.len() as u32)
                .filter(|i| want(&self.f.params[*i as usize].ty))
                .collect()
        }

        /// Buffers, shared arrays and array locals whose element is `e` (any when `None`),
        /// writable only when `rw`.
        fn bases(&self, e: Option<ElemType>, rw: bool) -> Vec<Base> {
            let ok = |el: ElemType| e.is_none_or(|e| e == el);
            let mut out: Vec<Base> = self
                .params(|t| matches!(t, Type::Buffer { elem, access } if ok(*elem) && (!rw || *access == Access::ReadWrite)))
                .into_iter()
                .map(Base::Param)
                .collect();
            out.extend(
                self.f
                    .shared
                    .iter()
                    .filter(|(_, s)| ok(s.elem))
                    .map(|(h, _)| Base::Shared(h)),
            );
            out.extend(
                self.visible(|t| matches!(t, Type::Array { elem, .. } if ok(*elem)))
                    .into_iter()
                    .map(Base::Local),
            );
            out
        }

        fn elem_of(&self, b: Base) -> ElemType {
            match b {
                Base::Param(i) => match self.f.params[i as usize].ty {
                    Type::Buffer { elem, .. } => elem,
                    _ => unreachable!(),
                },
                Base::Shared(h) => self.f.shared[h].elem,
                Base::Local(l) => match self.f.locals[l].ty {
                    Type::Array { elem, .. } => elem,
                    _ => unreachable!(),
                },
            }
        }

        fn lit(&mut self, s: Scalar) -> ExprId {
            // Now and then a literal of another type, to exercise suffix printing.
            let s = if self.src.chance(1) && s != Scalar::Bool {
                scalar(self.src)
            } else {
                s
            };
            let l = literal(self.src, s);
            self.add(Expr::Literal(l))
        }

        fn u32e(&mut self, d: u32) -> ExprId {
            self.expr(Type::U32, d)
        }

        /// An expression of type `ty`.
        fn expr(&mut self, ty: Type, d: u32) -> ExprId {
            for _ in 0..8 {
                if let Some(e) = self.try_expr(ty, d) {
                    return e;
                }
            }
            self.fallback(ty)
        }

        fn fallback(&mut self, ty: Type) -> ExprId {
            match ty {
                Type::Scalar(s) => {
                    let l = literal(self.src, s);
                    self.add(Expr::Literal(l))
                }
                Type::Vector(s, n) => {
                    let v = self.fallback(Type::Scalar(s));
                    self.add(Expr::Splat { lanes: n, value: v })
                }
                Type::Matrix {
                    role,
                    scalar,
                    rows,
                    cols,
                } => {
                    let v = self.fallback(Type::Scalar(scalar));
                    self.add(Expr::MatrixFill {
                        role,
                        scalar,
                        rows,
                        cols,
                        value: v,
                    })
                }
                Type::Tag(set) => self.add(Expr::Tag { set, index: 0 }),
                _ => self.add(Expr::Literal(Literal::Bool(true))),
            }
        }

        fn try_expr(&mut self, ty: Type, d: u32) -> Option<ExprId> {
            let leaf = d >= MAX_EXPR_DEPTH;
            let choice = self.src.below(if leaf { 4 } else { 20 });
            let d = d + 1;
            match (choice, ty) {
                (0, Type::Scalar(s)) => Some(self.lit(s)),
                (1, _) => {
                    let ls = self.visible(|t| *t == ty);
                    (!ls.is_empty()).then(|| {
                        let l = self.src.pick(&ls);
                        self.add(Expr::Local(l))
                    })
                }
                (2, _) => {
                    let ps = self.params(|t| *t == ty);
                    (!ps.is_empty()).then(|| {
                        let p = self.src.pick(&ps);
                        self.add(Expr::Param(p))
                    })
                }
                (3, Type::Scalar(Scalar::U32)) => {
                    let n_t = self.f.template.as_ref().map_or(0, |t| t.params.len());
                    let bufs = self.params(|t| matches!(t, Type::Buffer { .. }));
                    Some(match self.src.below(4) {
                        0 if n_t > 0 => {
                            let i = self.src.below(n_t) as u32;
                            self.add(Expr::TemplateParam(i))
                        }
                        1 if !bufs.is_empty() => {
                            let b = self.src.pick(&bufs);
                            self.add(Expr::Len(b))
                        }
                        _ => {
                            let dim = self.src.pick(&Dim::ALL);
                            let b = self.src.pick(&[
                                Builtin::GlobalId(dim),
                                Builtin::LocalId(dim),
                                Builtin::GroupId(dim),
                                Builtin::GroupSize(dim),
                                Builtin::NumGroups(dim),
                                Builtin::WaveWidth,
                                Builtin::LaneId,
                            ]);
                            self.add(Expr::Builtin(b))
                        }
                    })
                }
                (4, Type::Scalar(_) | Type::Vector(..)) => {
                    let op = self.src.pick(&[UnaryOp::Neg, UnaryOp::Not]);
                    let arg = self.expr(ty, d);
                    Some(self.add(Expr::Unary { op, arg }))
                }
                (5 | 6, Type::Scalar(s) | Type::Vector(s, _)) if s != Scalar::Bool => {
                    let ops: &[BinaryOp] = if s.is_float() {
                        &[
                            BinaryOp::Add,
                            BinaryOp::Sub,
                            BinaryOp::Mul,
                            BinaryOp::Div,
                            BinaryOp::Rem,
                        ]
                    } else {
                        &[
                            BinaryOp::Add,
                            BinaryOp::Sub,
                            BinaryOp::Mul,
                            BinaryOp::Div,
                            BinaryOp::Rem,
                            BinaryOp::BitAnd,
                            BinaryOp::BitOr,
                            BinaryOp::BitXor,
                            BinaryOp::Shl,
                            BinaryOp::Shr,
                        ]
                    };
                    let op = self.src.pick(ops);
                    let lhs = self.expr(ty, d);
                    let rhs = self.expr(ty, d);
                    Some(self.add(Expr::Binary { op, lhs, rhs }))
                }
                (5, Type::Scalar(Scalar::Bool)) => {
                    let t = Type::Scalar(num(self.src));
                    let op = self.src.pick(&[
                        BinaryOp::Eq,
                        BinaryOp::Ne,
                        BinaryOp::Lt,
                        BinaryOp::Le,
                        BinaryOp::Gt,
                        BinaryOp::Ge,
                    ]);
                    let lhs = self.expr(t, d);
                    let rhs = self.expr(t, d);
                    Some(self.add(Expr::Binary { op, lhs, rhs }))
                }
                (6, Type::Scalar(Scalar::Bool)) => {
                    let op = self.src.pick(&[
                        BinaryOp::LogicalAnd,
                        BinaryOp::LogicalOr,
                        BinaryOp::BitXor,
                    ]);
                    let lhs = self.expr(ty, d);
                    let rhs = self.expr(ty, d);
                    Some(self.add(Expr::Binary { op, lhs, rhs }))
                }
                (7, Type::Scalar(s)) => {
                    let from = Type::Scalar(scalar(self.src));
                    let arg = self.expr(from, d);
                    Some(self.add(Expr::Cast { to: s, arg }))
                }
                (7, Type::Vector(s, n)) => {
                    let from = scalar(self.src);
                    let arg = self.expr(Type::Vector(from, n), d);
                    Some(self.add(Expr::Cast { to: s, arg }))
                }
                (8, Type::Scalar(s)) => {
                    let same: Vec<Scalar> = Scalar::ALL
                        .into_iter()
                        .filter(|t| t.size() == s.size())
                        .collect();
                    let from = self.src.pick(&same);
                    let arg = self.expr(Type::Scalar(from), d);
                    Some(self.add(Expr::Bitcast { to: ty, arg }))
                }
                (9, Type::Scalar(_) | Type::Vector(..)) if self.src.chance(3) => {
                    let cond = self.expr(Type::BOOL, d);
                    let accept = self.expr(ty, d);
                    let reject = self.expr(ty, d);
                    Some(self.add(Expr::IfElse {
                        cond,
                        accept,
                        reject,
                    }))
                }
                (9, Type::Scalar(_) | Type::Vector(..)) => {
                    let cond = self.expr(Type::BOOL, d);
                    let accept = self.expr(ty, d);
                    let reject = self.expr(ty, d);
                    Some(self.add(Expr::Select {
                        cond,
                        accept,
                        reject,
                    }))
                }
                (10, Type::Scalar(s)) => {
                    let n = self.src.pick(&xpu::ir::VECTOR_LANES);
                    let vector = self.expr(Type::Vector(s, n), d);
                    let lane = self.src.below(n as usize) as u8;
                    Some(self.add(Expr::Extract { vector, lane }))
                }
                (10, Type::Vector(s, n)) => {
                    let m = self.src.pick(&xpu::ir::VECTOR_LANES);
                    let vector = self.expr(Type::Vector(s, m), d);
                    let lanes = (0..n).map(|_| self.src.below(m as usize) as u8).collect();
                    Some(self.add(Expr::Swizzle { vector, lanes }))
                }
                (11, Type::Scalar(_) | Type::Vector(..)) => {
                    let bases = self.bases(ty.as_elem(), false);
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let index = self.u32e(d);
                    Some(self.add(Expr::Index { base, index }))
                }
                (12, _) => {
                    let callees: Vec<usize> = (0..self.sigs.len())
                        .filter(|i| {
                            self.sigs[*i].ret == Some(ty)
                                && !self.m.functions[Handle::from_index(*i)].is_kernel()
                        })
                        .collect();
                    if callees.is_empty() {
                        return None;
                    }
                    let c = self.src.pick(&callees);
                    let args = self.sigs[c]
                        .params
                        .clone()
                        .into_iter()
                        .map(|p| self.expr(p, d))
                        .collect();
                    Some(self.add(Expr::Call {
                        function: Handle::from_index(c),
                        args,
                    }))
                }
                (13, _) => {
                    let sets: Vec<usize> = (0..self.m.tag_sets.len())
                        .filter(|s| {
                            let set = &self.m.tag_sets[Handle::from_index(*s)];
                            set.members
                                .first()
                                .is_some_and(|f| self.sigs[f.index()].ret == Some(ty))
                        })
                        .collect();
                    if sets.is_empty() {
                        return None;
                    }
                    let s = self.src.pick(&sets);
                    let set = Handle::from_index(s);
                    let tag = self.expr(Type::Tag(set), d);
                    let first = self.m.tag_sets[set].members[0];
                    let args = self.sigs[first.index()]
                        .params
                        .clone()
                        .into_iter()
                        .map(|p| self.expr(p, d))
                        .collect();
                    Some(self.add(Expr::Dispatch { tag, args }))
                }
                (14, Type::Scalar(s)) if s.is_int() && self.src.below(2) == 0 => {
                    let op = self.src.pick(&xpu::ir::BitOp::ALL);
                    let args = (0..op.arity())
                        .map(|i| {
                            if op.is_amount(i) {
                                self.u32e(d)
                            } else {
                                self.expr(ty, d)
                            }
                        })
                        .collect();
                    Some(self.add(Expr::Bits { op, args }))
                }
                (14, Type::Scalar(s) | Type::Vector(s, _)) if s != Scalar::Bool => {
                    let funs: Vec<MathFn> = MathFn::ALL
                        .into_iter()
                        .filter(|f| s.is_float() || !f.float_only())
                        .collect();
                    let fun = self.src.pick(&funs);
                    let args = (0..fun.arity()).map(|_| self.expr(ty, d)).collect();
                    Some(self.add(Expr::Math { fun, args }))
                }
                (15, Type::Scalar(s)) if s.is_int() && s.bits() >= 32 && self.src.below(4) == 0 => {
                    // atomic_load (issue #23), with an order a load takes.
                    let bases: Vec<Base> = self
                        .bases(Some(ElemType::scalar(s)), false)
                        .into_iter()
                        .filter(|b| !matches!(b, Base::Local(_)))
                        .collect();
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let order = self.src.pick(&[
                        MemoryOrder::Relaxed,
                        MemoryOrder::Acquire,
                        MemoryOrder::SeqCst,
                    ]);
                    let index = self.u32e(d);
                    Some(self.add(Expr::AtomicLoad {
                        order,
                        place: Place::Element { base, index },
                    }))
                }
                (15, Type::Scalar(s)) if s.is_int() => {
                    let bases: Vec<Base> = self
                        .bases(Some(ElemType::scalar(s)), true)
                        .into_iter()
                        .filter(|b| !matches!(b, Base::Local(_)))
                        .collect();
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let op = self.src.pick(&AtomicOp::ALL);
                    let order = self.src.pick(&MemoryOrder::ALL);
                    let index = self.u32e(d);
                    let compare = (op == AtomicOp::CompareExchange).then(|| self.expr(ty, d));
                    let value = self.expr(ty, d);
                    Some(self.add(Expr::Atomic {
                        op,
                        order,
                        place: Place::Element { base, index },
                        value,
                        compare,
                    }))
                }
                (16, Type::Scalar(s)) => {
                    let r = self.src.pick(&ReduceOp::ALL);
                    let op = match (s, self.src.below(10)) {
                        (Scalar::U64, 0) => WaveOp::Ballot,
                        (Scalar::Bool, 1) => WaveOp::Any,
                        (Scalar::Bool, 2) => WaveOp::All,
                        (Scalar::Bool, 3) => WaveOp::Elect,
                        (_, 4) => WaveOp::Reduce(r),
                        (_, 5) => WaveOp::InclusiveScan(r),
                        (_, 6) => WaveOp::ExclusiveScan(r),
                        _ => self.src.pick(&[
                            WaveOp::Broadcast,
                            WaveOp::Shuffle,
                            WaveOp::ShuffleXor,
                            WaveOp::ShuffleUp,
                            WaveOp::ShuffleDown,
                            WaveOp::Rotate,
                        ]),
                    };
                    let args = match op {
                        WaveOp::Ballot | WaveOp::Any | WaveOp::All => {
                            vec![self.expr(Type::BOOL, d)]
                        }
                        WaveOp::Elect => vec![],
                        WaveOp::Reduce(_) | WaveOp::InclusiveScan(_) | WaveOp::ExclusiveScan(_) => {
                            vec![self.expr(ty, d)]
                        }
                        _ => vec![self.expr(ty, d), self.u32e(d)],
                    };
                    // A tile (`width = T`) on the verbs that take one, sometimes.
                    let width = (!matches!(
                        op,
                        WaveOp::Ballot | WaveOp::Any | WaveOp::All | WaveOp::Elect
                    ) && self.src.chance(3))
                    .then(|| self.src.pick(&[1u32, 2, 4, 8, 16, 32, 64]));
                    Some(self.add(Expr::Wave { op, args, width }))
                }
                (17 | 18, Type::Vector(s, n)) => {
                    if self.src.chance(3) {
                        let value = self.expr(Type::Scalar(s), d);
                        return Some(self.add(Expr::Splat { lanes: n, value }));
                    }
                    let mut parts = Vec::new();
                    let mut left = n;
                    while left > 0 {
                        let k = if left >= 2 && self.src.chance(3) {
                            let opts: Vec<u8> = xpu::ir::VECTOR_LANES
                                .into_iter()
                                .filter(|l| *l <= left && *l < n)
                                .collect();
                            if opts.is_empty() {
                                1
                            } else {
                                self.src.pick(&opts)
                            }
                        } else {
                            1
                        };
                        let t = if k == 1 {
                            Type::Scalar(s)
                        } else {
                            Type::Vector(s, k)
                        };
                        parts.push(self.expr(t, d));
                        left -= k;
                    }
                    Some(self.add(Expr::Compose {
                        scalar: s,
                        lanes: n,
                        parts,
                    }))
                }
                (19, Type::Vector(s, n)) => {
                    let bases: Vec<Base> = self.bases(Some(ElemType::scalar(s)), false);
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let index = self.u32e(d);
                    let align = self.src.chance(2).then(|| self.src.pick(&[1, 4, 16]));
                    Some(self.add(Expr::VLoad {
                        base,
                        index,
                        lanes: n,
                        align,
                    }))
                }
                (_, Type::Tag(set)) => {
                    let n = self.m.tag_sets[set].members.len();
                    if n == 0 {
                        return None;
                    }
                    let index = self.src.below(n) as u32;
                    Some(self.add(Expr::Tag { set, index }))
                }
                (
                    _,
                    Type::Matrix {
                        role,
                        scalar,
                        rows,
                        cols,
                    },
                ) => Some(match if leaf { 0 } else { self.src.below(3) } {
                    0 => {
                        let value = self.expr(Type::Scalar(scalar), d);
                        self.add(Expr::MatrixFill {
                            role,
                            scalar,
                            rows,
                            cols,
                            value,
                        })
                    }
                    1 => {
                        let bases = self.bases(Some(ElemType::scalar(scalar)), false);
                        if bases.is_empty() {
                            return None;
                        }
                        let base = self.src.pick(&bases);
                        let offset = self.u32e(d);
                        let stride = self.u32e(d);
                        self.add(Expr::MatrixLoad {
                            role,
                            scalar,
                            rows,
                            cols,
                            base,
                            offset,
                            stride,
                        })
                    }
                    _ => {
                        let a = self.expr(
                            Type::Matrix {
                                role: MatrixRole::A,
                                scalar,
                                rows,
                                cols,
                            },
                            d,
                        );
                        let b = self.expr(
                            Type::Matrix {
                                role: MatrixRole::B,
                                scalar,
                                rows,
                                cols,
                            },
                            d,
                        );
                        let c = self.expr(ty, d);
                        self.add(Expr::MatrixMma { a, b, c })
                    }
                }),
                _ => None,
            }
        }

        /// A copy of the tree under `e` with fresh handles.
        fn clone_tree(&mut self, e: ExprId) -> ExprId {
            let mut x = self.f.exprs[e].clone();
            let ops = x.operands();
            let copies: Vec<ExprId> = ops.iter().map(|o| self.clone_tree(*o)).collect();
            let mut k = 0;
            let mut next = || {
                k += 1;
                copies[k - 1]
            };
            match &mut x {
                Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } => {
                    *arg = next()
                }
                Expr::Binary { lhs, rhs, .. } => {
                    *lhs = next();
                    *rhs = next();
                }
                Expr::Select {
                    cond,
                    accept,
                    reject,
                }
                | Expr::IfElse {
                    cond,
                    accept,
                    reject,
                } => {
                    *cond = next();
                    *accept = next();
                    *reject = next();
                }
                Expr::Compose { parts, .. } => parts.iter_mut().for_each(|p| *p = next()),
                Expr::Splat { value, .. } | Expr::MatrixFill { value, .. } => *value = next(),
                Expr::Extract { vector, .. } | Expr::Swizzle { vector, .. } => *vector = next(),
                Expr::Index { index, .. } | Expr::VLoad { index, .. } => *index = next(),
                Expr::Call { args, .. } | Expr::Math { args, .. } | Expr::Wave { args, .. } => {
                    args.iter_mut().for_each(|p| *p = next())
                }
                Expr::Dispatch { tag, args } => {
                    *tag = next();
                    args.iter_mut().for_each(|p| *p = next());
                }
                Expr::Atomic {
                    place,
                    value,
                    compare,
                    ..
                } => {
                    if let Place::Element { index, .. } = place {
                        *index = next();
                    }
                    if let Some(c) = compare {
                        *c = next();
                    }
                    *value = next();
                }
                Expr::MatrixLoad { offset, stride, .. } => {
                    *offset = next();
                    *stride = next();
                }
                Expr::MatrixMma { a, b, c } => {
                    *a = next();
                    *b = next();
                    *c = next();
                }
                _ => {}
            }
            self.add(x)
        }

        fn declare(&mut self, ty: Type) -> Handle<Local> {
            let name = self.src.pick(LOCAL_NAMES).to_string();
            self.f.locals.append(Local {
                name,
                ty,
                span: Span::UNKNOWN,
            })
        }

        fn block(&mut self, d: u32) -> Block {
            self.scopes.push(Vec::new());
            let mut out = Vec::new();
            for _ in 0..self.src.below(if d == 0 { 7 } else { 4 }) {
                if let Some(s) = self.stmt(d) {
                    out.push(Stmt {
                        kind: s,
                        span: Span::UNKNOWN,
                    });
                }
            }
            self.scopes.pop();
            out
        }

        fn stmt(&mut self, d: u32) -> Option<StmtKind> {
            let nested = d < MAX_BLOCK_DEPTH;
            Some(match self.src.below(14) {
                0 | 1 => {
                    let ty = match self.src.below(10) {
                        0 => {
                            let len = if self.f.template.is_some() && self.src.chance(3) {
                                Len::Const(const_expr(self.src, &mut self.f, 0))
                            } else {
                                Len::Fixed(1 + self.src.below(64) as u32)
                            };
                            Type::Array {
                                elem: elem_type(self.src),
                                len,
                            }
                        }
                        1 if !self.m.tag_sets.is_empty() => {
                            Type::Tag(Handle::from_index(self.src.below(self.m.tag_sets.len())))
                        }
                        2 => Type::Matrix {
                            role: self
                                .src
                                .pick(&[MatrixRole::A, MatrixRole::B, MatrixRole::Acc]),
                            scalar: num(self.src),
                            rows: 16,
                            cols: self.src.pick(&[8, 16]),
                        },
                        _ => value_type(self.src),
                    };
                    let init = (!matches!(ty, Type::Array { .. }) && self.src.chance(6))
                        .then(|| self.expr(ty, 0));
                    let local = self.declare(ty);
                    self.scopes.last_mut().unwrap().push(local);
                    // Sometimes a 2-D (or 3-D) shape over a fixed array of a length it divides.
                    if let Type::Array {
                        len: xpu::ir::Len::Fixed(n),
                        ..
                    } = ty
                    {
                        if n % 4 == 0 && self.src.chance(2) {
                            let dims = if n % 8 == 0 && self.src.chance(2) {
                                vec![2, 2, n / 4]
                            } else {
                                vec![4, n / 4]
                            };
                            self.f.array_dims.push((Base::Local(local), dims));
                        }
                    }
                    StmtKind::Let { local, init }
                }
                2 | 3 => {
                    let locals = self.visible(|t| t.is_value());
                    let bases = self.bases(None, true);
                    match self.src.below(3) {
                        0 if !locals.is_empty() => {
                            let l = self.src.pick(&locals);
                            let ty = self.f.locals[l].ty;
                            let (place, read) = match ty {
                                Type::Vector(s, n) if self.src.chance(4) => {
                                    let lane = self.src.below(n as usize) as u8;
                                    let v = self.add(Expr::Local(l));
                                    (
                                        Place::Lane { local: l, lane },
                                        (Type::Scalar(s), Expr::Extract { vector: v, lane }),
                                    )
                                }
                                _ => (Place::Local(l), (ty, Expr::Local(l))),
                            };
                            let value = self.maybe_compound(read.0, read.1);
                            StmtKind::Assign { place, value }
                        }
                        _ if !bases.is_empty() => {
                            let base = self.src.pick(&bases);
                            let elem = self.elem_of(base);
                            let index = self.u32e(1);
                            let again = self.clone_tree(index);
                            let value = self.maybe_compound(
                                elem.value_type(),
                                Expr::Index { base, index: again },
                            );
                            StmtKind::Assign {
                                place: Place::Element { base, index },
                                value,
                            }
                        }
                        _ => StmtKind::Barrier,
                    }
                }
                4 if nested => {
                    let cond = self.expr(Type::BOOL, 1);
                    let then_block = self.block(d + 1);
                    let else_block = match self.src.below(3) {
                        0 => Vec::new(),
                        1 => self.block(d + 1),
                        _ => {
                            let cond = self.expr(Type::BOOL, 1);
                            let t = self.block(d + 1);
                            let e = self.block(d + 1);
                            vec![Stmt {
                                kind: StmtKind::If {
                                    cond,
                                    then_block: t,
                                    else_block: e,
                                },
                                span: Span::UNKNOWN,
                            }]
                        }
                    };
                    StmtKind::If {
                        cond,
                        then_block,
                        else_block,
                    }
                }
                5 if nested => {
                    let label = self.src.chance(3).then(|| {
                        self.labels += 1;
                        format!("l{}", self.labels)
                    });
                    self.scopes.push(Vec::new());
                    let kind = match self.src.below(4) {
                        0 => LoopKind::Infinite,
                        1 => LoopKind::While(self.expr(Type::BOOL, 1)),
                        2 => {
                            let s = self.src.pick(&[Scalar::U32, Scalar::I16, Scalar::F32]);
                            let init = self.expr(Type::Scalar(s), 1);
                            let var = self.declare(Type::Scalar(s));
                            self.scopes.last_mut().unwrap().push(var);
                            let cond = self.expr(Type::BOOL, 1);
                            let update = self.maybe_compound(Type::Scalar(s), Expr::Local(var));
                            LoopKind::Cond {
                                var,
                                init,
                                cond,
                                update,
                            }
                        }
                        _ => {
                            let s =
                                self.src
                                    .pick(&[Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U8]);
                            let start = self.expr(Type::Scalar(s), 1);
                            let end = self.expr(Type::Scalar(s), 1);
                            let step = self.src.chance(3).then(|| self.expr(Type::Scalar(s), 1));
                            let var = self.declare(Type::Scalar(s));
                            self.scopes.last_mut().unwrap().push(var);
                            LoopKind::For {
                                var,
                                start,
                                end,
                                step,
                            }
                        }
                    };
                    self.loops.push(label.clone());
                    // The body shares the loop's scope, as in the parser.
                    let body = self.block(d + 1);
                    self.loops.pop();
                    self.scopes.pop();
                    StmtKind::Loop { label, kind, body }
                }
                6 if !self.loops.is_empty() => {
                    let labels: Vec<String> = self.loops.iter().flatten().cloned().collect();
                    let label = (!labels.is_empty() && self.src.chance(4)).then(|| {
                        self.src
                            .pick(&labels.iter().map(|s| s.as_str()).collect::<Vec<_>>())
                            .to_string()
                    });
                    if self.src.chance(4) {
                        StmtKind::Break(label)
                    } else {
                        StmtKind::Continue(label)
                    }
                }
                7 => StmtKind::Return(self.f.ret.map(|t| self.expr(t, 0))),
                8 => {
                    let t = value_type(self.src);
                    StmtKind::Expr(self.expr(t, 0))
                }
                9 => StmtKind::Fence(if self.src.chance(4) {
                    FenceScope::Workgroup
                } else {
                    FenceScope::Device
                }),
                10 => {
                    let bases: Vec<Base> = self
                        .bases(None, true)
                        .into_iter()
                        .filter(|b| self.elem_of(*b).lanes == 1)
                        .collect();
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let s = self.elem_of(base).scalar;
                    let n = self.src.pick(&xpu::ir::VECTOR_LANES);
                    let index = self.u32e(1);
                    let value = self.expr(Type::Vector(s, n), 1);
                    let align = self.src.chance(2).then(|| self.src.pick(&[2, 8, 16]));
                    StmtKind::VStore {
                        base,
                        index,
                        value,
                        align,
                    }
                }
                11 => {
                    let bases = self.bases(None, true);
                    if bases.is_empty() {
                        return None;
                    }
                    let base = self.src.pick(&bases);
                    let scalar = self.elem_of(base).scalar;
                    let value = self.expr(
                        Type::Matrix {
                            role: MatrixRole::Acc,
                            scalar,
                            rows: 16,
                            cols: 16,
                        },
                        1,
                    );
                    let offset = self.u32e(1);
                    let stride = self.u32e(1);
                    StmtKind::MatrixStore {
                        value,
                        base,
                        offset,
                        stride,
                    }
                }
                12 if self.src.chance(2) => StmtKind::WaveBarrier,
                12 => StmtKind::Barrier,
                13 if nested => StmtKind::Block(self.block(d + 1)),
                _ => return None,
            })
        }

        /// A value for a place of type `ty` whose read is `read`: sometimes `read op v`, which
        /// prints as a compound assignment.
        fn maybe_compound(&mut self, ty: Type, read: Expr) -> ExprId {
            let numeric = ty.scalar().is_some_and(|s| s.is_numeric());
            if numeric && self.src.chance(3) {
                let lhs = self.add(read);
                let op = self.src.pick(&[
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Shl,
                    BinaryOp::BitXor,
                ]);
                let rhs = self.expr(ty, 1);
                self.add(Expr::Binary { op, lhs, rhs })
            } else {
                self.expr(ty, 0)
            }
        }
    }
}

/// Failures are kept in `proptest-regressions/text.txt` (committed). `XPU_PROPTEST_SCALE=N`
/// runs N times the cases, for a deeper search than CI's.
fn config(cases: u32) -> ProptestConfig {
    let scale: u32 = std::env::var("XPU_PROPTEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let cases = cases.saturating_mul(scale.max(1));
    ProptestConfig {
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/text.txt"),
        )),
        ..ProptestConfig::with_cases(cases)
    }
}

proptest! {
    #![proptest_config(config(1500))]

    /// print → parse → print is identical for generated modules.
    #[test]
    fn generated_modules_print_to_a_fixed_point(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let m = gen::module(&mut gen::Src::new(&bytes));
        if let Err(e) = fixed_point(&m) {
            prop_assert!(false, "{}", e);
        }
    }
}

// ---- the parser and printer never panic ----

/// Parses any text; when it parses, printing must be a fixed point (run blocks included).
fn parse_total(src: &str) -> Result<(), String> {
    if let Ok((m, runs)) = parse_file(src) {
        let first = print_file(&m, &runs);
        let (m2, runs2) = parse_file(&first).map_err(|d| {
            format!(
                "reparse failed: {}\n--- printed ---\n{first}\n--- from ---\n{src}",
                d.render("p")
            )
        })?;
        let second = print_file(&m2, &runs2);
        if first != second {
            return Err(format!(
                "not a fixed point:\n{first}\n---\n{second}\n--- from ---\n{src}"
            ));
        }
    }
    Ok(())
}

/// Valid sources to mutate: the kernel files under tests/filetests and generated modules.
fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut out = Vec::new();
        let mut stack = vec![std::path::PathBuf::from("tests/filetests")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "xk") {
                    if let Ok(s) = std::fs::read_to_string(&p) {
                        out.push(s);
                    }
                }
            }
        }
        out.sort();
        for seed in 0..40u32 {
            let bytes: Vec<u8> = (0..600u32)
                .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed * 7919) >> 13) as u8)
                .collect();
            out.push(print(&gen::module(&mut gen::Src::new(&bytes))));
        }
        out
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize),
    Replace(usize, usize),
}

/// `src` with token-level mutations applied (whitespace and comments between tokens kept).
fn mutate(src: &str, muts: &[Mutation]) -> String {
    let (tokens, _) = xpu::ir::text::lexer::tokenize(src);
    let mut segs: Vec<(String, String)> = Vec::new();
    let mut prev = 0;
    for t in &tokens {
        segs.push((
            src[prev..t.start].to_string(),
            src[t.start..t.end].to_string(),
        ));
        prev = t.end;
    }
    for m in muts {
        let n = segs.len();
        if n == 0 {
            break;
        }
        match *m {
            Mutation::Delete(i) => {
                segs.remove(i % n);
            }
            Mutation::Duplicate(i) => {
                let s = segs[i % n].clone();
                segs.insert(i % n, s);
            }
            Mutation::Swap(i) => {
                let (a, b) = (i % n, (i + 1) % n);
                let t = segs[a].1.clone();
                segs[a].1 = std::mem::replace(&mut segs[b].1, t);
            }
            Mutation::Replace(i, j) => {
                segs[i % n].1 = segs[j % n].1.clone();
            }
        }
    }
    segs.into_iter().map(|(ws, t)| ws + &t).collect()
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        any::<usize>().prop_map(Mutation::Swap),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Replace(i, j)),
    ]
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,400}") {
        if let Err(e) = parse_total(&src) {
            prop_assert!(false, "{}", e);
        }
    }

    /// Strings over the format's own alphabet reach deeper into the grammar.
    #[test]
    fn token_soup_never_panics(words in proptest::collection::vec(prop_oneof![
        Just("kernel"), Just("device fn"), Just("tagset"), Just("run"), Just("let"), Just("x"),
        Just("y"), Just(": u32"), Just("="), Just(";"), Just("{"), Just("}"), Just("("),
        Just(")"), Just("["), Just("]"), Just("<"), Just(">"), Just(">>"), Just(","), Just("1"),
        Just("-1"), Just("2.5"), Just("0xff_u8"), Just("if"), Just("else"), Just("for"),
        Just("in"), Just(".."), Just("'l"), Just("loop"), Just("break"), Just("return"),
        Just("@wave(32)"), Just("vec4<f32>"), Just("buf<f32, rw>"), Just(".x"), Just("+"),
        Just("-"), Just("as"), Just("select"), Just("max"), Just("\""), Just("grid = [1];"),
        Just("arg"), Just("expect"), Just("global_id"), Just("shared"), Just("::"),
    ], 0..60)) {
        let src = words.join(" ");
        if let Err(e) = parse_total(&src) {
            prop_assert!(false, "{}", e);
        }
    }
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(src) = xpu::ir::text::decode(&bytes) {
            if let Err(e) = parse_total(src) {
                prop_assert!(false, "{}", e);
            }
        }
        let lossy = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse_total(&lossy) {
            prop_assert!(false, "{}", e);
        }
    }
}

proptest! {
    #![proptest_config(config(4000))]

    /// Valid files with tokens deleted, duplicated, swapped or replaced: no panic, and a
    /// fixed point whenever the result still parses.
    #[test]
    fn mutated_files_never_panic(file in any::<usize>(), muts in proptest::collection::vec(mutation(), 1..4)) {
        let c = corpus();
        let src = &c[file % c.len()];
        let mutated = mutate(src, &muts);
        if let Err(e) = parse_total(&mutated) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn deepest_accepted_input_fits_a_small_stack() {
    // Just inside both limits at once: nested blocks around nested parentheses around a
    // long operator chain, parsed, lowered, printed and re-parsed on a 2 MiB stack (a test
    // thread's default) in a debug build.
    let blocks = 120;
    let parens = 4;
    let src = format!(
        "kernel k(a: i32, o: buf<i32, rw>) {{\n{}o[0] = {}a{}{};\n{}}}\n",
        "if true {\n".repeat(blocks),
        "(".repeat(parens),
        " + a".repeat(126),
        ")".repeat(parens),
        "}\n".repeat(blocks)
    );
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || fixed_point(&must_parse(&src)))
        .unwrap();
    handle.join().expect("no stack overflow").unwrap();
}

#[test]
fn found_by_the_generator() {
    // A length literal beyond u32 is a constant expression (for the verifier to judge).
    let m = must_parse("kernel k<N>() {\n    shared s: [f32; 72057594037927936];\n}\n");
    let f = &m.functions[Handle::from_index(0)];
    assert!(matches!(
        f.shared.iter().next().unwrap().1.len,
        Some(Len::Const(_))
    ));
    fixed_point(&m).unwrap();
    // An array element with a large literal index is an element, not a lane.
    canonical("kernel k() {\n    let x: [bool; 1];\n    x[4294967295] = true;\n}\n");
}

#[test]
fn a_repeated_run_arg_is_an_error_at_its_name() {
    // Each parameter gets one value: a second `arg` for it was silently ignored (the first
    // was used), while repeated `expect`s are all checked.
    let src = "kernel k(o: buf<u32, rw>, n: u32) {\n    o[0] = n;\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n    arg o = fill(1, 0);\n    arg n = 1;\n    arg n = 2;\n    expect o = [2];\n}\n";
    assert_eq!(errors(src), vec!["10:9 XPU-P014"]);
    let d = parse_file(src).unwrap_err();
    assert!(
        d.0[0].message.contains("`arg n` given twice"),
        "{}",
        d.0[0].message
    );
    // Distinct parameters, and repeated `expect`s, stay fine.
    let ok = src.replace("    arg n = 2;\n", "    expect o = [1];\n");
    assert!(parse_file(&ok).is_ok());
}

#[test]
fn a_keyword_where_a_name_is_declared_is_named_as_a_keyword() {
    for (src, at) in [
        ("kernel k(step: u32) {\n}\n", "1:10"),
        ("kernel k() {\n    let in: u32 = 1;\n}\n", "2:9"),
        ("kernel k() {\n    for loop: u32 in 0u32..4u32 {\n    }\n}\n", "2:9"),
        ("device fn return() {\n}\n", "1:11"),
        ("kernel k(o: buf<u32, rw>) {\n}\n\nrun k {\n    grid = [1];\n    block = [1];\n    arg step = 1;\n}\n", "7:9"),
    ] {
        assert_eq!(errors(src), vec![format!("{at} XPU-P011")], "{src}");
        let d = parse_file(src).unwrap_err();
        let m = &d.0[0].message;
        assert!(m.contains("keyword") && m.contains("cannot be a name"), "{m}");
    }
}

// ---- print and assert (issue 23 item 9) ----

#[test]
fn print_and_assert_are_canonical() {
    canonical(
        "kernel dbg(out: buf<f32, rw>, n: u32) {
    let i: u32 = global_id.x;
    print(\"i={} n={} {{braces}}\", i, n);
    print(\"no values\\n\");
    print(\"{} {}\", out[i] * 2.0, i < n);
    assert(i < n && n > 0, \"i in \\\"range\\\"\");
}
",
    );
}

#[test]
fn print_formats_are_checked_in_the_text() {
    assert_eq!(
        errors("kernel k(n: u32) {\n    print(\"{} {}\", n);\n}\n"),
        vec!["2:11 XPU-P032"]
    );
    assert_eq!(
        errors("kernel k(n: u32) {\n    print(\"a { b\", n);\n}\n"),
        vec!["2:11 XPU-P032"]
    );
    // The format must be a string, the message too.
    assert!(errors("kernel k(n: u32) {\n    print(n);\n}\n")[0].ends_with("XPU-P003"));
    assert!(errors("kernel k(n: u32) {\n    assert(n < 1, n);\n}\n")[0].ends_with("XPU-P003"));
}

/// Helpers that take memory (issue 23 item 4): the parameter types and by-reference
/// arguments print canonically; the verified module, its calls inlined (with a labelled
/// one-iteration loop for an early `return`), prints as text that parses and verifies back.
#[test]
fn memory_helpers_are_canonical_and_inlined_kernels_print_back() {
    let src = "device fn find(keys: buf<u32>, n: u32, v: u32) -> u32 {
    for j: u32 in 0..n {
        if keys[j] >= v {
            return j;
        }
    }
    return n;
}

device fn tree(s: shared [u32; 64], t: u32) {
    s[t] += 1;
}

device fn any(s: shared [u32], a: [f32; 4], out: buf<f32, rw>) {
    out[0] = a[s[0]];
}

kernel k(out: buf<u32, rw>, keys: buf<u32>, o: buf<f32, rw>) {
    shared t: [u32; 64];
    let a: [f32; 4];
    out[0] = find(keys, 8, 3);
    tree(t, local_id.x);
    any(t, a, o);
}
";
    canonical(src);
    let vm = must_parse(src).verify().unwrap();
    let printed = print(vm.module());
    assert!(printed.contains("'inline_find_"), "{printed}");
    fixed_point(vm.module()).unwrap();
    must_parse(&printed)
        .verify()
        .unwrap_or_else(|d| panic!("{d}\n{printed}"));
}

#[test]
fn tile_widths_and_wave_barrier_are_canonical() {
    // Issue 23 item 3: `width = T` prints last, as written; `wave_barrier();` a statement.
    canonical(
        "@wave(32)
kernel tiles(a: buf<u32, rw>, f: buf<f32, rw>) {
    let i: u32 = global_id.x;
    a[i] = wave_shuffle(a[i], 3, width = 16) + wave_shuffle_down(a[i], 1, width = 4);
    wave_barrier();
    a[i] = wave_reduce_sum(a[i], width = 8) ^ wave_exclusive_scan_max(a[i], width = 32);
    f[i] = wave_broadcast(f[i], 1, width = 2) + wave_rotate(f[i], 5, width = 1);
}
",
    );
}

#[test]
fn the_fuzzer_generates_tile_widths_that_verify() {
    // Issue 23 item 3: the differential fuzzer's kernels use `width = T` now and then, and
    // every one of them verifies (a tile no wider than a declared `@wave`).
    let mut with_tiles = 0;
    for seed in 0..300u64 {
        let case = xpu::fuzz::gen::generate_for_cpu(seed);
        if case.src.contains(", width = ") {
            with_tiles += 1;
            let m = xpu::ir::parse(&case.src).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            m.verify()
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", case.src));
        }
    }
    assert!(
        with_tiles >= 10,
        "only {with_tiles} of 300 cases use a tile"
    );
}
