//! Reports read from the results store: markdown merged from runs, SVG
//! charts, cost arithmetic, comparisons between runs, and published
//! numbers for context.

pub mod charts;
pub mod comparisons;
pub mod cost;
pub mod input;
pub mod labels;
pub mod markdown;
pub mod merge;
pub mod models;
pub mod options;
pub mod published;
#[cfg(test)]
mod scale_tests;
