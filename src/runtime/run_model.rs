//! One packed model prepared for streamed execution: the graph executor's activations and kernels,
//! with its weight texel offsets moved to the model's place in the stream engine's global page
//! space and no weights of its own; step `i` of its load profile records the nodes up to the
//! `i`-th kernel-running node.
use std::sync::Arc;

use vk_backend::kernels::weight_copy_into;
use vk_backend::{
    CommandCache, Device, RecordedCommands, Recorder, SharedMemory, SharedMemoryLayout,
    StreamEngine, VkError, WeightAtlas,
};

use super::executor::{Executable, TensorPrecisions};
use super::stream_exec::StepRecorder;
use super::weights::WeightResidency;
use super::RuntimeError;
use crate::packed::{Lookup, PackedModel, WeightKind};

/// A page source with no pages: the executor is built without weights (the stream engine owns
/// them); constants it copies out of the atlas at build time read zeros and are copied again by
/// the step that uses them.
struct NoPages {
    page_bytes: usize,
}

impl vk_backend::PageSource for NoPages {
    fn page_count(&self) -> u32 {
        0
    }
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }
    fn read_page(&self, page: u32, _: &mut [u8]) -> std::io::Result<()> {
        Err(std::io::Error::other(format!(
            "page {page}: a streamed model reads its pages through the stream engine"
        )))
    }
    fn name(&self) -> String {
        "(streamed model)".into()
    }
}

/// A model's executor on the streamed atlas.
pub struct StreamedModel {
    pub name: String,
    pub packed: Arc<PackedModel>,
    exe: Executable,
    /// Per profile step: the graph nodes it records, in order.
    step_nodes: Vec<std::ops::Range<usize>>,
    /// Per profile step: the lookup it is, if any.
    step_lookups: Vec<Option<Lookup>>,
    /// The last values uploaded to each graph input that lookups read their ids from.
    lookup_ids: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    texel_base: u32,
    /// Whether each step's commands are recorded once and executed again on later runs
    /// ([`StreamedModel::set_step_reuse`]).
    reuse_steps: bool,
    /// Per profile step: its commands as first recorded, once recorded.
    step_commands: Vec<Option<Arc<RecordedCommands>>>,
    /// Where those recordings live (made with the first one).
    command_cache: Option<CommandCache>,
    /// Per graph input: whether its image keeps its values from one run to the next when no
    /// other model runs in between (`Executable::inputs_kept_between_runs`, known once the
    /// arena is placed).
    inputs_kept: Vec<bool>,
}

impl StreamedModel {
    /// Builds the executor for `packed`, whose pages start at logical page `page_base` of the
    /// engine, with activations and its key/value cache at `precisions` (unset: the weights'
    /// precision, and the cache the activations'). Its activation arena is planned but not
    /// placed: see [`StreamedModel::bind_arena`].
    pub fn new(
        device: &Device,
        name: &str,
        packed: Arc<PackedModel>,
        page_base: u32,
        precisions: TensorPrecisions,
    ) -> Result<StreamedModel, RuntimeError> {
        let mut header = packed.header().clone();
        let texel_base = page_base as u64 * header.texels_per_page;
        for w in &mut header.weights {
            w.texel_offset += texel_base;
        }
        let texel_base = u32::try_from(texel_base).map_err(|_| RuntimeError::BadNode {
            node: name.into(),
            op: "model".into(),
            reason: "weight space past 2^32 texels".into(),
        })?;
        let pages = NoPages {
            page_bytes: 512 * header.precision.bytes_per_texel(),
        };
        let mut exe = Executable::new_unplaced(device, &header, &pages, precisions)?;
        exe.streamed_lookups = true;
        let mut step_nodes = Vec::new();
        let mut step_lookups = Vec::new();
        let mut from = 0usize;
        for s in header.steps.iter().filter(|s| !s.is_view) {
            step_nodes.push(from..s.node + 1);
            step_lookups.push(s.lookup.clone());
            from = s.node + 1;
        }
        let n = header.graph.nodes.len();
        if let Some(last) = step_nodes.last_mut() {
            last.end = n.max(last.end);
        }
        Ok(StreamedModel {
            name: name.into(),
            packed,
            exe,
            step_nodes,
            step_lookups,
            lookup_ids: Default::default(),
            texel_base,
            reuse_steps: true,
            step_commands: Vec::new(),
            command_cache: None,
            inputs_kept: Vec::new(),
        })
    }

    /// This model's arena images placed one after another: per slot its offset, and the layout.
    pub fn arena_layout(&self) -> Result<(Vec<Option<u64>>, SharedMemoryLayout), RuntimeError> {
        self.exe.arena_layout()
    }

