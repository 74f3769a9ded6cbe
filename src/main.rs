//! The `xpu` command line: a thin shell over the library (`xpu::cli`).

fn main() -> std::process::ExitCode {
    xpu::cli::main()
}
