//! The host runtime through its public API (DESIGN.md, "Public API sketch"): devices, buffers
//! and their views, streams, launches and every refusal a launch can meet, on the
//! interpreter device (always present) and, for the shared checks, directly through
//! `xpu::hal::launch::check` with facts and manifests a GPU would report. Also `xpu run`'s exit
//! statuses and backend selection, through the binary.

use std::process::Command;

#[path = "runtime/defer.rs"]
mod defer;
use std::sync::Arc;
use xpu::backend::interp::InterpDevice;
use xpu::hal::launch::{codes, Launch};
use xpu::hal::{Backend, DeviceError};
use xpu::ir::VerifiedModule;
use xpu::{args, Device, DeviceFacts, KernelBuffer, KernelManifest, KernelStream, LaunchError};

const KERNELS: &str = r#"
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}

kernel sum4(out: buf<f32, rw>, x: buf<f32>) {
    let i: u32 = global_id.x;
    let v: vec4<f32> = vload<4>(x, 4 * i, align = 16);
    out[i] = v.x + v.y + v.z + v.w;
}

@occupancy(max_threads = 64)
kernel bounded(out: buf<u32, rw>) {
    out[global_id.x] = local_id.x;
}

@wave(32)
kernel lanes(out: buf<u32, rw>) {
    out[global_id.x] = lane_id;
}

kernel dynamic(out: buf<u32, rw>) {
    shared scratch: [u32];
    scratch[local_id.x] = local_id.x;
    out[global_id.x] = scratch[local_id.x];
}

kernel halves(out: buf<f16, rw>, x: buf<f16>) {
    let i: u32 = global_id.x;
    out[i] = x[i] * 2.0;
}

kernel vecs(out: buf<vec2<u32>, rw>, v: vec2<u32>) {
    out[global_id.x] = v;
}
"#;

fn module() -> Arc<VerifiedModule> {
    Arc::new(
        xpu::ir::parse(KERNELS)
            .expect("parses")
            .verify()
            .expect("verifies"),
    )
}

fn interp() -> Device {
    Device::open(Backend::Interp).unwrap()
}

#[test]
fn saxpy_end_to_end() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let n = 1000u32;
    let host_x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut y = device.upload(&vec![1.0f32; n as usize]).unwrap();
    let x = device.upload(&host_x).unwrap();
    let stream = KernelStream::current(&device);
    program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid([4]).block([256]),
            args![&mut y, &x, 2.0f32, n],
        )
        .unwrap();
    let mut host_y = vec![0.0f32; n as usize];
    y.download_into(&mut host_y).unwrap();
    assert!(host_y
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 2.0 * i as f32 + 1.0));
    // The same launch enqueued on a created stream, with the result downloaded asynchronously.
    let other = KernelStream::create(&device).unwrap();
    program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &other,
            Launch::grid(4).block(256),
            &mut args![&mut y, &x, -1.0f32, n],
        )
        .unwrap();
    let pending = y.download_async(&other).unwrap();
    other.sync().unwrap();
    assert_eq!(pending.wait().unwrap()[10], 11.0);
    assert_eq!(program.manifest("saxpy").unwrap().kernel, "saxpy");
    assert!(program.manifest("nope").is_none());
}

