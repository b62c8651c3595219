//! Reports read from the results store: markdown merged from runs, SVG
//! charts, and cost arithmetic.

pub mod charts;
pub mod cost;
pub mod markdown;
pub mod merge;
pub mod models;
pub mod options;
