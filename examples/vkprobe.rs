//! A diagnostic for the Vulkan streaming figures (issue #7): times a family of one-element
//! streaming kernels on Vulkan and on CUDA in the same process, over sizes, data and buffer
//! layouts, so that the cause of a slow figure can be told apart from the kernel's shape.
//! `ROUNDS=N` times every kernel N times over and prints each round with the seconds since
//! the process started: this is what showed NVIDIA's clock ramp for a Vulkan-only process
//! (docs/vulkan-backend.md, Benchmark). Each figure is a median of 15 device-timed launches.
//!
//! `vkprobe ELEMS[,ELEMS...] [random|zeros] [separate|one|skew]` (built with `--features
//! cuda` for the CUDA column):
//!
//! - `separate`: one allocation per buffer (what `xpu bench vulkan` does);
//! - `one`: the three buffers as views of one allocation, back to back;
//! - `skew`: as `one`, with the views 1 MiB + 4 KiB apart beyond their length.

use xpu::hal::launch::{ArgValue, Launch};
use xpu::hal::{Backend, Init};
use xpu::ir::{ElemType, Scalar};
use xpu::runtime::buffer::RawBuffer;
use xpu::runtime::device::Device;
use xpu::runtime::stream::KernelStream;
use xpu::runtime::timer::KernelTimer;

const KERNELS: &str = r#"
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, z: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { y[i] = a * x[i] + y[i]; }
}
kernel triad(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = b[i] + s * c[i]; }
}
kernel fadd3(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = b[i] + c[i]; }
}
kernel iadd3(a: buf<u32, rw>, b: buf<u32>, c: buf<u32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = b[i] + c[i]; }
}
kernel iinplace(a: buf<u32, rw>, b: buf<u32>, c: buf<u32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = b[i] + a[i]; }
}
kernel copy(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = b[i]; }
}
kernel copyc(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n { a[i] = c[i]; }
}
kernel read2(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        let v: f32 = b[i] + c[i];
        if v == 12345.0 { a[i] = v; }
    }
}
"#;

const NAMES: [(&str, f64); 8] = [
    ("saxpy", 12.0),
    ("triad", 12.0),
    ("fadd3", 12.0),
    ("iadd3", 12.0),
    ("iinplace", 12.0),
    ("copy", 8.0),
    ("copyc", 8.0),
    ("read2", 8.0),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn probe(
    backend: Backend,
    elems: usize,
    data: &str,
    layout: &str,
    rounds: usize,
) -> Result<Vec<f64>, String> {
    let e = |x: xpu::hal::DeviceError| x.to_string();
    let device = Device::open(backend).map_err(e)?;
    let module = xpu::ir::parse(KERNELS)
        .and_then(|m| m.verify())
        .map_err(|d| d.render("probe"))?;
    let program = device.load(module).map_err(e)?;
    let stream = KernelStream::create(&device).map_err(e)?;
    let bytes = elems * 4;
    let mut bufs: Vec<RawBuffer> = match layout {
        "separate" => (0..3)
            .map(|_| RawBuffer::alloc_with(&device, bytes, Init::Any).map_err(e))
            .collect::<Result<_, _>>()?,
        _ => {
            let gap = if layout == "skew" {
                (1 << 20) + 4096
            } else {
                0
            };
            let all = RawBuffer::alloc_with(&device, 3 * (bytes + gap), Init::Any).map_err(e)?;
            (0..3)
                .map(|k| all.sub(k * (bytes + gap), bytes).map_err(e))
                .collect::<Result<_, _>>()?
        }
    };
    for (i, b) in bufs.iter().enumerate() {
        let d = if data == "zeros" {
            vec![0u8; bytes]
        } else {
            xpu::bench::data::random_f32_bytes(elems, i as u64)
        };
        b.write(&d).map_err(e)?;
    }
    let block = 256u32;
    let n = elems as u32;
    let grid = n.div_ceil(block);
    let mut out = Vec::new();
    for round in 0..rounds {
        out.clear();
        for (name, _) in NAMES {
            let kernel = program.kernel(name).map_err(|x| x.to_string())?;
            let ty = if name.starts_with('i') {
                ElemType::scalar(Scalar::U32)
            } else {
                ElemType::scalar(Scalar::F32)
            };
            let mut launch = || {
                let (out, ins) = bufs.split_first_mut().expect("three buffers");
                let args = vec![
                    ArgValue::raw_mut(out, ty),
                    ArgValue::raw(&ins[0], ty),
                    ArgValue::raw(&ins[1], ty),
                    ArgValue::from(if name == "saxpy" { 1.0f32 } else { 3.0f32 }),
                    ArgValue::from(n),
                ];
                kernel
                    .launch(&stream, Launch::grid([grid]).block([block]), args)
                    .map_err(|x| x.to_string())
            };
            launch()?;
            stream.sync().map_err(e)?;
            let mut times = Vec::new();
            for _ in 0..15 {
                let timer = KernelTimer::start(&stream).map_err(e)?;
                launch()?;
                let t = timer.stop().map_err(e)?;
                times.push(t.nanos.map_or(f64::NAN, |ns| ns as f64 / 1e6));
            }
            out.push(median(times));
        }
        eprintln!(
            "{backend:?} round {round} at {:.2}s: {:?}",
            START.elapsed().as_secs_f64(),
            out.iter()
                .map(|t| (t * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
    }
    Ok(out)
}

static START: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

fn main() {
    let _ = *START;
    let rounds: usize = std::env::var("ROUNDS").map_or(1, |r| r.parse().expect("ROUNDS"));
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .get(1)
        .map_or("268435456", |s| s.as_str())
        .split(',')
        .map(|s| s.parse().expect("ELEMS"))
        .collect();
    let data = args.get(2).map_or("random", |s| s.as_str());
    let layout = args.get(3).map_or("separate", |s| s.as_str());
    for elems in sizes {
        let vk = probe(Backend::Vulkan, elems, data, layout, rounds);
        let cu = probe(Backend::Cuda, elems, data, layout, rounds);
        println!("elems {elems} data {data} layout {layout}");
        println!(
            "{:<9} {:>9} {:>8} {:>9} {:>8} {:>7}",
            "kernel", "vk ms", "vk GB/s", "cuda ms", "cu GB/s", "speed"
        );
        match (vk, cu) {
            (Ok(v), Ok(c)) => {
                for (i, (name, per)) in NAMES.iter().enumerate() {
                    let gb = per * elems as f64 / 1e6;
                    println!(
                        "{:<9} {:>9.3} {:>8.0} {:>9.3} {:>8.0} {:>7.2}",
                        name,
                        v[i],
                        gb / v[i],
                        c[i],
                        gb / c[i],
                        c[i] / v[i]
                    );
                }
            }
            (v, c) => println!("vulkan: {:?}\ncuda: {:?}", v.err(), c.err()),
        }
    }
}
