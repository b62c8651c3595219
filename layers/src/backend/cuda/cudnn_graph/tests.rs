//! What cuDNN's graph API allows without a handle (hence without a GPU or
//! driver), against the real library: tensors, convolution descriptors
//! and operations finalize in every dtype, layout and direction, and bad
//! attributes come back as one-line errors naming the call. CI's
//! real-library stage runs them (`backend::cuda`) with pip's cuDNN;
//! elsewhere they skip when cuDNN is missing. The operation graph and
//! everything after it needs a handle: see `ops::conv::graph_tests`.

use super::convolution::{tensor_specs, ConvOperation, W, X, Y};
use super::descriptor::{status_name, Attr, Descriptor, Kind};
use super::engine::{config_name, refused_by};
use super::tensor::{alignment_of, strides};
use crate::backend::cuda::cudnn::ConvGeometry;
use crate::backend::cuda::gpu_lib_for_test;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};
use sys::cudnnBackendNumericalNote_t as Note;

fn cudnn_here() -> bool {
    gpu_lib_for_test("cuDNN (libcudnn.so.9)", sys::missing().is_none())
}

/// ResNet-50's 3x3 stride-2 convolution, and a grouped, dilated one.
fn shapes() -> [ConvShape; 2] {
    let r50 = ConvShape {
        mb: 4,
        g: 1,
        ic: 128,
        ih: 56,
        iw: 56,
        oc: 128,
        oh: 28,
        ow: 28,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 1,
        pw: 1,
        dh: 0,
        dw: 0,
    };
    let grouped = ConvShape {
        mb: 2,
        g: 4,
        ic: 16,
        ih: 9,
        iw: 9,
        oc: 8,
        oh: 5,
        ow: 5,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 2,
        pw: 2,
        dh: 1,
        dw: 1,
    };
    [r50, grouped]
}

fn geometry(p: &ConvShape) -> ConvGeometry {
    ConvGeometry {
        pad: [p.ph, p.pw],
        stride: [p.sh, p.sw],
        dilation: [p.dh + 1, p.dw + 1],
        groups: p.g,
    }
}

#[test]
fn strides_ids_and_alignment() {
    assert_eq!(strides(Layout::Nchw, [2, 3, 4, 5]), [60, 20, 5, 1]);
    assert_eq!(strides(Layout::Nhwc, [2, 3, 4, 5]), [60, 1, 15, 3]);
    let [x, w, y] = tensor_specs(&shapes()[1], DType::F16, Layout::Nhwc, 16);
    assert_eq!([x.id, w.id, y.id], [X, W, Y]);
    assert_eq!(w.dims, [8, 4, 3, 3], "K, C/groups, R, S");
    assert_eq!(alignment_of(&[256, 4096]), 16);
    assert_eq!(alignment_of(&[256, 4100]), 4);
    assert_eq!(alignment_of(&[3]), 1);
    assert_eq!(alignment_of(&[]), 16);
}

#[test]
fn engine_names_and_what_each_dtype_refuses() {
    assert_eq!(config_name(34, &[(2, 1), (13, 0)]), "eng34_k2=1_k13=0");
    assert_eq!(config_name(0, &[]), "eng0");
    let tc = [Note::CUDNN_NUMERICAL_NOTE_TENSOR_CORE as u32];
    assert!(refused_by(DType::F32, &tc).unwrap().contains("TF32"));
    for d in [DType::Tf32, DType::F16, DType::Bf16] {
        assert_eq!(refused_by(d, &tc), None, "{d}");
    }
    for n in [
        Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,
        Note::CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION,
    ] {
        for d in DType::ALL {
            assert!(refused_by(d, &[n as u32]).is_some(), "{d} {n:?}");
        }
    }
    let fft = [Note::CUDNN_NUMERICAL_NOTE_FFT as u32];
    assert_eq!(refused_by(DType::F32, &fft), None);
}

#[test]
fn real_libs_graph_tensors_and_operations_finalize_without_a_gpu() {
    if !cudnn_here() {
        return;
    }
    for p in shapes() {
        for dtype in DType::ALL {
            for layout in [Layout::Nhwc, Layout::Nchw] {
                for t in tensor_specs(&p, dtype, layout, 16) {
                    t.build()
                        .unwrap_or_else(|e| panic!("{dtype} {layout} {t:?}: {e}"));
                }
                for dir in Direction::ALL {
                    let op = ConvOperation::new(&p, &geometry(&p), dtype, layout, dir, 16)
                        .unwrap_or_else(|e| panic!("{dtype} {layout} {dir:?}: {e}"));
                    assert_eq!(op.dir, dir);
                }
            }
        }
    }
}

