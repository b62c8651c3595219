//! One folder per op: its spec (`mod.rs`), its CPU side (`cpu.rs`), its
//! CUDA side (`cuda.rs`, with the op's `.cu` file beside it where cuDNN
//! lacks the kernel) and its tests.
//!
//! The `registry!` below is the one place that names them all: an op's line
//! gives its [`Op`] variant (holding the op's spec, which must be `Copy`
//! and `PartialEq`, as a node is) and, where it has CUDA C of its own, its
//! NVRTC program. Adding an op is its folder, its `mod` line and its
//! registry line here; models then build it with
//! `Builder::op(name, Op::Variant(spec), &inputs)`. (The `mod` lines stay
//! outside the macro so that `cargo fmt` sees the ops' files.)

pub mod cuda_programs;
/// cuBLAS GEMM and the GPU's peak measurement (used by `linear`; not a
/// graph op).
pub mod gemm;
pub mod input;
pub mod spec;

pub mod add;
pub mod batchnorm;
pub mod concat;
pub mod conv;
pub mod dropout;
pub mod embedding;
pub mod flatten;
pub mod linear;
pub mod loss;
pub mod lrn;
pub mod pool;
pub mod recurrent;
pub mod relu;
pub mod sigmoid_bce;

use crate::backend::cuda::nvrtc::Program;
use spec::OpSpec;

/// `module::Variant(Spec) [cuda path::to::PROGRAM]`, one line per op.
macro_rules! registry {
    ($( $module:ident :: $variant:ident ( $spec:ident ) $(cuda $($program:ident)::+)? ),* $(,)?) => {
        /// What a node does: one variant per op, holding the op's spec.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Op {
            /// The image: node 0 of every graph; no layer on any backend.
            Input(input::InputSpec),
            $( $variant($module::$spec), )*
        }

        impl Op {
            /// The op's spec: its output shape, parameters, MACs, initial
            /// values and layers on every backend.
            pub fn spec(&self) -> &dyn OpSpec {
                match self {
                    Op::Input(s) => s,
                    $( Op::$variant(s) => s, )*
                }
            }
        }

        /// The ops' own CUDA C programs, in registry order.
        pub const OP_PROGRAMS: &[Program] = &[ $( $( $module::$($program)::+, )? )* ];
    };
}

registry! {
    conv::Conv(ConvSpec) cuda kernels::PROGRAM,
    batchnorm::BatchNorm(BatchNormSpec) cuda kernels::PROGRAM,
    relu::Relu(ReluSpec) cuda kernels::PROGRAM,
    pool::Pool(PoolSpec) cuda kernels::PROGRAM,
    lrn::Lrn(LrnSpec) cuda kernels::PROGRAM,
    linear::Linear(LinearSpec),
    dropout::Dropout(DropoutSpec) cuda kernels::PROGRAM,
    concat::Concat(ConcatSpec),
    add::Add(AddSpec) cuda kernels::PROGRAM,
    flatten::Flatten(FlattenSpec),
    loss::SoftmaxXent(SoftmaxXentSpec) cuda kernels::PROGRAM,
    embedding::Embedding(EmbeddingSpec) cuda kernels::PROGRAM,
    recurrent::Recurrent(RecurrentSpec),
    sigmoid_bce::SigmoidBce(SigmoidBceSpec) cuda kernels::PROGRAM,
}

impl Op {
    /// The short type name shown in layer tables and JSON (`conv`, `bn`, ...).
    pub fn kind(&self) -> &'static str {
        self.spec().kind()
    }
}