fn launch_err(
    program: &xpu::Program,
    name: &str,
    launch: Launch,
    args: &mut [xpu::ArgValue<'_>],
) -> LaunchError {
    let stream = KernelStream::current(program.device());
    program
        .kernel(name)
        .unwrap()
        .launch(&stream, launch, args)
        .unwrap_err()
}

#[test]
fn argument_refusals_name_the_parameter() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let mut y = KernelBuffer::<f32>::new(&device, 8).unwrap();
    let x = KernelBuffer::<f32>::new(&device, 8).unwrap();
    let wrong = KernelBuffer::<u32>::new(&device, 8).unwrap();
    let l = Launch::grid(1).block(8);

    let e = launch_err(&program, "saxpy", l, &mut args![&mut y, &x, 2.0f32]);
    assert_eq!(e.code(), codes::ARG_COUNT);
    assert_eq!(
        e.to_string(),
        "error[XPU-L002]: kernel saxpy: takes 4 arguments, got 3"
    );

    let e = launch_err(
        &program,
        "saxpy",
        l,
        &mut args![&mut y, &wrong, 2.0f32, 8u32],
    );
    assert_eq!(
        e.to_string(),
        "error[XPU-L003]: kernel saxpy: argument 1 (x) is buf<f32>, got buf<u32>"
    );

    let e = launch_err(&program, "saxpy", l, &mut args![&y, &x, 2.0f32, 8u32]);
    assert_eq!(e.code(), codes::ARG_TYPE);
    assert!(
        e.to_string().contains("argument 0 (y) is buf<f32, rw>"),
        "{e}"
    );
    assert!(e.to_string().contains("&mut"), "{e}");

    let e = launch_err(&program, "saxpy", l, &mut args![&mut y, &x, 2.0f64, 8u32]);
    assert!(
        e.to_string().contains("argument 2 (a) is f32, got f64"),
        "{e}"
    );

    let e = launch_err(&program, "saxpy", l, &mut args![&mut y, &x, 2.0f32, 8i32]);
    assert!(
        e.to_string().contains("argument 3 (n) is u32, got i32"),
        "{e}"
    );

    let mut out = KernelBuffer::<[u32; 2]>::new(&device, 4).unwrap();
    let stream = KernelStream::current(&device);
    program
        .kernel("vecs")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut out, [7u32, 9]],
        )
        .unwrap();
    assert_eq!(out.download().unwrap(), vec![[7, 9]; 4]);
    let e = launch_err(
        &program,
        "vecs",
        Launch::grid(1).block(4),
        &mut args![&mut out, [7u32, 9, 1]],
    );
    assert_eq!(e.code(), codes::ARG_TYPE, "{e}");

    let e = program.kernel("missing").unwrap_err();
    assert_eq!(e.code(), codes::NO_CODE);
    assert!(e
        .to_string()
        .starts_with("error[XPU-L001]: kernel missing: no code on the interp backend"));
}

