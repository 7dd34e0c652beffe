//! The executor: builds GPU tensors for a packed model (preloaded weights, constant operands,
//! arena-planned activations) and runs the whole graph with one submission per run.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use vk_backend::{
    kernels::weight_copy_into, Buffer, Device, MemoryCategory, PageSource, QueueKind, Recorder,
    SharedMemory, SharedMemoryLayout, Tensor,
};

use super::arena::{self, ArenaPlan, PoolKey};
use super::error::{vk, Result, RuntimeError};
use super::weights::{vk_precision, WeightResidency};
use crate::ir::{DType, Graph, TensorId};
use crate::packed::{PackedHeader, PackedModel, Precision, StepInfo, WeightEntry, WeightKind};

pub use super::npy::NpyArray as HostTensor;

/// A run's outputs, by graph output name.
pub type NamedOutputs = Vec<(String, HostTensor)>;

/// Wall-clock split of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunTimings {
    /// Packing inputs and recording every dispatch (a replayed run records nothing).
    pub record: Duration,
    /// Submit until the GPU finished (includes input upload and output download copies).
    pub gpu: Duration,
    /// Unpacking outputs on the host.
    pub readback: Duration,
    /// GPU time from the run's first command to its last, from timestamps (`None` where the
    /// queue has none, and in profiled runs).
    pub gpu_ns: Option<f64>,
    /// Whether the run submitted the recorded commands again instead of recording them.
    pub replayed: bool,
}

/// How [`Executable::with_options`] builds a model.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions {
    /// Precisions of the activation images and the key/value cache (unset: the weights', and
    /// the cache the activations').
    pub precisions: TensorPrecisions,
    /// Pool the activation arena: a dead tensor's image is taken over by a later tensor of the
    /// same image extent. Off, every tensor has its own image (for debugging the arena).
    pub pool_arena: bool,
    /// Record the runs' commands once and submit them again for every later run
    /// ([`Executable::run`]); off, every run records every dispatch.
    pub replay: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            precisions: TensorPrecisions::default(),
            pool_arena: true,
            replay: true,
        }
    }
}

/// The precisions a model's tensors are stored at, where they differ from the weights'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorPrecisions {
    /// Activation images; `None`: the weights' precision.
    pub activations: Option<vk_backend::Precision>,
    /// The key/value cache (state tensors); `None`: the activations'. fp16 under fp32
    /// activations halves the cache's bytes (the `_kv16` kernels read and write it).
    pub cache: Option<vk_backend::Precision>,
}

impl TensorPrecisions {
    /// (activations, cache) for a model with `weights`: unset activations are the weights'
    /// precision, an unset cache the activations'.
    pub fn resolved(self, weights: Precision) -> (vk_backend::Precision, vk_backend::Precision) {
        let activations = self.activations.unwrap_or(vk_precision(weights));
        (activations, self.cache.unwrap_or(activations))
    }
}

/// What a tensor-core MatMul keeps besides its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MatMulScratch {
    /// A's four-values-a-texel copy (`vk_backend::kernels::matmul_packed_a_shape`).
    PackedA,
    /// Key (`AttentionKey`) and value (`AttentionValue`) rows a projection writes packed for the
    /// tensor-core attention that alone reads them
    /// (`vk_backend::kernels::attention_packed_kv_shapes`).
    AttentionKey,
    AttentionValue,
    /// The fp32 partial results of a reduction split over spans
    /// (`vk_backend::kernels::matmul_split_k_shape`; a tensor-core convolution's too,
    /// `conv2d_split_shape`, of the same form).
    Partials,
}

