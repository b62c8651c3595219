//! ReLU on cuDNN's activation forward and backward, or with
//! `--own-kernels` on cnnbench's vectorized kernels (`relu.cu`), whose
//! backward reads y and dy only and sums two output gradients on the way.

use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{ActivationDesc, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::nvrtc::vector_len;
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::backend::Layer;
use crate::core::dtype::Storage;

pub struct ReluGpuLayer {
    t: TensorDesc,
    act: ActivationDesc,
}

impl ReluGpuLayer {
    pub fn new(t: TensorDesc) -> GpuResult<ReluGpuLayer> {
        Ok(ReluGpuLayer {
            t,
            act: ActivationDesc::relu()?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for ReluGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold the described tensor.
        check_cudnn("cudnnActivationForward", unsafe {
            sys::cudnnActivationForward(
                cx.cudnn(),
                self.act.0,
                SCALARS.one(),
                self.t.0,
                void(x[0]),
                SCALARS.zero(),
                self.t.0,
                void(y),
            )
        })
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        let Some(dx) = dx[0] else { return Ok(()) };
        // SAFETY: every tensor is the described one.
        check_cudnn("cudnnActivationBackward", unsafe {
            sys::cudnnActivationBackward(
                cx.cudnn(),
                self.act.0,
                SCALARS.one(),
                self.t.0,
                void(y),
                self.t.0,
                void(dy),
                self.t.0,
                void(x[0]),
                SCALARS.zero(),
                self.t.0,
                void(dx),
            )
        })
    }

    fn kernels(&self) -> String {
        "cudnn activation relu".into()
    }
}

/// ReLU on `relu.cu` (`--own-kernels`): `n` elements of storage `st`.
pub struct OwnReluGpuLayer {
    n: usize,
    st: Storage,
}

impl OwnReluGpuLayer {
    pub fn new(n: usize, st: Storage) -> OwnReluGpuLayer {
        OwnReluGpuLayer { n, st }
    }
}

impl<'g> Layer<Cuda<'g>> for OwnReluGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x and y hold n elements of the run's storage.
        unsafe {
            cx.kernels
                .relu_fwd(&cx.gpu.stream, self.st, x[0], y, self.n)
        }
    }

    /// `dy` holds one gradient per consumer ([`Layer::sums_gradients`]):
    /// the first two are summed inside the kernel, any further one added
    /// by another pass over `dx`, in order (the CPU's order).
    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let Some(dx) = dx[0] else { return Ok(()) };
        let (first, rest) = dy.split_at(dy.len().min(2));
        // SAFETY: y, every dy and dx hold n elements of the run's
        // storage; dx is read before it is written, element by element.
        unsafe {
            let k = cx.kernels;
            k.relu_bwd(&cx.gpu.stream, self.st, y, first, dx, self.n)?;
            for &d in rest {
                k.relu_bwd(&cx.gpu.stream, self.st, y, &[dx, d], dx, self.n)?;
            }
        }
        Ok(())
    }

    fn sums_gradients(&self) -> bool {
        true
    }

    fn kernels(&self) -> String {
        let (name, per) = (self.st.name(), vector_len(self.st));
        format!("cnnbench relu_fwd/relu_bwd_{name} x{per} vectors")
    }
}
