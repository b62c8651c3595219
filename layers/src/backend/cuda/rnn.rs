//! Recurrent layers on cuDNN (`cnnbench rnn --device gpu`): the v8 RNN API
//! (`cudnnRNNForward`, `cudnnRNNBackwardData_v8`,
//! `cudnnRNNBackwardWeights_v8`) on the same problems, tensors and
//! PyTorch weight layout as the CPU kernels in `cnnbench_kernels::rnn`.
//!
//! The split follows what can be checked where: [`RnnDescs`] needs no
//! handle (cuDNN creates and sets RNN, RNN-data and tensor descriptors
//! without a driver), so CI checks every descriptor against the real
//! library; [`GpuRnn`] needs a GPU. Everything cuDNN sizes, every buffer
//! and every weight's place in cuDNN's weight space is settled once in
//! [`GpuRnn::new`], so that the three timed calls only enqueue work.

use super::cudnn::{self, TensorDesc, MAX_TENSOR_ELEMENTS};
use super::error::{check_cudnn, GpuError, GpuResult};
use super::{DeviceBuffer, Gpu};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::DType;
use cnnbench_kernels::rnn::{Cell, Direction, RnnShape, Weights};
use cudarc::driver::sys::CUdeviceptr;
use std::ffi::c_void;

/// cuDNN's recurrence algorithms (`CUDNN_RNN_ALGO_*`). Standard runs a
/// GEMM per step; the persistent ones keep the recurrent weights on chip
/// across steps, which pays off for small minibatches, within limits on
/// the hidden size that cuDNN checks when the work is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnnAlgo {
    Standard,
    PersistStatic,
    PersistDynamic,
    PersistStaticSmallH,
}

impl RnnAlgo {
    pub const ALL: [RnnAlgo; 4] = [
        RnnAlgo::Standard,
        RnnAlgo::PersistStatic,
        RnnAlgo::PersistDynamic,
        RnnAlgo::PersistStaticSmallH,
    ];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            RnnAlgo::Standard => "standard",
            RnnAlgo::PersistStatic => "persist-static",
            RnnAlgo::PersistDynamic => "persist-dynamic",
            RnnAlgo::PersistStaticSmallH => "persist-static-small-h",
        }
    }

    /// The algorithm named `s`, or one line listing the names.
    pub fn parse(s: &str) -> Result<RnnAlgo, String> {
        RnnAlgo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown RNN algorithm '{s}' (expected {})",
                    RnnAlgo::ALL.map(RnnAlgo::name).join(", ")
                )
            })
    }

    fn raw(self) -> sys::cudnnRNNAlgo_t {
        match self {
            RnnAlgo::Standard => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_STANDARD,
            RnnAlgo::PersistStatic => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_PERSIST_STATIC,
            RnnAlgo::PersistDynamic => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
            RnnAlgo::PersistStaticSmallH => {
                sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H
            }
        }
    }
}

impl std::fmt::Display for RnnAlgo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn cell_mode(c: Cell) -> sys::cudnnRNNMode_t {
    match c {
        Cell::RnnRelu => sys::cudnnRNNMode_t::CUDNN_RNN_RELU,
        Cell::RnnTanh => sys::cudnnRNNMode_t::CUDNN_RNN_TANH,
        Cell::Lstm => sys::cudnnRNNMode_t::CUDNN_LSTM,
        Cell::Gru => sys::cudnnRNNMode_t::CUDNN_GRU,
    }
}

/// The math type of an RNN descriptor per dtype: the project's choice for
/// every cuDNN op ([`cudnn::math_for`]), as PyTorch sets RNNs: true fp32
/// is FMA only (the default math type lets cuDNN use TF32 tensor cores on
/// fp32 data from Ampere on), TF32 is the default math on fp32 data (not
/// `TENSOR_OP_MATH_ALLOW_CONVERSION`, which may down-convert fp32 to
/// fp16), half types use tensor ops.
fn math_type(d: DType) -> sys::cudnnMathType_t {
    match cudnn::math_for(d) {
        cudnn::math::FMA => sys::cudnnMathType_t::CUDNN_FMA_MATH,
        cudnn::math::TENSOR_OP => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
        _ => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
    }
}

/// Gate products and the recurrence are accumulated in fp32 whatever the
/// storage (`mathPrec` FLOAT): cuDNN refuses half precision math with the
/// persistent algorithms, and fp32 accumulation is what the CPU does.
const MATH_PREC: sys::cudnnDataType_t = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;

/// `auxFlags`: every sequence has all `t` steps, so no padded I/O.
const CUDNN_RNN_PADDED_IO_DISABLED: u32 = 0;
/// `auxFlags` of the unpacked layouts: cuDNN accepts them only with padded
/// I/O enabled (every sequence is still full, so nothing is padded).
const CUDNN_RNN_PADDED_IO_ENABLED: u32 = 1;

/// How a problem's sequences and biases are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnForm {
    /// `cnnbench rnn`'s: PyTorch's time-major packed sequences
    /// (`[t][mb][vector]`) and its two biases, `b_ih` and `b_hh`.
    Pytorch,
    /// The graph's recurrent layer's: the network's batch-major tensors
    /// (`[mb][t][vector]`, NHWC `[n][1][t][c]`), read and written in place,
    /// and Keras's one bias per gate. cuDNN's `SINGLE_INP_BIAS` keeps only
    /// the input GEMM's bias (`b_ih`; the weight-parameter query confirms
    /// where it lies), so the recurrent one is zero with nothing to hold or
    /// update, as the CPU's `b_hh`.
    Network,
}

impl RnnForm {
    fn layout(self) -> sys::cudnnRNNDataLayout_t {
        match self {
            RnnForm::Pytorch => sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED,
            RnnForm::Network => {
                sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
            }
        }
    }

