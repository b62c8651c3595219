//! The geometry of one 2-D convolution, shared by every algorithm.
//!
//! Memory layouts used by all CPU convolution kernels:
//! - activations (`src`, `dst`, `diff_src`, `diff_dst`): NHWC, i.e.
//!   `[mb][h][w][channels]`, channels innermost;
//! - weights: `[g][kh][kw][ic/g][oc/g]` ("gHWIO"), output channels innermost,
//!   so the weights of one tap form a GEMM-ready `ic/g x oc/g` matrix;
//! - bias: `[oc]`.
//!
//! Dilation follows oneDNN: `dh == 0` is a dense kernel, `dh == 1` skips one
//! pixel. Padding `ph`/`pw` is at the top/left; the bottom/right padding is
//! whatever makes `oh`/`ow` come out, and reads beyond the input are zeros.

/// One convolution problem. All sizes are in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvShape {
    pub mb: usize,
    pub g: usize,
    pub ic: usize,
    pub ih: usize,
    pub iw: usize,
    pub oc: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    pub dh: usize,
    pub dw: usize,
}

impl ConvShape {
    /// Input channels per group.
    pub fn icg(&self) -> usize {
        self.ic / self.g
    }
    /// Output channels per group.
    pub fn ocg(&self) -> usize {
        self.oc / self.g
    }
    /// Distance between two kernel taps along h (oneDNN dilation + 1).
    pub fn dil_h(&self) -> usize {
        self.dh + 1
    }
    pub fn dil_w(&self) -> usize {
        self.dw + 1
    }
    /// Number of kernel taps, `kh * kw`.
    pub fn taps(&self) -> usize {
        self.kh * self.kw
    }
    pub fn src_len(&self) -> usize {
        self.mb * self.ih * self.iw * self.ic
    }
    pub fn dst_len(&self) -> usize {
        self.mb * self.oh * self.ow * self.oc
    }
    pub fn wei_len(&self) -> usize {
        self.g * self.kh * self.kw * self.icg() * self.ocg()
    }
    pub fn bias_len(&self) -> usize {
        self.oc
    }

    /// Input row for output row `oh` at kernel row `r`, or `None` when it
    /// falls in the padding.
    #[inline]
    pub fn in_row(&self, oh: usize, r: usize) -> Option<usize> {
        (oh * self.sh + r * self.dil_h())
            .checked_sub(self.ph)
            .filter(|&i| i < self.ih)
    }
    /// Input column for output column `ow` at kernel column `s`.
    #[inline]
    pub fn in_col(&self, ow: usize, s: usize) -> Option<usize> {
        (ow * self.sw + s * self.dil_w())
            .checked_sub(self.pw)
            .filter(|&i| i < self.iw)
    }

    /// Index of `src[n][h][w][c]` (NHWC).
    #[inline]
    pub fn src_idx(&self, n: usize, h: usize, w: usize, c: usize) -> usize {
        ((n * self.ih + h) * self.iw + w) * self.ic + c
    }
    /// Index of `dst[n][h][w][k]` (NHWC).
    #[inline]
    pub fn dst_idx(&self, n: usize, h: usize, w: usize, k: usize) -> usize {
        ((n * self.oh + h) * self.ow + w) * self.oc + k
    }
    /// Index of `wei[g][r][s][c][k]` (gHWIO), `c` and `k` within the group.
    #[inline]
    pub fn wei_idx(&self, g: usize, r: usize, s: usize, c: usize, k: usize) -> usize {
        (((g * self.kh + r) * self.kw + s) * self.icg() + c) * self.ocg() + k
    }

    /// Multiply-adds of one direction (the same for all three).
    pub fn macs(&self) -> u64 {
        (self.mb * self.oh * self.ow) as u64
            * self.oc as u64
            * self.icg() as u64
            * (self.kh * self.kw) as u64
    }
    /// 2·N·OH·OW·K·(C/g)·R·S, the FLOP count of any one direction.
    pub fn flops(&self) -> u64 {
        2 * self.macs()
    }
}

/// The three training directions of a convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// dst = conv(src, wei) + bias
    Fwd,
    /// diff_src = conv_transpose(diff_dst, wei)
    BwdData,
    /// diff_wei = corr(src, diff_dst), diff_bias = sum(diff_dst)
    BwdFilter,
}

impl Direction {
    pub const ALL: [Direction; 3] = [Direction::Fwd, Direction::BwdData, Direction::BwdFilter];

    pub fn name(self) -> &'static str {
        match self {
            Direction::Fwd => "fwd",
            Direction::BwdData => "bwd-data",
            Direction::BwdFilter => "bwd-filter",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