/// A model ready to run on one device.
pub struct Executable {
    pub(crate) device: Device,
    pub(crate) header: PackedHeader,
    pub(crate) precision: Precision,
    /// Precision of activation images: the weights' unless built with
    /// [`Executable::with_activations`] (fp32 activations over fp16 weights).
    pub(crate) activations: vk_backend::Precision,
    /// Precision of the state tensors (a decoder's key/value cache).
    pub(crate) cache: vk_backend::Precision,
    pub(crate) weights: WeightResidency,
    /// Per IR tensor: its GPU tensor (activations, inputs, outputs, materialized constants).
    pub(crate) tensors: Vec<Option<Tensor>>,
    /// Per node: (input slot -> weight entry index).
    pub(crate) node_weights: Vec<HashMap<usize, usize>>,
    /// Per node: its step in the packed header.
    pub(crate) node_step: Vec<Option<usize>>,
    /// Scratch tensors nodes need only while they run (a 1-D op's [N, C, 1, W] copies, an
    /// attention's key-span partials), by (k-th of the node, shape, precision): shared by
    /// every node asking for the same.
    pub(crate) scratch: HashMap<(usize, Vec<usize>, vk_backend::Precision), Tensor>,
    /// The tensor-core MatMuls' tensors besides their operands, one per kind and shape, shared
    /// by every MatMul of that shape (see [`MatMulScratch`]).
    pub(crate) matmul_scratch: HashMap<(MatMulScratch, Vec<usize>), Tensor>,
    /// The last MatMul that copied its A into its packed copy: (node, A, copy's shape).
    pub(crate) packed_a_last: Option<(usize, Option<TensorId>, Vec<usize>)>,
    /// MatMul outputs written only as the next MatMul's packed A (never as themselves).
    pub(crate) packed_only: std::collections::HashSet<TensorId>,
    /// Packed copies placed in the arena memory of the output they stand in for, by that
    /// output (`Executable::packed_copy`): live exactly as long as it, so they take no memory
    /// of their own.
    pub(crate) packed_copies: HashMap<TensorId, Tensor>,
    /// Per attention node: the packed shapes its K and V projections write them in, or `None`
    /// where they write rows (decided once, at the first of the three nodes to record).
    pub(crate) attention_packed_kv: HashMap<usize, Option<[Vec<usize>; 2]>>,
    pub(crate) arena: ArenaPlan,
    /// Graph inputs the arena keeps alive for the whole run ([`Self::pin_inputs`]).
    pinned_inputs: Vec<TensorId>,
    /// Constants read as activations (`WeightKind::Activation`) that a streamed model copies
    /// out of the atlas before each node reading them ([`Executable::new_unplaced`]): arena
    /// tensors live only around those nodes, not images of their own for the whole session.
    per_run_constants: Vec<TensorId>,
    /// One tensor per arena slot (the image every tensor of the slot views).
    arena_tensors: Vec<Tensor>,
    /// The shared memory the arena is placed in and each slot's offset there (`None` for an
    /// arena of images of their own).
    pub(crate) arena_memory: Option<(SharedMemory, Vec<Option<u64>>)>,
    /// Views whose image would be folded differently from their root's (kernels need one fold
    /// per operand pair), run as copies instead.
    pub demoted_views: usize,
    pub last_timings: RunTimings,
    /// Lookups write only the rows on resident pages (set for streamed models, whose stream
    /// executor runs a lookup step once per page it loads).
    pub(crate) streamed_lookups: bool,
    /// Whether runs after the first replay recorded commands ([`BuildOptions::replay`]).
    pub(crate) replay_enabled: bool,
    /// The recorded run, built by the second run.
    pub(crate) replay: Option<super::replay::RunReplay>,
    /// Runs completed; the first records every dispatch and initializes every image.
    pub(crate) runs: u64,
    /// Two timestamps around a run (`None`: the compute queue has no timestamps).
    pub(crate) run_stamps: Option<vk_backend::TimestampQueries>,
}

impl Executable {
    /// Opens a packed model file's weights and builds the executable.
    pub fn from_packed_model(device: &Device, model: &PackedModel) -> Result<Executable> {
        Self::new(device, model.header(), model)
    }

    /// Builds the executable: loads every weight page into an atlas (page i -> slot i), uploads
    /// constant operands that kernels read as activations, and allocates the activation arena.
    pub fn new(
        device: &Device,
        header: &PackedHeader,
        pages: &dyn PageSource,
    ) -> Result<Executable> {
        Self::with_options(device, header, pages, &BuildOptions::default())
    }

    /// Like [`Executable::new`] with activations stored at `activations` instead of the weights'
    /// precision. fp32 activations over fp16 weights keeps the halved weight memory and streaming
    /// while every intermediate value keeps fp32 precision (the activation arena doubles).
    pub fn with_activations(
        device: &Device,
        header: &PackedHeader,
        pages: &dyn PageSource,
        activations: vk_backend::Precision,
    ) -> Result<Executable> {
        let opts = BuildOptions {
            precisions: TensorPrecisions {
                activations: Some(activations),
                cache: None,
            },
            ..BuildOptions::default()
        };
        Self::with_options(device, header, pages, &opts)
    }

    /// Builds the executable as [`Executable::new`] does, with `opts`.
    pub fn with_options(
        device: &Device,
        header: &PackedHeader,
        pages: &dyn PageSource,
        opts: &BuildOptions,
    ) -> Result<Executable> {
        let mut exe = Self::build(
            device,
            header,
            pages,
            Some(opts.pool_arena),
            opts.precisions,
        )?;
        exe.replay_enabled = opts.replay;
        Ok(exe)
    }