#[test]
fn geometry_refusals() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let mut out = KernelBuffer::<u32>::new(&device, 256).unwrap();

    let e = launch_err(
        &program,
        "bounded",
        Launch::grid([1, 0]).block(8),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::EMPTY_GEOMETRY);
    assert!(
        e.to_string()
            .contains("grid [1, 0, 1] has a zero dimension"),
        "{e}"
    );
    let e = launch_err(
        &program,
        "bounded",
        Launch::grid(1).block([8, 1, 0]),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::EMPTY_GEOMETRY);

    let e = launch_err(
        &program,
        "bounded",
        Launch::grid(1).block(128),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    assert!(
        e.to_string().contains("@occupancy(max_threads = 64)"),
        "{e}"
    );

    let e = launch_err(
        &program,
        "bounded",
        Launch::grid(1 << 30).block(8),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    assert!(e.to_string().contains("exceeds 2^32"), "{e}");

    // The interpreter's own limit: fewer than 2^31 work-items a launch.
    let e = launch_err(
        &program,
        "bounded",
        Launch::grid([1 << 16, 1 << 10]).block(64),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    assert!(e.to_string().contains("2^31"), "{e}");

    let e = launch_err(
        &program,
        "dynamic",
        Launch::grid(1).block(4).shared_bytes(u32::MAX),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::SHARED_MEMORY);

    let stream = KernelStream::current(&device);
    program
        .kernel("dynamic")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(2).block(4).shared_bytes(16),
            args![&mut out],
        )
        .unwrap();
    assert_eq!(
        out.slice(..8).unwrap().download().unwrap(),
        vec![0, 1, 2, 3, 0, 1, 2, 3]
    );

    let e = launch_err(
        &program,
        "lanes",
        Launch::grid(1).block(64).wave(16),
        &mut args![&mut out],
    );
    assert_eq!(e.code(), codes::WAVE_WIDTH);
    assert!(e.to_string().contains("the launch assumes wave 16"), "{e}");
    program
        .kernel("lanes")
        .unwrap()
        .launch(&stream, Launch::grid(1).block(64).wave(32), args![&mut out])
        .unwrap();
    assert_eq!(out.download().unwrap()[33], 1);
}

#[test]
fn checks_against_reported_facts_and_manifests() {
    // What a GPU backend would report: the shared checks apply its limits, and only those.
    let module = module();
    let saxpy = module.function(module.kernel("saxpy").unwrap());
    let device = interp();
    let y = KernelBuffer::<f32>::new(&device, 8).unwrap();
    let x = KernelBuffer::<f32>::new(&device, 8).unwrap();
    let mut y2 = y.clone();
    let args = args![&mut y2, &x, 1.0f32, 8u32];
    let facts = DeviceFacts {
        max_threads_per_block: Some(1024),
        max_block_dims: Some([1024, 1024, 64]),
        max_grid_dims: Some([u32::MAX, 65535, 65535]),
        shared_bytes_per_block: Some(48 << 10),
        shared_bytes_per_block_optin: Some(99 << 10),
        supported_wave_widths: Some(vec![32]),
        ..DeviceFacts::unknown(Backend::Cuda)
    };
    let mut manifest = KernelManifest::from_kernel(saxpy, Backend::Cuda);
    let check = |m: &KernelManifest, l: Launch| {
        xpu::hal::launch::check(
            "saxpy",
            saxpy,
            &xpu::ir::FunctionInfo::of(saxpy),
            m,
            &facts,
            &l,
            &args,
        )
    };
    assert!(check(&manifest, Launch::grid(4).block(256)).is_ok());
    assert_eq!(
        check(&manifest, Launch::grid(1).block(2048))
            .unwrap_err()
            .code(),
        codes::TOO_MANY_THREADS
    );
    let e = check(&manifest, Launch::grid([1, 70000]).block(1)).unwrap_err();
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    // The device's limit: another device may run it (the runner skips, not fails, the case).
    assert!(e.refused_by_device(), "{e}");
    assert!(check(&manifest, Launch::grid(1).block(2048))
        .unwrap_err()
        .refused_by_device());
    assert_eq!(
        check(&manifest, Launch::grid(1).block([1, 1, 65]))
            .unwrap_err()
            .code(),
        codes::TOO_MANY_THREADS
    );
    // 60 KB of dynamic shared memory: over the default 48 KB, within the opt-in 99 KB.
    manifest.static_shared_bytes = Some(0);
    let big = Launch::grid(1).block(32).shared_bytes(60 << 10);
    let e = check(&manifest, big).unwrap_err();
    assert_eq!(e.code(), codes::SHARED_MEMORY);
    assert!(e.to_string().contains("needs 61440 bytes"), "{e}");
    assert!(check(&manifest, big.shared_opt_in(true)).is_ok());
    assert!(e.refused_by_device(), "{e}");
    // The kernel's own ceiling and the 32-bit coordinate space refuse on every device.
    manifest.max_threads = Some(64);
    let e = check(&manifest, Launch::grid(1).block(128)).unwrap_err();
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    assert!(!e.refused_by_device(), "{e}");
    manifest.max_threads = None;
    let e = check(&manifest, Launch::grid(1 << 24).block(1024)).unwrap_err();
    assert_eq!(e.code(), codes::TOO_MANY_THREADS);
    assert!(!e.refused_by_device(), "{e}");
    // A pinned block.
    manifest.pinned_block = Some([256, 1, 1]);
    let e = check(&manifest, Launch::grid(1).block(128)).unwrap_err();
    assert_eq!(e.code(), codes::PINNED_BLOCK);
    assert!(!e.refused_by_device(), "{e}");
    assert!(check(&manifest, Launch::grid(9).block(256)).is_ok());
    manifest.pinned_block = None;
    // Distributed software matrix tiles (contract §3.3) need whole waves; a replicated or
    // native tile does not.
    let built = manifest.built_wave;
    manifest.built_wave = Some(32);
    manifest.native_ops = vec![xpu::hal::manifest::NativeOp {
        op: "matrix_mma<f32 16x16x16, f32>".into(),
        instruction: "lane shuffles + scalar multiply-add".into(),
        tier: xpu::hal::manifest::TIER_DISTRIBUTED.into(),
    }];
    let e = check(&manifest, Launch::grid(1).block(48)).unwrap_err();
    assert_eq!(e.code(), codes::PARTIAL_WAVE);
    assert!(e.to_string().contains("partial wave of 32"), "{e}");
    assert!(!e.refused_by_device(), "{e}");
    assert!(check(&manifest, Launch::grid(1).block([16, 2, 1])).is_ok());
    manifest.native_ops[0].tier = "software-replicated".into();
    assert!(check(&manifest, Launch::grid(1).block(48)).is_ok());
    manifest.native_ops.clear();
    manifest.built_wave = built;
    // A declared wave the device does not build.
    manifest.declared_wave = Some(64);
    let e = check(&manifest, Launch::grid(1).block(64)).unwrap_err();
    assert_eq!(e.code(), codes::WAVE_WIDTH);
    assert!(e.to_string().contains("unsupported wave width 64"), "{e}");
    manifest.declared_wave = None;
    // A launch assuming a wave the kernel was not built at.
    manifest.built_wave = Some(32);
    assert_eq!(
        check(&manifest, Launch::grid(1).block(64).wave(64))
            .unwrap_err()
            .code(),
        codes::WAVE_WIDTH
    );
    // @occupancy(max_waves = 2) at wave 32: 64 work-items at most.
    manifest.max_waves = Some(2);
    assert!(check(&manifest, Launch::grid(1).block(64)).is_ok());
    assert_eq!(
        check(&manifest, Launch::grid(1).block(65))
            .unwrap_err()
            .code(),
        codes::TOO_MANY_THREADS
    );
    // Facts a device does not report check nothing.
    let unknown = DeviceFacts::unknown(Backend::Vulkan);
    let plain = KernelManifest::empty("saxpy", Backend::Vulkan);
    assert!(xpu::hal::launch::check(
        "saxpy",
        saxpy,
        &xpu::ir::FunctionInfo::of(saxpy),
        &plain,
        &unknown,
        &Launch::grid(1).block(1 << 20),
        &args
    )
    .is_ok());
}

#[test]
fn misaligned_bases_and_views() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let mut out = KernelBuffer::<f32>::new(&device, 4).unwrap();
    let x = device
        .upload(&(0..20).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    let stream = KernelStream::current(&device);
    let kernel = program.kernel("sum4").unwrap();
    kernel
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut out, &x.slice(4..20).unwrap()],
        )
        .unwrap();
    assert_eq!(out.download().unwrap(), vec![22.0, 38.0, 54.0, 70.0]);
    // A view one f32 in: the kernel promised 16-byte alignment over `x`.
    let e = kernel
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut out, &x.slice(1..17).unwrap()],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::MISALIGNED_BASE);
    assert_eq!(
        e.to_string(),
        "error[XPU-L009]: kernel sum4: buffer x starts at byte 4, not a multiple of 16"
    );
    // A byte view reinterpreted as f32 at an odd offset fails the element's own alignment.
    let bytes = KernelBuffer::<u8>::new(&device, 64).unwrap();
    let odd: KernelBuffer<f32> = bytes.slice(2..18).unwrap().view().unwrap();
    let mut y = device.upload(&[0.0f32; 4]).unwrap();
    let e = program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut y, &odd, 1.0f32, 4u32],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::MISALIGNED_BASE, "{e}");
}

