//! Human-readable reports: aligned tables and markdown.

pub mod cost;
pub mod table;
