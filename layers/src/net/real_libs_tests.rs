//! The GPU path checked against the real NVIDIA libraries, without a GPU:
//! cuDNN creates and sets descriptors without a driver (only `cudnnCreate`
//! needs one), so every descriptor the project would hand it for the zoo
//! is built here by the project's own constructors and must be accepted,
//! with cuDNN's output shapes equal to cnnbench's. NVRTC compiling every
//! kernel is tested beside the programs (`ops::cuda_programs`).
//!
//! CI's real-library stage runs these with pip's cuDNN on
//! `LD_LIBRARY_PATH` and `CNNBENCH_GPU_LIBS=required`; elsewhere they skip
//! when cuDNN is missing.

use super::graph::{Graph, Op};
use crate::backend::cuda::cudnn::{within_tensor_limit, TensorDesc};
use crate::backend::cuda::cudnn_ops::{bn_mode, ActivationDesc, LrnDesc, OpTensorDesc};
use crate::backend::cuda::gpu_lib_for_test;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::{DType, Layout};
use crate::ops::conv::cudnn_conv::ConvDescs;
use crate::ops::pool::cuda::PoolGpuLayer;
use crate::zoo;

const BATCHES: [usize; 2] = [16, 256];
const LAYOUTS: [Layout; 2] = [Layout::Nhwc, Layout::Nchw];

fn cudnn_here() -> bool {
    gpu_lib_for_test("cuDNN (libcudnn.so.9)", sys::missing().is_none())
}

fn zoo_graphs() -> Vec<Graph> {
    zoo::NAMES
        .iter()
        .map(|n| zoo::build(n).expect("a zoo model"))
        .collect()
}

/// cuDNN 9 refuses tensors of 2^31 elements or more
/// (`CUDNN_STATUS_NOT_SUPPORTED`).
fn too_big(elems: usize) -> bool {
    elems as u64 > crate::backend::cuda::cudnn::MAX_TENSOR_ELEMENTS
}

#[test]
fn real_libs_cudnn_accepts_every_zoo_convolution() {
    if !cudnn_here() {
        return;
    }
    let (mut sets, mut refused_big) = (0usize, 0usize);
    for g in zoo_graphs() {
        for (i, node) in g.nodes.iter().enumerate() {
            if !matches!(node.op, Op::Conv(_)) {
                continue;
            }
            for batch in BATCHES {
                let p = g.conv_shape(i, batch);
                let biggest = (p.mb * p.ic * p.ih * p.iw).max(p.mb * p.oc * p.oh * p.ow);
                for dtype in DType::ALL {
                    for layout in LAYOUTS {
                        let what = format!("{} {} b{batch} {dtype} {layout}", g.name, node.name);
                        let d = ConvDescs::new(p, dtype, layout);
                        if too_big(biggest) {
                            assert!(
                                d.is_err(),
                                "{what}: a tensor over 2^31 elements was accepted"
                            );
                            refused_big += 1;
                            continue;
                        }
                        let d = d.unwrap_or_else(|e| panic!("{what}: {e}"));
                        let mut dims = [0i32; 4];
                        // SAFETY: descriptors made above; out-array of 4.
                        let status = unsafe {
                            sys::cudnnGetConvolutionNdForwardOutputDim(
                                d.conv.0,
                                d.x.0,
                                d.w.0,
                                4,
                                dims.as_mut_ptr(),
                            )
                        };
                        assert_eq!(status, sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS, "{what}");
                        // cuDNN reports N, C, H, W whatever the layout.
                        let want = [p.mb, p.oc, p.oh, p.ow].map(|v| v as i32);
                        assert_eq!(dims, want, "{what}: output shape");
                        sets += 1;
                    }
                }
            }
        }
    }
    eprintln!(
        "cuDNN accepted {sets} convolution descriptor sets of the zoo \
         ({refused_big} refused, as expected, for tensors over 2^31 elements)"
    );
    assert!(sets > 10_000, "{sets}");
}

#[test]
fn real_libs_cudnn_accepts_every_zoo_pooling_lrn_activation_and_batch_norm() {
    if !cudnn_here() {
        return;
    }
    let mut count = [0usize; 4];
    for g in zoo_graphs() {
        for (i, node) in g.nodes.iter().enumerate() {
            for batch in BATCHES {
                let y = node.out;
                let x = node.inputs.first().map(|&t| g.nodes[t].out);
                for dtype in DType::ALL {
                    for layout in LAYOUTS {
                        let what = format!("{} {} b{batch} {dtype} {layout}", g.name, node.name);
                        let tensor = |d: crate::core::shape::Dims| {
                            TensorDesc::new(layout, dtype, batch, d.c, d.h, d.w)
                                .unwrap_or_else(|e| panic!("{what}: {e}"))
                        };
                        match node.op {
                            Op::Pool(_) => {
                                let (shape, max) = g.pool_shape(i, batch);
                                PoolGpuLayer::new(shape, max, dtype, layout)
                                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                                count[0] += 1;
                            }
                            Op::Lrn(s) => {
                                let _t = tensor(y);
                                LrnDesc::new(s.size, s.alpha, s.beta, s.k)
                                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                                count[1] += 1;
                            }
                            Op::Relu(_) | Op::Add(_) => {
                                let _t = tensor(y);
                                ActivationDesc::relu().unwrap_or_else(|e| panic!("{what}: {e}"));
                                OpTensorDesc::add().unwrap_or_else(|e| panic!("{what}: {e}"));
                                count[2] += 1;
                            }
                            Op::BatchNorm(_) => {
                                let t = tensor(x.expect("batch norm has an input"));
                                TensorDesc::derived_bn(&t, bn_mode(layout))
                                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                                count[3] += 1;
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "cuDNN accepted {} pooling, {} LRN, {} activation/add and {} batch-norm descriptor sets",
        count[0], count[1], count[2], count[3]
    );
    assert!(count.iter().all(|&c| c > 0), "{count:?}");
}

#[test]
fn real_libs_cudnn_refuses_tensors_exactly_past_the_limit() {
    if !cudnn_here() {
        return;
    }
    // cuDNN itself, without cnnbench's check in front.
    let set = |dims: [i32; 4]| {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the descriptor is destroyed
        // before returning.
        unsafe {
            assert_eq!(
                sys::cudnnCreateTensorDescriptor(&mut p),
                sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS
            );
            let st = sys::cudnnSetTensor4dDescriptor(
                p,
                sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                sys::cudnnDataType_t::CUDNN_DATA_HALF,
                dims[0],
                dims[1],
                dims[2],
                dims[3],
            );
            sys::cudnnDestroyTensorDescriptor(p);
            st
        }
    };
    let largest = [1, i32::MAX, 1, 1];
    let past = [2, 1 << 30, 1, 1];
    assert_eq!(set(largest), sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS);
    assert_eq!(set(past), sys::cudnnStatus_t::CUDNN_STATUS_NOT_SUPPORTED);
    let as_usize = |d: [i32; 4]| d.map(|v| v as usize);
    assert!(within_tensor_limit(as_usize(largest)).is_ok());
    assert!(within_tensor_limit(as_usize(past)).is_err());
    // cnnbench's descriptor names the limit instead of cuDNN's status.
    let e = TensorDesc::new(Layout::Nhwc, DType::F32, 1024, 64, 224, 224)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("at most 2^31-1"), "{e}");
}
