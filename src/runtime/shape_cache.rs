//! An ONNX model run at whatever input shapes the caller brings: one compiled [`Executable`] per
//! distinct input shape, built on first use (the OCR pipeline's detector/recognizer inputs vary).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use vk_backend::Device;

use super::error::{Result, RuntimeError};
use super::executor::{compile_onnx, Executable, HostTensor};
use crate::packed::StoredPrecision;

pub struct ShapeCachedModel {
    device: Device,
    path: PathBuf,
    precision: StoredPrecision,
    input: String,
    metadata: std::collections::BTreeMap<String, String>,
    cache: HashMap<Vec<usize>, Executable>,
}

impl ShapeCachedModel {
    /// Reads the model's input name and metadata by compiling it once at `probe_shape`.
    pub fn new(
        device: &Device,
        path: &Path,
        precision: StoredPrecision,
        probe_shape: &[usize],
    ) -> Result<ShapeCachedModel> {
        let onnx_input = crate::onnx::import(path, &Default::default())
            .ok()
            .and_then(|m| m.graph.inputs.first().map(|p| p.name.clone()))
            .unwrap_or_else(|| "x".into());
        let mut m = ShapeCachedModel {
            device: device.clone(),
            path: path.to_path_buf(),
            precision,
            input: onnx_input,
            metadata: Default::default(),
            cache: HashMap::new(),
        };
        m.get(probe_shape)?;
        if let Some(e) = m.cache.get(probe_shape) {
            m.metadata = e.header().metadata.clone();
        }
        Ok(m)
    }

    pub fn metadata(&self) -> &std::collections::BTreeMap<String, String> {
        &self.metadata
    }

    fn get(&mut self, shape: &[usize]) -> Result<&mut Executable> {
        if !self.cache.contains_key(shape) {
            let probe = vec![(
                self.input.clone(),
                HostTensor::new(shape.to_vec(), Vec::new()),
            )];
            let packed = compile_onnx(&self.path, &probe, self.precision).map_err(|reason| {
                RuntimeError::Input {
                    name: self.input.clone(),
                    reason,
                }
            })?;
            let exe = Executable::new(&self.device, &packed.header, &packed)?;
            self.cache.insert(shape.to_vec(), exe);
        }
        self.cache
            .get_mut(shape)
            .ok_or_else(|| RuntimeError::Input {
                name: self.input.clone(),
                reason: "executable cache".into(),
            })
    }

    /// Runs the model's single input -> first output.
    pub fn run(&mut self, shape: Vec<usize>, data: Vec<f32>) -> Result<HostTensor> {
        let name = self.input.clone();
        let exe = self.get(&shape)?;
        let mut outs = exe.run(&[(name.clone(), HostTensor::new(shape, data))])?;
        if outs.is_empty() {
            return Err(RuntimeError::Input {
                name,
                reason: "model has no outputs".into(),
            });
        }
        Ok(outs.swap_remove(0).1)
    }
}
