//! What every other module builds on: element types, tensor layouts,
//! seeded initialisation, the one error type, and the [`backend::Backend`]
//! and [`backend::Layer`] traits.

pub mod backend;
pub mod dtype;
pub mod encode;
pub mod error;
pub mod init;
pub mod layout;
pub mod shape;

pub use dtype::DType;
pub use layout::Layout;
