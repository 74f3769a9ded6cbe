//! What the runtime and the backends both speak (named after wgpu-hal): the [`Backend`]s, the
//! seam traits a backend implements ([`seam`]), a launch's geometry and its refusals
//! ([`launch`]), the device facts ([`facts`]) and the kernel manifests ([`manifest`]).
//!
//! Nothing here touches a driver; `backend/` implements these traits and `runtime/` calls them.

pub mod backend;
pub mod checked;
pub mod defer;
pub mod facts;
pub mod launch;
pub mod manifest;
pub mod profile;
pub mod seam;

pub use backend::Backend;
pub use checked::ProgramOptions;
pub use seam::{
    codes, kernel_function, poison_requested, BufferBinding, DeviceArg, DeviceError, DeviceImpl,
    DeviceMemory, EventImpl, Init, KernelImpl, Mode, Prebuilt, ProgramImpl, ReadTicket, StreamImpl,
    TimerTier,
};
