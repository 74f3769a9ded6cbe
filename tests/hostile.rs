//! Property tests of launch-size arithmetic at the edges of `u32` and `u64` (issue 15): every
//! size a kernel or run block gives (private arrays, shared arrays, grid × block, run-block
//! generators) is computed in checked 64-bit arithmetic, so a launch is either refused with
//! its code or runs with exactly the work and memory it asked for, and a manifest never
//! under-reports. The hostile kernel files themselves are `tests/hostile/` (run by
//! `tests/filetests.rs`).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;
use xpu::filetest::runner::{slot_count, slots};
use xpu::filetest::spec::{ArgInit, Value};
use xpu::ir::{ElemType, Scalar};
use xpu::launch::{codes, Launch};
use xpu::{args, Backend, Device, KernelStream, LaunchError};

/// Lengths at the edges of `u32` (and of the 32-bit byte and slot counts they multiply into),
/// and small ones.
fn edge_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            1u32,
            2,
            15,
            16,
            63,
            64,
            65535,
            65536,
            (1 << 20) - 1,
            1 << 20,
            (1 << 26) - 1,
            1 << 26,
            (1 << 26) + 1,
            1 << 28,
            (1 << 30) - 1,
            1 << 30,
            1 << 31,
            u32::MAX - 64,
            u32::MAX - 15,
            u32::MAX - 1,
            u32::MAX,
        ]),
        1u32..4096,
    ]
}

/// An element type by its text name, byte size and a literal of it.
fn elem() -> impl Strategy<Value = (&'static str, u64, &'static str)> {
    prop::sample::select(vec![
        ("u8", 1u64, "1"),
        ("u32", 4, "1"),
        ("f64", 8, "1.0"),
        ("vec4<f32>", 16, "vec4<f32>(1.0)"),
        ("vec2<u64>", 16, "vec2<u64>(1)"),
    ])
}

fn cpu() -> Device {
    Device::open(Backend::Cpu).expect("the CPU backend")
}

fn interp() -> Device {
    Device::open(Backend::Interp).expect("the interpreter")
}

fn load(device: &Device, src: &str) -> xpu::Program {
    let module = xpu::ir::parse(src)
        .unwrap_or_else(|e| panic!("{src}\n{e:?}"))
        .verify()
        .unwrap_or_else(|e| panic!("{src}\n{e:?}"));
    device.load(Arc::new(module)).expect("loads")
}