#[test]
fn interpreter_reports_become_launch_errors() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let stream = KernelStream::current(&device);
    let mut y = device.upload(&[0.0f32; 4]).unwrap();
    let x = device.upload(&[1.0f32; 4]).unwrap();
    // n = 8 over 4-element buffers: the interpreter reports the out-of-bounds read.
    let e = program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(8),
            args![&mut y, &x, 1.0f32, 8u32],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::UNDEFINED_BEHAVIOR);
    match &e {
        LaunchError::Undefined { kind, report, .. } => {
            assert_eq!(kind, "out_of_bounds");
            assert!(report.starts_with("5:"), "{report}");
        }
        other => panic!("{other}"),
    }
    // Memory stays as the launch left it: the first four work-items wrote before the fault.
    assert_eq!(y.download().unwrap(), vec![1.0; 4]);

    // Reading memory nothing wrote (fresh buffers are undefined on the interpreter).
    let fresh = KernelBuffer::<f32>::new(&device, 4).unwrap();
    let e = program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut y, &fresh, 1.0f32, 4u32],
        )
        .unwrap_err();
    assert!(
        matches!(&e, LaunchError::Undefined { kind, .. } if kind == "uninit_read"),
        "{e}"
    );

    // Two overlapping views, one read-write: not modellable by the interpreter (XPU-REF01).
    let whole = device.upload(&[1.0f32; 8]).unwrap();
    let mut a = whole.slice(0..4).unwrap();
    let b = whole.slice(2..6).unwrap();
    let e = program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut a, &b, 1.0f32, 4u32],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::UNDEFINABLE, "{e}");
    // Disjoint views of one allocation are fine, and writes land in the allocation.
    let mut lo = whole.slice(0..4).unwrap();
    let hi = whole.slice(4..8).unwrap();
    program
        .kernel("saxpy")
        .unwrap()
        .launch(
            &stream,
            Launch::grid(1).block(4),
            args![&mut lo, &hi, 2.0f32, 4u32],
        )
        .unwrap();
    assert_eq!(
        whole.download().unwrap(),
        vec![3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0]
    );
}

