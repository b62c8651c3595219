//! Dropout on cnnbench's NVRTC kernel. The mask comes from the same
//! counter-based generator as the CPU's, indexed by each element's NHWC
//! position, so both backends drop the same elements and `check` can
//! compare them.

use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::{DType, Layout};

pub struct DropoutGpuLayer {
    p: f32,
    salt: u64,
    dims: [usize; 4],
    dtype: DType,
    layout: Layout,
    mask: DeviceBuffer,
}

impl DropoutGpuLayer {
    /// `dims` is N, C, H, W; `salt` as on the CPU (the node's index).
    pub fn new(
        gpu: &Gpu,
        p: f32,
        salt: u64,
        dims: [usize; 4],
        dtype: DType,
        layout: Layout,
    ) -> GpuResult<Self> {
        let len = dims.iter().product();
        Ok(DropoutGpuLayer {
            p,
            salt,
            dims,
            dtype,
            layout,
            mask: DeviceBuffer::alloc(&gpu.stream, len)?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for DropoutGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        let salt = self.salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // A captured step reads the step's seed from the device at each
        // replay; an eager one passes it.
        let seed = match cx.step_seed_at {
            0 => cx.step_seed ^ salt,
            _ => salt,
        };
        // SAFETY: x, y and the mask hold N·C·H·W elements; a nonzero
        // `step_seed_at` holds a u64 (the capture's seed cell).
        unsafe {
            cx.kernels.dropout_fwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                y,
                self.mask.ptr(),
                self.dims,
                self.layout == Layout::Nchw,
                self.p,
                seed,
                cx.step_seed_at,
            )
        }
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
        let Some(dx) = dx[0] else { return Ok(()) };
        // SAFETY: as in `forward`.
        unsafe {
            cx.kernels.dropout_bwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                dy,
                self.mask.ptr(),
                dx,
                self.mask.bytes(),
                self.p,
            )
        }
    }

    fn scratch_bytes(&self) -> usize {
        self.mask.bytes()
    }

    fn kernels(&self) -> String {
        "nvrtc dropout".into()
    }
}
