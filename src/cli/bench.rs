//! `xpu bench [cpu|vulkan|cuda|all]`: the CPU and Vulkan suites with their peers, the ratio
//! table, `--json` and the `--plot` roofline are [`crate::bench::suite`]; `xpu bench
//! first-result` is [`crate::bench::first`].
//!
//! `xpu bench cuda`: GPU benchmarks runnable from the stripped `xpu` binary alone (the GPU
//! machine has no Rust). Each figure is a median of timed rounds on device events, printed
//! beside a peer measured in the same run:
//!
//! - `saxpy` and STREAM `triad` on `--elems` floats (default 256M) against a device-to-device
//!   copy (`cuMemcpyDtoD`) of the same bytes moved;
//! - a tiled `sgemm` (64×64 tiles, 4×4 per work-item) at `--gemm` (default 4096) in TFLOP/s;
//! - host launch cost: `Kernel::launch` through the backend against a bare `cuLaunchKernel`
//!   of the same PTX function with pre-packed parameters;
//! - deferred streams (`crate::bench::defer`): host time per launch of 10 small kernels
//!   repeated 1,000 times on a deferred stream against a direct one, the loop end to end
//!   (CuPy's hand-captured graph of it is `benches/peers/cuda/graph_peer.py`), a deferred
//!   stream's results against a direct one's bit for bit with patched graph nodes, and a
//!   driver error inside a deferred sequence surfacing at the flush.
//!
//! `--json` prints one JSON object instead of the table, for `benches/peers/cuda/bench.py`,
//! which adds the nvcc-compiled CUDA C++ and `torch.matmul` columns.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// What to benchmark: `cpu`, `vulkan`, `cuda`, `all` (every backend present), or
    /// `first-result` (the time from IR to a first result).
    #[arg(default_value = "all")]
    pub backend: String,
    /// Elements of the streaming benchmarks.
    #[arg(long, default_value_t = 256 << 20)]
    pub elems: usize,
    /// The square matrix size of sgemm (a multiple of 64).
    #[arg(long, default_value_t = 4096)]
    pub gemm: u32,
    /// Work-items per block of the streaming kernels (Vulkan).
    #[arg(long, default_value_t = 256)]
    pub block: u32,
    /// Timed rounds per figure (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Only the launch-cost and deferred-stream rows (no streaming kernels, no sgemm).
    #[arg(long)]
    pub launch_only: bool,
    /// Draw each kernel on its device's roofline into this SVG file (`cpu`, `vulkan`, `all`).
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Small sizes (`cpu`, `vulkan`, `all`): a quick check that every figure is measured.
    #[arg(long)]
    pub quick: bool,
    /// `first-result`: the backends measured (comma-separated; default interp,cpu and cuda
    /// where this binary has it).
    #[arg(long, value_delimiter = ',')]
    pub on: Vec<String>,
    /// `first-result`: distinct kernels measured.
    #[arg(long, default_value_t = 200)]
    pub kernels: usize,
    /// `first-result`: the first kernel's constant (another offset gives other kernels, so a
    /// warm disk cache can be told from a cold one).
    #[arg(long, default_value_t = 0)]
    pub offset: u32,
}

/// The kernels beside the shared streaming ones (`bench_data::STREAMING_KERNELS`), in the
/// text format.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const OTHER_KERNELS: &str = r#"
kernel touch(a: buf<f32, rw>, n: u32) {
    if global_id.x >= n {
        a[0] = 0.0;
    }
}

@occupancy(max_threads = 256)
kernel sgemm(c: buf<f32, rw>, a: buf<f32>, b: buf<f32>, n: u32) {
    shared ta: [f32; 1024];
    shared tb: [f32; 1024];
    let tx: u32 = local_id.x;
    let ty: u32 = local_id.y;
    let tid: u32 = ty * 16 + tx;
    let acc: [f32; 16];
    for i: u32 in 0..16 {
        acc[i] = 0.0;
    }
    for t: u32 in 0..n step 16 {
        for l: u32 in 0..4 {
            let e: u32 = tid + l * 256;
            ta[e] = a[(group_id.y * 64 + e / 16) * n + t + e % 16];
            tb[e] = b[(t + e / 64) * n + group_id.x * 64 + e % 64];
        }
        barrier();
        for kk: u32 in 0..16 {
            for i: u32 in 0..4 {
                let av: f32 = ta[(ty * 4 + i) * 16 + kk];
                for j: u32 in 0..4 {
                    acc[i * 4 + j] += av * tb[kk * 64 + tx * 4 + j];
                }
            }
        }
        barrier();
    }
    for i: u32 in 0..4 {
        for j: u32 in 0..4 {
            c[(group_id.y * 64 + ty * 4 + i) * n + group_id.x * 64 + tx * 4 + j] = acc[i * 4 + j];
        }
    }
}
"#;

