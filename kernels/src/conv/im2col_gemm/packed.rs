//! A small packed GEMM with an AVX-512 micro-kernel, for the single-tap
//! (1x1) convolutions with many pixels, forward and (where the reduction is
//! 64 or more) backward-data, and for Winograd's 36 GEMMs (whose
//! transforms fill the panels themselves; its backward-filter reads A
//! transposed, [`gemm_panels`]), and for `crate::gemm`'s packed path. It
//! reads the pixel rows in place and
//! prefetches the next micro-tile's, where the `gemm` crate packs them per
//! call; it also fuses the bias, which the crate adds in a pass of its own.
//!
//! The weights `B[K x N]` are packed once per call into panels of `NR`
//! output channels (`[panel][K][NR]`, zero-padded), shared by all work
//! items. The pixel rows `A` are read in place (unit column stride) and
//! broadcast; each micro-tile is `MR` pixels x `NR` channels, kept in 24
//! zmm accumulators, with the bias added (or dst accumulated) at store;
//! where the caller asks and the reduction takes one pass, whole vectors
//! starting on a cache line go out with non-temporal stores.

use crate::Isa;
use rayon::prelude::*;

/// Output channels per panel (four zmm vectors).
pub const NR: usize = 64;
/// Pixel rows per micro-tile.
const MR: usize = 6;
/// Reduction depth per pass: the micro-tiles walk down all rows of A
/// (from L2) over one `KC x NR` panel slice (64 KiB, from L2 too). 256
/// against 128, which kept the slice in L1 (Zen 4 VM, 2 threads, ABBA, 3
/// rounds): ResNet-50's 1x1 layers with a 256- or 512-channel reduction
/// 1.00-1.075x per pass, median 1.04x, forward and backward-data; fewer
/// passes re-read C less, and more outputs take a single pass, which
/// streams.
const KC: usize = 256;

/// Whether the packed path runs on `isa` here: its micro-kernel is
/// AVX-512 only.
pub fn available(isa: Isa) -> bool {
    isa == Isa::Avx512 && isa.is_supported()
}

/// `B[k x n]` packed into `NR`-wide panels.
pub struct PackedB {
    buf: Vec<f32>,
    k: usize,
    n: usize,
}

impl PackedB {
    pub fn new(k: usize, n: usize) -> Self {
        PackedB {
            buf: vec![0.0; n.div_ceil(NR) * k * NR],
            k,
            n,
        }
    }

    pub fn bytes(&self) -> usize {
        4 * self.buf.len()
    }

    /// The panels, `[panel][k][NR]`, for callers that fill them in that
    /// layout themselves (columns past `n` in the last panel are never
    /// stored by [`PackedB::gemm`]): a pointer from `as_mut_ptr`, which a
    /// later read of the buffer leaves valid.
    pub fn panels_ptr(&mut self) -> *mut f32 {
        self.buf.as_mut_ptr()
    }

