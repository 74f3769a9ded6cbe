//! The deadline check of `xpu bench cuda --launch-only` (contract §2.4, refusal 6): a long
//! kernel launched with a short deadline is refused with `XPU-L018` (on a GPU at the stream's
//! next observable point, the kernel left to finish; on the host backends at the launch,
//! cancelled), a launch that meets its deadline passes, and a normal launch after the miss
//! computes the right values on the same stream: the device stays usable.

use crate::hal::launch::codes::DEADLINE;
use crate::hal::launch::{ArgValue, Launch};
use crate::runtime::{Device, KernelBuffer, KernelStream};
use std::time::{Duration, Instant};

/// A kernel that spins `n` dependent steps per work-item, and one that fills a buffer.
const KERNELS: &str = r#"
kernel spin(a: buf<f32, rw>, n: u32) {
    let v: f32 = a[global_id.x];
    for t: u32 in 0..n {
        v = v * 0.999 + 1.0;
    }
    a[global_id.x] = v;
}

kernel fill(a: buf<u32, rw>, v: u32) {
    a[global_id.x] = v + global_id.x;
}
"#;

/// What the check saw, one line per step; `Err` where a step did not behave as refusal 6
/// requires.
pub fn check(device: &Device, spin_steps: u32, deadline: Duration) -> Result<Vec<String>, String> {
    let e = |x: crate::hal::DeviceError| x.to_string();
    let module = crate::ir::parse(KERNELS)
        .map_err(|d| d.render("deadline.xk"))?
        .verify()
        .map_err(|d| d.render("deadline.xk"))?;
    let program = device.load(module).map_err(e)?;
    let spin = program.kernel("spin").map_err(|e| e.to_string())?;
    let fill = program.kernel("fill").map_err(|e| e.to_string())?;
    let stream = KernelStream::create(device).map_err(e)?;
    let mut a: KernelBuffer<f32> = device.upload(&[1.0f32; 32]).map_err(e)?;
    let mut lines = Vec::new();

    // 1. A long kernel, a short deadline: refused, at the launch or at the sync.
    let t0 = Instant::now();
    let launched = spin.launch(
        &stream,
        Launch::grid(1).block(32).deadline(deadline),
        [ArgValue::from(&mut a), spin_steps.into()],
    );
    let launch_call = t0.elapsed();
    let (code, at, message) = match launched {
        Err(err) => (err.code(), "the launch", err.to_string()),
        Ok(()) => match stream.sync() {
            Err(err) => (err.code(), "the sync", err.to_string()),
            Ok(()) => {
                return Err(format!(
                    "spin ({spin_steps} steps) met a {} s deadline: it is too short to check",
                    deadline.as_secs_f64()
                ))
            }
        },
    };
    if code != DEADLINE {
        return Err(format!(
            "the missed deadline gave {code}, not {DEADLINE}: {message}"
        ));
    }
    lines.push(format!(
        "missed deadline: {code} at {at} (the launch call took {:.3} ms): {message}",
        launch_call.as_secs_f64() * 1e3
    ));
    // The stream has settled it: a second sync is clean.
    stream
        .sync()
        .map_err(|e| format!("the sync after the refusal: {e}"))?;

    // 2. The same kernel, short, with a generous deadline: no refusal.
    spin.launch(
        &stream,
        Launch::grid(1).block(32).deadline(Duration::from_secs(60)),
        [ArgValue::from(&mut a), 16u32.into()],
    )
    .map_err(|e| format!("a launch within its deadline: {e}"))?;
    stream
        .sync()
        .map_err(|e| format!("the sync of a launch within its deadline: {e}"))?;
    lines.push("met deadline: no refusal".into());

    // 3. A normal launch on the same stream and device computes the right values.
    let mut b: KernelBuffer<u32> = device.alloc(256).map_err(e)?;
    fill.launch(
        &stream,
        Launch::grid(4).block(64),
        [ArgValue::from(&mut b), 7u32.into()],
    )
    .map_err(|e| format!("the launch after the refusal: {e}"))?;
    let got = b.download_async(&stream).map_err(e)?.wait().map_err(e)?;
    let want: Vec<u32> = (0..256).map(|i| 7 + i).collect();
    if got != want {
        return Err("the launch after the refusal computed wrong values".into());
    }
    lines.push("after the refusal: a normal launch and download give the right values".into());

    // 4. A miss seen at a download instead of a sync: the read reports it (on a host backend
    // the launch already did).
    let launched = spin.launch(
        &stream,
        Launch::grid(1).block(32).deadline(deadline),
        [ArgValue::from(&mut a), spin_steps.into()],
    );
    let code = match launched {
        Err(err) => err.code(),
        Ok(()) => match a.download_async(&stream).and_then(|p| p.wait()) {
            Err(err) => err.code(),
            Ok(_) => "none",
        },
    };
    if code != DEADLINE {
        return Err(format!(
            "a miss before a download gave {code}, not {DEADLINE}"
        ));
    }
    let got = b.download_async(&stream).map_err(e)?.wait().map_err(e)?;
    if got != want {
        return Err("the download after the second refusal gave wrong values".into());
    }
    lines.push(format!(
        "missed deadline before a download: {code}; the stream goes on"
    ));
    Ok(lines)
}
