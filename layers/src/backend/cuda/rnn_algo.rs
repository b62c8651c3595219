//! cuDNN's recurrence algorithms, with the names `cnnbench rnn --algo`
//! accepts and results show.

use crate::backend::cuda::loader::cudnn_sys as sys;

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

    pub(crate) fn raw(self) -> sys::cudnnRNNAlgo_t {
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
