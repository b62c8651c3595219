//! What the CUDA batch norm runs of what follows it (`--fuse-bn`): the
//! ReLU, or the residual add and its ReLU, through cuDNN's `Ex` calls, and
//! where cuDNN's fused kernels apply. Kept apart from the calls so that the
//! choices are testable without a GPU.
//!
//! cuDNN fuses only in its persistent NHWC kernels
//! (`CUDNN_BATCHNORM_SPATIAL_PERSISTENT`, which this layer uses for NHWC
//! data): `BN_ACTIVATION` and `BN_ADD_ACTIVATION` need NHWC-packed tensors,
//! and its documentation names half data with channels a multiple of 4
//! (and a workspace) as the case its fast kernels cover; MXNet's and
//! NVIDIA's MLPerf ResNet-50 run exactly that. Elsewhere (NCHW, f32/tf32,
//! odd channels) the cuDNN layer stays unfused: a ReLU applied after
//! cuDNN's output moves the same bytes as the separate ReLU layer
//! (`--own-kernels` makes that one fast). The own batch norm
//! (`--own-bn`, [`super::own`]) fuses in every dtype and layout.

use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::{DType, Layout};

/// What the layer runs besides the batch norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BnFused {
    None,
    /// `y = relu(bn(x))`, and the ReLU's mask in the backward pass.
    Relu,
    /// `y = relu(bn(x) + z)`; the backward pass also writes `dz`.
    AddRelu,
}

impl BnFused {
    /// cuDNN's name for it.
    pub fn ops(self) -> sys::cudnnBatchNormOps_t {
        use sys::cudnnBatchNormOps_t as O;
        match self {
            BnFused::None => O::CUDNN_BATCHNORM_OPS_BN,
            BnFused::Relu => O::CUDNN_BATCHNORM_OPS_BN_ACTIVATION,
            BnFused::AddRelu => O::CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION,
        }
    }

    /// For the per-layer table's kernels column.
    pub fn suffix(self) -> &'static str {
        match self {
            BnFused::None => "",
            BnFused::Relu => " +relu",
            BnFused::AddRelu => " +add+relu",
        }
    }
}

/// Whether cuDNN's fused kernels take a batch norm over `c` channels of
/// `dtype` data laid out as `layout`; if not, why, in a few words.
pub fn cudnn_fusion(layout: Layout, dtype: DType, c: usize) -> Result<(), &'static str> {
    if layout != Layout::Nhwc {
        return Err("cuDNN fuses in NHWC only");
    }
    // cuDNN documents its fused NHWC kernels for CUDNN_DATA_HALF (and
    // Paddle takes BN_ADD_ACTIVATION for float16 only); bf16 waits for a
    // GPU run that shows cuDNN takes it.
    if dtype != DType::F16 {
        return Err("cuDNN's fused kernels are documented for f16 data");
    }
    if !c.is_multiple_of(4) {
        return Err("channels not a multiple of 4");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cudnn_fuses_half_nhwc_with_channels_in_fours() {
        assert_eq!(cudnn_fusion(Layout::Nhwc, DType::F16, 64), Ok(()));
        assert!(cudnn_fusion(Layout::Nhwc, DType::Bf16, 2048).is_err());
        assert!(cudnn_fusion(Layout::Nchw, DType::F16, 64).is_err());
        assert!(cudnn_fusion(Layout::Nhwc, DType::F32, 64).is_err());
        assert!(cudnn_fusion(Layout::Nhwc, DType::Tf32, 64).is_err());
        assert!(cudnn_fusion(Layout::Nhwc, DType::F16, 6).is_err());
        // Every batch norm of ResNet-50 qualifies.
        let g = crate::zoo::build("resnet50").expect("zoo model");
        for (i, n) in g.nodes.iter().enumerate() {
            if n.op.spec().kind() == "bn" {
                let c = g.input_dims(i)[0].c;
                assert_eq!(
                    cudnn_fusion(Layout::Nhwc, DType::F16, c),
                    Ok(()),
                    "{}",
                    n.name
                );
            }
        }
    }

    /// What the fused calls are handed, built against the real cuDNN
    /// (descriptors need no driver; the size queries and the calls need a
    /// handle, so a GPU: the GPU tests run them): every batch norm of
    /// ResNet-50 that fuses, at batch 256, with the ReLU's descriptor.
    #[test]
    fn real_libs_cudnn_takes_the_fused_batch_norms_descriptors() {
        use crate::backend::cuda::cudnn::TensorDesc;
        use crate::backend::cuda::cudnn_ops::{bn_mode, ActivationDesc};
        if !crate::backend::cuda::gpu_lib_for_test(
            "cuDNN (libcudnn.so.9)",
            sys::missing().is_none(),
        ) {
            return;
        }
        ActivationDesc::relu().expect("the ReLU's descriptor");
        let g = crate::zoo::build("resnet50").expect("zoo model");
        let mode = bn_mode(Layout::Nhwc);
        assert_eq!(
            mode,
            sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL_PERSISTENT
        );
        for dtype in [DType::F16, DType::Bf16] {
            for (i, n) in g.nodes.iter().enumerate() {
                if n.op.spec().kind() != "bn" {
                    continue;
                }
                let d = g.input_dims(i)[0];
                let x = TensorDesc::new(Layout::Nhwc, dtype, 256, d.c, d.h, d.w)
                    .unwrap_or_else(|e| panic!("{} {dtype}: {e}", n.name));
                TensorDesc::derived_bn(&x, mode)
                    .unwrap_or_else(|e| panic!("{} {dtype}: {e}", n.name));
            }
        }
    }

    #[test]
    fn each_fusion_names_its_cudnn_ops() {
        use sys::cudnnBatchNormOps_t as O;
        assert_eq!(BnFused::None.ops(), O::CUDNN_BATCHNORM_OPS_BN);
        assert_eq!(BnFused::Relu.ops(), O::CUDNN_BATCHNORM_OPS_BN_ACTIVATION);
        assert_eq!(
            BnFused::AddRelu.ops(),
            O::CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
        );
        assert_eq!(BnFused::None.suffix(), "");
    }
}
