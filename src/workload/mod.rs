//! Workload files: the RON schema, parsing with file:line:col errors, and the bridge to the planner
//! (profiles per model, the pipeline as planner stages, cap, policy, bandwidth).
pub mod ocr;
pub mod profiles;
pub mod schema;

pub use profiles::{load_profile, ProfileSource};
pub use schema::*;

use scheduler::{parse_size, Bandwidth, Pipeline, Policy, Stage};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Errors reading or checking a workload. Each names the file.
#[derive(Debug, Error)]
pub enum WorkloadError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{col}: {msg}")]
    Parse {
        path: PathBuf,
        line: usize,
        col: usize,
        msg: String,
    },
    #[error("{path}: {msg}")]
    Invalid { path: PathBuf, msg: String },
}

/// A parsed, checked workload and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedWorkload {
    pub path: PathBuf,
    pub spec: Workload,
}

/// Parses RON text; `path` is only used in error messages.
pub fn parse_workload(text: &str, path: &Path) -> Result<LoadedWorkload, WorkloadError> {
    let spec: Workload =
        ron::from_str(text).map_err(|e: ron::error::SpannedError| WorkloadError::Parse {
            path: path.to_path_buf(),
            line: e.span.start.line,
            col: e.span.start.col,
            msg: e.code.to_string(),
        })?;
    let w = LoadedWorkload {
        path: path.to_path_buf(),
        spec,
    };
    w.check()?;
    Ok(w)
}

/// Reads and parses a workload file.
pub fn load_workload(path: &Path) -> Result<LoadedWorkload, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_workload(&text, path)
}

impl LoadedWorkload {
    fn invalid(&self, msg: String) -> WorkloadError {
        WorkloadError::Invalid {
            path: self.path.clone(),
            msg,
        }
    }

    /// Directory that relative model paths are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    fn check(&self) -> Result<(), WorkloadError> {
        let s = &self.spec;
        self.cap_bytes()?;
        self.page_bytes()?;
        self.bandwidth()?;
        self.policy()?;
        for (i, m) in s.models.iter().enumerate() {
            if s.models[..i].iter().any(|o| o.name == m.name) {
                return Err(self.invalid(format!("model `{}` is defined twice", m.name)));
            }
        }
        if s.pipelines.is_empty() {
            return Err(self.invalid("no pipelines".into()));
        }
        for p in &s.pipelines {
            for (k, st) in p.steps.iter().enumerate() {
                if let PipelineStep::Run(r) = st {
                    if !s.models.iter().any(|m| m.name == r.model) {
                        return Err(self.invalid(format!(
                            "pipeline `{}` step {k} runs unknown model `{}`",
                            p.name, r.model
                        )));
                    }
                    if let FanOut::PerItem(pi) = &r.fan_out {
                        if pi.expected == 0 || pi.max.is_some_and(|m| m < pi.expected) {
                            return Err(self.invalid(format!(
                                "pipeline `{}` step {k}: fan-out expected {} must be ≥ 1 and ≤ max",
                                p.name, pi.expected
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn cap_bytes(&self) -> Result<u64, WorkloadError> {
        parse_size(&self.spec.cap).map_err(|e| self.invalid(format!("cap: {e}")))
    }

    pub fn page_bytes(&self) -> Result<u64, WorkloadError> {
        let p = match &self.spec.page_size {
            Some(s) => parse_size(s).map_err(|e| self.invalid(format!("page_size: {e}")))?,
            None => 1 << 20,
        };
        if p == 0 {
            return Err(self.invalid("page_size must be positive".into()));
        }
        Ok(p)
    }

    pub fn policy(&self) -> Result<Policy, WorkloadError> {
        match &self.spec.policy {
            Some(p) => p.parse().map_err(|e| self.invalid(format!("policy: {e}"))),
            None => Ok(Policy::Planned),
        }
    }

    pub fn bandwidth(&self) -> Result<Bandwidth, WorkloadError> {
        let Some(b) = &self.spec.bandwidth else {
            return Ok(Bandwidth::default());
        };
        let rate = |s: &str, what: &str| -> Result<f64, WorkloadError> {
            let v = parse_size(s).map_err(|e| self.invalid(format!("bandwidth.{what}: {e}")))?;
            if v == 0 {
                return Err(self.invalid(format!("bandwidth.{what} must be positive")));
            }
            Ok(v as f64)
        };
        if !(b.per_transfer_us.is_finite() && b.per_transfer_us >= 0.0) {
            return Err(self.invalid("bandwidth.per_transfer_us must be ≥ 0".into()));
        }
        Ok(Bandwidth {
            h2d_bytes_per_s: rate(&b.h2d_per_s, "h2d_per_s")?,
            per_transfer_s: b.per_transfer_us * 1e-6,
            disk_bytes_per_s: b
                .disk_per_s
                .as_deref()
                .map(|d| rate(d, "disk_per_s"))
                .transpose()?,
        })
    }

    /// The named pipeline, or the first one.
    pub fn pipeline_spec(&self, name: Option<&str>) -> Result<&PipelineSpec, WorkloadError> {
        match name {
            None => self
                .spec
                .pipelines
                .first()
                .ok_or_else(|| self.invalid("no pipelines".into())),
            Some(n) => self
                .spec
                .pipelines
                .iter()
                .find(|p| p.name == n)
                .ok_or_else(|| self.invalid(format!("no pipeline named `{n}`"))),
        }
    }

    /// Planner view of a pipeline: its model runs as stages (fan-out = expected count) over the
    /// workload's model list, repeated as the pipeline says.
    pub fn planner_pipeline(&self, p: &PipelineSpec) -> Pipeline {
        let stages = p
            .steps
            .iter()
            .filter_map(|st| match st {
                PipelineStep::Run(r) => Some(Stage {
                    model: self
                        .spec
                        .models
                        .iter()
                        .position(|m| m.name == r.model)
                        .unwrap_or(0),
                    count: match &r.fan_out {
                        FanOut::One => 1,
                        FanOut::PerItem(pi) => pi.expected,
                    },
                }),
                _ => None,
            })
            .collect();
        let repetitions = match p.repeat {
            Repeat::Once => 1,
            Repeat::Times(n) | Repeat::PerFrame(n) => n,
        };
        Pipeline {
            stages,
            repetitions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_error_has_line_and_column() {
        let text = "Workload(\n  name: \"x\",\n  cap: 24,\n)";
        let e = parse_workload(text, Path::new("w.ron"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("w.ron:3:"), "{e}");
    }

    #[test]
    fn example_workloads_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        for f in [
            "camera-ocr.ron",
            "synthetic-3-transformers.ron",
            "synthetic-10k.ron",
        ] {
            let w = load_workload(&dir.join(f)).unwrap();
            let p = w.pipeline_spec(None).unwrap();
            assert!(!w.planner_pipeline(p).stages.is_empty(), "{f}");
        }
    }

    #[test]
    fn unknown_model_is_named() {
        let text = r#"Workload(name: "x", cap: "1MiB", models: [], pipelines: [
            PipelineSpec(name: "p", steps: [Run(Run(model: "ghost"))])])"#;
        let e = parse_workload(text, Path::new("w.ron"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ghost") && e.contains("w.ron"), "{e}");
    }
}
