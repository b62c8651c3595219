//! Memory layouts, and conversion between the CPU's storage order (NHWC
//! activations, gHWIO weights), the GPU's (`--layout nchw|nhwc`, with
//! cuDNN's KCRS or KRSC filters), and the logical order that other
//! frameworks read (N,C,H,W for activations; K,C/g,R,S for weights).

use anyhow::{bail, Result};
use cnnbench_kernels::conv::ConvShape;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Channels innermost: `[n][h][w][c]`; filters `[k][r][s][c/g]`.
    Nhwc,
    /// Planes: `[n][c][h][w]`; filters `[k][c/g][r][s]`.
    Nchw,
}

impl Layout {
    pub const ALL: [Layout; 2] = [Layout::Nchw, Layout::Nhwc];

    pub fn name(self) -> &'static str {
        match self {
            Layout::Nhwc => "nhwc",
            Layout::Nchw => "nchw",
        }
    }

    pub fn parse(s: &str) -> Result<Layout> {
        match s {
            "nhwc" | "NHWC" | "channels_last" => Ok(Layout::Nhwc),
            "nchw" | "NCHW" => Ok(Layout::Nchw),
            other => bail!("unknown layout '{other}' (expected nchw or nhwc)"),
        }
    }

    /// NHWC activations `[n][h][w][c]` in this layout.
    pub fn from_nhwc(self, x: &[f32], n: usize, h: usize, w: usize, c: usize) -> Vec<f32> {
        match self {
            Layout::Nhwc => x.to_vec(),
            Layout::Nchw => nhwc_to_nchw(x, n, h, w, c),
        }
    }

    /// Activations in this layout back to NHWC.
    pub fn to_nhwc(self, x: &[f32], n: usize, h: usize, w: usize, c: usize) -> Vec<f32> {
        match self {
            Layout::Nhwc => x.to_vec(),
            Layout::Nchw => nchw_to_nhwc(x, n, h, w, c),
        }
    }

    /// CPU gHWIO weights as this layout's cuDNN filter.
    pub fn filter_from_ghwio(self, w: &[f32], p: &ConvShape) -> Vec<f32> {
        match self {
            Layout::Nchw => ghwio_to_kcrs(w, p),
            Layout::Nhwc => permute_weights(
                w,
                p,
                |p, [g, r, s, c, k]| p.wei_idx(g, r, s, c, k),
                krsc_idx,
            ),
        }
    }

    /// This layout's cuDNN filter back to gHWIO.
    pub fn filter_to_ghwio(self, w: &[f32], p: &ConvShape) -> Vec<f32> {
        let src_idx = match self {
            Layout::Nchw => kcrs_idx,
            Layout::Nhwc => krsc_idx,
        };
        permute_weights(w, p, src_idx, |p, [g, r, s, c, k]| p.wei_idx(g, r, s, c, k))
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A comma list of layouts, e.g. `nchw,nhwc`.
pub fn parse_list(list: &str) -> Result<Vec<Layout>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        let l = Layout::parse(item)?;
        if out.contains(&l) {
            bail!("layout '{l}' given twice in '{list}'");
        }
        out.push(l);
    }
    Ok(out)
}

/// `[n][h][w][c]` to `[n][c][h][w]`.
pub fn nhwc_to_nchw(x: &[f32], n: usize, h: usize, w: usize, c: usize) -> Vec<f32> {
    assert_eq!(x.len(), n * h * w * c);
    let mut out = vec![0f32; x.len()];
    for ni in 0..n {
        for hi in 0..h {
            for wi in 0..w {
                let src = &x[((ni * h + hi) * w + wi) * c..][..c];
                for (ci, &v) in src.iter().enumerate() {
                    out[((ni * c + ci) * h + hi) * w + wi] = v;
                }
            }
        }
    }
    out
}

/// `[n][c][h][w]` to `[n][h][w][c]`.
pub fn nchw_to_nhwc(x: &[f32], n: usize, h: usize, w: usize, c: usize) -> Vec<f32> {
    assert_eq!(x.len(), n * h * w * c);
    let mut out = vec![0f32; x.len()];
    for ni in 0..n {
        for hi in 0..h {
            for wi in 0..w {
                let dst = &mut out[((ni * h + hi) * w + wi) * c..][..c];
                for (ci, v) in dst.iter_mut().enumerate() {
                    *v = x[((ni * c + ci) * h + hi) * w + wi];
                }
            }
        }
    }
    out
}

