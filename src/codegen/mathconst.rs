//! Constants of the transcendental-function algorithms (`f64math`, and the `f32` paths of the
//! LLVM lowering `llvm/math.rs` and the Vulkan emitter `vulkan/math.rs`): one copy, so the
//! backends cannot drift apart.

/// `ln 2` in three parts: `LN2_A` has 32 significant bits (so `e·LN2_A` is exact for any
/// exponent), `LN2_A + LN2_B` is fdlibm's `ln2_hi + ln2_lo`, `LN2_C` the next 53 bits.
pub(crate) const LN2_A: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
pub(crate) const LN2_B: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
pub(crate) const LN2_C: f64 = f64::from_bits(0x3A8C_C01F_97B5_7A08);
/// `ln 2` and `1/ln 2` as double-doubles (106 bits).
pub(crate) const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEFA_39EF);
pub(crate) const LN2_LO: f64 = f64::from_bits(0x3C7A_BC9E_3B39_803F);
pub(crate) const INV_LN2_HI: f64 = f64::from_bits(0x3FF7_1547_652B_82FE);
pub(crate) const INV_LN2_LO: f64 = f64::from_bits(0x3C77_77D0_FFDA_0D24);
/// 2/3 as a double-double.
pub(crate) const TWO_THIRDS_HI: f64 = f64::from_bits(0x3FE5_5555_5555_5555);
pub(crate) const TWO_THIRDS_LO: f64 = f64::from_bits(0x3C85_5555_5555_5555);
/// π/2 in three doubles (159 bits); `PIO2_1` is `FRAC_PI_2`.
pub(crate) const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5444_2D18);
pub(crate) const PIO2_2: f64 = f64::from_bits(0x3C91_A626_3314_5C07);
pub(crate) const PIO2_3: f64 = f64::from_bits(0xB91F_1976_B7ED_8FBC);
/// Below this |x|, `sin`/`cos` reduce by Cody–Waite (k < 2^27, so the three-part π/2 leaves
/// an error below 2^-130); from it on, by Payne–Hanek.
pub(crate) const SIN_CW_LIMIT: f64 = 134_217_728.0;

/// 2/π in 24-bit pieces: `2/π = Σ TWO_OVER_PI[j] · 2^(-24(j+1))`, fdlibm's `ipio2` (computed
/// from Machin's formula in integer arithmetic; the unit test below checks the leading pieces
/// against `FRAC_2_PI`). Fifty pieces cover the largest finite argument (2^1024) with the
/// 120 fraction bits the reduction keeps.
pub(crate) const TWO_OVER_PI: [u32; 52] = [
    0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041, 0xFE5163,
    0xABDEBB, 0xC561B7, 0x246E3A, 0x424DD2, 0xE00649, 0x2EEA09, 0xD1921C, 0xFE1DEB, 0x1CB129,
    0xA73EE8, 0x8235F5, 0x2EBB44, 0x84E99C, 0x7026B4, 0x5F7E41, 0x3991D6, 0x398353, 0x39F49C,
    0x845F8B, 0xBDF928, 0x3B1FF8, 0x97FFDE, 0x05980F, 0xEF2F11, 0x8B5A0A, 0x6D1F6D, 0x367ECF,
    0x27CB09, 0xB74F46, 0x3F669E, 0x5FEA2D, 0x7527BA, 0xC7EBE5, 0xF17B3D, 0x0739F7, 0x8A5292,
    0xEA6BFB, 0x5FB11F, 0x8D5D08, 0x560330, 0x46FC7B, 0x6BABF0, 0xCFBC20,
];
/// Zero pieces before `TWO_OVER_PI[0]` in a device's table, so that the reduction's window
/// (which starts up to three pieces before the first one it needs) never indexes below 0.
pub(crate) const TABLE_PAD: usize = 3;

/// `n!` as an `f64` (exact for the polynomial degrees used).
pub(crate) fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

/// `expm1 r = r + r²·P(r)`: P's Taylor coefficients `1/n!`, n = 2..=13 (low degree first).
pub(crate) fn expm1_taylor() -> Vec<f64> {
    (2..=13).map(|n| 1.0 / factorial(n)).collect()
}

/// `sin r = r + r·z·Ps(z)` with `z = r²`: `(-1)^j/(2j+1)!`, j = 1..=9.
pub(crate) fn sin_taylor() -> Vec<f64> {
    (1..=9)
        .map(|j| (-1f64).powi(j) / factorial(2 * j as u32 + 1))
        .collect()
}

/// `cos r = 1 - z/2 + z²·Pc(z)` with `z = r²`: `(-1)^j/(2j)!`, j = 2..=9.
pub(crate) fn cos_taylor() -> Vec<f64> {
    (2..=9)
        .map(|j| (-1f64).powi(j) / factorial(2 * j as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's leading pieces are 2/π's first 72 bits, and the constants split as stated.
    #[test]
    fn constants() {
        let v = TWO_OVER_PI[..3]
            .iter()
            .enumerate()
            .map(|(j, &p)| f64::from(p) * 2f64.powi(-24 * (j as i32 + 1)))
            .sum::<f64>();
        assert_eq!(v, std::f64::consts::FRAC_2_PI);
        assert!(TWO_OVER_PI.iter().all(|&p| p < 1 << 24));
        assert_eq!(PIO2_1, std::f64::consts::FRAC_PI_2);
        assert_eq!(LN2_HI, std::f64::consts::LN_2);
        assert_eq!(LN2_A + LN2_B, std::f64::consts::LN_2);
        assert_eq!(
            LN2_A.to_bits() & 0x1f_ffff,
            0,
            "LN2_A has 32 significant bits"
        );
        assert_eq!(INV_LN2_HI, std::f64::consts::LOG2_E);
        assert_eq!(TWO_THIRDS_HI, 2.0 / 3.0);
    }
}
