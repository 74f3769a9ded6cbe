//! The reference interpreter as a device (`Backend::Interp`): the oracle behind the same seam
//! as every other backend, so a test names it like any device.
//!
//! Memory is host memory ([`super::host`]) with the interpreter's per-byte *defined* mask:
//! fresh memory is undefined (and 0xFF-filled under `CAJETA_XPU_POISON=1`), uploads and kernel
//! stores define it, and a kernel reading an undefined byte is reported. Streams execute
//! eagerly. A launch copies each buffer view (bytes and mask) into an
//! [`crate::interp::Buffer`], runs [`interp::launch_handle`], and copies the
//! views of read-write parameters back — also after undefined behaviour, which leaves memory
//! as it was when the launch stopped, as a device would.
//!
//! The interpreter's outcomes become [`LaunchError`]s: `XPU-REF02` undefined behaviour (with
//! its kind, as `expect ub KIND` names it, and the report's text), `XPU-REF01` a construct it
//! refuses. Two views of one allocation that overlap, where one of them is a read-write
//! parameter, are refused as `XPU-REF01` too: the interpreter models each buffer argument as
//! its own memory, so it cannot give such aliasing its device meaning.

use crate::backend::host::{self, HostStream};
use crate::hal::facts::DeviceFacts;
use crate::hal::launch::{HostValue, Launch, LaunchError};
use crate::hal::manifest::KernelManifest;
use crate::hal::{
    Backend, DeviceArg, DeviceError, DeviceImpl, KernelImpl, ProgramImpl, StreamImpl,
};
use crate::interp::{self, Arg, Buffer, Geometry, InterpError, Options};
use crate::ir::{Access, Function, Handle, Literal, Scalar, Type, VerifiedModule};
use std::sync::Arc;

/// The wave width the interpreter models when neither the kernel nor the launch says.
pub const DEFAULT_WAVE: u32 = 32;

/// The interpreter's device.
pub struct InterpDevice {
    facts: DeviceFacts,
    /// The options every launch starts from ([`InterpDevice::with_options`]).
    defaults: Arc<Options>,
}

impl Default for InterpDevice {
    fn default() -> Self {
        InterpDevice::new()
    }
}

impl InterpDevice {
    /// The reference interpreter as a device.
    pub fn new() -> Self {
        // The interpreter's own limits are facts of this (modelled) device; everything a
        // model has no value for stays absent.
        let facts = DeviceFacts {
            name: Some("xpu reference interpreter".into()),
            wave_width: Some(DEFAULT_WAVE),
            supported_wave_widths: Some(vec![1, 2, 4, 8, 16, 32, 64]),
            // One shared array may hold up to 1 GiB (the interpreter's allocation cap).
            shared_bytes_per_block: Some(1 << 30),
            integrated: Some(true),
            int64_atomics: Some(true),
            features: crate::hal::facts::FeatureSupport::host(),
            ..DeviceFacts::unknown(Backend::Interp)
        };
        InterpDevice {
            facts,
            defaults: Arc::new(Options::default()),
        }
    }

    /// An interpreter whose launches start from `options` (races allowed by name, a
    /// shuffle seed, a step budget, a wave width, checks off); a launch's own
    /// [`Launch::interp`] and wave win, and its deadline always applies.
    pub fn with_options(options: Options) -> Self {
        InterpDevice {
            defaults: Arc::new(Options {
                cancel: None,
                ..options
            }),
            ..InterpDevice::new()
        }
    }
}

impl DeviceImpl for InterpDevice {
    fn backend(&self) -> Backend {
        Backend::Interp
    }

    fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    host::host_memory_methods!(true, HostStream);

    fn load(&self, module: &Arc<VerifiedModule>) -> Result<Arc<dyn ProgramImpl>, DeviceError> {
        Ok(Arc::new(InterpProgram {
            module: module.clone(),
            defaults: self.defaults.clone(),
        }))
    }

    /// The interpreter runs the verified IR itself, which the program holds: it makes and
    /// keeps no device code, so this is always 0.
    fn code_memory(&self) -> Option<u64> {
        Some(0)
    }
}

struct InterpProgram {
    module: Arc<VerifiedModule>,
    defaults: Arc<Options>,
}

