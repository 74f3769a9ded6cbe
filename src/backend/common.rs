//! What every backend's host code needs alike: the range check of a copy or view, the
//! downcast of a seam object to the backend's own type, and a read that has already completed.

use crate::hal::{DeviceError, ReadTicket};
use std::any::Any;

/// `len` bytes at `offset` must lie inside an allocation of `size` bytes (`what` names the
/// operation in the error).
pub fn check_range(what: &str, offset: usize, len: usize, size: usize) -> Result<(), DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::OutOfRange {
            what: format!("{what} of {len} bytes at byte {offset} of a {size}-byte allocation"),
        }),
    }
}

/// `object` as this backend's `T`, or the error that it belongs to another device (`what`
/// names it: "the stream", "the buffer").
pub fn downcast<'a, T: Any>(object: &'a dyn Any, what: &str) -> Result<&'a T, DeviceError> {
    object
        .downcast_ref::<T>()
        .ok_or_else(|| DeviceError::ForeignObject { what: what.into() })
}

/// A device→host read whose bytes are already on the host.
pub struct Ready(pub Vec<u8>);

impl ReadTicket for Ready {
    fn wait(self: Box<Self>) -> Result<Vec<u8>, DeviceError> {
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_at_the_edges() {
        assert!(check_range("a copy", 0, 8, 8).is_ok());
        assert!(check_range("a copy", 8, 0, 8).is_ok());
        assert!(check_range("a copy", 1, 8, 8).is_err());
        let e = check_range("a copy", usize::MAX, 2, 8).unwrap_err();
        assert_eq!(e.code(), "XPU-D006");
        assert!(e.to_string().contains("a copy of 2 bytes at byte"), "{e}");
    }
}
