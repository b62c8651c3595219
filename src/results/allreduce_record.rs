//! One all-reduce measured: the record of `cnnbench allreduce`, its JSON
//! contract (its CSV and table are `output::allreduce`'s).

use crate::bench::Stats;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllreduceRecord {
    pub elements: usize,
    pub bytes: usize,
    pub dtype: String,
    pub in_place: bool,
    pub ranks: usize,
    /// `in-process`, `torchrun` or `slurm`.
    pub launcher: String,
    /// Per all-reduce, the slowest rank's.
    pub time_us: Stats,
    /// bytes / median time, GB/s (1e9).
    pub algbw_gbps: f64,
    /// algbw x 2(ranks-1)/ranks: what each link carried (nccl-tests; 0 on
    /// one rank).
    pub busbw_gbps: f64,
    pub runs: usize,
    /// `ok`, or what the check found.
    pub status: String,
}
