//! The per-layer roofline: what a `--per-layer` run measured once before
//! its timed steps (the machine's memory bandwidth and compute peak,
//! [`RooflineBasis`]), and where each layer's passes sit against them
//! ([`LayerRoofline`]): bytes moved (the least traffic the op must move,
//! caches ignored: `cnnbench_layers::net::traffic`), GB/s, FLOPs, and
//! whether the pass is memory- or compute-bound with the share of that roof
//! it reached.

use serde::{Deserialize, Serialize};

/// A memory bandwidth as `info` reports it: measured, and where the device
/// tells it, the nominal rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// GB/s (1e9 bytes per second), measured.
    pub measured_gbs: f64,
    /// How it was measured.
    pub method: String,
    /// The GPU's nominal rate from its attributes (memory clock x bus
    /// width x 2, double data rate); absent on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_gbs: Option<f64>,
}

/// What each layer of a per-layer run is compared with, measured (or read)
/// once before the timed steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineBasis {
    /// The bandwidth `% BW` divides by, GB/s: the measured one.
    pub bandwidth_gbs: f64,
    /// How it was measured.
    pub bandwidth_from: String,
    /// The GPU's nominal bandwidth, for reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_nominal_gbs: Option<f64>,
    /// The compute peak `% peak` divides by, GFLOP/s.
    pub peak_gflops: f64,
    /// Where the peak comes from.
    pub peak_from: String,
    /// How tables name the peak: `FMA` (the CPU's FP32 FMA loop) or the
    /// GPU's dtype (`f16`).
    pub peak_label: String,
    /// The bytes each counted element was priced at (the run's storage:
    /// 4 for f32 and tf32, 2 for f16 and bf16).
    pub element_bytes: usize,
}

impl RooflineBasis {
    /// The ridge point, in FLOPs per byte: a pass doing more FLOPs per
    /// byte moved than this is compute-bound.
    pub fn ridge(&self) -> f64 {
        self.peak_gflops / self.bandwidth_gbs
    }

    /// Places `pass` on the roofline: its bound and the percentage of that
    /// roof it reached, where it moved bytes in a measurable time.
    pub fn place(&self, pass: &mut PassRoofline) {
        let (Some(gbs), true) = (pass.gbs, pass.bytes > 0) else {
            return;
        };
        let intensity = pass.flops as f64 / pass.bytes as f64;
        if intensity >= self.ridge() {
            let gflops = pass.gflops.unwrap_or(0.0);
            pass.bound = Some(Bound::Compute);
            pass.percent = Some(100.0 * gflops / self.peak_gflops);
        } else {
            pass.bound = Some(Bound::Memory);
            pass.percent = Some(100.0 * gbs / self.bandwidth_gbs);
        }
    }
}

/// Which roof limits a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Memory,
    Compute,
}

/// One layer's passes on the roofline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerRoofline {
    pub forward: PassRoofline,
    pub backward: PassRoofline,
}

/// One pass of a layer at the run's batch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PassRoofline {
    /// The least bytes the pass must move: every tensor it touches read or
    /// written once (caches ignored), priced at the run's element size.
    pub bytes: u64,
    /// FLOPs (2 per multiply-accumulate; 0 where the op counts none).
    #[serde(default)]
    pub flops: u64,
    /// `bytes` over the median time, in GB/s; absent where the pass moved
    /// nothing of its own or took no measurable time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbs: Option<f64>,
    /// `flops` over the median time, in GFLOP/s, where there are FLOPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Memory-bound (FLOPs per byte under the ridge) or compute-bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// The percentage of the bandwidth (memory-bound) or of the peak
    /// (compute-bound) reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
}

impl PassRoofline {
    /// A pass that moved `bytes` and did `flops` in `ms` (its median).
    pub fn timed(bytes: u64, flops: u64, ms: f64) -> PassRoofline {
        let rate = |n: u64| (n > 0 && ms > 0.0 && ms.is_finite()).then(|| n as f64 / (ms * 1e6));
        PassRoofline {
            bytes,
            flops,
            gbs: rate(bytes),
            gflops: rate(flops),
            bound: None,
            percent: None,
        }
    }

    /// The table's roofline cell: `61% BW`, `44% FMA`, or `-`.
    pub fn cell(&self, peak_label: &str) -> String {
        match (self.bound, self.percent) {
            (Some(Bound::Memory), Some(p)) => format!("{p:.0}% BW"),
            (Some(Bound::Compute), Some(p)) => format!("{p:.0}% {peak_label}"),
            _ => "-".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis() -> RooflineBasis {
        // 100 GB/s and 1000 GFLOP/s: the ridge at 10 FLOPs per byte.
        RooflineBasis {
            bandwidth_gbs: 100.0,
            bandwidth_from: "test".into(),
            bandwidth_nominal_gbs: None,
            peak_gflops: 1000.0,
            peak_from: "test".into(),
            peak_label: "FMA".into(),
            element_bytes: 4,
        }
    }

    #[test]
    fn passes_fall_on_either_side_of_the_ridge() {
        let b = basis();
        assert_eq!(b.ridge(), 10.0);
        // A ReLU: 1 GB in 20 ms is 50 GB/s, half the bandwidth.
        let mut relu = PassRoofline::timed(1_000_000_000, 0, 20.0);
        b.place(&mut relu);
        assert_eq!(relu.gbs, Some(50.0));
        assert_eq!(
            (relu.bound, relu.percent),
            (Some(Bound::Memory), Some(50.0))
        );
        assert_eq!(relu.cell("FMA"), "50% BW");
        // A convolution: 100 GFLOP over 1 GB (100 FLOPs per byte) in
        // 250 ms: 400 GFLOP/s, 40% of the peak.
        let mut conv = PassRoofline::timed(1_000_000_000, 100_000_000_000, 250.0);
        b.place(&mut conv);
        assert_eq!(conv.bound, Some(Bound::Compute));
        assert!((conv.percent.unwrap_or(0.0) - 40.0).abs() < 1e-9);
        assert_eq!(conv.cell("FMA"), "40% FMA");
        // Just under the ridge: memory-bound.
        let mut gemv = PassRoofline::timed(1_000_000_000, 9_999_999_999, 20.0);
        b.place(&mut gemv);
        assert_eq!(gemv.bound, Some(Bound::Memory));
    }

    #[test]
    fn a_pass_without_bytes_or_time_is_not_placed() {
        let b = basis();
        for mut p in [
            PassRoofline::timed(0, 0, 1.0),
            PassRoofline::timed(1000, 0, 0.0),
            PassRoofline::timed(1000, 0, f64::NAN),
        ] {
            b.place(&mut p);
            assert_eq!((p.gbs, p.bound, p.percent), (None, None, None), "{p:?}");
            assert_eq!(p.cell("FMA"), "-");
        }
    }
}
