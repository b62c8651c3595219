//! Batch normalisation in training mode on cuDNN: batch statistics, the
//! running averages updated, and the saved mean and inverse deviation
//! reused by the backward pass. Scale, shift and statistics are fp32 for
//! every data type (cuDNN's rule for half data), so they are the master
//! parameters themselves.
//!
//! The `Ex` entry points run, as PyTorch calls them: only they reach
//! cuDNN's persistent NHWC kernels, which need a workspace and a reserve
//! space kept from the forward pass to the backward. Both are sized and
//! allocated once, here.
//!
//! With `--fuse-bn`, where cuDNN's fused kernels apply
//! ([`super::fused::cudnn_fusion`]), the layer also takes the ReLU after
//! it (`BN_ACTIVATION`), or the residual add after it with the add's ReLU
//! (`BN_ADD_ACTIVATION`: `y = relu(bn(x) + z)`, and `dz` in the backward
//! pass), as the executor's fusion pass offers them. Its workspace and
//! reserve space are then sized for whichever it takes.

use super::fused::{cudnn_fusion, BnFused};
use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx, GpuParam};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{bn_epsilon, bn_mode, ActivationDesc, SCALARS};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::{Layer, ReluFusion};
use crate::core::{DType, Layout};

pub struct BatchNormGpuLayer {
    x: TensorDesc,
    param: TensorDesc,
    mode: sys::cudnnBatchNormMode_t,
    eps: f64,
    momentum: f64,
    gamma: GpuParam,
    beta: GpuParam,
    running_mean: DeviceBuffer,
    running_var: DeviceBuffer,
    save_mean: DeviceBuffer,
    save_invstd: DeviceBuffer,
    /// cuDNN always writes dx: where it goes when nothing needs it.
    dx_sink: Option<DeviceBuffer>,
    workspace: DeviceBuffer,
    reserve: DeviceBuffer,
    /// The ReLU's descriptor where the layer may fuse (`--fuse-bn` and a
    /// case cuDNN fuses); `None` otherwise.
    relu: Option<ActivationDesc>,
    /// What it runs besides the batch norm, as the fusion pass decided.
    fused: BnFused,
}

impl BatchNormGpuLayer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        [n, c, h, w]: [usize; 4],
        dtype: DType,
        layout: Layout,
        eps: f32,
        momentum: f32,
        gamma: GpuParam,
        beta: GpuParam,
        input_grad: bool,
        fuse: bool,
    ) -> GpuResult<BatchNormGpuLayer> {
        let x = TensorDesc::new(layout, dtype, n, c, h, w)?;
        let mode = bn_mode(layout);
        let param = TensorDesc::derived_bn(&x, mode)?;
        let s = &gpu.stream;
        let f32s = |v: f32| -> GpuResult<DeviceBuffer> {
            DeviceBuffer::from_bytes(s, &DType::F32.encode(&vec![v; c]))
        };
        let relu = if fuse && cudnn_fusion(layout, dtype, c).is_ok() {
            Some(ActivationDesc::relu()?)
        } else {
            None
        };
        let (mut ws, mut reserve) = scratch_sizes(gpu, &x, &param, mode, BnFused::None, None)?;
        // A fused size query cuDNN refuses leaves the layer unfused, never
        // the model unbuilt: the plain sizes are already known.
        let fused_sizes = relu.as_ref().map(|act| -> GpuResult<(usize, usize)> {
            let (w1, r1) = scratch_sizes(gpu, &x, &param, mode, BnFused::Relu, Some(act))?;
            let (w2, r2) = scratch_sizes(gpu, &x, &param, mode, BnFused::AddRelu, Some(act))?;
            Ok((w1.max(w2), r1.max(r2)))
        });
        let relu = match fused_sizes {
            Some(Ok((w, r))) => {
                (ws, reserve) = (ws.max(w), reserve.max(r));
                relu
            }
            _ => None,
        };
        let dx_sink = if input_grad {
            None
        } else {
            Some(DeviceBuffer::alloc(s, n * c * h * w * dtype.size_bytes())?)
        };
        Ok(BatchNormGpuLayer {
            x,
            param,
            mode,
            eps: bn_epsilon(eps),
            momentum: momentum as f64,
            gamma,
            beta,
            running_mean: f32s(0.0)?,
            running_var: f32s(1.0)?,
            save_mean: f32s(0.0)?,
            save_invstd: f32s(0.0)?,
            dx_sink,
            workspace: DeviceBuffer::alloc(s, ws)?,
            reserve: DeviceBuffer::alloc(s, reserve)?,
            relu,
            fused: BnFused::None,
        })
    }

    /// The activation descriptor the fused calls take (null unfused).
    fn act(&self) -> sys::cudnnActivationDescriptor_t {
        match (&self.relu, self.fused) {
            (Some(a), BnFused::Relu | BnFused::AddRelu) => a.0,
            _ => std::ptr::null_mut(),
        }
    }

    /// The descriptor of a tensor the call reads or writes only when it
    /// runs `with` (null otherwise).
    fn desc_if(&self, with: bool) -> sys::cudnnTensorDescriptor_t {
        if with {
            self.x.0
        } else {
            std::ptr::null_mut()
        }
    }
}