    /// Keeps graph inputs alive for the whole run where that costs the shared arena nothing:
    /// `shared` is the memory every model's arena overlays (the largest of them). All inputs
    /// where this model's layout still fits in it, else each input in turn while it fits.
    /// Returns the names kept alive.
    pub fn pin_inputs_within(
        &mut self,
        shared: &SharedMemoryLayout,
    ) -> Result<Vec<String>, RuntimeError> {
        let names: Vec<String> = self
            .exe
            .graph()
            .inputs
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let model = self.name.clone();
        let mut fits = |set: &[&str]| -> Result<bool, RuntimeError> {
            self.exe.pin_inputs(set)?;
            let (_, layout) = self.exe.arena_layout()?;
            log::debug!(
                "model `{model}`: {} inputs kept alive, arena {} of {} bytes",
                set.len(),
                layout.size,
                shared.size
            );
            Ok(shared.overlay(&layout) == *shared)
        };
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        if fits(&all)? {
            return Ok(names);
        }
        let mut kept: Vec<&str> = Vec::new();
        for name in &all {
            kept.push(name);
            if !fits(&kept)? {
                kept.pop();
            }
        }
        fits(&kept)?;
        Ok(kept.into_iter().map(str::to_string).collect())
    }

    /// Places the activation arena in `memory`, which the other models of the workload share:
    /// models run one at a time, so each can use all of it ([`StreamedModel::begin_run`]).
    pub fn bind_arena(
        &mut self,
        memory: &SharedMemory,
        offsets: &[Option<u64>],
    ) -> Result<(), RuntimeError> {
        self.forget_step_commands();
        self.exe.bind_arena(memory, offsets)?;
        self.inputs_kept = self.exe.inputs_kept_between_runs()?;
        Ok(())
    }

