//! Pure planning: per-model load profiles in, one residency timeline out.
//!
//! Inputs are [`Profile`]s (ordered steps with the pages they read, compute time and activation bytes),
//! a [`Pipeline`] (models in order with fan-out and repetitions), a cap in bytes and a [`Bandwidth`]
//! model. [`plan`] unrolls the pipeline into one global step sequence, builds a [`Schedule`] (transfer
//! ops in order plus what each step waits for) with the chosen [`Policy`], times it with the
//! two-resource simulator ([`simulate`]), checks it with the validator and reports it against the
//! [`LowerBound`]. No Vulkan, no ONNX.
mod error;
mod lazy_heap;
mod paging;
mod plan;
mod policy;
mod prefetch;
mod profile;
mod schedule;
mod sim;
mod size;
pub mod svg;
pub mod synth;
mod trace;
mod validate;
mod whole;

pub use error::PlanError;
pub use paging::{demand_schedule, min_loads, Eviction, Issue};
pub use plan::{
    candidates, lower_bound, lower_bound_trace, min_feasible_cap, min_feasible_cap_trace, plan,
    plan_trace, plan_trace_from, replan, simulate, slots_for_cap, Candidate, Choice, Event,
    EventKind, LowerBound, MinCap, Plan, PlanStats, PLANNED_CONSTRUCTIONS,
};
pub use policy::Policy;
pub use prefetch::{prefetch_schedule, prefetch_schedule_within};
pub use profile::{Bandwidth, PageRef, Pipeline, Profile, Stage, Step};
pub use schedule::{Op, Schedule};
pub use sim::{simulate_schedule, Simulation};
pub use size::{format_size, parse_size};
pub use trace::{Trace, TraceStep, NEVER};
pub use validate::validate;
