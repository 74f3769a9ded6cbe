//! Semantics tests of the reference interpreter from kernel text (docs/semantics.md): integer
//! wrapping, shifts, division, casts, NaN in min/max, barriers, wave verbs at several widths,
//! atomics, cooperative matrices, function tags, the shuffle option, and each UB kind of the
//! `tests/ub` corpus with its location.

use xpu::interp::{self, Arg, Buffer, Geometry, InterpError, Options, Report, UbKind, UbReport};
use xpu::ir::{Literal, Scalar, VerifiedModule};

fn module(src: &str) -> VerifiedModule {
    let m = xpu::ir::parse(src).unwrap_or_else(|d| panic!("does not parse:\n{d}"));
    xpu::ir::verify(m).unwrap_or_else(|d| panic!("does not verify:\n{d}"))
}

fn run(
    m: &VerifiedModule,
    kernel: &str,
    geo: Geometry,
    args: &mut [Arg<'_>],
    opts: &Options,
) -> Result<Report, InterpError> {
    interp::launch(m, kernel, &geo, args, opts)
}

fn ub(r: Result<Report, InterpError>) -> UbReport {
    match r {
        Err(InterpError::Ub(u)) => *u,
        other => panic!("expected undefined behaviour, got {other:?}"),
    }
}

fn u32s(v: &Buffer) -> Vec<u32> {
    v.to_values()
}

/// Runs a one-buffer kernel `k(out: buf<T, rw>)` over `n` work-items in one workgroup.
fn out_only(src: &str, n: u32, elems: usize, size: usize, opts: &Options) -> Buffer {
    let m = module(src);
    let mut out = Buffer::uninit(elems * size);
    run(
        &m,
        "k",
        Geometry::linear(1, n),
        &mut [Arg::Buffer(&mut out)],
        opts,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn integers_wrap_and_divide() {
    let out = out_only(
        r#"
kernel k(out: buf<i32, rw>) {
    let big: i32 = 2147483647;
    let min: i32 = -2147483648;
    let m1: i32 = -1;
    out[0] = big + 1;
    out[1] = min / m1;
    out[2] = min % m1;
    out[3] = -7 / 2;
    out[4] = -7 % 2;
    out[5] = 7 % -2;
    out[6] = -min;
    out[7] = big * 2;
}
"#,
        1,
        8,
        4,
        &Options::default(),
    );
    assert_eq!(
        out.to_values::<i32>(),
        vec![i32::MIN, i32::MIN, 0, -3, -1, 1, i32::MIN, -2]
    );
    let out = out_only(
        r#"
kernel k(out: buf<u8, rw>) {
    let a: u8 = 200;
    out[0] = a + a;
    out[1] = a * 3u8;
    out[2] = 3u8 - a;
    out[3] = -a;
}
"#,
        1,
        4,
        1,
        &Options::default(),
    );
    assert_eq!(out.to_values::<u8>(), vec![144, 88, 59, 56]);
}

#[test]
fn shift_amounts_are_modulo_the_width() {
    let out = out_only(
        r#"
kernel k(out: buf<u32, rw>) {
    let x: u32 = 1;
    let s33: u32 = 33;
    let s32: u32 = 32;
    out[0] = x << s33;
    out[1] = x << s32;
    out[2] = 0x80000000 >> s33;
    let y: i32 = -64;
    let t: i32 = 35;
    out[3] = bitcast<u32>(y >> t);
    let z: i8 = -128i8;
    let u: i8 = 9i8;
    out[4] = bitcast<u32>((z >> u) as i32);
    let w: u64 = 1u64;
    let v: u64 = 64u64;
    out[5] = (w << v) as u32;
}
"#,
        1,
        6,
        4,
        &Options::default(),
    );
    assert_eq!(
        u32s(&out),
        vec![2, 1, 0x4000_0000, (-8i32) as u32, (-64i32) as u32, 1]
    );
}

#[test]
fn float_to_int_saturates_and_nan_is_zero() {
    let out = out_only(
        r#"
kernel k(out: buf<i32, rw>) {
    let qnan: f32 = 0.0 / 0.0;
    let pinf: f32 = 1.0 / 0.0;
    out[0] = qnan as i32;
    out[1] = pinf as i32;
    out[2] = -pinf as i32;
    out[3] = 3.99 as i32;
    out[4] = -3.99 as i32;
    out[5] = (-1.5 as u8) as i32;
    out[6] = (300.0 as u8) as i32;
    out[7] = (16777217 as f32) as i32;
    out[8] = (true as i32) + ((2.5 as bool) as i32) * 10 + ((0.0 as bool) as i32) * 100;
}
"#,
        1,
        9,
        4,
        &Options::default(),
    );
    assert_eq!(
        out.to_values::<i32>(),
        vec![0, i32::MAX, i32::MIN, 3, -3, 0, 255, 16777216, 11]
    );
}

#[test]
fn min_max_return_the_number_when_one_operand_is_nan() {
    let out = out_only(
        r#"
kernel k(out: buf<f32, rw>) {
    let qnan: f32 = 0.0 / 0.0;
    out[0] = min(qnan, 1.0);
    out[1] = min(2.0, qnan);
    out[2] = max(qnan, -3.0);
    out[3] = max(qnan, qnan);
    out[4] = clamp(qnan, 0.0, 1.0);
    out[5] = min(0.0, -0.0);
}
"#,
        1,
        6,
        4,
        &Options::default(),
    );
    let v = out.to_values::<f32>();
    assert_eq!(&v[..3], &[1.0, 2.0, -3.0]);
    assert!(v[3].is_nan());
    assert_eq!(v[4], 0.0);
    assert!(v[5] == 0.0 && v[5].is_sign_negative());
}

#[test]
fn f16_arithmetic_rounds_to_half() {
    let out = out_only(
        r#"
kernel k(out: buf<f16, rw>) {
    let a: f16 = 1.0f16;
    let b: f16 = 0.0004883f16;
    out[0] = a + b;
    out[1] = 65504.0f16 * 2.0f16;
    out[2] = (1.0 / 3.0) as f16;
}
"#,
        1,
        3,
        2,
        &Options::default(),
    );
    let v = out.to_values::<half::f16>();
    assert_eq!(v[0], half::f16::from_f32(1.0 + 0.0004883));
    assert!(v[1].is_infinite());
    assert_eq!(v[2], half::f16::from_f64(1.0 / 3.0));
}

const REDUCE: &str = r#"
kernel reduce(inp: buf<u32>, out: buf<u32, rw>) {
    shared t: [u32; 64];
    let l: u32 = local_id.x;
    t[l] = inp[global_id.x];
    barrier();
    let s: u32 = 32;
    while s > 0 {
        if l < s {
            t[l] = t[l] + t[l + s];
        }
        barrier();
        s = s >> 1;
    }
    if l == 0 {
        out[group_id.x] = t[0];
    }
}
"#;

#[test]
fn barriers_order_shared_memory_and_shuffling_does_not_change_the_result() {
    let m = module(REDUCE);
    let input: Vec<u32> = (0..256).map(|i| i * 3 + 1).collect();
    let want: Vec<u32> = input.chunks(64).map(|c| c.iter().sum()).collect();
    for seed in [None, Some(1), Some(2), Some(99)] {
        let mut inp = Buffer::from_values(&input);
        let mut out = Buffer::uninit(16);
        let opts = Options {
            shuffle_seed: seed,
            ..Options::default()
        };
        run(
            &m,
            "reduce",
            Geometry::linear(4, 64),
            &mut [Arg::Buffer(&mut inp), Arg::Buffer(&mut out)],
            &opts,
        )
        .unwrap();
        assert_eq!(u32s(&out), want, "seed {seed:?}");
    }
}

#[test]
fn shuffle_exposes_order_dependence() {
    // Each work-item swaps its id into a slot and records what it got back: the old values
    // depend on the order work-items run in, which only the shuffle option varies.
    let m = module(
        r#"
kernel k(slot: buf<u32, rw>, got: buf<u32, rw>) {
    got[global_id.x] = atomic_exchange(slot[0], global_id.x);
}
"#,
    );
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in [None, Some(1), Some(2), Some(3)] {
        let mut slot = Buffer::from_values(&[1000u32]);
        let mut got = Buffer::uninit(64 * 4);
        let opts = Options {
            shuffle_seed: seed,
            ..Options::default()
        };
        run(
            &m,
            "k",
            Geometry::linear(2, 32),
            &mut [Arg::Buffer(&mut slot), Arg::Buffer(&mut got)],
            &opts,
        )
        .unwrap();
        outcomes.insert(u32s(&got));
        // Deterministic per seed.
        let mut slot2 = Buffer::from_values(&[1000u32]);
        let mut got2 = Buffer::uninit(64 * 4);
        run(
            &m,
            "k",
            Geometry::linear(2, 32),
            &mut [Arg::Buffer(&mut slot2), Arg::Buffer(&mut got2)],
            &opts,
        )
        .unwrap();
        assert_eq!(got, got2);
    }
    assert!(outcomes.len() > 1);
}

#[test]
fn atomics() {
    let m = module(
        r#"
kernel k(c: buf<u32, rw>, mx: buf<i32, rw>, cas: buf<u32, rw>, f: buf<f32, rw>) {
    atomic_add(c[0], 1);
    atomic_max(mx[0], (global_id.x as i32) - 100, seq_cst);
    atomic_compare_exchange(cas[0], global_id.x, global_id.x + 1);
    atomic_add(f[0], 0.5);
}
"#,
    );
    for seed in [None, Some(5)] {
        let mut c = Buffer::from_values(&[0u32]);
        let mut mx = Buffer::from_values(&[i32::MIN]);
        let mut cas = Buffer::from_values(&[0u32]);
        let mut f = Buffer::from_values(&[0.0f32]);
        let opts = Options {
            shuffle_seed: seed,
            ..Options::default()
        };
        run(
            &m,
            "k",
            Geometry::linear(4, 64),
            &mut [
                Arg::Buffer(&mut c),
                Arg::Buffer(&mut mx),
                Arg::Buffer(&mut cas),
                Arg::Buffer(&mut f),
            ],
            &opts,
        )
        .unwrap();
        assert_eq!(u32s(&c), vec![256]);
        assert_eq!(mx.to_values::<i32>(), vec![155]);
        assert_eq!(f.to_values::<f32>(), vec![128.0]);
        if seed.is_none() {
            // In order, work-item i finds i and stores i + 1.
            assert_eq!(u32s(&cas), vec![256]);
        }
    }
}

const WAVES: &str = r#"
kernel k(out: buf<u32, rw>) {
    let l: u32 = lane_id;
    let g: u32 = global_id.x;
    out[8 * g] = wave_reduce_sum(l);
    out[8 * g + 1] = wave_inclusive_scan_sum(l);
    out[8 * g + 2] = wave_exclusive_scan_max(l);
    out[8 * g + 3] = wave_broadcast(g, wave_width - 1);
    out[8 * g + 4] = wave_shuffle_xor(l, 1);
    out[8 * g + 5] = wave_ballot(l % 2 == 0) as u32;
    out[8 * g + 6] = select(wave_elect(), 1, 0) + select(wave_all(l < 64), 2, 0);
    out[8 * g + 7] = wave_shuffle_up(l, 2);
}
"#;

#[test]
fn wave_verbs_at_widths_1_4_32_64() {
    let m = module(WAVES);
    let n = 128u32;
    for w in [1u32, 4, 32, 64] {
        let mut out = Buffer::uninit(8 * 4 * n as usize);
        let opts = Options {
            wave_width: Some(w),
            ..Options::default()
        };
        run(
            &m,
            "k",
            Geometry::linear(2, n / 2),
            &mut [Arg::Buffer(&mut out)],
            &opts,
        )
        .unwrap();
        let v = u32s(&out);
        for g in 0..n {
            let l = g % w;
            let first = g - l;
            let row = &v[8 * g as usize..8 * g as usize + 8];
            let evens: u64 = (0..w).filter(|x| x % 2 == 0).map(|x| 1u64 << x).sum();
            let want = [
                (0..w).sum::<u32>(),
                (0..=l).sum::<u32>(),
                if l == 0 { 0 } else { l - 1 },
                first + w - 1,
                if (l ^ 1) < w { l ^ 1 } else { l },
                evens as u32,
                u32::from(l == 0) + 2,
                if l >= 2 { l - 2 } else { l },
            ];
            assert_eq!(row, &want, "work-item {g} at width {w}");
        }
    }
}

#[test]
fn wave_verbs_in_divergent_code_see_the_active_lanes() {
    let m = module(
        r#"
kernel k(out: buf<u32, rw>) {
    let l: u32 = lane_id;
    if l % 3 == 0 {
        out[global_id.x] = wave_reduce_sum(1u32);
    } else {
        out[global_id.x] = 100 + wave_reduce_sum(1u32);
    }
    for i: u32 in 0..l {
        out[global_id.x] = out[global_id.x] + 0;
    }
    out[global_id.x + 8] = wave_reduce_sum(1u32);
}
"#,
    );
    let mut out = Buffer::uninit(16 * 4);
    let opts = Options {
        wave_width: Some(8),
        ..Options::default()
    };
    run(
        &m,
        "k",
        Geometry::linear(1, 8),
        &mut [Arg::Buffer(&mut out)],
        &opts,
    )
    .unwrap();
    // Lanes 0, 3, 6 take the first branch; all 8 reconverge after the loop.
    assert_eq!(
        u32s(&out),
        vec![3, 105, 105, 3, 105, 105, 3, 105, 8, 8, 8, 8, 8, 8, 8, 8]
    );
}

#[test]
fn cooperative_matrix_mma() {
    let m = module(
        r#"
kernel k(a: buf<f16>, b: buf<f16>, c: buf<f32, rw>) {
    let fa: matrix<a, f16, 16, 16> = matrix_load<a, f16, 16, 16>(a, 0, 16);
    let fb: matrix<b, f16, 16, 16> = matrix_load<b, f16, 16, 16>(b, 0, 16);
    let acc: matrix<acc, f32, 16, 16> = matrix_fill<acc, f32, 16, 16>(1.0);
    acc = matrix_mma(fa, fb, acc);
    matrix_store(acc, c, 0, 16);
}
"#,
    );
    let a: Vec<half::f16> = (0..256)
        .map(|i| half::f16::from_f32((i % 7) as f32 - 3.0))
        .collect();
    let b: Vec<half::f16> = (0..256)
        .map(|i| half::f16::from_f32((i % 5) as f32 * 0.5))
        .collect();
    for w in [8u32, 32] {
        let mut ba = Buffer::from_values(&a);
        let mut bb = Buffer::from_values(&b);
        let mut bc = Buffer::uninit(256 * 4);
        let opts = Options {
            wave_width: Some(w),
            ..Options::default()
        };
        run(
            &m,
            "k",
            Geometry::linear(1, w),
            &mut [
                Arg::Buffer(&mut ba),
                Arg::Buffer(&mut bb),
                Arg::Buffer(&mut bc),
            ],
            &opts,
        )
        .unwrap();
        let c = bc.to_values::<f32>();
        for i in 0..16 {
            for j in 0..16 {
                let want: f32 = 1.0
                    + (0..16)
                        .map(|k| a[i * 16 + k].to_f32() * b[k * 16 + j].to_f32())
                        .sum::<f32>();
                assert_eq!(c[i * 16 + j], want, "c[{i}][{j}] at wave {w}");
            }
        }
    }
}

#[test]
fn out_of_range_tag_dispatch_is_a_no_op_with_a_zero_result() {
    let m = module(
        r#"
tagset Op = [double, square];
device fn double(x: f32) -> f32 { return 2.0 * x; }
device fn square(x: f32) -> f32 { return x * x; }
kernel k(out: buf<f32, rw>, t: tag<Op>) {
    out[0] = dispatch(t, 3.0);
    out[1] = dispatch(Op::square, 3.0);
}
"#,
    );
    for (tag, first) in [(0u32, 6.0f32), (1, 9.0), (2, 0.0), (77, 0.0)] {
        let mut out = Buffer::uninit(8);
        run(
            &m,
            "k",
            Geometry::linear(1, 1),
            &mut [Arg::Buffer(&mut out), Arg::Tag(tag)],
            &Options::default(),
        )
        .unwrap();
        assert_eq!(out.to_values::<f32>(), vec![first, 9.0], "tag {tag}");
    }
}

#[test]
fn vload_vstore_and_vectors() {
    let m = module(
        r#"
kernel k(x: buf<f32>, out: buf<f32, rw>) {
    let i: u32 = global_id.x;
    let v: vec4<f32> = vload<4>(x, 4 * i, align = 16);
    let w: vec4<f32> = v.wzyx * vec4<f32>(2.0);
    vstore(out, 4 * i, w, align = 16);
}
"#,
    );
    let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let mut bx = Buffer::from_values(&x);
    let mut out = Buffer::uninit(64);
    run(
        &m,
        "k",
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut bx), Arg::Buffer(&mut out)],
        &Options::default(),
    )
    .unwrap();
    let want: Vec<f32> = (0..16)
        .map(|i| 2.0 * (4 * (i / 4) + 3 - i % 4) as f32)
        .collect();
    assert_eq!(out.to_values::<f32>(), want);
}

#[test]
fn the_first_ub_stops_the_launch_and_buffers_keep_earlier_writes() {
    let m = module(
        r#"
kernel k(out: buf<u32, rw>, d: buf<u32>) {
    out[global_id.x] = 100 / d[global_id.x];
}
"#,
    );
    let mut out = Buffer::uninit(16);
    let mut d = Buffer::from_values(&[1u32, 2, 0, 4]);
    let u = ub(run(
        &m,
        "k",
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut out), Arg::Buffer(&mut d)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::DivByZero);
    assert_eq!(u.item.global, [2, 0, 0]);
    assert_eq!((u.span.line, u.kernel.as_str()), (3, "k"));
    assert!(out.is_defined(0) && out.is_defined(7) && !out.is_defined(8));
    assert_eq!(&u32s(&out)[..2], &[100, 50]);
    let d = u.to_diagnostic();
    assert_eq!(d.code, "XPU-REF02");
}

#[test]
fn a_template_is_refused_by_name() {
    let m = module(
        r#"
kernel T<N>(out: buf<u32, rw>)
    instantiate <4>
{
    out[0] = N;
}
"#,
    );
    let mut out = Buffer::uninit(4);
    let e = interp::launch(
        &m,
        "T",
        &Geometry::linear(1, 1),
        &mut [Arg::Buffer(&mut out)],
        &Options::default(),
    )
    .unwrap_err();
    match e {
        InterpError::Refused(d) => {
            assert_eq!(d.code, "XPU-REF01");
            assert!(d.message.contains('T'), "{d}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    interp::launch(
        &m,
        "T<4>",
        &Geometry::linear(1, 1),
        &mut [Arg::Buffer(&mut out)],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(u32s(&out), vec![4]);
}

#[test]
fn scalar_arguments_are_checked() {
    let m = module("kernel k(out: buf<u32, rw>, n: u32) { out[0] = n; }");
    let mut out = Buffer::uninit(4);
    let e = interp::launch(
        &m,
        "k",
        &Geometry::linear(1, 1),
        &mut [
            Arg::Buffer(&mut out),
            Arg::Scalar(Literal::float(1.0, Scalar::F32)),
        ],
        &Options::default(),
    )
    .unwrap_err();
    assert!(matches!(e, InterpError::BadLaunch(_)), "{e}");
}

/// Runs the run block of one `tests/ub` file on the interpreter, building its arguments the
/// way the filetest runner does.
fn run_ub_file(path: &std::path::Path) -> (String, UbReport) {
    use xpu::ir::text::run::{ArgInit, Expect};
    let src = std::fs::read_to_string(path).unwrap();
    let (m, specs) =
        xpu::ir::parse_file(&src).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let vm = xpu::ir::verify(m).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let spec = &specs[0];
    let kind = spec
        .expects
        .iter()
        .find_map(|e| match e {
            Expect::Ub { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .expect("an `expect ub` line");
    let h = vm.kernel(&spec.kernel).unwrap();
    let f = vm.function(h);
    let mut bufs: Vec<Buffer> = Vec::new();
    let mut scalars: Vec<Option<Literal>> = Vec::new();
    for p in &f.params {
        let a = spec
            .args
            .iter()
            .find(|a| a.name == p.name)
            .expect("an arg per parameter");
        match (p.ty, &a.init) {
            (xpu::ir::Type::Buffer { elem, .. }, ArgInit::Uninit { len }) => {
                bufs.push(Buffer::uninit(*len as usize * elem.size() as usize));
                scalars.push(None);
            }
            (xpu::ir::Type::Buffer { elem, .. }, init) => {
                let slots = xpu::filetest::runner::slots(init, elem).unwrap();
                let size = elem.scalar.size() as usize;
                let bytes: Vec<u8> = slots
                    .iter()
                    .flat_map(|v| v.to_le_bytes()[..size].to_vec())
                    .collect();
                bufs.push(Buffer::from_bytes(bytes));
                scalars.push(None);
            }
            (xpu::ir::Type::Scalar(s), ArgInit::Scalar(v)) => {
                let bits = xpu::filetest::runner::scalar_bits(*v, s).unwrap();
                let lit = if s.is_float() {
                    let x = match s {
                        Scalar::F32 => f32::from_bits(bits as u32) as f64,
                        Scalar::F64 => f64::from_bits(bits),
                        _ => half::f16::from_bits(bits as u16).to_f64(),
                    };
                    Literal::float(x, s)
                } else if s == Scalar::Bool {
                    Literal::Bool(bits != 0)
                } else {
                    Literal::Int { bits, ty: s }
                };
                scalars.push(Some(lit));
            }
            (t, _) => panic!("{}: unsupported parameter {t:?}", path.display()),
        }
    }
    let mut bi = bufs.iter_mut();
    let mut args: Vec<Arg<'_>> = scalars
        .into_iter()
        .map(|s| match s {
            Some(l) => Arg::Scalar(l),
            None => Arg::Buffer(bi.next().unwrap()),
        })
        .collect();
    let geo = Geometry {
        grid: spec.grid,
        block: spec.block,
        shared_bytes: spec.shared_bytes,
    };
    let opts = Options {
        wave_width: spec.wave,
        ..Options::default()
    };
    let r = interp::launch(&vm, &spec.kernel, &geo, &mut args, &opts);
    (kind, ub(r))
}

/// Every file of the UB corpus: the kind its run block expects, the line of the offending
/// statement or expression, and the work-item (global x) the report names.
#[test]
fn ub_corpus_reports_kind_location_and_work_item() {
    let table: &[(&str, UbKind, u32, u32)] = &[
        ("out_of_bounds_buffer", UbKind::OutOfBounds, 5, 63),
        ("out_of_bounds_shared", UbKind::OutOfBounds, 5, 63),
        ("out_of_bounds_private", UbKind::OutOfBounds, 5, 0),
        ("out_of_bounds_wave_lane", UbKind::OutOfBounds, 4, 0),
        ("out_of_bounds_laid_out", UbKind::OutOfBounds, 8, 0),
        ("data_race_shared", UbKind::DataRace, 11, 1),
        ("data_race_global", UbKind::DataRace, 4, 1),
        ("data_race_atomic_and_plain", UbKind::DataRace, 4, 1),
        ("data_race_atomic_then_plain", UbKind::DataRace, 7, 31),
        ("data_race_plain_then_atomic", UbKind::DataRace, 8, 1),
        ("data_race_across_groups", UbKind::DataRace, 6, 16),
        ("data_race_atomic_across_groups", UbKind::DataRace, 8, 32),
        ("out_of_bounds_scattered_store", UbKind::OutOfBounds, 6, 16),
        ("barrier_divergence_branch", UbKind::BarrierDivergence, 5, 0),
        ("barrier_divergence_loop", UbKind::BarrierDivergence, 10, 0),
        (
            "barrier_divergence_return",
            UbKind::BarrierDivergence,
            10,
            0,
        ),
        ("barrier_divergence_matrix", UbKind::BarrierDivergence, 6, 0),
        ("uninit_read_buffer", UbKind::UninitRead, 3, 0),
        ("uninit_read_shared", UbKind::UninitRead, 10, 0),
        ("uninit_read_local", UbKind::UninitRead, 9, 0),
        ("misaligned_vload", UbKind::Misaligned, 4, 0),
        ("misaligned_vstore", UbKind::Misaligned, 4, 0),
        ("div_by_zero", UbKind::DivByZero, 4, 2),
        ("rem_by_zero", UbKind::DivByZero, 3, 0),
        ("non_uniform_broadcast", UbKind::NonUniform, 3, 1),
        // Issue 23 item 3: wave barriers and tiles.
        ("data_race_wave_barrier_no_barrier", UbKind::DataRace, 12, 1),
        ("data_race_wave_barrier_other_wave", UbKind::DataRace, 9, 8),
        (
            "barrier_divergence_wave_barrier",
            UbKind::BarrierDivergence,
            6,
            0,
        ),
        ("out_of_bounds_tile_broadcast", UbKind::OutOfBounds, 3, 0),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ub");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xk"))
        .collect();
    files.sort();
    assert_eq!(files.len(), table.len(), "a table row per corpus file");
    let mut covered = std::collections::BTreeSet::new();
    for path in files {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let &(_, kind, line, gx) = table
            .iter()
            .find(|r| r.0 == stem)
            .unwrap_or_else(|| panic!("{stem} has no table row"));
        let (expected, u) = run_ub_file(&path);
        assert_eq!(expected, kind.name(), "{stem}: the run block's kind");
        assert_eq!(u.kind, kind, "{stem}: {u}");
        assert_eq!(u.span.line, line, "{stem}: {u}");
        assert_eq!(u.item.global[0], gx, "{stem}: {u}");
        assert!(!u.kernel.is_empty() && u.span.col > 0, "{stem}: {u}");
        if kind == UbKind::DataRace {
            // The other access is located too.
            assert!(u.detail.contains(" that no barrier orders"), "{stem}: {u}");
            let at = u.detail.split(" at ").nth(1).unwrap_or("");
            assert!(at.starts_with(|c: char| c.is_ascii_digit()), "{stem}: {u}");
        }
        covered.insert(kind.name());
    }
    assert_eq!(
        covered.len(),
        UbKind::ALL.len(),
        "every UB kind has a corpus file"
    );
}

#[test]
fn dynamic_shared_memory_and_3d_geometry() {
    let m = module(
        r#"
kernel k(out: buf<u32, rw>) {
    shared dyn: [u32];
    let l: u32 = local_id.x + local_id.y * group_size.x + local_id.z * group_size.x * group_size.y;
    dyn[l] = l * 10;
    barrier();
    let n: u32 = group_size.x * group_size.y * group_size.z;
    let g: u32 = group_id.x + group_id.y * num_groups.x + group_id.z * num_groups.x * num_groups.y;
    out[g * n + l] = dyn[n - 1 - l] + global_id.z * 1000;
}
"#,
    );
    let geo = Geometry {
        grid: [2, 1, 2],
        block: [2, 3, 2],
        shared_bytes: 12 * 4,
    };
    let mut out = Buffer::uninit(48 * 4);
    interp::launch(
        &m,
        "k",
        &geo,
        &mut [Arg::Buffer(&mut out)],
        &Options::default(),
    )
    .unwrap();
    let v = u32s(&out);
    for g in 0..4u32 {
        for l in 0..12u32 {
            let gz = g / 2; // group_id.z
            let lz = l / 6; // local_id.z
            assert_eq!(
                v[(g * 12 + l) as usize],
                (11 - l) * 10 + (gz * 2 + lz) * 1000
            );
        }
    }
    // Too little dynamic shared memory: the index runs off its end.
    let small = Geometry {
        shared_bytes: 8 * 4,
        ..geo
    };
    let u = ub(interp::launch(
        &m,
        "k",
        &small,
        &mut [Arg::Buffer(&mut out)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::OutOfBounds);
}

#[test]
fn partial_waves_and_wave_verbs_inside_helpers() {
    let m = module(
        r#"
device fn count(p: bool) -> u32 {
    let c: u32 = 0;
    for i: u32 in 0..2 {
        c = c + wave_reduce_sum(select(p, 1u32, 0u32));
    }
    return c;
}
kernel k(out: buf<u32, rw>) {
    out[global_id.x] = count(true) * 100 + count(lane_id == 0);
}
"#,
    );
    // 10 work-items at width 4: waves of 4, 4 and a partial wave of 2.
    let mut out = Buffer::uninit(40);
    let opts = Options {
        wave_width: Some(4),
        ..Options::default()
    };
    interp::launch(
        &m,
        "k",
        &Geometry::linear(1, 10),
        &mut [Arg::Buffer(&mut out)],
        &opts,
    )
    .unwrap();
    assert_eq!(
        u32s(&out),
        vec![802, 802, 802, 802, 802, 802, 802, 802, 402, 402]
    );
}

#[test]
fn vector_elements_in_buffers() {
    let m = module(
        r#"
kernel k(v: buf<vec4<f32>, rw>, s: buf<vec2<i32>>) {
    let i: u32 = global_id.x;
    let p: vec2<i32> = s[i];
    v[i] = v[i] + vec4<f32>((p.x + p.y) as f32);
}
"#,
    );
    let mut v = Buffer::from_values(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let mut s = Buffer::from_values(&[1i32, 2, -10, 0]);
    interp::launch(
        &m,
        "k",
        &Geometry::linear(1, 2),
        &mut [Arg::Buffer(&mut v), Arg::Buffer(&mut s)],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(
        v.to_values::<f32>(),
        vec![4.0, 5.0, 6.0, 7.0, -5.0, -4.0, -3.0, -2.0]
    );
}

#[test]
fn labelled_break_and_continue_keep_waves_converged() {
    let m = module(
        r#"
kernel k(out: buf<u32, rw>) {
    let n: u32 = 0;
    'outer: for i: u32 in 0..4 {
        for j: u32 in 0..4 {
            if j == lane_id {
                continue 'outer;
            }
            if i == 3 {
                break 'outer;
            }
            n = n + 1;
        }
    }
    out[global_id.x] = n * 100 + wave_reduce_sum(1u32);
}
"#,
    );
    let mut out = Buffer::uninit(16);
    let opts = Options {
        wave_width: Some(4),
        ..Options::default()
    };
    interp::launch(
        &m,
        "k",
        &Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut out)],
        &opts,
    )
    .unwrap();
    // Lane l counts l per outer iteration for i = 0..2 (it continues 'outer at j == l), and
    // in i = 3 breaks at j = 0 unless it continues first (lane 0); all meet after the loop.
    assert_eq!(u32s(&out), vec![4, 304, 604, 904]);
}

#[test]
fn lanes_of_a_vector_are_defined_one_by_one() {
    let m = module(
        r#"
kernel k(out: buf<f32, rw>) {
    let v: vec4<f32>;
    v.x = 1.0;
    v.z = 3.0;
    out[0] = v.x + v.z;
    out[1] = v.y;
}
"#,
    );
    let mut out = Buffer::uninit(8);
    let u = ub(interp::launch(
        &m,
        "k",
        &Geometry::linear(1, 1),
        &mut [Arg::Buffer(&mut out)],
        &Options::default(),
    ));
    assert_eq!((u.kind, u.span.line), (UbKind::UninitRead, 7), "{u}");
    assert_eq!(out.to_values::<f32>()[0], 4.0);
}

/// An out-of-bounds access through a helper's buffer parameter (issue 23 item 4) is reported
/// against the kernel's buffer, at the helper's line.
#[test]
fn out_of_bounds_through_a_memory_helper_names_the_kernels_buffer() {
    let m = module(
        r#"
device fn put(p: buf<u32, rw>, i: u32) {
    p[i] = i;
}
kernel k(ys: buf<u32, rw>) {
    put(ys, global_id.x + 2);
}
"#,
    );
    let mut ys = Buffer::uninit(16);
    let u = ub(run(
        &m,
        "k",
        Geometry::linear(1, 4),
        &mut [Arg::Buffer(&mut ys)],
        &Options::default(),
    ));
    assert_eq!(u.kind, UbKind::OutOfBounds);
    assert_eq!(u.item.global, [2, 0, 0]);
    assert_eq!((u.span.line, u.kernel.as_str()), (3, "k"));
    assert!(u.detail.contains("ys"), "{}", u.detail);
}