#[test]
fn real_libs_graph_refusals_are_one_line_naming_the_call() {
    if !cudnn_here() {
        return;
    }
    let one_line = |e: &crate::backend::cuda::GpuError| {
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    };
    // A negative dimension: refused at finalize, with cuDNN's reason.
    let mut t = Descriptor::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR).unwrap();
    t.set_data_type(
        Attr::CUDNN_ATTR_TENSOR_DATA_TYPE,
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    )
    .unwrap();
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, &[-1, 3, 4, 4])
        .unwrap();
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_STRIDES, &[48, 16, 4, 1])
        .unwrap();
    t.set_i64(Attr::CUDNN_ATTR_TENSOR_UNIQUE_ID, 1).unwrap();
    t.set_i64(Attr::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .unwrap();
    let s = one_line(&t.finalize().unwrap_err());
    assert!(
        s.starts_with(
            "cudnnBackendFinalize failed: CUDNN_STATUS_BAD_PARAM (CUDNN_BACKEND_TENSOR_DESCRIPTOR)"
        ),
        "{s}"
    );
    // cuDNN's own reason follows; its wording differs with and without a
    // driver ("... -1 ..." here, "_dimA[d] < 0" on an H200).
    let reason = s.split_once("DESCRIPTOR): ").map_or("", |(_, r)| r);
    assert!(!reason.trim().is_empty(), "cuDNN's own reason: {s}");
    // An attribute of the wrong type: refused when set, naming it.
    let mut t = Descriptor::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR).unwrap();
    let s = one_line(
        &t.set_f32(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, 2.0)
            .unwrap_err(),
    );
    assert!(
        s.starts_with(
            "cudnnBackendSetAttribute failed: CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE \
             (CUDNN_ATTR_TENSOR_DIMENSIONS of a CUDNN_BACKEND_TENSOR_DESCRIPTOR)"
        ),
        "{s}"
    );
    // Another descriptor's attribute, and an empty array.
    let s = one_line(
        &t.set_i64(Attr::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2)
            .unwrap_err(),
    );
    assert!(
        s.contains("CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS of a CUDNN_BACKEND_TENSOR_DESCRIPTOR"),
        "{s}"
    );
    let s = one_line(
        &t.set_i64s(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, &[])
            .unwrap_err(),
    );
    assert!(
        s.starts_with("cudnnBackendSetAttribute failed: CUDNN_STATUS_BAD_PARAM"),
        "{s}"
    );
    // Finalizing a tensor with nothing set.
    let s = one_line(&t.finalize().unwrap_err());
    assert!(
        s.starts_with("cudnnBackendFinalize failed: CUDNN_STATUS_BAD_PARAM"),
        "{s}"
    );
}

#[test]
fn real_libs_statuses_by_name() {
    if !cudnn_here() {
        return;
    }
    assert_eq!(status_name(0), "CUDNN_STATUS_SUCCESS");
    assert_eq!(status_name(3000), "CUDNN_STATUS_NOT_SUPPORTED");
    assert!(status_name(3002).starts_with("CUDNN_STATUS_NOT_SUPPORTED"));
}

/// ResNet-50's NormConv shapes (1x1 and 3x3, stride 1 and 2): every
/// operation of the fused graphs finalizes in each direction, in f16 and
/// bf16, without a GPU; the variant pack's ids are unique; and what
/// runtime fusion cannot take is refused in one line.
#[test]
fn real_libs_norm_conv_operations_finalize_without_a_gpu() {
    use super::norm_conv::{bound, refusal, NormConvGraph};
    if !cudnn_here() {
        return;
    }
    let [r50, grouped] = shapes();
    let one_by_one = ConvShape {
        kh: 1,
        kw: 1,
        ph: 0,
        pw: 0,
        sh: 1,
        sw: 1,
        oh: 56,
        ow: 56,
        oc: 256,
        ..r50
    };
    use Kind::*;
    let pw = CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR;
    let kinds = |dir| match dir {
        Direction::Fwd => vec![
            pw,
            pw,
            pw,
            CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR,
        ],
        Direction::BwdData => vec![
            pw,
            pw,
            CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            pw,
            CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR,
        ],
        Direction::BwdFilter => vec![
            pw,
            pw,
            pw,
            CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
        ],
    };
    for p in [r50, one_by_one] {
        for dir in Direction::ALL {
            for dtype in [DType::F16, DType::Bf16] {
                let nc = NormConvGraph::new(dir, &p, &geometry(&p), dtype, 16)
                    .unwrap_or_else(|e| panic!("{dir} {dtype} {p:?}: {e}"));
                let got: Vec<Kind> = nc.ops().iter().map(|d| d.kind()).collect();
                assert_eq!(got, kinds(dir), "{dir}");
                let b = bound(dir, &p, dtype);
                let mut ids: Vec<i64> = b.iter().map(|b| b.id).collect();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), b.len(), "{dir}: unique ids");
                let outputs = b.iter().skip_while(|b| !b.output);
                assert!(outputs.clone().all(|b| b.output), "{dir}: inputs first");
                assert!(outputs.count() >= 1);
            }
        }
    }
    for (p, dtype, layout, word) in [
        (r50, DType::F32, Layout::Nhwc, "f16 or bf16"),
        (r50, DType::Tf32, Layout::Nhwc, "f16 or bf16"),
        (r50, DType::F16, Layout::Nchw, "NHWC"),
        (grouped, DType::F16, Layout::Nhwc, "one"),
    ] {
        let why = refusal(&p, dtype, layout).expect("refused");
        assert!(why.contains(word) && !why.contains('\n'), "{why}");
    }
    for dir in Direction::ALL {
        let e = NormConvGraph::new(dir, &grouped, &geometry(&grouped), DType::F16, 16)
            .err()
            .expect("a grouped convolution is refused");
        let e = e.to_string();
        assert!(e.contains("NormConv graph") && !e.contains('\n'), "{e}");
    }
}
