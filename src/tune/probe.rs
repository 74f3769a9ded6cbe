//! [`GemmProbe`]: a [`ShapeProbe`] for families whose kernels follow the GEMM convention, the
//! one `xpu tune` launches.
//!
//! A member's parameters are named from `c`, `a`, `b` (f32 buffers of `M×N`, `M×K` and
//! `K×N` elements) and `m`, `n`, `k` (`u32` values); it is launched on a grid of
//! `[⌈N / tile_n⌉, ⌈M / tile_m⌉]` blocks of `[threads]`, opting in to the larger shared limit
//! where its verdict says so. Each kernel is launched once untimed before its first timing
//! (building its code and warming caches). A reading is at the `KernelTimer` tier, or the host
//! clock around a synchronised stream where the tier is unavailable (Vulkan).

use super::calibration::bracket;
use super::choice::ShapeProbe;
use super::filter::{Problem, ShapeCandidate, ShapeFilter};
use crate::hal::launch::{ArgValue, Launch, LaunchError};
use crate::ir::Type;
use crate::runtime::buffer::KernelBuffer;
use crate::runtime::device::Program;
use crate::runtime::stream::KernelStream;
use std::collections::HashSet;

/// Times family members on one program's device at one problem.
pub struct GemmProbe {
    program: Program,
    problem: Problem,
    stream: KernelStream,
    c: KernelBuffer<f32>,
    a: KernelBuffer<f32>,
    b: KernelBuffer<f32>,
    opt_in: HashSet<String>,
    warm: HashSet<String>,
    /// Launches per timed bracket (more than one amortises a launch's fixed cost).
    pub launches_per_bracket: u32,
}

fn no_code(program: &Program, kernel: &str, reason: String) -> LaunchError {
    LaunchError::no_code(kernel, program.device().backend(), reason)
}

impl GemmProbe {
    /// Buffers for `problem` on `program`'s device (`a` and `b` hold small integers, so that
    /// every shape computes the same exact result); `filter` says which members opt in.
    pub fn new(
        program: &Program,
        problem: Problem,
        filter: &ShapeFilter,
    ) -> Result<GemmProbe, LaunchError> {
        let device = program.device();
        let err = |e: crate::hal::DeviceError| no_code(program, "(probe)", e.to_string());
        let len = |x: u64, y: u64| -> Result<usize, LaunchError> {
            x.checked_mul(y)
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| no_code(program, "(probe)", format!("{problem} is too large")))
        };
        let fill = |n: usize, seed: usize| -> Vec<f32> {
            (0..n).map(|i| ((i * 7 + seed) % 5) as f32 - 2.0).collect()
        };
        let stream = KernelStream::create(device).map_err(err)?;
        let c = KernelBuffer::new(device, len(problem.m, problem.n)?).map_err(err)?;
        let a =
            KernelBuffer::from_slice(device, &fill(len(problem.m, problem.k)?, 1)).map_err(err)?;
        let b =
            KernelBuffer::from_slice(device, &fill(len(problem.k, problem.n)?, 3)).map_err(err)?;
        Ok(GemmProbe {
            program: program.clone(),
            problem,
            stream,
            c,
            a,
            b,
            opt_in: filter
                .verdicts
                .iter()
                .filter(|v| v.needs_opt_in)
                .map(|v| v.candidate.kernel.clone())
                .collect(),
            warm: HashSet::new(),
            launches_per_bracket: 1,
        })
    }

    /// The result buffer of the last launch.
    pub fn result(&self) -> &KernelBuffer<f32> {
        &self.c
    }

    /// Launches `candidate` once (enqueued).
    pub fn launch(&mut self, candidate: &ShapeCandidate) -> Result<(), LaunchError> {
        let kernel = self.program.kernel(&candidate.kernel)?;
        let p = self.problem;
        let grid_x = p.n.div_ceil(candidate.tile_n.max(1) as u64);
        let grid_y = p.m.div_ceil(candidate.tile_m.max(1) as u64);
        let dims = |v: u64| {
            u32::try_from(v).map_err(|_| {
                no_code(
                    &self.program,
                    &candidate.kernel,
                    format!("{p} needs {v} blocks"),
                )
            })
        };
        let launch = Launch::grid([dims(grid_x)?, dims(grid_y)?])
            .block([candidate.threads])
            .shared_bytes(candidate.dynamic_shared_bytes as u32)
            .shared_opt_in(self.opt_in.contains(&candidate.kernel));
        let value = |v: u64| {
            u32::try_from(v).map_err(|_| {
                no_code(
                    &self.program,
                    &candidate.kernel,
                    format!("{v} does not fit u32"),
                )
            })
        };
        let (m, n, k) = (value(p.m)?, value(p.n)?, value(p.k)?);
        let params: Vec<(String, Type)> = kernel
            .function()
            .params
            .iter()
            .map(|q| (q.name.clone(), q.ty))
            .collect();
        let mut c = Some(&mut self.c);
        let mut args: Vec<ArgValue> = Vec::new();
        for (name, _) in &params {
            args.push(match name.as_str() {
                "c" => match c.take() {
                    Some(c) => ArgValue::from(c),
                    None => return Err(self_convention(&candidate.kernel, name)),
                },
                "a" => ArgValue::from(&self.a),
                "b" => ArgValue::from(&self.b),
                "m" => ArgValue::from(m),
                "n" => ArgValue::from(n),
                "k" => ArgValue::from(k),
                _ => return Err(self_convention(&candidate.kernel, name)),
            });
        }
        kernel.launch(&self.stream, launch, args)
    }
}

fn self_convention(kernel: &str, param: &str) -> LaunchError {
    LaunchError::no_code(
        kernel,
        crate::hal::Backend::Interp,
        format!(
            "parameter `{param}`: the GEMM probe launches kernels whose parameters are c, a, b \
             (each once) and m, n, k"
        ),
    )
}

impl ShapeProbe for GemmProbe {
    fn time(&mut self, candidate: &ShapeCandidate) -> Result<u64, LaunchError> {
        let device_err = |e: String| LaunchError::Device {
            kernel: candidate.kernel.clone(),
            message: e,
        };
        if self.warm.insert(candidate.kernel.clone()) {
            self.launch(candidate)?;
            self.stream.sync().map_err(|e| device_err(e.to_string()))?;
        }
        let stream = self.stream.clone();
        let mut failure = None;
        let n = self.launches_per_bracket.max(1);
        let ns = bracket(&stream, || {
            for _ in 0..n {
                if let Err(e) = self.launch(candidate) {
                    failure = Some(e);
                    return Err("launch failed".into());
                }
            }
            Ok(())
        });
        if let Some(e) = failure {
            return Err(e);
        }
        ns.map(|t| t / n as u64).map_err(device_err)
    }

    fn foreign_load_percent(&mut self) -> Option<u32> {
        self.program.device().foreign_load_percent()
    }
}
