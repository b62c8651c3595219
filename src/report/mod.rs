//! Human-readable output: aligned tables, markdown reports merged from the
//! results store, SVG charts, and cost arithmetic.

pub mod charts;
pub mod cost;
pub mod markdown;
pub mod merge;
pub mod models;
pub mod options;
pub mod table;
