//! Struct types (issue 23 item 5): the std430 layout, the struct rules' codes with their
//! positions, and the canonical (struct-free) form's fixed point.

use super::{errors, fixed_point, must_parse};
use xpu::ir::struct_layout::{FieldType, StructLayout};
use xpu::ir::text::run::{ArgInit, Value};
use xpu::ir::{parse_file, print, print_file, ElemType, Scalar};

fn elem(s: Scalar, lanes: u8) -> FieldType {
    FieldType::Elem(ElemType::vector(s, lanes))
}

#[test]
fn std430_offsets_sizes_and_alignments() {
    let p = StructLayout::new(
        "Particle",
        vec![
            ("pos".into(), elem(Scalar::F32, 3)),
            ("vel".into(), elem(Scalar::F32, 3)),
            ("mass".into(), elem(Scalar::F32, 1)),
        ],
    )
    .unwrap();
    assert_eq!(p.offset_of("pos"), Some(0));
    assert_eq!(p.offset_of("vel"), Some(16));
    assert_eq!(p.offset_of("mass"), Some(28));
    assert_eq!((p.size(), p.align()), (32, 16));
    // A scalar after a vec2 packs; an f64 aligns to 8; the size rounds up to the alignment.
    let q = StructLayout::new(
        "Q",
        vec![
            ("a".into(), elem(Scalar::U32, 1)),
            ("b".into(), elem(Scalar::F64, 1)),
            ("c".into(), elem(Scalar::I32, 2)),
            ("d".into(), elem(Scalar::F32, 1)),
        ],
    )
    .unwrap();
    assert_eq!(
        ["a", "b", "c", "d"].map(|f| q.offset_of(f).unwrap()),
        [0, 8, 16, 24]
    );
    assert_eq!((q.size(), q.align()), (32, 8));
    // A nested struct aligns to its own alignment and keeps its padded size.
    let outer = StructLayout::new(
        "Outer",
        vec![
            ("n".into(), elem(Scalar::U32, 1)),
            ("p".into(), FieldType::Struct(p.clone())),
            ("k".into(), elem(Scalar::U32, 1)),
        ],
    )
    .unwrap();
    assert_eq!(outer.offset_of("p"), Some(16));
    assert_eq!(outer.offset_of("p.mass"), Some(44));
    assert_eq!(outer.offset_of("k"), Some(48));
    assert_eq!(outer.size(), 64);
    let leaves = outer.leaves();
    assert_eq!(leaves.len(), 5);
    assert_eq!(leaves[3].path, vec!["p".to_string(), "mass".to_string()]);
    assert_eq!(leaves[3].offset, 44);
    // What structs cannot hold.
    assert!(StructLayout::new("B", vec![("b".into(), elem(Scalar::Bool, 1))]).is_err());
    assert!(StructLayout::new("H", vec![("h".into(), elem(Scalar::F16, 2))]).is_err());
    assert!(StructLayout::new("V", vec![("v".into(), elem(Scalar::F32, 8))]).is_err());
    assert!(StructLayout::new("E", vec![]).is_err());
}

const PARTICLE: &str = "struct Particle { pos: vec3<f32>, vel: vec3<f32>, mass: f32 }\n";

fn with_particle(body: &str) -> String {
    format!("{PARTICLE}{body}")
}

/// The codes of `src`'s diagnostics, with positions.
fn codes_of(src: &str) -> Vec<String> {
    errors(src)
}

#[test]
fn struct_rules_have_codes_and_positions() {
    let cases: &[(&str, &str)] = &[
        // Unknown field, on a local and a buffer element, and in a literal.
        (
            "kernel k(ps: buf<Particle, rw>) { let p = ps[0]; ps[0].mass = p.nope; }",
            "2:65 XPU-V140",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { ps[0].nope = 1.0; }",
            "2:41 XPU-V140",
        ),
        // A struct where it cannot go.
        (
            "kernel k(ps: buf<Particle, rw>) { let p = ps[0]; ps[0].mass = p + 1.0; }",
            "2:63 XPU-V144",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { atomic_add(ps[0].mass, 1.0); }",
            "2:46 XPU-V144",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { let p = ps[0]; let q = wave_broadcast(p, 0); }",
            "2:73 XPU-V144",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { let p = ps[0]; p += p; }",
            "2:50 XPU-V144",
        ),
        ("kernel k(p: Particle) { }", "2:13 XPU-V144"),
        (
            "kernel k(ps: buf<Particle, rw>) { let a: [Particle; 4]; }",
            "2:43 XPU-V144",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { shared a: [Particle; 4]; }",
            "2:46 XPU-V144",
        ),
        // Literals: fields missing, out of order, twice.
        (
            "kernel k(ps: buf<Particle, rw>) { ps[0] = Particle { pos: vec3<f32>(0.0), mass: 1.0 }; }",
            "2:43 XPU-V145",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { let v = vec3<f32>(0.0); \
             ps[0] = Particle { vel: v, pos: v, mass: 1.0 }; }",
            "2:78 XPU-V145",
        ),
        // Mismatches: a non-struct for a struct, a struct for a declared scalar.
        (
            "kernel k(ps: buf<Particle, rw>) { let p = ps[0]; let x: f32 = p; }",
            "2:63 XPU-V144",
        ),
        (
            "kernel k(ps: buf<Particle, rw>) { let p: Particle = 1.0; }",
            "2:53 XPU-V146",
        ),
        // A struct-returning call where it must be bound first.
        (
            "device fn mk() -> Particle { return Particle { pos: vec3<f32>(0.0), \
             vel: vec3<f32>(0.0), mass: 0.0 }; }\n\
             kernel k(ps: buf<Particle, rw>) { ps[0].mass = mk().mass; }",
            "3:48 XPU-V147",
        ),
        // An unknown struct type.
        ("kernel k(ps: buf<Nope, rw>) { }", "2:18 XPU-P006"),
    ];
    for (body, want) in cases {
        let src = with_particle(body);
        let got = codes_of(&src);
        assert!(
            got.iter().any(|g| g == want),
            "{body}\nwanted {want}, got {got:?}"
        );
    }
}

