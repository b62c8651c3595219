//! One folder per op: its spec (`mod.rs`), its CPU side (`cpu.rs`), its
//! CUDA side (`cuda.rs`, with the op's `.cu` file beside it where cuDNN
//! lacks the kernel) and its tests.
//!
//! The `registry!` below is the one place that names them all: an op's line
//! declares its module, its [`Op`] variant (holding the op's spec) and,
//! where it has CUDA C of its own, its NVRTC program. Adding an op is its
//! folder plus its line there; models then build it with
//! `Builder::op(name, Op::Variant(spec), &inputs)`.

pub mod cuda_programs;
pub mod gemm;
pub mod input;
pub mod spec;

use crate::backend::cuda::nvrtc::Program;
use spec::OpSpec;

/// `module::Variant(Spec) [cuda path::to::PROGRAM]`, one line per op.
macro_rules! registry {
    ($( $module:ident :: $variant:ident ( $spec:ident ) $(cuda $($program:ident)::+)? ),* $(,)?) => {
        $( pub mod $module; )*

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
    conv::Conv(ConvSpec),
    batchnorm::BatchNorm(BatchNormSpec),
    relu::Relu(ReluSpec),
    pool::Pool(PoolSpec) cuda kernels::PROGRAM,
    lrn::Lrn(LrnSpec),
    linear::Linear(LinearSpec),
    dropout::Dropout(DropoutSpec) cuda kernels::PROGRAM,
    concat::Concat(ConcatSpec),
    add::Add(AddSpec),
    flatten::Flatten(FlattenSpec),
    loss::SoftmaxXent(SoftmaxXentSpec) cuda kernels::PROGRAM,
}

impl Op {
    /// The short type name shown in layer tables and JSON (`conv`, `bn`, ...).
    pub fn kind(&self) -> &'static str {
        self.spec().kind()
    }
}
