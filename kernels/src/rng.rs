//! A tiny seeded generator for benchmark inputs: reproducible across
//! platforms, never zeros, and fast enough to fill large tensors.

/// SplitMix64: statistically fine for test data, trivially seedable.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Fill with values uniform in [-scale, scale), seeded.
pub fn fill_uniform(buf: &mut [f32], seed: u64, scale: f32) {
    let mut rng = SplitMix64::new(seed);
    for x in buf {
        *x = rng.next_f32() * scale;
    }
}
