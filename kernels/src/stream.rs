//! Non-temporal stores for outputs larger than the caches.
//!
//! A plain store to a line that is not cached first reads it from memory
//! (read for ownership), so a pass writing a tensor too large to stay in
//! the caches moves it twice. A non-temporal store writes the line without
//! reading it.
//!
//! The passes compute a block of rows into a buffer on the stack and copy
//! it out with [`copy`], so their compute loops stay the plain,
//! autovectorised loops of [`on_isa!`](crate::on_isa). That staging costs
//! some of the gain: on a 2-core Zen 4 VM with 51 MB tensors
//! (`kernels/examples/stream_stores.rs`, three runs of 4 rounds in ABBA
//! order) a
//! pass reading two tensors and writing a third ran 1.04-1.27x faster
//! streamed and a ReLU 0.99-1.15x, where a ReLU storing straight from its
//! registers had run 1.4x (a first experiment, not kept). The batch norms'
//! passes use it: in ResNet-50's step at batch 16 their time went from
//! 233-252 to 216-217 ms (`--per-layer`, two runs each, ABBA).
//!
//! The direct convolution's micro-kernel (forward, backward-data) streams
//! its last pass straight from its registers instead (`Simd::stream` in
//! `conv::direct`), fenced once per work item, and so does the packed 1x1
//! GEMM (`conv::im2col_gemm::packed`, forward and backward-data) where its
//! reduction takes one pass.
//!
//! Where the output is under half the cache counted on its reader may find
//! it there, so [`bypasses_cache`] keeps plain stores for it.

use crate::Isa;

/// Floats of the stack buffer a pass fills before copying it out: 8 KiB,
/// well inside L1.
pub const BLOCK_FLOATS: usize = 2048;

/// Whether a pass writing `floats` f32 should store around the caches: it
/// is more than half the cache counted on ([`crate::bandwidth::cache_bytes`]),
/// so that little of it would still be cached for its reader.
pub fn bypasses_cache(floats: usize) -> bool {
    // This crate's tests stream from 64 KiB, so that their small tensors
    // take both paths.
    let threshold = if cfg!(test) {
        64 << 10
    } else {
        crate::bandwidth::cache_bytes() / 2
    };
    floats as u64 * 4 > threshold
}

/// `dst = src`, with non-temporal stores for the whole aligned vectors of
/// `dst` where `isa` has them (plain stores at its unaligned ends). Call
/// [`fence`] before another thread reads `dst`.
#[inline]
pub fn copy(isa: Isa, dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "copy of equal lengths");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the ISA is supported (checked here: `Isa` values can be
        // built for any CPU).
        Isa::Avx512 if Isa::Avx512.is_supported() => unsafe { copy_avx512(dst, src) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if Isa::Avx2.is_supported() => unsafe { copy_avx2(dst, src) },
        _ => dst.copy_from_slice(src),
    }
}

/// Orders this thread's non-temporal stores before its later stores (such
/// as the one that tells another thread its task is done): they are weakly
/// ordered on x86.
#[inline]
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// The number of leading floats of `dst` before a `bytes`-aligned address
/// (a float's address is a multiple of 4).
#[cfg(target_arch = "x86_64")]
fn unaligned_head(dst: &[f32], bytes: usize) -> usize {
    let mis = dst.as_ptr() as usize % bytes;
    (((bytes - mis) % bytes) / 4).min(dst.len())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn copy_avx512(dst: &mut [f32], src: &[f32]) {
    use std::arch::x86_64::{_mm512_loadu_ps, _mm512_stream_ps};
    let head = unaligned_head(dst, 64);
    let body = (dst.len() - head) / 16 * 16;
    dst[..head].copy_from_slice(&src[..head]);
    let (d, s) = (dst[head..].as_mut_ptr(), src[head..].as_ptr());
    for i in (0..body).step_by(16) {
        // SAFETY: i + 16 <= body <= the lengths after `head`; `d + i` is
        // 64-byte aligned (head's end is, and i is a multiple of 16).
        unsafe { _mm512_stream_ps(d.add(i), _mm512_loadu_ps(s.add(i))) };
    }
    dst[head + body..].copy_from_slice(&src[head + body..]);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_avx2(dst: &mut [f32], src: &[f32]) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_stream_ps};
    let head = unaligned_head(dst, 32);
    let body = (dst.len() - head) / 8 * 8;
    dst[..head].copy_from_slice(&src[..head]);
    let (d, s) = (dst[head..].as_mut_ptr(), src[head..].as_ptr());
    for i in (0..body).step_by(8) {
        // SAFETY: as in `copy_avx512`, with 8 lanes and 32 bytes.
        unsafe { _mm256_stream_ps(d.add(i), _mm256_loadu_ps(s.add(i))) };
    }
    dst[head + body..].copy_from_slice(&src[head + body..]);
}

