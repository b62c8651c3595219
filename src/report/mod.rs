//! Human-readable reports: aligned tables and markdown.

pub mod table;
