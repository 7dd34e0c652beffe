//! texstream runs several distinct neural networks one after another on a Vulkan GPU under one
//! hard memory cap. Weights and activations live in optimal-tiling RGBA 2D-array images ("2.5D
//! texture storage"); weights stream page by page into a paged atlas while the models run,
//! following one residency timeline that a global scheduler builds for the whole workload.
//!
//! The way in for an application is the [`Engine`]: open a workload file once, then send it
//! requests from memory ([`Engine::run`], [`Engine::submit`]) from any thread, reload the
//! workload while it serves ([`Engine::reload`]) and read its [`EngineStats`]. A request names a
//! pipeline of the workload (or one model, by its name) and gives [`Value`]s: tensors, images,
//! audio, text, lists of them. See `examples/embed.rs`.
//!
//! The modules, in the order data flows through them:
//! - [`onnx`] imports ONNX files into the [`ir`], whose passes optimize the graph;
//! - [`compile`] is the one chain from an ONNX file to a [`packed`] model;
//! - [`workload`] reads workload files; [`pipeline`] checks their pipelines into typed DAGs and
//!   runs them (built-in steps on the CPU, model runs on the GPU);
//! - [`runtime`] runs packed models on the Vulkan backend (executor, activation arena,
//!   streaming under the scheduler's plan);
//! - [`engine`] holds it all open for requests; [`serve`] serves it over HTTP (KServe v2).
pub mod audio;
pub mod compile;
pub mod engine;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod ir;
pub mod onnx;
pub mod ops;
pub mod packed;
pub mod pipeline;
pub mod precision;
pub mod runtime;
pub mod serve;
pub mod workload;

pub use engine::{
    CancelToken, DeviceChoice, Engine, EngineError, EngineOptions, EngineStats, PipelineInfo,
    RequestError, RequestHandle, Response, StreamTuning, SubmitOptions, Values,
};
pub use pipeline::{Audio, Image, Tensor, TensorData, Value, ValueType};
pub use precision::Precision;
pub use scheduler::Policy;
