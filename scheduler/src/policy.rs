//! Policy names.
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How a plan chooses loads and evictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Policy {
    /// All weights resident; an error if they exceed the cap.
    Preload,
    /// Load a stage's whole model, run it (all fan-out runs), free it.
    ReloadPerModel,
    /// Load each page when its step comes up (after the previous step ends), evicting MIN's choice.
    OnDemand,
    /// Load each page when its step comes up, evicting the least recently used page.
    Lru,
    /// Prefetch in next-use order across model boundaries, evict farthest next use (the default).
    #[default]
    Planned,
}

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 5] = [
        Policy::Preload,
        Policy::ReloadPerModel,
        Policy::OnDemand,
        Policy::Lru,
        Policy::Planned,
    ];

    /// The CLI / workload name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Preload => "preload",
            Policy::ReloadPerModel => "reload-per-model",
            Policy::OnDemand => "on-demand",
            Policy::Lru => "lru",
            Policy::Planned => "planned",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| PlanError::UnknownPolicy(s.to_string()))
    }
}
