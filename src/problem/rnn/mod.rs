//! Recurrent-layer problem descriptors in oneDNN benchdnn's RNN syntax
//! (`tests/benchdnn/doc/driver_rnn.md`), and batch files of them.
//!
//! `l1t25mb16sic512`, `l2_t50_mb32_sic256_slc128_n"speech"`, or, as a line
//! of a batch file, `--cell=gru --direction=bidirectional-concat
//! l1t750mb32sic2816`.
//!
//! Rules, as benchdnn has them: `_` is ignored; `l` layers (default 1), `t`
//! time steps (default 1), `mb` batch (default 2), `sic` the state size
//! (required), `slc` the first layer's input size (default sic), `dhc` the
//! hidden size (default sic), `dic` the output size (default dhc). `n`
//! starts the name and comes last: `n"..."` quoted, or unquoted to the end
//! of the descriptor as benchdnn reads it (then without spaces or quotes).
//!
//! What benchdnn accepts and cnnbench does not: a projection (`dic !=
//! dhc`, LSTM only in oneDNN), and a state size other than the hidden size
//! (`sic != dhc`), which only a projection makes meaningful. cuDNN's and
//! PyTorch's cells, which cnnbench times and checks against, have neither.
//! Only printable ASCII is read, so that every message about a descriptor
//! stays on one line.

mod cell;
mod desc;
mod line;
#[cfg(test)]
mod tests;

pub use cell::{Cell, Direction};
pub use desc::RnnProblem;
pub use line::load_rnn_batch;
