//! Loading a bundle ([`crate::bundle`]) on a device: [`Device::load_bundle`] registers the
//! bundle's code and manifests for this device's backend, so that a kernel whose code the
//! bundle holds for this device (CUDA: PTX for its architecture; HIP: the code object for its
//! processor; Vulkan: SPIR-V for its capability key) is not lowered again, and every other
//! kernel is lowered lazily from the bundle's IR at its first use (a host unknown at build
//! time). [`KernelManifest::of`] answers for the active backend after a load.

use crate::bundle::{codes, Bundle, BundleError};
use crate::hal::manifest::KernelManifest;
use crate::hal::{Backend, Prebuilt};
use crate::runtime::device::{Device, Program};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Manifests registered by bundle loads, by (backend, kernel); the latest load wins.
static REGISTERED: Mutex<Option<HashMap<(Backend, String), KernelManifest>>> = Mutex::new(None);

impl Device {
    /// Opens the bundle at `path` ([`Bundle::open`]: memory-mapped, every hash checked) and
    /// loads its module on this device with the bundle's code for this device (module docs).
    /// A truncated, foreign or tampered bundle, or code the device refuses, is a
    /// [`BundleError`] with its code.
    pub fn load_bundle(&self, path: impl AsRef<Path>) -> Result<Program, BundleError> {
        let bundle = Bundle::open(path.as_ref())?;
        self.load_from_bundle(&bundle)
    }

    /// [`Device::load_bundle`] of a bundle already open.
    pub fn load_from_bundle(&self, bundle: &Bundle) -> Result<Program, BundleError> {
        let backend = self.backend();
        let target = self.implementation().code_target();
        let mut prebuilt = Vec::new();
        let mut manifests = Vec::new();
        for e in bundle.entries().filter(|e| e.backend == backend) {
            match (&target, e.code) {
                // Code for this very device: taken instead of a lowering.
                (Some(t), Some(code)) if t.as_str() == e.target => {
                    prebuilt.push(Prebuilt {
                        kernel: e.kernel.to_string(),
                        code: code.to_vec(),
                        meta: e.meta.map(str::to_string),
                        manifest: e.manifest.clone(),
                    });
                    manifests.push(e.manifest.clone());
                }
                // The IR is the code (the CPU): made here, from the bundle's module.
                (None, None) => manifests.push(e.manifest.clone()),
                // Code for another device of this backend: lowered here instead.
                _ => {}
            }
        }
        let program = self
            .load_prebuilt(Arc::new(bundle.module().clone()), prebuilt)
            .map_err(|e| BundleError::new(codes::DEVICE, bundle.path(), e.to_string()))?;
        let mut reg = REGISTERED.lock();
        let reg = reg.get_or_insert_with(HashMap::new);
        for m in manifests {
            reg.insert((backend, m.kernel.clone()), m);
        }
        Ok(program)
    }
}

impl KernelManifest {
    /// The manifest a bundle load registered for kernel `name` on the active backend
    /// ([`Device::current`], itself a device touch), or `None` where no loaded bundle has
    /// device code for it there (contract §4).
    pub fn of(name: &str) -> Option<KernelManifest> {
        let backend = Device::current().ok()?.backend();
        KernelManifest::of_backend(backend, name)
    }

    /// [`KernelManifest::of`] for `backend` rather than the active one.
    pub fn of_backend(backend: Backend, name: &str) -> Option<KernelManifest> {
        REGISTERED
            .lock()
            .as_ref()?
            .get(&(backend, name.to_string()))
            .cloned()
    }
}
