//! Pipelines: a workload's steps checked into a typed DAG ([`graph`]), the values that flow
//! through it ([`value`]), the built-in steps ([`steps`]) and the executor that runs one request
//! ([`exec`]), handing model runs to the engine.
pub mod exec;
pub mod generate;
pub mod graph;
pub mod io;
pub mod steps;
pub mod value;

pub use exec::{check_inputs, execute, ExecError, Execution, ModelCall, ModelRunner, Stop};
pub use graph::{GraphError, ModelPorts, PipelineGraph, StepKind, StepNode};
pub use value::{
    Audio, AudioError, Boxes, Image, Tensor, TensorData, TensorError, Value, ValueType,
};