    fn bias_mode(self) -> sys::cudnnRNNBiasMode_t {
        match self {
            RnnForm::Pytorch => sys::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS,
            RnnForm::Network => sys::cudnnRNNBiasMode_t::CUDNN_RNN_SINGLE_INP_BIAS,
        }
    }

    fn aux_flags(self) -> u32 {
        match self {
            RnnForm::Pytorch => CUDNN_RNN_PADDED_IO_DISABLED,
            RnnForm::Network => CUDNN_RNN_PADDED_IO_ENABLED,
        }
    }

    /// Whether cuDNN holds a bias on the recurrent (hidden-state) side.
    pub fn recurrent_bias(self) -> bool {
        self == RnnForm::Pytorch
    }
}

fn invalid(call: &'static str, why: String) -> GpuError {
    GpuError::invalid(call, why)
}

fn to_int(call: &'static str, what: &str, v: usize) -> GpuResult<i32> {
    i32::try_from(v).map_err(|_| invalid(call, format!("{what} {v} does not fit in a C int")))
}

/// Why cuDNN cannot run `shape`, in one line, or `Ok`. Checked before any
/// descriptor is made, so that the reason names the option to change
/// rather than a cuDNN status.
pub fn cudnn_supports(shape: &RnnShape) -> Result<(), String> {
    match shape.direction {
        Direction::Right2Left => return Err(
            "cuDNN reads left to right only; run --direction left2right or bidirectional-concat"
                .into(),
        ),
        Direction::Sum => return Err("bidirectional-sum has no cuDNN mode".into()),
        Direction::Left2Right | Direction::Concat => {}
    }
    for (what, v) in [
        ("hidden size", shape.hidden),
        ("input size", shape.input),
        ("layer count", shape.layers),
        ("sequence length", shape.t),
        ("minibatch", shape.mb),
    ] {
        if v == 0 {
            return Err(format!("cuDNN RNNs need a {what} of at least 1, not 0"));
        }
        if i32::try_from(v).is_err() {
            return Err(format!("a {what} of {v} does not fit in cuDNN's C int"));
        }
    }
    // The sequences, the states and each weight matrix, each one tensor to
    // cuDNN. Its RNN data descriptors take 2^32 elements without complaint
    // (checked with cuDNN 9.26), but the rest of cuDNN 9 refuses tensors
    // of 2^31 elements and more, so every one is held to that limit.
    let gates = shape.cell.gates();
    let widest_in = shape.input.max(shape.output());
    let tensors = [
        ("input sequence", [shape.t, shape.mb, shape.input]),
        ("output sequence", [shape.t, shape.mb, shape.output()]),
        ("state", [shape.sets(), shape.mb, shape.hidden]),
        ("gate weight matrix", [gates, shape.hidden, widest_in]),
    ];
    for (what, dims) in tensors {
        let elems = dims.iter().try_fold(1u64, |a, &v| a.checked_mul(v as u64));
        match elems {
            Some(e) if e <= MAX_TENSOR_ELEMENTS => {}
            _ => {
                return Err(format!(
                    "the {what} ({}) has {} elements; cuDNN takes at most 2^31-1 per tensor",
                    dims.map(|d| d.to_string()).join("x"),
                    elems.map_or_else(|| "at least 2^64".to_string(), |e| e.to_string())
                ))
            }
        }
    }
    Ok(())
}

/// One line saying why the loaded cuDNN cannot run RNNs, or `None`. Every
/// RNN entry point is in the loader's table, looked up when cuDNN loads.
fn rnn_api_missing() -> Option<String> {
    sys::missing().map(|e| e.to_string())
}

/// An owned `cudnnRNNDescriptor_t`.
pub struct RnnDesc(pub(crate) sys::cudnnRNNDescriptor_t);

impl RnnDesc {
    fn create() -> GpuResult<RnnDesc> {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateRNNDescriptor", unsafe {
            sys::cudnnCreateRNNDescriptor(&mut p)
        })?;
        Ok(RnnDesc(p))
    }
}

impl Drop for RnnDesc {
    fn drop(&mut self) {
        // SAFETY: created by `create`, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroyRNNDescriptor(self.0);
        }
    }
}

/// An owned `cudnnRNNDataDescriptor_t`.
pub struct RnnDataDesc(pub(crate) sys::cudnnRNNDataDescriptor_t);

impl RnnDataDesc {
    /// Sequences in `form`'s layout (time-major packed, PyTorch's and the
    /// CPU kernels'; or batch-major, the network's), every one `t` steps
    /// long.
    fn new(
        form: RnnForm,
        dtype: DType,
        t: i32,
        mb: i32,
        vector: i32,
        lengths: &[i32],
    ) -> GpuResult<Self> {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateRNNDataDescriptor", unsafe {
            sys::cudnnCreateRNNDataDescriptor(&mut p)
        })?;
        let desc = RnnDataDesc(p);
        if lengths.len() != mb as usize {
            return Err(invalid(
                "cudnnSetRNNDataDescriptor",
                format!("{} sequence lengths for a minibatch of {mb}", lengths.len()),
            ));
        }
        // SAFETY: valid descriptor; `lengths` holds `mb` ints, which cuDNN
        // copies; the padding fill is unused (NULL): the data is packed, or
        // every sequence is full.
        check_cudnn("cudnnSetRNNDataDescriptor", unsafe {
            sys::cudnnSetRNNDataDescriptor(
                p,
                cudnn::data_type(dtype),
                form.layout(),
                t,
                mb,
                vector,
                lengths.as_ptr(),
                std::ptr::null_mut(),
            )
        })?;
        Ok(desc)
    }
}

