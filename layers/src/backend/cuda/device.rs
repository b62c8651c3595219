//! What the GPU is, and its peak FLOP/s per precision.

use crate::core::DType;
use serde::{Deserialize, Serialize};

/// The device and the libraries as loaded, for results' metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Each NVIDIA library as loaded: its file and its own version
    /// (absent from records written before cnnbench named them).
    #[serde(default)]
    pub libraries: Vec<super::loader::LibraryInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub dtype: String,
    pub tflops: f64,
    /// `device properties (...)` or `measured cuBLAS GEMM (...)`.
    pub source: String,
}

impl DeviceInfo {
    /// `9.19.0 (/path/libcudnn.so.9)`: cuDNN's version and the file that
    /// loaded, where the record names it.
    pub fn cudnn_label(&self) -> String {
        match self
            .libraries
            .iter()
            .find(|l| l.name == "cuDNN")
            .and_then(|l| l.file.as_ref())
        {
            Some(file) => format!("{} ({file})", self.cudnn),
            None => self.cudnn.clone(),
        }
    }

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

/// NVIDIA's published dense peaks (TFLOP/s: fp32, tf32, f16, bf16; fp32
/// accumulation) for the parts where they differ from, or are better
/// documented than, SMs x maximum clock: the H100 SXM5's tensor-core
/// figures are quoted at 1830 MHz, its maximum boost clock is 1980 MHz, so
/// the property peak is about 8% high there. A part matches by every name
/// fragment, no excluded fragment, and its full SM count (a MIG slice has
/// fewer SMs and falls back to the properties).
struct Datasheet {
    name_has: &'static [&'static str],
    name_lacks: &'static [&'static str],
    sms: usize,
    tflops: [f64; 4],
    cite: &'static str,
}

const DATASHEETS: &[Datasheet] = &[
    Datasheet {
        name_has: &["H100"],
        name_lacks: &["PCIe", "NVL"],
        sms: 132,
        tflops: [66.9, 494.7, 989.4, 989.4],
        cite: "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5",
    },
    Datasheet {
        name_has: &["H100", "PCIe"],
        name_lacks: &[],
        sms: 114,
        tflops: [51.2, 378.0, 756.0, 756.0],
        cite: "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 PCIe",
    },
    Datasheet {
        name_has: &["H200"],
        name_lacks: &["NVL", "GH200"],
        sms: 132,
        tflops: [67.0, 494.5, 989.5, 989.5],
        cite: "NVIDIA H200 datasheet, H200 SXM (dense: half the sparse figures)",
    },
    Datasheet {
        name_has: &["A100"],
        name_lacks: &[],
        sms: 108,
        tflops: [19.5, 156.0, 312.0, 312.0],
        cite: "NVIDIA A100 datasheet",
    },
];

/// The published dense peak of `d` on the part called `name` with `sms`
/// SMs, when [`DATASHEETS`] knows it.
fn datasheet_peak(name: &str, sms: usize, d: DType) -> Option<Peak> {
    let sheet = DATASHEETS.iter().find(|s| {
        s.sms == sms
            && s.name_has.iter().all(|f| name.contains(f))
            && !s.name_lacks.iter().any(|f| name.contains(f))
    })?;
    let i = DType::ALL.iter().position(|&x| x == d)?;
    Some(Peak {
        dtype: d.name().into(),
        tflops: sheet.tflops[i],
        source: format!("datasheet: {}", sheet.cite),
    })
}

/// Peak TFLOP/s from the SM count and maximum clock, when the rate table
/// knows the architecture (for parts without a datasheet entry; at the
/// maximum boost clock, which is an upper bound).
pub fn property_peak(cc: (i32, i32), sms: usize, clock_mhz: u32, d: DType) -> Option<Peak> {
    let per = flops_per_sm_clock(cc, d)?;
    let tflops = per * sms as f64 * clock_mhz as f64 * 1e6 / 1e12;
    Some(Peak {
        dtype: d.name().into(),
        tflops,
        source: format!(
            "device properties: {sms} SMs x {clock_mhz} MHz max clock x {per} FLOP/clock (sm_{}{})",
            cc.0, cc.1
        ),
    })
}

/// The peak `% peak` divides by: the datasheet's where [`DATASHEETS`] knows
/// the part, else [`property_peak`]'s.
pub fn nominal_peak(
    name: &str,
    cc: (i32, i32),
    sms: usize,
    clock_mhz: u32,
    d: DType,
) -> Option<Peak> {
    if !supports_dtype(&format!("{}.{}", cc.0, cc.1), d) {
        return None;
    }
    datasheet_peak(name, sms, d).or_else(|| property_peak(cc, sms, clock_mhz, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_peak_is_sms_times_max_clock() {
        // 132 SMs at 1980 MHz: 66.9 TFLOP/s fp32, 1070 f16 (NVIDIA's 989
        // is quoted at 1830 MHz).
        let f32p = property_peak((9, 0), 132, 1980, DType::F32).unwrap();
        assert!((f32p.tflops - 66.9).abs() < 0.1, "{}", f32p.tflops);
        let f16p = property_peak((9, 0), 132, 1830, DType::F16).unwrap();
        assert!((f16p.tflops - 989.4).abs() < 1.0, "{}", f16p.tflops);
        assert!(f16p.source.contains("132 SMs"));
    }

    #[test]
    fn h100_sxm_takes_the_datasheet_not_the_boost_clock() {
        let name = "NVIDIA H100 80GB HBM3";
        let f16 = nominal_peak(name, (9, 0), 132, 1980, DType::F16).unwrap();
        assert_eq!(f16.tflops, 989.4);
        assert!(f16.source.starts_with("datasheet: "), "{}", f16.source);
        // At the boost clock it would be 1070, 8% high.
        let boost = property_peak((9, 0), 132, 1980, DType::F16).unwrap();
        assert!((boost.tflops / f16.tflops - 1.0 - 0.082).abs() < 0.01);
        let pcie = nominal_peak("NVIDIA H100 PCIe", (9, 0), 114, 1755, DType::Bf16).unwrap();
        assert_eq!(pcie.tflops, 756.0);
        let h200 = nominal_peak("NVIDIA H200", (9, 0), 132, 1980, DType::Tf32).unwrap();
        assert_eq!(h200.tflops, 494.5);
        // A MIG slice, an NVL part or an unknown one: the properties.
        for (name, sms) in [
            ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60),
            ("NVIDIA H100 NVL", 132),
            ("NVIDIA GH200 480GB", 132),
            ("NVIDIA L40S", 142),
        ] {
            let p = nominal_peak(name, (9, 0), sms, 1980, DType::F16).unwrap();
            assert!(
                p.source.starts_with("device properties"),
                "{name}: {}",
                p.source
            );
        }
        // No tf32 or bf16 before Ampere, whatever the table says.
        assert!(nominal_peak("Tesla V100-SXM2-16GB", (7, 0), 80, 1530, DType::Bf16).is_none());
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
