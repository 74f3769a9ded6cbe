//! Vulkan backend tests (one binary): every filetest kernel's SPIR-V passes `spirv-val
//! --target-env vulkan1.1` (at subgroup sizes 8 and 32, with every optional capability
//! offered), and, where a Vulkan device is present (Mesa's lavapipe here, the NVIDIA driver on
//! the GPU machine), the filetests run on it and agree with the interpreter, capability
//! refusals reported as skips. Without `spirv-val` or without a device, the test in question
//! prints why and checks only what it can.

use std::path::{Path, PathBuf};
use std::process::Command;
use xpu::codegen::spirv::{emit_kernel, Caps};
use xpu::hal::Backend;

fn filetests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "xk") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests"),
        &mut out,
    );
    out
}

fn have_spirv_val() -> bool {
    Command::new("spirv-val").arg("--version").output().is_ok()
}

fn validate(words: &[u32], tag: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("xpu-vk-val-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{tag}.spv"));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
    let out = Command::new("spirv-val")
        .args(["--target-env", "vulkan1.1"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        let _ = std::fs::remove_file(&path);
        Ok(())
    } else {
        Err(format!(
            "{}{} (kept at {})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            path.display()
        ))
    }
}

#[test]
fn every_filetest_kernel_emits_valid_spirv() {
    if !have_spirv_val() {
        eprintln!("spirv-val not found (apt-get install spirv-tools): emission only");
    }
    let check = have_spirv_val();
    let mut failures = Vec::new();
    let mut refused = Vec::new();
    let mut emitted = 0;
    for path in filetests() {
        let src = std::fs::read_to_string(&path).unwrap();
        let Ok(m) = xpu::ir::parse(&src) else {
            continue;
        };
        let Ok(vm) = m.verify() else { continue };
        // S = 8 also with the index clamps of a device in the host (lavapipe, issue 15).
        for (s, clamp) in [(8u32, false), (8, true), (32, false)] {
            let caps = Caps {
                clamp_indices: clamp,
                ..Caps::all(s)
            };
            for (h, f) in vm.kernels() {
                let tag = format!(
                    "{}-{}-{s}{}",
                    path.file_stem().unwrap().to_string_lossy(),
                    f.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
                    if clamp { "-clamped" } else { "" }
                );
                match emit_kernel(&vm, h, &caps) {
                    Ok(e) => {
                        emitted += 1;
                        if check {
                            if let Err(msg) = validate(&e.words, &tag) {
                                failures.push(format!(
                                    "{} {} (S={s}): {msg}",
                                    path.display(),
                                    f.name
                                ));
                            }
                        }
                    }
                    Err(u) => refused.push(format!("{} {} (S={s}): {u}", path.display(), f.name)),
                }
            }
        }
    }
    println!(
        "{emitted} kernels emitted; refused:\n  {}",
        refused.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} invalid modules:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(emitted >= 90, "only {emitted} kernels emitted");
    // Refusals are by name, and only for what Vulkan cannot express here.
    for r in &refused {
        assert!(
            r.contains("in a virtual wave")
                || r.contains("GLSL.std.450 has no 64-bit")
                || r.contains("f16 atomics (Vulkan has no 16-bit atomics)"),
            "unexpected refusal: {r}"
        );
    }
}

#[test]
fn vulkan_availability_never_panics() {
    // With or without a loader and a device, opening answers a value.
    match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => println!("vulkan: {:?}", d.facts().name),
        Err(e) => println!("vulkan not offered: {e}"),
    }
}

#[test]
fn filetests_on_the_vulkan_device_agree_with_the_interpreter() {
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    std::env::set_var("CAJETA_XPU_POISON", "1");
    let runner = xpu::filetest::runner::Runner::new(vec![device]).unwrap();
    let mut report = Vec::new();
    let summary = runner
        .run_paths(&[PathBuf::from("tests/filetests")], &mut report)
        .unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(summary.passed >= 90, "only {} cases passed", summary.passed);
}

/// Narrow mode (§3.2, W < S): waves of 1, 2 and 4 lanes inside lavapipe's subgroups of 8 (or
/// the device's S), every verb, with divergence, against the interpreter.
const NARROW: &str = r#"
@wave(WIDTH)
kernel nw(out: buf<u32, rw>, bal: buf<u64, rw>, f: buf<f32, rw>) {
    let l: u32 = lane_id;
    let g: u32 = global_id.x;
    out[8 * g + 3] = wave_shuffle_xor(g, 1u32) + wave_shuffle_down(g, 1u32) * 1000 + wave_rotate(g, 1u32) * 100000 + wave_shuffle_up(g, 1u32) * 10000000 + wave_shuffle(g, (l + 1) % wave_width) * 5;
    out[8 * g + 7] = wave_broadcast(g * 3, 0u32);
    if g % 3 != 1 {
        out[8 * g] = wave_reduce_sum(l + g);
        out[8 * g + 1] = wave_inclusive_scan_sum(g);
        out[8 * g + 2] = wave_exclusive_scan_max(g * 7 % 5);
        out[8 * g + 4] = wave_elect() as u32 * 10000;
        out[8 * g + 5] = wave_any(g % 5 == 0) as u32 + 2 * wave_all(g % 2 == 0) as u32;
        out[8 * g + 6] = wave_reduce_min(g + 100);
        bal[g] = wave_ballot(g % 2 == 0);
        f[g] = wave_reduce_max(g as f32 * 0.5) + wave_inclusive_scan_min(100.0 - g as f32);
    } else {
        out[8 * g] = wave_reduce_sum(1u32);

    }
}
run nw {
    grid = [2];
    block = [32];
    arg out = fill(512, 0);
    arg bal = fill(64, 0);
    arg f = fill(64, 0.0);
    expect out = interp;
    expect bal = interp;
    expect f = interp;
}
"#;