impl Drop for RnnDataDesc {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroyRNNDataDescriptor(self.0);
        }
    }
}

/// A created, unset tensor descriptor (for cuDNN to fill in).
fn empty_tensor_desc() -> GpuResult<TensorDesc> {
    let mut p = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    check_cudnn("cudnnCreateTensorDescriptor", unsafe {
        sys::cudnnCreateTensorDescriptor(&mut p)
    })?;
    Ok(TensorDesc(p))
}

/// A packed 3-d tensor `[a][b][c]` (the states: `[layers·dirs][mb][h]`).
fn tensor3(dtype: DType, dims: [i32; 3]) -> GpuResult<TensorDesc> {
    let desc = empty_tensor_desc()?;
    let strides = [dims[1] * dims[2], dims[2], 1];
    // SAFETY: valid descriptor; arrays of 3 ints.
    check_cudnn("cudnnSetTensorNdDescriptor", unsafe {
        sys::cudnnSetTensorNdDescriptor(
            desc.0,
            cudnn::data_type(dtype),
            3,
            dims.as_ptr(),
            strides.as_ptr(),
        )
    })?;
    Ok(desc)
}

/// Every descriptor of one RNN problem. Building them needs no handle,
/// so that CI checks them against the real library without a GPU.
pub struct RnnDescs {
    pub shape: RnnShape,
    pub dtype: DType,
    pub algo: RnnAlgo,
    pub form: RnnForm,
    pub(crate) rnn: RnnDesc,
    pub(crate) x: RnnDataDesc,
    pub(crate) y: RnnDataDesc,
    /// `h` and, for the LSTM, `c` alike: `[layers·dirs][mb][h]`.
    pub(crate) h: TensorDesc,
    /// Every sequence's length (`t`), as `devSeqLengths` wants it on the
    /// device.
    pub(crate) seq_lengths: Vec<i32>,
}

impl RnnDescs {
    /// The descriptors of `shape` in `dtype` run by `algo`, in PyTorch's
    /// form, or one line saying why cuDNN cannot run it.
    pub fn new(shape: RnnShape, dtype: DType, algo: RnnAlgo) -> GpuResult<RnnDescs> {
        RnnDescs::with_form(shape, dtype, algo, RnnForm::Pytorch)
    }

    /// The descriptors of `shape` in `dtype` run by `algo`, its tensors
    /// held in `form`, or one line saying why cuDNN cannot run it.
    pub fn with_form(
        shape: RnnShape,
        dtype: DType,
        algo: RnnAlgo,
        form: RnnForm,
    ) -> GpuResult<RnnDescs> {
        let call = "cudnnSetRNNDescriptor_v8";
        cudnn_supports(&shape).map_err(|why| invalid(call, why))?;
        if let Some(why) = rnn_api_missing() {
            return Err(invalid(call, why));
        }
        let int = |what, v| to_int(call, what, v);
        let (t, mb) = (
            int("sequence length", shape.t)?,
            int("minibatch", shape.mb)?,
        );
        let (input, hidden) = (
            int("input size", shape.input)?,
            int("hidden size", shape.hidden)?,
        );
        let output = int("output size", shape.output())?;
        let sets = int("layers x directions", shape.sets())?;
        let rnn = RnnDesc::create()?;
        set_rnn(&rnn, &shape, dtype, algo, form)?;
        let seq_lengths = vec![t; shape.mb];
        let x = RnnDataDesc::new(form, dtype, t, mb, input, &seq_lengths)?;
        let y = RnnDataDesc::new(form, dtype, t, mb, output, &seq_lengths)?;
        let h = tensor3(dtype, [sets, mb, hidden])?;
        Ok(RnnDescs {
            shape,
            dtype,
            algo,
            form,
            rnn,
            x,
            y,
            h,
            seq_lengths,
        })
    }
}

/// `cudnnSetRNNDescriptor_v8` for `shape`, with no check of ours first (so
/// that tests can see what cuDNN itself refuses).
fn set_rnn(
    rnn: &RnnDesc,
    shape: &RnnShape,
    dtype: DType,
    algo: RnnAlgo,
    form: RnnForm,
) -> GpuResult<()> {
    let call = "cudnnSetRNNDescriptor_v8";
    let int = |what, v| to_int(call, what, v);
    let dir = match shape.direction {
        Direction::Concat | Direction::Sum => sys::cudnnDirectionMode_t::CUDNN_BIDIRECTIONAL,
        Direction::Left2Right | Direction::Right2Left => {
            sys::cudnnDirectionMode_t::CUDNN_UNIDIRECTIONAL
        }
    };
    // SAFETY: valid descriptor. A NULL dropout descriptor means no dropout
    // (accepted by cuDNN 9.26's setter, checked in the tests; a dropout
    // descriptor would need a handle for its states). projSize = hidden:
    // no LSTM projection.
    check_cudnn(call, unsafe {
        sys::cudnnSetRNNDescriptor_v8(
            rnn.0,
            algo.raw(),
            cell_mode(shape.cell),
            // PyTorch's two biases, b_ih and b_hh, or Keras's one.
            form.bias_mode(),
            dir,
            sys::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT,
            cudnn::data_type(dtype),
            MATH_PREC,
            math_type(dtype),
            int("input size", shape.input)?,
            int("hidden size", shape.hidden)?,
            int("hidden size", shape.hidden)?,
            int("layer count", shape.layers)?,
            std::ptr::null_mut(),
            form.aux_flags(),
        )
    })
}

