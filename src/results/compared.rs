//! One tensor `cnnbench check` compared: the rows of its table and JSON.

use serde::Serialize;

#[derive(Serialize)]
pub struct Compared {
    pub model: String,
    pub tensor: String,
    pub rel_err: f64,
    pub tolerance: f64,
    pub passed: bool,
}