/// Every benchmark kernel's source.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn kernels_source() -> String {
    format!("{}{OTHER_KERNELS}", crate::bench::data::STREAMING_KERNELS)
}

pub fn bench(args: &BenchArgs) -> ExitCode {
    if args.backend == "first-result" {
        let names: Vec<String> = if args.on.is_empty() {
            let mut v = vec!["interp".to_string(), "cpu".to_string()];
            if cfg!(feature = "cuda") {
                v.push("cuda".into());
            }
            v
        } else {
            args.on.clone()
        };
        let mut backends = Vec::new();
        for n in &names {
            match crate::hal::Backend::from_name(n) {
                Some(b) => backends.push(b),
                None => {
                    eprintln!("xpu bench first-result: unknown backend `{n}`");
                    return ExitCode::from(2);
                }
            }
        }
        return crate::bench::first::run(&backends, args.kernels, args.offset, args.json);
    }
    // `xpu bench vulkan [--json]` alone is the Vulkan table (docs/json.md); a plot, the
    // quick sizes or JSON of the other backends go through the suite.
    let suite = args.plot.is_some() || args.quick || (args.json && args.backend != "vulkan");
    if args.backend == "vulkan" && !suite {
        return crate::bench::vulkan::run(args.elems, args.block, args.reps, args.json);
    }
    if matches!(args.backend.as_str(), "cpu" | "vulkan" | "all") {
        let sizes = if args.quick {
            crate::bench::suite::Sizes::quick()
        } else {
            crate::bench::suite::Sizes {
                // The CPU's default: 64M floats per array (256M is the GPUs').
                elems: if args.backend == "cpu" {
                    args.elems.min(64 << 20)
                } else {
                    args.elems
                },
                gemm: args.gemm.min(1024),
                image: 2048,
                block: args.block,
                reps: args.reps.min(5),
            }
        };
        let code = crate::bench::suite::run(&args.backend, sizes, args.json, args.plot.as_deref());
        if args.backend == "all"
            && cfg!(feature = "cuda")
            && crate::runtime::device::Device::open(crate::hal::Backend::Cuda).is_ok()
        {
            return imp::run(args);
        }
        return code;
    }
    if args.backend != "cuda" {
        eprintln!(
            "xpu bench: `{}` is not one of cpu, vulkan, cuda, all, first-result",
            args.backend
        );
        return ExitCode::from(2);
    }
    imp::run(args)
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use std::process::ExitCode;

    pub fn run(_: &super::BenchArgs) -> ExitCode {
        eprintln!("xpu bench cuda: this binary was built without the `cuda` feature");
        ExitCode::from(2)
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::BenchArgs;
    use crate::backend::cuda::{CodeSource, CudaDevice, CudaProgram};
    use crate::hal::launch::{ArgValue, Launch};
    use crate::hal::{Backend, DeviceImpl, DeviceMemory, Init, ProgramImpl, StreamImpl};
    use crate::ir::{ElemType, Scalar};
    use crate::runtime::buffer::RawBuffer;
    use crate::runtime::device::Device;
    use crate::runtime::stream::KernelStream;
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }

    struct Ctx<'a> {
        dev: &'a CudaDevice,
        stream: Arc<dyn StreamImpl>,
        reps: usize,
    }

    impl Ctx<'_> {
        /// Device seconds of `f` (enqueued on the stream), median over the rounds after one
        /// warm-up.
        fn time(&self, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
            f()?;
            self.stream.sync().map_err(|e| e.to_string())?;
            let mut v = Vec::new();
            for _ in 0..self.reps {
                let a = self.stream.record().map_err(|e| e.to_string())?;
                f()?;
                let b = self.stream.record().map_err(|e| e.to_string())?;
                b.sync().map_err(|e| e.to_string())?;
                let d = b
                    .elapsed_since(a.as_ref())
                    .ok_or("event timing unavailable")?;
                v.push(d.as_secs_f64());
            }
            Ok(median(v))
        }
    }

    fn buf(raw: &RawBuffer) -> ArgValue<'_> {
        ArgValue::raw(raw, ElemType::scalar(Scalar::F32))
    }

    fn buf_mut(raw: &mut RawBuffer) -> ArgValue<'_> {
        ArgValue::raw_mut(raw, ElemType::scalar(Scalar::F32))
    }

    pub fn run(args: &BenchArgs) -> ExitCode {
        match go(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xpu bench cuda: {e}");
                ExitCode::from(1)
            }
        }
    }

    fn go(args: &BenchArgs) -> Result<(), String> {
        let e = |x: crate::hal::DeviceError| x.to_string();
        // Kernels are timed through the public API (`Kernel::launch`), as a user runs them:
        // its checks, and the coarsened variant on large launches (crate::runtime::coarse).
        let device = Device::open(Backend::Cuda).map_err(e)?;
        let any: &dyn std::any::Any = device.implementation().as_ref();
        let dev = any
            .downcast_ref::<CudaDevice>()
            .ok_or("the CUDA device is not a CudaDevice")?;
        let source = format!(
            "{}{}",
            super::kernels_source(),
            crate::bench::defer::heavy_kernel()
        );
        let module = crate::ir::parse(&source)
            .map_err(|e| e.render("bench.xk"))?
            .verify()
            .map_err(|e| e.render("bench.xk"))?;
        let module = Arc::new(module);
        // First use of every kernel, through the backend's own program: where its PTX came
        // from and what it cost.
        let cuda_program = dev.load_program(&module);
        for k in ["saxpy", "triad", "touch", "sgemm"] {
            let h = module.kernel(k).ok_or(format!("no kernel {k}"))?;
            cuda_program
                .kernel(k, module.function(h))
                .map_err(|e| e.to_string())?;
        }
        let first_use = program_first_use(&cuda_program);
        let program = device.load(module.clone()).map_err(e)?;
        let kernel = |k: &str| program.kernel(k).map_err(|e| e.to_string());
        let (saxpy, triad, touch, sgemm, heavy) = (
            kernel("saxpy")?,
            kernel("triad")?,
            kernel("touch")?,
            kernel("sgemm")?,
            kernel("heavy")?,
        );
        let stream = KernelStream::create(&device).map_err(e)?;
        let cx = Ctx {
            dev,
            stream: stream.implementation().clone(),
            reps: args.reps.max(1),
        };
        let mut rows: Vec<(String, f64, String)> = Vec::new();
        let name = dev.facts().name.clone().unwrap_or_default();
        if !args.launch_only {
            streaming_and_gemm(
                &cx,
                &device,
                args,
                [&saxpy, &triad, &sgemm],
                &stream,
                &mut rows,
            )?;
        }

        // Host launch cost: both paths warmed up, then measured in alternating rounds (so
        // that clock ramps and background noise fall on both), the median of each reported.
        // "Throughput": 20,000 launches back to back and a sync, what a launch loop sees
        // (the driver's queue fills, so the device's pace shows). "Host": only the time in
        // the launch calls, in batches of 256 with a sync between batches (the queue never
        // fills), the host cost the launch path adds.
        let mut mc = RawBuffer::alloc_with(&device, 64 * 64 * 4, Init::Any).map_err(e)?;
        let tl = Launch::grid([1]).block([32]);
        let mut bare = Bare::new(&cx, mc.memory())?;
        let mut ours = |n: usize| -> Result<(), String> {
            for _ in 0..n {
                let args = [buf_mut(&mut mc), u32::MAX.into()];
                touch.launch(&stream, tl, args).map_err(|e| e.to_string())?;
            }
            Ok(())
        };
        let sync = || stream.sync().map_err(|e| e.to_string());
        let (launches, batch, rounds) = (20_000, 256, cx.reps.clamp(3, 9));
        timed_launches(2_000, None, &mut ours, &sync)?;
        timed_launches(2_000, None, &mut |n| bare.launch(n), &sync)?;
        let (mut ours_t, mut bare_t, mut ours_h, mut bare_h) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            ours_t.push(timed_launches(launches, None, &mut ours, &sync)?);
            bare_t.push(timed_launches(
                launches,
                None,
                &mut |n| bare.launch(n),
                &sync,
            )?);
            ours_h.push(timed_launches(launches, Some(batch), &mut ours, &sync)?);
            bare_h.push(timed_launches(
                launches,
                Some(batch),
                &mut |n| bare.launch(n),
                &sync,
            )?);
        }
        drop(bare);
        let (ours_t, bare_t) = (median(ours_t), median(bare_t));
        let (ours_h, bare_h) = (median(ours_h), median(bare_h));
        rows.push((
            "launch host, xpu (us)".into(),
            ours_h * 1e6,
            format!("{:.3}x bare", ours_h / bare_h),
        ));
        rows.push((
            "launch host, bare cuLaunchKernel (us)".into(),
            bare_h * 1e6,
            "peer".into(),
        ));
        rows.push((
            "launch throughput, xpu (us)".into(),
            ours_t * 1e6,
            format!("{:.3}x bare", ours_t / bare_t),
        ));
        rows.push((
            "launch throughput, bare cuLaunchKernel (us)".into(),
            bare_t * 1e6,
            "peer".into(),
        ));

        // Deferred streams.
        use crate::bench::defer as d;
        let direct = KernelStream::create(&device).map_err(e)?;
        direct.set_deferred(false).map_err(e)?;
        let deferred = KernelStream::create(&device).map_err(e)?;
        if !deferred.set_deferred(true).map_err(e)? {
            return Err("the stream does not defer (CAJETA_XPU_DEFER=0?)".into());
        }
        let mut small = d::Small::new(&device).map_err(e)?;
        let host_direct = d::host_per_launch(&saxpy, &triad, &direct, &mut small)?;
        let host_deferred = d::host_per_launch(&saxpy, &triad, &deferred, &mut small)?;
        let e2e_direct = d::end_to_end(&saxpy, &triad, &direct, &mut small)?;
        let e2e_deferred = d::end_to_end(&saxpy, &triad, &deferred, &mut small)?;
        let stat = deferred.defer_stat();
        rows.push((
            format!(
                "deferred {}x{} host per launch (us)",
                d::SEQUENCE,
                d::ITERATIONS
            ),
            host_deferred * 1e6,
            format!("{:.3}x direct", host_deferred / host_direct),
        ));
        rows.push((
            format!(
                "direct {}x{} host per launch (us)",
                d::SEQUENCE,
                d::ITERATIONS
            ),
            host_direct * 1e6,
            "peer".into(),
        ));
        rows.push((
            "deferred loop end to end per iteration (us)".into(),
            e2e_deferred * 1e6,
            format!(
                "{:.3}x direct; peer: CuPy graph in graph_peer.py",
                e2e_deferred / e2e_direct
            ),
        ));
        rows.push((
            "direct loop end to end per iteration (us)".into(),
            e2e_direct * 1e6,
            "peer".into(),
        ));
        rows.push((
            "deferred graphs recorded".into(),
            stat.graphs as f64,
            format!(
                "{} graph launches, {} replayed, {} direct, {} flushes",
                stat.graph_launches, stat.replayed, stat.direct, stat.flushes
            ),
        ));
        // Bit for bit, with patched nodes.
        let check = KernelStream::create(&device).map_err(e)?;
        check.set_deferred(true).map_err(e)?;
        let want = d::patched_run(&device, &saxpy, &triad, &direct)?;
        let got = d::patched_run(&device, &saxpy, &triad, &check)?;
        let cs = check.defer_stat();
        rows.push((
            "deferred == direct, bit for bit (1 = yes)".into(),
            (want == got) as u8 as f64,
            format!(
                "{} graphs, {} graph launches, {} patches",
                cs.graphs, cs.graph_launches, cs.patches
            ),
        ));
        let faulty = KernelStream::create(&device).map_err(e)?;
        faulty.set_deferred(true).map_err(e)?;
        let flush_line = d::driver_error_at_flush(&device, &saxpy, &heavy, &faulty)?;
        // Refusal 6 on the GPU: a spin of 2^28 dependent steps (about a second) against a
        // 20 ms deadline.
        let deadline_lines =
            crate::bench::deadline::check(&device, 1 << 28, Duration::from_millis(20))?;

        if args.json {
            // The measures by name, beside `device` (and `backend`, docs/json.md).
            let mut doc = serde_json::Map::new();
            doc.insert("backend".into(), "cuda".into());
            doc.insert("device".into(), name.to_string().into());
            for (k, v, _) in &rows {
                doc.insert(k.clone(), serde_json::json!((v * 1e4).round() / 1e4));
            }
            doc.insert("driver error at flush".into(), flush_line.clone().into());
            doc.insert("deadline".into(), deadline_lines.clone().into());
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            println!("xpu bench cuda on {name} (median of {} rounds)", cx.reps);
            if let Some(line) = first_use {
                println!("{line}");
            }
            println!("{:<46} {:>12}  ratio", "measure", "value");
            for (k, v, r) in &rows {
                println!("{k:<46} {v:>12.3}  {r}");
            }
            println!("driver error at flush: {flush_line}");
            for l in &deadline_lines {
                println!("deadline: {l}");
            }
        }
        let _ = cx.dev;
        Ok(())
    }

    /// The streaming kernels against a device copy, and sgemm.
    fn streaming_and_gemm(
        cx: &Ctx<'_>,
        device: &Device,
        args: &BenchArgs,
        [saxpy, triad, sgemm]: [&crate::runtime::Kernel; 3],
        stream: &KernelStream,
        rows: &mut Vec<(String, f64, String)>,
    ) -> Result<(), String> {
        let e = |x: crate::hal::DeviceError| x.to_string();
        let dev = cx.dev;
        let n = args.elems;
        let bytes = n * 4;
        let alloc = |bytes| RawBuffer::alloc_with(device, bytes, Init::Any).map_err(e);
        let (mut a, b, c) = (alloc(bytes)?, alloc(bytes)?, alloc(bytes)?);
        for (i, buf) in [&a, &b, &c].into_iter().enumerate() {
            buf.write(&crate::bench::data::random_f32_bytes(n, i as u64))
                .map_err(e)?;
        }
        let grid = (n as u32).div_ceil(256);
        let l1 = Launch::grid([grid]).block([256]);

        let copy_s = cx.time(|| {
            dev.copy(cx.stream.as_ref(), b.memory(), 0, a.memory(), 0, bytes)
                .map_err(|e| e.to_string())
        })?;
        let copy_gbs = 2.0 * bytes as f64 / copy_s / 1e9;
        rows.push(("memcpy DtoD (GB/s)".into(), copy_gbs, "peer".into()));
        let s = cx.time(|| {
            let args = [buf_mut(&mut a), buf(&b), 2.0f32.into(), (n as u32).into()];
            saxpy.launch(stream, l1, args).map_err(|e| e.to_string())
        })?;
        let gbs = 3.0 * bytes as f64 / s / 1e9;
        rows.push((
            "saxpy (GB/s)".into(),
            gbs,
            format!("{:.3} of DtoD", gbs / copy_gbs),
        ));
        let s = cx.time(|| {
            let args = [
                buf_mut(&mut a),
                buf(&b),
                buf(&c),
                3.0f32.into(),
                (n as u32).into(),
            ];
            triad.launch(stream, l1, args).map_err(|e| e.to_string())
        })?;
        let gbs = 3.0 * bytes as f64 / s / 1e9;
        rows.push((
            "triad (GB/s)".into(),
            gbs,
            format!("{:.3} of DtoD", gbs / copy_gbs),
        ));
        drop((a, b, c));

        // sgemm.
        let g = args.gemm - args.gemm % 64;
        let mbytes = g as usize * g as usize * 4;
        let (ma, mb, mut mc) = (alloc(mbytes)?, alloc(mbytes)?, alloc(mbytes)?);
        // Small integers keep the inputs finite.
        let host: Vec<u8> = (0..g as usize * g as usize)
            .flat_map(|i| (((i * 7) % 5) as f32 - 2.0).to_le_bytes())
            .collect();
        dev.write(cx.stream.as_ref(), ma.memory(), 0, &host)
            .map_err(|e| e.to_string())?;
        dev.write(cx.stream.as_ref(), mb.memory(), 0, &host)
            .map_err(|e| e.to_string())?;
        let gl = Launch::grid([g / 64, g / 64]).block([16, 16]);
        let s = cx.time(|| {
            let args = [buf_mut(&mut mc), buf(&ma), buf(&mb), g.into()];
            sgemm.launch(stream, gl, args).map_err(|e| e.to_string())
        })?;
        let tflops = 2.0 * (g as f64).powi(3) / s / 1e12;
        rows.push((
            format!("sgemm {g}^3 (TFLOP/s)"),
            tflops,
            "peer: torch.matmul in bench.py".into(),
        ));

        Ok(())
    }

    /// The first-use line for the saxpy kernel: where its PTX came from and what it cost.
    fn program_first_use(program: &CudaProgram) -> Option<String> {
        let f = program.first_use("saxpy")?;
        let src = match f.source {
            CodeSource::Lowered => "lowered by LLVM (cold)",
            CodeSource::Memory => "from the memory cache",
            CodeSource::Disk => "from the disk cache (warm)",
            CodeSource::Bundle => "from a bundle",
        };
        Some(format!(
            "first use of saxpy: PTX {src} in {:.2} ms, driver load {:.2} ms",
            ms(f.code),
            ms(f.load)
        ))
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    /// Seconds per launch of `n` launches made by `launch(k)` (`k` launches per call): all
    /// back to back and then `sync`, timed together; or, with `batch`, in batches of that many
    /// with a sync after each, only the launch calls timed.
    fn timed_launches(
        n: usize,
        batch: Option<usize>,
        launch: &mut dyn FnMut(usize) -> Result<(), String>,
        sync: &dyn Fn() -> Result<(), String>,
    ) -> Result<f64, String> {
        let Some(batch) = batch else {
            let t0 = Instant::now();
            launch(n)?;
            sync()?;
            return Ok(t0.elapsed().as_secs_f64() / n as f64);
        };
        let (mut host, mut done) = (Duration::ZERO, 0);
        while done < n {
            let k = batch.min(n - done);
            let t0 = Instant::now();
            launch(k)?;
            host += t0.elapsed();
            sync()?;
            done += k;
        }
        Ok(host.as_secs_f64() / n as f64)
    }

    /// The same PTX as the `touch` kernel launched through `cuLaunchKernel` with parameters
    /// packed once, as a bare `cudarc` program would.
    struct Bare {
        module: cudarc::driver::sys::CUmodule,
        f: cudarc::driver::sys::CUfunction,
        stream: cudarc::driver::sys::CUstream,
        /// The parameter values (ptr, len, n), boxed so that their addresses stay put.
        values: Box<(u64, u32, u32)>,
    }

    impl Bare {
        fn new(cx: &Ctx<'_>, mem: &Arc<dyn DeviceMemory>) -> Result<Bare, String> {
            use cudarc::driver::result;
            let module = crate::ir::parse(&super::kernels_source())
                .and_then(crate::ir::Module::verify)
                .map_err(|e| e.render("bench.xk"))?;
            let touch = module.kernel("touch").ok_or("no touch kernel")?;
            let ptx = crate::codegen::llvm::lower(
                &module,
                &[crate::codegen::llvm::KernelRef::plain(touch)],
                &crate::codegen::llvm::nvptx::Nvptx::new(cx.dev.arch()),
                &Default::default(),
            )
            .map_err(|e| e.to_string())?;
            let mut image = ptx.code.clone();
            image.push(0);
            // SAFETY: NUL-terminated PTX; the module is unloaded in `Drop`.
            let module = unsafe { result::module::load_data(image.as_ptr() as *const _) }
                .map_err(|e| format!("{e:?}"))?;
            // SAFETY: a live module with entry `touch`.
            let f = unsafe {
                result::module::get_function(module, std::ffi::CString::new("touch").unwrap())
            }
            .map_err(|e| format!("{e:?}"))?;
            let m = mem
                .as_any()
                .downcast_ref::<crate::backend::cuda::CudaMemory>()
                .ok_or("foreign memory")?;
            let stream = cx
                .stream
                .as_any()
                .downcast_ref::<crate::backend::cuda::CudaStream>()
                .ok_or("foreign stream")?
                .raw();
            Ok(Bare {
                module,
                f,
                stream,
                values: Box::new((m.device_ptr(), (mem.size() / 4) as u32, u32::MAX)),
            })
        }

        /// `n` launches, back to back.
        fn launch(&mut self, n: usize) -> Result<(), String> {
            let v = &mut *self.values;
            let mut params = [
                &mut v.0 as *mut u64 as *mut std::ffi::c_void,
                &mut v.1 as *mut u32 as *mut std::ffi::c_void,
                &mut v.2 as *mut u32 as *mut std::ffi::c_void,
            ];
            for _ in 0..n {
                // SAFETY: parameters match the kernel's (ptr, len, n) and outlive the calls
                // (the driver copies them); the buffer outlives the launches, which complete
                // before the caller's sync.
                unsafe {
                    cudarc::driver::result::launch_kernel(
                        self.f,
                        (1, 1, 1),
                        (32, 1, 1),
                        0,
                        self.stream,
                        &mut params,
                    )
                }
                .map_err(|e| format!("{e:?}"))?;
            }
            Ok(())
        }
    }

    impl Drop for Bare {
        fn drop(&mut self) {
            // SAFETY: callers sync the stream after every launch; no launch of this module
            // is pending.
            unsafe {
                let _ = cudarc::driver::result::module::unload(self.module);
            }
        }
    }
}