    /// Packs the row-major `B(i, j) = b[i·rs + j]` (`i < k`, `j < n`).
    pub fn pack(&mut self, b: &[f32], rs: usize) {
        let (k, n) = (self.k, self.n);
        if k == 0 || n == 0 {
            return;
        }
        assert!(b.len() >= (k - 1) * rs + n, "weights too small");
        self.buf
            .par_chunks_mut(k * NR)
            .enumerate()
            .for_each(|(pi, panel)| {
                let j0 = pi * NR;
                let w = NR.min(n - j0);
                for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                    row[..w].copy_from_slice(&b[i * rs + j0..][..w]);
                }
            });
    }

    /// `dst[rows x (n1-n0)] = A[rows x k] · B[:, n0..n1] (+ bias[n0..n1])`.
    /// `n0` must be a multiple of `NR`. With `stream`, a reduction of one
    /// pass (`k` at most `KC`) writes each whole vector that starts on a
    /// cache line with a non-temporal store (see `crate::stream`).
    ///
    /// # Safety
    /// `a` must address `rows` rows of `k` readable floats with row stride
    /// `a_rs`; `dst` `rows` rows of `n1 - n0` writable floats with row stride
    /// `dst_rs`, touched by no other thread meanwhile; `bias` (when given)
    /// `n1 - n0` readable floats. Only call when [`available`]. With
    /// `stream`, the calling thread must call `crate::stream::fence` before
    /// another thread reads `dst` (the stores are weakly ordered).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        &self,
        rows: usize,
        a: *const f32,
        a_rs: usize,
        n0: usize,
        n1: usize,
        dst: *mut f32,
        dst_rs: usize,
        bias: Option<*const f32>,
        stream: bool,
    ) {
        assert!(n0.is_multiple_of(NR) && n1 <= self.n && n0 <= n1);
        let k = self.k;
        // SAFETY: forwarded from this function's contract; the panels of
        // columns n0.. start at panel n0 / NR, k rows each.
        unsafe {
            run_tiles::<false>(
                rows,
                k,
                a,
                a_rs,
                self.buf.as_ptr().add((n0 / NR) * k * NR),
                k,
                n0,
                n1,
                dst,
                dst_rs,
                bias,
                false,
                stream,
            )
        }
    }
}

/// `C[rows x (n1-n0)] (+)= A · B[:, n0..n1]` over a reduction of `k`,
/// with A stored either way (`A(i, p)` at `a[i·a_rs + p]`, or where `ta`
/// transposed, at `a[p·a_rs + i]`, `p < k`: Winograd's backward-filter and
/// the general GEMM's two layouts, see `crate::gemm`) and B in panels of
/// [`NR`] columns, `k_stride` rows apart (`[panel][k_stride][NR]`, of
/// which the first `k` rows are used). `n0` must be a multiple of `NR`.
/// Adds to C where `acc`, else overwrites it.
///
/// # Safety
/// `a` must address A's `rows x k` readable floats as `ta` says; `b` the
/// panels of columns `n0..n1` (each `k_stride·NR` floats, zeros past the
/// last column); `c` `rows` rows of `n1 - n0` writable floats, `c_rs`
/// apart, touched by no other thread meanwhile. Only call when
/// [`available`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_panels(
    rows: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    ta: bool,
    b: *const f32,
    k_stride: usize,
    n0: usize,
    n1: usize,
    c: *mut f32,
    c_rs: usize,
    acc: bool,
) {
    assert!(n0.is_multiple_of(NR) && n0 <= n1 && k <= k_stride);
    // SAFETY: forwarded from this function's contract.
    unsafe {
        if ta {
            run_tiles::<true>(
                rows, k, a, a_rs, b, k_stride, n0, n1, c, c_rs, None, acc, false,
            )
        } else {
            run_tiles::<false>(
                rows, k, a, a_rs, b, k_stride, n0, n1, c, c_rs, None, acc, false,
            )
        }
    }
}

/// Packs rows `k0..k0 + kc` of `B[k x n]` (row-major, or stored `n x k`
/// where `tb`) into `dst` as `[panel][kc][NR]`, zeros past column `n`: the
/// panels [`gemm_panels`] reads, `k_stride = kc`.
pub fn pack_panels(b: &[f32], k: usize, n: usize, tb: bool, k0: usize, kc: usize, dst: &mut [f32]) {
    assert!(k0 + kc <= k && b.len() >= k * n);
    let dst = &mut dst[..n.div_ceil(NR) * kc * NR];
    let fill = |pi: usize, panel: &mut [f32]| {
        let j0 = pi * NR;
        let w = NR.min(n - j0);
        if tb {
            // B(i, j) at b[j·k + i]: a panel's column runs along a row of
            // the storage, so read by columns and scatter into the panel.
            for j in 0..w {
                let col = &b[(j0 + j) * k + k0..][..kc];
                for (i, &v) in col.iter().enumerate() {
                    panel[i * NR + j] = v;
                }
            }
            if w < NR {
                for row in panel.chunks_exact_mut(NR) {
                    row[w..].fill(0.0);
                }
            }
        } else {
            for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                row[..w].copy_from_slice(&b[(k0 + i) * n + j0..][..w]);
                row[w..].fill(0.0);
            }
        }
    };
    if kc * n < 1 << 16 {
        dst.chunks_mut(kc * NR)
            .enumerate()
            .for_each(|(pi, p)| fill(pi, p));
    } else {
        dst.par_chunks_mut(kc * NR)
            .enumerate()
            .for_each(|(pi, p)| fill(pi, p));
    }
}

