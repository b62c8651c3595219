//! The tests of the op's cuDNN code (`super::super::cudnn_*`, moved with
//! it from `backend::cuda::rnn`): its algorithms, descriptors, weight
//! layout and passes. They sit under `cuda` so that the GPU test filters
//! (`::cuda`, `real_libs`) select them.

use crate::backend::cuda::cudnn;
use crate::backend::cuda::error::{GpuError, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::backend::cuda::Gpu;
use crate::backend::cuda::{gpu_lib_for_test, no_gpu_for_test};
use crate::core::DType;
use crate::ops::recurrent::cudnn_descs::{
    cell_mode, math_type, set_rnn, RnnDataDesc, RnnDesc, RnnDescs, RnnForm,
    CUDNN_RNN_PADDED_IO_DISABLED, CUDNN_RNN_PADDED_IO_ENABLED,
};
use crate::ops::recurrent::cudnn_problem::GpuRnn;
use crate::ops::recurrent::cudnn_space::RnnSpace;
use crate::ops::recurrent::cudnn_weights::{lin_layers, lin_layers_in, packed_dims, LinLayer};
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::rnn::{self as cpu, reference, Inputs, Workspace};
use cnnbench_kernels::rnn::{Cell, Direction, RnnShape, Weights};
use std::ffi::c_void;

fn cudnn_here() -> bool {
    gpu_lib_for_test("cuDNN (libcudnn.so.9)", sys::missing().is_none())
}

fn small(cell: Cell, direction: Direction) -> RnnShape {
    RnnShape {
        cell,
        direction,
        layers: 2,
        t: 5,
        mb: 3,
        input: 7,
        hidden: 6,
    }
}

/// DeepBench's largest training LSTM.
fn deepbench_lstm(direction: Direction) -> RnnShape {
    RnnShape {
        cell: Cell::Lstm,
        direction,
        layers: 1,
        t: 25,
        mb: 64,
        input: 2048,
        hidden: 2048,
    }
}

const SUPPORTED: [Direction; 2] = [Direction::Left2Right, Direction::Concat];

#[test]
fn algorithm_names_round_trip() {
    for a in RnnAlgo::ALL {
        assert_eq!(RnnAlgo::parse(a.name()), Ok(a));
        assert_eq!(a.to_string(), a.name());
    }
    let e = RnnAlgo::parse("persistent").unwrap_err();
    assert!(
        e.contains("persist-static-small-h") && !e.contains('\n'),
        "{e}"
    );
}

#[test]
fn math_per_dtype_never_lets_f32_run_as_tf32() {
    assert_eq!(math_type(DType::F32), sys::cudnnMathType_t::CUDNN_FMA_MATH);
    assert_eq!(
        math_type(DType::Tf32),
        sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
    );
    for d in [DType::F16, DType::Bf16] {
        assert_eq!(math_type(d), sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH);
    }
}

#[test]
fn right_to_left_sum_and_zero_sizes_are_refused_in_one_line() {
    // Refused before cuDNN is touched: no library needed.
    let cases = [
        (
            small(Cell::Lstm, Direction::Right2Left),
            "cuDNN reads left to right only; run --direction left2right or bidirectional-concat",
        ),
        (
            small(Cell::Gru, Direction::Sum),
            "bidirectional-sum has no cuDNN mode",
        ),
        (
            RnnShape {
                hidden: 0,
                ..small(Cell::Lstm, Direction::Left2Right)
            },
            "hidden size of at least 1",
        ),
        (
            RnnShape {
                mb: 0,
                ..small(Cell::RnnTanh, Direction::Concat)
            },
            "minibatch of at least 1",
        ),
        (
            RnnShape {
                t: 1 << 20,
                mb: 1 << 8,
                input: 1 << 4,
                ..small(Cell::RnnRelu, Direction::Left2Right)
            },
            "2^31-1",
        ),
        (
            RnnShape {
                hidden: 1 << 31,
                ..small(Cell::RnnRelu, Direction::Left2Right)
            },
            "C int",
        ),
    ];
    for (shape, want) in cases {
        let e = match RnnDescs::new(shape, DType::F32, RnnAlgo::Standard) {
            Ok(_) => panic!("{shape:?} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{shape:?}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn weight_params_tile_pytorchs_tensors() {
    let mut shapes = Vec::new();
    for cell in Cell::ALL {
        for direction in SUPPORTED {
            shapes.push(small(cell, direction));
            shapes.push(RnnShape {
                layers: 3,
                input: 1,
                ..small(cell, direction)
            });
        }
    }
    shapes.push(deepbench_lstm(Direction::Left2Right));
    for shape in shapes {
        let all = lin_layers(&shape);
        let gates = shape.cell.gates();
        assert_eq!(all.len(), shape.sets() * 2 * gates, "{shape:?}");
        for s in 0..shape.sets() {
            let [ih, hh, bi, bh] = shape.set_shapes(s);
            let mine: Vec<_> = all.iter().filter(|l| l.pseudo_layer == s).collect();
            for (recurrent, w, b) in [(false, &ih, &bi), (true, &hh, &bh)] {
                let part: Vec<_> = mine.iter().filter(|l| l.recurrent == recurrent).collect();
                // The gates' [h, cols] blocks stacked are PyTorch's
                // [gates·h, cols] matrix, and their biases its bias,
                // each element covered once, in order.
                assert_eq!(part.len(), gates);
                let (mut next_m, mut next_b) = (0, 0);
                for (g, l) in part.iter().enumerate() {
                    assert_eq!(l.gate, g);
                    assert_eq!(l.lin, g + if recurrent { gates } else { 0 });
                    assert_eq!(l.cols, w[1], "{shape:?} set {s}");
                    let (m, bias) = l.source();
                    assert_eq!((m.start, bias.start), (next_m, next_b));
                    (next_m, next_b) = (m.end, bias.end);
                }
                assert_eq!(vec![next_m / w[1], w[1]], *w, "{shape:?} set {s}");
                assert_eq!(vec![next_b], *b, "{shape:?} set {s}");
            }
        }
    }
}

/// Reads back what cuDNN stored in an RNN descriptor.
fn stored(rnn: &RnnDesc) -> [i64; 14] {
    let mut e = [0u32; 9];
    let mut i = [0i32; 4];
    let mut dropout: sys::cudnnDropoutDescriptor_t = std::ptr::null_mut();
    let mut aux = 0u32;
    let [algo, cell, bias, dir, input_mode, dt, prec, math, _] = &mut e;
    let [input, hidden, proj, layers] = &mut i;
    // SAFETY: valid descriptor; every out-pointer is to a local (enums
    // as their C numbers in u32s).
    let status = unsafe {
        sys::cudnnGetRNNDescriptor_v8(
            rnn.0,
            algo as *mut u32 as *mut sys::cudnnRNNAlgo_t,
            cell as *mut u32 as *mut sys::cudnnRNNMode_t,
            bias as *mut u32 as *mut sys::cudnnRNNBiasMode_t,
            dir as *mut u32 as *mut sys::cudnnDirectionMode_t,
            input_mode as *mut u32 as *mut sys::cudnnRNNInputMode_t,
            dt as *mut u32 as *mut sys::cudnnDataType_t,
            prec as *mut u32 as *mut sys::cudnnDataType_t,
            math as *mut u32 as *mut sys::cudnnMathType_t,
            input,
            hidden,
            proj,
            layers,
            &mut dropout,
            &mut aux,
        )
    };
    assert_eq!(status, sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS);
    assert!(dropout.is_null());
    let mut out = [0i64; 14];
    for (o, v) in out.iter_mut().zip(e.iter().take(8)) {
        *o = *v as i64;
    }
    for (o, v) in out[8..].iter_mut().zip(i) {
        *o = v as i64;
    }
    out[12] = aux as i64;
    out
}

/// Reads back an RNN data descriptor: dtype, layout, t, mb, vector,
/// and whether every length is `t`.
fn stored_data(d: &RnnDataDesc, mb: usize) -> ([i32; 5], bool) {
    let (mut dt, mut layout, mut t, mut b, mut v) = (0u32, 0u32, 0, 0, 0);
    let mut lengths = vec![0i32; mb];
    // cuDNN 9.26 refuses a NULL padding fill here (BAD_PARAM), though
    // the setter takes one; it writes one element of the data type.
    let mut fill = 0f64;
    // SAFETY: valid descriptor; `lengths` holds `mb` ints; the fill
    // has room for any data type (8 bytes).
    let status = unsafe {
        sys::cudnnGetRNNDataDescriptor(
            d.0,
            &mut dt as *mut u32 as *mut sys::cudnnDataType_t,
            &mut layout as *mut u32 as *mut sys::cudnnRNNDataLayout_t,
            &mut t,
            &mut b,
            &mut v,
            mb as i32,
            lengths.as_mut_ptr(),
            &mut fill as *mut f64 as *mut c_void,
        )
    };
    assert_eq!(status, sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS);
    (
        [dt as i32, layout as i32, t, b, v],
        lengths.iter().all(|&l| l == t),
    )
}

/// A data descriptor as cuDNN stores it: the dtype, `layout`, `t`, `mb`,
/// `vector` features, and every sequence `t` long.
fn assert_data_desc(
    desc: &RnnDataDesc,
    dtype: DType,
    layout: sys::cudnnRNNDataLayout_t,
    shape: &RnnShape,
    vector: usize,
    what: &str,
) {
    let (got, all_t) = stored_data(desc, shape.mb);
    let want = [
        cudnn::data_type(dtype) as i32,
        layout as i32,
        shape.t as i32,
        shape.mb as i32,
        vector as i32,
    ];
    assert_eq!(got, want, "{what}");
    assert!(all_t, "{what}: sequence lengths");
}

#[test]
fn real_libs_cudnn_accepts_every_rnn_descriptor_set() {
    if !cudnn_here() {
        return;
    }
    let mut shapes = Vec::new();
    for cell in Cell::ALL {
        for direction in SUPPORTED {
            shapes.push(small(cell, direction));
        }
    }
    shapes.extend(SUPPORTED.map(deepbench_lstm));
    let mut sets = 0;
    for shape in shapes {
        for dtype in DType::ALL {
            for algo in RnnAlgo::ALL {
                let what = format!("{shape:?} {dtype} {algo}");
                let d = RnnDescs::new(shape, dtype, algo).unwrap_or_else(|e| panic!("{what}: {e}"));
                let bidir = shape.direction == Direction::Concat;
                let want = [
                    algo.raw() as i64,
                    cell_mode(shape.cell) as i64,
                    sys::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS as i64,
                    bidir as i64,
                    sys::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT as i64,
                    cudnn::data_type(dtype) as i64,
                    sys::cudnnDataType_t::CUDNN_DATA_FLOAT as i64,
                    math_type(dtype) as i64,
                    shape.input as i64,
                    shape.hidden as i64,
                    shape.hidden as i64,
                    shape.layers as i64,
                    CUDNN_RNN_PADDED_IO_DISABLED as i64,
                    0,
                ];
                assert_eq!(stored(&d.rnn), want, "{what}");
                let packed = sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED;
                for (desc, vector) in [(&d.x, shape.input), (&d.y, shape.output())] {
                    assert_data_desc(desc, dtype, packed, &shape, vector, &what);
                }
                assert_eq!(
                    packed_dims(&d.h).unwrap_or_else(|e| panic!("{what}: {e}")),
                    vec![shape.sets(), shape.mb, shape.hidden],
                    "{what}"
                );
                sets += 1;
            }
        }
    }
    eprintln!("cuDNN accepted {sets} RNN descriptor sets");
    assert_eq!(sets, (8 + 2) * 4 * 4);
}

#[test]
fn real_libs_cudnn_refuses_zero_hidden_itself() {
    if !cudnn_here() {
        return;
    }
    // Beside our own check, cuDNN's setter refuses it too (so nothing
    // relies on our check alone for a descriptor cuDNN cannot run).
    let rnn = RnnDesc::create().expect("a descriptor");
    let shape = RnnShape {
        hidden: 0,
        ..small(Cell::Lstm, Direction::Left2Right)
    };
    let e = set_rnn(
        &rnn,
        &shape,
        DType::F32,
        RnnAlgo::Standard,
        RnnForm::Pytorch,
    )
    .expect_err("hidden 0 accepted")
    .to_string();
    assert!(e.contains("CUDNN_STATUS_BAD_PARAM"), "{e}");
    assert!(!e.contains('\n'));
}

/// Seeded values in [-scale, scale).
fn filled(len: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut v = vec![0.0; len];
    cnnbench_kernels::rng::fill_uniform(&mut v, seed, scale);
    v
}

fn close(what: &str, got: &[f32], want: &[f32], tol: f64) {
    let e = rel_l2_error(got, want);
    assert!(e <= tol, "{what}: relative L2 error {e:.3e} > {tol:.0e}");
}

/// The persistent algorithms have limits (hidden size, minibatch,
/// GPU) that cuDNN checks when sizing or running the work; a refusal
/// there is reported, not failed.
fn persist_limit(algo: RnnAlgo, e: &GpuError) -> bool {
    algo != RnnAlgo::Standard
        && (e.status.contains("NOT_SUPPORTED") || e.status.contains("BAD_PARAM"))
}

/// Forward against the CPU kernels, both backward passes against the
/// f64 reference, and the weights' round trip through cuDNN's layout.
fn check_on(gpu: &Gpu, shape: RnnShape, dtype: DType, algo: RnnAlgo, tol: f64) {
    let what = format!("{shape:?} {dtype} {algo}");
    let mut rnn = match GpuRnn::new(gpu, shape, dtype, algo) {
        Ok(r) => r,
        Err(e) if persist_limit(algo, &e) => {
            eprintln!("{what}: {e}");
            return;
        }
        Err(e) => panic!("{what}: {e}"),
    };
    let scale = 1.0 / (shape.hidden as f32).sqrt();
    let weights: Vec<Weights> = (0..shape.sets())
        .map(|s| {
            let mut w = Weights::zeros(&shape, s);
            for (i, t) in w.tensors_mut().into_iter().enumerate() {
                *t = filled(t.len(), 10 + 4 * s as u64 + i as u64, scale);
            }
            w
        })
        .collect();
    let lstm = shape.cell == Cell::Lstm;
    let c_len = if lstm { shape.state_len() } else { 0 };
    let x = filled(shape.x_len(), 1, 1.0);
    let hx = filled(shape.state_len(), 2, 0.5);
    let cx = filled(c_len, 3, 0.5);
    let dy = filled(shape.y_len(), 4, 1.0);
    let dhy = filled(shape.state_len(), 5, 0.5);
    let dcy = filled(c_len, 6, 0.5);
    rnn.set_weights(&weights).expect("weights");
    let back = rnn.download_weights().expect("weights back");
    for (s, (g, w)) in back.iter().zip(&weights).enumerate() {
        for (a, b) in g.tensors().iter().zip(w.tensors()) {
            let mut b = b.to_vec();
            dtype.round_in_place(&mut b);
            assert_eq!(*a, &b[..], "{what}: weights of set {s} back");
        }
    }
    rnn.upload_inputs(&x, &hx, &cx, &dy, &dhy, &dcy)
        .expect("inputs");
    let run = |r: &mut GpuRnn| -> GpuResult<()> {
        r.forward()?;
        r.backward_data()?;
        r.backward_weights()?;
        gpu.synchronize()
    };
    match run(&mut rnn) {
        Ok(()) => {}
        Err(e) if persist_limit(algo, &e) => {
            eprintln!("{what}: {e}");
            return;
        }
        Err(e) => panic!("{what}: {e}"),
    }
    let got = rnn.download_outputs().expect("outputs");
    let dw = rnn.download_weight_grads().expect("weight gradients");

    // The CPU's forward, on the values the GPU holds (rounded to the
    // dtype), so that f16/bf16 differ by their math only.
    let round = |v: &[f32]| {
        let mut v = v.to_vec();
        dtype.round_in_place(&mut v);
        v
    };
    let (x, hx, cx, dy, dhy, dcy) = (
        round(&x),
        round(&hx),
        round(&cx),
        round(&dy),
        round(&dhy),
        round(&dcy),
    );
    let weights: Vec<Weights> = weights
        .iter()
        .map(|w| Weights {
            w_ih: round(&w.w_ih),
            w_hh: round(&w.w_hh),
            b_ih: round(&w.b_ih),
            b_hh: round(&w.b_hh),
        })
        .collect();
    let inp = Inputs {
        x: &x,
        hx: &hx,
        cx: &cx,
        weights: &weights,
    };
    let mut ws = Workspace::new(&shape);
    let (mut y, mut hy, mut cy) = (
        vec![0.0; shape.y_len()],
        vec![0.0; shape.state_len()],
        vec![0.0; c_len],
    );
    let isa = cnnbench_kernels::Isa::detect();
    cpu::forward(isa, &shape, &inp, &mut ws, &mut y, &mut hy, &mut cy);
    close(&format!("{what}: y"), &got.y, &y, tol);
    close(&format!("{what}: hy"), &got.hy, &hy, tol);
    if lstm {
        close(&format!("{what}: cy"), &got.cy, &cy, tol);
    }
    let want = reference::run(&shape, &x, &hx, &cx, &weights, &dy, &dhy, &dcy);
    close(&format!("{what}: dx"), &got.dx, &want.dx, tol);
    close(&format!("{what}: dhx"), &got.dhx, &want.dhx, tol);
    if lstm {
        close(&format!("{what}: dcx"), &got.dcx, &want.dcx, tol);
    }
    for (s, (g, w)) in dw.iter().zip(&want.dw).enumerate() {
        for (name, (a, b)) in ["dw_ih", "dw_hh", "db_ih", "db_hh"]
            .iter()
            .zip(g.tensors().iter().zip(w.tensors()))
        {
            close(&format!("{what}: {name} of set {s}"), a, b, tol);
        }
    }
    let (w, work, reserve) = rnn.sizes();
    assert!(
        w >= weights
            .iter()
            .map(|w| w.tensors().iter().map(|t| t.len()).sum::<usize>())
            .sum::<usize>()
            * dtype.size_bytes()
    );
    assert!(work > 0 || reserve > 0, "{what}: no scratch at all");
}

#[test]
fn gpu_rnn_matches_the_cpu_for_every_cell_and_direction() {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(why) => {
            no_gpu_for_test(&why);
            return;
        }
    };
    for cell in Cell::ALL {
        for direction in SUPPORTED {
            let shape = small(cell, direction);
            check_on(&gpu, shape, DType::F32, RnnAlgo::Standard, 1e-4);
            check_on(&gpu, shape, DType::F16, RnnAlgo::Standard, 1e-2);
            for algo in [
                RnnAlgo::PersistStatic,
                RnnAlgo::PersistDynamic,
                RnnAlgo::PersistStaticSmallH,
            ] {
                check_on(&gpu, shape, DType::F32, algo, 1e-4);
            }
        }
    }
}

#[test]
fn gpu_rnn_runs_the_deepbench_lstm() {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(why) => {
            no_gpu_for_test(&why);
            return;
        }
    };
    let shape = RnnShape {
        // A shorter sequence than DeepBench's 25 keeps the f64
        // reference quick; the sizes cuDNN picks are those of h 2048.
        t: 3,
        mb: 8,
        ..deepbench_lstm(Direction::Left2Right)
    };
    check_on(&gpu, shape, DType::F32, RnnAlgo::Standard, 1e-4);
}

/// The graph's recurrent layers' problems, as `RecurrentSpec::shape`
/// builds them: the models' (a bidirectional LSTM h64 over 100 steps of
/// 128 features; an LSTM h128 over 40 steps of 57) and every cell both
/// ways on a small sequence, each with its spec.
fn layer_problems() -> Vec<(crate::ops::recurrent::RecurrentSpec, RnnShape)> {
    use crate::core::shape::Dims;
    use crate::ops::recurrent::RecurrentSpec;
    let spec = |cell, hidden, bidirectional| RecurrentSpec {
        cell,
        hidden,
        bidirectional,
        sequences: false,
    };
    let mut all = vec![
        (spec(Cell::Lstm, 64, true), Dims::new(1, 100, 128), 32),
        (spec(Cell::Lstm, 128, false), Dims::new(1, 40, 57), 64),
    ];
    for cell in Cell::ALL {
        for bidirectional in [false, true] {
            all.push((spec(cell, 6, bidirectional), Dims::new(1, 5, 7), 3));
        }
    }
    all.into_iter()
        .map(|(s, x, mb)| (s, s.shape(x, mb)))
        .collect()
}

#[test]
fn network_form_lin_layers_tile_the_layers_parameters() {
    // No library needed: what `RnnSpace` expects cuDNN to report in the
    // network's form covers each direction's `weight_ih`, `weight_hh` and
    // `bias_ih` once, and holds no recurrent bias.
    for (spec, shape) in layer_problems() {
        let [ih, hh, b] = spec.direction_sizes(shape.input);
        let lins = lin_layers_in(&shape, RnnForm::Network);
        for d in 0..spec.directions() {
            let mine: Vec<_> = lins.iter().filter(|l| l.pseudo_layer == d).collect();
            let sum = |recurrent: bool, f: &dyn Fn(&LinLayer) -> usize| -> usize {
                mine.iter()
                    .filter(|l| l.recurrent == recurrent)
                    .map(|l| f(l))
                    .sum()
            };
            assert_eq!(sum(false, &|l| l.rows * l.cols), ih, "{spec:?}");
            assert_eq!(sum(true, &|l| l.rows * l.cols), hh, "{spec:?}");
            assert_eq!(sum(false, &|l| l.bias), b, "{spec:?}");
            assert_eq!(sum(true, &|l| l.bias), 0, "{spec:?}");
        }
        // PyTorch's form keeps its second bias.
        assert!(lin_layers(&shape).iter().all(|l| l.bias == shape.hidden));
    }
}

#[test]
fn real_libs_cudnn_accepts_the_network_form_of_every_layer() {
    if !cudnn_here() {
        return;
    }
    let mut sets = 0;
    // Every algorithm and layout `--rnn-algo auto` may pick: its
    // descriptors are set the same way (whether cuDNN then runs a
    // persistent one is the GPU's to say).
    let forms = [RnnForm::Network, RnnForm::NetworkSeqMajor];
    for ((spec, shape), algo, form) in layer_problems().into_iter().flat_map(|p| {
        super::pick::CANDIDATES
            .into_iter()
            .flat_map(move |a| forms.map(|f| (p, a, f)))
    }) {
        for dtype in DType::ALL {
            let what = format!("{spec:?} {shape:?} {dtype} {algo} {form:?}");
            let d = RnnDescs::with_form(shape, dtype, algo, form)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let (layout, aux) = match form {
                RnnForm::Network => (
                    sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                    CUDNN_RNN_PADDED_IO_ENABLED,
                ),
                _ => (
                    sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
                    CUDNN_RNN_PADDED_IO_DISABLED,
                ),
            };
            let want = [
                algo.raw() as i64,
                cell_mode(shape.cell) as i64,
                match algo {
                    RnnAlgo::Standard => sys::cudnnRNNBiasMode_t::CUDNN_RNN_SINGLE_INP_BIAS,
                    _ => sys::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS,
                } as i64,
                spec.bidirectional as i64,
                sys::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT as i64,
                cudnn::data_type(dtype) as i64,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT as i64,
                math_type(dtype) as i64,
                shape.input as i64,
                shape.hidden as i64,
                shape.hidden as i64,
                1,
                aux as i64,
                0,
            ];
            assert_eq!(stored(&d.rnn), want, "{what}");
            let out = spec.directions() * spec.hidden;
            for (desc, vector) in [(&d.x, shape.input), (&d.y, out)] {
                assert_data_desc(desc, dtype, layout, &shape, vector, &what);
            }
            // The time-major form's transposes: both views of each
            // sequence, accepted as set.
            if form == RnnForm::NetworkSeqMajor {
                for vector in [shape.input, out] {
                    super::seq_major::Transpose::new(dtype, shape.t, shape.mb, vector)
                        .unwrap_or_else(|e| panic!("{what}: transpose views: {e}"));
                }
            }
            assert_eq!(
                packed_dims(&d.h).unwrap_or_else(|e| panic!("{what}: {e}")),
                vec![spec.directions(), shape.mb, spec.hidden],
                "{what}"
            );
            sets += 1;
        }
    }
    assert_eq!(sets, 10 * 4 * 3 * 2);
}

/// cuDNN's own report of where the network form's weights lie (a query
/// that needs a handle, so a GPU): every matrix and input bias in the
/// shape `RnnSpace` expects, which together are the layer's parameters,
/// with every algorithm `--rnn-algo auto` may pick (a persistent one
/// cuDNN refuses for a layer is skipped, as auto skips it; standard must
/// run everywhere).
#[test]
fn gpu_network_form_weights_are_the_layers_parameters() {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(why) => {
            no_gpu_for_test(&why);
            return;
        }
    };
    let mut refused = Vec::new();
    for ((spec, shape), algo) in layer_problems()
        .into_iter()
        .flat_map(|p| super::pick::CANDIDATES.map(|a| (p, a)))
    {
        for dtype in DType::ALL {
            let what = format!("{spec:?} {dtype} {algo}");
            let space = match RnnSpace::new(&gpu, shape, dtype, algo, RnnForm::Network) {
                Ok(s) => s,
                Err(e) if algo != RnnAlgo::Standard => {
                    refused.push(format!("{what}: {e}"));
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            };
            let [ih, hh, b] = spec.direction_sizes(shape.input);
            let size = dtype.size_bytes();
            for d in 0..spec.directions() {
                let mine: Vec<_> = space
                    .slots()
                    .iter()
                    .filter(|s| s.lin.pseudo_layer == d)
                    .collect();
                let m = |recurrent: bool| -> usize {
                    mine.iter()
                        .filter(|s| s.lin.recurrent == recurrent)
                        .map(|s| s.lin.rows * s.lin.cols)
                        .sum()
                };
                assert_eq!((m(false), m(true)), (ih, hh), "{what}");
                let biases: usize = mine
                    .iter()
                    .filter(|s| s.bias.is_some())
                    .map(|s| s.lin.bias)
                    .sum();
                assert_eq!(biases, b, "{what}");
                assert!(mine.iter().all(|s| s.bias.is_none() == s.lin.recurrent));
            }
            let total: usize = space
                .slots()
                .iter()
                .map(|s| s.lin.rows * s.lin.cols + s.lin.bias)
                .sum();
            assert!(space.sizes().0 >= total * size, "{what}");
        }
    }
    // What the GPU refused, for the log (a refusal is auto's to skip).
    for r in &refused {
        eprintln!("refused: {r}");
    }
}
