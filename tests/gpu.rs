//! GPU-facing tests that need no GPU (feature `cuda`; one test binary, because LLVM links are
//! slow): every kernel of every filetest lowers through the shared LLVM walk to PTX that
//! `ptxas -arch=sm_90` assembles, with its footprint read from `ptxas -v`; a few kernels'
//! PTX is kept as snapshots under `tests/out/ptx/` (`XPU_BLESS=1` writes them; a missing one
//! fails). Without
//! `ptxas` the assembling steps are skipped with a message (CI installs the
//! `nvidia-cuda-nvcc` wheel). On a machine with a CUDA driver, the filetests also run on the
//! device through `xpu run --backend cuda`; that needs no test here.

use std::path::{Path, PathBuf};
use xpu::codegen::llvm::ptxas;
use xpu::codegen::llvm::{self, nvptx::Nvptx, KernelRef};

/// Reports a test that cannot run here. Rust's harness has no "skipped" result, so the test
/// returns and counts as passed; this line (written to the process's stderr, past the
/// harness's capture, so the CI log shows it) says that it did not run.
fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIP  gpu::{test}: {reason} (Rust has no skipped state: the harness counts it as passed)"
    );
}

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

/// Each verified module of the filetests, with its path.
fn modules() -> Vec<(PathBuf, xpu::ir::VerifiedModule)> {
    let mut out = Vec::new();
    for path in filetests() {
        let src = std::fs::read_to_string(&path).unwrap();
        let Ok(m) = xpu::ir::parse(&src) else {
            continue;
        };
        let Ok(v) = m.verify() else { continue };
        out.push((path, v));
    }
    out
}

