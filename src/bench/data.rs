//! The device benchmarks' shared pieces (`xpu bench cuda`, `xpu bench vulkan`): the
//! streaming kernels both time, and their inputs: random `f32`s,
//! never zeros or uninitialised memory, which can run faster than real data (a zero skips
//! nothing on most paths, but on Vulkan/NVIDIA a zero result takes the exact subnormal path
//! of f32 arithmetic, and poisoned memory is NaN).

/// saxpy, STREAM triad and a plain copy, one element per work-item (bytes moved per element:
/// 12, 12, 8).
pub const STREAMING_KERNELS: &str = r#"
kernel saxpy(y: buf<f32, rw>, x: buf<f32>, a: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = a * x[i] + y[i];
    }
}

kernel triad(a: buf<f32, rw>, b: buf<f32>, c: buf<f32>, s: f32, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        a[i] = b[i] + s * c[i];
    }
}

kernel copy(y: buf<f32, rw>, x: buf<f32>, n: u32) {
    let i: u32 = global_id.x;
    if i < n {
        y[i] = x[i];
    }
}
"#;

/// `elems` little-endian `f32`s, each ±[0.5, 1.5) with a random sign, from `seed`.
pub fn random_f32_bytes(elems: usize, seed: u64) -> Vec<u8> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(elems * 4);
    for _ in 0..elems {
        // xorshift64*: plenty for benchmark inputs.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let mag = 0.5 + (r >> 40) as f32 / (1u64 << 24) as f32;
        let v = if r & 1 == 0 { mag } else { -mag };
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_are_in_range_and_signed() {
        let b = super::random_f32_bytes(1000, 7);
        let v: Vec<f32> = b
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(v.iter().all(|x| (0.5..1.5).contains(&x.abs())));
        assert!(v.iter().any(|&x| x < 0.0) && v.iter().any(|&x| x > 0.0));
    }
}
