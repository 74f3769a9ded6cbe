//! Every kernel file under `tests/filetests/` and `tests/ub/` on every backend this build has
//! and this machine runs (the interpreter always; the CPU JIT and GPUs where present), through
//! the same runner as `xpu run` (`xpu::filetest::runner`). A failing case fails the test with
//! the runner's whole report.

use std::path::PathBuf;
use xpu::filetest::runner::Runner;
use xpu::Device;

#[test]
fn filetests_pass_on_every_available_backend() {
    // The suites' default (contract §7): fresh device memory is poisoned, so a kernel reading
    // what nothing wrote fails deterministically. This binary has this one test, so no other
    // thread reads the environment concurrently.
    std::env::set_var("CAJETA_XPU_POISON", "1");
    // Cargo runs integration tests from the package root; relative paths keep the report short.
    let paths = [PathBuf::from("tests/filetests"), PathBuf::from("tests/ub")];
    let backends = Device::available();
    let devices = backends
        .iter()
        .map(|&b| Device::open(b).expect("an available backend opens"))
        .collect();
    let runner = Runner::new(devices).expect("the interpreter opens");
    let mut report = Vec::new();
    let summary = runner
        .run_paths(&paths, &mut report)
        .expect("the test folders are readable");
    let report = String::from_utf8_lossy(&report);
    let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    println!("backends: {}\n{report}", names.join(", "));
    assert_eq!(
        summary.failed,
        0,
        "file tests failed on {}:\n{report}",
        names.join(", ")
    );
    let ran = summary.passed + summary.failed;
    assert!(ran >= 40, "only {ran} cases ran:\n{report}");
}
