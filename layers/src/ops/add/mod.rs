//! The residual add. Its backward is free: the executor hands the output
//! gradient to both inputs as it is (no copy), see `net::cpu`.

pub mod cpu;
pub mod cuda;

pub use cpu::AddLayer;