#[test]
fn struct_definitions_are_checked() {
    let cases: &[(&str, &str)] = &[
        ("struct S { a: f32, a: u32 }", "1:20 XPU-V141"),
        (
            "struct S { a: f32, t: T }\nstruct T { s: S }",
            "1:8 XPU-V142",
        ),
        ("struct S { s: S }", "1:8 XPU-V142"),
        ("struct S { b: bool }", "1:15 XPU-V143"),
        ("struct S { h: f16 }", "1:15 XPU-V143"),
        ("struct S { m: matrix<a, f16, 16, 16> }", "1:15 XPU-V143"),
        ("struct S { }", "1:8 XPU-V143"),
        ("struct S { a: f32 }\nstruct S { b: f32 }", "2:8 XPU-P050"),
        ("struct u32 { a: f32 }", "1:8 XPU-P011"),
        ("struct S { a: Nope }", "1:15 XPU-P006"),
        (
            "struct S { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, e: f32 }\n\
             device fn f() -> S { return S { a: vec4<f32>(0.0), b: vec4<f32>(0.0), \
             c: vec4<f32>(0.0), d: vec4<f32>(0.0), e: 0.0 }; }",
            "2:18 XPU-V148",
        ),
    ];
    for (src, want) in cases {
        let src = format!("{src}\nkernel k(o: buf<u32, rw>) {{ o[0] = 1; }}");
        let got = codes_of(&src);
        assert!(
            got.iter().any(|g| g == want),
            "{src}\nwanted {want}, got {got:?}"
        );
    }
}

#[test]
fn run_values_of_struct_buffers_become_words() {
    let src = with_particle(
        "kernel k(ps: buf<Particle, rw>) { ps[0].mass = 1.0; }\n\
         run k { grid = [1]; block = [1]; arg ps = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];\n\
         expect ps = fill(1, 0.5); }",
    );
    let (_, runs) = parse_file(&src).unwrap();
    let ArgInit::List(words) = &runs[0].args[0].init else {
        panic!("{:?}", runs[0].args[0].init)
    };
    let f = |x: f32| Value::Int(x.to_bits() as i128);
    let z = Value::Int(0);
    assert_eq!(
        words,
        &vec![f(1.0), f(2.0), f(3.0), z, f(4.0), f(5.0), f(6.0), f(7.0)]
    );
    let xpu::ir::text::run::Expect::Buffer {
        value: ArgInit::List(want),
        ..
    } = &runs[0].expects[0]
    else {
        panic!("{:?}", runs[0].expects[0])
    };
    let h = f(0.5);
    assert_eq!(want, &vec![h, h, h, z, h, h, h, h]);
    // A list that is not whole structs, a wrong kind of value, a form structs do not take.
    for (arg, want) in [
        ("[1.0, 2.0]", "XPU-P051"),
        ("[1, 2, 3, 4, 5, 6, 7]", "XPU-P051"),
        ("iota(2)", "XPU-P051"),
    ] {
        let src = with_particle(&format!(
            "kernel k(ps: buf<Particle, rw>) {{ ps[0].mass = 1.0; }}\n\
             run k {{ grid = [1]; block = [1]; arg ps = {arg}; }}"
        ));
        let got = codes_of(&src);
        assert!(got.iter().any(|g| g.ends_with(want)), "{arg}: {got:?}");
    }
}

#[test]
fn the_canonical_form_of_a_struct_module_is_its_lowering_and_a_fixed_point() {
    let src = with_particle(
        "struct Pair { a: Particle, n: u64 }\n\
         device fn swap(p: Pair) -> Pair {\n\
             return Pair { a: Particle { pos: p.a.vel, vel: p.a.pos, mass: p.a.mass }, n: p.n + 1 };\n\
         }\n\
         kernel k(ps: buf<Pair, rw>, out: buf<f64, rw>) {\n\
             let i: u32 = global_id.x;\n\
             let q: Pair = swap(ps[i]);\n\
             q.a.pos.x = 2.0;\n\
             ps[i] = q;\n\
             ps[i + 1].a = q.a;\n\
             out[i] = ps[i].n as f64;\n\
         }\n\
         run k { grid = [1]; block = [1];\n\
             arg ps = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0];\n\
             arg out = fill(1, 0.0); }",
    );
    let m = must_parse(&src);
    assert!(m.clone().verify().is_ok(), "{}", print(&m));
    let printed = print(&m);
    assert!(!printed.contains("struct"), "{printed}");
    assert!(printed.contains("ps: buf<u32, rw>"), "{printed}");
    fixed_point(&m).unwrap();
    let (m2, runs) = parse_file(&src).unwrap();
    let file = print_file(&m2, &runs);
    let (m3, runs3) = parse_file(&file).unwrap();
    assert_eq!(print_file(&m3, &runs3), file);
}
