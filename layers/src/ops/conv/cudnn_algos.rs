//! cuDNN's convolution algorithms by direction and number, with the names
//! `--algo` accepts. A number this table does not know (from a newer cuDNN)
//! is still carried and shown as `algo#N`.

use crate::core::DType;
use cnnbench_kernels::conv::Direction;

/// Names of the algorithms of `dir`, indexed by cuDNN's enum value
/// (`cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t`).
pub fn names(dir: Direction) -> &'static [&'static str] {
    match dir {
        Direction::Fwd => &[
            "implicit_gemm",
            "implicit_precomp_gemm",
            "gemm",
            "direct",
            "fft",
            "fft_tiling",
            "winograd",
            "winograd_nonfused",
        ],
        Direction::BwdData => &[
            "algo_0",
            "algo_1",
            "fft",
            "fft_tiling",
            "winograd",
            "winograd_nonfused",
        ],
        Direction::BwdFilter => &[
            "algo_0",
            "algo_1",
            "fft",
            "algo_3",
            "winograd",
            "winograd_nonfused",
            "fft_tiling",
        ],
    }
}

/// How an algorithm computes, as far as its rounding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Sums of products in the data's own domain (implicit and explicit
    /// GEMM, direct, `algo_0`/`1`/`3`): rounds like the reference.
    Gemm,
    /// Through the Fourier domain (`fft`, `fft_tiling`).
    Fft,
    /// Through Winograd's transforms (`winograd`, `winograd_nonfused`).
    Winograd,
}

pub fn family(dir: Direction, id: u32) -> Family {
    let n = name(dir, id);
    if n.starts_with("fft") {
        Family::Fft
    } else if n.starts_with("winograd") {
        Family::Winograd
    } else {
        Family::Gemm
    }
}

/// The fp32 `--check` threshold of the FFT and Winograd algorithms: they
/// round in a transformed domain, and their fp32 error is typically 1e-6
/// to 1e-4 relative L2 (the same allowance as `check --device gpu` makes
/// for f32).
pub const TRANSFORM_F32_TOLERANCE: f64 = 1e-3;

/// The `--check` threshold of algorithm `id` of `dir` in `dtype`, for
/// outputs that sum `reduction_len` products: the dtype's
/// ([`DType::tolerance`]), widened to [`TRANSFORM_F32_TOLERANCE`] for
/// fp32 FFT and Winograd.
pub fn check_tolerance(dtype: DType, dir: Direction, id: u32, reduction_len: usize) -> f64 {
    family_tolerance(dtype, family(dir, id), reduction_len)
}

/// The `--check` threshold of an algorithm of `family` (the graph API's
/// engines tell theirs by their numerical notes).
pub fn family_tolerance(dtype: DType, family: Family, reduction_len: usize) -> f64 {
    let t = dtype.tolerance(reduction_len);
    match (dtype, family) {
        (DType::F32, Family::Fft | Family::Winograd) => t.max(TRANSFORM_F32_TOLERANCE),
        _ => t,
    }
}

/// The name of algorithm `id` of `dir`.
pub fn name(dir: Direction, id: u32) -> String {
    names(dir)
        .get(id as usize)
        .map_or_else(|| format!("algo#{id}"), |n| n.to_string())
}

/// The number of a name (or of `algo#N` / a bare number) for `dir`.
pub fn lookup(dir: Direction, name: &str) -> Option<u32> {
    if let Some(i) = names(dir).iter().position(|n| *n == name) {
        return Some(i as u32);
    }
    name.strip_prefix("algo#").unwrap_or(name).parse().ok()
}

/// Every name any direction knows, for error messages.
pub fn all_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = Direction::ALL
        .iter()
        .flat_map(|&d| names(d).iter().copied())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_cudnn_enums() {
        use cudarc::cudnn::sys::{
            cudnnConvolutionBwdDataAlgo_t as BD, cudnnConvolutionBwdFilterAlgo_t as BF,
            cudnnConvolutionFwdAlgo_t as F,
        };
        assert_eq!(
            names(Direction::Fwd).len(),
            F::CUDNN_CONVOLUTION_FWD_ALGO_COUNT as usize
        );
        assert_eq!(
            names(Direction::BwdData).len(),
            BD::CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT as usize
        );
        assert_eq!(
            names(Direction::BwdFilter).len(),
            BF::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT as usize
        );
        assert_eq!(
            lookup(Direction::Fwd, "implicit_precomp_gemm"),
            Some(F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM as u32)
        );
        assert_eq!(
            lookup(Direction::BwdFilter, "fft_tiling"),
            Some(BF::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING as u32)
        );
        assert_eq!(
            lookup(Direction::BwdData, "winograd_nonfused"),
            Some(BD::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED as u32)
        );
    }

    #[test]
    fn unknown_numbers_are_kept() {
        assert_eq!(name(Direction::Fwd, 11), "algo#11");
        assert_eq!(lookup(Direction::Fwd, "algo#11"), Some(11));
        assert_eq!(lookup(Direction::BwdData, "3"), Some(3));
        assert_eq!(lookup(Direction::BwdData, "implicit_gemm"), None);
        assert!(all_names().contains(&"winograd"));
    }

    #[test]
    fn fp32_fft_and_winograd_get_the_transform_threshold() {
        use cudarc::cudnn::sys::{
            cudnnConvolutionBwdDataAlgo_t as BD, cudnnConvolutionBwdFilterAlgo_t as BF,
            cudnnConvolutionFwdAlgo_t as F,
        };
        let fwd = |a: F| a as u32;
        let (n, gemm) = (
            576,
            fwd(F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
        );
        let f32_gemm = check_tolerance(DType::F32, Direction::Fwd, gemm, n);
        assert_eq!(f32_gemm, 1e-5);
        for (dir, id) in [
            (Direction::Fwd, fwd(F::CUDNN_CONVOLUTION_FWD_ALGO_FFT)),
            (
                Direction::Fwd,
                fwd(F::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING),
            ),
            (Direction::Fwd, fwd(F::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD)),
            (
                Direction::BwdData,
                BD::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED as u32,
            ),
            (
                Direction::BwdFilter,
                BF::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING as u32,
            ),
        ] {
            assert_ne!(family(dir, id), Family::Gemm, "{dir:?} {id}");
            assert_eq!(
                check_tolerance(DType::F32, dir, id, n),
                TRANSFORM_F32_TOLERANCE
            );
            // Other dtypes keep their own, already wider, threshold.
            assert_eq!(check_tolerance(DType::F16, dir, id, n), 1e-2);
        }
        let algo3 = BF::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 as u32;
        assert_eq!(family(Direction::BwdFilter, algo3), Family::Gemm);
        assert_eq!(family(Direction::Fwd, 99), Family::Gemm, "unknown numbers");
    }
}
