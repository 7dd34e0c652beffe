//! Workload files: the RON schema, parsing with file:line:col errors, and the bridge to the planner
//! (profiles per model, the pipeline as planner stages, cap, policy, bandwidth).
pub mod builtin;
pub mod locate;
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
    /// The file, made absolute, so relative paths inside it resolve against its directory
    /// however the caller spelled it.
    pub path: PathBuf,
    pub spec: Workload,
    /// The file's text, for locating steps in errors found after parsing.
    pub text: std::sync::Arc<str>,
}

/// Planner look-ahead per pipeline (`Times(n)`, `PerFrame(n)`): the plan unrolls this many
/// requests, so it bounds planning memory and time.
pub const MAX_REPEAT: u32 = 10_000;
/// Largest fan-out (`PerItem` `expected` and `max`): one request never runs a model more often.
pub const MAX_FAN_OUT: u32 = 4_096;

/// RON as workload files are written: `Run(model: ..)` for a newtype variant and `policy:
/// "planned"` for an option (older files spelled them `Run(Run(model: ..))` and `Some(..)`,
/// which still parse).
fn ron_options() -> ron::Options {
    ron::Options::default().with_default_extension(
        ron::extensions::Extensions::IMPLICIT_SOME
            | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES,
    )
}

fn parse_error(path: &Path, e: ron::error::SpannedError) -> WorkloadError {
    let mut msg = e.code.to_string();
    // `Transformer(SyntheticTransformer(..))` in a file that otherwise uses the new syntax:
    // the inner type name reads as a field.
    if let Some(name) = msg
        .strip_prefix("Unexpected field named `")
        .and_then(|r| r.split('`').next())
    {
        if name.starts_with(char::is_uppercase) {
            msg += &format!(
                " (a variant's contents are written directly now: `Variant(field: ..)`, not \
                 `Variant({name}(field: ..))`)"
            );
        }
    }
    WorkloadError::Parse {
        path: path.to_path_buf(),
        line: e.span.start.line,
        col: e.span.start.col,
        msg,
    }
}

