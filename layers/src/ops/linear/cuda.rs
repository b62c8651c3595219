//! Fully connected on cuBLAS (GemmEx in the run's dtype, fp32
//! accumulation), the bias added by cuDNN and its gradient reduced by cuDNN
//! (or, for bf16, which cuDNN refuses there, by `conv/bias_grad.cu`).

use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx, GpuParam};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::SCALARS;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::backend::Layer;
use crate::core::{DType, Layout};
use crate::ops::conv::kernels::BiasGrad;
use cudarc::driver::CudaStream;
use std::sync::Arc;

pub struct LinearGpuLayer {
    n: usize,
    inf: usize,
    outf: usize,
    dtype: DType,
    /// `[in][out]`, as on the CPU.
    weight: GpuParam,
    bias: GpuParam,
    y: TensorDesc,
    b: TensorDesc,
    bias_grad: BiasGrad,
}

impl LinearGpuLayer {
    pub fn new(
        stream: &Arc<CudaStream>,
        [n, inf, outf]: [usize; 3],
        dtype: DType,
        weight: GpuParam,
        bias: GpuParam,
    ) -> GpuResult<LinearGpuLayer> {
        Ok(LinearGpuLayer {
            n,
            inf,
            outf,
            dtype,
            weight,
            bias,
            // 1x1 spatial: both layouts are the same memory.
            y: TensorDesc::new(Layout::Nchw, dtype, n, outf, 1, 1)?,
            b: TensorDesc::new(Layout::Nchw, dtype, 1, outf, 1, 1)?,
            bias_grad: BiasGrad::new(stream, dtype, [n, outf, 1], Layout::Nchw)?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for LinearGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        let g = &cx.gpu.cublas;
        // SAFETY: x is N×in, the weight in×out and y N×out, in the dtype.
        unsafe {
            g.gemm(
                self.dtype,
                [self.n, self.outf, self.inf],
                [false, false],
                void(x[0]),
                void(self.weight.compute()),
                void(y),
            )?;
            check_cudnn(
                "cudnnAddTensor",
                sys::cudnnAddTensor(
                    cx.cudnn(),
                    SCALARS.one(),
                    self.b.0,
                    void(self.bias.compute()),
                    SCALARS.one(),
                    self.y.0,
                    void(y),
                ),
            )
        }
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        _y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        let g = &cx.gpu.cublas;
        // SAFETY: shapes as in `forward`; dx is N×in.
        unsafe {
            if let Some(dx) = dx[0] {
                // dx[N×in] = dy[N×out]·Wᵀ.
                g.gemm(
                    self.dtype,
                    [self.n, self.inf, self.outf],
                    [false, true],
                    void(dy),
                    void(self.weight.compute()),
                    void(dx),
                )?;
            }
            // dW[in×out] = xᵀ·dy.
            g.gemm(
                self.dtype,
                [self.inf, self.outf, self.n],
                [true, false],
                void(x[0]),
                void(dy),
                void(self.weight.compute_grad()),
            )?;
            self.bias_grad.run(
                &cx.gpu.cudnn,
                Some(cx.kernels),
                &cx.gpu.stream,
                &self.y,
                dy,
                &self.b,
                self.bias.compute_grad(),
            )?;
        }
        self.weight.finish_grad(cx.gpu, cx.kernels)?;
        self.bias.finish_grad(cx.gpu, cx.kernels)
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        vec![&mut self.weight, &mut self.bias]
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        vec![&self.weight, &self.bias]
    }

    fn kernels(&self) -> String {
        match self.bias_grad {
            BiasGrad::Cudnn => format!("cublas GemmEx ({})", self.dtype),
            BiasGrad::Nvrtc { .. } => {
                format!("cublas GemmEx ({}) + {}", self.dtype, self.bias_grad.name())
            }
        }
    }
}
