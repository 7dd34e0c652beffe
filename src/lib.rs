//! texstream: run several neural networks in succession on a Vulkan GPU under one hard memory cap.
pub mod cli;
pub mod fuzz_entry;
pub mod ir;
pub mod onnx;
pub mod ops;
pub mod packed;
pub mod runtime;
pub mod workload;