/// Index of weight (g, r, s, c, k) in logical `[oc][c/g][r][s]`.
fn kcrs_idx(p: &ConvShape, [g, r, s, c, k]: [usize; 5]) -> usize {
    let oc = g * p.ocg() + k;
    ((oc * p.icg() + c) * p.kh + r) * p.kw + s
}

/// Index of weight (g, r, s, c, k) in cuDNN's NHWC filter `[oc][r][s][c/g]`.
fn krsc_idx(p: &ConvShape, [g, r, s, c, k]: [usize; 5]) -> usize {
    let oc = g * p.ocg() + k;
    ((oc * p.kh + r) * p.kw + s) * p.icg() + c
}

/// Moves every weight from its index under `from` to its index under `to`.
fn permute_weights(
    w: &[f32],
    p: &ConvShape,
    from: impl Fn(&ConvShape, [usize; 5]) -> usize,
    to: impl Fn(&ConvShape, [usize; 5]) -> usize,
) -> Vec<f32> {
    assert_eq!(w.len(), p.wei_len());
    let mut out = vec![0f32; w.len()];
    for g in 0..p.g {
        for r in 0..p.kh {
            for s in 0..p.kw {
                for c in 0..p.icg() {
                    for k in 0..p.ocg() {
                        let at = [g, r, s, c, k];
                        out[to(p, at)] = w[from(p, at)];
                    }
                }
            }
        }
    }
    out
}

/// CPU weights `[g][r][s][c/g][k/g]` to logical `[k][c/g][r][s]`
/// (k = g·(k/g) + k_in_group), the order PyTorch and oneDNN use, and
/// cuDNN's NCHW filter.
pub fn ghwio_to_kcrs(w: &[f32], p: &ConvShape) -> Vec<f32> {
    permute_weights(
        w,
        p,
        |p, [g, r, s, c, k]| p.wei_idx(g, r, s, c, k),
        kcrs_idx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nhwc_to_nchw_moves_channels_out() {
        // n=1, h=1, w=2, c=3: [[a0 a1 a2] [b0 b1 b2]] -> [a0 b0 a1 b1 a2 b2]
        let x = [0., 1., 2., 10., 11., 12.];
        assert_eq!(
            nhwc_to_nchw(&x, 1, 1, 2, 3),
            vec![0., 10., 1., 11., 2., 12.]
        );
    }

    #[test]
    fn weights_to_kcrs_with_groups() {
        let p = ConvShape {
            mb: 1,
            g: 2,
            ic: 2,
            ih: 3,
            iw: 3,
            oc: 4,
            oh: 2,
            ow: 3,
            kh: 2,
            kw: 1,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            dh: 0,
            dw: 0,
        };
        let w: Vec<f32> = (0..p.wei_len()).map(|i| i as f32).collect();
        let kcrs = ghwio_to_kcrs(&w, &p);
        // Every element lands exactly once.
        let mut sorted = kcrs.clone();
        sorted.sort_by(f32::total_cmp);
        assert_eq!(sorted, w);
        // oc 3 = group 1, k 1; c 0; r 1; s 0: ((oc·icg + c)·kh + r)·kw + s = 7.
        assert_eq!(kcrs[7], w[p.wei_idx(1, 1, 0, 0, 1)]);
        // Both cuDNN filter layouts come back unchanged.
        for l in Layout::ALL {
            assert_eq!(
                l.filter_to_ghwio(&l.filter_from_ghwio(&w, &p), &p),
                w,
                "{l}"
            );
        }
        // NHWC filter [oc][r][s][c/g]: oc 3, r 1, s 0, c 0 = ((3·2 + 1)·1 + 0)·1 + 0.
        assert_eq!(
            Layout::Nhwc.filter_from_ghwio(&w, &p)[7],
            w[p.wei_idx(1, 1, 0, 0, 1)]
        );
    }

    #[test]
    fn activations_round_trip_and_layout_names() {
        let x: Vec<f32> = (0..2 * 3 * 4 * 5).map(|i| i as f32).collect();
        for l in Layout::ALL {
            assert_eq!(l.to_nhwc(&l.from_nhwc(&x, 2, 3, 4, 5), 2, 3, 4, 5), x);
            assert_eq!(Layout::parse(l.name()).unwrap(), l);
        }
        assert_eq!(
            Layout::parse("chwn").unwrap_err().to_string(),
            "unknown layout 'chwn' (expected nchw or nhwc)"
        );
        assert_eq!(parse_list("nchw,nhwc").unwrap(), Layout::ALL.to_vec());
    }
}
