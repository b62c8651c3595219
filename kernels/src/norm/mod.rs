//! Normalisation kernels on NHWC data (channels innermost): batch
//! normalisation in training mode, and local response normalisation across
//! channels.

pub mod batchnorm;
pub mod lrn;
