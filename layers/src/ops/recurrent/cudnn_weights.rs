//! Where each weight matrix and bias of an RNN lies in cuDNN's weight
//! space, as cuDNN should report it, and how it maps to PyTorch's tensors.

use super::cudnn_descs::{invalid, RnnForm};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::error::{check_cudnn, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use cnnbench_kernels::rnn::RnnShape;

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
    /// Where this matrix and bias lie in PyTorch's [`Weights`](cnnbench_kernels::rnn::Weights) of its set:
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
/// pseudo-layer and `linLayerID`. Without a recurrent bias of the
/// problem's own ([`RnnForm::Network`], [`RnnForm::NetworkSeqMajor`]) the
/// recurrent matrices have none here (`bias` 0): cuDNN holds none with the
/// standard algorithm, and with a persistent one holds zeros that no
/// slot names, so nothing writes or reads them.
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
    /// `None` for a matrix without a bias of the problem's own (the
    /// recurrent ones in the network's forms).
    pub bias: Option<usize>,
}

/// The dims of a packed tensor descriptor cuDNN filled in, or why they are
/// not packed (the weights are copied in as dense row-major blocks).
pub(super) fn packed_dims(desc: &TensorDesc) -> GpuResult<Vec<usize>> {
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