#[test]
fn foreign_buffers_and_streams_are_refused() {
    let a = interp();
    // A second, distinct interpreter device.
    let b = Device::from_impl(Arc::new(InterpDevice::new()));
    assert_ne!(a, b);
    let program = a.load(module()).unwrap();
    let mut y = a.upload(&[0.0f32; 4]).unwrap();
    let x_on_b = b.upload(&[0.0f32; 4]).unwrap();
    let x_on_a = a.upload(&[0.0f32; 4]).unwrap();
    let kernel = program.kernel("saxpy").unwrap();
    let e = kernel
        .launch(
            &KernelStream::current(&a),
            Launch::grid(1).block(4),
            args![&mut y, &x_on_b, 1.0f32, 4u32],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::FOREIGN_OBJECT);
    assert!(
        e.to_string().contains("buffer x belongs to another device"),
        "{e}"
    );
    let e = kernel
        .launch(
            &KernelStream::current(&b),
            Launch::grid(1).block(4),
            args![&mut y, &x_on_a, 1.0f32, 4u32],
        )
        .unwrap_err();
    assert_eq!(e.code(), codes::FOREIGN_OBJECT);
    let err = y
        .upload_async(&KernelStream::current(&b), &[1.0; 4])
        .unwrap_err();
    assert!(matches!(err, DeviceError::ForeignObject { .. }));
    let mut y_b = b.upload(&[0.0f32; 4]).unwrap();
    assert!(y_b.copy_from(&y).is_err());
}

