//! `xpu devices [--json]`: every device present with its whole geometry surface (contract
//! §5.2), its capabilities, its device key and its calibration where one is stored; and
//! `xpu calibrate [--backend B]`, which measures a calibration and stores it (§5.3, §6.3).

use super::json::Json;
use crate::hal::facts::{DeviceFacts, Feature};
use crate::hal::Backend;
use crate::runtime::device::Device;
use crate::tune::calibration::{calibration_key, DeviceCalibration};
use std::process::ExitCode;

/// `xpu devices` arguments.
#[derive(clap::Args)]
pub struct DevicesArgs {
    /// Print one JSON array of devices.
    #[arg(long)]
    json: bool,
}

/// `xpu calibrate` arguments.
#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// The backend to calibrate (default: the one this process selects).
    #[arg(long)]
    backend: Option<String>,
    /// Print the record as JSON.
    #[arg(long)]
    json: bool,
}

/// The device of `name`, or the selected one.
pub(crate) fn device_for(name: Option<&str>) -> Result<Device, String> {
    match name {
        Some(n) => {
            let b = Backend::from_name(n).ok_or_else(|| {
                crate::hal::DeviceError::UnknownBackend {
                    name: n.to_string(),
                }
                .to_string()
            })?;
            Device::open(b).map_err(|e| e.to_string())
        }
        None => Device::current().map_err(|e| e.to_string()),
    }
}

/// The geometry surface as JSON, every absent fact `null`.
pub fn facts_json(f: &DeviceFacts) -> Json {
    let u = |v: Option<u32>| Json::opt(v, Json::num);
    let u64j = |v: Option<u64>| Json::opt(v, |x| Json::Num(x as f64));
    let s = |v: &Option<String>| Json::opt(v.clone(), Json::Str);
    let dims = |v: Option<[u32; 3]>| {
        Json::opt(v, |d| Json::Arr(d.iter().map(|&x| Json::num(x)).collect()))
    };
    Json::obj(vec![
        ("backend", Json::opt(f.backend, |b| Json::str(b.name()))),
        ("name", s(&f.name)),
        ("vendor", s(&f.vendor)),
        ("driver_version", s(&f.driver_version)),
        ("uuid", s(&f.uuid)),
        ("device_key", Json::str(f.device_key())),
        ("multiprocessors", u(f.multiprocessors)),
        ("simds_per_multiprocessor", u(f.simds_per_multiprocessor)),
        ("wave_width", u(f.wave_width)),
        (
            "supported_wave_widths",
            Json::opt(f.supported_wave_widths.clone(), |v| {
                Json::Arr(v.into_iter().map(Json::num).collect())
            }),
        ),
        (
            "registers_per_multiprocessor",
            u(f.registers_per_multiprocessor),
        ),
        ("registers_per_block", u(f.registers_per_block)),
        ("max_threads_per_block", u(f.max_threads_per_block)),
        (
            "max_threads_per_multiprocessor",
            u(f.max_threads_per_multiprocessor),
        ),
        (
            "max_blocks_per_multiprocessor",
            u(f.max_blocks_per_multiprocessor),
        ),
        ("max_block_dims", dims(f.max_block_dims)),
        ("max_grid_dims", dims(f.max_grid_dims)),
        ("shared_bytes_per_block", u64j(f.shared_bytes_per_block)),
        (
            "shared_bytes_per_block_optin",
            u64j(f.shared_bytes_per_block_optin),
        ),
        (
            "shared_bytes_per_multiprocessor",
            u64j(f.shared_bytes_per_multiprocessor),
        ),
        ("global_memory_bytes", u64j(f.global_memory_bytes)),
        ("l2_cache_bytes", u64j(f.l2_cache_bytes)),
        ("clock_khz", u(f.clock_khz)),
        ("memory_clock_khz", u(f.memory_clock_khz)),
        ("memory_bus_bits", u(f.memory_bus_bits)),
        ("integrated", Json::opt(f.integrated, Json::Bool)),
        ("buffer_offset_alignment", u64j(f.buffer_offset_alignment)),
        ("constant_bytes", u64j(f.constant_bytes)),
        (
            "constant_offset_alignment",
            u64j(f.constant_offset_alignment),
        ),
        (
            "supports",
            Json::Obj(
                Feature::ALL
                    .iter()
                    .map(|&x| {
                        (
                            x.name().to_string(),
                            Json::opt(f.features.get(x), |s| Json::str(s.name())),
                        )
                    })
                    .collect(),
            ),
        ),
    ])
}

/// A calibration record as JSON.
pub fn calibration_json(c: &DeviceCalibration) -> Json {
    let mut pairs = vec![
        ("key".to_string(), Json::str(c.key.clone())),
        ("tier".to_string(), Json::str(c.tier.clone())),
    ];
    for (name, v) in c.rows() {
        pairs.push((name.to_string(), Json::opt(v, Json::Num)));
    }
    Json::Obj(pairs)
}

pub fn devices(args: &DevicesArgs) -> ExitCode {
    let backends = Device::available();
    let mut out = Vec::new();
    for b in backends {
        let Ok(device) = Device::open(b) else {
            continue;
        };
        let (calibration, reports) = DeviceCalibration::current(&device);
        for r in &reports {
            eprintln!("{r}");
        }
        if args.json {
            let mut j = facts_json(device.facts());
            if let Json::Obj(pairs) = &mut j {
                pairs.push((
                    "calibration".into(),
                    Json::opt(calibration.as_ref(), calibration_json),
                ));
            }
            out.push(j);
        } else {
            println!("== {} ({})", b, device.facts().device_key());
            println!("{}", device.facts());
            match &calibration {
                Some(c) => {
                    println!("{:32} {}", "calibration", c.key);
                    for (name, v) in c.rows() {
                        println!(
                            "  {:30} {}",
                            name,
                            v.map_or("absent".to_string(), |v| format!("{v:.4e}"))
                        );
                    }
                }
                None => println!(
                    "{:32} none stored (xpu calibrate --backend {b})",
                    "calibration"
                ),
            }
            println!();
        }
    }
    if args.json {
        println!("{}", Json::Arr(out).pretty());
    }
    ExitCode::SUCCESS
}

pub fn calibrate(args: &CalibrateArgs) -> ExitCode {
    let device = match device_for(args.backend.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("xpu calibrate: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "calibrating {} ({})",
        device.backend(),
        calibration_key(&device)
    );
    let (c, reports) = DeviceCalibration::measure(&device);
    for r in &reports {
        eprintln!("{r}");
    }
    if args.json {
        println!("{}", calibration_json(&c).pretty());
    } else {
        for (name, v) in c.rows() {
            println!(
                "{:24} {}",
                name,
                v.map_or("absent".to_string(), |v| format!("{v:.4e}"))
            );
        }
    }
    match c.store(&device) {
        Ok(path) => {
            eprintln!("stored {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "xpu calibrate: error[{}]: {e}",
                crate::tune::codes::CALIBRATION_FAILED
            );
            ExitCode::from(2)
        }
    }
}
