//! `xpu bench cuda`'s deferred-stream rows (contract §2.4): the host time per launch of a
//! deferred stream against a direct one, the end-to-end time of the same loop (the peer is
//! `benches/peers/cuda/graph_peer.py`, the sequence captured by hand as a CUDA graph in
//! CuPy), a deferred stream's results against a direct stream's bit for bit with patched
//! graph nodes, and a driver error inside a deferred sequence surfacing at the flush.

use crate::hal::launch::{ArgValue, Launch};
use crate::hal::{DeviceError, Init};
use crate::ir::{ElemType, Scalar};
use crate::runtime::buffer::RawBuffer;
use crate::runtime::{Device, Kernel, KernelStream};
use std::time::Instant;

/// Elements of the small kernels.
pub const SMALL: u32 = 1 << 16;
/// Launches per iteration and iterations of the timed loop.
pub const SEQUENCE: usize = 10;
/// Iterations of the timed loop.
pub const ITERATIONS: usize = 1000;

/// The kernel whose 80 live accumulators need more registers than a 1024-thread block
/// has: its launch at that block is refused by the driver (out of resources), not by the
/// launch checks, which know no register count.
pub fn heavy_kernel() -> String {
    let vars = 80;
    let mut s = String::from("kernel heavy(out: buf<f32, rw>, x: buf<f32>, n: u32) {\n");
    for k in 0..vars {
        s.push_str(&format!("    let v{k}: f32 = x[{k}];\n"));
    }
    s.push_str("    for t: u32 in 0..n {\n        let w: f32 = x[t];\n");
    for k in 0..vars {
        s.push_str(&format!("        v{k} = v{k} * w + v{};\n", (k + 1) % vars));
    }
    s.push_str("    }\n    let s: f32 = 0.0;\n");
    for k in 0..vars {
        s.push_str(&format!("    s = s + v{k};\n"));
    }
    s.push_str("    out[global_id.x] = s;\n}\n");
    s
}

/// The view's bytes after the work enqueued on `stream`.
fn read_on(r: &RawBuffer, stream: &KernelStream) -> Result<Vec<u8>, DeviceError> {
    r.read_async(stream)?.wait()
}

fn f32buf(raw: &RawBuffer) -> ArgValue<'_> {
    ArgValue::raw(raw, ElemType::scalar(Scalar::F32))
}

fn f32buf_mut(raw: &mut RawBuffer) -> ArgValue<'_> {
    ArgValue::raw_mut(raw, ElemType::scalar(Scalar::F32))
}

/// The three buffers of the small kernels.
pub struct Small {
    /// The first buffer.
    pub a: RawBuffer,
    /// The second buffer.
    pub b: RawBuffer,
    /// The third buffer.
    pub c: RawBuffer,
}

impl Small {
    /// [`SMALL`] random `f32`s in each buffer of `device`.
    pub fn new(device: &Device) -> Result<Small, DeviceError> {
        let bytes = SMALL as usize * 4;
        let make = |seed| -> Result<RawBuffer, DeviceError> {
            let r = RawBuffer::alloc_with(device, bytes, Init::Any)?;
            r.write(&crate::bench::data::random_f32_bytes(SMALL as usize, seed))?;
            Ok(r)
        };
        Ok(Small {
            a: make(1)?,
            b: make(2)?,
            c: make(3)?,
        })
    }
}

