//! What every GPU run checks of its device before the first run.

use anyhow::{bail, Result};
use cnnbench_layers::DType;

/// tf32 and bf16 need tensor cores of compute capability 8.0 or later.
pub fn dtype_supported(cc: &str, d: DType) -> Result<()> {
    if !cnnbench_layers::cuda::device::supports_dtype(cc, d) {
        bail!("--dtype {d} needs a GPU of compute capability 8.0 or later (this one is {cc})");
    }
    Ok(())
}
