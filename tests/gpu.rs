//! GPU-facing tests that need no GPU (feature `cuda`; one test binary, because LLVM links are
//! slow): every kernel of every filetest lowers through the shared LLVM walk to PTX that
//! `ptxas -arch=sm_90` assembles, with its footprint read from `ptxas -v`; a few kernels'
//! PTX is kept as snapshots under `tests/out/ptx/` (`XPU_BLESS=1` rewrites them). Without
//! `ptxas` the assembling steps are skipped with a message (CI installs the
//! `nvidia-cuda-nvcc` wheel). On a machine with a CUDA driver, the filetests also run on the
//! device through `xpu run --backend cuda`; that needs no test here.

use std::path::{Path, PathBuf};
use xpu::devices::llvm::{self, nvptx::Nvptx, KernelRef};
use xpu::devices::ptxas;

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
        eprintln!("ptxas not found (XPU_PTXAS, PATH, the nvidia-cuda-nvcc wheel): lowering only");
    }
    let mut failures = Vec::new();
    let mut lowered = 0;
    let mut refused = Vec::new();
    for (path, vm) in modules() {
        for (h, f) in vm.kernels() {
            let name = format!("{}::{}", path.display(), f.name);
            let out = match llvm::lower(
                vm.module(),
                &[KernelRef::plain(h)],
                &target,
                &Default::default(),
            ) {
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
            let out = llvm::lower(
                vm.module(),
                &[KernelRef::plain(h)],
                &target,
                &Default::default(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let file = dir.join(format!("{}.ptx", f.name));
            let text = out.text();
            if bless || !file.exists() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else {
                let old = std::fs::read_to_string(&file).unwrap();
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
fn wave_width_other_than_32_is_refused_by_name() {
    let src = "@wave(64)\nkernel k(o: buf<u32, rw>) {\n    o[global_id.x] = wave_width;\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    let e = llvm::lower(
        vm.module(),
        &[KernelRef::plain(h)],
        &Nvptx::new(90),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(e.code, llvm::codes::WAVE);
}

#[test]
fn occupancy_becomes_nvvm_annotations() {
    let src = "@occupancy(max_threads = 128, min_resident = 2, max_registers = 64)\nkernel k(o: buf<u32, rw>) {\n    o[global_id.x] = 1;\n}\n";
    let vm = xpu::ir::parse(src).unwrap().verify().unwrap();
    let (h, _) = vm.kernels().next().unwrap();
    let out = llvm::lower(
        vm.module(),
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
