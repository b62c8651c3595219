//! The geometry every GEMM formulation here shares: a grid of "virtual"
//! output pixels, each reading a fixed list of source taps, turned into the
//! rows of an im2col matrix.
//!
//! Forward is the obvious instance. Backward-data is the same thing once the
//! input pixels are split by stride phase: within one phase every input pixel
//! is fed by the same taps at fixed offsets into `diff_dst`, i.e. a stride-1
//! forward convolution (see `bwd_data`).

/// One spatial axis: virtual position `t` in `0..len` reads source position
/// `src_step * t + offs[tap]` (taps outside `0..src_len` read zeros) and its
/// result lands at real position `dst_start + dst_step * t`.
#[derive(Clone, Debug)]
pub struct AxisMap {
    pub len: usize,
    pub src_len: usize,
    pub src_step: isize,
    pub offs: Vec<isize>,
    pub dst_start: usize,
    pub dst_step: usize,
}

impl AxisMap {
    /// The forward map along one axis: output `o` reads `o*s - p + tap*dil`.
    pub fn fwd(
        out_len: usize,
        in_len: usize,
        k: usize,
        stride: usize,
        pad: usize,
        dil: usize,
    ) -> Self {
        AxisMap {
            len: out_len,
            src_len: in_len,
            src_step: stride as isize,
            offs: (0..k).map(|r| (r * dil) as isize - pad as isize).collect(),
            dst_start: 0,
            dst_step: 1,
        }
    }

    #[inline]
    fn src(&self, t: usize, tap: usize) -> Option<usize> {
        let v = self.src_step * t as isize + self.offs[tap];
        (v >= 0 && (v as usize) < self.src_len).then_some(v as usize)
    }

    /// Whether virtual position `t` reads exactly source position `t` (one
    /// tap, stride 1, no padding, same extent).
    fn reads_identity(&self) -> bool {
        self.src_step == 1 && self.offs == [0] && self.src_len == self.len
    }

    /// Whether virtual position `t` is real position `t` of an axis of
    /// length `dst_len`.
    pub fn writes_identity(&self, dst_len: usize) -> bool {
        self.dst_start == 0 && self.dst_step == 1 && self.len == dst_len
    }
}

/// Which source pixels feed each virtual output pixel of one convolution.
#[derive(Clone, Debug)]
pub struct Gather {
    pub mb: usize,
    pub y: AxisMap,
    pub x: AxisMap,
    /// Channels of one source pixel (all groups).
    pub src_c: usize,
    /// Channels gathered per tap (one group).
    pub cg: usize,
}

impl Gather {
    /// Virtual output pixels, the rows of the im2col matrix.
    pub fn pixels(&self) -> usize {
        self.mb * self.y.len * self.x.len
    }
    /// Columns of the im2col matrix: `(tap_y, tap_x, channel)`.
    pub fn k(&self) -> usize {
        self.y.offs.len() * self.x.offs.len() * self.cg
    }
    /// Whether the im2col matrix of a group is the source itself, read with
    /// row stride `src_c` (1x1, stride 1, no padding): no copy needed.
    pub fn reads_identity(&self) -> bool {
        self.y.reads_identity() && self.x.reads_identity()
    }

    /// `(n, ty, tx)` of virtual pixel `p`.
    #[inline]
    pub fn coords(&self, p: usize) -> (usize, usize, usize) {
        let plane = self.y.len * self.x.len;
        let (n, r) = (p / plane, p % plane);
        (n, r / self.x.len, r % self.x.len)
    }

    /// The coordinates of the pixel after `(n, ty, tx)`, without a division.
    #[inline]
    fn next_coords(&self, (n, ty, tx): (usize, usize, usize)) -> (usize, usize, usize) {
        if tx + 1 < self.x.len {
            (n, ty, tx + 1)
        } else if ty + 1 < self.y.len {
            (n, ty + 1, 0)
        } else {
            (n + 1, 0, 0)
        }
    }

