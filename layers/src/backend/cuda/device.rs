//! What the GPU is, and its peak FLOP/s per precision.

use crate::core::DType;
use serde::{Deserialize, Serialize};

/// The device and the libraries as loaded, for results' metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability, e.g. `9.0`.
    pub compute_capability: String,
    pub sms: usize,
    pub memory_bytes: u64,
    /// Maximum SM clock.
    pub clock_mhz: u32,
    pub memory_clock_mhz: u32,
    pub memory_bus_bits: u32,
    pub l2_bytes: usize,
    /// CUDA version the driver supports, e.g. `13.0`.
    pub driver_cuda: String,
    /// The CUDA runtime cuDNN was built against.
    pub cudnn_cudart: String,
    pub cudnn: String,
    pub cublas: String,
    /// Peak TFLOP/s per dtype, and where each number comes from.
    pub peaks: Vec<Peak>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub dtype: String,
    pub tflops: f64,
    /// `device properties (...)` or `measured cuBLAS GEMM (...)`.
    pub source: String,
}

impl DeviceInfo {
    pub fn peak(&self, d: DType) -> Option<&Peak> {
        self.peaks.iter().find(|p| p.dtype == d.name())
    }

    /// Peak memory bandwidth: DDR (2 transfers per clock) over the bus.
    pub fn memory_gbps(&self) -> f64 {
        2.0 * self.memory_clock_mhz as f64 * 1e6 * self.memory_bus_bits as f64 / 8.0 / 1e9
    }
}

/// Whether a GPU of compute capability `cc` (e.g. `9.0`) can run `d`:
/// tf32 and bf16 need the tensor cores of 8.0 or later.
/// `9.0` as `(9, 0)` (an unreadable part as 0).
pub fn compute_capability(cc: &str) -> (i32, i32) {
    let mut it = cc.split('.').map(|v| v.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

pub fn supports_dtype(cc: &str, d: DType) -> bool {
    let major: u32 = cc
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    !matches!(d, DType::Tf32 | DType::Bf16) || major >= 8
}

/// Dense FLOPs per SM per clock, for the architectures whose rates are
/// published (data-centre parts; fp32 accumulation for the half types).
/// `None` where the precision has no tensor-core path or the architecture
/// is unknown: the peak is then measured with cuBLAS.
pub fn flops_per_sm_clock(cc: (i32, i32), d: DType) -> Option<f64> {
    let (fp32, tf32, half) = match cc {
        (7, 0) | (7, 2) | (7, 5) => (128.0, None, Some(1024.0)),
        (8, 0) => (128.0, Some(1024.0), Some(2048.0)),
        (8, 6) | (8, 7) | (8, 9) => (256.0, Some(512.0), Some(1024.0)),
        (9, 0) => (256.0, Some(2048.0), Some(4096.0)),
        (10, 0) => (256.0, Some(4096.0), Some(8192.0)),
        _ => return None,
    };
    match d {
        DType::F32 => Some(fp32),
        DType::Tf32 => tf32,
        DType::F16 => half,
        // bf16 tensor cores arrived with Ampere.
        DType::Bf16 if cc.0 >= 8 => half,
        DType::Bf16 => None,
    }
}

/// Peak TFLOP/s from the SM count and maximum clock, when the rate table
/// knows the architecture.
pub fn property_peak(cc: (i32, i32), sms: usize, clock_mhz: u32, d: DType) -> Option<Peak> {
    let per = flops_per_sm_clock(cc, d)?;
    let tflops = per * sms as f64 * clock_mhz as f64 * 1e6 / 1e12;
    Some(Peak {
        dtype: d.name().into(),
        tflops,
        source: format!(
            "device properties: {sms} SMs x {clock_mhz} MHz x {per} FLOP/clock (sm_{}{})",
            cc.0, cc.1
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h100_sxm_peaks_at_its_max_clock() {
        // 132 SMs at 1980 MHz: 66.9 TFLOP/s fp32, 1070 f16 (NVIDIA's 989
        // is quoted at 1830 MHz).
        let f32p = property_peak((9, 0), 132, 1980, DType::F32).unwrap();
        assert!((f32p.tflops - 66.9).abs() < 0.1, "{}", f32p.tflops);
        let f16p = property_peak((9, 0), 132, 1830, DType::F16).unwrap();
        assert!((f16p.tflops - 989.4).abs() < 1.0, "{}", f16p.tflops);
        assert!(f16p.source.contains("132 SMs"));
    }

    #[test]
    fn a100_matches_the_datasheet() {
        let p = |d| property_peak((8, 0), 108, 1410, d).unwrap().tflops;
        assert!((p(DType::F32) - 19.5).abs() < 0.1);
        assert!((p(DType::Tf32) - 156.0).abs() < 0.5);
        assert!((p(DType::Bf16) - 312.0).abs() < 1.0);
    }

    #[test]
    fn unknown_or_missing_precisions_are_measured_instead() {
        assert!(property_peak((12, 1), 100, 2000, DType::F32).is_none());
        assert!(property_peak((7, 0), 80, 1530, DType::Tf32).is_none());
        assert!(property_peak((7, 5), 40, 1590, DType::Bf16).is_none());
    }
}
