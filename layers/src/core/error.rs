//! The error every backend returns: the call that failed and what it
//! said. On CUDA the call is a driver, cuDNN, cuBLAS or NVRTC entry point;
//! on the CPU, an allocation.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The API call, e.g. `cudnnConvolutionForward`.
    pub call: &'static str,
    /// The status it returned, e.g. `CUDNN_STATUS_NOT_SUPPORTED`.
    pub status: String,
    /// Whether the status means out of memory.
    pub oom: bool,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.call, self.status)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An argument `call` cannot take, and why.
    pub fn invalid(call: &'static str, why: String) -> Error {
        Error {
            call,
            status: why,
            oom: false,
        }
    }

    /// Host memory for `what` could not be had.
    pub fn host_oom(bytes: usize) -> Error {
        Error {
            call: "allocate",
            status: format!("out of host memory ({bytes} bytes)"),
            oom: true,
        }
    }
}
