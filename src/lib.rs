//! texstream: run several neural networks in succession on a Vulkan GPU under one hard memory cap.
pub mod ir;
pub mod onnx;
pub mod ops;
pub mod cli;
pub mod packed;
pub mod workload;
pub mod runtime;
