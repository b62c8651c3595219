//! Pure compute for cnnbench: no knowledge of layers, models or the CLI.
//!
//! Every kernel has a naive reference next to it, and the SIMD flavour is
//! chosen once at run time ([`isa::Isa::detect`]) over a scalar fallback.

pub mod alloc;
pub mod bandwidth;
pub mod clock;
pub mod conv;
pub mod eltwise;
pub mod embedding;
pub mod gemm;
pub mod isa;
pub mod loss;
pub mod norm;
pub mod peak;
pub mod pool;
pub mod rng;
pub mod rnn;
pub mod simd;
pub mod stream;

pub use isa::Isa;