    /// Writes rows `p0..p0+rows`, columns `k0..k1` of group `g`'s im2col
    /// matrix into `col` (row-major, row stride `k1 - k0`): straight copies of
    /// channel runs, zeros where a tap falls outside the source.
    #[allow(clippy::too_many_arguments)]
    pub fn im2col(
        &self,
        src: &[f32],
        g: usize,
        p0: usize,
        rows: usize,
        k0: usize,
        k1: usize,
        col: &mut [f32],
    ) {
        if k0 == 0 && k1 == self.k() {
            self.im2col_full(src, g, p0, rows, col);
        } else {
            self.im2col_range(src, g, p0, rows, k0, k1, col);
        }
    }

    /// All columns. When the x taps read consecutive source pixels and
    /// there is one group, the taps of one kernel row are a single
    /// contiguous run of the source row: one copy instead of `kw`.
    fn im2col_full(&self, src: &[f32], g: usize, p0: usize, rows: usize, col: &mut [f32]) {
        let (cg, nx, ny) = (self.cg, self.x.offs.len(), self.y.offs.len());
        let run = nx * cg;
        let window = cg == self.src_c && self.x.offs.windows(2).all(|w| w[1] == w[0] + 1);
        let (src_w, gc) = (self.x.src_len, g * cg);
        let (mut n, mut ty, mut tx) = self.coords(p0);
        for row in col[..rows * ny * run].chunks_exact_mut(ny * run) {
            let img = n * self.y.src_len;
            let sx0 = self.x.src_step * tx as isize + self.x.offs[0];
            let inside = window && sx0 >= 0 && sx0 as usize + nx <= src_w;
            for (a, out) in row.chunks_exact_mut(run).enumerate() {
                let Some(sy) = self.y.src(ty, a) else {
                    out.fill(0.0);
                    continue;
                };
                let line = (img + sy) * src_w;
                if inside {
                    let at = (line + sx0 as usize) * self.src_c;
                    out.copy_from_slice(&src[at..at + run]);
                    continue;
                }
                for (b, tap) in out.chunks_exact_mut(cg).enumerate() {
                    match self.x.src(tx, b) {
                        Some(sx) => {
                            let at = (line + sx) * self.src_c + gc;
                            tap.copy_from_slice(&src[at..at + cg]);
                        }
                        None => tap.fill(0.0),
                    }
                }
            }
            (n, ty, tx) = self.next_coords((n, ty, tx));
        }
    }

    /// Columns `k0..k1` only (backward-filter tiles).
    #[allow(clippy::too_many_arguments)]
    fn im2col_range(
        &self,
        src: &[f32],
        g: usize,
        p0: usize,
        rows: usize,
        k0: usize,
        k1: usize,
        col: &mut [f32],
    ) {
        let (cg, kb) = (self.cg, k1 - k0);
        let nx = self.x.offs.len();
        let (tap0, tap1) = (k0 / cg, k1.div_ceil(cg));
        let (mut n, mut ty, mut tx) = self.coords(p0);
        for row in col[..rows * kb].chunks_exact_mut(kb) {
            let img = n * self.y.src_len;
            for tap in tap0..tap1 {
                let (a, b) = (tap / nx, tap % nx);
                let c_lo = k0.max(tap * cg) - tap * cg;
                let c_hi = k1.min(tap * cg + cg) - tap * cg;
                let out = &mut row[tap * cg + c_lo - k0..tap * cg + c_hi - k0];
                match (self.y.src(ty, a), self.x.src(tx, b)) {
                    (Some(sy), Some(sx)) => {
                        let base = ((img + sy) * self.x.src_len + sx) * self.src_c + g * cg;
                        out.copy_from_slice(&src[base + c_lo..base + c_hi]);
                    }
                    _ => out.fill(0.0),
                }
            }
            (n, ty, tx) = self.next_coords((n, ty, tx));
        }
    }
}
