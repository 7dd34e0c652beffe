//! Pipeline variants: a kernel is built per tensor storage (images or storage buffers) and per
//! activation/weight precision pair; a dispatch runs the variant its tensors and the bound
//! weight atlas need.

use std::sync::Arc;

use super::dispatch::{Arg, ArgRes};
use super::Recorder;
use crate::error::{Result, VkError};
use crate::pipeline::Pipeline;

impl Recorder {
    /// The variant of `pipeline` matching the storage of the tensors in `args` (all tensors of one
    /// dispatch must be images, or all storage buffers) and the precision of the bound atlas.
    pub(super) fn resolve_variant(
        &self,
        pipeline: &Arc<Pipeline>,
        args: &[Arg<'_>],
    ) -> Result<Arc<Pipeline>> {
        let mut kind = None;
        for (i, arg) in args.iter().enumerate() {
            if let ArgRes::Tensor(t) = arg.res {
                let k = t.storage_kind();
                match kind {
                    None => kind = Some((k, i, t.name())),
                    Some((k0, i0, n0)) if k0 != k => {
                        return Err(VkError::Kernel {
                            kernel: pipeline.desc.name.to_string(),
                            reason: format!(
                                "binding {i0}: tensor `{n0}` is in {k0:?} storage but binding \
                                 {i}: tensor `{}` is in {k:?} storage; one dispatch needs one kind",
                                t.name()
                            ),
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        let storage = kind.map_or(pipeline.storage, |(k, _, _)| k);
        // A kernel reading weights uses the variant built for the bound atlas's precision.
        let weights = match (&self.weights, pipeline.desc.uses_weights) {
            (Some(atlas), true) => atlas.precision(),
            _ => pipeline.weights,
        };
        if storage == pipeline.storage && weights == pipeline.weights {
            return Ok(pipeline.clone());
        }
        self.device.pipeline_specialized(
            &pipeline.desc,
            pipeline.precision,
            weights,
            storage,
            pipeline.spec,
        )
    }
}