/// One weight matrix and its bias as cuDNN holds them: pseudo-layer
/// `layer·dirs + direction` (PyTorch's weight set), `linLayerID` `lin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinLayer {
    pub pseudo_layer: usize,
    pub lin: usize,
    /// `[rows][cols]`, row-major: `[h][input of the layer]` for the input
    /// matrices (W), `[h][h]` for the recurrent ones (R).
    pub rows: usize,
    pub cols: usize,
    pub bias: usize,
    /// R (hidden-state) rather than W (input).
    pub recurrent: bool,
    /// The gate, in both cuDNN's and PyTorch's order.
    pub gate: usize,
}

impl LinLayer {
    /// Where this matrix and bias lie in PyTorch's [`Weights`] of its set:
    /// the element ranges of `w_ih`/`w_hh` and `b_ih`/`b_hh`.
    pub fn source(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let m = self.rows * self.cols;
        (
            self.gate * m..(self.gate + 1) * m,
            self.gate * self.bias..(self.gate + 1) * self.bias,
        )
    }
}

/// Every matrix and bias of `shape`'s weight space in PyTorch's form (see
/// [`lin_layers_in`]).
pub fn lin_layers(shape: &RnnShape) -> Vec<LinLayer> {
    lin_layers_in(shape, RnnForm::Pytorch)
}

/// Every matrix and bias of `shape`'s weight space held in `form`, as
/// cuDNN should report them through `cudnnGetRNNWeightParams`, in order of
/// pseudo-layer and `linLayerID`. Without a recurrent bias
/// ([`RnnForm::Network`]) the recurrent matrices have none (`bias` 0).
///
/// The gate order is the same in cuDNN and PyTorch, so gate `g`'s matrix
/// is rows `g·h..(g+1)·h` of PyTorch's `weight_ih`/`weight_hh`. cuDNN's
/// API reference (cudnn_adv, `cudnnGetRNNWeightParams`, linLayerID):
/// for `CUDNN_LSTM`, IDs 0-3 are applied to the layer's input and 4-7 to
/// the recurrent state, 0/4 the input gate, 1/5 the forget gate, 2/6 the
/// new memory (cell candidate c') and 3/7 the output gate: PyTorch's
/// i, f, g, o. For `CUDNN_GRU`, 0-2 input and 3-5 recurrent, 0/3 the reset
/// gate, 1/4 the update gate, 2/5 the new memory gate h': PyTorch's r, z, n
/// (cuDNN's h' = tanh(W_h x + b_Wh + r ∘ (R_h h + b_Rh)) is PyTorch's n,
/// with the recurrent bias inside the reset product). For the plain RNNs
/// ID 0 is W and 1 is R. PyTorch's cuDNN path relies on the same order:
/// it views its parameters straight into cuDNN's weight space.
pub fn lin_layers_in(shape: &RnnShape, form: RnnForm) -> Vec<LinLayer> {
    let gates = shape.cell.gates();
    let dirs = shape.direction.count();
    let h = shape.hidden;
    let recurrent_bias = form.recurrent_bias();
    (0..shape.sets())
        .flat_map(|s| {
            let input = shape.layer_input(s / dirs);
            (0..2 * gates).map(move |lin| {
                let recurrent = lin >= gates;
                LinLayer {
                    pseudo_layer: s,
                    lin,
                    rows: h,
                    cols: if recurrent { h } else { input },
                    bias: if recurrent && !recurrent_bias { 0 } else { h },
                    recurrent,
                    gate: lin % gates,
                }
            })
        })
        .collect()
}

/// Where one [`LinLayer`] lies in the weight space (and, alike, in its
/// gradient), in bytes from the start.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub lin: LinLayer,
    pub matrix: usize,
    /// `None` for a matrix without a bias (the recurrent ones in
    /// [`RnnForm::Network`]).
    pub bias: Option<usize>,
}

/// Device pointers of the passes' tensors, in the run's dtype and the
/// descriptors' layouts; each pass reads the ones its cuDNN call takes.
/// The cell states (`cx`, `cy`, `dcx`, `dcy`) are the LSTM's: the other
/// cells pass NULL whatever is here.
#[derive(Clone, Copy, Debug, Default)]
pub struct RnnTensors {
    pub x: CUdeviceptr,
    pub y: CUdeviceptr,
    pub hx: CUdeviceptr,
    pub hy: CUdeviceptr,
    pub cx: CUdeviceptr,
    pub cy: CUdeviceptr,
    pub dx: CUdeviceptr,
    pub dy: CUdeviceptr,
    pub dhx: CUdeviceptr,
    pub dhy: CUdeviceptr,
    pub dcx: CUdeviceptr,
    pub dcy: CUdeviceptr,
}

fn ptr(p: CUdeviceptr) -> *mut c_void {
    p as *mut c_void
}

/// What the passes of one RNN problem need besides its tensors: the
/// descriptors, cuDNN's weight space and its gradient, the workspace and
/// reserve, the sequence lengths on the device, and every weight's place,
/// all sized and made once; the passes only enqueue work on the stream of
/// the GPU they are given, which must be the one the space was made on.
pub struct RnnSpace {
    pub descs: RnnDescs,
    slots: Vec<Slot>,
    weight_space: DeviceBuffer,
    dweight_space: DeviceBuffer,
    workspace: DeviceBuffer,
    reserve: DeviceBuffer,
    /// `t` per sequence (int32), which the passes read on the device.
    dev_seq_lengths: DeviceBuffer,
}

