//! Records of what was measured, the environment they were measured in,
//! and the results store that keeps them.

pub mod allreduce_record;
pub mod atomic;
pub mod compared;
pub mod dump;
pub mod environment;
pub mod kinds;
pub mod loader_record;
pub mod machine_info;
pub mod memory;
pub mod model_record;
pub mod price;
#[cfg(test)]
mod proptests;
pub mod record;
pub mod roofline;
pub mod store;

pub use environment::Environment;
pub use kinds::{Device, Dir};
pub use model_record::{
    DataParallel, FolderInput, Input, InputSource, LayerTime, MemoryBytes, ModelRecord,
    ProjectionSet,
};
pub use record::{Check, Record, Skipped};