/// The workspace (the larger of the two passes') and the reserve space the
/// `Ex` calls want for `fused` (with its activation `act`).
fn scratch_sizes(
    gpu: &Gpu,
    x: &TensorDesc,
    param: &TensorDesc,
    mode: sys::cudnnBatchNormMode_t,
    fused: BnFused,
    act: Option<&ActivationDesc>,
) -> GpuResult<(usize, usize)> {
    let h = gpu.cudnn.0;
    let act = act.map_or(std::ptr::null_mut(), |a| a.0);
    // z (and dz) only with the add. The backward's y descriptor is given
    // for every ops value, as the plain path (run on a GPU) always passed
    // it and as Paddle and XLA query it; only the backward call itself
    // passes a null y where the ops read none.
    let null_t = std::ptr::null_mut();
    let z = if fused == BnFused::AddRelu {
        x.0
    } else {
        null_t
    };
    let y = x.0;
    let ops = fused.ops();
    let (mut fwd, mut bwd, mut reserve) = (0usize, 0usize, 0usize);
    // SAFETY: valid handle and descriptors (or null where the ops read no
    // such tensor); out-pointers to locals.
    unsafe {
        check_cudnn(
            "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize",
            sys::cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                h, mode, ops, x.0, z, x.0, param.0, act, &mut fwd,
            ),
        )?;
        check_cudnn(
            "cudnnGetBatchNormalizationBackwardExWorkspaceSize",
            sys::cudnnGetBatchNormalizationBackwardExWorkspaceSize(
                h, mode, ops, x.0, y, x.0, z, x.0, param.0, act, &mut bwd,
            ),
        )?;
        check_cudnn(
            "cudnnGetBatchNormalizationTrainingExReserveSpaceSize",
            sys::cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
                h,
                mode,
                ops,
                act,
                x.0,
                &mut reserve,
            ),
        )?;
    }
    Ok((fwd.max(bwd), reserve))
}

impl<'g> Layer<Cuda<'g>> for BatchNormGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        let add = self.fused == BnFused::AddRelu;
        let z = if add { void(x[1]) } else { std::ptr::null() };
        // SAFETY: x, y (and z, with the add) hold the described tensor;
        // the statistics and parameters hold C floats; workspace and
        // reserve were sized for these descriptors and ops.
        check_cudnn("cudnnBatchNormalizationForwardTrainingEx", unsafe {
            sys::cudnnBatchNormalizationForwardTrainingEx(
                cx.cudnn(),
                self.mode,
                self.fused.ops(),
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
                self.desc_if(add),
                z,
                self.x.0,
                void(y),
                self.param.0,
                self.gamma.value.as_void(),
                self.beta.value.as_void(),
                self.momentum,
                self.running_mean.as_void(),
                self.running_var.as_void(),
                self.eps,
                self.save_mean.as_void(),
                self.save_invstd.as_void(),
                self.act(),
                self.workspace.as_void(),
                self.workspace.bytes(),
                self.reserve.as_void(),
                self.reserve.bytes(),
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
        let (act, add) = (self.fused != BnFused::None, self.fused == BnFused::AddRelu);
        // The add's output gradient: the executor always gives the fused
        // layer its buffer (the one the add hands on to z).
        let dz = match (add, dx.get(1).copied().flatten()) {
            (true, Some(p)) => void(p),
            (true, None) => {
                return Err(crate::backend::cuda::GpuError {
                    call: "cudnnBatchNormalizationBackwardEx",
                    status: "a fused add without its gradient buffer".into(),
                    oom: false,
                })
            }
            (false, _) => std::ptr::null_mut(),
        };
        let dx = dx[0].unwrap_or_else(|| self.dx_sink.as_ref().map_or(0, |b| b.ptr()));
        let y = if act { void(y) } else { std::ptr::null() };
        // SAFETY: as in `forward`; dx (and dz) are sized like x; y is the
        // fused forward's output; the reserve space holds what this
        // layer's forward left.
        check_cudnn("cudnnBatchNormalizationBackwardEx", unsafe {
            sys::cudnnBatchNormalizationBackwardEx(
                cx.cudnn(),
                self.mode,
                self.fused.ops(),
                SCALARS.one(),
                SCALARS.zero(),
                SCALARS.one(),
                SCALARS.zero(),
                self.x.0,
                void(x[0]),
                self.desc_if(act),
                y,
                self.x.0,
                void(dy),
                self.desc_if(add),
                dz,
                self.x.0,
                void(dx),
                self.param.0,
                self.gamma.value.as_void(),
                self.beta.value.as_void(),
                self.gamma.grad.as_void(),
                self.beta.grad.as_void(),
                self.eps,
                self.save_mean.as_void(),
                self.save_invstd.as_void(),
                self.act(),
                self.workspace.as_void(),
                self.workspace.bytes(),
                self.reserve.as_void(),
                self.reserve.bytes(),
            )
        })
    }

    /// Forward and backward together (cuDNN's fused backward reads the
    /// ReLU's output gradient), where cuDNN fuses and the executor allows
    /// the backward; otherwise nothing.
    fn fuse_relu(&mut self, backward: bool) -> ReluFusion {
        if self.relu.is_none() || !backward {
            return ReluFusion::None;
        }
        self.fused = BnFused::Relu;
        ReluFusion::ForwardBackward
    }

    fn fuse_add_relu(&mut self) -> bool {
        if self.relu.is_none() {
            return false;
        }
        self.fused = BnFused::AddRelu;
        true
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        vec![&mut self.gamma, &mut self.beta]
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        vec![&self.gamma, &self.beta]
    }

    fn scratch_bytes(&self) -> usize {
        4 * self.running_mean.bytes()
            + self.dx_sink.as_ref().map_or(0, |b| b.bytes())
            + self.workspace.bytes()
            + self.reserve.bytes()
    }

    fn kernels(&self) -> String {
        let mode = format!("cudnn batchnorm {:?}", self.mode)
            .replace("CUDNN_BATCHNORM_", "")
            .to_lowercase();
        mode + self.fused.suffix()
    }
}