impl RnnSpace {
    /// Builds the descriptors, sizes the weight space, workspace and
    /// reserve once (forward mode training, as the backward needs the
    /// reserve), allocates them, and finds each weight's place in the
    /// weight space. The weights start at zero (a bias `form` does not
    /// hold stays so), their gradients as NaN.
    pub fn new(
        gpu: &Gpu,
        shape: RnnShape,
        dtype: DType,
        algo: RnnAlgo,
        form: RnnForm,
    ) -> GpuResult<Self> {
        let descs = RnnDescs::with_form(shape, dtype, algo, form)?;
        let handle = gpu.cudnn.0;
        if algo == RnnAlgo::PersistDynamic {
            let mb = to_int("cudnnBuildRNNDynamic", "minibatch", shape.mb)?;
            // SAFETY: valid handle and set descriptor; compiles the
            // persistent kernel for this minibatch before any pass.
            check_cudnn("cudnnBuildRNNDynamic", unsafe {
                sys::cudnnBuildRNNDynamic(handle, descs.rnn.0, mb)
            })?;
        }
        let mut weight_bytes = 0usize;
        // SAFETY: valid handle and descriptor; out-pointer to a local.
        check_cudnn("cudnnGetRNNWeightSpaceSize", unsafe {
            sys::cudnnGetRNNWeightSpaceSize(handle, descs.rnn.0, &mut weight_bytes)
        })?;
        let (mut work_bytes, mut reserve_bytes) = (0usize, 0usize);
        // SAFETY: valid handle and descriptors; out-pointers to locals.
        check_cudnn("cudnnGetRNNTempSpaceSizes", unsafe {
            sys::cudnnGetRNNTempSpaceSizes(
                handle,
                descs.rnn.0,
                sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                descs.x.0,
                &mut work_bytes,
                &mut reserve_bytes,
            )
        })?;
        let s = &gpu.stream;
        let seq: Vec<u8> = descs
            .seq_lengths
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let mut space = RnnSpace {
            slots: Vec::new(),
            weight_space: DeviceBuffer::alloc(s, weight_bytes)?,
            dweight_space: DeviceBuffer::alloc(s, weight_bytes)?,
            workspace: DeviceBuffer::alloc(s, work_bytes)?,
            reserve: DeviceBuffer::alloc(s, reserve_bytes)?,
            dev_seq_lengths: DeviceBuffer::from_bytes(s, &seq)?,
            descs,
        };
        space.slots = space.find_slots(gpu)?;
        if weight_bytes > 0 {
            space.weight_space.fill_bytes(0)?;
            space.dweight_space.fill_bytes(0xFF)?;
        }
        Ok(space)
    }

    /// Asks cuDNN where each matrix and bias of [`lin_layers_in`] lies in
    /// the weight space, and checks that it holds them in the shapes
    /// expected (a mismatch would scramble the weights silently). A bias
    /// the form expects must be there: in [`RnnForm::Network`] this is
    /// where cuDNN's single bias is confirmed to be the input GEMM's.
    fn find_slots(&self, gpu: &Gpu) -> GpuResult<Vec<Slot>> {
        let call = "cudnnGetRNNWeightParams";
        let (m_desc, b_desc) = (empty_tensor_desc()?, empty_tensor_desc()?);
        let base = self.weight_space.ptr() as usize;
        let space = self.weight_space.bytes();
        let size = self.descs.dtype.size_bytes();
        let mut slots = Vec::new();
        for lin in lin_layers_in(&self.descs.shape, self.descs.form) {
            let (mut m_addr, mut b_addr) = (std::ptr::null_mut(), std::ptr::null_mut());
            let where_ = format!("pseudo-layer {} linLayerID {}", lin.pseudo_layer, lin.lin);
            // SAFETY: valid handle, descriptor and tensor descriptors; the
            // weight space is the allocation of `space` bytes; cuDNN only
            // computes addresses inside it (nothing is read on the host).
            check_cudnn(call, unsafe {
                sys::cudnnGetRNNWeightParams(
                    gpu.cudnn.0,
                    self.descs.rnn.0,
                    to_int(call, "pseudo-layer", lin.pseudo_layer)?,
                    space,
                    self.weight_space.as_void(),
                    to_int(call, "linLayerID", lin.lin)?,
                    m_desc.0,
                    &mut m_addr,
                    b_desc.0,
                    &mut b_addr,
                )
            })?;
            let m_dims = packed_dims(&m_desc)?;
            let m_elems: usize = m_dims.iter().product();
            // Where no bias is expected, cuDNN returns a NULL address and
            // may leave the descriptor as it was: it is not read.
            let b_elems: usize = if lin.bias > 0 {
                packed_dims(&b_desc)?.iter().product()
            } else {
                0
            };
            if m_elems != lin.rows * lin.cols
                || m_dims.last() != Some(&lin.cols)
                || b_elems != lin.bias
            {
                return Err(invalid(
                    call,
                    format!(
                        "{where_}: cuDNN holds a {m_dims:?} matrix and a bias of {b_elems}; \
                         expected [{}, {}] and {}",
                        lin.rows, lin.cols, lin.bias
                    ),
                ));
            }
            let offset = |addr: *mut c_void, elems: usize| -> GpuResult<usize> {
                let a = addr as usize;
                match a.checked_sub(base) {
                    Some(o) if !addr.is_null() && o + elems * size <= space => Ok(o),
                    _ => Err(invalid(
                        call,
                        format!("{where_}: an address outside the weight space"),
                    )),
                }
            };
            slots.push(Slot {
                lin,
                matrix: offset(m_addr, m_elems)?,
                bias: match lin.bias {
                    0 => None,
                    b => Some(offset(b_addr, b)?),
                },
            });
        }
        Ok(slots)
    }

    /// Every weight's place, in [`lin_layers_in`]'s order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// cuDNN's weight space (the run's dtype).
    pub fn weight_space(&self) -> &DeviceBuffer {
        &self.weight_space
    }

    /// The weight gradients, laid out as the weight space.
    pub fn dweight_space(&self) -> &DeviceBuffer {
        &self.dweight_space
    }