#[test]
fn buffers_views_and_copies() {
    let device = interp();
    let data: Vec<u32> = (0..16).collect();
    let mut buf = device.upload(&data).unwrap();
    assert_eq!(buf.len(), 16);
    assert_eq!(buf.byte_len(), 64);
    // Slices share memory and check bounds.
    let mid = buf.slice(4..8).unwrap();
    assert_eq!(mid.offset_bytes(), 16);
    assert_eq!(mid.download().unwrap(), vec![4, 5, 6, 7]);
    assert_eq!(buf.slice(..=2).unwrap().len(), 3);
    assert_eq!(buf.slice(16..).unwrap().len(), 0);
    assert!(buf.slice(8..17).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = buf.slice(5..4);
    assert!(reversed.is_err());
    assert!(buf.slice(usize::MAX..).is_err());
    let mut inner = mid.slice(1..3).unwrap();
    inner.upload(&[50, 60]).unwrap();
    assert_eq!(buf.download().unwrap()[4..8], [4, 50, 60, 7]);
    assert!(inner.upload(&[1, 2, 3]).is_err());
    // Reinterpretations share the allocation.
    let halves = buf.half_view().unwrap();
    assert_eq!(halves.len(), 32);
    assert_eq!(halves.download().unwrap()[2], half::f16::from_bits(1));
    let words = buf
        .view::<u8>()
        .unwrap()
        .slice(4..12)
        .unwrap()
        .word_view()
        .unwrap();
    assert_eq!(words.download().unwrap(), vec![1, 2]);
    let six = KernelBuffer::<u8>::new(&device, 6).unwrap();
    assert!(matches!(
        six.word_view(),
        Err(DeviceError::SizeMismatch { .. })
    ));
    let vec4s = buf.view::<[u32; 4]>().unwrap();
    assert_eq!(vec4s.len(), 4);
    assert_eq!(vec4s.download().unwrap()[0], [0, 1, 2, 3]);
    // Device-side copies, synchronous and on a stream.
    let mut copy = KernelBuffer::<u32>::new(&device, 16).unwrap();
    copy.copy_from(&buf).unwrap();
    assert_eq!(copy.download().unwrap(), buf.download().unwrap());
    let stream = KernelStream::create(&device).unwrap();
    let mut tail = copy.slice(12..).unwrap();
    tail.copy_from_async(&stream, &buf.slice(0..4).unwrap())
        .unwrap();
    stream.sync().unwrap();
    assert_eq!(copy.download().unwrap()[12..], [0, 1, 2, 3]);
    assert!(tail.copy_from(&buf).is_err());
    buf.upload_async(&stream, &data).unwrap();
    assert_eq!(buf.download_async(&stream).unwrap().wait().unwrap(), data);
    // An allocation too large for the address space is an error, not an abort.
    assert!(KernelBuffer::<u64>::new(&device, usize::MAX / 4).is_err());
}

#[test]
fn halves_through_the_interpreter() {
    let device = interp();
    let program = device.load(module()).unwrap();
    let x: Vec<half::f16> = [1.0f32, -2.5, 0.125, 65504.0]
        .iter()
        .map(|&v| half::f16::from_f32(v))
        .collect();
    let x = device.upload(&x).unwrap();
    let mut out = KernelBuffer::<half::f16>::new(&device, 4).unwrap();
    program
        .kernel("halves")
        .unwrap()
        .launch(
            &KernelStream::current(&device),
            Launch::grid(1).block(4),
            args![&mut out, &x],
        )
        .unwrap();
    let got: Vec<f32> = out.download().unwrap().iter().map(|h| h.to_f32()).collect();
    assert_eq!(got, vec![2.0, -5.0, 0.25, f32::INFINITY]);
}

fn xpu(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xpu"));
    cmd.args(args).env_remove("CAJETA_XPU_BACKEND");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn xpu_run_exit_statuses_and_selection() {
    let dir = std::env::temp_dir().join(format!("xpu-runtime-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.xk");
    let bad = dir.join("bad.xk");
    let kernel = "kernel k(o: buf<u32, rw>) { o[global_id.x] = global_id.x * 2; }\n";
    std::fs::write(
        &good,
        format!("{kernel}run k {{ grid = [2]; block = [4]; arg o = fill(8, 0); expect o = iota(8, 0, 2); }}\n"),
    )
    .unwrap();
    std::fs::write(
        &bad,
        format!("{kernel}run k {{ grid = [2]; block = [4]; arg o = fill(8, 0); expect o = iota(8); }}\n"),
    )
    .unwrap();
    let good_s = good.to_str().unwrap();
    let bad_s = bad.to_str().unwrap();

    let (code, out, _) = xpu(&["run", good_s, "--backend", "interp"], &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        format!("PASS  {good_s}:2  k  interp\n1 passed, 0 failed\n")
    );

    let (code, out, _) = xpu(&["run", good_s, bad_s, "--backend", "interp"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "FAIL  {bad_s}:2  k  interp\n    o[1]: expected 1, got 2"
        )),
        "{out}"
    );
    assert!(out.ends_with("1 passed, 1 failed\n"), "{out}");

    let (code, _, err) = xpu(&["run", good_s, "--backend", "metal"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("XPU-D003"), "{err}");
    let (code, _, err) = xpu(&["run", "/nonexistent/x.xk", "--backend", "interp"], &[]);
    assert_eq!(code, 2, "{err}");

    // `best` lands on the selected device; an unavailable request degrades with one note.
    let (code, out, err) = xpu(&["run", good_s], &[("CAJETA_XPU_BACKEND", "hip")]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(err.matches("note:").count(), 1, "{err}");
    assert!(err.contains("CAJETA_XPU_BACKEND=hip"), "{err}");
    let (code, out, err) = xpu(
        &["run", good_s, "--backend", "best"],
        &[("CAJETA_XPU_BACKEND", "interp")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  k  interp"), "{out}");
    assert!(err.is_empty(), "{err}");

    let (code, out, _) = xpu(&["run", good_s, "--backend", "all"], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("  k  interp"), "{out}");

    // A value that is not UTF-8 names no backend: the same one note, not silence.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let out = Command::new(env!("CARGO_BIN_EXE_xpu"))
            .args(["run", good_s])
            .env(
                "CAJETA_XPU_BACKEND",
                std::ffi::OsStr::from_bytes(b"cp\xffu"),
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert_eq!(err.matches("note:").count(), 1, "{err}");
        assert!(
            err.contains("CAJETA_XPU_BACKEND") && err.contains("UTF-8"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn force_selects_before_the_first_touch() {
    // The only test in this binary that touches process-wide selection.
    assert_eq!(
        Device::force("metal").unwrap_err().code(),
        xpu::hal::codes::UNKNOWN_BACKEND
    );
    Device::force("interp").unwrap();
    let current = Device::current().unwrap();
    assert_eq!(current.backend(), Backend::Interp);
    assert_eq!(Device::active_backend(), Backend::Interp);
    // Selection is cached: forcing the same backend again is fine, another is refused.
    Device::force("interp").unwrap();
    let e = Device::force("vulkan").unwrap_err();
    assert_eq!(e.code(), xpu::hal::codes::ALREADY_SELECTED);
    assert!(e.to_string().contains("already selected"), "{e}");
    assert_eq!(Device::current().unwrap(), current);
}
