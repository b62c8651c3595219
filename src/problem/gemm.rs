//! GEMM problems: `MxNxK` sizes (DeepBench's M, N, K) with a transpose
//! pair, and their canonical, pasteable form.

use anyhow::{bail, Result};
use cnnbench_kernels::gemm::GemmShape;

/// `MxNxK`, e.g. `1760x128x1760` (DeepBench's M, N, K), with `trans` one
/// of NN, NT, TN, TT (whether A, then B, is stored transposed).
pub fn parse(desc: &str, trans: &str) -> Result<GemmShape> {
    let dims: Vec<&str> = desc.split('x').collect();
    if dims.len() != 3 {
        bail!("bad GEMM size '{desc}' (expected MxNxK, e.g. 1760x128x1760)");
    }
    let mut v = [0usize; 3];
    for (slot, d) in v.iter_mut().zip(&dims) {
        *slot = match d.parse() {
            Ok(n) if n >= 1 => n,
            _ => bail!("bad GEMM size '{desc}': '{d}' is not a positive integer"),
        };
    }
    let (trans_a, trans_b) = match trans {
        "NN" | "nn" => (false, false),
        "NT" | "nt" => (false, true),
        "TN" | "tn" => (true, false),
        "TT" | "tt" => (true, true),
        other => bail!("bad --trans '{other}' (expected NN, NT, TN or TT)"),
    };
    if v.iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
        .is_none()
        || v.iter().any(|&d| d > i32::MAX as usize)
    {
        bail!("GEMM size '{desc}' is too large");
    }
    Ok(GemmShape {
        m: v[0],
        n: v[1],
        k: v[2],
        trans_a,
        trans_b,
    })
}

/// `1760x128x1760:NT`, pasteable back as `SIZE --trans NT`.
pub fn canonical(s: &GemmShape) -> String {
    format!(
        "{}x{}x{}:{}{}",
        s.m,
        s.n,
        s.k,
        if s.trans_a { 'T' } else { 'N' },
        if s.trans_b { 'T' } else { 'N' }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_transposes() {
        let s = parse("1760x128x1760", "NT").unwrap();
        assert_eq!(
            (s.m, s.n, s.k, s.trans_a, s.trans_b),
            (1760, 128, 1760, false, true)
        );
        assert_eq!(canonical(&s), "1760x128x1760:NT");
        assert_eq!(s.flops(), 2 * 1760 * 128 * 1760);
        for bad in ["1760x128", "0x1x1", "ax1x1", "1x1x1x1", "99999999999x1x1"] {
            assert!(parse(bad, "NN").is_err(), "{bad}");
        }
        assert_eq!(
            parse("8x8x8", "XN").unwrap_err().to_string(),
            "bad --trans 'XN' (expected NN, NT, TN or TT)"
        );
    }
}