    /// Whether graph input `name`'s image keeps its values until this model's next run, when
    /// no other model runs in between ([`Self::begin_run`] is then not needed).
    pub fn input_kept_between_runs(&self, name: &str) -> bool {
        let g = self.exe.graph();
        g.inputs
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| self.inputs_kept.get(i).copied())
            .unwrap_or(false)
    }

    /// Records each step's commands once and executes that recording on every later run (on,
    /// the default), or records them again every run (off; to measure one against the other).
    /// The commands do not change between runs: weights are read through the page table and
    /// activations stay where the arena put them.
    pub fn set_step_reuse(&mut self, on: bool) {
        self.reuse_steps = on;
        if !on {
            self.forget_step_commands();
        }
    }

    fn forget_step_commands(&mut self) {
        self.step_commands.clear();
        self.command_cache = None;
    }

    /// Starts a run: the arena's contents are whatever the previous model left, so its images
    /// are discarded (re-initialized on first use) before the inputs are uploaded.
    pub fn begin_run(&self) {
        self.exe.discard_arena();
    }

    /// Points the executor's weight binding at the engine's atlas (dropping its placeholder).
    pub fn attach(&mut self, engine: &StreamEngine) {
        self.attach_atlas(engine.atlas().clone());
    }

    fn attach_atlas(&mut self, atlas: WeightAtlas) {
        // Recorded steps name the old atlas in their descriptor sets.
        self.forget_step_commands();
        self.exe.weights = WeightResidency {
            atlas,
            pages: self.packed.page_count(),
            bytes: 0,
        };
    }

    /// Records every node once into a throwaway command buffer, so that lazily created scratch
    /// tensors exist (and are counted) before the cap is planned.
    pub fn warm_up(&mut self) -> Result<(), RuntimeError> {
        let mut rec =
            Recorder::new(self.exe.device(), vk_backend::QueueKind::Compute).map_err(|source| {
                RuntimeError::Vk {
                    what: format!("model `{}`: warm-up recording", self.name),
                    source,
                }
            })?;
        rec.use_weights(&self.exe.weights.atlas);
        for ni in 0..self.exe.graph().nodes.len() {
            self.exe.record_node(&mut rec, ni)?;
        }
        Ok(())
    }

    pub fn executable(&self) -> &Executable {
        &self.exe
    }

    /// The GPU tensor of graph input (`input`) or output `name`.
    fn port_tensor(&self, name: &str, input: bool) -> Result<&vk_backend::Tensor, RuntimeError> {
        let g = self.exe.graph();
        let (ports, kind) = if input {
            (&g.inputs, "input")
        } else {
            (&g.outputs, "output")
        };
        let p = ports
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| RuntimeError::Input {
                name: name.into(),
                reason: format!(
                    "model `{}` has no such {kind} ({kind}s: {:?})",
                    self.name,
                    ports.iter().map(|p| &p.name).collect::<Vec<_>>()
                ),
            })?;
        self.exe
            .tensor(p.tensor)
            .ok_or_else(|| RuntimeError::Input {
                name: name.into(),
                reason: "has no GPU tensor".into(),
            })
    }

    /// Uploads `data` into graph input `name` through `staging` (waits). Ids a lookup reads
    /// are kept, so its step knows which pages it needs.
    pub fn upload(
        &self,
        name: &str,
        data: &[f32],
        staging: &vk_backend::Buffer,
    ) -> Result<(), RuntimeError> {
        self.note_lookup_ids(name, data);
        self.port_tensor(name, true)?
            .upload_through(data, staging)
            .map_err(|source| RuntimeError::Vk {
                what: format!("model `{}`: uploading `{name}`", self.name),
                source,
            })
    }

    /// Keeps the ids an input carries where a lookup step reads them on the host (to load
    /// the pages holding those rows).
    fn note_lookup_ids(&self, name: &str, data: &[f32]) {
        if self
            .step_lookups
            .iter()
            .flatten()
            .any(|l| l.ids_input == name)
        {
            let mut ids = self.lookup_ids.lock().unwrap_or_else(|e| e.into_inner());
            ids.insert(name.to_string(), data.to_vec());
        }
    }

    /// Which of `names` fit the staging buffer together, taken in order (one that does not
    /// fit beside those before it is left out and the next ones still tried): those are staged
    /// ([`Self::stage_inputs`]), the rest go up on their own first ([`Self::upload`]).
    pub fn inputs_fitting(
        &self,
        names: &[&str],
        staging: &vk_backend::Buffer,
    ) -> Result<Vec<bool>, RuntimeError> {
        let mut end = 0u64;
        names
            .iter()
            .map(|name| {
                let next = aligned_end(end, self.port_tensor(name, true)?.physical_bytes());
                let fits = next <= staging.size();
                if fits {
                    end = next;
                }
                Ok(fits)
            })
            .collect()
    }

    /// Packs `inputs` side by side into `staging` (host writes only) where they fit together,
    /// for [`Self::record_input_copies`] to copy in the run's own submission instead of one
    /// submission and wait per input. Returns each input's offset, or `None` where they do
    /// not fit (then [`Self::upload`] each).
    pub fn stage_inputs(
        &self,
        inputs: &[(&str, &[f32])],
        staging: &vk_backend::Buffer,
    ) -> Result<Option<Vec<u64>>, RuntimeError> {
        let mut offsets = Vec::with_capacity(inputs.len());
        let mut end = 0u64;
        for (name, _) in inputs {
            offsets.push(end);
            end = aligned_end(end, self.port_tensor(name, true)?.physical_bytes());
        }
        if end > staging.size() {
            return Ok(None);
        }
        let vk_err = |name: &str, source| RuntimeError::Vk {
            what: format!("model `{}`: uploading `{name}`", self.name),
            source,
        };
        for ((name, data), &at) in inputs.iter().zip(&offsets) {
            self.note_lookup_ids(name, data);
            let t = self.port_tensor(name, true)?;
            let n = t.physical_bytes() as usize;
            staging
                .with_mapped(|m| match m.get_mut(at as usize..at as usize + n) {
                    Some(dst) => t.pack_bytes_into(data, dst),
                    None => Err(vk_backend::VkError::Stream(format!(
                        "staging holds {} bytes, input `{name}` ends at {}",
                        m.len(),
                        at as usize + n
                    ))),
                })
                .and_then(|r| r)
                .map_err(|e| vk_err(name, e))?;
        }
        Ok(Some(offsets))
    }

    /// Records the copies of inputs staged by [`Self::stage_inputs`] into `rec`.
    pub fn record_input_copies(
        &self,
        names: &[&str],
        offsets: &[u64],
        staging: &vk_backend::Buffer,
        rec: &mut Recorder,
    ) -> Result<(), vk_backend::VkError> {
        for (name, &at) in names.iter().zip(offsets) {
            let t = self
                .port_tensor(name, true)
                .map_err(|e| vk_backend::VkError::Stream(e.to_string()))?;
            rec.copy_buffer_to_tensor(staging, at, t)?;
        }
        Ok(())
    }

    /// Shape of graph input `name`.
    pub fn input_shape(&self, name: &str) -> Option<Vec<usize>> {
        let g = self.exe.graph();
        g.inputs
            .iter()
            .find(|p| p.name == name)
            .map(|p| g.tensors[p.tensor].shape.clone())
    }

    /// Downloads graph output `name` through `staging` (the run that wrote it must have
    /// finished).
    pub fn download(
        &self,
        name: &str,
        staging: &vk_backend::Buffer,
    ) -> Result<(Vec<usize>, Vec<f32>), RuntimeError> {
        let t = self.port_tensor(name, false)?;
        let v = t
            .download_through(staging)
            .map_err(|source| RuntimeError::Vk {
                what: format!("model `{}`: downloading `{name}`", self.name),
                source,
            })?;
        Ok((self.output_shape(name, t), v))
    }

    /// Offsets at which the outputs `names` fit `staging` side by side (`None` where they do
    /// not), for [`Self::record_output_copies`].
    pub fn output_offsets(
        &self,
        names: &[&str],
        staging: &vk_backend::Buffer,
    ) -> Result<Option<Vec<u64>>, RuntimeError> {
        let mut offsets = Vec::with_capacity(names.len());
        let mut end = 0u64;
        for name in names {
            offsets.push(end);
            end = aligned_end(
                end,
                vk_backend::kernels::readback_bytes(self.port_tensor(name, false)?),
            );
        }
        Ok((end <= staging.size()).then_some(offsets))
    }

    /// Records the copies of the outputs `names` into `staging` at `offsets` (from
    /// [`Self::output_offsets`]), to read with [`Self::read_output`] once they ran: the run's
    /// last submission carries them, with no submission and wait per output.
    pub fn record_output_copies(
        &self,
        names: &[&str],
        offsets: &[u64],
        staging: &vk_backend::Buffer,
        rec: &mut Recorder,
    ) -> Result<(), VkError> {
        for (name, &at) in names.iter().zip(offsets) {
            let t = self
                .port_tensor(name, false)
                .map_err(|e| VkError::Stream(e.to_string()))?;
            vk_backend::kernels::readback_into(rec, t, staging, at)?;
        }
        Ok(())
    }

    /// Output `name` as copied into `staging` at `at` by [`Self::record_output_copies`] (that
    /// submission must have finished).
    pub fn read_output(
        &self,
        name: &str,
        staging: &vk_backend::Buffer,
        at: u64,
    ) -> Result<(Vec<usize>, Vec<f32>), RuntimeError> {
        let t = self.port_tensor(name, false)?;
        let n = vk_backend::kernels::readback_bytes(t) as usize;
        let at = at as usize;
        let v = staging
            .with_mapped(|m| {
                m.get(at..at + n)
                    .map(|b| vk_backend::kernels::read_back(t, b))
            })
            .map_err(|source| RuntimeError::Vk {
                what: format!("model `{}`: reading back `{name}`", self.name),
                source,
            })?
            .ok_or_else(|| RuntimeError::Vk {
                what: format!("model `{}`: reading back `{name}`", self.name),
                source: VkError::Stream(format!(
                    "staging holds {} bytes, the output ends at {}",
                    staging.size(),
                    at + n
                )),
            })?;
        Ok((self.output_shape(name, t), v))
    }

    fn output_shape(&self, name: &str, t: &vk_backend::Tensor) -> Vec<usize> {
        let g = self.exe.graph();
        g.outputs
            .iter()
            .find(|p| p.name == name)
            .map_or_else(|| t.shape().to_vec(), |p| g.port_shape(p).to_vec())
    }

    /// Staging bytes of a run's inputs (`inputs`) or outputs (`!inputs`) side by side, from
    /// the shapes, so the I/O staging buffers are known before the arena is placed.
    pub fn staging_bytes(&self, inputs: bool) -> Result<u64, RuntimeError> {
        let g = self.exe.graph();
        let dev = self.exe.device();
        let precision = self.exe.activation_precision();
        // Staged side by side (`stage_inputs`, `record_output_copies`).
        let mut all = 0u64;
        let ports = if inputs { &g.inputs } else { &g.outputs };
        for p in ports {
            let shape = &g.tensors[p.tensor].shape;
            let texels = match vk_backend::Tensor::image_requirements(dev, shape, precision) {
                Ok(Some((l, _))) => l.physical_texels(),
                Ok(None) => vk_backend::FoldLayout::plan(crate::ir::nchw(shape), u32::MAX, 1)
                    .ok()
                    .flatten()
                    .map_or(0, |l| l.texels()),
                Err(source) => {
                    return Err(RuntimeError::Vk {
                        what: format!("model `{}`: tensor `{}`", self.name, p.name),
                        source,
                    })
                }
            };
            let texel_bytes = texels * precision.bytes_per_texel() as u64;
            let bytes = if inputs {
                texel_bytes
            } else {
                let elements = shape.iter().product::<usize>() as u64;
                vk_backend::kernels::readback_size(dev, elements, texel_bytes, precision)
            };
            all = aligned_end(all, bytes);
        }
        Ok(all)
    }
}

