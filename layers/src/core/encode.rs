//! Host activations written straight into a device buffer's bytes: the
//! staged input batch is converted into pinned memory in one pass, with no
//! intermediate vectors (the step's input phase is timed).

use super::backend::BatchDims;
use super::dtype::Storage;
use super::{DType, Layout};
use half::{bf16, f16};
use rayon::prelude::*;

/// NHWC f32 values `x` of `d` as the bytes a buffer of `layout` and
/// `dtype` holds, written into `out` (exactly `d.len()` elements of the
/// dtype), one image per task: the same bytes as
/// `dtype.encode(&layout.from_nhwc(x, ..))`.
pub fn encode_nhwc_into(layout: Layout, dtype: DType, x: &[f32], d: BatchDims, out: &mut [u8]) {
    let size = dtype.size_bytes();
    assert_eq!(x.len(), d.len(), "encode: values for the dims");
    assert_eq!(out.len(), d.len() * size, "encode: bytes for the dims");
    let image = d.h * d.w * d.c;
    if image == 0 {
        return;
    }
    let storage = dtype.storage();
    out.par_chunks_mut(image * size)
        .zip(x.par_chunks(image))
        .for_each(|(dst, src)| match layout {
            Layout::Nhwc => {
                for (i, &v) in src.iter().enumerate() {
                    put(storage, dst, i, v);
                }
            }
            Layout::Nchw => {
                let plane = d.h * d.w;
                for (p, px) in src.chunks_exact(d.c).enumerate() {
                    for (ch, &v) in px.iter().enumerate() {
                        put(storage, dst, ch * plane + p, v);
                    }
                }
            }
        });
}

/// Element `i` of `dst` in `storage`, little-endian.
#[inline]
fn put(storage: Storage, dst: &mut [u8], i: usize, v: f32) {
    match storage {
        Storage::F32 => dst[i * 4..][..4].copy_from_slice(&v.to_le_bytes()),
        Storage::F16 => dst[i * 2..][..2].copy_from_slice(&f16::from_f32(v).to_le_bytes()),
        Storage::Bf16 => dst[i * 2..][..2].copy_from_slice(&bf16::from_f32(v).to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_encode_of_from_nhwc_for_every_layout_and_dtype() {
        let d = BatchDims {
            n: 3,
            h: 2,
            w: 5,
            c: 3,
        };
        let x: Vec<f32> = (0..d.len()).map(|i| i as f32 * 0.37 - 7.1).collect();
        for layout in [Layout::Nhwc, Layout::Nchw] {
            for dtype in [DType::F32, DType::Tf32, DType::F16, DType::Bf16] {
                let want = dtype.encode(&layout.from_nhwc(&x, d.n, d.h, d.w, d.c));
                let mut got = vec![0u8; d.len() * dtype.size_bytes()];
                encode_nhwc_into(layout, dtype, &x, d, &mut got);
                assert_eq!(got, want, "{layout:?} {dtype:?}");
            }
        }
    }
}
