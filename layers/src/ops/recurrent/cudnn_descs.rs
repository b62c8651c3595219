//! Recurrent layers on cuDNN (`cnnbench rnn --device gpu`): the v8 RNN API
//! (`cudnnRNNForward`, `cudnnRNNBackwardData_v8`,
//! `cudnnRNNBackwardWeights_v8`) on the same problems, tensors and
//! PyTorch weight layout as the CPU kernels in `cnnbench_kernels::rnn`.
//!
//! The split follows what can be checked where: [`RnnDescs`] needs no
//! handle (cuDNN creates and sets RNN, RNN-data and tensor descriptors
//! without a driver), so CI checks every descriptor against the real
//! library; [`GpuRnn`](super::cudnn_problem::GpuRnn) needs a GPU. Everything cuDNN sizes, every buffer
//! and every weight's place in cuDNN's weight space is settled once in
//! [`RnnSpace::new`](super::cudnn_space::RnnSpace::new), so that the three timed calls only enqueue work.
//!
//! This module holds the descriptors and the checks made before any is
//! set; the weight space's layout is in [`super::cudnn_weights`], the
//! passes in [`super::cudnn_space`], `cnnbench rnn`'s problem in
//! [`super::cudnn_problem`].

use crate::backend::cuda::cudnn::{self, TensorDesc, MAX_TENSOR_ELEMENTS};
use crate::backend::cuda::error::{check_cudnn, GpuError, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::core::DType;
use cnnbench_kernels::rnn::{Cell, Direction, RnnShape};

pub(super) fn cell_mode(c: Cell) -> sys::cudnnRNNMode_t {
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
pub(super) fn math_type(d: DType) -> sys::cudnnMathType_t {
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
pub(super) const CUDNN_RNN_PADDED_IO_DISABLED: u32 = 0;
/// `auxFlags` of the unpacked layouts: cuDNN accepts them only with padded
/// I/O enabled (every sequence is still full, so nothing is padded).
pub(super) const CUDNN_RNN_PADDED_IO_ENABLED: u32 = 1;

/// How a problem's sequences and biases are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnForm {
    /// `cnnbench rnn`'s: PyTorch's time-major packed sequences
    /// (`[t][mb][vector]`) and its two biases, `b_ih` and `b_hh`.
    Pytorch,
    /// The graph's recurrent layer's: the network's batch-major tensors
    /// (`[mb][t][vector]`, NHWC `[n][1][t][c]`), read and written in place,
    /// and Keras's one bias per gate. With the standard algorithm cuDNN's
    /// `SINGLE_INP_BIAS` keeps only the input GEMM's bias (`b_ih`; the
    /// weight-parameter query confirms where it lies), so the recurrent one
    /// is zero with nothing to hold or update, as the CPU's `b_hh`. The
    /// persistent algorithms take two biases only (cuDNN 9.19 refuses
    /// `SINGLE_INP_BIAS` with them when the descriptor is set): there the
    /// recurrent bias lies in the weight space as zeros, never written, its
    /// gradient never read, as PyTorch's Keras-style LSTM freezes `b_hh` at
    /// zero.
    Network,
    /// [`RnnForm::Network`]'s biases on time-major packed sequences
    /// (`[t][mb][vector]`), PyTorch's layout: the layer transposes the
    /// network's batch-major tensors to and from its own buffers around
    /// the passes (`--rnn-algo auto` times this form beside the other,
    /// transposes included).
    NetworkSeqMajor,
}

impl RnnForm {
    fn layout(self) -> sys::cudnnRNNDataLayout_t {
        match self {
            RnnForm::Pytorch | RnnForm::NetworkSeqMajor => {
                sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
            }
            RnnForm::Network => {
                sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
            }
        }
    }

    fn bias_mode(self, algo: RnnAlgo) -> sys::cudnnRNNBiasMode_t {
        match (self, algo) {
            (RnnForm::Network | RnnForm::NetworkSeqMajor, RnnAlgo::Standard) => {
                sys::cudnnRNNBiasMode_t::CUDNN_RNN_SINGLE_INP_BIAS
            }
            _ => sys::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS,
        }
    }

    fn aux_flags(self) -> u32 {
        match self {
            RnnForm::Pytorch | RnnForm::NetworkSeqMajor => CUDNN_RNN_PADDED_IO_DISABLED,
            RnnForm::Network => CUDNN_RNN_PADDED_IO_ENABLED,
        }
    }

    /// Whether the recurrent (hidden-state) side has a bias of the
    /// problem's own, which the weight space holds and the passes use.
    pub fn recurrent_bias(self) -> bool {
        self == RnnForm::Pytorch
    }
}

pub(super) fn invalid(call: &'static str, why: String) -> GpuError {
    GpuError::invalid(call, why)
}

pub(super) fn to_int(call: &'static str, what: &str, v: usize) -> GpuResult<i32> {
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
    pub(super) fn create() -> GpuResult<RnnDesc> {
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
pub(super) fn empty_tensor_desc() -> GpuResult<TensorDesc> {
    let mut p = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    check_cudnn("cudnnCreateTensorDescriptor", unsafe {
        sys::cudnnCreateTensorDescriptor(&mut p)
    })?;
    Ok(TensorDesc(p))
}

/// A packed 3-d tensor `[a][b][c]` (the states: `[layers·dirs][mb][h]`).
fn tensor3(dtype: DType, dims: [i32; 3]) -> GpuResult<TensorDesc> {
    strided_tensor(dtype, &dims, &[dims[1] * dims[2], dims[2], 1])
}

/// A tensor of `dims` with `strides` (as many of each, 3 to 8).
pub(super) fn strided_tensor(dtype: DType, dims: &[i32], strides: &[i32]) -> GpuResult<TensorDesc> {
    assert_eq!(dims.len(), strides.len(), "a stride per dimension");
    let desc = empty_tensor_desc()?;
    // SAFETY: valid descriptor; `dims` and `strides` hold `len` ints each.
    check_cudnn("cudnnSetTensorNdDescriptor", unsafe {
        sys::cudnnSetTensorNdDescriptor(
            desc.0,
            cudnn::data_type(dtype),
            dims.len() as i32,
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
pub(super) fn set_rnn(
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
            form.bias_mode(algo),
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