    /// `pooled_arena`: allocate the arena, pooled or not; `None`: plan it unpooled for shared
    /// memory and allocate nothing ([`Executable::new_unplaced`]).
    fn build(
        device: &Device,
        header: &PackedHeader,
        pages: &dyn PageSource,
        pooled_arena: Option<bool>,
        precisions: TensorPrecisions,
    ) -> Result<Executable> {
        let precision = header.precision;
        let (activations, cache) = precisions.resolved(precision);
        if activations == vk_backend::Precision::F16 && precision == Precision::F32 {
            return Err(RuntimeError::ActivationPrecision(
                "fp16 activations over fp32 weights are not supported (use fp16 weights, or fp32 \
                 activations)"
                    .into(),
            ));
        }
        if cache == vk_backend::Precision::F32 && activations == vk_backend::Precision::F16 {
            return Err(RuntimeError::ActivationPrecision(
                "an fp32 key/value cache under fp16 activations is not supported (the cache can \
                 be fp16 under fp32 activations, not the other way round)"
                    .into(),
            ));
        }
        let weights = WeightResidency::preload(device, pages, precision)?;
        let g = &header.graph;
        let mut node_weights = vec![HashMap::new(); g.nodes.len()];
        let mut node_step = vec![None; g.nodes.len()];
        for (si, s) in header.steps.iter().enumerate() {
            let StepInfo { node, .. } = *s;
            if node < g.nodes.len() {
                node_step[node] = Some(si);
                for &(slot, w) in &s.weights {
                    node_weights[node].insert(slot, w);
                }
            }
        }
        let mut exe = Executable {
            device: device.clone(),
            header: header.clone(),
            precision,
            activations,
            cache,
            weights,
            tensors: vec![None; g.tensors.len()],
            node_weights,
            node_step,
            scratch: HashMap::new(),
            matmul_scratch: HashMap::new(),
            packed_a_last: None,
            packed_only: Default::default(),
            packed_copies: HashMap::new(),
            attention_packed_kv: Default::default(),
            arena: ArenaPlan::default(),
            pinned_inputs: Vec::new(),
            per_run_constants: Vec::new(),
            arena_tensors: Vec::new(),
            arena_memory: None,
            demoted_views: 0,
            last_timings: RunTimings::default(),
            streamed_lookups: false,
            // Streamed models record step by step (`run_model.rs`); only `run` replays.
            replay_enabled: false,
            replay: None,
            runs: 0,
            run_stamps: None,
        };
        exe.demoted_views = exe.demote_refolded_views();
        // Unplaced is the streamed path: its steps copy these constants out of the atlas every
        // run (`StreamedModel`), so the arena holds them only around their readers.
        if pooled_arena.is_none() {
            exe.per_run_constants = exe.activation_kind_constants();
        }
        exe.materialize_constants()?;
        exe.allocate_state()?;
        match pooled_arena {
            Some(pooled) => exe.allocate_arena(pooled)?,
            None => exe.arena = exe.plan_arena(false),
        }
        Ok(exe)
    }

