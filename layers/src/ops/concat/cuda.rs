//! Channel concatenation on the GPU as strided copies: each input is a
//! block of columns of the output (NHWC: rows are pixels; NCHW: rows are
//! images), so one 2-D device copy per input moves it, and the backward
//! copies the same blocks back out.

use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::{error_driver, GpuResult};
use crate::core::backend::Layer;
use crate::core::Layout;
use cudarc::driver::sys;

/// One input's block: `width` bytes per row, `rows` rows, at byte `offset`
/// of each output row of `pitch` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub offset: usize,
    pub width: usize,
    pub rows: usize,
    pub pitch: usize,
}

/// The blocks of inputs with `widths` channels each, for `n` images of
/// `h x w` pixels of `elem` bytes.
pub fn blocks(layout: Layout, [n, h, w]: [usize; 3], widths: &[usize], elem: usize) -> Vec<Block> {
    let total: usize = widths.iter().sum();
    let (rows, per_channel) = match layout {
        Layout::Nhwc => (n * h * w, elem),
        Layout::Nchw => (n, h * w * elem),
    };
    let mut offset = 0;
    widths
        .iter()
        .map(|&c| {
            let b = Block {
                offset,
                width: c * per_channel,
                rows,
                pitch: total * per_channel,
            };
            offset += b.width;
            b
        })
        .collect()
}

pub struct ConcatGpuLayer {
    blocks: Vec<Block>,
}

impl ConcatGpuLayer {
    pub fn new(blocks: Vec<Block>) -> ConcatGpuLayer {
        ConcatGpuLayer { blocks }
    }
}

/// Copies block `b` between a packed input (`packed`) and the output
/// (`wide`), in the direction `to_wide` says, in stream order.
fn copy(cx: &GpuCtx, b: &Block, packed: DevPtr, wide: DevPtr, to_wide: bool) -> GpuResult<()> {
    let dev = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    let (src, src_x, src_pitch, dst, dst_x, dst_pitch) = if to_wide {
        (packed, 0, b.width, wide, b.offset, b.pitch)
    } else {
        (wide, b.offset, b.pitch, packed, 0, b.width)
    };
    let p = sys::CUDA_MEMCPY2D {
        srcXInBytes: src_x,
        srcY: 0,
        srcMemoryType: dev,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: dst_x,
        dstY: 0,
        dstMemoryType: dev,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: b.width,
        Height: b.rows,
    };
    // SAFETY: both buffers hold `rows` rows of their pitch (the executor
    // sized them from the graph).
    let r = unsafe { sys::cuMemcpy2DAsync_v2(&p, cx.gpu.stream.cu_stream()) };
    error_driver("cuMemcpy2DAsync", r)
}

impl<'g> Layer<Cuda<'g>> for ConcatGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        for (b, &xi) in self.blocks.iter().zip(x) {
            copy(cx, b, xi, y, true)?;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        _y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        for (b, dxi) in self.blocks.iter().zip(dx) {
            if let Some(dxi) = dxi {
                copy(cx, b, *dxi, dy, false)?;
            }
        }
        Ok(())
    }

    fn kernels(&self) -> String {
        "cuMemcpy2DAsync".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_per_layout() {
        // Two inputs of 3 and 5 channels, 2 images of 4x4, f16.
        let nhwc = blocks(Layout::Nhwc, [2, 4, 4], &[3, 5], 2);
        assert_eq!(
            nhwc,
            vec![
                Block {
                    offset: 0,
                    width: 6,
                    rows: 32,
                    pitch: 16
                },
                Block {
                    offset: 6,
                    width: 10,
                    rows: 32,
                    pitch: 16
                },
            ]
        );
        let nchw = blocks(Layout::Nchw, [2, 4, 4], &[3, 5], 2);
        assert_eq!(
            nchw[1],
            Block {
                offset: 96,
                width: 160,
                rows: 2,
                pitch: 256
            }
        );
    }
}