#[test]
fn every_filetest_kernel_lowers_and_assembles() {
    let target = Nvptx::new(90);
    let have_ptxas = ptxas::find().is_some();
    if !have_ptxas {
        skip(
            "every_filetest_kernel_lowers_and_assembles (assembling)",
            "ptxas not found (XPU_PTXAS, PATH, the nvidia-cuda-nvcc wheel): lowering only",
        );
    }
    let mut failures = Vec::new();
    let mut lowered = 0;
    let mut refused = Vec::new();
    for (path, vm) in modules() {
        for (h, f) in vm.kernels() {
            let name = format!("{}::{}", path.display(), f.name);
            let out = match llvm::lower(&vm, &[KernelRef::plain(h)], &target, &Default::default()) {
                Ok(o) => o,
                Err(e) if e.code == llvm::codes::UNSUPPORTED || e.code == llvm::codes::WAVE => {
                    refused.push(format!("{name}: {e}"));
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            lowered += 1;
            if have_ptxas {
                match ptxas::assemble(&out.text(), "sm_90") {
                    Ok(r) => {
                        let sym = &out.kernels[0].symbol;
                        match r.function(sym) {
                            Some(fx) if fx.registers.is_some() => {}
                            _ => failures.push(format!("{name}: no ptxas -v record for {sym}")),
                        }
                    }
                    Err(e) => failures.push(format!("{name}: {e}")),
                }
            }
        }
    }
    for r in &refused {
        eprintln!("refused by name: {r}");
    }
    assert!(
        lowered > 0,
        "no filetest kernel was lowered (parser missing?)"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn ptx_snapshots() {
    let bless = std::env::var_os("XPU_BLESS").is_some_and(|v| v == "1");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/out/ptx");
    let wanted = ["saxpy", "triad", "reduce_wave", "matmul"];
    let target = Nvptx::new(90);
    let mut seen = 0;
    for (_, vm) in modules() {
        for (h, f) in vm.kernels() {
            if !wanted.contains(&f.name.as_str()) {
                continue;
            }
            let out = llvm::lower(&vm, &[KernelRef::plain(h)], &target, &Default::default())
                .unwrap_or_else(|e| panic!("{e}"));
            let file = dir.join(format!("{}.ptx", f.name));
            let text = out.text();
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else {
                // A missing snapshot fails: writing it would pass whatever the lowering emits.
                let old = std::fs::read_to_string(&file).unwrap_or_else(|e| {
                    panic!(
                        "{}: {e}; review the output and create it with XPU_BLESS=1",
                        file.display()
                    )
                });
                assert_eq!(
                    old,
                    text,
                    "{} changed; review and rerun with XPU_BLESS=1",
                    file.display()
                );
            }
            seen += 1;
        }
    }
    assert!(seen > 0, "no snapshot kernel found");
}

#[test]
fn matrices_native_where_wmma_fits_and_software_elsewhere() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/matrix");
    for (file, want) in [("mma_f16.xk", true), ("mma_f32.xk", false)] {
        let src = std::fs::read_to_string(dir.join(file)).unwrap();
        let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let out = llvm::lower(
            &vm,
            &[KernelRef::plain(h)],
            &Nvptx::new(90),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(out.text().contains("wmma.mma.sync"), want, "{file}");
    }
}

/// A 16x16x16 GEMM on software tiles of `ty` (f32 or f64: no native tier on NVPTX): two
/// waves, each its own product (contract §3.3's "no spill" target).
fn software_gemm(ty: &str) -> String {
    format!(
        "@wave(32)\nkernel gemm_{ty}(d: buf<{ty}, rw>, a: buf<{ty}>, b: buf<{ty}>) {{\n    let w: u32 = local_id.x / wave_width;\n    let fa: matrix<a, {ty}, 16, 16> = matrix_load<a, {ty}, 16, 16>(a, w * 256, 16);\n    let fb: matrix<b, {ty}, 16, 16> = matrix_load<b, {ty}, 16, 16>(b, 0, 16);\n    let zero: matrix<acc, {ty}, 16, 16> = matrix_fill<acc, {ty}, 16, 16>(0.0);\n    matrix_store(matrix_mma(fa, fb, zero), d, w * 256, 16);\n}}\n"
    )
}

/// The software tier's tiles are distributed over the wave by default: an f32 or f64 16x16
/// GEMM assembles for sm_90 with no spill and no stack frame, and its manifest operations
/// say `software-distributed`; `matrix_dist: false` (`CAJETA_GPU_MATRIX_DIST=off`) keeps the
/// replicated control, which spills.
#[test]
fn distributed_software_tiles_do_not_spill_on_sm_90() {
    for ty in ["f32", "f64"] {
        let vm = xpu::ir::parse(&software_gemm(ty))
            .unwrap()
            .verify()
            .unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        let lower = |dist: bool| {
            llvm::lower(
                &vm,
                &[KernelRef::plain(h)],
                &Nvptx::new(90),
                &llvm::Options {
                    matrix_dist: dist,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{ty}: {e}"))
        };
        let (dist, repl) = (lower(true), lower(false));
        for (out, tier) in [
            (&dist, llvm::TIER_DISTRIBUTED),
            (&repl, llvm::TIER_REPLICATED),
        ] {
            let ops = &out.matrix_ops;
            assert_eq!(ops.len(), 5, "{ty}: {ops:?}");
            assert!(ops.iter().all(|o| o.tier == tier), "{ty}: {ops:?}");
            assert!(
                ops.iter()
                    .any(|o| o.op == format!("matrix_mma<{ty} 16x16x16, {ty}>")),
                "{ty}: {ops:?}"
            );
        }
        assert_eq!(llvm::TIER_DISTRIBUTED, xpu::hal::manifest::TIER_DISTRIBUTED);
        assert!(dist.text().contains("shfl.sync.idx"), "{ty}");
        if ptxas::find().is_none() {
            skip(
                "distributed_software_tiles_do_not_spill_on_sm_90",
                "ptxas not found",
            );
            return;
        }
        let measure = |out: &llvm::Lowered| {
            let r = ptxas::assemble(&out.text(), "sm_90").unwrap_or_else(|e| panic!("{ty}: {e}"));
            let f = r.function(&out.kernels[0].symbol).unwrap().clone();
            (
                f.spill_store_bytes.unwrap_or(0),
                f.stack_frame_bytes.unwrap_or(0),
                f.registers.unwrap_or(0),
            )
        };
        let (d, r) = (measure(&dist), measure(&repl));
        eprintln!(
            "{ty} 16x16 GEMM on sm_90: distributed (spill, stack, regs) {d:?}, replicated {r:?}"
        );
        assert_eq!(
            (d.0, d.1),
            (0, 0),
            "{ty}: the distributed tile spilled: {d:?}"
        );
        assert!(
            r.0 > 0 || r.1 > 0,
            "{ty}: the replicated control no longer spills: {r:?}"
        );
    }
}

/// The tier is chosen for the operands as a group: a kernel with a WMMA-able f16 GEMM and an
/// f32 one demotes entirely to the software tier (no fragment straddles tiers), and
/// `CAJETA_GPU_MATRIX_IMPL` (`Options::matrix_impl`) forces a tier: `software` for the f16
/// kernel, `native` refused by name (`XPU-N03`) where a fragment has none.
#[test]
fn matrix_tiers_demote_together_and_can_be_forced() {
    use xpu::config::ForcedTier;
    let lower = |src: &str, forced: Option<ForcedTier>| {
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        llvm::lower(
            &vm,
            &[KernelRef::plain(h)],
            &Nvptx::new(90),
            &llvm::Options {
                matrix_impl: forced,
                ..Default::default()
            },
        )
    };
    let straddle = "@wave(32)\nkernel k(d: buf<f32, rw>, a: buf<f16>, x: buf<f32>) {\n    let fa: matrix<a, f16, 16, 16> = matrix_load<a, f16, 16, 16>(a, 0, 16);\n    let fb: matrix<b, f16, 16, 16> = matrix_load<b, f16, 16, 16>(a, 0, 16);\n    let c: matrix<acc, f32, 16, 16> = matrix_fill<acc, f32, 16, 16>(0.0);\n    matrix_store(matrix_mma(fa, fb, c), d, 0, 16);\n    let ga: matrix<a, f32, 16, 16> = matrix_load<a, f32, 16, 16>(x, 0, 16);\n    let gb: matrix<b, f32, 16, 16> = matrix_load<b, f32, 16, 16>(x, 0, 16);\n    matrix_store(matrix_mma(ga, gb, c), d, 256, 16);\n}\n";
    let out = lower(straddle, None).unwrap();
    assert!(!out.text().contains("wmma"), "a straddling group kept WMMA");
    assert!(
        out.matrix_ops
            .iter()
            .all(|o| o.tier == llvm::TIER_DISTRIBUTED),
        "{:?}",
        out.matrix_ops
    );
    assert!(out
        .matrix_ops
        .iter()
        .any(|o| o.op == "matrix_mma<f16 16x16x16, f32>"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/matrix");
    let f16 = std::fs::read_to_string(dir.join("mma_f16.xk")).unwrap();
    let native = lower(&f16, None).unwrap();
    let mma = native
        .matrix_ops
        .iter()
        .find(|o| o.op.starts_with("matrix_mma"))
        .unwrap();
    assert_eq!(
        (mma.tier, mma.instruction.as_str()),
        (
            llvm::TIER_NATIVE,
            "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32"
        )
    );
    let sw = lower(&f16, Some(ForcedTier::Software)).unwrap();
    assert!(!sw.text().contains("wmma") && sw.text().contains("shfl.sync.idx"));
    assert!(lower(&f16, Some(ForcedTier::Native)).is_ok());
    let f32 = std::fs::read_to_string(dir.join("mma_f32.xk")).unwrap();
    let e = lower(&f32, Some(ForcedTier::Native)).unwrap_err();
    assert_eq!(e.code, llvm::codes::MATRIX_TIER, "{e}");
    assert!(
        e.to_string().contains("CAJETA_GPU_MATRIX_IMPL=native"),
        "{e}"
    );
}

#[test]
fn wave_width_other_than_32_is_refused_by_name() {
    let src = "@wave(64)\nkernel k(o: buf<u32, rw>) {\n    o[global_id.x] = wave_width;\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    let e = llvm::lower(
        &vm,
        &[KernelRef::plain(h)],
        &Nvptx::new(90),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(e.code, llvm::codes::WAVE);
}

/// The first kernel of `src` lowered for sm_90.
fn lower_sm90(src: &str) -> llvm::Lowered {
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    llvm::lower(
        &vm,
        &[KernelRef::plain(h)],
        &Nvptx::new(90),
        &Default::default(),
    )
    .unwrap()
}

fn ptx_of(src: &str) -> String {
    lower_sm90(src).text().to_string()
}

/// The IR's lanes reconverge at the end of every if/loop; on NVIDIA (independent thread
/// scheduling) `activemask` says which lanes happen to run, not which are logically there, so
/// a kernel using wave verbs keeps the logical lane mask itself: read from the hardware once
/// at entry, narrowed by a vote at each branch and loop test, and given back at the merge,
/// where the lanes wait (`bar.warp.sync`) or, when some may have left, vote afresh. Kernels
/// without wave verbs keep their code.
#[test]
fn wave_kernels_track_the_logical_lane_mask() {
    let wave = "kernel k(o: buf<i32, rw>) {\n    for i: u32 in 0u32..(global_id.x % 5u32) {\n        o[global_id.x] += 1i32;\n    }\n    o[global_id.x] = wave_shuffle_up(7i32, 3u32);\n}\n";
    let ptx = ptx_of(wave);
    assert_eq!(ptx.matches("activemask").count(), 1, "{ptx}");
    assert_eq!(ptx.matches("bar.warp.sync").count(), 1, "{ptx}");
    // The loop test's vote: the iteration's lanes.
    assert!(ptx.contains("vote.sync.ballot"), "{ptx}");
    let plain = wave.replace("wave_shuffle_up(7i32, 3u32)", "7i32");
    let ptx = ptx_of(&plain);
    assert!(
        !ptx.contains("bar.warp.sync") && !ptx.contains("activemask"),
        "{ptx}"
    );
    assert!(!ptx.contains("vote.sync"), "{ptx}");
    let escaping = "kernel k(o: buf<i32, rw>) {\n    for i: u32 in 0u32..(global_id.x % 5u32) {\n        if i == 2u32 { break; }\n    }\n    o[global_id.x] = wave_shuffle_up(7i32, 3u32);\n}\n";
    let ptx = ptx_of(escaping);
    assert_eq!(ptx.matches("activemask").count(), 1, "{ptx}");
    // The loop test, the if's test and merge, the latch (the iteration's merge) and the
    // loop's exit each vote (LLVM may unroll the loop and copy some of them).
    assert!(ptx.matches("vote.sync.ballot").count() >= 4, "{ptx}");
    let outer = "kernel k(o: buf<i32, rw>) {\n    'outer: for i: u32 in 0u32..4u32 {\n        for j: u32 in 0u32..4u32 {\n            if j == global_id.x % 3u32 { continue 'outer; }\n            if i == global_id.x % 4u32 { break 'outer; }\n        }\n        o[global_id.x] += wave_reduce_sum(1i32);\n    }\n}\n";
    let ptx = ptx_of(outer);
    assert_eq!(ptx.matches("activemask").count(), 1, "{ptx}");
    assert!(ptx.matches("vote.sync.ballot").count() >= 8, "{ptx}");
    // A helper using a wave verb takes its caller's lanes instead of reading the hardware.
    let helper = "device fn count() -> u32 {\n    return wave_reduce_sum(1u32);\n}\n\nkernel k(o: buf<u32, rw>) {\n    if lane_id % 2u32 == 0u32 {\n        o[global_id.x] = count();\n    }\n}\n";
    let ptx = ptx_of(helper);
    assert_eq!(ptx.matches("activemask").count(), 1, "{ptx}");
}

#[test]
fn occupancy_becomes_nvvm_annotations() {
    let src = "@occupancy(max_threads = 128, min_resident = 2, max_registers = 64)\nkernel k(o: buf<u32, rw>) {\n    o[global_id.x] = 1;\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    let out = llvm::lower(
        &vm,
        &[KernelRef::plain(h)],
        &Nvptx::new(90),
        &Default::default(),
    )
    .unwrap();
    let ptx = out.text();
    assert!(ptx.contains(".maxntid 128, 1, 1"), "{ptx}");
    assert!(ptx.contains(".minnctapersm 2"), "{ptx}");
    assert!(ptx.contains(".maxnreg 64"), "{ptx}");
}

/// The AMD backend's lowering (engineer H; feature `hip` as well as `cuda`): every filetest
/// kernel becomes an AMDGPU code object for gfx90a (wave 64) and gfx1100 (wave 32), linked
/// by `ld.lld` and measured from its metadata note; simple kernels have no scratch; a few
/// kernels' assembly is kept under `tests/out/amdgpu/` (`XPU_BLESS=1` rewrites it); the wave
/// and occupancy refusals. Without `ld.lld` the linking steps are skipped with a message.
#[cfg(feature = "hip")]
mod amd {
    use super::modules;
    use std::path::Path;
    use xpu::codegen::llvm::codeobj::{self, BuildError, BuildOptions, CodeObject};
    use xpu::codegen::llvm::{self, amdgpu::Amdgpu, KernelRef};

    fn build_src(src: &str, arch: &str) -> Result<Vec<CodeObject>, BuildError> {
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        codeobj::build(
            &vm,
            &refs,
            &Amdgpu::new(arch).unwrap(),
            &BuildOptions::default(),
        )
    }

    fn one(src: &str, arch: &str) -> codeobj::BuiltKernel {
        let objs = build_src(src, arch).unwrap_or_else(|e| panic!("{e}"));
        objs[0].kernels[0].clone()
    }

    #[test]
    fn every_filetest_kernel_becomes_a_code_object_with_a_manifest() {
        let have_lld = codeobj::find_linker().is_some();
        if !have_lld {
            super::skip(
                "amdgpu lowering (linking)",
                "ld.lld not found (XPU_LLD, beside LLVM, PATH): lowering only",
            );
        }
        for (arch, wave) in [("gfx90a", 64), ("gfx1100", 32)] {
            let target = Amdgpu::new(arch).unwrap();
            let mut failures = Vec::new();
            let mut refused = Vec::new();
            let mut built = 0;
            for (path, vm) in modules() {
                for k in llvm::kernel_refs(vm.module()) {
                    let name = format!("{}::{}", path.display(), k.name(vm.module()));
                    let objs = match codeobj::build(
                        &vm,
                        std::slice::from_ref(&k),
                        &target,
                        &BuildOptions::default(),
                    ) {
                        Ok(o) => o,
                        Err(BuildError::Lower(e))
                            if e.code == llvm::codes::UNSUPPORTED
                                || e.code == llvm::codes::WAVE =>
                        {
                            refused.push(format!("{name}: {e}"));
                            continue;
                        }
                        Err(e) => {
                            failures.push(format!("{name}: {e}"));
                            continue;
                        }
                    };
                    built += 1;
                    let declared = vm.module().functions[k.function].attrs.wave.map(|w| w.0);
                    let o = &objs[0];
                    let m = &o.kernels[0].manifest;
                    let want = declared.unwrap_or(wave);
                    if m.built_wave != Some(want) || o.wave != want {
                        failures.push(format!("{name}: built at {:?}, want {want}", m.built_wave));
                    }
                    if have_lld {
                        let ok = m.registers_per_thread.is_some()
                            && m.scalar_registers.is_some()
                            && m.stack_frame_bytes.is_some()
                            && m.static_shared_bytes.is_some()
                            && m.max_block_threads.is_some()
                            && o.kernels[0]
                                .descriptor
                                .as_ref()
                                .and_then(|d| d.wavefront_size)
                                == Some(want);
                        if !ok {
                            failures.push(format!("{name}: incomplete manifest {m:?}"));
                        }
                    }
                }
            }
            for r in &refused {
                eprintln!("{arch}: refused by name: {r}");
            }
            eprintln!("{arch}: {built} kernels built, {} refused", refused.len());
            assert!(built > 0, "no filetest kernel was built for {arch}");
            assert!(
                failures.is_empty(),
                "{arch}: {} failures:\n{}",
                failures.len(),
                failures.join("\n")
            );
        }
    }

    /// The distributed software tile has no private segment on gfx90a (wave 64) and gfx1100
    /// (wave 32) for f32 and f64 16x16 GEMMs; the replicated control has one.
    #[test]
    fn distributed_software_tiles_have_no_scratch() {
        if codeobj::find_linker().is_none() {
            super::skip(
                "distributed_software_tiles_have_no_scratch",
                "ld.lld not found",
            );
            return;
        }
        for ty in ["f32", "f64"] {
            let src = super::software_gemm(ty).replace("@wave(32)\n", "");
            let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
            let refs = llvm::kernel_refs(vm.module());
            for arch in ["gfx90a", "gfx1100"] {
                let build = |dist: bool| {
                    let opts = BuildOptions {
                        lower: llvm::Options {
                            matrix_dist: dist,
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    let objs = codeobj::build(&vm, &refs, &Amdgpu::new(arch).unwrap(), &opts)
                        .unwrap_or_else(|e| panic!("{ty} {arch}: {e}"));
                    objs[0].kernels[0].descriptor.clone().unwrap()
                };
                let (d, r) = (build(true), build(false));
                eprintln!(
                    "{ty} 16x16 GEMM on {arch}: distributed private segment {:?}, vgprs {:?}; replicated {:?}",
                    d.private_segment_fixed_size, d.vgpr_count, r.private_segment_fixed_size
                );
                assert_eq!(d.private_segment_fixed_size, Some(0), "{ty} {arch}: {d:?}");
                assert_eq!(d.vgpr_spill_count.unwrap_or(0), 0, "{ty} {arch}: {d:?}");
                assert!(
                    r.private_segment_fixed_size.unwrap_or(0) > 0,
                    "{ty} {arch}: the replicated control has no scratch: {r:?}"
                );
            }
        }
    }

    #[test]
    fn simple_kernels_have_no_scratch() {
        if codeobj::find_linker().is_none() {
            super::skip("simple_kernels_have_no_scratch", "ld.lld not found");
            return;
        }
        let mut seen = 0;
        for (_, vm) in modules() {
            for (h, f) in vm.kernels() {
                if !["saxpy", "triad", "reduce_wave", "reduce_shared"].contains(&f.name.as_str()) {
                    continue;
                }
                for arch in ["gfx90a", "gfx942", "gfx1100"] {
                    let objs = codeobj::build(
                        &vm,
                        &[KernelRef::plain(h)],
                        &Amdgpu::new(arch).unwrap(),
                        &BuildOptions::default(),
                    )
                    .unwrap_or_else(|e| panic!("{}: {e}", f.name));
                    let k = &objs[0].kernels[0];
                    let d = k.descriptor.as_ref().unwrap();
                    assert_eq!(
                        d.private_segment_fixed_size,
                        Some(0),
                        "{} on {arch} has scratch: {d:?}",
                        f.name
                    );
                    assert_eq!(d.vgpr_spill_count.unwrap_or(0), 0, "{}: {d:?}", f.name);
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, 12);
    }

    #[test]
    fn amdgpu_assembly_snapshots() {
        let bless = std::env::var_os("XPU_BLESS").is_some_and(|v| v == "1");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/out/amdgpu");
        let wanted = ["saxpy", "reduce_wave", "reduce_shared"];
        let mut seen = 0;
        for (_, vm) in modules() {
            for (h, f) in vm.kernels() {
                if !wanted.contains(&f.name.as_str()) {
                    continue;
                }
                for arch in ["gfx90a", "gfx1100"] {
                    let opts = BuildOptions {
                        assembly: true,
                        ..Default::default()
                    };
                    let objs = codeobj::build(
                        &vm,
                        &[KernelRef::plain(h)],
                        &Amdgpu::new(arch).unwrap(),
                        &opts,
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                    let text = objs[0].assembly.clone().unwrap();
                    let file = dir.join(format!("{}.{arch}.s", f.name));
                    if bless {
                        std::fs::create_dir_all(&dir).unwrap();
                        std::fs::write(&file, &text).unwrap();
                    } else {
                        // A missing snapshot fails (see `ptx_snapshots`).
                        let old = std::fs::read_to_string(&file).unwrap_or_else(|e| {
                            panic!(
                                "{}: {e}; review the output and create it with XPU_BLESS=1",
                                file.display()
                            )
                        });
                        assert_eq!(
                            old,
                            text,
                            "{} changed; review and rerun with XPU_BLESS=1",
                            file.display()
                        );
                    }
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, wanted.len() * 2, "a snapshot kernel is missing");
    }

    const WAVE_K: &str = "kernel k(o: buf<u32, rw>) {\n    o[global_id.x] = wave_width;\n}\n";

    #[test]
    fn declared_wave_widths_build_or_are_refused_by_name() {
        // gfx90a has no wave 32: refused, never built at 64.
        let e = build_src(&format!("@wave(32)\n{WAVE_K}"), "gfx90a").unwrap_err();
        assert_eq!(e.code(), llvm::codes::WAVE, "{e}");
        // A width no AMD part has.
        let e = build_src(&format!("@wave(16)\n{WAVE_K}"), "gfx1100").unwrap_err();
        assert_eq!(e.code(), llvm::codes::WAVE, "{e}");
        // gfx1100 builds both, each pinned by its target feature.
        let has_lld = codeobj::find_linker().is_some();
        for (decl, arch, want) in [
            ("@wave(32)\n", "gfx1100", 32),
            ("@wave(64)\n", "gfx1100", 64),
            ("@wave(64)\n", "gfx90a", 64),
            ("", "gfx942", 64),
            ("", "gfx1100", 32),
        ] {
            let k = one(&format!("{decl}{WAVE_K}"), arch);
            assert_eq!(k.manifest.built_wave, Some(want), "{decl}{arch}");
            if has_lld {
                let d = k.descriptor.unwrap();
                assert_eq!(d.wavefront_size, Some(want), "{decl}{arch}");
            }
        }
    }

    #[test]
    fn kernels_of_two_widths_make_two_code_objects() {
        let src = format!("@wave(64)\n{WAVE_K}\nkernel j(o: buf<u32, rw>) {{\n    o[0] = 1;\n}}\n");
        let objs = build_src(&src, "gfx1100").unwrap();
        let waves: Vec<u32> = objs.iter().map(|o| o.wave).collect();
        assert_eq!(waves, vec![64, 32]);
        assert_eq!(objs[0].kernels[0].abi.name, "k");
        assert_eq!(objs[1].kernels[0].abi.name, "j");
    }

    #[test]
    fn occupancy_lowers_to_flat_workgroup_size_and_waves_per_eu() {
        let k = "kernel k(o: buf<u32, rw>) {\n    o[global_id.x] = 1;\n}\n";
        let src = format!("@occupancy(max_threads = 128, min_resident = 2)\n{k}");
        let vm = xpu::ir::parse(&src).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = llvm::Options {
            keep_llvm_ir: true,
            ..Default::default()
        };
        let ir = llvm::lower(&vm, &refs, &Amdgpu::new("gfx90a").unwrap(), &opts)
            .unwrap()
            .llvm_ir
            .unwrap();
        assert!(
            ir.contains("\"amdgpu-flat-work-group-size\"=\"1,128\""),
            "{ir}"
        );
        // 2 blocks of 2 waves over 4 SIMDs.
        assert!(ir.contains("\"amdgpu-waves-per-eu\"=\"1\""), "{ir}");
        assert!(ir.contains("amdgpu_kernel void @k"), "{ir}");
        if codeobj::find_linker().is_some() {
            let m = one(&src, "gfx90a").manifest;
            assert_eq!(m.max_block_threads, Some(128));
            // max_waves is finished once the wave is known: 4 waves of 64, or of 32.
            let src = format!("@occupancy(max_waves = 4)\n{k}");
            assert_eq!(one(&src, "gfx90a").manifest.max_block_threads, Some(256));
            assert_eq!(one(&src, "gfx1100").manifest.max_block_threads, Some(128));
            // Without a bound, the part's ceiling.
            assert_eq!(one(k, "gfx90a").manifest.max_block_threads, Some(1024));
        }
    }

    #[test]
    fn max_threads_and_max_waves_together_are_refused() {
        let src = "@occupancy(max_threads = 256, max_waves = 4)\nkernel k(o: buf<u32, rw>) {\n    o[0] = 1;\n}\n";
        let parsed = xpu::ir::parse(src);
        let refused = match parsed {
            Err(_) => true,
            Ok(m) => m.verify().is_err(),
        };
        assert!(refused, "max_threads with max_waves was accepted");
    }

    #[test]
    fn barriers_are_fenced_at_workgroup_scope() {
        let src = "kernel k(o: buf<u32, rw>) {\n    shared t: [u32; 64];\n    t[local_id.x] = local_id.x;\n    barrier();\n    o[global_id.x] = t[63 - local_id.x];\n}\n";
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = llvm::Options {
            keep_llvm_ir: true,
            ..Default::default()
        };
        let ir = llvm::lower(&vm, &refs, &Amdgpu::new("gfx942").unwrap(), &opts)
            .unwrap()
            .llvm_ir
            .unwrap();
        let rel = ir
            .find("fence syncscope(\"workgroup\") release")
            .expect(&ir);
        let bar = ir.find("call void @llvm.amdgcn.s.barrier()").expect(&ir);
        let acq = ir
            .find("fence syncscope(\"workgroup\") acquire")
            .expect(&ir);
        assert!(rel < bar && bar < acq, "{ir}");
        assert!(ir.contains("addrspace(3)"), "{ir}");
        if codeobj::find_linker().is_some() {
            let m = one(src, "gfx942").manifest;
            assert_eq!(m.static_shared_bytes, Some(256));
        }
    }

    #[test]
    fn a_machine_without_the_linker_gets_a_note_not_a_failure() {
        let vm = xpu::ir::parse(WAVE_K).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = BuildOptions {
            linker: Some("/nonexistent/ld.lld".into()),
            ..Default::default()
        };
        let objs = codeobj::build(&vm, &refs, &Amdgpu::new("gfx90a").unwrap(), &opts).unwrap();
        let o = &objs[0];
        assert!(o.code.is_none());
        assert!(!o.object.is_empty());
        assert_eq!(
            o.note.as_ref().map(|n| n.code()),
            Some(codeobj::codes::NO_LINKER)
        );
        assert!(o
            .note
            .as_ref()
            .unwrap()
            .to_string()
            .contains("no assembler/linker"));
        let m = &o.kernels[0].manifest;
        assert_eq!((m.registers_per_thread, m.stack_frame_bytes), (None, None));
        assert_eq!(m.built_wave, Some(64));
    }

    #[test]
    fn metadata_of_a_non_elf_is_an_error_not_a_panic() {
        assert!(codeobj::read_metadata(b"not an elf").is_err());
        assert!(codeobj::read_metadata(&[]).is_err());
    }

    #[test]
    fn xpu_build_writes_code_objects_and_prints_manifests() {
        let dir = std::env::temp_dir().join(format!("xpu-amd-build-{}", std::process::id()));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
            .args(["build", "examples/reduction.xk", "--backend", "amdgpu"])
            .args(["--arch", "gfx1100", "--emit"])
            .arg(&dir)
            .output()
            .expect("run xpu");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("reduce_sum [amdgpu gfx1100]: wave 32") && stdout.contains("scratch 0"),
            "{stdout}"
        );
        for ext in ["hsaco", "s"] {
            let file = dir.join(format!("reduce_sum.gfx1100.w32.{ext}"));
            assert!(file.is_file(), "{} missing", file.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
        let bad = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
            .args([
                "build",
                "examples/saxpy.xk",
                "--backend",
                "amdgpu",
                "--arch",
                "gfx1",
            ])
            .output()
            .expect("run xpu");
        assert_eq!(bad.status.code(), Some(2));
    }

    /// `xpu build -o` with amdgpu bundles a linked code object per kernel for the `--arch`
    /// processor, its ABI header as the launch metadata and its manifest; the HIP backend's
    /// check of a bundle entry accepts what was written and refuses a damaged one.
    #[test]
    fn bundle_carries_amdgpu_code_objects_a_hip_device_takes() {
        if codeobj::find_linker().is_none() {
            super::skip(
                "amdgpu bundle",
                "ld.lld not found: no code objects to bundle",
            );
            return;
        }
        let path = std::env::temp_dir().join(format!("xpu-amd-bundle-{}.xpub", std::process::id()));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
            .args(["build", "examples/reduction.xk", "--backends", "cpu,amdgpu"])
            .args(["--arch", "sm_80,gfx942", "-o"])
            .arg(&path)
            .output()
            .expect("run xpu");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let bundle = xpu::bundle::Bundle::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let amd: Vec<_> = bundle
            .entries()
            .filter(|e| e.backend == xpu::Backend::Hip)
            .collect();
        assert!(!amd.is_empty(), "no AMDGPU entries");
        let kernels = bundle.module().kernels().count();
        assert_eq!(amd.len(), kernels, "one code object per kernel");
        for e in &amd {
            assert_eq!(e.target, "gfx942");
            assert_eq!(e.kind, xpu::bundle::CodeKind::CodeObject);
            let code = e.code.expect("a code section");
            assert!(code.starts_with(b"\x7fELF"), "{}: not ELF", e.kernel);
            let meta = e.meta.expect("launch metadata");
            // The code object's own metadata note agrees with the manifest bundled beside it.
            let md = codeobj::read_metadata(code).unwrap();
            let abi = xpu::backend::gpu_abi::abi_from_header(meta).expect("an ABI header");
            assert!(md.iter().any(|k| k.name == abi.symbol), "{}", e.kernel);
            assert_eq!(e.manifest.kernel, e.kernel);
            assert!(e.manifest.registers_per_thread.is_some(), "{}", e.kernel);
            let taken = xpu::backend::hip::bundled_code(xpu::hal::Prebuilt {
                kernel: e.kernel.to_string(),
                code: code.to_vec(),
                meta: Some(meta.to_string()),
                manifest: e.manifest.clone(),
            })
            .unwrap_or_else(|err| panic!("{}: {err}", e.kernel));
            assert_eq!(taken.abi.symbol, abi.symbol);
            assert_eq!(taken.abi.params.len(), abi.params.len());
            // A damaged entry is a coded load error, never handed to the runtime.
            let mut bad = code.to_vec();
            bad[0] = 0;
            let refused = |code: Vec<u8>, meta: Option<String>| {
                xpu::backend::hip::bundled_code(xpu::hal::Prebuilt {
                    kernel: e.kernel.to_string(),
                    code,
                    meta,
                    manifest: e.manifest.clone(),
                })
                .unwrap_err()
                .code()
            };
            assert_eq!(refused(bad, Some(meta.to_string())), "XPU-D009");
            assert_eq!(refused(code.to_vec(), None), "XPU-D009");
            assert_eq!(refused(code.to_vec(), Some("garbage".into())), "XPU-D009");
        }
    }
}

// ---- On a CUDA device (where there is none each prints a SKIP line and passes vacuously) -----

fn cuda_device(test: &str) -> Option<xpu::Device> {
    match xpu::Device::open(xpu::Backend::Cuda) {
        Ok(d) => Some(d),
        Err(e) => {
            // Without a driver this is an error value, never a panic (cudarc is probed first).
            skip(test, &format!("no CUDA device here ({e})"));
            None
        }
    }
}

#[test]
fn cuda_device_shared_memory_above_48k_opts_in() {
    let Some(dev) = cuda_device("cuda_device_shared_memory_above_48k_opts_in") else {
        return;
    };
    let src = "kernel big(o: buf<u32, rw>) {\n    shared s: [u32];\n    let t: u32 = local_id.x;\n    for i: u32 in t..16384 step group_size.x {\n        s[i] = i * 3;\n    }\n    barrier();\n    o[t] = s[16383 - t];\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let program = dev.load(vm).unwrap();
    let mut out = xpu::KernelBuffer::<u32>::new(&dev, 256).unwrap();
    let stream = xpu::KernelStream::current(&dev);
    let launch = xpu::Launch::grid([1])
        .block([256])
        .shared_bytes(65536)
        .shared_opt_in(true);
    program
        .kernel("big")
        .unwrap()
        .launch(&stream, launch, xpu::args![&mut out])
        .unwrap();
    let got = out.download().unwrap();
    for (t, v) in got.iter().enumerate() {
        assert_eq!(*v, (16383 - t as u32) * 3, "lane {t}");
    }
    // Without the opt-in the same launch is refused by name, before the driver sees it.
    let refused = program.kernel("big").unwrap().launch(
        &stream,
        xpu::Launch::grid([1]).block([256]).shared_bytes(65536),
        xpu::args![&mut out],
    );
    assert!(
        matches!(refused, Err(xpu::LaunchError::SharedMemory { .. })),
        "{refused:?}"
    );
}

#[test]
fn cuda_device_manifest_facts_and_events() {
    let Some(dev) = cuda_device("cuda_device_manifest_facts_and_events") else {
        return;
    };
    let f = dev.facts();
    assert_eq!(f.wave_width, Some(32));
    assert!(f.multiprocessors.is_some_and(|m| m > 0));
    assert!(f.shared_bytes_per_block_optin >= f.shared_bytes_per_block);
    assert!(f.uuid.is_some() && f.registers_per_multiprocessor.is_some());
    let src = "@occupancy(max_threads = 128)\nkernel k(o: buf<f32, rw>, n: u32) {\n    let i: u32 = global_id.x;\n    if i < n {\n        o[i] = sin(i as f32);\n    }\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let program = dev.load(vm).unwrap();
    let k = program.kernel("k").unwrap();
    let m = k.manifest();
    assert_eq!(m.built_wave, Some(32));
    assert_eq!(m.max_threads, Some(128));
    assert!(m.registers_per_thread.is_some_and(|r| r > 0));
    let mut out = xpu::KernelBuffer::<f32>::new(&dev, 1 << 20).unwrap();
    let stream = xpu::KernelStream::current(&dev);
    let timer = xpu::KernelTimer::start(&stream).unwrap();
    k.launch(
        &stream,
        xpu::Launch::grid([8192]).block([128]),
        xpu::args![&mut out, 1u32 << 20],
    )
    .unwrap();
    let t = timer.stop().unwrap();
    eprintln!("sin over 1M floats: {t:?}");
    let got = out.download().unwrap();
    for i in [0usize, 1, 1000, 123_456, (1 << 20) - 1] {
        let want = (i as f32 as f64).sin() as f32;
        let d = (got[i].to_bits() as i64 - want.to_bits() as i64).abs();
        assert!(d <= 1, "sin({i}) = {} want {want}", got[i]);
    }
    // A block above the declared bound is refused.
    let refused = k.launch(
        &stream,
        xpu::Launch::grid([1]).block([256]),
        xpu::args![&mut out, 1u32],
    );
    assert!(
        matches!(refused, Err(xpu::LaunchError::TooManyThreads { .. })),
        "{refused:?}"
    );
}

/// Checked mode and ub-traps in the LLVM lowering (docs/checked-mode.md): the code of a
/// kernel with checks writes the report global `xpu_report` and assembles; a kernel whose
/// `align` statements the proof confirms gets the same PTX with ub-traps as without; checked
/// mode off changes no PTX (the snapshots above are built so).
mod checked {
    use super::*;
    use xpu::codegen::checks::Checks;

    fn lower_with(src: &str, checks: Checks) -> llvm::Lowered {
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let (h, _) = vm.kernels().next().unwrap();
        llvm::lower(
            &vm,
            &[KernelRef::plain(h)],
            &Nvptx::new(90),
            &llvm::Options {
                checks,
                ..Default::default()
            },
        )
        .unwrap()
    }

    const TRAPS: Checks = Checks {
        bounds: false,
        ub_traps: true,
    };
    const BOUNDS: Checks = Checks {
        bounds: true,
        ub_traps: false,
    };

    const GATHER: &str = "kernel gather(out: buf<f32, rw>, x: buf<f32>, o: u32) {\n    let i: u32 = global_id.x;\n    let v: vec4<f32> = vload<4>(x, 4 * i + o, align = 16);\n    out[i] = v.x + v.y + v.z + v.w;\n}\n";

    #[test]
    fn a_confirmed_align_statement_costs_nothing_in_ptx() {
        let confirmed = GATHER.replace("4 * i + o", "4 * i");
        let with = lower_with(&confirmed, TRAPS);
        assert_eq!(
            with.text(),
            lower_with(&confirmed, Checks::default()).text()
        );
        assert!(!with.text().contains("xpu_report"));
        assert!(!with.kernels[0].report);
        // The unconfirmed statement is tested: a report global, a compare-and-swap on it,
        // and a 16-byte vector load at the rounded index.
        let traps = lower_with(GATHER, TRAPS);
        let ptx = traps.text();
        assert!(
            ptx.contains(".visible .global .align 16 .b8 xpu_report[32]"),
            "{ptx}"
        );
        assert!(ptx.contains("atom.global.cas.b32"), "{ptx}");
        assert!(
            ptx.contains("ld.global.nc.v4.f32") || ptx.contains("ld.global.v4.f32"),
            "{ptx}"
        );
        let k = &traps.kernels[0];
        assert!(k.report);
        assert_eq!(k.sites.len(), 1);
        assert_eq!(
            (k.sites[0].line, k.sites[0].what.as_str()),
            (3, "align = 16")
        );
        let plain = lower_with(GATHER, Checks::default()).text();
        assert!(
            !plain.contains("xpu_report") && !plain.contains("atom.global.cas"),
            "{plain}"
        );
    }

    #[test]
    fn checked_mode_tests_buffer_shared_and_private_accesses() {
        let src = "kernel k(y: buf<u32, rw>, x: buf<u32>) {\n    shared t: [u32; 64];\n    let a: [u32; 4];\n    let l: u32 = local_id.x;\n    t[l + 1] = x[l];\n    barrier();\n    a[l % 5] = t[l];\n    y[l] = a[0];\n}\n";
        let out = lower_with(src, BOUNDS);
        let k = &out.kernels[0];
        assert!(k.report);
        let whats: Vec<&str> = k.sites.iter().map(|s| s.what.as_str()).collect();
        for want in ["buffer x", "shared t", "array a", "buffer y"] {
            assert!(whats.contains(&want), "{whats:?}");
        }
        let ptx = out.text();
        assert!(
            ptx.contains("xpu_report") && ptx.contains("atom.global.cas.b32"),
            "{ptx}"
        );
        let plain = lower_with(src, Checks::default()).text();
        assert!(!plain.contains("xpu_report"), "{plain}");
        if ptxas::find().is_some() {
            ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{e}\n{ptx}"));
        }
    }

    /// Helpers taking a buffer, a shared array and a private array (issue 23 item 4): inlined
    /// by the verifier, so checked mode's sites name the kernel's own memory, at the helper's
    /// lines (2, 5, 8), and the PTX assembles.
    #[test]
    fn checked_sites_through_memory_helpers_name_the_kernels_memory() {
        let src = "device fn put(p: buf<u32, rw>, i: u32, v: u32) {\n    p[i] = v;\n}\n\
                   device fn get(s: shared [u32], i: u32) -> u32 {\n    return s[i];\n}\n\
                   device fn set(a: [u32; 4], i: u32) {\n    a[i] = i;\n}\n\
                   kernel k(y: buf<u32, rw>) {\n    shared t: [u32; 64];\n    let a: [u32; 4];\n    let l: u32 = local_id.x;\n    t[l] = l;\n    barrier();\n    set(a, l % 4);\n    let v: u32 = get(t, l + 1);\n    put(y, l, v + a[l % 4]);\n}\n";
        let out = lower_with(src, BOUNDS);
        let k = &out.kernels[0];
        let sites: Vec<(u32, &str)> = k.sites.iter().map(|s| (s.line, s.what.as_str())).collect();
        for want in [(2, "buffer y"), (5, "shared t"), (8, "array a")] {
            assert!(sites.contains(&want), "{sites:?}");
        }
        let ptx = out.text();
        if ptxas::find().is_some() {
            ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{e}\n{ptx}"));
        }
    }

    #[test]
    fn every_filetest_kernel_lowers_with_every_check() {
        let all = Checks {
            bounds: true,
            ub_traps: true,
        };
        let target = Nvptx::new(90);
        let (mut lowered, mut failures) = (0, Vec::new());
        for (path, vm) in modules() {
            for (h, f) in vm.kernels() {
                let plain = llvm::lower(&vm, &[KernelRef::plain(h)], &target, &Default::default());
                if plain.is_err() {
                    continue;
                }
                let opts = llvm::Options {
                    checks: all,
                    ..Default::default()
                };
                match llvm::lower(&vm, &[KernelRef::plain(h)], &target, &opts) {
                    Ok(out) => {
                        lowered += 1;
                        if ptxas::find().is_some() {
                            if let Err(e) = ptxas::assemble(&out.text(), "sm_90") {
                                failures.push(format!("{} {}: {e}", path.display(), f.name));
                            }
                        }
                    }
                    Err(e) => failures.push(format!("{} {}: {e}", path.display(), f.name)),
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(lowered >= 50, "only {lowered} kernels lowered");
    }

    #[test]
    fn amdgpu_code_tests_the_same_checks() {
        use xpu::codegen::llvm::amdgpu::Amdgpu;
        let vm = xpu::ir::parse(GATHER).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let ir = |checks| {
            let opts = llvm::Options {
                keep_llvm_ir: true,
                checks,
                ..Default::default()
            };
            llvm::lower(&vm, &refs, &Amdgpu::new("gfx90a").unwrap(), &opts)
                .unwrap()
                .llvm_ir
                .unwrap()
        };
        let traps = ir(TRAPS);
        assert!(
            traps.contains("@xpu_report = addrspace(1) global [8 x i32] zeroinitializer, align 16"),
            "{traps}"
        );
        assert!(
            traps.contains("cmpxchg ptr addrspace(1) @xpu_report"),
            "{traps}"
        );
        assert!(!ir(Checks::default()).contains("xpu_report"));
    }
}

// ---- The build gates on NVPTX and AMDGPU (tests/gates.rs has the CPU and Vulkan ones) ----------

mod gates {
    use super::skip;
    use xpu::codegen::llvm::ptxas;
    use xpu::codegen::llvm::{self, nvptx::Nvptx, KernelRef};

    fn xpu_build(args: &[&str]) -> (Option<i32>, String, String) {
        xpu_build_env(args, &[])
    }

    fn xpu_build_env(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_xpu"))
            .arg("build")
            .args(args)
            .env_remove("CAJETA_XPU_KERNEL_GATE")
            .env_remove("CAJETA_XPU_CPU_VECTORIZE_DEADLINE_S")
            .env_remove("CAJETA_GPU_MATRIX_DIST")
            .envs(env.iter().copied())
            .output()
            .expect("run xpu");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn line<'a>(stderr: &'a str, kernel: &str, backend: &str, tag: &str) -> Option<&'a str> {
        let needle = format!("[{tag}]: kernel {kernel} on {backend}: ");
        stderr.lines().find(|l| l.contains(&needle))
    }

    #[test]
    fn nvptx_gate_lines() {
        let (code, stdout, stderr) = xpu_build(&[
            "tests/filetests/gates/gates.xk",
            "tests/filetests/gates/escapes.xk",
            "--backends",
            "cuda",
        ]);
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        // Unbounded: launched with two blocks, no ceiling; escaped by @unbounded.
        let l = line(&stderr, "loose", "cuda", "xpu-kernel-unbounded").expect(&stderr);
        assert!(l.contains(": error[") && l.contains("(XPU-G003)"), "{l}");
        let l = line(&stderr, "tracked_unbounded", "cuda", "xpu-kernel-unbounded").expect(&stderr);
        assert!(
            l.contains(": note[") && l.ends_with("[tracked: PLAN-3]"),
            "{l}"
        );
        // Pinned, derived or declared: bounded.
        for k in ["clean", "derived", "table", "tile", "twin"] {
            assert!(
                line(&stderr, k, "cuda", "xpu-kernel-unbounded").is_none(),
                "{k}: {stderr}"
            );
        }
        // Skipped: NVIDIA builds wave 32 only.
        let l = line(&stderr, "wide", "cuda", "xpu-kernel-skipped").expect(&stderr);
        assert!(
            l.contains("no device code:") && l.contains("(XPU-L03)"),
            "{l}"
        );
        // The pinned block is the PTX's bound.
        assert!(stdout.contains("clean on cuda (sm_90): ptx"), "{stdout}");
        if ptxas::find().is_none() {
            assert!(
                stderr.contains("note[xpu-kernel-spill]: cuda: no assembler: ptxas not found"),
                "{stderr}"
            );
            assert!(line(&stderr, "table", "cuda", "xpu-kernel-spill").is_none());
            skip("gates::nvptx_gate_lines (spill)", "ptxas not found");
            return;
        }
        // Spill: a dynamically indexed private array, zero spill stores.
        let l = line(&stderr, "table", "cuda", "xpu-kernel-spill").expect(&stderr);
        assert!(
            l.contains("zero spill stores")
                && l.contains("private array `t`")
                && l.contains("(XPU-G004)"),
            "{l}"
        );
        // The software tile is distributed by default: no spill, one [mma-tiering] note.
        assert!(
            line(&stderr, "tile", "cuda", "xpu-kernel-spill").is_none(),
            "{stderr}"
        );
        let l = line(&stderr, "tile", "cuda", "mma-tiering").expect(&stderr);
        assert!(
            l.contains(": note[")
                && l.contains("matrix_mma<f32 16x16x16, f32> takes the software-distributed tier")
                && l.contains("(XPU-N02)"),
            "{l}"
        );
        assert_eq!(stderr.matches("[mma-tiering]").count(), 1, "{stderr}");
        // Spill: the replicated control (CAJETA_GPU_MATRIX_DIST=off), its fragment named.
        let (_, _, off) = xpu_build_env(
            &["tests/filetests/gates/gates.xk", "--backends", "cuda"],
            &[("CAJETA_GPU_MATRIX_DIST", "off")],
        );
        let l = line(&off, "tile", "cuda", "xpu-kernel-spill").expect(&off);
        assert!(
            l.contains("portable software tile") && l.contains("fragment `fa`"),
            "{l}"
        );
        let l = line(&off, "tile", "cuda", "mma-tiering").expect(&off);
        assert!(l.contains("software-replicated tier"), "{l}");
        assert!(
            line(&stderr, "clean", "cuda", "xpu-kernel-spill").is_none(),
            "{stderr}"
        );
        assert!(
            stderr
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("error[CAJETA_ERROR_XPU_KERNEL_GATE]")),
            "{stderr}"
        );
    }

    /// A kernel of `n` live accumulators, pinned at `block` or not.
    fn heavy(n: usize, block: Option<u32>) -> String {
        let mut s = String::new();
        if let Some(b) = block {
            s.push_str(&format!("@block({b})\n"));
        }
        s.push_str("kernel heavy(out: buf<f32, rw>, x: buf<f32>, m: u32) {\n");
        for i in 0..n {
            s.push_str(&format!("    let a{i}: f32 = x[{i}];\n"));
        }
        s.push_str("    for j: u32 in 0..m {\n        let v: f32 = x[j];\n");
        for i in 0..n {
            s.push_str(&format!("        a{i} = a{i} * v + {i}.5;\n"));
        }
        s.push_str("    }\n    let s: f32 = 0.0;\n");
        for i in 0..n {
            s.push_str(&format!("    s += a{i} * a{i};\n"));
        }
        s.push_str("    out[global_id.x] = s;\n}\n");
        s
    }

    #[test]
    fn a_pinned_block_is_reqntid_and_budgets_the_registers() {
        let target = Nvptx::new(90);
        let mut regs = Vec::new();
        for block in [None, Some(1024)] {
            let vm = xpu::ir::parse(&heavy(96, block)).unwrap().verify().unwrap();
            let (h, _) = vm.kernels().next().unwrap();
            let out =
                llvm::lower(&vm, &[KernelRef::plain(h)], &target, &Default::default()).unwrap();
            let ptx = out.text();
            assert_eq!(
                ptx.contains(".reqntid 1024, 1, 1"),
                block.is_some(),
                "{}",
                &ptx[..ptx.len().min(2000)]
            );
            if ptxas::find().is_none() {
                continue;
            }
            let r = ptxas::assemble(&ptx, "sm_90").unwrap();
            let f = r.function(&out.kernels[0].symbol).unwrap().clone();
            println!(
                "heavy, block {}: {} registers, {} bytes spill stores, {} bytes stack",
                block.map_or("unpinned".into(), |b| b.to_string()),
                f.registers.unwrap_or(0),
                f.spill_store_bytes.unwrap_or(0),
                f.stack_frame_bytes.unwrap_or(0)
            );
            regs.push(f.registers.unwrap_or(0));
        }
        if regs.len() < 2 {
            skip(
                "gates::a_pinned_block_is_reqntid_and_budgets_the_registers (registers)",
                "ptxas not found",
            );
            return;
        }
        // 65,536 registers for a block of 1,024 threads: at most 64 each.
        assert!(regs[1] <= 64 && regs[1] < regs[0], "{regs:?}");
    }

    #[cfg(feature = "hip")]
    #[test]
    fn amdgpu_gate_lines() {
        let (code, stdout, stderr) = xpu_build(&[
            "tests/filetests/gates/gates.xk",
            "--backends",
            "amdgpu",
            "--arch",
            "gfx1100",
        ]);
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        let l = line(&stderr, "loose", "amdgpu", "xpu-kernel-unbounded").expect(&stderr);
        assert!(l.contains("(XPU-G003)"), "{l}");
        assert!(stdout.contains("clean on amdgpu (gfx1100): "), "{stdout}");
        if xpu::codegen::llvm::codeobj::find_linker().is_none() {
            assert!(stderr.contains("no linker: ld.lld not found"), "{stderr}");
            assert!(line(&stderr, "table", "amdgpu", "xpu-kernel-spill").is_none());
            skip("gates::amdgpu_gate_lines (spill)", "ld.lld not found");
            return;
        }
        assert!(
            stdout.contains("clean on amdgpu (gfx1100): hsaco"),
            "{stdout}"
        );
        // A dynamically indexed private array: a private segment, zero spills.
        let l = line(&stderr, "table", "amdgpu", "xpu-kernel-spill").expect(&stderr);
        assert!(
            l.contains("bytes of private segment") && l.contains("private array `t`"),
            "{l}"
        );
        // Every fragment takes the software tier on amdgpu: distributed, no scratch.
        assert!(
            line(&stderr, "tile", "amdgpu", "xpu-kernel-spill").is_none(),
            "{stderr}"
        );
        let l = line(&stderr, "tile", "amdgpu", "mma-tiering").expect(&stderr);
        assert!(l.contains("software-distributed tier"), "{l}");
        // The replicated control has a private segment.
        let (_, _, off) = xpu_build_env(
            &[
                "tests/filetests/gates/gates.xk",
                "--backends",
                "amdgpu",
                "--arch",
                "gfx1100",
            ],
            &[("CAJETA_GPU_MATRIX_DIST", "off")],
        );
        let l = line(&off, "tile", "amdgpu", "xpu-kernel-spill").expect(&off);
        assert!(
            l.contains("portable software tile") && l.contains("fragment `fa`"),
            "{l}"
        );
        // gfx90a builds wave 64 only: the @wave(32) tile has no code there.
        let (_, _, stderr) = xpu_build(&["tests/filetests/gates/gates.xk", "--backends", "amdgpu"]);
        let l = line(&stderr, "tile", "amdgpu", "xpu-kernel-skipped").expect(&stderr);
        assert!(
            l.contains("no device code:") && l.contains("(XPU-L03)"),
            "{l}"
        );
    }
}

// ---- `print` and `assert` on NVPTX and AMDGPU (issue 23 item 9) ---------------------------

mod print_assert {
    use super::*;
    use xpu::ir::debug::{DebugSite, SiteKind, BUFFER_WORDS};
    use xpu::ir::Scalar;

    const SRC: &str = "kernel k(out: buf<u32, rw>, x: buf<f32>) {\n    let i: u32 = global_id.x;\n    print(\"i={} x={} neg={}\", i, x[i], x[i] < 0.0);\n    assert(i < 100, \"i in range\");\n    out[i] = twice(i);\n}\n\ndevice fn twice(a: u32) -> u32 {\n    print(\"twice {} {}\", a as i8, a as f64);\n    return a * 2;\n}\n";
    const PLAIN: &str =
        "kernel k(out: buf<u32, rw>) {\n    let i: u32 = global_id.x;\n    out[i] = i;\n}\n";

    fn sites() -> Vec<DebugSite> {
        vec![
            DebugSite {
                line: 9,
                kind: SiteKind::Print {
                    format: "twice {} {}".into(),
                    args: vec![Scalar::I8, Scalar::F64],
                },
            },
            DebugSite {
                line: 3,
                kind: SiteKind::Print {
                    format: "i={} x={} neg={}".into(),
                    args: vec![Scalar::U32, Scalar::F32, Scalar::Bool],
                },
            },
            DebugSite {
                line: 4,
                kind: SiteKind::Assert {
                    message: "i in range".into(),
                },
            },
        ]
    }

    /// The records go to the module's debug buffer by atomic adds on its cursors, not through
    /// `vprintf`; the sites (the helper's first: helpers are lowered before kernels) are in
    /// the ABI; code without either statement is unchanged and has no buffer.
    #[test]
    fn ptx_writes_records_into_the_debug_buffer() {
        let out = lower_sm90(SRC);
        let ptx = out.text();
        assert!(
            ptx.contains(&format!(
                ".visible .global .align 16 .b8 xpu_debug[{}]",
                BUFFER_WORDS * 4
            )),
            "{ptx}"
        );
        assert_eq!(
            ptx.matches("atom.global.add.u32").count(),
            3,
            "one claim per statement: {ptx}"
        );
        assert!(!ptx.contains("vprintf"), "{ptx}");
        let k = &out.kernels[0];
        assert!(k.debug);
        assert_eq!(k.debug_sites, sites());
        assert!(!k.report, "print is not a check");
        let plain = lower_sm90(PLAIN);
        assert!(!plain.text().contains("xpu_debug"));
        assert!(!plain.kernels[0].debug && plain.kernels[0].debug_sites.is_empty());
        if ptxas::find().is_some() {
            let r = ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{e}\n{ptx}"));
            let f = r.function(&k.symbol).expect("a ptxas -v record");
            assert_eq!(f.spill_store_bytes, Some(0), "{f:?}");
        } else {
            skip("print_assert (assembling)", "ptxas not found");
        }
    }

    /// The PTX a cached kernel carries names its sites, so that a launch from the cache
    /// decodes the records as one from a fresh lowering does.
    #[test]
    fn the_cached_header_carries_the_sites() {
        let out = lower_sm90(SRC);
        let header = xpu::backend::cuda::abi_header(&out.kernels[0]);
        assert!(header.contains("// xpu-debug\n"), "{header}");
        let back: Vec<DebugSite> = header
            .lines()
            .filter_map(|l| l.strip_prefix("// xpu-debug-site "))
            .map(|l| DebugSite::from_line(l).unwrap())
            .collect();
        assert_eq!(back, sites());
    }

    #[cfg(feature = "hip")]
    #[test]
    fn amdgpu_code_objects_hold_the_debug_buffer() {
        use xpu::codegen::llvm::amdgpu::Amdgpu;
        use xpu::codegen::llvm::codeobj::{self, BuildOptions};
        let vm = xpu::ir::parse(SRC).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = llvm::Options {
            keep_llvm_ir: true,
            ..Default::default()
        };
        let target = Amdgpu::new("gfx90a").unwrap();
        let ir = llvm::lower(&vm, &refs, &target, &opts)
            .unwrap()
            .llvm_ir
            .unwrap();
        assert!(
            ir.contains(&format!(
                "@xpu_debug = addrspace(1) global [{BUFFER_WORDS} x i32] zeroinitializer, align 16"
            )),
            "{ir}"
        );
        assert_eq!(
            ir.matches("atomicrmw add ptr addrspace(1)").count(),
            3,
            "{ir}"
        );
        let objs = codeobj::build(&vm, &refs, &target, &BuildOptions::default()).unwrap();
        let k = &objs[0].kernels[0];
        assert!(k.abi.debug);
        assert_eq!(k.abi.debug_sites, sites());
        match &objs[0].code {
            Some(code) => {
                assert!(
                    code.windows(9).any(|w| w == b"xpu_debug"),
                    "the linked object names the buffer's symbol"
                );
                // Zero-initialised: the megabyte is not in the file.
                assert!(code.len() < 512 * 1024, "{} bytes", code.len());
            }
            None => skip("print_assert (amdgpu linking)", "ld.lld not found"),
        }
    }
}

/// Sub-wave tiles and `wave_barrier()` (issue 23 item 3) on NVPTX and AMDGPU: the wave-32
/// kernels of `tests/filetests/wave/tiles.xk` and the 16-lane tile reduction port lower for
/// sm_90 (assembled by `ptxas` where present); the wave barrier is `bar.warp.sync` with the
/// tracked lane mask; a tile verb goes through the indexed exchange (`shfl.sync.idx`). On
/// AMDGPU the same kernels link for gfx1100 (wave 32), and a kernel without `@wave` for
/// gfx90a (wave 64), with `llvm.amdgcn.wave.barrier` between wavefront fences.
#[test]
fn tiles_and_wave_barrier_lower_for_nvptx_and_amdgpu() {
    use xpu::codegen::llvm::{amdgpu::Amdgpu, codeobj};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut srcs = Vec::new();
    for file in ["wave/tiles.xk", "ports/tile_reduce.xk"] {
        srcs.push(std::fs::read_to_string(root.join(file)).unwrap());
    }
    let wave64 = "kernel t64(o: buf<u32, rw>) {\n    shared s: [u32; 128];\n    let i: u32 = local_id.x;\n    s[i] = wave_reduce_max(i, width = 16) + wave_shuffle_xor(i, 3, width = 8);\n    wave_barrier();\n    o[global_id.x] = s[i ^ 1] + wave_inclusive_scan_sum(i, width = 32);\n}\n".to_string();
    let have_ptxas = ptxas::find().is_some();
    let mut lowered = 0;
    for src in &srcs {
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        for (h, f) in vm.kernels() {
            if f.attrs.wave.is_some_and(|(w, _)| w != 32) {
                continue;
            }
            let out = llvm::lower(
                &vm,
                &[KernelRef::plain(h)],
                &Nvptx::new(90),
                &Default::default(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            let ptx = out.text().to_string();
            if f.name.starts_with("wave_sum") {
                // The wave barrier, with the tracked mask (read once at entry).
                assert!(ptx.contains("bar.warp.sync"), "{}: {ptx}", f.name);
                assert!(ptx.contains("activemask"), "{}: {ptx}", f.name);
            } else {
                assert!(ptx.contains("shfl.sync.idx"), "{}: {ptx}", f.name);
            }
            if have_ptxas {
                ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{}: {e}", f.name));
            }
            if codeobj::find_linker().is_some() {
                codeobj::build(
                    &vm,
                    &[KernelRef::plain(h)],
                    &Amdgpu::new("gfx1100").unwrap(),
                    &Default::default(),
                )
                .unwrap_or_else(|e| panic!("{} on gfx1100: {e}", f.name));
            }
            lowered += 1;
        }
    }
    assert_eq!(lowered, 3, "tiles_w32, wave_sum_w32, tile_reduce");
    let vm = xpu::ir::parse(&wave64).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    let opts = llvm::Options {
        keep_llvm_ir: true,
        ..Default::default()
    };
    let ir = llvm::lower(
        &vm,
        &[KernelRef::plain(h)],
        &Amdgpu::new("gfx90a").unwrap(),
        &opts,
    )
    .unwrap()
    .llvm_ir
    .unwrap();
    // The helper is inlined: the barrier sits between the wavefront fences.
    let rel = ir
        .find("fence syncscope(\"wavefront\") release")
        .expect(&ir);
    let bar = ir.find("call void @llvm.amdgcn.wave.barrier()").expect(&ir);
    let acq = ir
        .find("fence syncscope(\"wavefront\") acquire")
        .expect(&ir);
    assert!(rel < bar && bar < acq, "{ir}");
    if codeobj::find_linker().is_some() {
        codeobj::build(
            &vm,
            &[KernelRef::plain(h)],
            &Amdgpu::new("gfx90a").unwrap(),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("t64 on gfx90a: {e}"));
    } else {
        skip(
            "tiles_and_wave_barrier_lower_for_nvptx_and_amdgpu",
            "ld.lld not found",
        );
    }
}

/// The AMDGPU code-object cache (issue 21, item 3), at the layer below the HIP runtime
/// (`xpu::backend::hip_code::code_object`, which needs LLVM and ld.lld, no device): a second
/// cache over the same folder (a second process's) gets the linked code object without LLVM;
/// a damaged, truncated or foreign entry is removed and rebuilt; checks are their own entry.
#[cfg(feature = "hip")]
mod amd_cache {
    use std::path::{Path, PathBuf};
    use std::time::Instant;
    use xpu::backend::cache::CodeCache;
    use xpu::backend::hip_code::{code_object, device_key, ir_hash};
    use xpu::codegen::checks::Checks;
    use xpu::codegen::llvm::codeobj;

    const SRC: &str = r#"
kernel cached(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    shared t: [f32; 64];
    let l: u32 = local_id.x;
    let i: u32 = global_id.x;
    t[l] = exp(x[i]) * a;
    barrier();
    if i < n {
        y[i] = t[63 - l] + sin(x[i]);
    }
}
"#;

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(sub.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push(f.path());
            }
        }
        out.sort();
        out
    }

    #[test]
    fn code_objects_are_cached_across_caches_and_bad_entries_are_rebuilt() {
        if codeobj::find_linker().is_none() {
            super::skip("amd_cache", "ld.lld not found: no code objects to cache");
            return;
        }
        let dir = std::env::temp_dir().join(format!("xpu-hip-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let vm = xpu::ir::parse(SRC).unwrap().verify().unwrap();
        let h = vm.kernel("cached").unwrap();
        let ir = ir_hash(&vm);
        let none = Checks::default();
        for arch in ["gfx90a", "gfx1100"] {
            let t = Instant::now();
            let cold = code_object(
                &vm,
                &ir,
                h,
                arch,
                none,
                &CodeCache::disk_only(Some(dir.clone())),
            )
            .unwrap();
            let t_cold = t.elapsed();
            assert!(!cold.cached && cold.code.starts_with(b"\x7fELF"));
            let store = CodeCache::disk_only(Some(dir.clone()));
            let t = Instant::now();
            let warm = code_object(&vm, &ir, h, arch, none, &store).unwrap();
            let t_warm = t.elapsed();
            assert!(warm.cached, "{arch}: from the cache");
            assert_eq!(store.stats().disk_hits, 1);
            assert_eq!(warm.code, cold.code);
            assert_eq!(warm.manifest, cold.manifest);
            assert_eq!(
                (
                    &warm.abi.symbol,
                    warm.abi.wave_width,
                    warm.abi.report,
                    &warm.abi.sites
                ),
                (
                    &cold.abi.symbol,
                    cold.abi.wave_width,
                    cold.abi.report,
                    &cold.abi.sites
                )
            );
            assert_eq!(warm.abi.static_shared_bytes, cold.abi.static_shared_bytes);
            println!(
                "{arch}: code object cold {:.2} ms (LLVM + ld.lld), warm {:.3} ms ({:.3}x)",
                t_cold.as_secs_f64() * 1e3,
                t_warm.as_secs_f64() * 1e3,
                t_warm.as_secs_f64() / t_cold.as_secs_f64()
            );
        }
        let stored = files(&dir);
        assert_eq!(stored.len(), 2, "one entry per processor");
        let path = &stored[0];
        let good = std::fs::read(path).unwrap();
        let arch = if path.to_string_lossy().contains("gfx1100") {
            "gfx1100"
        } else {
            "gfx90a"
        };
        let n = good.len();
        let mut flipped = good.clone();
        flipped[n - 100] ^= 0x33;
        let foreign = {
            let hash = path.file_stem().unwrap().to_str().unwrap().to_string();
            let store = CodeCache::disk_only(Some(dir.clone()));
            store.put(
                &device_key(arch),
                &hash,
                "hsaco",
                b"XPUHSA\x00\x01 not a code object".to_vec(),
            );
            std::fs::read(path).unwrap()
        };
        for (what, bytes) in [
            ("flipped", flipped),
            ("truncated", good[..n / 3].to_vec()),
            ("foreign", foreign),
        ] {
            std::fs::write(path, &bytes).unwrap();
            let store = CodeCache::disk_only(Some(dir.clone()));
            let b = code_object(&vm, &ir, h, arch, none, &store).unwrap();
            assert!(!b.cached, "{what}: rebuilt");
            assert_eq!(store.stats().rejected, 1, "{what}: rejected");
            assert_eq!(std::fs::read(path).unwrap(), good, "{what}: replaced");
        }
        // Checked code is its own entry.
        let checked = Checks {
            bounds: true,
            ub_traps: false,
        };
        let store = CodeCache::disk_only(Some(dir.clone()));
        let b = code_object(&vm, &ir, h, "gfx90a", checked, &store).unwrap();
        assert!(!b.cached && b.abi.report);
        assert!(
            code_object(&vm, &ir, h, "gfx90a", checked, &store)
                .unwrap()
                .cached
        );
        assert_eq!(files(&dir).len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Issue 23 item 8 on the LLVM targets: a constant buffer (`buf<E, const>`) is read with
/// `ld.global.nc` on NVPTX (a `noalias readonly` pointer, `!invariant.load` loads) and
/// through address space 4 on AMDGPU (scalar loads at a uniform index); a laid-out shared
/// tile takes its padded size and its swizzled index.
mod constant_space {
    use super::*;

    const CONST_K: &str = "kernel k(o: buf<f32, rw>, x: buf<f32>, c: buf<f32, const>) {\n    let i: u32 = global_id.x;\n    o[i] = 1.0;\n    o[i + 1] = c[i % 4] * x[i] + vload<4>(c, 4).y + c[2];\n}\n";
    const PLAIN_K: &str = "kernel k(o: buf<f32, rw>, x: buf<f32>, c: buf<f32>) {\n    let i: u32 = global_id.x;\n    o[i] = 1.0;\n    o[i + 1] = c[i % 4] * x[i] + vload<4>(c, 4).y + c[2];\n}\n";

    #[test]
    fn constant_loads_are_ld_global_nc_on_nvptx() {
        let ptx = ptx_of(CONST_K);
        assert!(ptx.contains("ld.global.nc"), "{ptx}");
        // The same kernel over a plain read-only buffer, stored to before it is read, keeps
        // coherent loads: the `nc` comes from the constant space.
        let plain = ptx_of(PLAIN_K);
        assert!(!plain.contains("ld.global.nc"), "{plain}");
        if ptxas::find().is_none() {
            skip(
                "constant_loads_are_ld_global_nc_on_nvptx",
                "ptxas not found",
            );
            return;
        }
        ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{e}\n{ptx}"));
    }

    #[test]
    fn constant_params_are_noalias_readonly_with_invariant_loads() {
        let vm = xpu::ir::parse(CONST_K).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = llvm::Options {
            keep_llvm_ir: true,
            ..Default::default()
        };
        let ir = llvm::lower(&vm, &refs, &Nvptx::new(90), &opts)
            .unwrap()
            .llvm_ir
            .unwrap();
        assert!(ir.contains("noalias nocapture readonly"), "{ir}");
        assert!(ir.contains("!invariant.load"), "{ir}");
    }

    #[test]
    fn layouts_size_and_map_the_shared_tile_in_ptx() {
        let src = "kernel k(o: buf<f32, rw>) {\n    shared t: block_padded<[[f32; 32]; 32], 32, 1>;\n    shared s: swizzled<[[f32; 32]; 32], 32>;\n    let i: u32 = local_id.x;\n    t[i][0] = 1.0;\n    s[i][1] = 2.0;\n    barrier();\n    o[i] = t[0][i] + s[1][i];\n}\n";
        let ptx = ptx_of(src);
        // 1024 elements plus one per row but the last: 1055 f32s.
        assert!(ptx.contains("[4220]"), "{ptx}");
        assert!(ptx.contains("[4096]"), "{ptx}");
        assert!(ptx.contains("xor.b32"), "{ptx}");
        if ptxas::find().is_some() {
            ptxas::assemble(&ptx, "sm_90").unwrap_or_else(|e| panic!("{e}\n{ptx}"));
        }
    }

    #[cfg(feature = "hip")]
    #[test]
    fn constant_loads_are_scalar_on_amdgpu() {
        use xpu::codegen::llvm::amdgpu::Amdgpu;
        use xpu::codegen::llvm::codeobj::{self, BuildOptions};
        let src = "kernel k(o: buf<f32, rw>, c: buf<f32, const>) {\n    o[global_id.x] = 1.0;\n    o[global_id.x + 1] = c[2] + c[3];\n}\n";
        let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
        let refs = llvm::kernel_refs(vm.module());
        let opts = llvm::Options {
            keep_llvm_ir: true,
            ..Default::default()
        };
        let ir = llvm::lower(&vm, &refs, &Amdgpu::new("gfx90a").unwrap(), &opts)
            .unwrap()
            .llvm_ir
            .unwrap();
        assert!(ir.contains("ptr addrspace(4)"), "{ir}");
        if codeobj::find_linker().is_none() {
            skip("constant_loads_are_scalar_on_amdgpu", "ld.lld not found");
            return;
        }
        let opts = BuildOptions {
            assembly: true,
            ..Default::default()
        };
        let objs = codeobj::build(&vm, &refs, &Amdgpu::new("gfx90a").unwrap(), &opts)
            .unwrap_or_else(|e| panic!("{e}"));
        let asm = objs[0].assembly.clone().unwrap();
        // The uniform constant reads are scalar loads; nothing is read through the vector
        // memory path.
        assert!(
            asm.contains("s_load_dwordx2") || asm.contains("s_load_dword"),
            "{asm}"
        );
        assert!(!asm.contains("global_load"), "{asm}");
    }
}