    pub fn graph(&self) -> &Graph {
        &self.header.graph
    }
    pub fn header(&self) -> &PackedHeader {
        &self.header
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Precision of the activation images.
    pub fn activation_precision(&self) -> vk_backend::Precision {
        self.activations
    }
    pub fn arena_stats(&self) -> arena::ArenaStats {
        self.arena.stats
    }
    /// Bytes of the resident weight atlas.
    pub fn weight_bytes(&self) -> u64 {
        self.weights.bytes
    }
    /// The weight pages node `node` reads (the packed step's page list), for a streaming driver.
    pub fn node_pages(&self, node: usize) -> &[u32] {
        match self.node_step.get(node).copied().flatten() {
            Some(s) => &self.header.steps[s].pages,
            None => &[],
        }
    }
    /// The GPU tensor bound to IR tensor `t`, if any.
    pub fn tensor(&self, t: TensorId) -> Option<&Tensor> {
        self.tensors.get(t).and_then(|x| x.as_ref())
    }

    pub(crate) fn weight_entry(&self, node: usize, slot: usize) -> Option<&WeightEntry> {
        let w = *self.node_weights.get(node)?.get(&slot)?;
        self.header.weights.get(w)
    }

    /// Precision of activation images (and of constants kernels read as activations).
    pub(crate) fn vkp(&self) -> vk_backend::Precision {
        self.activations
    }

    /// A device tensor for graph constant `info`, counted as weights.
    fn constant_tensor(&self, info: &crate::ir::TensorInfo) -> Result<Tensor> {
        Tensor::with_category(
            &self.device,
            &info.name,
            &info.shape,
            self.vkp(),
            MemoryCategory::Weights,
        )
        .map_err(vk(format!("constant `{}`", info.name)))
    }

    /// The graph tensors some node reads as a packed `Activation`-kind weight.
    fn activation_kind_constants(&self) -> Vec<TensorId> {
        let g = &self.header.graph;
        let mut out: Vec<TensorId> = g
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(ni, n)| {
                n.inputs.iter().enumerate().filter_map(move |(slot, t)| {
                    let w = self.weight_entry(ni, slot)?;
                    matches!(w.kind, WeightKind::Activation { .. })
                        .then_some(*t)
                        .flatten()
                })
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Constant operands that kernels read as activation images: packed `Activation`-kind
    /// weights are copied out of the atlas by the weight-copy kernel (so they come from the same
    /// pages), except those a streamed model copies every run into the arena; integer constants
    /// that stayed inline (e.g. Gather indices) are uploaded as floats.
    fn materialize_constants(&mut self) -> Result<()> {
        let g = self.header.graph.clone();
        let mut rec = Recorder::new(&self.device, QueueKind::Compute)
            .map_err(vk("recording constant uploads"))?;
        rec.use_weights(&self.weights.atlas);
        let mut uploads = 0;
        for (ni, n) in g.nodes.iter().enumerate() {
            for (slot, t) in n.inputs.iter().enumerate() {
                let Some(t) = *t else { continue };
                if self.tensors[t].is_some() {
                    continue;
                }
                let info = &g.tensors[t];
                if let Some(w) = self.weight_entry(ni, slot) {
                    let WeightKind::Activation { .. } = w.kind else {
                        continue;
                    };
                    if self.per_run_constants.contains(&t) {
                        continue;
                    }
                    let off = u32::try_from(w.texel_offset).map_err(|_| RuntimeError::BadNode {
                        node: n.name.clone(),
                        op: n.op.name().into(),
                        reason: "weight offset past 2^32 texels".into(),
                    })?;
                    let tensor = self.constant_tensor(info)?;
                    weight_copy_into(&mut rec, off, &tensor).map_err(|source| {
                        RuntimeError::Kernel {
                            node: n.name.clone(),
                            source,
                        }
                    })?;
                    uploads += 1;
                    self.tensors[t] = Some(tensor);
                } else if let Some(d) = g.constants.get(&t) {
                    let tensor = self.constant_tensor(info)?;
                    tensor
                        .upload(&d.as_f32())
                        .map_err(vk(format!("uploading constant `{}`", info.name)))?;
                    self.tensors[t] = Some(tensor);
                }
            }
        }
        // A folded graph output (e.g. Shape, or Range on constant inputs) is uploaded like any
        // other constant so that `run` returns it through the same download path.
        for p in &g.outputs {
            let Some(d) = g.constants.get(&p.tensor) else {
                continue;
            };
            if self.tensors[p.tensor].is_some() {
                continue;
            }
            let info = &g.tensors[p.tensor];
            let tensor = self.constant_tensor(info)?;
            tensor
                .upload(&d.as_f32())
                .map_err(vk(format!("uploading constant output `{}`", info.name)))?;
            self.tensors[p.tensor] = Some(tensor);
        }
        if uploads > 0 {
            rec.submit_and_wait()
                .map_err(vk("copying constant operands out of the atlas"))?;
        }
        Ok(())
    }

    /// The model's state tensors (its key/value caches): allocated once, outside the arena, so
    /// nothing another model runs can overwrite them, and zeroed, so that the rows a run's mask
    /// hides hold finite values (zero weight times NaN would still be NaN). At the cache's
    /// precision, except where the device would keep the tensor in a buffer (too large for an
    /// image): the fp16-cache kernels bind images only, so such a cache keeps the activations'.
    fn allocate_state(&mut self) -> Result<()> {
        for s in self.header.graph.state.clone() {
            let info = &self.header.graph.tensors[s.tensor];
            let precision = if self.cache != self.activations && self.extent(&info.shape).is_none()
            {
                log::warn!(
                    "state `{}` {:?} does not fit an image on this device: kept at {:?}, not {:?}",
                    s.name,
                    info.shape,
                    self.activations,
                    self.cache
                );
                self.activations
            } else {
                self.cache
            };
            let t = Tensor::with_category(
                &self.device,
                &info.name,
                &info.shape,
                precision,
                MemoryCategory::Activations,
            )
            .map_err(vk(format!("state `{}`", s.name)))?;
            self.tensors[s.tensor] = Some(t);
        }
        self.reset_state()
    }

    /// Zeroes the state tensors (a new conversation: nothing of the last one is visible).
    pub fn reset_state(&self) -> Result<()> {
        let g = &self.header.graph;
        for s in &g.state {
            if let Some(t) = &self.tensors[s.tensor] {
                t.upload(&vec![0.0; g.tensors[s.tensor].shape.iter().product()])
                    .map_err(vk(format!("clearing state `{}`", s.name)))?;
            }
        }
        Ok(())
    }

    /// The physical image extent a tensor of `shape` gets on this device (None: buffer fallback).
    fn extent(&self, shape: &[usize]) -> Option<(u32, u32, u32)> {
        self.device
            .fold_layout(crate::ir::nchw(shape))
            .ok()
            .flatten()
            .map(|l| (l.pw, l.ph, l.pl))
    }

    /// A view shares its root's image, so it keeps the root's width/height/layers. Kernels read
    /// an input and write an output through one shared fold in places (e.g. unary), so a view
    /// whose own image extent would differ from its root's runs as a copy into its own image.
    fn demote_refolded_views(&mut self) -> usize {
        let mut count = 0;
        for t in 0..self.header.graph.tensors.len() {
            let crate::ir::TensorLayout::ViewOf(_) = self.header.graph.tensors[t].layout else {
                continue;
            };
            let r = arena::root_of(&self.header.graph, t);
            let g = &self.header.graph;
            if self.extent(&g.tensors[t].shape) != self.extent(&g.tensors[r].shape) {
                self.header.graph.tensors[t].layout = crate::ir::TensorLayout::C4;
                count += 1;
            }
        }
        count
    }

    /// Plans which tensors share which arena image: with `pooled`, a dead tensor's image is
    /// taken over by a later tensor of the same image extent; without, every tensor has its own
    /// image (for shared memory, where offsets do the reuse instead).
    fn plan_arena(&self, pooled: bool) -> ArenaPlan {
        let g = &self.header.graph;
        let bpt = self.activations.bytes_per_texel() as u64;
        let key_bytes = |t: TensorId| -> (PoolKey, u64) {
            let [n, c, h, w] = crate::ir::nchw(&g.tensors[t].shape);
            let planned = self.device.fold_layout([n, c, h, w]).ok().flatten();
            match planned {
                Some(l) => (Some((l.pw, l.ph, l.pl)), l.physical_texels() * bpt),
                None => (None, (n * c.div_ceil(4) * h * w) as u64 * bpt),
            }
        };
        arena::plan(
            g,
            |t| {
                let (k, b) = key_bytes(t);
                (k.filter(|_| pooled), b)
            },
            &self.pinned_inputs,
            &self.per_run_constants,
        )
    }

    /// Re-plans the (not yet placed) shared-memory arena with the graph inputs named in `names`
    /// alive for the whole run, so that no other tensor takes their storage and an unchanged
    /// input can stay on the device for the next run ([`Self::inputs_kept_between_runs`]).
    pub fn pin_inputs(&mut self, names: &[&str]) -> Result<()> {
        if !self.arena_tensors.is_empty() {
            return Err(RuntimeError::BadNode {
                node: "(arena)".into(),
                op: "pin inputs".into(),
                reason: "the activation arena is already placed".into(),
            });
        }
        let g = &self.header.graph;
        self.pinned_inputs = g
            .inputs
            .iter()
            .filter(|p| names.contains(&p.name.as_str()))
            .map(|p| p.tensor)
            .collect();
        self.arena = self.plan_arena(false);
        Ok(())
    }

    /// Plans the arena and gives every image its own allocation.
    fn allocate_arena(&mut self, pooled: bool) -> Result<()> {
        self.arena = self.plan_arena(pooled);
        self.place_arena(None)
    }

    /// Where this model's arena images go in shared memory: per slot its offset (`None`: a
    /// buffer fallback, allocated on its own), packed by liveness so that images alive at the same
    /// time never overlap ([`arena::pack_offsets`]); and the memory that needs.
    pub fn arena_layout(&self) -> Result<(Vec<Option<u64>>, SharedMemoryLayout)> {
        let g = &self.header.graph;
        let mut layout = SharedMemoryLayout::default();
        let mut images = Vec::new();
        let mut which = Vec::with_capacity(self.arena.slots.len());
        for s in &self.arena.slots {
            let info = &g.tensors[s.first];
            let needs = Tensor::image_requirements(&self.device, &info.shape, self.vkp())
                .map_err(vk(format!("activation `{}`", info.name)))?;
            which.push(needs.map(|(l, n)| {
                let logical = l.physical_texels() * self.vkp().bytes_per_texel() as u64;
                if n.size > logical + (logical / 8).max(1 << 16) {
                    // Driver tiling pads some extents (NVIDIA: rows to its block height).
                    log::debug!(
                        "activation `{}` {:?}: image {}x{}x{} needs {} B for {logical} B of texels",
                        info.name,
                        info.shape,
                        l.pw,
                        l.ph,
                        l.pl,
                        n.size
                    );
                }
                layout.alignment = layout.alignment.max(n.alignment);
                layout.type_bits &= n.type_bits;
                images.push((s.live, n.size, n.alignment));
                images.len() - 1
            }));
        }
        let (offsets, size) = arena::pack_offsets(&images);
        layout.size = size;
        Ok((
            which.into_iter().map(|w| w.map(|i| offsets[i])).collect(),
            layout,
        ))
    }

    /// Per graph input: whether its values are still in its arena image after a run, so that a
    /// next run of this model alone (no other model writing the shared memory in between) can
    /// skip uploading the same values again. True where the input's image holds no other tensor,
    /// overlaps no other image of the arena's layout, and no node writes into it.
    pub fn inputs_kept_between_runs(&self) -> Result<Vec<bool>> {
        let g = &self.header.graph;
        let plan = &self.arena;
        let (offsets, _) = self.arena_layout()?;
        let mut sizes = Vec::with_capacity(plan.slots.len());
        for s in &plan.slots {
            let info = &g.tensors[s.first];
            let needs = Tensor::image_requirements(&self.device, &info.shape, self.vkp())
                .map_err(vk(format!("activation `{}`", info.name)))?;
            sizes.push(needs.map_or(0, |(_, n)| n.size));
        }
        let written: std::collections::HashSet<TensorId> = g
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(|&t| plan.root[t]))
            .collect();
        Ok(g.inputs
            .iter()
            .map(|p| {
                let r = plan.root[p.tensor];
                let Some(s) = plan.slot.get(r).copied().flatten() else {
                    return false;
                };
                let Some(at) = offsets.get(s).copied().flatten() else {
                    return false;
                };
                let end = at + sizes[s];
                let alone = plan.slot.iter().filter(|x| **x == Some(s)).count() == 1;
                let overlapped = offsets
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != s && o.is_some_and(|o| o < end && at < o + sizes[j]));
                alone && !overlapped && !written.contains(&r)
            })
            .collect())
    }

    /// Creates the arena's images: each in its own allocation (`shared` None) or at its offset
    /// from [`Executable::arena_layout`] in `shared`; then every tensor's view of its slot.
    fn place_arena(&mut self, shared: Option<(&SharedMemory, &[Option<u64>])>) -> Result<()> {
        let g = &self.header.graph;
        let plan = &self.arena;
        let mut slot_tensors = Vec::with_capacity(plan.slots.len());
        for (i, s) in plan.slots.iter().enumerate() {
            let info = &g.tensors[s.first];
            let name = format!("arena{i}:{}", info.name);
            let what = || format!("allocating activation `{}`", info.name);
            let t =
                match shared.and_then(|(m, offs)| offs.get(i).copied().flatten().map(|o| (m, o))) {
                    Some((m, offset)) => {
                        Tensor::new_in(&self.device, &name, &info.shape, self.vkp(), m, offset)
                            .map_err(vk(what()))?
                    }
                    None => Tensor::new(&self.device, &name, &info.shape, self.vkp())
                        .map_err(vk(what()))?,
                };
            slot_tensors.push(t);
        }
        for t in 0..g.tensors.len() {
            if self.tensors[t].is_some() {
                continue;
            }
            let r = plan.root[t];
            let base = match plan.slot[r] {
                Some(s) => Some(&slot_tensors[s]),
                None => self.tensors[r].as_ref(),
            };
            if let Some(base) = base {
                let info = &g.tensors[t];
                let v = base
                    .reinterpret(&info.name, &info.shape)
                    .map_err(vk(format!("placing tensor `{}`", info.name)))?;
                self.tensors[t] = Some(v);
            }
        }
        self.arena_tensors = slot_tensors;
        self.packed_copies.clear();
        self.arena_memory = shared.map(|(m, offsets)| (m.clone(), offsets.to_vec()));
        Ok(())
    }

    /// Builds the executable like [`Executable::new`] but leaves the activation arena for
    /// [`Executable::bind_arena`], so that several models can place theirs in one memory.
    pub fn new_unplaced(
        device: &Device,
        header: &PackedHeader,
        pages: &dyn PageSource,
        precisions: TensorPrecisions,
    ) -> Result<Executable> {
        Self::build(device, header, pages, None, precisions)
    }

    /// Places the arena planned by [`Executable::new_unplaced`] at `offsets` (from
    /// [`Executable::arena_layout`]) in `memory`.
    pub fn bind_arena(&mut self, memory: &SharedMemory, offsets: &[Option<u64>]) -> Result<()> {
        self.replay = None;
        if !self.arena_tensors.is_empty() {
            return Err(RuntimeError::BadNode {
                node: "(arena)".into(),
                op: "bind".into(),
                reason: "the activation arena is already placed".into(),
            });
        }
        self.place_arena(Some((memory, offsets)))
    }

    /// Declares every arena image's contents undefined: another model sharing the memory may
    /// have written it since this model last ran. Call before uploading a run's inputs.
    pub fn discard_arena(&self) {
        for t in self.arena_tensors.iter().chain(self.packed_copies.values()) {
            t.discard();
        }
    }

    /// Runs the graph on `inputs` (by graph input name, NCHW f32 values) and returns every graph
    /// output by name. Records all dispatches into one command buffer and submits once.
    pub fn run(&mut self, inputs: &[(String, HostTensor)]) -> Result<Vec<(String, HostTensor)>> {
        self.run_with(inputs, None)
    }

    /// [`Executable::run`] with a GPU timestamp after every node: returns the outputs and, per
    /// node, the GPU nanoseconds from the previous node's end to its own (nodes that record
    /// nothing read ~0). For finding which kernels take the time (`texstream infer --profile`);
    /// the timestamps themselves add a little to each node.
    pub fn run_profiled(
        &mut self,
        inputs: &[(String, HostTensor)],
    ) -> Result<(NamedOutputs, Vec<f64>)> {
        let nodes = self.header.graph.nodes.len();
        let count = u32::try_from(nodes + 1).map_err(|_| RuntimeError::Input {
            name: "profile".into(),
            reason: format!("{nodes} nodes are more than one query pool holds"),
        })?;
        let queries = vk_backend::TimestampQueries::new(&self.device, QueueKind::Compute, count)
            .map_err(vk("timestamp queries for the profile"))?;
        let out = self.run_with(inputs, Some(&queries))?;
        let ns = queries.read_ns().map_err(vk("reading the profile"))?;
        let mut per_node = Vec::with_capacity(nodes);
        for i in 0..nodes {
            per_node.push(match (ns[i], ns[i + 1]) {
                (Some(a), Some(b)) => (b - a).max(0.0),
                _ => 0.0,
            });
        }
        Ok((out, per_node))
    }

    fn run_with(
        &mut self,
        inputs: &[(String, HostTensor)],
        profile: Option<&vk_backend::TimestampQueries>,
    ) -> Result<Vec<(String, HostTensor)>> {
        let feeds = self.check_inputs(inputs)?;
        let out = if profile.is_none() && self.replay_enabled && self.runs > 0 {
            self.run_replayed(&feeds)?
        } else {
            self.run_recorded(&feeds, profile)?
        };
        self.runs += 1;
        Ok(out)
    }

    /// The host values for each graph input, in the graph's input order: every input given,
    /// with the compiled shape, and nothing else.
    fn check_inputs<'a>(&self, inputs: &'a [(String, HostTensor)]) -> Result<Vec<&'a HostTensor>> {
        let g = &self.header.graph;
        let mut feeds = Vec::with_capacity(g.inputs.len());
        for p in &g.inputs {
            let info = &g.tensors[p.tensor];
            let Some((_, host)) = inputs.iter().find(|(n, _)| *n == p.name) else {
                return Err(RuntimeError::Input {
                    name: p.name.clone(),
                    reason: format!("missing (model inputs: {:?})", input_names(g)),
                });
            };
            if host.shape != info.shape {
                return Err(RuntimeError::Input {
                    name: p.name.clone(),
                    reason: format!(
                        "shape {:?}, the model was compiled for {:?}",
                        host.shape, info.shape
                    ),
                });
            }
            feeds.push(host);
        }
        for (name, _) in inputs {
            if !g.inputs.iter().any(|p| &p.name == name) {
                return Err(RuntimeError::Input {
                    name: name.clone(),
                    reason: format!("not a model input (model inputs: {:?})", input_names(g)),
                });
            }
        }
        Ok(feeds)
    }

    /// The GPU tensor of graph input or output `p`.
    pub(crate) fn port_tensor(&self, p: &crate::ir::Port) -> Result<Tensor> {
        self.tensors[p.tensor]
            .clone()
            .ok_or_else(|| RuntimeError::Input {
                name: p.name.clone(),
                reason: "has no GPU tensor".into(),
            })
    }

    /// The two run timestamps, made on first use (`None` where the queue has no timestamps).
    pub(crate) fn run_stamps(&mut self) -> Result<Option<vk_backend::TimestampQueries>> {
        if self.run_stamps.is_none()
            && vk_backend::timestamps::timestamp_valid_bits(&self.device, QueueKind::Compute) > 0
        {
            self.run_stamps = Some(
                vk_backend::TimestampQueries::new(&self.device, QueueKind::Compute, 2)
                    .map_err(vk("run timestamps"))?,
            );
        }
        Ok(self.run_stamps.clone())
    }

    /// One run recorded from scratch: uploads, every node, downloads, one submission.
    fn run_recorded(
        &mut self,
        feeds: &[&HostTensor],
        profile: Option<&vk_backend::TimestampQueries>,
    ) -> Result<Vec<(String, HostTensor)>> {
        let t0 = Instant::now();
        let g = self.header.graph.clone();
        let stamps = match profile {
            Some(_) => None,
            None => self.run_stamps()?,
        };
        let mut rec =
            Recorder::new(&self.device, QueueKind::Compute).map_err(vk("starting a run"))?;
        if let Some(q) = &stamps {
            rec.write_timestamp(q, 0).map_err(vk("run timestamp"))?;
        }
        for (p, host) in g.inputs.iter().zip(feeds) {
            let t = self.port_tensor(p)?;
            let bytes = t
                .pack_bytes(&host.data)
                .map_err(vk(format!("input `{}`", p.name)))?;
            let staging = Buffer::staging_upload(&self.device, "input staging", bytes.len() as u64)
                .map_err(vk("input staging"))?;
            staging.write(0, &bytes).map_err(vk("input staging"))?;
            rec.copy_buffer_to_tensor(&staging, 0, &t)
                .map_err(vk(format!("uploading input `{}`", p.name)))?;
        }
        rec.use_weights(&self.weights.atlas);
        let stamp = |rec: &mut Recorder, i: usize| -> Result<()> {
            match profile {
                // Node count + 1 fits u32 (checked by run_profiled).
                Some(q) => rec
                    .write_timestamp(q, i as u32)
                    .map_err(vk("profile timestamp")),
                None => Ok(()),
            }
        };
        if profile.is_some() {
            // The input uploads finish before the first stamp.
            rec.barrier();
        }
        stamp(&mut rec, 0)?;
        for ni in 0..g.nodes.len() {
            self.record_node(&mut rec, ni)?;
            stamp(&mut rec, ni + 1)?;
        }
        let mut downloads = Vec::new();
        for p in &g.outputs {
            let t = self.port_tensor(p)?;
            let size = vk_backend::kernels::readback_bytes(&t);
            let buf = Buffer::staging_download(&self.device, "output staging", size)
                .map_err(vk("output staging"))?;
            vk_backend::kernels::readback_into(&mut rec, &t, &buf, 0)
                .map_err(vk(format!("downloading output `{}`", p.name)))?;
            downloads.push(Download {
                name: p.name.clone(),
                shape: g.port_shape(p).to_vec(),
                tensor: t,
                staging: buf,
            });
        }
        if let Some(q) = &stamps {
            rec.write_timestamp(q, 1).map_err(vk("run timestamp"))?;
        }
        let t1 = Instant::now();
        rec.submit_and_wait().map_err(vk("running the model"))?;
        self.device
            .check_validation()
            .map_err(vk("Vulkan validation"))?;
        let t2 = Instant::now();
        let out = read_downloads(&downloads)?;
        self.last_timings = RunTimings {
            record: t1 - t0,
            gpu: t2 - t1,
            readback: t2.elapsed(),
            gpu_ns: stamps.and_then(|q| q.elapsed_ns(0, 1).ok()),
            replayed: false,
        };
        Ok(out)
    }

    /// IR dtype of graph output `name` (to write integer outputs as integers).
    pub fn output_dtype(&self, name: &str) -> Option<DType> {
        let g = &self.header.graph;
        g.outputs
            .iter()
            .find(|p| p.name == name)
            .map(|p| g.tensors[p.tensor].dtype)
    }
}

/// An output's host-visible copy, read after its run.
pub(crate) struct Download {
    pub name: String,
    pub shape: Vec<usize>,
    pub tensor: Tensor,
    pub staging: Buffer,
}

/// The outputs of a finished run, unpacked from their staging copies.
pub(crate) fn read_downloads(downloads: &[Download]) -> Result<NamedOutputs> {
    let mut out = Vec::with_capacity(downloads.len());
    for d in downloads {
        // Converted straight from the (host-cached) staging, without a copy.
        let size = vk_backend::kernels::readback_bytes(&d.tensor) as usize;
        let values = d
            .staging
            .read_with(0, size, |bytes| {
                vk_backend::kernels::read_back(&d.tensor, bytes)
            })
            .map_err(vk(format!("reading output `{}`", d.name)))?;
        out.push((d.name.clone(), HostTensor::new(d.shape.clone(), values)));
    }
    Ok(out)
}

fn input_names(g: &Graph) -> Vec<String> {
    g.inputs.iter().map(|p| p.name.clone()).collect()
}