/// The loops of both GEMMs: blocks of the reduction (`KC`), panels of `NR`
/// columns, micro-tiles of `MR` rows. `b` is the panel of columns `n0..`,
/// panels `k_stride·NR` floats apart; A is read as `TA` says (see
/// [`avx512_gemm_f32_6x64`]); the bias is added by the first block, and C
/// is added to where `acc` or after the first block; a single block
/// streams its stores where `stream` (and not `acc`). With no reduction
/// (`k == 0`) C becomes the bias or zeros, or stays as it is where `acc`.
///
/// # Safety
/// The callers' contracts ([`PackedB::gemm`], [`gemm_panels`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn run_tiles<const TA: bool>(
    rows: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: *const f32,
    k_stride: usize,
    n0: usize,
    n1: usize,
    c: *mut f32,
    c_rs: usize,
    bias: Option<*const f32>,
    acc: bool,
    stream: bool,
) {
    if k == 0 {
        if !acc {
            let w = n1 - n0;
            for i in 0..rows {
                // SAFETY: row i of C, per the callers' contracts.
                let d = unsafe { std::slice::from_raw_parts_mut(c.add(i * c_rs), w) };
                match bias {
                    // SAFETY: w bias floats, per the callers' contracts.
                    Some(b) => d.copy_from_slice(unsafe { std::slice::from_raw_parts(b, w) }),
                    None => d.fill(0.0),
                }
            }
        }
        return;
    }
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        let first = k0 == 0;
        let mut j0 = n0;
        while j0 < n1 {
            let w = NR.min(n1 - j0);
            let mut i0 = 0;
            while i0 < rows {
                let mr = MR.min(rows - i0);
                let tile = Tile {
                    k: kc,
                    // SAFETY (all four): in bounds per the callers'
                    // contracts and the panel layout.
                    a: unsafe { a.add(if TA { k0 * a_rs + i0 } else { i0 * a_rs + k0 }) },
                    a_rs,
                    b: unsafe { b.add(((j0 - n0) / NR) * k_stride * NR + k0 * NR) },
                    c: unsafe { c.add(i0 * c_rs + (j0 - n0)) },
                    c_rs,
                    w,
                    bias: if first {
                        bias.map(|p| unsafe { p.add(j0 - n0) })
                    } else {
                        None
                    },
                    acc: acc || !first,
                    // Only a single pass streams: after a first pass has
                    // stored C, its lines are already read and cached.
                    stream: stream && !acc && kc == k,
                };
                // SAFETY: avx512f is available (callers' contract) and the
                // tile addresses memory as checked above.
                unsafe {
                    if tile.stream {
                        tile_rows::<TA, true>(mr, &tile)
                    } else {
                        tile_rows::<TA, false>(mr, &tile)
                    }
                }
                i0 += mr;
            }
            j0 += NR;
        }
        k0 += kc;
    }
}

