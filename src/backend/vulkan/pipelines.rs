//! The driver's pipeline cache kept across processes (issue 21, persistent caches).
//!
//! Every pipeline is made through one `VkPipelineCache` (`Inner::pipeline_cache`). Its data
//! (`vkGetPipelineCacheData`) is written to the device's code cache (`backend::cache`, the
//! same folder, key and envelope as the SPIR-V) when the device is dropped and when the
//! cache is replaced after `PIPELINE_CACHE_ENTRIES` pipelines, and given back as the initial
//! data of the next process's cache, so that the driver's compile of a kernel seen before is
//! a lookup. The data is the driver's own format: the driver checks its header (vendor,
//! device, `pipelineCacheUUID`) and starts empty on a mismatch, the envelope's hash rejects a
//! damaged file, and a file the driver still refuses is dropped; it only ever saves time.

use crate::backend::cache::{CodeCache, DeviceKey};
use ash::vk;

/// The cache entry's name and extension under the device's key.
const NAME: (&str, &str) = ("pipelines", "vkpc");

/// A pipeline cache for `device`, seeded with the data a previous process stored.
pub(super) fn create(
    device: &ash::Device,
    store: &CodeCache,
    key: &DeviceKey,
) -> Result<vk::PipelineCache, vk::Result> {
    if let Some((data, _)) = store.get(key, NAME.0, NAME.1) {
        let info = vk::PipelineCacheCreateInfo::default().initial_data(&data);
        // SAFETY: a valid create info on the live device (the data outlives the call; the
        // driver copies what it keeps); destroyed with the device.
        if let Ok(cache) = unsafe { device.create_pipeline_cache(&info, None) } {
            return Ok(cache);
        }
    }
    // SAFETY: a default (empty) create info on the live device; destroyed with the device.
    unsafe { device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None) }
}

/// Stores `cache`'s data for the next process (best effort: a driver that gives none, or
/// a folder that cannot be written, stores nothing).
pub(super) fn save(
    device: &ash::Device,
    cache: vk::PipelineCache,
    store: &CodeCache,
    key: &DeviceKey,
) {
    if store.dir().is_none() {
        return;
    }
    // SAFETY: a live pipeline cache of this device, used under the caller's lock.
    if let Ok(data) = unsafe { device.get_pipeline_cache_data(cache) } {
        if !data.is_empty() {
            store.put(key, NAME.0, NAME.1, data);
        }
    }
}