/// Parses RON text; `path` names the file in errors and anchors its relative paths.
pub fn parse_workload(text: &str, path: &Path) -> Result<LoadedWorkload, WorkloadError> {
    let spec: Workload = match ron_options().from_str(text) {
        Ok(w) => w,
        // Files written before the extensions were on spell newtype variants twice; the
        // extension reads `Run(Run(..))` as a struct named `Run` inside the variant and fails.
        Err(new) => match ron::Options::default().from_str::<Workload>(text) {
            Ok(w) => {
                log::warn!(
                    "{}: old workload syntax (write `Run(model: ..)` instead of \
                     `Run(Run(model: ..))`, and `policy: \"planned\"` instead of `Some(..)`)",
                    path.display()
                );
                w
            }
            Err(_) => return Err(parse_error(path, new)),
        },
    };
    let w = LoadedWorkload {
        path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        spec,
        text: text.into(),
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

    /// An error about step `step` of pipeline `pipeline`, at its line and column where the
    /// text shows them.
    fn invalid_at(&self, pipeline: &str, step: usize, msg: String) -> WorkloadError {
        match locate::step_position(&self.text, pipeline, step) {
            Some(at) => WorkloadError::Parse {
                path: self.path.clone(),
                line: at.line,
                col: at.col,
                msg,
            },
            None => self.invalid(msg),
        }
    }

    /// The directory relative paths in the workload are resolved against: the file's own.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }

    /// `file:line:col` of step `step` of pipeline `pipeline` (just the file where the text
    /// does not show it).
    pub fn step_location(&self, pipeline: &str, step: usize) -> String {
        match locate::step_position(&self.text, pipeline, step) {
            Some(p) => format!("{}:{p}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// `file:line:col` of element `n` of pipeline `pipeline`'s list field `field` (`inputs`,
    /// `outputs`); just the file where the text does not show it.
    pub fn field_location(&self, pipeline: &str, field: &str, n: usize) -> String {
        match locate::field_element_position(&self.text, pipeline, field, n) {
            Some(p) => format!("{}:{p}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// A path written in the workload, resolved against its directory.
    pub fn resolve(&self, p: &str) -> PathBuf {
        self.dir().join(p)
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
        for (i, p) in s.pipelines.iter().enumerate() {
            if s.pipelines[..i].iter().any(|o| o.name == p.name) {
                return Err(self.invalid(format!("pipeline `{}` is defined twice", p.name)));
            }
            if s.models.iter().any(|m| m.name == p.name) {
                return Err(self.invalid(format!(
                    "pipeline `{}` has the name of a model (every model can also be run on its \
                     own under its name, so names must differ)",
                    p.name
                )));
            }
            match p.repeat {
                Repeat::Times(0) | Repeat::PerFrame(0) => {
                    return Err(self.invalid(format!(
                        "pipeline `{}`: repeat count 0 (use Once, or a count of at least 1)",
                        p.name
                    )))
                }
                Repeat::Times(n) | Repeat::PerFrame(n) if n > MAX_REPEAT => {
                    return Err(self.invalid(format!(
                        "pipeline `{}`: repeat count {n} is over the limit of {MAX_REPEAT} (it is \
                         how many requests the planner looks ahead)",
                        p.name
                    )))
                }
                _ => {}
            }
            for (k, st) in p.steps.iter().enumerate() {
                let Some((model, fan)) = st.model_runs() else {
                    continue;
                };
                let at_step = |msg: String| self.invalid_at(&p.name, k, msg);
                if !s.models.iter().any(|m| m.name == model) {
                    return Err(at_step(format!(
                        "pipeline `{}` step {k} runs unknown model `{model}`",
                        p.name
                    )));
                }
                if let Some((expected, max)) = fan {
                    if expected == 0 || max.is_some_and(|m| m < expected) {
                        return Err(at_step(format!(
                            "pipeline `{}` step {k}: fan-out expected {expected} must be ≥ 1 and \
                             ≤ max",
                            p.name
                        )));
                    }
                    let most = max.unwrap_or(expected.max(64));
                    if most > MAX_FAN_OUT || expected > MAX_FAN_OUT {
                        return Err(at_step(format!(
                            "pipeline `{}` step {k}: fan-out of {most} is over the limit of \
                             {MAX_FAN_OUT} runs per request",
                            p.name
                        )));
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
            reuse_lag_steps: 0,
            handoff_s: 0.0,
            first_read_bytes_per_s: None,
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
            .filter_map(|st| {
                let (model, fan) = st.model_runs()?;
                Some(Stage {
                    model: self
                        .spec
                        .models
                        .iter()
                        .position(|m| m.name == model)
                        .unwrap_or(0),
                    count: fan.map_or(1, |(expected, _)| expected),
                })
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
    fn an_unknown_model_is_named_at_its_step() {
        let text = "Workload(name: \"x\", cap: \"1MiB\", models: [\n  ModelSpec(name: \"m\", \
            source: Synthetic(Uniform(layers: 2, bytes_per_layer: \"1MiB\", \
            compute_per_layer_us: 1.0)))],\n  pipelines: [PipelineSpec(name: \"p\", steps: [\n    \
            Run(model: \"m\"),\n    Run(model: \"nope\")])])";
        let e = parse_workload(text, Path::new("w.ron"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("w.ron:5:5: ") && e.contains("`nope`"), "{e}");
    }

    #[test]
    fn unknown_fields_are_errors() {
        let text = r#"Workload(name: "x", capp: "1MiB", models: [], pipelines: [])"#;
        let e = parse_workload(text, Path::new("w.ron"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("capp") && e.starts_with("w.ron:1:"), "{e}");
    }

    #[test]
    fn new_and_old_spellings_both_load() {
        let new = r#"Workload(name: "x", cap: "1MiB", policy: "lru", models: [
            ModelSpec(name: "m", source: Synthetic(Uniform(layers: 2,
                bytes_per_layer: "1MiB", compute_per_layer_us: 1.0)))],
            pipelines: [PipelineSpec(name: "p", steps: [Run(model: "m")])])"#;
        let old = r#"Workload(name: "x", cap: "1MiB", policy: Some("lru"), models: [
            ModelSpec(name: "m", source: Synthetic(Uniform(SyntheticUniform(layers: 2,
                bytes_per_layer: "1MiB", compute_per_layer_us: 1.0))))],
            pipelines: [PipelineSpec(name: "p", steps: [Run(Run(model: "m"))])])"#;
        let a = parse_workload(new, Path::new("w.ron")).unwrap();
        let b = parse_workload(old, Path::new("w.ron")).unwrap();
        assert_eq!(a.spec, b.spec);
        assert_eq!(a.policy().unwrap(), Policy::Lru);
    }

    #[test]
    fn repeat_counts_are_bounded() {
        for (rep, want) in [
            ("PerFrame(0)", "repeat count 0"),
            ("Times(1000000000)", "limit"),
        ] {
            let text = format!(
                r#"Workload(name: "x", cap: "1MiB", models: [], pipelines: [
                PipelineSpec(name: "p", repeat: {rep}, steps: [])])"#
            );
            let e = parse_workload(&text, Path::new("w.ron"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{rep}: {e}");
        }
    }

    #[test]
    fn paths_resolve_against_the_workload_file() {
        let text = r#"Workload(name: "x", cap: "1MiB", models: [], pipelines: [
            PipelineSpec(name: "p", steps: [])])"#;
        let w = parse_workload(text, Path::new("w.ron")).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(w.resolve("../m.onnx"), cwd.join("../m.onnx"));
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
