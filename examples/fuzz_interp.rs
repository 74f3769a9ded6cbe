//! Fuzzing the backends against the interpreter with the public kit only, as an outside
//! crate would (`cargo run --release --features fuzz --example fuzz_interp [CASES]`, default
//! 200). Every backend present is compared with the interpreter on generated kernels; the
//! first disagreement is minimised and printed as a `.xk` file, and the run fails.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::sync::Arc;
use xpu::fuzz::{self, Verdict};
use xpu::{Backend, Device};

fn main() -> std::process::ExitCode {
    let cases: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let backends: Vec<Device> = Device::available()
        .into_iter()
        .filter(|&b| b != Backend::Interp)
        .filter_map(|b| Device::open(b).ok())
        .collect();
    let mut runner = TestRunner::deterministic();
    let (mut agreed, mut undefined) = (0, 0);
    for _ in 0..cases {
        let Ok(tree) = fuzz::strategy::kernels().new_tree(&mut runner) else {
            continue;
        };
        let (case, seed) = tree.current();
        let module = match xpu::ir::parse(&case.src).map(|m| m.verify()) {
            Ok(Ok(m)) => Arc::new(m),
            _ => {
                eprintln!(
                    "seed {seed}: the generated kernel does not verify:\n{}",
                    case.src
                );
                return std::process::ExitCode::FAILURE;
            }
        };
        let Ok(launch) = case.run_spec(seed) else {
            return std::process::ExitCode::FAILURE;
        };
        match fuzz::compare(&module, &launch, &backends) {
            Ok(Verdict::Agree { .. }) => agreed += 1,
            Ok(Verdict::Undefined(_)) => undefined += 1,
            Err(d) => {
                let small = fuzz::minimise(&d.file, |text| fuzz::disagrees(text, &backends));
                eprintln!("seed {seed}: {d}\nminimised:\n{small}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let names: Vec<&str> = backends.iter().map(|d| d.backend().name()).collect();
    println!(
        "{agreed} kernels agreed with the interpreter on [{}], {undefined} had no meaning (undefined behaviour)",
        names.join(", ")
    );
    std::process::ExitCode::SUCCESS
}