impl StreamedModel {
    /// The model's pages holding the rows lookup `l` reads for the ids last uploaded (every page
    /// of the table when none were).
    fn rows_pages(&self, l: &Lookup) -> Option<Vec<u32>> {
        let h = self.packed.header();
        let w = h.weights.get(l.weight)?;
        let WeightKind::Rows { rows, width } = w.kind else {
            return None;
        };
        let tpp = h.texels_per_page.max(1);
        let page = |texel: u64| (texel / tpp) as u32;
        let ids = self.lookup_ids.lock().unwrap_or_else(|e| e.into_inner());
        let Some(ids) = ids.get(&l.ids_input) else {
            let last = w.texel_offset + w.texels.max(1) - 1;
            return Some((page(w.texel_offset)..=page(last)).collect());
        };
        let table = vk_backend::kernels::RowTable {
            texel_offset: 0,
            rows,
            width,
        };
        let mut pages: Vec<u32> = ids
            .iter()
            .flat_map(|&v| {
                // As the kernel does: negative ids wrap, the rest clamp to the table.
                let id = v as i64;
                let r = if id < 0 { id + rows as i64 } else { id };
                let span = table.row_texels(r.clamp(0, rows as i64 - 1) as usize);
                page(w.texel_offset + span.start)..=page(w.texel_offset + span.end - 1)
            })
            .collect();
        pages.sort_unstable();
        pages.dedup();
        Some(pages)
    }
}

