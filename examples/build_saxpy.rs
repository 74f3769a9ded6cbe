//! Builds saxpy (`y = a * x + y`) with the IR builder, verifies it, and prints it.
//!
//! Run with `cargo run --example build_saxpy`. The same kernel in the text format is
//! `tests/filetests/kernels/saxpy.xk`; a front end that builds IR in Rust produces exactly
//! what the parser would.

use xpu::ir::builder::ModuleBuilder;
use xpu::ir::{Access, Dim, Scalar, Type};

fn main() {
    let mut mb = ModuleBuilder::new();
    mb.kernel("saxpy", |f| {
        let y = f.buffer("y", Scalar::F32, Access::ReadWrite);
        let x = f.buffer("x", Scalar::F32, Access::Read);
        let a = f.param("a", Type::F32);
        let n = f.param("n", Type::U32);
        // let i: u32 = global_id.x;
        let gid = f.global_id(Dim::X);
        let i = f.let_("i", Type::U32, gid);
        // if i < n { y[i] = a * x[i] + y[i]; }
        let (iv, nv) = (f.get(i), f.param_value(n));
        let in_range = f.lt(iv, nv);
        f.if_then(in_range, |f| {
            let av = f.param_value(a);
            let iv = f.get(i);
            let xi = f.index(x, iv);
            let ax = f.mul(av, xi);
            let iv = f.get(i);
            let yi = f.index(y, iv);
            let sum = f.add(ax, yi);
            let iv = f.get(i);
            f.store(y, iv, sum);
        });
    });

    let verified = match mb.finish().verify() {
        Ok(v) => v,
        Err(diags) => {
            eprintln!("{}", diags.render("<builder>"));
            std::process::exit(1);
        }
    };
    print!("{}", render(&verified));
}

/// The module in the text format.
fn render(verified: &xpu::ir::VerifiedModule) -> String {
    xpu::ir::print(verified.module())
}
