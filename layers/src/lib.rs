//! cnnbench layers.
