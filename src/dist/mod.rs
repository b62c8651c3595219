//! Past one GPU: who this process is among the launched ranks
//! ([`launch`]), how the ranks find each other before NCCL takes over
//! ([`rendezvous`]), and what more GPUs would do for a measured run
//! ([`interconnect`], [`project`]).

pub mod interconnect;
pub mod launch;
pub mod project;
pub mod rendezvous;