impl ProgramImpl for InterpProgram {
    fn kernel(&self, name: &str, kernel: &Function) -> Result<Arc<dyn KernelImpl>, LaunchError> {
        let handle = self.module.kernel(name).ok_or_else(|| {
            LaunchError::no_code(
                name,
                Backend::Interp,
                "the program has no kernel of that name",
            )
        })?;
        Ok(Arc::new(InterpKernel {
            module: self.module.clone(),
            handle,
            manifest: interp_manifest(kernel),
            defaults: self.defaults.clone(),
        }))
    }

    fn manifest(&self, name: &str) -> Option<KernelManifest> {
        let handle = self.module.kernel(name)?;
        Some(interp_manifest(self.module.function(handle)))
    }
}

/// The interpreter's manifest: what the IR decides, and as its code hash a hash of the
/// verified kernel it runs (the interpreter's "device code" is the IR itself).
fn interp_manifest(kernel: &Function) -> KernelManifest {
    let mut m = KernelManifest::from_kernel(kernel, Backend::Interp);
    m.code_hash = Some(crate::codegen::cpu::fnv1a(format!("{kernel:?}").as_bytes()));
    m
}

struct InterpKernel {
    module: Arc<VerifiedModule>,
    handle: Handle<Function>,
    manifest: KernelManifest,
    defaults: Arc<Options>,
}

/// A value argument as the interpreter's literal(s).
fn literals(v: &HostValue) -> Vec<Literal> {
    let scalar = v.ty().scalar;
    v.lanes()
        .iter()
        .map(|&bits| match scalar {
            Scalar::Bool => Literal::Bool(bits != 0),
            Scalar::F16 => Literal::float(half::f16::from_bits(bits as u16).to_f64(), scalar),
            Scalar::F32 => Literal::float(f32::from_bits(bits as u32) as f64, scalar),
            Scalar::F64 => Literal::float(f64::from_bits(bits), scalar),
            _ => Literal::Int { bits, ty: scalar },
        })
        .collect()
}

impl InterpKernel {
    fn name(&self) -> &str {
        &self.module.function(self.handle).name
    }

    fn error(&self, e: InterpError, launch: &Launch) -> LaunchError {
        let kernel = self.name().to_string();
        match e {
            InterpError::Ub(report) => {
                let diag = report.to_diagnostic();
                LaunchError::Undefined {
                    kind: report.kind.name().to_string(),
                    report: format!("{}:{}: {}", diag.span.line, diag.span.col, diag.message),
                    ub: report.kind,
                    site: Box::new(crate::hal::launch::Site {
                        kernel: kernel.clone(),
                        function: report.function.clone(),
                        span: report.span,
                        item: Some(report.item),
                    }),
                    kernel,
                }
            }
            InterpError::Refused(diag) => LaunchError::Undefinable {
                kernel,
                message: format!("{}:{}: {}", diag.span.line, diag.span.col, diag.message),
            },
            InterpError::BadLaunch(message) => LaunchError::Device {
                kernel,
                message: format!("the interpreter refused the launch: {message}"),
            },
            InterpError::Memory {
                space: "shared",
                need,
                limit,
            } => LaunchError::SharedMemory {
                kernel,
                need,
                limit,
            },
            InterpError::Memory {
                space: "private",
                need,
                limit,
            } => LaunchError::PrivateMemory {
                kernel,
                need,
                limit,
            },
            InterpError::Memory {
                space, need, limit, ..
            } => LaunchError::Undefinable {
                kernel,
                message: format!(
                    "the interpreter cannot check the launch: {space} memory of {need} bytes: {limit}"
                ),
            },
            InterpError::StepLimit { limit, .. } => LaunchError::Device {
                kernel,
                message: format!("step budget of {limit} work-item steps exhausted"),
            },
            InterpError::Cancelled { .. } => LaunchError::Deadline {
                kernel,
                deadline: launch.deadline.unwrap_or_default(),
                cancelled: true,
            },
        }
    }
}

impl KernelImpl for InterpKernel {
    fn manifest(&self) -> &KernelManifest {
        &self.manifest
    }