#[test]
fn narrow_waves_agree_with_the_interpreter() {
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    let s = device.facts().wave_width.unwrap_or(32);
    let dir = std::env::temp_dir().join(format!("xpu-vk-narrow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for w in [1u32, 2, 4, 8, 16].into_iter().filter(|&w| w < s) {
        let p = dir.join(format!("narrow{w}.xk"));
        std::fs::write(&p, NARROW.replace("WIDTH", &w.to_string())).unwrap();
        paths.push(p);
    }
    let runner = xpu::filetest::runner::Runner::new(vec![device]).unwrap();
    let mut report = Vec::new();
    let summary = runner.run_paths(&paths, &mut report).unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    assert_eq!(summary.passed, paths.len(), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Virtual mode (§3.2, W > S): verbs exchanged through shared memory by the whole
/// workgroup, with divergence (nested branches, a verb in a condition), a uniform `for` loop,
/// 64-bit, f16, i8 and vector (4- and 8-lane) operands, a partial last wave and a 2-D block.
const VIRTUAL: &str = r#"
@wave(WIDTH)
kernel vw(out: buf<u32, rw>, bal: buf<u64, rw>, f: buf<f32, rw>, n: u32) {
    let l: u32 = lane_id;
    let g: u32 = local_id.x + local_id.y * group_size.x + group_id.x * group_size.x * group_size.y;
    out[8 * g] = wave_reduce_sum(l + g);
    bal[2 * g] = wave_ballot(g % 3 == 0) ^ (wave_shuffle_xor((g as i64) << 40i64, 3u32) as u64);
    if g % 3 != 1 {
        out[8 * g + 1] = wave_inclusive_scan_sum(g);
        if l > 4 {
            out[8 * g + 2] = wave_exclusive_scan_max(g * 7 % 5) + wave_elect() as u32 * 1000;
        } else {
            out[8 * g + 2] = wave_reduce_min(g + 100);
        }
        f[g] = wave_reduce_max(g as f32 * 0.5) + wave_inclusive_scan_min(100.0 - g as f32);
    } else {
        out[8 * g + 1] = wave_reduce_sum(1u32) + (wave_reduce_max(l as i8 - 20i8) as u32);
    }
    if wave_any(g == 5) {
        out[8 * g + 3] = wave_all(g < 1000) as u32 + 2;
    }
    // Shuffles only in full waves (reading a lane missing from a partial wave is UB).
    if local_id.x + local_id.y * group_size.x - l + wave_width <= group_size.x * group_size.y {
        let v: vec4<u32> = vec4<u32>(g, l, g * 2, 7);
        let sv: vec4<u32> = wave_shuffle_down(v, 3u32);
        let w8: vec8<f32> = vec8<f32>(g as f32);
        let s8: vec8<f32> = wave_rotate(w8, 5u32);
        out[8 * g + 4] = sv.x + sv.y * 100 + (s8[7] as u32) * 10000;
        out[8 * g + 5] = wave_broadcast(g, 2u32) + (wave_shuffle(g as f16, (l + 1) % wave_width) as u32) * 1000 + wave_shuffle_up(g, 3u32) * 100000;
    }
    let acc: u32 = 0;
    for i in 0u32..n {
        acc = acc + wave_inclusive_scan_sum(g + i) * (i + 1);
    }
    out[8 * g + 6] = acc;
    bal[2 * g + 1] = wave_inclusive_scan_sum(g as u64 << 33u64);
}
run vw {
    grid = [2];
    block = [BX, BY];
    arg out = fill(1024, 0);
    arg bal = fill(256, 0);
    arg f = fill(128, 0.0);
    arg n = 3;
    expect out = interp;
    expect bal = interp;
    expect f = interp;
}
"#;

#[test]
fn virtual_waves_agree_with_the_interpreter() {
    // Emission at S = 8 for widths 16..64 is checked by spirv-val even without a device.
    let cases = [(16u32, 32u32, 1u32), (32, 40, 1), (64, 64, 1), (32, 8, 6)];
    for &(w, bx, by) in &cases {
        let src = VIRTUAL
            .replace("WIDTH", &w.to_string())
            .replace("BX", &bx.to_string())
            .replace("BY", &by.to_string());
        let m = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let (h, _) = m.kernels().next().unwrap();
        let e = emit_kernel(&m, h, &Caps::all(8)).unwrap();
        assert_eq!(
            e.wave_mode,
            xpu::codegen::spirv::WaveMode::Virtual { slots: w / 8 }
        );
        if have_spirv_val() {
            validate(&e.words, &format!("virtual-{w}")).unwrap();
        }
    }
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    let s = device.facts().wave_width.unwrap_or(32);
    let dir = std::env::temp_dir().join(format!("xpu-vk-virtual-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for &(w, bx, by) in cases.iter().filter(|c| c.0 > s) {
        let p = dir.join(format!("virtual{w}-{bx}x{by}.xk"));
        let src = VIRTUAL
            .replace("WIDTH", &w.to_string())
            .replace("BX", &bx.to_string())
            .replace("BY", &by.to_string());
        std::fs::write(&p, src).unwrap();
        paths.push(p);
    }
    let runner = xpu::filetest::runner::Runner::new(vec![device]).unwrap();
    let mut report = Vec::new();
    let summary = runner.run_paths(&paths, &mut report).unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    assert_eq!(summary.passed, paths.len(), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn virtual_waves_refuse_what_the_workgroup_cannot_meet_by_name() {
    let src = "@wave(64)\nkernel v(o: buf<u32, rw>) {\n    o[global_id.x] = lane_id + wave_width * 100;\n}\n\n\
               device fn h(x: u32) -> u32 {\n    return wave_reduce_sum(x);\n}\n\n\
               @wave(64)\nkernel in_helper(o: buf<u32, rw>) {\n    o[global_id.x] = h(1u32);\n}\n\n\
               @wave(64)\nkernel early(o: buf<u32, rw>, n: u32) {\n    if global_id.x >= n {\n        return;\n    }\n    o[global_id.x] = wave_reduce_sum(1u32);\n}\n\n\
               @wave(64)\nkernel divergent_loop(o: buf<u32, rw>) {\n    for i in 0u32..lane_id {\n        o[global_id.x] = wave_reduce_sum(i);\n    }\n}\n";
    let m = xpu::ir::parse(src).unwrap().verify().unwrap();
    let caps = Caps::all(8);
    let get = |name: &str| m.kernels().find(|(_, f)| f.name == name).unwrap().0;
    let e = emit_kernel(&m, get("v"), &caps).unwrap();
    assert_eq!(e.wave_width, 64);
    for (k, why) in [
        ("in_helper", "inside a helper"),
        ("early", "after a return"),
        ("divergent_loop", "bounds are not workgroup-uniform"),
    ] {
        let err = emit_kernel(&m, get(k), &caps).unwrap_err().to_string();
        assert!(
            err.contains("virtual wave") && err.contains(why),
            "{k}: {err}"
        );
    }
}

#[test]
fn the_streaming_benchmark_runs() {
    // Timing is not checked (lavapipe is a CPU): only that every figure is measured.
    if xpu::Device::open(Backend::Vulkan).is_err() {
        eprintln!("no Vulkan device, skipping");
        return;
    }
    let (name, elems, rows) = xpu::bench::vulkan::measure(1 << 16, 256, 3).unwrap();
    println!("{name}: {rows:?}");
    assert_eq!(elems, 1 << 16);
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert!(
            r.vulkan_ms > 0.0 && r.copy_ms > 0.0 && r.vulkan_cold_ms > 0.0,
            "{r:?}"
        );
    }
}

/// Issue 21: `xpu bench vulkan` fits its launches to the device's grid (lavapipe: 65,535
/// workgroups per dimension; 256M floats in blocks of 256 were refused with XPU-L005).
#[test]
fn the_streaming_benchmark_fits_the_device_grid() {
    let Ok(vk) = xpu::Device::open(Backend::Vulkan) else {
        eprintln!("no Vulkan device, skipping");
        return;
    };
    let max = vk.facts().max_grid_dims.unwrap()[0] as usize;
    let want = 256usize << 20;
    let fitted = xpu::bench::vulkan::fit_elems(&vk, want, 256);
    assert_eq!(fitted, want.min(max * 256));
    assert!(fitted.div_ceil(256) <= max);
    assert_eq!(xpu::bench::vulkan::fit_elems(&vk, 1000, 256), 1000);
}

/// Wide vectors (8 and 16 lanes are arrays of lanes in SPIR-V, their operations scalarised):
/// a wide push-constant parameter, wide elements of shared and private arrays (floats stored
/// as integers in shared memory), comparisons giving wide `bool` vectors, per-lane and whole
/// `select`, casts, a lane-wise bitcast, swizzles, lane assignment, `vstore`, against the
/// interpreter.
const WIDE: &str = r#"
kernel wide(out: buf<f32, rw>, oi: buf<u32, rw>, k: vec8<f32>, m: vec16<u8>) {
    shared sh: [vec8<f32>; 4];
    let g: u32 = global_id.x;
    let l: u32 = local_id.x;
    let v: vec8<f32> = k * vec8<f32>(g as f32) + vec8<f32>(0.25);
    sh[l] = v;
    barrier();
    let w: vec8<f32> = sh[(l + 1) % 4];
    let gt: vec8<bool> = w > v;
    let pick: vec8<f32> = select(gt, w, v - vec8<f32>(100.0));
    let whole: vec8<f32> = select(g % 2 == 0, pick, -pick);
    let priv: [vec16<u8>; 2];
    priv[0] = m + vec16<u8>(g as u8);
    priv[1] = m * vec16<u8>(3);
    let q: vec16<u8> = priv[g % 2];
    q[3] = 77;
    let bits: vec8<u32> = bitcast<vec8<u32>>(whole);
    let r: vec8<f32> = swizzle(whole, 7, 6, 5, 4, 3, 2, 1, 0);
    let wide_i: vec8<i32> = r as i32;
    let flag: vec8<u32> = select(gt, vec8<u32>(1), vec8<u32>(0));
    vstore(out, 16 * g, r);
    vstore(out, 16 * g + 8, wide_i as f32);
    vstore(oi, 32 * g, bits ^ flag);
    vstore(oi, 32 * g + 8, q as u32);
    oi[32 * g + 24] = q[3] as u32 + q[15] as u32;
}
run wide {
    grid = [2];
    block = [4];
    arg out = fill(128, 0.0);
    arg oi = fill(256, 0);
    arg k = [1.0, -2.0, 3.5, 0.5, -1.25, 8.0, 0.0, 2.0];
    arg m = [1, 2, 3, 4, 5, 6, 7, 8, 100, 120, 140, 160, 180, 200, 220, 240];
    expect out = interp;
    expect oi = interp;
}
"#;

#[test]
fn wide_vectors_agree_with_the_interpreter() {
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("xpu-vk-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("wide.xk");
    std::fs::write(&p, WIDE).unwrap();
    if have_spirv_val() {
        let m = xpu::ir::parse(WIDE).unwrap().verify().unwrap();
        for s in [8u32, 32] {
            for (h, _) in m.kernels() {
                let e = emit_kernel(&m, h, &Caps::all(s)).unwrap();
                validate(&e.words, &format!("wide-{s}")).unwrap();
            }
        }
    }
    let runner = xpu::filetest::runner::Runner::new(vec![device.clone()]).unwrap();
    let mut report = Vec::new();
    let summary = runner.run_paths(&[p], &mut report).unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    assert_eq!(summary.passed, 1, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs one kernel file's source on the Vulkan device (after spirv-val of its modules at
/// subgroup sizes 8 and 32 with every capability on) and asserts that all its `runs` run
/// blocks pass.
fn agrees_with_the_interpreter(tag: &str, src: &str, runs: usize) {
    let device = match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            return;
        }
    };
    agrees_on(&device, tag, src, runs);
}

/// [`agrees_with_the_interpreter`] on `device`.
fn agrees_on(device: &xpu::Device, tag: &str, src: &str, runs: usize) {
    if have_spirv_val() {
        let m = xpu::ir::parse(src).unwrap().verify().unwrap();
        for s in [8u32, 32] {
            for (h, _) in m.kernels() {
                let e = emit_kernel(&m, h, &Caps::all(s)).unwrap();
                validate(&e.words, &format!("{tag}-{s}")).unwrap();
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("xpu-vk-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{tag}.xk"));
    std::fs::write(&p, src).unwrap();
    let runner = xpu::filetest::runner::Runner::new(vec![device.clone()]).unwrap();
    let mut report = Vec::new();
    let summary = runner.run_paths(&[p], &mut report).unwrap();
    let report = String::from_utf8_lossy(&report);
    println!("{report}");
    assert_eq!((summary.passed, summary.failed), (runs, 0), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Float special values the differential fuzzer found differing (semantics.md): `%` as C
/// `fmod` (x % 0, inf % y, x % inf, quotients beyond 2^29, subnormal results), `pow`/`log`
/// outside their main domain (negative bases with integer exponents, zeros, infinities,
/// NaNs), `/` with a subnormal result.
const SPECIALS: &str = r#"
kernel special(op: buf<f32, rw>, ol: buf<f32, rw>, orem: buf<f32, rw>, od: buf<f32, rw>, xs: buf<f32>, ys: buf<f32>) {
    let g: u32 = global_id.x;
    let x: f32 = xs[g / 14];
    let y: f32 = ys[g % 14];
    op[g] = pow(x, y);
    orem[g] = x % y;
    od[g] = x / y;
    ol[2 * g] = log(x);
    ol[2 * g + 1] = log2(y);
}
run special {
    grid = [14];
    block = [14];
    arg op = fill(196, 0.0);
    arg ol = fill(392, 0.0);
    arg orem = fill(196, 0.0);
    arg od = fill(196, 0.0);
    arg xs = [0.0, -0.0, 1.0, -1.0, -8.375, 2.5, 0.5, -0.5, inf, -inf, nan, -3.0, 7.0, 3.0e38];
    arg ys = [0.0, -0.0, 3.0, -3.0, 2.0, -2.0, 0.5, -2.5, inf, -inf, nan, -9223372036854775807.0, 1e-40, -3e-39];
    expect op = interp;
    expect ol = interp;
    expect orem = interp;
    expect od = interp;
}
"#;

#[test]
fn float_special_values_agree_with_the_interpreter() {
    agrees_with_the_interpreter("special", SPECIALS, 1);
}

/// Signed zeros and NaNs through `+ - *` with constant zero operands (which lavapipe folds
/// despite `NoContraction`), `min`/`max`/`clamp` (`-0 < +0`, the non-NaN operand wins) and
/// float `min`/`max` wave reductions and scans (NaN lanes yield, all-NaN gives NaN, an
/// exclusive scan's first lane gets the identity); `lane_id` in a 1x2 block.
const ZEROS: &str = r#"
kernel zeros(o: buf<f32, rw>, w: buf<f32, rw>, xs: buf<f32>) {
    let g: u32 = global_id.x;
    let f: f32 = xs[g];
    o[12 * g] = (vec4<f32>(f, 0.0, 1.5, f) * vec4<f32>(0.0)).w;
    o[12 * g + 1] = f * 0.0;
    o[12 * g + 2] = 0.0 + f;
    o[12 * g + 3] = 0.0 - f;
    o[12 * g + 4] = max(-0.0, f);
    o[12 * g + 5] = min(-0.0, f);
    o[12 * g + 6] = max(f, -0.0);
    o[12 * g + 7] = min(f, 0.0);
    o[12 * g + 8] = clamp(f, -0.0, 0.0);
    o[12 * g + 9] = -f;
    o[12 * g + 10] = min(f, nan);
    o[12 * g + 11] = max(nan, f);
    let allnan: f32 = f % 0.0;
    let some: f32 = select(g % 3 == 0, f, nan);
    w[8 * g] = wave_reduce_min(allnan);
    w[8 * g + 1] = wave_reduce_max(some);
    w[8 * g + 2] = wave_reduce_min(some);
    w[8 * g + 3] = wave_inclusive_scan_min(some);
    w[8 * g + 4] = wave_exclusive_scan_max(some);
    w[8 * g + 5] = wave_exclusive_scan_min(allnan);
    w[8 * g + 6] = wave_reduce_min(select(g % 2 == 0, 0.0, -0.0));
    w[8 * g + 7] = wave_reduce_max(select(g % 2 == 0, 0.0, -0.0));
}
run zeros {
    grid = [1];
    block = [8];
    arg o = fill(96, 1.0);
    arg w = fill(64, 1.0);
    arg xs = [0.0, -0.0, 2.0, -2.0, nan, inf, -inf, 1e-40];
    expect o = interp;
    expect w = interp;
}

kernel rows(lanes: buf<u32, rw>, cnt: buf<u32, rw>) {
    let g: u32 = global_id.y;
    lanes[g] = lane_id;
    atomic_add(cnt[0], lane_id + 1);
}
run rows {
    grid = [1];
    block = [1, 2];
    arg lanes = fill(2, 7);
    arg cnt = [0];
    expect lanes = interp;
    expect cnt = interp;
}
"#;

#[test]
fn signed_zeros_and_nans_agree_with_the_interpreter() {
    agrees_with_the_interpreter("zeros", ZEROS, 2);
}

/// f32 subnormal operands and results through `+ - *`, `min`/`max`, `/`, `%`, `fma`,
/// negation, f32 ↔ f64 casts, vectors, comparisons and `as bool`, with the f64 path that devices flushing f32
/// subnormals use (`Caps::flushes_f32_subnormals`, forced by `CAJETA_XPU_VK_F32_IN_F64`):
/// NVIDIA's driver gave 1e-38 · 1e10 = 0 under `DenormPreserve`.
const SUBNORMALS: &str = r#"
kernel subn(o: buf<f32, rw>, w: buf<f64, rw>, c: buf<u32, rw>, xs: buf<f32>, ys: buf<f32>) {
    let g: u32 = global_id.x;
    let x: f32 = xs[g / 12];
    let y: f32 = ys[g % 12];
    o[10 * g] = x * y;
    o[10 * g + 1] = x + y;
    o[10 * g + 2] = x - y;
    o[10 * g + 3] = min(x, y);
    o[10 * g + 4] = max(x, y);
    o[10 * g + 5] = x / y;
    o[10 * g + 6] = x % y;
    o[10 * g + 7] = fma(x, y, -x);
    o[10 * g + 8] = (vec2<f32>(x, y) * vec2<f32>(y, 0.5)).y - x;
    o[10 * g + 9] = ((x as f64) * 0.25) as f32;
    w[g] = (x as f64) + (y as f64);
    let lt: vec2<bool> = vec2<f32>(x, y) < vec2<f32>(y, 0.0);
    c[g] = select(x < y, 1u32, 0u32) | select(x == y, 2u32, 0u32) | select(x >= y, 4u32, 0u32)
        | select(x != 0.0, 8u32, 0u32) | select(x as bool, 16u32, 0u32)
        | select(lt.x, 32u32, 0u32) | select(lt.y, 64u32, 0u32);
}
run subn {
    grid = [12];
    block = [12];
    arg o = fill(1440, 7.0);
    arg w = fill(144, 7.0);
    arg c = fill(144, 7);
    arg xs = [1.0e-38, -1.0e-40, 1.4e-45, 1.1754942e-38, 0.0, -0.0, 1.0, -3.5, 1.0e10, inf, nan, 3.0e38];
    arg ys = [1.0e10, 1.0e-40, -1.4e-45, 0.5, 0.0, -0.0, 1.0e-38, -2.0e-39, 1.0e-30, inf, nan, 2.0];
    expect o = interp;
    expect w = interp;
    expect c = interp;
}
"#;

#[test]
fn f32_subnormals_in_f64_agree_with_the_interpreter() {
    if have_spirv_val() {
        let m = xpu::ir::parse(SUBNORMALS).unwrap().verify().unwrap();
        for s in [8u32, 32] {
            let mut caps = Caps::all(s);
            caps.flushes_f32_subnormals = true;
            for (h, _) in m.kernels() {
                let e = emit_kernel(&m, h, &caps).unwrap();
                validate(&e.words, &format!("subn-{s}")).unwrap();
            }
        }
    }
    // A device of its own, opened with the f64 path forced.
    let settings = xpu::backend::vulkan::VulkanSettings {
        f32_in_f64: Some(true),
        ..xpu::backend::vulkan::VulkanSettings::from_config().unwrap()
    };
    match xpu::backend::vulkan::VulkanDevice::open_with(settings) {
        Ok(d) => agrees_on(
            &xpu::Device::from_impl(std::sync::Arc::new(d)),
            "subn",
            SUBNORMALS,
            1,
        ),
        Err(e) => eprintln!("no Vulkan device, skipping: {e}"),
    }
}

/// f64 transcendental functions (built from arithmetic, `math.rs`) on vector lanes — `vec3`,
/// `vec4` and a wide `vec8` — including the Payne–Hanek branch taken by some lanes only.
const F64_LANES: &str = r#"
kernel lanes(o: buf<f64, rw>, xs: buf<f64>) {
    let g: u32 = global_id.x;
    let x: f64 = xs[g];
    let s: vec4<f64> = sin(vec4<f64>(x, x * 1.0e9, -x * 3.0e20, x + 0.5));
    let c: vec3<f64> = cos(vec3<f64>(x * 1.0e30, x, -x));
    let e: vec8<f64> = exp(vec8<f64>(vec4<f64>(x), vec4<f64>(-x * 100.0)));
    let p: vec2<f64> = pow(vec2<f64>(x, x + 1.0), vec2<f64>(-x, 300.5));
    let l: vec2<f64> = log2(vec2<f64>(x, 1.0 / x));
    let t: vec2<f64> = tanh(vec2<f64>(x, -x * 0.01));
    o[16 * g] = s.x;
    o[16 * g + 1] = s.y;
    o[16 * g + 2] = s.z;
    o[16 * g + 3] = s.w;
    o[16 * g + 4] = c.x;
    o[16 * g + 5] = c.y;
    o[16 * g + 6] = c.z;
    o[16 * g + 7] = e[0];
    o[16 * g + 8] = e[7];
    o[16 * g + 9] = p.x;
    o[16 * g + 10] = p.y;
    o[16 * g + 11] = l.x;
    o[16 * g + 12] = l.y;
    o[16 * g + 13] = t.x;
    o[16 * g + 14] = t.y;
    o[16 * g + 15] = rsqrt(x);
}
run lanes {
    grid = [1];
    block = [8];
    ulps = 2;
    arg o = fill(128, 0.0);
    arg xs = [0.75, 1.0, 2.5, 3.25, 0.0625, 7.5, 0.3, 1.5e-5];
    expect o = interp;
}
"#;

#[test]
fn f64_transcendentals_on_vector_lanes_agree_with_the_interpreter() {
    agrees_with_the_interpreter("f64lanes", F64_LANES, 1);
}

/// Without `shaderFloat64` a kernel using the f64 transcendental functions is refused by name.
#[test]
fn f64_transcendentals_are_refused_by_name_without_float64() {
    let m = xpu::ir::parse(F64_LANES).unwrap().verify().unwrap();
    let (h, _) = m.kernels().next().unwrap();
    let mut caps = Caps::all(8);
    caps.float64 = false;
    let err = emit_kernel(&m, h, &caps).unwrap_err().to_string();
    assert!(err.contains("shaderFloat64"), "{err}");
}

/// Issue 14: NVIDIA's Vulkan driver applied the `NonWritable` of the first buffer variable
/// declared with a struct type to every variable of that type, so a writable buffer sharing
/// its struct with a read-only one came first was read as if nothing wrote it (an
/// accumulating `y[i] += ...` kept its last term). lavapipe computes the right values either
/// way (`tests/filetests/linalg/readonly_matvec.xk` catches it on the driver itself); here
/// the emitted module must give every storage buffer a `Block` struct of its own, read-only
/// ones `NonWritable` on the variable and on the member.
#[test]
fn every_storage_buffer_has_a_struct_type_of_its_own() {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Decoration, Op, StorageClass};
    let src = r#"
kernel k(b: buf<f32>, x: buf<f32>, y: buf<f32, rw>, z: buf<u32, rw>, w: buf<u32>, n: i32) {
    let i: i32 = global_id.x as i32;
    if i < n {
        for j: i32 in 0..n {
            y[i as u32] += b[(i * n + j) as u32] * x[j as u32];
        }
        z[i as u32] += w[i as u32];
    }
}
"#;
    let m = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = m.kernels().next().unwrap();
    // Without the loop-limit status buffer (lavapipe's), which is one more storage buffer.
    let mut caps = Caps::all(32);
    caps.loop_limit = None;
    let e = emit_kernel(&m, h, &caps).unwrap();
    if have_spirv_val() {
        validate(&e.words, "own-structs").unwrap();
    }
    let module = rspirv::dr::load_words(&e.words).unwrap();
    let id = |o: &Operand| match o {
        Operand::IdRef(w) => *w,
        other => panic!("not an id: {other:?}"),
    };
    // Pointer type id -> pointee, for StorageBuffer pointers.
    let mut pointee = std::collections::HashMap::new();
    let mut vars = Vec::new();
    for inst in &module.types_global_values {
        match inst.class.opcode {
            Op::TypePointer
                if inst.operands[0] == Operand::StorageClass(StorageClass::StorageBuffer) =>
            {
                pointee.insert(inst.result_id.unwrap(), id(&inst.operands[1]));
            }
            Op::Variable
                if inst.operands[0] == Operand::StorageClass(StorageClass::StorageBuffer) =>
            {
                vars.push((inst.result_id.unwrap(), pointee[&inst.result_type.unwrap()]));
            }
            _ => {}
        }
    }
    assert_eq!(vars.len(), 5, "one variable per buffer parameter");
    let structs: std::collections::HashSet<_> = vars.iter().map(|v| v.1).collect();
    assert_eq!(structs.len(), 5, "buffers share a struct type: {vars:?}");
    let binding = |var: u32| {
        module.annotations.iter().find_map(|a| {
            (a.class.opcode == Op::Decorate
                && id(&a.operands[0]) == var
                && a.operands[1] == Operand::Decoration(Decoration::Binding))
            .then(|| a.operands[2].clone())
        })
    };
    let non_writable = |target: u32, member: bool| {
        module.annotations.iter().any(|a| {
            let op = if member {
                Op::MemberDecorate
            } else {
                Op::Decorate
            };
            let at = if member { 2 } else { 1 };
            a.class.opcode == op
                && id(&a.operands[0]) == target
                && a.operands[at] == Operand::Decoration(Decoration::NonWritable)
        })
    };
    // Bindings follow the parameters: b, x, y, z, w; read-only are b, x and w.
    for (var, st) in vars {
        let Some(Operand::LiteralBit32(b)) = binding(var) else {
            panic!("variable {var} has no binding");
        };
        let read_only = matches!(b, 0 | 1 | 4);
        assert_eq!(non_writable(var, false), read_only, "binding {b}: variable");
        assert_eq!(non_writable(st, true), read_only, "binding {b}: member");
    }
}

/// The runtime's stream and event tests: a counter kernel (one work-item adds 1).
const COUNTER: &str = r#"
kernel bump(c: buf<u32, rw>, k: u32) {
    if global_id.x == 0 {
        c[0] = c[0] + k;
    }
}

kernel fill(o: buf<u32, rw>, v: u32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = v + i;
    }
}

kernel twice(o: buf<u32, rw>, x: buf<u32>, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        o[i] = 2 * x[i];
    }
}
"#;

fn vulkan_or_skip() -> Option<xpu::Device> {
    match xpu::Device::open(Backend::Vulkan) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("no Vulkan device, skipping: {e}");
            None
        }
    }
}

fn counter_program(device: &xpu::Device) -> xpu::Program {
    device
        .load(xpu::ir::parse(COUNTER).unwrap().verify().unwrap())
        .unwrap()
}

#[test]
fn many_launches_then_one_sync_are_all_applied() {
    // Thousands of launches recorded before one sync (recycled command buffers, fences and
    // descriptors must not lose or reorder any), then launches each followed by a sync, with
    // push descriptors where the device has them and with the per-launch descriptor pool
    // (`VulkanSettings::push_descriptors`, `XPU_VK_PUSH_DESCRIPTORS=0`). The host cost per launch is
    // printed (a figure for the docs, not checked).
    for push in [true, false] {
        // A device of its own (`Device::open` keeps the first one opened in the process).
        let settings = xpu::backend::vulkan::VulkanSettings {
            push_descriptors: push,
            ..xpu::backend::vulkan::VulkanSettings::from_config().unwrap()
        };
        let device = xpu::backend::vulkan::VulkanDevice::open_with(settings);
        let device = match device {
            Ok(d) => xpu::Device::from_impl(std::sync::Arc::new(d)),
            Err(e) => {
                eprintln!("no Vulkan device, skipping: {e}");
                return;
            }
        };
        let program = counter_program(&device);
        let (bump, fill, twice) = (
            program.kernel("bump").unwrap(),
            program.kernel("fill").unwrap(),
            program.kernel("twice").unwrap(),
        );
        let stream = xpu::KernelStream::create(&device).unwrap();
        let mut c = device.upload(&[0u32]).unwrap();
        let one = || xpu::Launch::grid([1]).block([1]);
        bump.launch(&stream, one(), xpu::args![&mut c, 1u32])
            .unwrap();
        stream.sync().unwrap();
        const N: u32 = 2000;
        let t0 = std::time::Instant::now();
        for _ in 0..N {
            bump.launch(&stream, one(), xpu::args![&mut c, 1u32])
                .unwrap();
        }
        let launched = t0.elapsed();
        stream.sync().unwrap();
        let synced = t0.elapsed();
        const M: u32 = 200;
        let t1 = std::time::Instant::now();
        for _ in 0..M {
            bump.launch(&stream, one(), xpu::args![&mut c, 2u32])
                .unwrap();
            stream.sync().unwrap();
        }
        let each = t1.elapsed();
        println!(
            "vulkan {:?}, push descriptors {push}: {N} launches {:.1} us each, {:.1} us each \
             with the sync; launch+sync {:.1} us",
            device.facts().name,
            launched.as_secs_f64() * 1e6 / N as f64,
            synced.as_secs_f64() * 1e6 / N as f64,
            each.as_secs_f64() * 1e6 / M as f64
        );
        let mut out = [0u32];
        c.download_into(&mut out).unwrap();
        assert_eq!(out[0], 1 + N + 2 * M);
        // Alternating kernels with different bindings, each reading the last one's output.
        let n = 1000u32;
        let mut x = device.upload(&vec![0u32; n as usize]).unwrap();
        let mut y = device.upload(&vec![0u32; n as usize]).unwrap();
        let g = || xpu::Launch::grid([n.div_ceil(64)]).block([64]);
        for k in 0..100u32 {
            fill.launch(&stream, g(), xpu::args![&mut x, k, n]).unwrap();
            twice
                .launch(&stream, g(), xpu::args![&mut y, &x, n])
                .unwrap();
        }
        stream.sync().unwrap();
        let got = y.download().unwrap();
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 2 * (99 + i as u32)));
    }
}

#[test]
fn events_order_streams_and_bracket_the_work() {
    let Some(device) = vulkan_or_skip() else {
        return;
    };
    let program = counter_program(&device);
    let (fill, twice) = (
        program.kernel("fill").unwrap(),
        program.kernel("twice").unwrap(),
    );
    let n = 4096u32;
    let geometry = || xpu::Launch::grid([n / 64]).block([64]);
    let a = xpu::KernelStream::create(&device).unwrap();
    let b = xpu::KernelStream::create(&device).unwrap();
    let mut x = device.upload(&vec![0u32; n as usize]).unwrap();
    let mut y = device.upload(&vec![0u32; n as usize]).unwrap();
    // Work on `a`, an event after it, `b` waiting for the event: b's kernel sees a's writes.
    fill.launch(&a, geometry(), xpu::args![&mut x, 7u32, n])
        .unwrap();
    let e = a.record().unwrap();
    b.wait_for(&e).unwrap();
    twice
        .launch(&b, geometry(), xpu::args![&mut y, &x, n])
        .unwrap();
    b.sync().unwrap();
    let got = y.download().unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 2 * (7 + i as u32)));
    // An event completes without anyone syncing its stream: polling it is enough.
    fill.launch(&a, geometry(), xpu::args![&mut x, 9u32, n])
        .unwrap();
    let e = a.record().unwrap();
    let t0 = std::time::Instant::now();
    while !e.is_complete() {
        assert!(t0.elapsed().as_secs() < 30, "the event never completed");
        std::thread::yield_now();
    }
    assert_eq!(x.download().unwrap()[5], 14);
    // Events bracket work on the device clock where the queue writes timestamps; they stay
    // readable after their stream is gone, and the later one is not before the earlier one.
    let timed = device.implementation().timer_tier() == xpu::hal::TimerTier::Event;
    let e0 = a.record().unwrap();
    fill.launch(&a, geometry(), xpu::args![&mut x, 1u32, n])
        .unwrap();
    let e1 = a.record().unwrap();
    let e2 = a.record().unwrap();
    drop(a);
    e2.sync().unwrap();
    assert!(e0.is_complete() && e1.is_complete() && e2.is_complete());
    assert_eq!(e1.elapsed_since(&e0).is_some(), timed);
    assert_eq!(e2.elapsed_since(&e0).is_some(), timed);
    if timed {
        assert!(e2.elapsed_since(&e0) >= e1.elapsed_since(&e0));
    }
    assert_eq!(x.download().unwrap()[5], 6);
    // A timer around one small launch reads the device interval; the median is printed (a
    // figure for the docs: with the event timestamps in the launch's own submission it is the
    // kernel's time, not the host's recording and submission).
    let s = xpu::KernelStream::create(&device).unwrap();
    let mut readings = Vec::new();
    for _ in 0..51 {
        let timer = xpu::KernelTimer::start(&s).unwrap();
        fill.launch(&s, geometry(), xpu::args![&mut x, 2u32, n])
            .unwrap();
        let t = timer.stop().unwrap();
        assert_eq!(t.nanos.is_some(), timed);
        readings.extend(t.nanos);
    }
    readings.sort();
    if let Some(m) = readings.get(readings.len() / 2) {
        // The factor KernelTimer applies (host clock over event clock across long copies).
        let scale = xpu::runtime::timer::calibrate_event_clock(&device).unwrap();
        println!(
            "vulkan: a {n}-element launch between timer events: median {m} ns (event clock \
             scale {scale:.4})"
        );
    }
    assert_eq!(x.download().unwrap()[5], 7);
}

#[test]
fn large_copies_run_the_copy_kernel_and_land_exactly() {
    // Copies of 1 MiB or more with 4-byte aligned offsets and length run a copy kernel (four
    // words per work-item, in dispatches of at most the device's grid); others, and copies
    // within one allocation, stay `vkCmdCopyBuffer`. Views at word offsets (some not
    // bindable, shifted by an argument), ragged lengths, a byte-granular view (command path),
    // a copy just under the threshold, and one within an allocation.
    let Some(vk) = vulkan_or_skip() else {
        return;
    };
    let n = (1usize << 20) + 12345;
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let src = vk.upload(&data).unwrap();
    for (from, to, len) in [
        (0usize, 0usize, n),
        (3, 1, n - 7),
        (1, 5, (1 << 18) - 1),
        (2, 0, 1 << 18),
        (4, 8, 1 << 18),
        (12, 4, (1 << 18) + 4),
    ] {
        let whole = vk.upload(&vec![7u32; n]).unwrap();
        let mut dst = whole.slice(to..to + len).unwrap();
        dst.copy_from(&src.slice(from..from + len).unwrap())
            .unwrap();
        let got = whole.download().unwrap();
        let mut want = vec![7u32; n];
        want[to..to + len].copy_from_slice(&data[from..from + len]);
        assert!(got == want, "copy of {len} words from {from} to {to}");
    }
    // Past one dispatch's reach where the grid is capped at 65535 groups (lavapipe's):
    // 64 MiB and a bit, in two dispatches.
    let big = (16usize << 20) + 1000;
    let bsrc = vk.upload(&(0..big as u32).collect::<Vec<u32>>()).unwrap();
    let mut bdst = vk.upload(&vec![0u32; big]).unwrap();
    bdst.copy_from(&bsrc).unwrap();
    let got = bdst.download().unwrap();
    assert!(
        got.iter().enumerate().all(|(i, &x)| x == i as u32),
        "64 MiB copy"
    );
    // Bytes: a length that is not a whole number of words.
    let bytes: Vec<u8> = (0..(1usize << 21) + 3).map(|i| (i * 7) as u8).collect();
    let bsrc = vk.upload(&bytes).unwrap();
    let bdst = vk.upload(&vec![0u8; bytes.len()]).unwrap();
    bdst.slice(1..)
        .unwrap()
        .copy_from(&bsrc.slice(..bytes.len() - 1).unwrap())
        .unwrap();
    let got = bdst.download().unwrap();
    assert_eq!(got[0], 0);
    assert!(got[1..] == bytes[..bytes.len() - 1], "byte copy");
    // Within one allocation: the two halves swapped in place through views.
    let both = vk.upload(&data[..1 << 20]).unwrap();
    let lo = both.slice(..1 << 19).unwrap();
    let mut hi = both.slice(1 << 19..).unwrap();
    hi.copy_from(&lo).unwrap();
    let got = both.download().unwrap();
    assert!(
        got[1 << 19..] == data[..1 << 19],
        "copy within an allocation"
    );
}

/// Dropping a `Program` (and its kernel) while a launch is recorded or in flight (issue 15):
/// the launch's submission keeps the pipeline, its layouts and the shader alive until it
/// retires, so the stream's later submission and wait use no destroyed object (lavapipe
/// crashed in the driver every time before) and the result is the kernel's.
#[test]
fn dropping_a_program_while_its_launch_is_in_flight_is_safe() {
    use std::sync::Arc;
    use xpu::launch::Launch;
    use xpu::{args, KernelStream};
    let Ok(device) = xpu::Device::open(Backend::Vulkan) else {
        eprintln!("no Vulkan device, skipping");
        return;
    };
    let src = "kernel inc(y: buf<u32, rw>, n: u32) {\n\
               let g: u32 = global_id.x;\n\
               if g < n { y[g] = y[g] * 3 + 1; }\n}\n";
    let module = Arc::new(xpu::ir::parse(src).unwrap().verify().unwrap());
    let decoy = Arc::new(
        xpu::ir::parse("kernel dec(z: buf<u32, rw>) { z[global_id.x] = z[global_id.x] + 5; }\n")
            .unwrap()
            .verify()
            .unwrap(),
    );
    let n = 1u32 << 16;
    let mut y = device.upload(&vec![1u32; n as usize]).unwrap();
    let stream = KernelStream::create(&device).unwrap();
    for round in 0..8u32 {
        let program = device.load(module.clone()).unwrap();
        let kernel = program.kernel("inc").unwrap();
        for _ in 0..4 {
            kernel
                .launch(
                    &stream,
                    Launch::grid([n / 256]).block([256]),
                    args![&mut y, n],
                )
                .unwrap();
        }
        // The launches are recorded (not yet submitted) or in flight: drop everything that
        // owned the pipeline before the stream submits and waits.
        drop(kernel);
        drop(program);
        // Another kernel's objects made and run meanwhile (on its own stream), so that memory
        // the dropped pipeline freed is taken again before the first stream runs.
        let other = device.load(decoy.clone()).unwrap();
        let mut z = device.upload(&vec![0u32; 256]).unwrap();
        let side = KernelStream::create(&device).unwrap();
        other
            .kernel("dec")
            .unwrap()
            .launch(&side, Launch::grid([1]).block([256]), args![&mut z])
            .unwrap();
        side.sync().unwrap();
        assert!(z.download().unwrap().iter().all(|&v| v == 5));
        if round % 2 == 1 {
            stream.sync().unwrap();
        }
    }
    stream.sync().unwrap();
    // 32 launches of y = 3y + 1 from 1, modulo 2^32.
    let want = (0..32).fold(1u32, |v, _| v.wrapping_mul(3).wrapping_add(1));
    let got = y.download().unwrap();
    assert!(got.iter().all(|&v| v == want), "{} != {want}", got[0]);
}

const LONG_LOOPS: &str = r#"
kernel long_loop(out: buf<u32, rw>, n: u32) {
    let c: u32 = 0;
    for j: u32 in 0..n {
        c += 1;
    }
    out[global_id.x] = c;
}

kernel two_loops(out: buf<u32, rw>, n: u32) {
    let c: u32 = 0;
    for j: u32 in 0..n {
        c += 1;
    }
    for j: u32 in 0..n {
        c += 2;
    }
    out[global_id.x] = c;
}

kernel forever(out: buf<u32, rw>, n: u32) {
    let c: u32 = 0;
    loop {
        c += 1;
        if c >= n {
            out[global_id.x] = c;
            return;
        }
    }
}

kernel streaming(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}
"#;

#[test]
fn loops_past_the_drivers_loop_limit_are_refused_never_wrong() {
    // Emission: on a device with a loop limiter a kernel with a loop gets the probe and its
    // status buffer (the binding after the buffer parameters); a kernel without a loop (a
    // streaming kernel) is emitted word for word as on a device without one, so it pays
    // nothing.
    let m = xpu::ir::parse(LONG_LOOPS).unwrap().verify().unwrap();
    let get = |name: &str| m.kernels().find(|(_, f)| f.name == name).unwrap().0;
    let limited = Caps::all(8);
    assert_eq!(limited.loop_limit, Some(65535));
    let mut unlimited = Caps::all(8);
    unlimited.loop_limit = None;
    for k in ["long_loop", "two_loops", "forever"] {
        let e = emit_kernel(&m, get(k), &limited).unwrap();
        assert_eq!(e.loop_status, Some(1), "{k}");
        if have_spirv_val() {
            validate(&e.words, &format!("loop-limit-{k}")).unwrap();
        }
        assert_eq!(
            emit_kernel(&m, get(k), &unlimited).unwrap().loop_status,
            None
        );
    }
    let a = emit_kernel(&m, get("streaming"), &limited).unwrap();
    let b = emit_kernel(&m, get("streaming"), &unlimited).unwrap();
    assert_eq!(a.loop_status, None);
    assert_eq!(a.words, b.words);

    let Some(device) = vulkan_or_skip() else {
        return;
    };
    let llvmpipe = device
        .facts()
        .name
        .as_deref()
        .is_some_and(|n| n.contains("llvmpipe"));
    let program = device.load(m.clone()).unwrap();
    let stream = xpu::KernelStream::create(&device).unwrap();
    // (kernel, n, the value every work-item must get, loop passes past lavapipe's 65,535)
    let cases = [
        ("long_loop", 65536u32, 65536u32, true),
        ("two_loops", 40000, 120000, true),
        ("forever", 70000, 70000, true),
        ("long_loop", 60000, 60000, false),
        ("two_loops", 30000, 90000, false),
        ("long_loop", 10, 10, false),
    ];
    for (k, n, want, past) in cases {
        let kernel = program.kernel(k).unwrap();
        let mut out = device.upload(&[0u32; 16]).unwrap();
        let r = kernel.launch(
            &stream,
            xpu::Launch::grid([2]).block([8]),
            xpu::args![&mut out, n],
        );
        match r {
            Ok(()) => {
                stream.sync().unwrap();
                let got = out.download().unwrap();
                assert!(got.iter().all(|&v| v == want), "{k}({n}): {got:?}");
                assert!(
                    !(llvmpipe && past),
                    "{k}({n}) ran past lavapipe's loop limit"
                );
            }
            Err(e) => {
                assert_eq!(e.code(), "XPU-L016", "{k}({n}): {e}");
                assert!(e.refused_by_device());
                assert!(llvmpipe && past, "{k}({n}) refused below the limit: {e}");
            }
        }
    }
}

/// A compare-exchange retry loop (verb-free, left by its own `break`) inside a uniform `for`
/// loop holding a wave verb, in a virtual wave (@wave(32) on lavapipe's subgroups of 8): the
/// inner `break` leaves only the inner loop, so the workgroup still meets every verb together.
/// It was refused as "a wave verb in a loop with a break".
const CAS_IN_VERB_LOOP: &str = r#"
@wave(32)
kernel cas_retry(counts: buf<u32, rw>, out: buf<u32, rw>, n: u32) {
    let g: u32 = global_id.x;
    let acc: u32 = 0;
    for i in 0u32..n {
        acc = acc + wave_reduce_sum(g * (i + 1));
        let k: u32 = (g + i) % 4;
        loop {
            let old: u32 = atomic_add(counts[k], 0u32);
            if atomic_compare_exchange(counts[k], old, old + i + 1) == old {
                break;
            }
        }
    }
    out[g] = acc;
}
run cas_retry {
    grid = [2];
    block = [64];
    arg counts = fill(4, 0);
    arg out = fill(128, 0);
    arg n = 6;
    expect counts = interp;
    expect out = interp;
}
"#;

#[test]
fn a_retry_loop_inside_a_virtual_wave_verb_loop_runs() {
    let m = xpu::ir::parse(CAS_IN_VERB_LOOP).unwrap().verify().unwrap();
    let (h, _) = m.kernels().next().unwrap();
    let e = emit_kernel(&m, h, &Caps::all(8)).unwrap();
    assert_eq!(
        e.wave_mode,
        xpu::codegen::spirv::WaveMode::Virtual { slots: 4 }
    );
    // A `break` out of the verb's own loop is still refused, by that name.
    let src = CAS_IN_VERB_LOOP.replace("                break;\n", "                break;\n            }\n            if old > 100000u32 {\n                break 'outer;\n");
    let src = src.replace("    for i in 0u32..n {", "    'outer: for i in 0u32..n {");
    let m2 = xpu::ir::parse(&src).unwrap().verify().unwrap();
    let (h2, _) = m2.kernels().next().unwrap();
    let err = emit_kernel(&m2, h2, &Caps::all(8)).unwrap_err().to_string();
    assert!(err.contains("with a break, continue or return"), "{err}");
    agrees_with_the_interpreter("cas-retry", CAS_IN_VERB_LOOP, 1);
}

/// The SPIR-V of four file-test kernels at subgroup size 32 with every capability, as
/// `spirv-dis` prints it, against `tests/out/spirv/` (the PTX and AMDGPU snapshots' kernels).
/// A change is reviewed by diff and accepted with `XPU_BLESS=1`; a missing snapshot fails
/// unless blessed.
#[test]
fn spirv_snapshots() {
    if Command::new("spirv-dis").arg("--version").output().is_err() {
        eprintln!("SKIP spirv_snapshots: spirv-dis not found (apt-get install spirv-tools)");
        return;
    }
    let bless = std::env::var_os("XPU_BLESS").is_some_and(|v| v == "1");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/out/spirv");
    let wanted = ["saxpy", "triad", "reduce_wave", "matmul"];
    let caps = Caps::all(32);
    let mut seen = Vec::new();
    let mut changed = Vec::new();
    for path in filetests() {
        let src = std::fs::read_to_string(&path).unwrap();
        let Ok(Ok(vm)) = xpu::ir::parse(&src).map(|m| m.verify()) else {
            continue;
        };
        for (h, f) in vm.kernels() {
            if !wanted.contains(&f.name.as_str()) || seen.contains(&f.name) {
                continue;
            }
            seen.push(f.name.clone());
            let e = emit_kernel(&vm, h, &caps).unwrap_or_else(|u| panic!("{}: {u}", f.name));
            let tmp = std::env::temp_dir().join(format!(
                "xpu-snap-{}-{}.spv",
                std::process::id(),
                f.name
            ));
            let bytes: Vec<u8> = e.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            std::fs::write(&tmp, bytes).unwrap();
            let out = Command::new("spirv-dis")
                .arg("--raw-id")
                .arg(&tmp)
                .output()
                .unwrap();
            let _ = std::fs::remove_file(&tmp);
            assert!(out.status.success(), "spirv-dis failed on {}", f.name);
            let text = String::from_utf8(out.stdout).unwrap();
            let file = dir.join(format!("{}.spvasm", f.name));
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else {
                match std::fs::read_to_string(&file) {
                    Ok(old) if old == text => {}
                    Ok(_) => changed.push(format!("{} changed", file.display())),
                    Err(_) => changed.push(format!("{} is missing", file.display())),
                }
            }
        }
    }
    assert_eq!(seen.len(), wanted.len(), "found only {seen:?}");
    assert!(
        changed.is_empty(),
        "{}; review and rerun with XPU_BLESS=1",
        changed.join("; ")
    );
}

/// Checked mode and ub-traps on Vulkan (docs/checked-mode.md; issue 15 item 3, issue 16
/// item 4): the SPIR-V of every filetest and UB kernel built with every check validates, and on
/// the device an out-of-bounds access to a buffer, a shared or a private array is refused with
/// `XPU-L013` naming the kernel, the line, the index and the length, a broken `align` with
/// `XPU-L010`, while code without checks is byte-identical to the unchecked emitter's.
mod checked {
    use super::*;
    use xpu::codegen::checks::Checks;
    use xpu::codegen::spirv::emit_kernel_checked;
    use xpu::{ArgValue, Launch, ProgramOptions};

    const ALL: Checks = Checks {
        bounds: true,
        ub_traps: true,
    };

    #[test]
    fn every_kernel_with_every_check_emits_valid_spirv() {
        let mut paths = filetests();
        let ub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ub");
        let mut more: Vec<_> = std::fs::read_dir(ub)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "xk"))
            .collect();
        more.sort();
        paths.extend(more);
        let check = have_spirv_val();
        let (mut emitted, mut reporting, mut failures) = (0, 0, Vec::new());
        for path in paths {
            let src = std::fs::read_to_string(&path).unwrap();
            let Ok(vm) = xpu::ir::parse(&src).and_then(|m| m.verify()) else {
                continue;
            };
            for (s, clamp) in [(8u32, true), (32, false)] {
                let caps = Caps {
                    clamp_indices: clamp,
                    ..Caps::all(s)
                };
                for (h, f) in vm.kernels() {
                    let Ok(e) = emit_kernel_checked(&vm, h, &caps, ALL) else {
                        continue;
                    };
                    emitted += 1;
                    reporting += e.report.is_some() as usize;
                    let tag = format!(
                        "checked-{}-{}-{s}",
                        path.file_stem().unwrap().to_string_lossy(),
                        f.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                    );
                    if check {
                        if let Err(msg) = validate(&e.words, &tag) {
                            failures.push(format!("{} {} (S={s}): {msg}", path.display(), f.name));
                        }
                    }
                    // Without checks the emitter's output is what it always was.
                    let plain = emit_kernel(&vm, h, &caps).unwrap();
                    let off = emit_kernel_checked(&vm, h, &caps, Checks::default()).unwrap();
                    assert_eq!(plain.words, off.words, "{}", f.name);
                    assert_eq!(off.report, None);
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} invalid modules:\n{}",
            failures.len(),
            failures.join("\n")
        );
        assert!(
            emitted >= 90 && reporting >= 80,
            "{emitted} emitted, {reporting} with a report"
        );
    }

    #[test]
    fn a_confirmed_align_statement_costs_nothing() {
        // `4 * i` is a multiple of 4 f32s = 16 bytes: the proof confirms `align = 16`.
        let src = "kernel k(o: buf<f32, rw>, x: buf<f32>) {\n    let i: u32 = global_id.x;\n    let v: vec4<f32> = vload<4>(x, 4 * i, align = 16);\n    vstore(o, 4 * i, v, align = 16);\n}\n";
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let caps = Caps::all(32);
        let traps = Checks {
            bounds: false,
            ub_traps: true,
        };
        let e = emit_kernel_checked(&vm, h, &caps, traps).unwrap();
        assert_eq!(e.report, None);
        assert_eq!(e.words, emit_kernel(&vm, h, &caps).unwrap().words);
        // A statement over a parameter's offset is tested.
        let src = src.replace("4 * i", "4 * i + 1");
        let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let e = emit_kernel_checked(&vm, h, &caps, traps).unwrap();
        assert!(e.report.is_some());
        assert_eq!(e.sites.len(), 2);
        assert!(
            e.sites.iter().all(|s| s.what == "align = 16"),
            "{:?}",
            e.sites
        );
    }

    fn load(device: &xpu::Device, src: &str, options: ProgramOptions) -> xpu::Program {
        device
            .load_with(xpu::ir::parse(src).unwrap().verify().unwrap(), options)
            .unwrap()
    }

    /// Launches `kernel` (one workgroup of `block`) over `bufs` (each `len` u32s, filled with
    /// its index) and returns the launch's result and the buffers after it.
    fn launch(
        p: &xpu::Program,
        kernel: &str,
        block: u32,
        bufs: &[usize],
    ) -> (Result<(), xpu::LaunchError>, Vec<Vec<u32>>) {
        let d = p.device();
        let mut bs: Vec<_> = bufs
            .iter()
            .map(|&n| d.upload(&(0..n as u32).collect::<Vec<_>>()).unwrap())
            .collect();
        let k = p.kernel(kernel).unwrap();
        let stream = xpu::KernelStream::current(d);
        let args: Vec<ArgValue> = bs.iter_mut().map(|b| ArgValue::from(&mut *b)).collect();
        let r = k.launch(&stream, Launch::grid(1).block(block), args);
        let out = bs.iter().map(|b| b.download().unwrap()).collect();
        (r, out)
    }

    const OOB: &str = "kernel shift(y: buf<u32, rw>, x: buf<u32, rw>) {
    let i: u32 = global_id.x;
    y[i] = x[i + 1] + 100;
}

