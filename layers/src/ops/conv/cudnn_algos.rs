//! cuDNN's convolution algorithms by direction and number, with the names
//! `--algo` accepts. A number this table does not know (from a newer cuDNN)
//! is still carried and shown as `algo#N`.

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
}
