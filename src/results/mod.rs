//! Records of what was measured, the environment they were measured in, and
//! the writers that turn them into JSON, CSV, tables or markdown.

pub mod dump;
pub mod environment;
pub mod model_record;
pub mod price;
pub mod record;
pub mod store;
pub mod writers;

pub use environment::Environment;
pub use model_record::{LayerTime, MemoryBytes, ModelRecord};
pub use record::{Check, Record, Skipped};