    /// Writes PyTorch-layout weights (one [`Weights`] per layer and
    /// direction), converted to the run's dtype, into the weight space
    /// (biases the form does not hold are left out).
    pub fn set_weights(&mut self, weights: &[Weights]) -> GpuResult<()> {
        let call = "set RNN weights";
        let shape = self.descs.shape;
        if weights.len() != shape.sets() {
            return Err(invalid(
                call,
                format!("{} weight sets for {}", weights.len(), shape.sets()),
            ));
        }
        for (s, w) in weights.iter().enumerate() {
            for (t, d) in w.tensors().iter().zip(shape.set_shapes(s)) {
                let want: usize = d.iter().product();
                if t.len() != want {
                    return Err(invalid(
                        call,
                        format!("set {s}: a tensor of {} values for {d:?}", t.len()),
                    ));
                }
            }
        }
        let dtype = self.descs.dtype;
        let size = dtype.size_bytes();
        let mut image = vec![0u8; self.weight_space.bytes()];
        for slot in &self.slots {
            let w = &weights[slot.lin.pseudo_layer];
            let (m, b) = slot.lin.source();
            let (wm, wb) = if slot.lin.recurrent {
                (&w.w_hh, &w.b_hh)
            } else {
                (&w.w_ih, &w.b_ih)
            };
            let mb = dtype.encode(&wm[m.clone()]);
            image[slot.matrix..][..m.len() * size].copy_from_slice(&mb);
            if let Some(at) = slot.bias {
                let bb = dtype.encode(&wb[b.clone()]);
                image[at..][..b.len() * size].copy_from_slice(&bb);
            }
        }
        self.weight_space.upload(&image)
    }

    /// The cell-state pointers: the LSTM's, NULL for the other cells
    /// (cuDNN ignores `c` for them).
    fn c(&self, p: CUdeviceptr) -> *mut c_void {
        if self.descs.shape.cell == Cell::Lstm {
            ptr(p)
        } else {
            std::ptr::null_mut()
        }
    }

