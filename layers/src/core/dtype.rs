//! Element types a benchmark can run in, how they are stored, and how
//! host data is converted to them.

use anyhow::{bail, Result};
use half::{bf16, f16};
use std::fmt;

/// The precision of a run. `Tf32` is a math mode rather than a storage
/// type: fp32 data, multiplied on tensor cores with 10-bit mantissas.
/// `F16` and `Bf16` store half-precision data and accumulate in fp32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    Tf32,
    F16,
    Bf16,
}

/// What the elements in memory are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    F32,
    F16,
    Bf16,
}

impl Storage {
    /// The suffix of its kernels (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
            Storage::Bf16 => "bf16",
        }
    }
}

impl DType {
    pub const ALL: [DType; 4] = [DType::F32, DType::Tf32, DType::F16, DType::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Tf32 => "tf32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    pub fn parse(s: &str) -> Result<DType> {
        match s {
            "f32" | "fp32" => Ok(DType::F32),
            "tf32" => Ok(DType::Tf32),
            "f16" | "fp16" | "half" => Ok(DType::F16),
            "bf16" => Ok(DType::Bf16),
            other => bail!("unknown dtype '{other}' (expected f32, tf32, f16 or bf16)"),
        }
    }

    pub fn storage(self) -> Storage {
        match self {
            DType::F32 | DType::Tf32 => Storage::F32,
            DType::F16 => Storage::F16,
            DType::Bf16 => Storage::Bf16,
        }
    }

    pub fn size_bytes(self) -> usize {
        match self.storage() {
            Storage::F32 => 4,
            Storage::F16 | Storage::Bf16 => 2,
        }
    }

    /// How the arithmetic is done, for the output's metadata.
    pub fn math(self) -> &'static str {
        match self {
            DType::F32 => "fp32 FMA (no tensor cores)",
            DType::Tf32 => "fp32 data, tf32 tensor cores, fp32 accumulate",
            DType::F16 => "f16 storage, fp32 accumulate",
            DType::Bf16 => "bf16 storage, fp32 accumulate",
        }
    }

    /// The `--check` threshold on the relative L2 error for this dtype.
    /// f32 keeps the CPU rule, which widens with the reduction length `n`
    /// (see `cnnbench_kernels::conv::f32_tolerance`); the reduced
    /// precisions have fixed thresholds well above their rounding error
    /// (tf32: 2^-11 per product; f16 2^-11 and bf16 2^-8 per stored value).
    pub fn tolerance(self, reduction_len: usize) -> f64 {
        match self {
            DType::F32 => cnnbench_kernels::conv::f32_tolerance_for_len(reduction_len),
            DType::Tf32 => 1e-3,
            DType::F16 | DType::Bf16 => 1e-2,
        }
    }

    /// Rounds host values to what this dtype can store, in place, so that
    /// the reference sees exactly the inputs the device computes on.
    pub fn round_in_place(self, x: &mut [f32]) {
        match self.storage() {
            Storage::F32 => {}
            Storage::F16 => x.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32()),
            Storage::Bf16 => x.iter_mut().for_each(|v| *v = bf16::from_f32(*v).to_f32()),
        }
    }

    /// Host f32 values as the bytes this dtype stores (little-endian).
    pub fn encode(self, x: &[f32]) -> Vec<u8> {
        match self.storage() {
            Storage::F32 => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Storage::F16 => x
                .iter()
                .flat_map(|v| f16::from_f32(*v).to_le_bytes())
                .collect(),
            Storage::Bf16 => x
                .iter()
                .flat_map(|v| bf16::from_f32(*v).to_le_bytes())
                .collect(),
        }
    }

    /// Bytes in this dtype's storage back to f32.
    pub fn decode(self, bytes: &[u8]) -> Vec<f32> {
        match self.storage() {
            Storage::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Storage::F16 => bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Storage::Bf16 => bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A comma list of dtypes, e.g. `f32,f16`.
pub fn parse_list(list: &str) -> Result<Vec<DType>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        let d = DType::parse(item)?;
        if out.contains(&d) {
            bail!("dtype '{d}' given twice in '{list}'");
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()).unwrap(), d);
        }
        let e = DType::parse("f8").unwrap_err().to_string();
        assert_eq!(e, "unknown dtype 'f8' (expected f32, tf32, f16 or bf16)");
        assert_eq!(
            parse_list("f32,bf16").unwrap(),
            vec![DType::F32, DType::Bf16]
        );
        assert!(parse_list("f16,half").is_err());
    }

    #[test]
    fn encode_decode_round_trips_representable_values() {
        let x = [0.0, 1.0, -2.5, 0.125, 1024.0, -0.0078125];
        for d in DType::ALL {
            let bytes = d.encode(&x);
            assert_eq!(bytes.len(), x.len() * d.size_bytes(), "{d}");
            assert_eq!(d.decode(&bytes), x, "{d}");
        }
    }

    #[test]
    fn rounding_matches_the_storage() {
        // 1 + 2^-9 is exact in f16 (10-bit mantissa), not in bf16 (7-bit).
        let v = 1.0 + 2f32.powi(-9);
        let mut h = [v];
        DType::F16.round_in_place(&mut h);
        assert_eq!(h[0], v);
        let mut b = [v];
        DType::Bf16.round_in_place(&mut b);
        assert_eq!(b[0], 1.0);
        let mut t = [v];
        DType::Tf32.round_in_place(&mut t);
        assert_eq!(t[0], v, "tf32 data is stored as f32");
        // f16 overflows to infinity beyond 65504; bf16 keeps f32's range.
        assert!(DType::F16.decode(&DType::F16.encode(&[1e5]))[0].is_infinite());
        assert!(DType::Bf16.decode(&DType::Bf16.encode(&[1e5]))[0].is_finite());
    }

    #[test]
    fn thresholds_per_dtype() {
        assert_eq!(DType::F32.tolerance(9), 1e-5);
        assert_eq!(DType::Tf32.tolerance(9), 1e-3);
        assert_eq!(DType::F16.tolerance(1 << 20), 1e-2);
        assert_eq!(DType::Bf16.tolerance(9), 1e-2);
        assert!(DType::F32.tolerance(1 << 20) > 1e-5);
    }

    #[test]
    fn nan_poison_survives_every_storage() {
        // Device outputs are poisoned with all-ones bytes: NaN in every
        // storage type.
        for d in DType::ALL {
            let bytes = vec![0xFF; 2 * d.size_bytes()];
            assert!(d.decode(&bytes).iter().all(|v| v.is_nan()), "{d}");
        }
    }
}