fn launch(
    program: &xpu::Program,
    launch: Launch,
    out: &mut xpu::KernelBuffer<u32>,
) -> Result<(), LaunchError> {
    let stream = KernelStream::current(program.device());
    program.kernel("k")?.launch(&stream, launch, args![out])?;
    stream.sync().map_err(|e| LaunchError::Device {
        kernel: "k".into(),
        message: e.to_string(),
    })
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Static shared arrays of any lengths: the manifest's static shared bytes are at least their
/// exact 64-bit sum on the CPU (which aligns each array to 16 bytes) and exactly it on the
/// interpreter, and a launch is refused with `XPU-L006` past the backend's 1 GiB or runs.
/// The CPU summed the offsets in `u32`: `[u32; 2^30]` was 0 bytes.
#[test]
fn shared_sizes_are_never_under_reported() {
    let (cpu, interp) = (cpu(), interp());
    let arrays = prop::collection::vec((edge_len(), elem()), 1..=3);
    runner(48)
        .run(&arrays, |arrays| {
            let decls: String = arrays
                .iter()
                .enumerate()
                .map(|(i, (n, (ty, _, _)))| format!("    shared s{i}: [{ty}; {n}];\n"))
                .collect();
            let src =
                format!("kernel k(out: buf<u32, rw>) {{\n{decls}    out[global_id.x] = 1;\n}}\n");
            let exact: u64 = arrays
                .iter()
                .map(|(n, (_, size, _))| *n as u64 * size)
                .sum();
            for device in [&cpu, &interp] {
                let name = device.backend().name();
                let program = load(device, &src);
                let Some(manifest) = program.manifest("k") else {
                    return Err(TestCaseError::fail(format!("{name}: no manifest")));
                };
                let reported = manifest.static_shared_bytes.unwrap_or(0);
                prop_assert!(
                    reported >= exact,
                    "{name}: manifest says {reported} bytes for {exact}"
                );
                if device.backend() == Backend::Interp {
                    prop_assert_eq!(reported, exact);
                }
                let mut out = device.upload(&[0u32]).unwrap();
                if exact > 1 << 30 {
                    let e = launch(&program, Launch::grid([1]).block([1]), &mut out).unwrap_err();
                    prop_assert_eq!(e.code(), codes::SHARED_MEMORY, "{}", e);
                } else if exact <= 16 << 20 {
                    launch(&program, Launch::grid([1]).block([1]), &mut out)
                        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
                    prop_assert_eq!(out.download().unwrap(), vec![1]);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A private array of any length and element: refused with `XPU-L017` where a wave's state
/// cannot hold it (the CPU: `len × size × wave` past 2^31 bytes) and otherwise runs, its last
/// element written and read back. The CPU sized it as `len × lanes × row` in `u32`, which
/// wrapped at `len = 2^26` and wave 16 and wrote past the worker's allocation.
#[test]
fn private_sizes_are_refused_or_run() {
    let cpu = cpu();
    let wave = xpu::jit::host_simd_width() as u64;
    runner(40)
        .run(&(edge_len(), elem()), |(n, (ty, size, lit))| {
            let last = n - 1;
            let src = format!(
                "kernel k(out: buf<u32, rw>) {{\n    let p: [{ty}; {n}];\n    \
                 p[{last}] = {lit};\n    let z: {ty} = p[{last}];\n    \
                 out[global_id.x] = 7;\n}}\n"
            );
            let bytes = n as u64 * size * wave;
            let program = load(&cpu, &src);
            let mut out = cpu.upload(&[0u32]).unwrap();
            if bytes > 1 << 31 {
                let e = launch(&program, Launch::grid([1]).block([1]), &mut out).unwrap_err();
                prop_assert_eq!(e.code(), codes::PRIVATE_MEMORY, "{}", e);
            } else if bytes <= 16 << 20 {
                launch(&program, Launch::grid([1]).block([1]), &mut out)
                    .map_err(|e| TestCaseError::fail(format!("{n} × {ty}: {e}")))?;
                prop_assert_eq!(out.download().unwrap(), vec![7]);
            } else {
                // Between the two: compiled or refused, never anything else.
                if let Err(e) = program.kernel("k") {
                    prop_assert_eq!(e.code(), codes::PRIVATE_MEMORY, "{}", e);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Grid and block dimensions at the edges of `u32`: refused with `XPU-L005` when a
/// dimension's work-items pass 2^32 or the block passes the CPU's 32-bit counters (its waves
/// were counted in 32 bits: a block of 2^32 − 15 ran nothing and reported success),
/// otherwise, where small enough to run here, every work-item runs exactly once.
#[test]
fn grid_times_block_is_refused_or_runs_every_work_item() {
    let cpu = cpu();
    let program = load(
        &cpu,
        "kernel k(out: buf<u32, rw>) {\n    let old: u32 = atomic_add(out[0], 1);\n}\n",
    );
    let dims = || prop::collection::vec(edge_len(), 1..=3);
    runner(64)
        .run(&(dims(), dims()), |(grid, block)| {
            let pad = |v: &Vec<u32>| [v[0], *v.get(1).unwrap_or(&1), *v.get(2).unwrap_or(&1)];
            let (g, b) = (pad(&grid), pad(&block));
            let volume: u128 = b.iter().map(|&x| x as u128).product();
            let total: u128 = volume * g.iter().map(|&x| x as u128).product::<u128>();
            let per_dim = (0..3).any(|d| g[d] as u64 * b[d] as u64 > 1 << 32);
            let mut out = cpu.upload(&[0u32]).unwrap();
            if per_dim || volume > xpu::jit::MAX_BLOCK_VOLUME as u128 {
                let e = launch(&program, Launch::grid(g).block(b), &mut out).unwrap_err();
                prop_assert_eq!(e.code(), codes::TOO_MANY_THREADS, "{}", e);
            } else if total <= 1 << 16 {
                launch(&program, Launch::grid(g).block(b), &mut out)
                    .map_err(|e| TestCaseError::fail(format!("{g:?} × {b:?}: {e}")))?;
                prop_assert_eq!(out.download().unwrap(), vec![total as u32]);
            }
            Ok(())
        })
        .unwrap();
}

/// Run-block generators at the edges: the slot count of `fill`, `iota` and `random` of any
/// length and vector width is its exact 64-bit product, and building the slots is an error,
/// not an abort, when the host cannot hold them (one `u64` per scalar: `fill(4294967295, _)`
/// of `vec16` is 512 GiB).
#[test]
fn run_block_generators_count_in_64_bits_and_never_abort() {
    let lanes = prop::sample::select(vec![1u8, 2, 3, 4, 8, 16]);
    runner(64)
        .run(&(edge_len(), lanes, 0..3usize), |(len, lanes, form)| {
            let init = match form {
                0 => ArgInit::Fill {
                    len,
                    value: Value::Int(3),
                },
                1 => ArgInit::Iota {
                    len,
                    start: Value::Int(0),
                    step: Value::Int(1),
                },
                _ => ArgInit::Random {
                    len,
                    lo: Value::Int(0),
                    hi: Value::Int(100),
                    seed: 1,
                },
            };
            let elem = ElemType::vector(Scalar::U32, lanes);
            let count = slot_count(&init, elem).unwrap();
            prop_assert_eq!(count, len as u64 * lanes as u64);
            prop_assert_eq!(init.count(), Some(len as usize));
            let bytes = count * 8;
            if bytes > 1 << 40 {
                prop_assert!(slots(&init, elem).is_err());
            } else if bytes <= 1 << 20 {
                let s = slots(&init, elem).unwrap();
                prop_assert_eq!(s.len() as u64, count);
            }
            Ok(())
        })
        .unwrap();
}

/// A run block's buffer larger than the host holds is the device's `XPU-D005` refusal on the
/// host backends, made before any of it is filled (it was filled page by page into the OOM
/// killer, or its slots aborted the process).
#[test]
fn an_oversized_run_block_buffer_is_refused_with_d005() {
    let src = "kernel k(y: buf<vec4<f64>, rw>) { y[0] = vec4<f64>(1.0); }\n\
               run k { grid = [1]; block = [1]; arg y = iota(4294967295); expect refused XPU-D005; }\n";
    let runner = xpu::filetest::runner::Runner::new(vec![cpu(), interp()]).unwrap();
    let mut cases = Vec::new();
    runner
        .run_source("t.xk", src, &mut |c| {
            cases.push(c.clone());
            Ok(())
        })
        .unwrap();
    assert_eq!(cases.len(), 2);
    for c in cases {
        assert_eq!(
            c.outcome,
            xpu::filetest::runner::Outcome::Pass,
            "{}",
            c.backend
        );
    }
}

/// The interpreter's race shadow takes 24 bytes per byte: a shared array of its own advertised
/// limit (1 GiB) asks for 25 GiB. Where the host has less available the launch is refused with
/// `XPU-L006` before anything is allocated (it aborted in the allocator); where it has more,
/// the launch is not made here (it would take that memory).
#[test]
fn the_interpreters_race_shadow_is_checked_against_the_host() {
    let need = (1u64 << 30) * 26;
    match xpu::facts::host_available_memory() {
        Some(available) if available < need => {}
        other => {
            eprintln!("the host has {other:?} bytes available: not launched");
            return;
        }
    }
    let interp = interp();
    let program = load(
        &interp,
        "kernel k(out: buf<u32, rw>) {\n    shared s: [u32; 268435456];\n    \
         let l: u32 = local_id.x;\n    s[l] = l;\n    barrier();\n    \
         out[global_id.x] = s[l];\n}\n",
    );
    let mut out = interp.upload(&[0u32; 4]).unwrap();
    let e = launch(&program, Launch::grid([1]).block([4]), &mut out).unwrap_err();
    assert_eq!(e.code(), codes::SHARED_MEMORY, "{e}");
    assert!(e.to_string().contains("race shadow"), "{e}");
}

// ---------------------------------------------------------------------------------------
// The run-time path fuzzed: mutated kernel files through `xpu run` on every backend here

/// splitmix64, for reproducible mutations.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The shipped kernel files with their run blocks: the inputs the mutations start from.
fn seed_files() -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("tests/filetests"), root.join("examples")];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "xk") {
                if let Ok(s) = std::fs::read_to_string(&p) {
                    // Files with long-running cases (deadlines, loop limits) stay out: the
                    // mutations are about sizes, indices and syntax, not time.
                    if s.contains("run ") && !s.contains("deadline") && !s.contains("long_loops") {
                        files.push((p, s));
                    }
                }
            }
        }
    }
    files.sort();
    files
}

/// One mutation of a kernel file: a number replaced by a value at an edge (in a run block's
/// geometry, a generator's length, an index, an array length), a line deleted or repeated,
/// two lines swapped, or the file cut short.
fn mutate(src: &str, rng: &mut Mix) -> String {
    const EDGES: [&str; 16] = [
        "0",
        "1",
        "-1",
        "3",
        "31",
        "33",
        "255",
        "65535",
        "65536",
        "1048577",
        "2147483647",
        "2147483648",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "1e39",
    ];
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(10) {
            0..=5 => {
                // A number in the line, replaced.
                let line = &lines[i];
                let digits: Vec<(usize, usize)> = {
                    let b = line.as_bytes();
                    let mut spans = Vec::new();
                    let mut k = 0;
                    while k < b.len() {
                        if b[k].is_ascii_digit() {
                            let s = k;
                            while k < b.len() && b[k].is_ascii_digit() {
                                k += 1;
                            }
                            spans.push((s, k));
                        } else {
                            k += 1;
                        }
                    }
                    spans
                };
                if digits.is_empty() {
                    continue;
                }
                let (s, e) = digits[rng.below(digits.len())];
                let v = EDGES[rng.below(EDGES.len())];
                lines[i] = format!("{}{v}{}", &line[..s], &line[e..]);
            }
            6 => {
                lines.remove(i);
            }
            7 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            8 => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
            _ => lines.truncate(i),
        }
    }
    lines.join("\n") + "\n"
}

/// `XPU_RUNTIME_FUZZ_FILES` mutated kernel files (default 240) through `xpu run` on the
/// interpreter, the CPU and Vulkan (where present), in a process whose address space is
/// capped at 6 GiB so that an input-sized allocation fails rather than swapping: every run
/// must end with exit 0 or 1 (cases passed or failed, files refused with their codes),
/// never a signal, an abort, a Rust panic or a hang.
#[test]
fn mutated_kernel_files_never_crash_xpu_run() {
    let seeds = seed_files();
    assert!(seeds.len() > 50, "kernel files not found");
    let want: usize = std::env::var("XPU_RUNTIME_FUZZ_FILES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(240);
    let dir = std::env::temp_dir().join(format!("xpu-runtime-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Mix(0x15);
    for n in 0..want {
        let (path, src) = &seeds[rng.below(seeds.len())];
        let stem = path.file_stem().unwrap().to_string_lossy();
        let text = format!(
            "// mutated from {}\n{}",
            path.display(),
            mutate(src, &mut rng)
        );
        std::fs::write(dir.join(format!("m{n:04}_{stem}.xk")), text).unwrap();
    }
    let mut backends = vec!["interp", "cpu"];
    if Device::open(Backend::Vulkan).is_ok() {
        backends.push("vulkan");
    }
    for backend in backends {
        let xpu_bin = env!("CARGO_BIN_EXE_xpu");
        let script = format!(
            "ulimit -v 6291456; exec '{xpu_bin}' run '{}' --backend {backend} --deadline 3",
            dir.display()
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("CAJETA_XPU_POISON", "1")
            .output()
            .expect("run xpu");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let summary = stdout.lines().last().unwrap_or_default().to_string();
        eprintln!("run-time fuzz on {backend}: {want} mutated kernel files: {summary}");
        let last_case = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with("PASS") || l.starts_with("FAIL") || l.starts_with("SKIP"))
            .unwrap_or("(none)");
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)) && !stderr.contains("panicked"),
            "xpu run on {backend} ended with {:?} after {last_case}\n{}\nkept in {}",
            out.status,
            stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n"),
            dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process `xpu run` starts after a device it cannot recover (`XPU-D016`, issue 16) is
/// given `--resume-after N --resume-counts P F S`: it runs only the cases after the first N
/// and closes with the counts of the whole run (on the H200 the hand-on once failed in clap).
#[test]
fn xpu_run_goes_on_after_the_cases_an_earlier_process_ran() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
        .args([
            "run",
            "tests/hostile/fault_then_pass.xk",
            "--backend",
            "interp",
        ])
        .args(["--resume-after", "2", "--resume-counts", "1", "1", "0"])
        .output()
        .expect("xpu runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cases: Vec<&str> = stdout.lines().filter(|l| l.starts_with("PASS")).collect();
    assert_eq!(cases.len(), 1, "{stdout}{stderr}");
    assert!(cases[0].contains("after_fault_sum"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l == "2 passed, 1 failed"),
        "the closing line counts the earlier process's cases: {stdout}{stderr}"
    );
    // An earlier failure is the run's failure.
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
}