/// The sequence: saxpy and triad alternating, `SEQUENCE` launches, with scale `s`.
pub fn sequence(
    saxpy: &Kernel,
    triad: &Kernel,
    stream: &KernelStream,
    m: &mut Small,
    s: f32,
) -> Result<(), String> {
    let l = Launch::grid([SMALL / 256]).block([256]);
    for i in 0..SEQUENCE {
        let r = if i % 2 == 0 {
            saxpy.launch(
                stream,
                l,
                [f32buf_mut(&mut m.a), f32buf(&m.b), s.into(), SMALL.into()],
            )
        } else {
            triad.launch(
                stream,
                l,
                [
                    f32buf_mut(&mut m.c),
                    f32buf(&m.a),
                    f32buf(&m.b),
                    (s * 0.5).into(),
                    SMALL.into(),
                ],
            )
        };
        r.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Host seconds per launch over `ITERATIONS` of the sequence, each flushed by an event
/// record; the stream is drained between iterations outside the timing, so that no launch
/// waits for room in the driver's queue.
pub fn host_per_launch(
    saxpy: &Kernel,
    triad: &Kernel,
    stream: &KernelStream,
    m: &mut Small,
) -> Result<f64, String> {
    let e = |x: DeviceError| x.to_string();
    // Warm: the sightings that record the graph on a deferred stream.
    for _ in 0..5 {
        sequence(saxpy, triad, stream, m, 1.0)?;
        stream.record().map_err(e)?;
        stream.sync().map_err(e)?;
    }
    let mut host = 0.0;
    for _ in 0..ITERATIONS {
        let t0 = Instant::now();
        sequence(saxpy, triad, stream, m, 1.0)?;
        stream.record().map_err(e)?;
        host += t0.elapsed().as_secs_f64();
        stream.sync().map_err(e)?;
    }
    Ok(host / (ITERATIONS * SEQUENCE) as f64)
}

/// Wall seconds per iteration of the loop end to end: `ITERATIONS` sequences, each flushed
/// by an event record, and one sync at the end.
pub fn end_to_end(
    saxpy: &Kernel,
    triad: &Kernel,
    stream: &KernelStream,
    m: &mut Small,
) -> Result<f64, String> {
    let e = |x: DeviceError| x.to_string();
    stream.sync().map_err(e)?;
    let t0 = Instant::now();
    for _ in 0..ITERATIONS {
        sequence(saxpy, triad, stream, m, 1.0)?;
        stream.record().map_err(e)?;
    }
    stream.sync().map_err(e)?;
    Ok(t0.elapsed().as_secs_f64() / ITERATIONS as f64)
}

/// Runs six iterations of the sequence with a changing scale (patched arguments) and, in
/// the fifth, the buffers of the triad swapped (patched addresses), on `stream`; the three
/// buffers' bytes after.
pub fn patched_run(
    device: &Device,
    saxpy: &Kernel,
    triad: &Kernel,
    stream: &KernelStream,
) -> Result<Vec<u8>, String> {
    let e = |x: DeviceError| x.to_string();
    let mut m = Small::new(device).map_err(e)?;
    for it in 0..6 {
        if it == 4 {
            std::mem::swap(&mut m.a, &mut m.c);
        }
        sequence(saxpy, triad, stream, &mut m, 0.25 + it as f32 * 0.125)?;
        stream.record().map_err(e)?;
    }
    let mut out = Vec::new();
    for r in [&m.a, &m.b, &m.c] {
        out.extend(read_on(r, stream).map_err(e)?);
    }
    Ok(out)
}

/// The driver error check: on a deferred stream, saxpy, `heavy` at a 1024-thread block, and
/// saxpy again; the read after them must report `heavy` (`XPU-D020`, one launch not run), a
/// second read `XPU-D021`, and after `clear_failure` the stream reads again. The answer is a
/// line saying what happened.
pub fn driver_error_at_flush(
    device: &Device,
    saxpy: &Kernel,
    heavy: &Kernel,
    stream: &KernelStream,
) -> Result<String, String> {
    let e = |x: DeviceError| x.to_string();
    let regs = heavy.manifest().registers_per_thread.unwrap_or(0);
    let mut m = Small::new(device).map_err(e)?;
    let l = Launch::grid([SMALL / 256]).block([256]);
    let big = Launch::grid([1]).block([1024]);
    let saxpy_args = |m: &mut Small| {
        saxpy
            .launch(
                stream,
                l,
                [
                    f32buf_mut(&mut m.a),
                    f32buf(&m.b),
                    2.0f32.into(),
                    SMALL.into(),
                ],
            )
            .map_err(|e| e.to_string())
    };
    saxpy_args(&mut m)?;
    heavy
        .launch(
            stream,
            big,
            [f32buf_mut(&mut m.c), f32buf(&m.b), 4u32.into()],
        )
        .map_err(|e| format!("refused at submission instead of at the flush: {e}"))?;
    saxpy_args(&mut m)?;
    let first = read_on(&m.a, stream);
    let second = read_on(&m.a, stream);
    stream.clear_failure();
    let third = read_on(&m.a, stream);
    let code = |r: &Result<Vec<u8>, DeviceError>| match r {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code().to_string(),
    };
    Ok(format!(
        "heavy uses {regs} registers per thread ({} per 1024-thread block): first read {} ({}), second read {}, after clear_failure {}",
        regs as u64 * 1024,
        code(&first),
        first.as_ref().err().map_or(String::new(), |e| e.to_string()),
        code(&second),
        code(&third)
    ))
}