impl StepRecorder for StreamedModel {
    fn lookup_pages(&self, step: u32) -> Option<Vec<u32>> {
        let l = self.step_lookups.get(step as usize)?.as_ref()?;
        self.rows_pages(l)
    }

    fn record_step(&mut self, step: u32, rec: &mut Recorder, base: u32) -> Result<(), VkError> {
        if base != self.texel_base {
            return Err(VkError::Stream(format!(
                "model `{}` was built for weight texel base {}, the engine says {base}",
                self.name, self.texel_base
            )));
        }
        let Some(range) = self.step_nodes.get(step as usize).cloned() else {
            return Err(VkError::Stream(format!(
                "model `{}` has {} steps, step {step} asked for",
                self.name,
                self.step_nodes.len()
            )));
        };
        if !self.reuse_steps {
            return self.record_nodes(range, rec);
        }
        let i = step as usize;
        if let Some(Some(recorded)) = self.step_commands.get(i) {
            return rec.execute_recorded(recorded);
        }
        let cache = match &self.command_cache {
            Some(c) => c.clone(),
            None => {
                let c = CommandCache::new(self.exe.device());
                self.command_cache = Some(c.clone());
                c
            }
        };
        let recorded = rec.record_reusable(&cache, |sec| self.record_nodes(range, sec))?;
        if self.step_commands.len() < self.step_nodes.len() {
            self.step_commands.resize(self.step_nodes.len(), None);
        }
        self.step_commands[i] = Some(recorded);
        Ok(())
    }
}

impl StreamedModel {
    /// Records the nodes of one step (`range`) into `rec`.
    fn record_nodes(
        &mut self,
        range: std::ops::Range<usize>,
        rec: &mut Recorder,
    ) -> Result<(), VkError> {
        for ni in range {
            // Constant operands read as activations come out of the atlas while the step's
            // pages are resident.
            let copies: Vec<(u32, vk_backend::Tensor)> = {
                let g = self.exe.graph();
                let mut v = Vec::new();
                for (slot, t) in g.nodes[ni].inputs.iter().enumerate() {
                    let (Some(t), Some(w)) = (*t, self.exe.weight_entry(ni, slot)) else {
                        continue;
                    };
                    if let (WeightKind::Activation { .. }, Some(tensor)) =
                        (&w.kind, self.exe.tensor(t))
                    {
                        v.push((w.texel_offset as u32, tensor.clone()));
                    }
                }
                v
            };
            for (off, t) in copies {
                weight_copy_into(rec, off, &t)?;
            }
            self.exe
                .record_node(rec, ni)
                .map_err(|e| VkError::Stream(format!("model `{}`: {e}", self.name)))?;
        }
        Ok(())
    }
}

/// Where an input or output of `bytes` staged at `start` ends, rounded up for the next one: a buffer to
/// image copy's offset must be a multiple of the texel size and of 4, and 256 bytes meets every
/// device's optimal copy alignment.
fn aligned_end(start: u64, bytes: u64) -> u64 {
    const ALIGN: u64 = 256;
    (start + bytes).div_ceil(ALIGN) * ALIGN
}