/// `f(row, rows_out)` over `out` (`c` floats a row) in groups of whole
/// rows, `row` the group's first row in `out`. With `stream` (and rows
/// that fit [`BLOCK_FLOATS`]), `f` fills a buffer on the stack that is
/// copied out with non-temporal stores, then fenced; otherwise it writes
/// `out` itself. Either way `f` must write every float of `rows_out` and
/// read none (the stage holds the previous group's values). Inline it
/// into an [`on_isa!`](crate::on_isa) body, and mark `f`
/// `#[inline(always)]`.
#[inline(always)]
pub fn rows_out(
    isa: Isa,
    c: usize,
    out: &mut [f32],
    stream: bool,
    mut f: impl FnMut(usize, &mut [f32]),
) {
    debug_assert_eq!(out.len() % c, 0, "whole rows");
    if !stream || c > BLOCK_FLOATS {
        f(0, out);
        return;
    }
    let mut buf = [0.0f32; BLOCK_FLOATS];
    let per = BLOCK_FLOATS / c * c;
    for (b, dst) in out.chunks_mut(per).enumerate() {
        let tmp = &mut buf[..dst.len()];
        f(b * (per / c), tmp);
        copy(isa, dst, tmp);
    }
    fence();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ISA, every alignment of the destination and lengths around
    /// the vector widths: the copy is exact.
    #[test]
    fn copy_is_exact_at_every_offset_and_length() {
        let src: Vec<f32> = (0..300).map(|i| i as f32 * 0.5 - 7.0).collect();
        for isa in Isa::supported() {
            for off in 0..17 {
                for len in [0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 283] {
                    let mut dst = vec![f32::NAN; 300 + 17];
                    copy(isa, &mut dst[off..off + len], &src[..len]);
                    fence();
                    assert_eq!(&dst[off..off + len], &src[..len], "{isa} +{off} x{len}");
                    assert!(dst[..off].iter().all(|v| v.is_nan()), "{isa} before");
                    assert!(dst[off + len..].iter().all(|v| v.is_nan()), "{isa} after");
                }
            }
        }
    }

    /// Streamed or not, with rows wider and narrower than the block: each
    /// row gets what `f` wrote for it.
    #[test]
    fn rows_out_gives_each_row_its_values() {
        for isa in Isa::supported() {
            for c in [3, 64, 100, BLOCK_FLOATS, BLOCK_FLOATS + 5] {
                for stream in [false, true] {
                    let rows = 2 * BLOCK_FLOATS / c + 3;
                    let mut out = vec![f32::NAN; rows * c];
                    rows_out(isa, c, &mut out[..], stream, |r0, o| {
                        for (i, v) in o.iter_mut().enumerate() {
                            *v = (r0 * c + i) as f32;
                        }
                    });
                    let want: Vec<f32> = (0..rows * c).map(|i| i as f32).collect();
                    assert_eq!(out, want, "{isa} c {c} stream {stream}");
                }
            }
        }
    }
}
