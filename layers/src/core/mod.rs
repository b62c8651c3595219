//! What every other module builds on: element types, tensor layouts and
//! seeded initialisation.

pub mod dtype;
pub mod init;
pub mod layout;

pub use dtype::DType;
pub use layout::Layout;