kernel spill(y: buf<u32, rw>) {
    let i: u32 = global_id.x;
    y[i * 2] = 7;
}

kernel tile(out: buf<u32, rw>) {
    shared t: [u32; 64];
    let l: u32 = local_id.x;
    t[l + 1] = l;
    barrier();
    out[l] = t[l];
}

kernel count(out: buf<u32, rw>) {
    shared t: [u32; 64];
    let l: u32 = local_id.x;
    t[l] = 0;
    barrier();
    let old: u32 = atomic_add(t[l * 1024], 1);
    out[l] = old;
}

kernel priv(out: buf<u32, rw>) {
    let acc: [u32; 4];
    for k: u32 in 0..5 {
        acc[k] = k;
    }
    out[global_id.x] = acc[0];
}
";

    #[test]
    fn out_of_bounds_accesses_are_refused_with_kernel_line_and_index() {
        let Some(device) = vulkan_or_skip() else {
            return;
        };
        let p = load(&device, OOB, ProgramOptions::all());
        // A load past the end reads 0 (the other lanes ran), reported at its line.
        let (r, out) = launch(&p, "shift", 64, &[64, 64]);
        let e = r.unwrap_err();
        assert_eq!(e.code(), "XPU-L013", "{e}");
        let text = e.to_string();
        assert!(
            text.contains("kernel shift") && text.contains("line 3"),
            "{text}"
        );
        assert!(
            text.contains("index 64") && text.contains("buffer x") && text.contains("length 64"),
            "{text}"
        );
        assert_eq!(out[0][62], 163);
        assert_eq!(out[0][63], 100, "the out-of-bounds load reads 0");
        // A store past the end is skipped; the ones in bounds land.
        let (r, out) = launch(&p, "spill", 32, &[32]);
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("kernel spill") && text.contains("line 8") && text.contains("buffer y"),
            "{text}"
        );
        assert!((0..16).all(|i| out[0][2 * i] == 7), "{:?}", out[0]);
        // Shared and private arrays.
        let (r, _) = launch(&p, "tile", 64, &[64]);
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("line 14") && text.contains("index 64") && text.contains("shared t"),
            "{text}"
        );
        let (r, _) = launch(&p, "count", 64, &[64]);
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("kernel count") && text.contains("line 24") && text.contains("shared t"),
            "{text}"
        );
        let (r, _) = launch(&p, "priv", 1, &[1]);
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("line 31") && text.contains("index 4") && text.contains("array acc"),
            "{text}"
        );
        // The report is cleared for the next launch: an in-bounds one passes.
        let ok = load(
            &device,
            "kernel fine(y: buf<u32, rw>) {\n    y[global_id.x] = 1;\n}\n",
            ProgramOptions::all(),
        );
        let (r, out) = launch(&ok, "fine", 8, &[8]);
        r.unwrap();
        assert_eq!(out[0], vec![1; 8]);
        let (r, _) = launch(&p, "spill", 16, &[32]);
        r.unwrap();
    }

    #[test]
    fn without_checked_mode_no_report_is_made() {
        let Some(device) = vulkan_or_skip() else {
            return;
        };
        let options = ProgramOptions {
            checked: false,
            ub_traps: false,
            ..Default::default()
        };
        let p = load(&device, OOB, options);
        // lavapipe's robust buffer access drops the stray store; the launch is not refused.
        let (r, _) = launch(&p, "spill", 32, &[32]);
        r.unwrap();
    }

    const ALIGN: &str = "kernel gather(out: buf<u32, rw>, x: buf<u32>, o: u32) {
    let i: u32 = global_id.x;
    let v: vec4<u32> = vload<4>(x, 4 * i + o, align = 16);
    out[i] = v.x;
}
";

    #[test]
    fn a_broken_align_statement_is_refused_and_reads_at_the_rounded_index() {
        let Some(device) = vulkan_or_skip() else {
            return;
        };
        let run = |options: ProgramOptions, o: u32| {
            let p = load(&device, ALIGN, options);
            let mut out = device.upload(&[0u32; 4]).unwrap();
            let x = device.upload(&(0..32u32).collect::<Vec<_>>()).unwrap();
            let k = p.kernel("gather").unwrap();
            let stream = xpu::KernelStream::current(&device);
            let r = k.launch(
                &stream,
                Launch::grid(1).block(4),
                xpu::args![&mut out, &x, o],
            );
            (r, out.download().unwrap())
        };
        let traps = ProgramOptions {
            checked: false,
            ub_traps: true,
            ..Default::default()
        };
        let (r, out) = run(traps, 2);
        let e = r.unwrap_err();
        assert_eq!(e.code(), "XPU-L010", "{e}");
        let text = e.to_string();
        assert!(
            text.contains("kernel gather") && text.contains("line 3"),
            "{text}"
        );
        assert!(
            text.contains("index 2") && text.contains("align = 16"),
            "{text}"
        );
        // Each access proceeded at its index rounded down to 4 elements.
        assert_eq!(out, vec![0, 4, 8, 12]);
        // A kept promise passes; without ub-traps a broken one is not tested.
        assert_eq!(run(traps, 4), (Ok(()), vec![4, 8, 12, 16]));
        let none = ProgramOptions {
            checked: false,
            ub_traps: false,
            ..Default::default()
        };
        let (r, _) = run(none, 2);
        r.unwrap();
    }
}
