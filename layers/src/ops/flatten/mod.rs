//! Flatten: in NHWC an image's `h x w x c` values are already one row, so
//! the executor makes the output share the input's memory, and the
//! gradient likewise; nothing runs.

pub mod cpu;

pub use cpu::FlattenLayer;