    /// Enqueues the forward pass in training mode (it fills the reserve
    /// space the backward passes read): `y`, `hy` and (LSTM) `cy` from
    /// `x`, `hx` and (LSTM) `cx`.
    ///
    /// # Safety
    ///
    /// `gpu` must be the one the space was made on. Each pointer the call
    /// reads or writes must hold its tensor as the descriptors size it
    /// (sequences `t·mb·vector`, states `layers·dirs·mb·h` elements of the
    /// dtype), live until the work completes on the stream, the outputs
    /// overlapping nothing.
    pub unsafe fn forward(&self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        let d = &self.descs;
        // SAFETY: the caller's tensors; every buffer of ours was sized
        // from these descriptors and cuDNN's size queries in `new`; the
        // sequence lengths are on the device; the work is ordered on the
        // handle's stream.
        check_cudnn("cudnnRNNForward", unsafe {
            sys::cudnnRNNForward(
                gpu.cudnn.0,
                d.rnn.0,
                sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                self.dev_seq_lengths.ptr() as *const i32,
                d.x.0,
                ptr(t.x),
                d.y.0,
                ptr(t.y),
                d.h.0,
                ptr(t.hx),
                ptr(t.hy),
                d.h.0,
                self.c(t.cx),
                self.c(t.cy),
                self.weight_space.bytes(),
                self.weight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// Enqueues the backward pass for data, after [`RnnSpace::forward`]
    /// on the same `x`, `y`, `hx` and `cx`: `dx`, `dhx` and (LSTM) `dcx`
    /// from `dy`, `dhy`, `dcy`.
    ///
    /// # Safety
    ///
    /// As for [`RnnSpace::forward`].
    pub unsafe fn backward_data(&self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        let d = &self.descs;
        // SAFETY: as in `forward`; the reserve holds the forward's state.
        check_cudnn("cudnnRNNBackwardData_v8", unsafe {
            sys::cudnnRNNBackwardData_v8(
                gpu.cudnn.0,
                d.rnn.0,
                self.dev_seq_lengths.ptr() as *const i32,
                d.y.0,
                ptr(t.y),
                ptr(t.dy),
                d.x.0,
                ptr(t.dx),
                d.h.0,
                ptr(t.hx),
                ptr(t.dhy),
                ptr(t.dhx),
                d.h.0,
                self.c(t.cx),
                self.c(t.dcy),
                self.c(t.dcx),
                self.weight_space.bytes(),
                self.weight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// Enqueues the weight gradients into the gradient space, after
    /// [`RnnSpace::backward_data`] (which leaves what they need in the
    /// reserve), from `x`, `hx` and `y`. cuDNN documents
    /// `CUDNN_WGRAD_MODE_ADD` as the only mode `cudnnRNNBackwardWeights_v8`
    /// supports, so the gradient space is zeroed first (a memset on the
    /// stream, as PyTorch and TensorFlow do) and the gradients added to it:
    /// the same result as overwriting.
    ///
    /// # Safety
    ///
    /// As for [`RnnSpace::forward`].
    pub unsafe fn backward_weights(&mut self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        self.dweight_space.fill_bytes(0)?;
        let d = &self.descs;
        // SAFETY: as in `forward`.
        check_cudnn("cudnnRNNBackwardWeights_v8", unsafe {
            sys::cudnnRNNBackwardWeights_v8(
                gpu.cudnn.0,
                d.rnn.0,
                sys::cudnnWgradMode_t::CUDNN_WGRAD_MODE_ADD,
                self.dev_seq_lengths.ptr() as *const i32,
                d.x.0,
                ptr(t.x),
                d.h.0,
                ptr(t.hx),
                d.y.0,
                ptr(t.y),
                self.dweight_space.bytes(),
                self.dweight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// The weight gradients in PyTorch's layout, as f32 (zero where the
    /// form holds no bias).
    pub fn download_weight_grads(&self) -> GpuResult<Vec<Weights>> {
        Ok(self.unpack(&self.dweight_space.download()?))
    }

    /// The weights as cuDNN holds them, back in PyTorch's layout.
    pub fn download_weights(&self) -> GpuResult<Vec<Weights>> {
        Ok(self.unpack(&self.weight_space.download()?))
    }

    /// A weight space's bytes (weights or gradients, laid out alike) as
    /// PyTorch-layout f32 sets.
    fn unpack(&self, space: &[u8]) -> Vec<Weights> {
        let shape = &self.descs.shape;
        let dtype = self.descs.dtype;
        let size = dtype.size_bytes();
        let mut out: Vec<Weights> = (0..shape.sets())
            .map(|s| Weights::zeros(shape, s))
            .collect();
        for slot in &self.slots {
            let w = &mut out[slot.lin.pseudo_layer];
            let (m, b) = slot.lin.source();
            let (wm, wb) = if slot.lin.recurrent {
                (&mut w.w_hh, &mut w.b_hh)
            } else {
                (&mut w.w_ih, &mut w.b_ih)
            };
            let mbytes = &space[slot.matrix..][..m.len() * size];
            wm[m].copy_from_slice(&dtype.decode(mbytes));
            if let Some(at) = slot.bias {
                let bbytes = &space[at..][..b.len() * size];
                wb[b].copy_from_slice(&dtype.decode(bbytes));
            }
        }
        out
    }

    /// Bytes of the weight space (its gradient is as large), the workspace
    /// and the reserve space, as cuDNN sized them.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (
            self.weight_space.bytes(),
            self.workspace.bytes(),
            self.reserve.bytes(),
        )
    }

    /// Every byte held on the device.
    pub fn bytes(&self) -> usize {
        2 * self.weight_space.bytes()
            + self.workspace.bytes()
            + self.reserve.bytes()
            + self.dev_seq_lengths.bytes()
    }
}

/// One RNN problem on a GPU, `cnnbench rnn`'s: its [`RnnSpace`] in
/// PyTorch's form and every tensor, made once; the passes only enqueue
/// work on `gpu.stream`.
pub struct GpuRnn<'g> {
    gpu: &'g Gpu,
    space: RnnSpace,
    x: DeviceBuffer,
    y: DeviceBuffer,
    hx: DeviceBuffer,
    cx: DeviceBuffer,
    hy: DeviceBuffer,
    cy: DeviceBuffer,
    dx: DeviceBuffer,
    dy: DeviceBuffer,
    dhx: DeviceBuffer,
    dhy: DeviceBuffer,
    dcx: DeviceBuffer,
    dcy: DeviceBuffer,
}

/// Host-side outputs of the passes, as f32, for checks (the weight
/// gradients apart: [`GpuRnn::download_weight_grads`]).
pub type RnnOutputs = cnnbench_kernels::rnn::Outputs;

impl<'g> GpuRnn<'g> {
    /// Makes the [`RnnSpace`] and allocates every tensor. Outputs start as
    /// NaN (0xFF bytes), so that a pass that wrote nothing is caught by
    /// the checks.
    pub fn new(gpu: &'g Gpu, shape: RnnShape, dtype: DType, algo: RnnAlgo) -> GpuResult<Self> {
        let space = RnnSpace::new(gpu, shape, dtype, algo, RnnForm::Pytorch)?;
        let s = &gpu.stream;
        let size = dtype.size_bytes();
        let bytes = |elems: usize| {
            elems.checked_mul(size).ok_or_else(|| {
                invalid(
                    "cuMemAlloc",
                    format!("{elems} elements of {size} bytes overflow"),
                )
            })
        };
        let lstm = shape.cell == Cell::Lstm;
        let (x_bytes, y_bytes) = (bytes(shape.x_len())?, bytes(shape.y_len())?);
        let state_bytes = bytes(shape.state_len())?;
        let c_bytes = if lstm { state_bytes } else { 0 };
        let alloc = |b: usize| DeviceBuffer::alloc(s, b);
        let mut rnn = GpuRnn {
            gpu,
            space,
            x: alloc(x_bytes)?,
            y: alloc(y_bytes)?,
            hx: alloc(state_bytes)?,
            cx: alloc(c_bytes)?,
            hy: alloc(state_bytes)?,
            cy: alloc(c_bytes)?,
            dx: alloc(x_bytes)?,
            dy: alloc(y_bytes)?,
            dhx: alloc(state_bytes)?,
            dhy: alloc(state_bytes)?,
            dcx: alloc(c_bytes)?,
            dcy: alloc(c_bytes)?,
        };
        for b in [
            &mut rnn.x,
            &mut rnn.hx,
            &mut rnn.cx,
            &mut rnn.dy,
            &mut rnn.dhy,
            &mut rnn.dcy,
        ] {
            if b.bytes() > 0 {
                b.fill_bytes(0)?;
            }
        }
        for b in [
            &mut rnn.y,
            &mut rnn.hy,
            &mut rnn.cy,
            &mut rnn.dx,
            &mut rnn.dhx,
            &mut rnn.dcx,
        ] {
            if b.bytes() > 0 {
                b.fill_bytes(0xFF)?;
            }
        }
        gpu.synchronize()?;
        Ok(rnn)
    }

    /// The problem's descriptors.
    pub fn descs(&self) -> &RnnDescs {
        &self.space.descs
    }

    /// Writes PyTorch-layout weights (one [`Weights`] per layer and
    /// direction), converted to the run's dtype, into the weight space.
    pub fn set_weights(&mut self, weights: &[Weights]) -> GpuResult<()> {
        self.space.set_weights(weights)
    }

    /// Copies the sequence, the initial states and the output gradients
    /// in, converted to the run's dtype (`cx` and `dcy` are read for the
    /// LSTM only).
    pub fn upload_inputs(
        &mut self,
        x: &[f32],
        hx: &[f32],
        cx: &[f32],
        dy: &[f32],
        dhy: &[f32],
        dcy: &[f32],
    ) -> GpuResult<()> {
        let s = self.space.descs.shape;
        let d = self.space.descs.dtype;
        let lstm = s.cell == Cell::Lstm;
        let c_len = if lstm { s.state_len() } else { 0 };
        let put = |buf: &mut DeviceBuffer, what: &str, v: &[f32], want: usize| {
            if v.len() != want {
                return Err(invalid(
                    "upload RNN inputs",
                    format!("{what} has {} values, not {want}", v.len()),
                ));
            }
            buf.upload(&d.encode(v))
        };
        put(&mut self.x, "x", x, s.x_len())?;
        put(&mut self.hx, "hx", hx, s.state_len())?;
        put(&mut self.dy, "dy", dy, s.y_len())?;
        put(&mut self.dhy, "dhy", dhy, s.state_len())?;
        if lstm {
            put(&mut self.cx, "cx", cx, c_len)?;
            put(&mut self.dcy, "dcy", dcy, c_len)?;
        }
        Ok(())
    }

    /// Every tensor's pointer.
    fn tensors(&self) -> RnnTensors {
        RnnTensors {
            x: self.x.ptr(),
            y: self.y.ptr(),
            hx: self.hx.ptr(),
            hy: self.hy.ptr(),
            cx: self.cx.ptr(),
            cy: self.cy.ptr(),
            dx: self.dx.ptr(),
            dy: self.dy.ptr(),
            dhx: self.dhx.ptr(),
            dhy: self.dhy.ptr(),
            dcx: self.dcx.ptr(),
            dcy: self.dcy.ptr(),
        }
    }

    /// Enqueues the forward pass in training mode: `y`, `hy` and (LSTM)
    /// `cy`.
    pub fn forward(&mut self) -> GpuResult<()> {
        // SAFETY: every tensor was allocated in `new` at the descriptors'
        // sizes and lives as long as `self`, whose drop waits for the
        // stream.
        unsafe { self.space.forward(self.gpu, &self.tensors()) }
    }

    /// Enqueues the backward pass for data, after [`GpuRnn::forward`]:
    /// `dx`, `dhx` and (LSTM) `dcx` from `dy`, `dhy`, `dcy`.
    pub fn backward_data(&mut self) -> GpuResult<()> {
        // SAFETY: as in `forward`.
        unsafe { self.space.backward_data(self.gpu, &self.tensors()) }
    }

    /// Enqueues the weight gradients, after [`GpuRnn::backward_data`]
    /// (see [`RnnSpace::backward_weights`]).
    pub fn backward_weights(&mut self) -> GpuResult<()> {
        let t = self.tensors();
        // SAFETY: as in `forward`.
        unsafe { self.space.backward_weights(self.gpu, &t) }
    }

    /// Waits for the stream and copies every output out, as f32.
    pub fn download_outputs(&self) -> GpuResult<RnnOutputs> {
        let d = self.space.descs.dtype;
        let lstm = self.space.descs.shape.cell == Cell::Lstm;
        let get = |b: &DeviceBuffer| b.download().map(|v| d.decode(&v));
        let get_c = |b: &DeviceBuffer| if lstm { get(b) } else { Ok(Vec::new()) };
        Ok(RnnOutputs {
            y: get(&self.y)?,
            hy: get(&self.hy)?,
            cy: get_c(&self.cy)?,
            dx: get(&self.dx)?,
            dhx: get(&self.dhx)?,
            dcx: get_c(&self.dcx)?,
            dw: Vec::new(),
        })
    }

    /// The weight gradients in PyTorch's layout, as f32.
    pub fn download_weight_grads(&self) -> GpuResult<Vec<Weights>> {
        self.space.download_weight_grads()
    }

    /// The weights as cuDNN holds them, back in PyTorch's layout.
    pub fn download_weights(&self) -> GpuResult<Vec<Weights>> {
        self.space.download_weights()
    }

    /// Bytes of the weight space (its gradient is as large), the workspace
    /// and the reserve space, as cuDNN sized them.
    pub fn sizes(&self) -> (usize, usize, usize) {
        self.space.sizes()
    }
}

/// The dims of a packed tensor descriptor cuDNN filled in, or why they are
/// not packed (the weights are copied in as dense row-major blocks).
fn packed_dims(desc: &TensorDesc) -> GpuResult<Vec<usize>> {
    let call = "cudnnGetTensorNdDescriptor";
    let (mut dt, mut nb) = (0u32, 0i32);
    let (mut dims, mut strides) = ([0i32; 8], [0i32; 8]);
    // SAFETY: valid descriptor; arrays of 8; the data type is written as
    // its C enum's number into a u32.
    check_cudnn(call, unsafe {
        sys::cudnnGetTensorNdDescriptor(
            desc.0,
            8,
            &mut dt as *mut u32 as *mut sys::cudnnDataType_t,
            &mut nb,
            dims.as_mut_ptr(),
            strides.as_mut_ptr(),
        )
    })?;
    let n = usize::try_from(nb).unwrap_or(0).min(8);
    let mut expect = 1i64;
    for i in (0..n).rev() {
        if dims[i] > 1 && strides[i] as i64 != expect {
            return Err(invalid(
                call,
                format!(
                    "cuDNN holds a weight with dims {:?} and strides {:?}, not packed",
                    &dims[..n],
                    &strides[..n]
                ),
            ));
        }
        expect *= dims[i].max(1) as i64;
    }
    Ok(dims[..n].iter().map(|&d| d.max(0) as usize).collect())
}

#[cfg(test)]
mod tests;