    fn launch(
        &self,
        _stream: &dyn StreamImpl,
        launch: &Launch,
        args: &[DeviceArg],
    ) -> Result<(), LaunchError> {
        let function = self.module.function(self.handle);
        let kernel = || function.name.clone();
        let items = launch.threads_per_block().saturating_mul(launch.blocks());
        if items >= (1 << 31) - 1 {
            return Err(LaunchError::TooManyThreads {
                kernel: kernel(),
                what: "grid",
                dims: launch.grid,
                limit: format!(
                    "{items} work-items; the interpreter runs fewer than 2^31 per launch"
                ),
                by_device: true,
            });
        }
        let device_error = |e: DeviceError| LaunchError::Device {
            kernel: kernel(),
            message: e.to_string(),
        };
        let read_write = |i: usize| {
            matches!(
                function.params.get(i).map(|p| p.ty),
                Some(Type::Buffer {
                    access: Access::ReadWrite,
                    ..
                })
            )
        };
        let mut locked = host::lock_bindings(args).map_err(device_error)?;

        // Overlapping views of one allocation, one of them written: not modellable here.
        for (i, a) in locked.views.iter().enumerate() {
            for (j, b) in locked.views.iter().enumerate().skip(i + 1) {
                if let (Some(a), Some(b)) = (a, b) {
                    let overlap = a.allocation == b.allocation
                        && a.offset < b.offset + b.len
                        && b.offset < a.offset + a.len;
                    if overlap && (read_write(i) || read_write(j)) {
                        return Err(LaunchError::Undefinable {
                            kernel: kernel(),
                            message: format!(
                                "buffers {} and {} overlap in memory and one is read-write; \
                                 the interpreter models each buffer argument as separate memory",
                                function.params[i].name, function.params[j].name
                            ),
                        });
                    }
                }
            }
        }

        let mut buffers: Vec<Option<Buffer>> = locked
            .views
            .iter()
            .map(|view| {
                view.as_ref().map(|v| {
                    let alloc = &locked.allocations[v.allocation];
                    Buffer {
                        bytes: alloc.bytes()[v.offset..v.offset + v.len].to_vec(),
                        defined: alloc.defined_range(v.offset, v.len),
                    }
                })
            })
            .collect();
        let mut interp_args: Vec<Arg<'_>> = Vec::with_capacity(args.len());
        for ((arg, buffer), param) in args.iter().zip(buffers.iter_mut()).zip(&function.params) {
            interp_args.push(match (arg, buffer) {
                (DeviceArg::Buffer(_), Some(b)) => Arg::Buffer(b),
                (DeviceArg::Value(v), _) if matches!(param.ty, Type::Tag(_)) => {
                    Arg::Tag(v.lane_bits(0) as u32)
                }
                (DeviceArg::Value(v), _) => {
                    let mut lits = literals(v);
                    if v.ty().lanes == 1 {
                        Arg::Scalar(lits.remove(0))
                    } else {
                        Arg::Vector(lits)
                    }
                }
                (DeviceArg::Buffer(_), None) => {
                    return Err(device_error(DeviceError::ForeignObject {
                        what: "a buffer".into(),
                    }))
                }
            });
        }
        let geometry = Geometry {
            grid: launch.grid,
            block: launch.block,
            shared_bytes: launch.shared_bytes,
        };
        let watch = crate::deadline::Watch::arm(launch.deadline);
        let mut options = Options {
            wave_width: launch.wave.or(self.defaults.wave_width),
            cancel: Some(interp::Cancel(watch.shared_flag())),
            ..(*self.defaults).clone()
        };
        if launch.interp.allow_races {
            // Every buffer parameter and shared array races on purpose.
            options
                .allow_races
                .extend(function.params.iter().map(|p| p.name.clone()));
            options
                .allow_races
                .extend(function.shared.iter().map(|(_, s)| s.name.clone()));
        }
        if launch.interp.shuffle_seed.is_some() {
            options.shuffle_seed = launch.interp.shuffle_seed;
        }
        if launch.interp.max_steps.is_some() {
            options.max_steps = launch.interp.max_steps;
        }
        let result = interp::launch_handle(
            &self.module,
            self.handle,
            &geometry,
            &mut interp_args,
            &options,
        );
        drop(interp_args);

        // Read-write views go back, whatever the outcome (UB leaves memory as it stopped).
        for (i, (view, buffer)) in locked.views.iter().zip(&buffers).enumerate() {
            if let (Some(v), Some(b), true) = (view, buffer, read_write(i)) {
                let alloc = &mut locked.allocations[v.allocation];
                alloc.bytes_mut()[v.offset..v.offset + v.len].copy_from_slice(&b.bytes);
                alloc.set_defined_range(v.offset, v.len, &b.defined);
            }
        }
        let report = result.map_err(|e| self.error(e, launch))?;
        crate::hal::debug::emit(report.printed);
        match report.assert_failed {
            None => Ok(()),
            Some(f) => Err(LaunchError::AssertFailed {
                kernel: kernel(),
                line: f.line,
                group: f.group,
                item: f.item,
                message: f.message,
            }),
        }
    }
}