/// The micro-kernel instantiated for `mr` rows, streaming or not: a
/// run-time `stream` flag in its store loop made LLVM keep the
/// accumulators on the stack inside the reduction loop (2.4x slower).
///
/// # Safety
/// As [`avx512_gemm_f32_6x64`].
#[inline(always)]
unsafe fn tile_rows<const TA: bool, const ST: bool>(mr: usize, tile: &Tile) {
    // SAFETY: forwarded.
    unsafe {
        match mr {
            6 => avx512_gemm_f32_6x64::<6, TA, ST>(tile),
            5 => avx512_gemm_f32_6x64::<5, TA, ST>(tile),
            4 => avx512_gemm_f32_6x64::<4, TA, ST>(tile),
            3 => avx512_gemm_f32_6x64::<3, TA, ST>(tile),
            2 => avx512_gemm_f32_6x64::<2, TA, ST>(tile),
            _ => avx512_gemm_f32_6x64::<1, TA, ST>(tile),
        }
    }
}

/// One micro-tile: `C[M x w] (+)= A[M x k] · Bpanel[k x NR][:, ..w]`.
struct Tile {
    k: usize,
    a: *const f32,
    a_rs: usize,
    /// Packed panel rows, `NR` floats apart.
    b: *const f32,
    c: *mut f32,
    c_rs: usize,
    /// Valid columns, `1..=NR`.
    w: usize,
    bias: Option<*const f32>,
    acc: bool,
    /// Store whole, line-aligned vectors non-temporally.
    stream: bool,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512_gemm_f32_6x64<const M: usize, const TA: bool, const ST: bool>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut r = [[_mm512_setzero_ps(); 4]; M];
    let (a, b) = (t.a, t.b);
    for p in 0..t.k {
        // SAFETY: row p of the packed panel (NR floats) and step p of the
        // M rows of A (a column, or with `TA` a row) are in bounds (see
        // `PackedB::gemm`, `gemm_panels`).
        unsafe {
            let bp = b.add(p * NR);
            let bv = [
                _mm512_loadu_ps(bp),
                _mm512_loadu_ps(bp.add(16)),
                _mm512_loadu_ps(bp.add(32)),
                _mm512_loadu_ps(bp.add(48)),
            ];
            // The next micro-tile's rows, one row per step: over the 16
            // steps of a cache line every row's line is asked for, a tile
            // (about 1,500 cycles) ahead of its use. Without it the first
            // broadcast of each step waited on memory (19% of the samples).
            // `wrapping_add`: past the last tile the address is never read.
            // With A transposed (`TA`: element (i, p) at `p·a_rs + i`) a
            // step's M values are adjacent and the steps walk forwards,
            // which the hardware prefetcher follows.
            if !TA {
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add((M + p % M) * t.a_rs + p).cast::<i8>());
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let at = if TA { p * t.a_rs + i } else { i * t.a_rs + p };
                let av = _mm512_set1_ps(*a.add(at));
                for v in 0..4 {
                    ri[v] = _mm512_fmadd_ps(av, bv[v], ri[v]);
                }
            }
        }
    }
    let mask = |v: usize| -> __mmask16 {
        let left = t.w.saturating_sub(16 * v).min(16);
        ((1u32 << left) - 1) as __mmask16
    };
    let masks = [mask(0), mask(1), mask(2), mask(3)];
    for (i, ri) in r.iter_mut().enumerate() {
        // SAFETY: row i of C holds w valid columns; masked lanes beyond w
        // are neither read nor written. A streamed store writes a whole
        // vector (its mask full: 16 valid columns) at a 64-byte aligned
        // address, as `_mm512_stream_ps` requires (checked just before).
        unsafe {
            let c = t.c.add(i * t.c_rs);
            for v in 0..4 {
                if masks[v] == 0 {
                    continue;
                }
                let mut x = ri[v];
                if t.acc {
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], c.add(16 * v)));
                }
                if let Some(bias) = t.bias {
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], bias.add(16 * v)));
                }
                let at = c.add(16 * v);
                if ST && masks[v] == u16::MAX && (at as usize).is_multiple_of(64) {
                    _mm512_stream_ps(at, x);
                } else {
                    _mm512_mask_storeu_ps(at, masks[v], x);
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn avx512_gemm_f32_6x64<const M: usize, const TA: bool, const ST: bool>(_: &Tile) {
    unreachable!("packed GEMM without AVX-512")
}
