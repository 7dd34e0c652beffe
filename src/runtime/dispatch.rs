//! Per-node dispatch: maps one IR node to its kernel call(s) on the executor's tensors.
use vk_backend::kernels::{self as k, ConvWeights, MatBias, MatMulOpts, MatRhs};
use vk_backend::{Recorder, Tensor};

use super::error::{Result, RuntimeError};
use super::executor::{Executable, MatMulScratch};
use crate::ir::{
    Activation, BinaryOp, CoordMode, DType, NearestMode, Node, Op, PadMode, ReduceOp, ResizeMode,
    ScatterReduction, TensorId, TensorLayout, UnaryOp, Window,
};
use crate::packed::WeightKind;

fn act(a: Activation) -> Option<k::UnaryOp> {
    Some(match a {
        Activation::None => return None,
        Activation::Relu => k::UnaryOp::Relu,
        Activation::Clip { min, max } => k::UnaryOp::Clip { min, max },
        Activation::Sigmoid => k::UnaryOp::Sigmoid,
        Activation::HardSwish => k::UnaryOp::HardSwish,
        Activation::HardSigmoid { alpha, beta } => k::UnaryOp::HardSigmoid { alpha, beta },
        Activation::LeakyRelu { alpha } => k::UnaryOp::LeakyRelu { alpha },
        Activation::Tanh => k::UnaryOp::Tanh,
        Activation::Gelu => k::UnaryOp::Gelu,
        Activation::GeluTanh => k::UnaryOp::GeluTanh,
        Activation::Silu => k::UnaryOp::Silu,
    })
}

fn unary(u: UnaryOp) -> Option<k::UnaryOp> {
    Some(match u {
        UnaryOp::Relu => k::UnaryOp::Relu,
        UnaryOp::LeakyRelu { alpha } => k::UnaryOp::LeakyRelu { alpha },
        UnaryOp::Sigmoid => k::UnaryOp::Sigmoid,
        UnaryOp::HardSigmoid { alpha, beta } => k::UnaryOp::HardSigmoid { alpha, beta },
        UnaryOp::HardSwish => k::UnaryOp::HardSwish,
        UnaryOp::Tanh => k::UnaryOp::Tanh,
        UnaryOp::Erf => k::UnaryOp::Erf,
        UnaryOp::Gelu => k::UnaryOp::Gelu,
        UnaryOp::GeluTanh => k::UnaryOp::GeluTanh,
        UnaryOp::Silu => k::UnaryOp::Silu,
        UnaryOp::Exp => k::UnaryOp::Exp,
        UnaryOp::Sqrt => k::UnaryOp::Sqrt,
        UnaryOp::Reciprocal => k::UnaryOp::Reciprocal,
        UnaryOp::Clip { min, max } => k::UnaryOp::Clip { min, max },
        UnaryOp::Neg => k::UnaryOp::Neg,
        UnaryOp::Abs => k::UnaryOp::Abs,
        UnaryOp::Log => k::UnaryOp::Log,
        UnaryOp::Sin => k::UnaryOp::Sin,
        UnaryOp::Cos => k::UnaryOp::Cos,
        UnaryOp::IsNaN => k::UnaryOp::IsNaN,
        UnaryOp::Not => return None,
    })
}

fn window2d(w: &Window) -> k::Window2d {
    k::Window2d {
        kernel: w.kernel,
        strides: w.strides,
        dilations: w.dilations,
        pads: w.pads,
    }
}

impl Executable {
    fn bad(&self, n: &Node, reason: impl Into<String>) -> RuntimeError {
        RuntimeError::BadNode {
            node: n.name.clone(),
            op: n.op.name().into(),
            reason: reason.into(),
        }
    }

    fn t(&self, n: &Node, t: usize) -> Result<Tensor> {
        self.tensors.get(t).and_then(|x| x.clone()).ok_or_else(|| {
            self.bad(
                n,
                format!(
                    "tensor `{}` has no GPU tensor",
                    self.header.graph.tensors[t].name
                ),
            )
        })
    }

    fn input(&self, n: &Node, i: usize) -> Result<Tensor> {
        let t = n
            .input(i)
            .ok_or_else(|| self.bad(n, format!("input {i} is missing")))?;
        self.t(n, t)
    }

    fn output(&self, n: &Node, i: usize) -> Result<Tensor> {
        let t = *n
            .outputs
            .get(i)
            .ok_or_else(|| self.bad(n, format!("output {i} is missing")))?;
        self.t(n, t)
    }

    /// Texel offset of the packed weight at input `slot` of node `ni`, if packed with `want`.
    fn woff(&self, ni: usize, slot: usize, want: fn(&WeightKind) -> bool) -> Result<Option<u32>> {
        let n = &self.header.graph.nodes[ni];
        match self.weight_entry(ni, slot) {
            Some(w) if want(&w.kind) => u32::try_from(w.texel_offset)
                .map(Some)
                .map_err(|_| self.bad(n, "weight offset past 2^32 texels")),
            Some(w) => Err(self.bad(
                n,
                format!("input {slot} packed as {:?}, not usable here", w.kind),
            )),
            None => Ok(None),
        }
    }

    /// A node's `kidx`-th scratch tensor of `shape`, created on first use and shared by every
    /// node that asks for the same (`kidx`, shape, precision): a node writes its scratch before
    /// reading it and is done with it when it ends, so one tensor serves them all (the Whisper
    /// encoder's four attention layers' 6.3 MB of key-span partials each on a card took four).
    fn scratch(&mut self, kidx: usize, shape: &[usize]) -> Result<Tensor> {
        self.scratch_as(kidx, shape, self.vkp())
    }

    /// [`Self::scratch`] in `precision` rather than the activations'.
    fn scratch_as(
        &mut self,
        kidx: usize,
        shape: &[usize],
        precision: vk_backend::Precision,
    ) -> Result<Tensor> {
        let key = (kidx, shape.to_vec(), precision);
        if let Some(t) = self.scratch.get(&key) {
            return Ok(t.clone());
        }
        let name = format!("scratch{kidx} {shape:?}");
        let t =
            Tensor::new(&self.device, &name, shape, precision).map_err(super::error::vk(name))?;
        self.scratch.insert(key, t.clone());
        Ok(t)
    }

    /// Runs the 2-D spatial kernel `f(rec, x, y)` of node `ni`; a 1-D op (`one_d`: [N, C, L]
    /// tensors) runs it on [N, C, 1, L] copies in the node's scratch tensors.
    fn spatial_2d(
        &mut self,
        rec: &mut Recorder,
        ni: usize,
        one_d: bool,
        (x, y): (&Tensor, &Tensor),
        f: impl FnOnce(&mut Recorder, &Tensor, &Tensor) -> vk_backend::Result<()>,
    ) -> Result<()> {
        let node = self.header.graph.nodes[ni].name.clone();
        let kerr = |source| RuntimeError::Kernel { node, source };
        if !one_d {
            return f(rec, x, y).map_err(kerr);
        }
        let (xs, ys) = (x.shape().to_vec(), y.shape().to_vec());
        let x4 = self.scratch(0, &[xs[0], xs[1], 1, xs[2]])?;
        let y4 = self.scratch(1, &[ys[0], ys[1], 1, ys[2]])?;
        k::reshape_into(rec, x, &x4)
            .and_then(|()| f(rec, &x4, &y4))
            .and_then(|()| k::reshape_into(rec, &y4, y))
            .map_err(kerr)
    }

    /// Records node `ni`'s dispatches. The caller binds the weight atlas (`rec.use_weights`).
    pub fn record_node(&mut self, rec: &mut Recorder, ni: usize) -> Result<()> {
        let n = self.header.graph.nodes[ni].clone();
        if self.is_view(&n) {
            return Ok(());
        }
        match &n.op {
            Op::Conv { .. } => self.record_conv(rec, ni, &n),
            Op::ConvTranspose { .. } => self.record_conv_transpose(rec, ni, &n),
            Op::MatMul { .. } => self.record_matmul(rec, ni, &n),
            Op::Gemm { .. } => self.record_gemm(rec, ni, &n),
            Op::Binary(b) => self.record_binary(rec, &n, *b),
            Op::Unary(u) => self.record_unary(rec, &n, *u),
            Op::Where => self.record_where(rec, &n),
            Op::ScatterNd { reduction } => {
                let (x, y) = (self.input(&n, 0)?, self.output(&n, 0)?);
                let (i, u) = (self.input(&n, 1)?, self.input(&n, 2)?);
                let r = match reduction {
                    ScatterReduction::None => k::ScatterReduction::None,
                    ScatterReduction::Add => k::ScatterReduction::Add,
                    ScatterReduction::Mul => k::ScatterReduction::Mul,
                };
                k::scatter_nd_into(rec, &x, &i, &u, r, &y).map_err(kernel_error(&n))
            }
            Op::KvWrite { axis, split_heads } => {
                // The output is a view of the cache: the write lands in the state itself.
                let (cache, new, pos) =
                    (self.input(&n, 0)?, self.input(&n, 1)?, self.input(&n, 2)?);
                k::kv_write_into(rec, &cache, &new, &pos, *axis, *split_heads)
                    .map_err(kernel_error(&n))
            }
            Op::Trilu { upper, k } => {
                let (x, y) = (self.input(&n, 0)?, self.output(&n, 0)?);
                k::trilu_into(rec, &x, *k, *upper, &y).map_err(kernel_error(&n))
            }
            Op::Softmax { .. } | Op::LayerNorm { .. } => self.record_row_norm(rec, ni, &n),
            Op::Rope { split_heads } => {
                let (x, c, s) = (self.input(&n, 0)?, self.input(&n, 1)?, self.input(&n, 2)?);
                let y = self.output(&n, 0)?;
                k::rope_into(rec, &x, &c, &s, &y, *split_heads).map_err(kernel_error(&n))
            }
            Op::Attention { .. } => self.record_attention(rec, ni, &n),
            Op::Reduce { .. } | Op::ArgMax { .. } => self.record_reduce(rec, &n),
            Op::CumSum {
                axis,
                exclusive,
                reverse,
            } => {
                let (x, y) = (self.input(&n, 0)?, self.output(&n, 0)?);
                let p = k::CumSumParams {
                    exclusive: *exclusive,
                    reverse: *reverse,
                };
                k::cumsum_into(rec, &x, *axis as i64, p, &y).map_err(kernel_error(&n))
            }
            Op::MaxPool { .. } | Op::AveragePool { .. } | Op::GlobalAveragePool => {
                self.record_pool(rec, ni, &n)
            }
            Op::Concat { .. } | Op::Split { .. } | Op::Slice { .. } => {
                self.record_concat_split_slice(rec, &n)
            }
            Op::Gather { .. }
                if matches!(
                    self.weight_entry(ni, 0).map(|w| &w.kind),
                    Some(WeightKind::Rows { .. })
                ) =>
            {
                self.record_lookup(rec, ni, &n)
            }
            Op::Transpose { .. }
            | Op::Reshape { .. }
            | Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::Cast { .. }
            | Op::Expand { .. }
            | Op::Tile { .. } => self.record_copy_op(rec, &n),
            Op::Resize { .. } => self.record_resize(rec, &n),
            Op::Pad { .. } => self.record_pad(rec, &n),
            Op::Lstm { hidden_size } => self.record_lstm(rec, ni, &n, *hidden_size),
            Op::BatchNorm { .. } => Err(unsupported(&n)),
        }
    }

    /// Whether node `n` is a view: it runs nothing, its outputs alias their root's image.
    fn is_view(&self, n: &Node) -> bool {
        let g = &self.header.graph;
        n.op.is_layout_op()
            && n.outputs
                .iter()
                .all(|&t| matches!(g.tensors[t].layout, TensorLayout::ViewOf(_)))
    }

    /// Conv: packed filter (and bias), an optional addend (input 3, see `passes::concat_conv`)
    /// and input scale (input 4, `passes::channel_scale`); a 1-D conv runs on [N, C, 1, L]
    /// copies.
    fn record_conv(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let Op::Conv {
            window,
            group,
            activation,
        } = &n.op
        else {
            return Err(unsupported(n));
        };
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let filter = self
            .woff(ni, 1, |k| {
                matches!(
                    k,
                    WeightKind::ConvFilter { .. } | WeightKind::Depthwise { .. }
                )
            })?
            .ok_or_else(|| self.bad(n, "filter is not a packed constant"))?;
        let bias = self.woff(ni, 2, |k| matches!(k, WeightKind::Vector { .. }))?;
        let wshape = &self.header.graph.tensors[n.input(1).unwrap_or(0)].shape;
        let p = k::Conv2dParams {
            window: window2d(window),
            groups: *group,
            out_channels: wshape[0],
            activation: act(*activation).unwrap_or(k::UnaryOp::Identity),
        };
        let weights = ConvWeights { filter, bias };
        let one_d = window.spatial_rank == 1;
        let addend = match n.input(3) {
            Some(_) if one_d => return Err(self.bad(n, "a 1-D convolution cannot take an addend")),
            Some(_) => Some(self.input(n, 3)?),
            None => None,
        };
        let input_scale = match n.input(4) {
            Some(_) if one_d => {
                return Err(self.bad(n, "a 1-D convolution cannot take an input scale"))
            }
            Some(_) => Some(self.input(n, 4)?),
            None => None,
        };
        let operands = k::ConvOperands {
            addend: addend.as_ref(),
            input_scale: input_scale.as_ref(),
        };
        // A 2-D convolution whose tensor-core tiles leave the device idle splits its reduction
        // over workgroups, its spans' sums in the shared fp32 partials of their shape.
        let split = match one_d {
            true => None,
            false => k::conv2d_split_shape(rec, &x, &p, &y).map_err(kernel_error(n))?,
        };
        let partials = match split {
            Some(shape) => Some(self.matmul_scratch(MatMulScratch::Partials, &shape)?),
            None => None,
        };
        self.spatial_2d(rec, ni, one_d, (&x, &y), |r, x, y| match &partials {
            Some(t) => k::conv2d_split_add_into(r, x, weights, &p, operands, y, t),
            None => k::conv2d_add_into(r, x, weights, &p, operands, y),
        })
    }

    /// ConvTranspose: packed filter (and bias); a 1-D one runs on [N, C, 1, L] copies.
    fn record_conv_transpose(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let Op::ConvTranspose {
            window,
            group,
            output_padding,
            activation,
        } = &n.op
        else {
            return Err(unsupported(n));
        };
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let filter = self
            .woff(ni, 1, |k| matches!(k, WeightKind::ConvFilter { .. }))?
            .ok_or_else(|| self.bad(n, "filter is not a packed constant"))?;
        let bias = self.woff(ni, 2, |k| matches!(k, WeightKind::Vector { .. }))?;
        let p = k::ConvTranspose2dParams {
            window: window2d(window),
            groups: *group,
            out_channels: y.shape()[1],
            output_padding: *output_padding,
            activation: act(*activation).unwrap_or(k::UnaryOp::Identity),
        };
        let weights = ConvWeights { filter, bias };
        self.spatial_2d(rec, ni, window.spatial_rank == 1, (&x, &y), |r, x, y| {
            k::conv_transpose2d_into(r, x, weights, &p, y)
        })
    }

    /// MatMul's or Gemm's B: a packed `[K, N]` constant, a row table read as B^T (a tied
    /// head), else the input tensor.
    fn matmul_rhs(&self, ni: usize, n: &Node) -> Result<Rhs> {
        let packed =
            |k: &WeightKind| matches!(k, WeightKind::MatrixKN { .. } | WeightKind::Rows { .. });
        match self.weight_entry(ni, 1).map(|w| w.kind.clone()) {
            Some(WeightKind::MatrixKN { k: kk, n: nn }) => Ok(Rhs::Weights {
                texel_offset: self.woff(ni, 1, packed)?.unwrap_or(0),
                k: kk,
                n: nn,
                rows: false,
            }),
            Some(WeightKind::Rows { rows, width }) => Ok(Rhs::Weights {
                texel_offset: self.woff(ni, 1, packed)?.unwrap_or(0),
                k: width,
                n: rows,
                rows: true,
            }),
            _ => Ok(Rhs::Tensor(self.input(n, 1)?)),
        }
    }

    /// MatMul with an optional packed bias vector over N.
    fn record_matmul(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let (a, y, rhs, opts) = self.matmul_call(ni, n)?;
        self.record_const_matmul(rec, ni, n, (&a, &y), rhs, &opts)
    }

    /// A MatMul node's A, output, B and options.
    fn matmul_call(&self, ni: usize, n: &Node) -> Result<(Tensor, Tensor, Rhs, MatMulOpts)> {
        let Op::MatMul {
            transpose_a,
            transpose_b,
            activation,
        } = n.op
        else {
            return Err(unsupported(n));
        };
        let a = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let rhs = self.matmul_rhs(ni, n)?;
        let bias = self
            .woff(ni, 2, |k| matches!(k, WeightKind::Vector { .. }))?
            .map(|texel_offset| MatBias {
                texel_offset,
                per_row: false,
                per_col: true,
            });
        if n.input(2).is_some() && bias.is_none() {
            return Err(self.bad(n, "bias input is not a packed vector"));
        }
        let opts = MatMulOpts {
            trans_a: transpose_a,
            // A packed B is stored as [K, N] whatever its source layout.
            trans_b: transpose_b && !rhs.is_weights(),
            alpha: 1.0,
            beta: 1.0,
            bias,
            activation: act(activation),
        };
        Ok((a, y, rhs, opts))
    }

    /// The packed A shape of the MatMul that directly follows node `ni` and is the only reader
    /// of its output `y`, where that MatMul reads `y` as its A through a packed copy: node `ni`
    /// can then write `y` as that copy instead (`k::matmul_packed_out_into`). `y` is not a
    /// graph output, and nothing else reads it.
    fn next_packed_a(&self, rec: &Recorder, ni: usize, y: TensorId) -> Result<Option<Vec<usize>>> {
        let g = &self.header.graph;
        let Some(next) = g.nodes.get(ni + 1) else {
            return Ok(None);
        };
        let readers: usize = g
            .nodes
            .iter()
            .map(|m| m.inputs.iter().filter(|t| **t == Some(y)).count())
            .sum();
        let sole = readers == 1
            && next.input(0) == Some(y)
            && matches!(next.op, Op::MatMul { .. })
            && !g.outputs.iter().any(|p| p.tensor == y);
        if !sole {
            return Ok(None);
        }
        // `None` where that MatMul splits its reduction (it then reads A as it is).
        let (a, out, rhs, opts) = self.matmul_call(ni + 1, next)?;
        k::matmul_packed_a_shape(rec, &a, rhs.as_mat_rhs(), &opts, &out).map_err(kernel_error(next))
    }

    /// Where MatMul node `ni` writes its output as the next MatMul's packed A: where it can write
    /// a packed output (the graph is searched only then), the next reads it (and only it does)
    /// through a copy of that shape, and that copy is not this MatMul's own packed A
    /// (`packed_a_shape`, as `k::matmul_packed_a_shape` gave it). Its output and that shape.
    #[allow(clippy::too_many_arguments)]
    fn matmul_packed_out(
        &self,
        rec: &Recorder,
        ni: usize,
        n: &Node,
        (a, y): (&Tensor, &Tensor),
        b: MatRhs<'_>,
        opts: &MatMulOpts,
        packed_a_shape: &Option<Vec<usize>>,
    ) -> Result<Option<(TensorId, Vec<usize>)>> {
        Ok(
            match (
                n.outputs.first(),
                k::matmul_packed_out_shape(rec, a, b, opts, y).map_err(kernel_error(n))?,
            ) {
                (Some(&out_id), Some(shape)) if packed_a_shape.as_ref() != Some(&shape) => self
                    .next_packed_a(rec, ni, out_id)?
                    .filter(|next| *next == shape)
                    .map(|_| (out_id, shape)),
                _ => None,
            },
        )
    }

    /// The packed A shape in which norm node `ni` can write its output `y` (normalizing `x` over
    /// `axis`; `k::norm_packed_out_shape`) for the MatMuls that read it: where `y` is no graph
    /// output and its readers are exactly the nodes right after `ni`, each a MatMul reading it
    /// once, as its A, through a packed copy of that shape, and none but the last writing its
    /// own output packed (which would take the copy's place before the rest had read it). The
    /// norm then writes that copy and no MatMul makes one.
    fn norm_packed_readers(
        &self,
        rec: &Recorder,
        ni: usize,
        x: &Tensor,
        axis: i64,
        y: TensorId,
    ) -> Result<Option<Vec<usize>>> {
        let g = &self.header.graph;
        let n = &g.nodes[ni];
        let Some(shape) = k::norm_packed_out_shape(rec, x, axis).map_err(kernel_error(n))? else {
            return Ok(None);
        };
        let reads = |m: &Node| m.inputs.iter().filter(|t| **t == Some(y)).count();
        let readers: usize = g.nodes.iter().map(reads).sum();
        if readers == 0 || g.outputs.iter().any(|p| p.tensor == y) {
            return Ok(None);
        }
        for at in ni + 1..=ni + readers {
            let Some(m) = g.nodes.get(at) else {
                return Ok(None);
            };
            if !matches!(m.op, Op::MatMul { .. }) || m.input(0) != Some(y) || reads(m) != 1 {
                return Ok(None);
            }
            let (a, out, rhs, opts) = self.matmul_call(at, m)?;
            let b = rhs.as_mat_rhs();
            let a_shape =
                k::matmul_packed_a_shape(rec, &a, b, &opts, &out).map_err(kernel_error(m))?;
            if a_shape.as_ref() != Some(&shape) {
                return Ok(None);
            }
            let last = at == ni + readers;
            if !last
                && self
                    .matmul_packed_out(rec, at, m, (&a, &out), b, &opts, &a_shape)?
                    .is_some()
            {
                return Ok(None);
            }
        }
        Ok(Some(shape))
    }

    /// Where MatMul node `n` writes its output packed for the attention that alone reads it as
    /// K or V (`attention_packed_kv`): its output, the scratch kind and the packed shape.
    fn packed_for_attention(
        &mut self,
        rec: &Recorder,
        n: &Node,
    ) -> Result<Option<(TensorId, MatMulScratch, Vec<usize>)>> {
        let Some(&y) = n.outputs.first() else {
            return Ok(None);
        };
        let Some((ai, slot)) = self.sole_reader(y) else {
            return Ok(None);
        };
        if !matches!(self.header.graph.nodes[ai].op, Op::Attention { .. })
            || !(1..=2).contains(&slot)
        {
            return Ok(None);
        }
        let Some(shapes) = self.attention_packed_kv(rec, ai)? else {
            return Ok(None);
        };
        let kind = if slot == 1 {
            MatMulScratch::AttentionKey
        } else {
            MatMulScratch::AttentionValue
        };
        Ok(Some((y, kind, shapes[slot - 1].clone())))
    }

    /// The node reading tensor `t`, and the input slot it reads it at, where that is its only
    /// read and `t` is no graph output.
    fn sole_reader(&self, t: TensorId) -> Option<(usize, usize)> {
        let g = &self.header.graph;
        if g.outputs.iter().any(|p| p.tensor == t) {
            return None;
        }
        let mut reads = g.nodes.iter().enumerate().flat_map(|(ni, m)| {
            m.inputs
                .iter()
                .enumerate()
                .filter(move |(_, i)| **i == Some(t))
                .map(move |(slot, _)| (ni, slot))
        });
        let first = reads.next()?;
        reads.next().is_none().then_some(first)
    }

    /// The packed shapes in which attention node `ai`'s K and V projections write them
    /// (`k::attention_packed_kv_shapes`), or `None` where they write rows: each must be a
    /// MatMul over packed weights that can write its output packed in that shape, and this
    /// attention its output's only reader. Decided once a node, so that the projections and
    /// the attention agree.
    fn attention_packed_kv(
        &mut self,
        rec: &Recorder,
        ai: usize,
    ) -> Result<Option<[Vec<usize>; 2]>> {
        if let Some(known) = self.attention_packed_kv.get(&ai) {
            return Ok(known.clone());
        }
        let decided = self.decide_attention_packed_kv(rec, ai)?;
        self.attention_packed_kv.insert(ai, decided.clone());
        Ok(decided)
    }

    fn decide_attention_packed_kv(
        &self,
        rec: &Recorder,
        ai: usize,
    ) -> Result<Option<[Vec<usize>; 2]>> {
        let g = &self.header.graph;
        let n = &g.nodes[ai];
        if self.device.features().attention_head_copies {
            return Ok(None);
        }
        let (operands, mask, opts) = self.attention_call(n)?;
        let y = self.output(n, 0)?;
        let inputs = k::AttentionInputs {
            q: &operands[0],
            k: &operands[1],
            v: &operands[2],
            mask: mask.as_ref(),
        };
        let Some(shapes) = k::attention_packed_kv_shapes(&inputs, &opts, y.precision())
            .map_err(kernel_error(n))?
        else {
            return Ok(None);
        };
        for (slot, shape) in [1, 2].into_iter().zip(&shapes) {
            let Some(t) = n.input(slot) else {
                return Ok(None);
            };
            if self.sole_reader(t) != Some((ai, slot)) {
                return Ok(None);
            }
            let Some(pi) = g.nodes.iter().position(|m| m.outputs.first() == Some(&t)) else {
                return Ok(None);
            };
            let producer = &g.nodes[pi];
            if !matches!(producer.op, Op::MatMul { .. }) {
                return Ok(None);
            }
            let (a, out, rhs, mopts) = self.matmul_call(pi, producer)?;
            if !rhs.is_weights() {
                return Ok(None);
            }
            let b = rhs.as_mat_rhs();
            let writes = k::matmul_packed_out_shape(rec, &a, b, &mopts, &out)
                .map_err(kernel_error(producer))?;
            if writes.as_ref() != Some(shape) {
                return Ok(None);
            }
        }
        Ok(Some(shapes))
    }

    /// A MatMul without a run-time C: split over reduction spans where the kernels split it
    /// (`k::matmul_split_k_shape`; the executable keeps one fp32 partials tensor a shape),
    /// through a `[4, K/4, M]` copy of A (one a shape too) where they take one
    /// (`k::matmul_packed_a_shape`), else straight.
    fn record_const_matmul(
        &mut self,
        rec: &mut Recorder,
        ni: usize,
        n: &Node,
        (a, y): (&Tensor, &Tensor),
        rhs: Rhs,
        opts: &MatMulOpts,
    ) -> Result<()> {
        let b = rhs.as_mat_rhs();
        if let Some(shape) = k::matmul_split_k_shape(rec, a, b, opts, y).map_err(kernel_error(n))? {
            let partials = self.matmul_scratch(MatMulScratch::Partials, &shape)?;
            return k::matmul_split_into(rec, a, b, opts, y, &partials).map_err(kernel_error(n));
        }
        let packed_a_shape =
            k::matmul_packed_a_shape(rec, a, b, opts, y).map_err(kernel_error(n))?;
        let packed_out = self.matmul_packed_out(rec, ni, n, (a, y), b, opts, &packed_a_shape)?;
        let packed = match &packed_a_shape {
            Some(shape) => {
                // The copy the last packing MatMul of this run made serves this one where it
                // copied the same tensor (the query, key and value projections of one input):
                // nodes record in graph order, and a node at or before the last packer starts a
                // new run. An A written packed by the MatMul before (below) is only that copy.
                let source = n.input(0);
                let fresh = matches!(&self.packed_a_last,
                    Some((at, id, s)) if *at < ni && *id == source && s == shape);
                let packed = match fresh {
                    true => self.packed_copy_of(source, MatMulScratch::PackedA, shape)?,
                    false => self.matmul_scratch(MatMulScratch::PackedA, shape)?,
                };
                if !fresh {
                    if source.is_some_and(|t| self.packed_only.contains(&t)) {
                        return Err(self.bad(
                            n,
                            "its A was written only as its packed copy, by the MatMul before it, \
                             and that copy has been overwritten",
                        ));
                    }
                    k::matmul_pack_a_into(rec, a, &packed).map_err(kernel_error(n))?;
                    self.packed_a_last = Some((ni, source, shape.clone()));
                }
                Some(packed)
            }
            None => None,
        };
        if packed_out.is_none() {
            if let Some((out_id, kind, shape)) = self.packed_for_attention(rec, n)? {
                let target = self.packed_copy(out_id, kind, &shape)?;
                k::matmul_packed_out_into(rec, a, packed.as_ref(), b, opts, (y, &target))
                    .map_err(kernel_error(n))?;
                self.packed_only.insert(out_id);
                return Ok(());
            }
        }
        let Some((out_id, out_shape)) = packed_out else {
            return match &packed {
                Some(p) => k::matmul_packed_into(rec, a, p, b, opts, y),
                None => k::matmul_into(rec, a, b, opts, y),
            }
            .map_err(kernel_error(n));
        };
        let target = self.packed_copy(out_id, MatMulScratch::PackedA, &out_shape)?;
        k::matmul_packed_out_into(rec, a, packed.as_ref(), b, opts, (y, &target))
            .map_err(kernel_error(n))?;
        self.packed_a_last = Some((ni, Some(out_id), out_shape));
        self.packed_only.insert(out_id);
        Ok(())
    }

    /// The packed copy (`kind`, `shape`) that a producer writes in place of its output `of`,
    /// which no kernel then writes or reads (`packed_only`). Its readers are `of`'s, so it lives
    /// exactly while `of`'s arena memory does: where the arena is placed in shared memory and
    /// that memory holds `of` alone (no view, no other tensor) and the copy fits, the copy is an
    /// image there, taking no memory of its own; else the executable's scratch tensor of that
    /// kind and shape. The copy's readers find it with [`Self::packed_copy_of`].
    fn packed_copy(
        &mut self,
        of: TensorId,
        kind: MatMulScratch,
        shape: &[usize],
    ) -> Result<Tensor> {
        if let Some(t) = self.packed_copies.get(&of) {
            return Ok(t.clone());
        }
        match self.packed_copy_in_arena(of, shape)? {
            Some(t) => {
                self.packed_copies.insert(of, t.clone());
                Ok(t)
            }
            None => self.matmul_scratch(kind, shape),
        }
    }

    /// The packed copy standing in for `of`: the one [`Self::packed_copy`] placed in `of`'s
    /// arena memory (the reading kernel checks its shape), else the executable's scratch tensor
    /// of `kind` and `shape`.
    fn packed_copy_of(
        &mut self,
        of: Option<TensorId>,
        kind: MatMulScratch,
        shape: &[usize],
    ) -> Result<Tensor> {
        match of.and_then(|t| self.packed_copies.get(&t)) {
            Some(t) => Ok(t.clone()),
            None => self.matmul_scratch(kind, shape),
        }
    }

    /// An image of `shape` at the offset of `of`'s arena slot, where [`Self::packed_copy`] may
    /// put one: `None` where the arena has no shared memory, `of` shares its slot or is viewed,
    /// or the image would not fit in the slot's bytes.
    fn packed_copy_in_arena(&self, of: TensorId, shape: &[usize]) -> Result<Option<Tensor>> {
        let Some((memory, offsets)) = &self.arena_memory else {
            return Ok(None);
        };
        let Some(offset) = self
            .arena
            .sole_slot(of)
            .and_then(|slot| offsets.get(slot).copied().flatten())
        else {
            return Ok(None);
        };
        let g = &self.header.graph;
        let what = |t: TensorId| format!("activation `{}`", g.tensors[t].name);
        let precision = self.vkp();
        let own = Tensor::image_requirements(&self.device, &g.tensors[of].shape, precision)
            .map_err(super::error::vk(what(of)))?;
        let copy = Tensor::image_requirements(&self.device, shape, precision)
            .map_err(super::error::vk(what(of)))?;
        let (Some((_, own)), Some((_, copy))) = (own, copy) else {
            return Ok(None);
        };
        if copy.size > own.size || offset % copy.alignment.max(1) != 0 {
            return Ok(None);
        }
        let name = format!("packed {}", g.tensors[of].name);
        Tensor::new_in(&self.device, &name, shape, precision, memory, offset)
            .map(Some)
            .map_err(super::error::vk(name))
    }

    /// The executable's tensor of `kind` and `shape`, made on first use: one a shape, shared by
    /// every MatMul of that shape (each is done with it before the next writes it).
    fn matmul_scratch(&mut self, kind: MatMulScratch, shape: &[usize]) -> Result<Tensor> {
        let key = (kind, shape.to_vec());
        if let Some(t) = self.matmul_scratch.get(&key) {
            return Ok(t.clone());
        }
        let (name, precision) = match kind {
            MatMulScratch::PackedA => (format!("packed A {shape:?}"), self.vkp()),
            MatMulScratch::AttentionKey => (format!("packed keys {shape:?}"), self.vkp()),
            MatMulScratch::AttentionValue => (format!("packed values {shape:?}"), self.vkp()),
            MatMulScratch::Partials => (format!("partials {shape:?}"), vk_backend::Precision::F32),
        };
        let t =
            Tensor::new(&self.device, &name, shape, precision).map_err(super::error::vk(name))?;
        self.matmul_scratch.insert(key, t.clone());
        Ok(t)
    }

    /// Gemm: C is a packed vector (a bias over N, or one value), else a tensor the kernel reads.
    fn record_gemm(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let Op::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
            activation,
            b_rows,
        } = n.op
        else {
            return Err(unsupported(n));
        };
        let a = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let mut rhs = self.matmul_rhs(ni, n)?;
        // A column piece of a tied head: its rows of the table, four to a texel.
        if let Some([r0, r1]) = b_rows {
            match &mut rhs {
                Rhs::Weights {
                    texel_offset,
                    k,
                    n: cols,
                    rows: true,
                } => {
                    *texel_offset += ((r0 / 4) * *k) as u32;
                    *cols = r1 - r0;
                }
                _ => return Err(self.bad(n, "a row range of B that is not a row table")),
            }
        }
        let bias = match self.weight_entry(ni, 2).map(|w| w.kind.clone()) {
            Some(WeightKind::Vector { c }) => {
                let ncols = y.shape().last().copied().unwrap_or(1);
                Some(MatBias {
                    texel_offset: self
                        .woff(ni, 2, |k| matches!(k, WeightKind::Vector { .. }))?
                        .unwrap_or(0),
                    per_row: false,
                    per_col: c == ncols && c != 1,
                })
            }
            // A rank-2 constant C is materialized as an activation image.
            Some(WeightKind::Activation { .. }) | None => None,
            Some(other) => {
                return Err(self.bad(n, format!("C packed as {other:?} is not supported")))
            }
        };
        // A C that is not a packed vector is a tensor (run-time or materialized constant), read
        // by the kernel.
        let c = match (&bias, n.input(2)) {
            (None, Some(t)) => Some(self.t(n, t)?),
            _ => None,
        };
        let opts = MatMulOpts {
            trans_a,
            trans_b: trans_b && !rhs.is_weights(),
            alpha,
            beta,
            bias,
            activation: act(activation),
        };
        match &c {
            Some(c) => k::matmul_tensor_bias_into(rec, &a, rhs.as_mat_rhs(), c, &opts, &y)
                .map_err(kernel_error(n)),
            None => self.record_const_matmul(rec, ni, n, (&a, &y), rhs, &opts),
        }
    }

    /// Arithmetic (integer Div/Pow for integer outputs) and comparison ops.
    fn record_binary(&mut self, rec: &mut Recorder, n: &Node, b: BinaryOp) -> Result<()> {
        let a = self.input(n, 0)?;
        let bb = self.input(n, 1)?;
        let y = self.output(n, 0)?;
        let mut arith = |op| k::binary_into(rec, op, &a, &bb, &y);
        // Integer tensors are held as floats; their Div truncates and Pow is exact.
        let int_out = n.outputs.first().is_some_and(|&t| {
            let d = self.header.graph.tensors[t].dtype;
            !d.is_float() && d != DType::Bool
        });
        let r = match b {
            BinaryOp::Add => arith(k::BinaryOp::Add),
            BinaryOp::Sub => arith(k::BinaryOp::Sub),
            BinaryOp::Mul => arith(k::BinaryOp::Mul),
            BinaryOp::Div if int_out => arith(k::BinaryOp::IntDiv),
            BinaryOp::Div => arith(k::BinaryOp::Div),
            BinaryOp::Pow if int_out => arith(k::BinaryOp::IntPow),
            BinaryOp::Pow => arith(k::BinaryOp::Pow),
            BinaryOp::PRelu => arith(k::BinaryOp::PRelu),
            BinaryOp::Mod => arith(k::BinaryOp::IntMod),
            BinaryOp::FMod => arith(k::BinaryOp::FMod),
            BinaryOp::Equal => k::compare_into(rec, k::CompareOp::Equal, &a, &bb, &y),
            BinaryOp::Less => k::compare_into(rec, k::CompareOp::Less, &a, &bb, &y),
            BinaryOp::Greater => k::compare_into(rec, k::CompareOp::Greater, &a, &bb, &y),
            BinaryOp::And => k::compare_into(rec, k::CompareOp::And, &a, &bb, &y),
            BinaryOp::Or => k::compare_into(rec, k::CompareOp::Or, &a, &bb, &y),
        };
        r.map_err(kernel_error(n))
    }

    /// Where(cond, x, y).
    fn record_where(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let (c, a, b) = (self.input(n, 0)?, self.input(n, 1)?, self.input(n, 2)?);
        let y = self.output(n, 0)?;
        k::where_into(rec, &c, &a, &b, &y).map_err(kernel_error(n))
    }

    /// Unary ops; Not(x) is (x == 0) against a zero scalar in the node's scratch.
    fn record_unary(&mut self, rec: &mut Recorder, n: &Node, u: UnaryOp) -> Result<()> {
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let kerr = kernel_error(n);
        match unary(u) {
            Some(op) => k::unary_into(rec, op, &x, &y).map_err(kerr),
            None => {
                let zero = self.scratch(0, &[1])?;
                rec.clear_tensor(&zero).map_err(&kerr)?;
                k::compare_into(rec, k::CompareOp::Equal, &x, &zero, &y).map_err(kerr)
            }
        }
    }

    /// Softmax over one axis, LayerNorm with a packed scale (and bias).
    fn record_row_norm(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let r = match &n.op {
            Op::Softmax { axis } => k::softmax_into(rec, &x, &[*axis as i64], false, &y),
            Op::LayerNorm {
                axis,
                epsilon,
                rms,
                residual,
            } => {
                let vecw = |k: &WeightKind| matches!(k, WeightKind::Vector { .. });
                let scale = self
                    .woff(ni, 1, vecw)?
                    .ok_or_else(|| self.bad(n, "scale is not a packed vector"))?;
                let bias = self.woff(ni, 2, vecw)?;
                if *rms && bias.is_some() {
                    return Err(self.bad(n, "an RMSNorm has no bias"));
                }
                let spec = k::NormSpec {
                    axis: *axis as i64,
                    epsilon: *epsilon,
                    scale_offset: scale,
                    bias_offset: bias,
                    rms: *rms,
                };
                let residual = match *residual {
                    true => Some((self.input(n, 3)?, self.output(n, 1)?)),
                    false => None,
                };
                let packed = match n.outputs.first() {
                    Some(&y_id) => self
                        .norm_packed_readers(rec, ni, &x, spec.axis, y_id)?
                        .map(|shape| (y_id, shape)),
                    None => None,
                };
                if let Some((y_id, shape)) = packed {
                    let target = self.packed_copy(y_id, MatMulScratch::PackedA, &shape)?;
                    let r = Self::record_packed_norm(rec, &x, residual.as_ref(), &spec, &target);
                    // The MatMuls after it find their copy made (`record_const_matmul`).
                    self.packed_a_last = Some((ni, Some(y_id), shape));
                    self.packed_only.insert(y_id);
                    r
                } else if let Some((r, s)) = &residual {
                    Self::record_residual_norm(rec, (&x, r, s), &spec, &y)
                } else {
                    Self::record_norm(rec, &x, &spec, &y)
                }
            }
            _ => return Err(unsupported(n)),
        };
        r.map_err(kernel_error(n))
    }

    /// The norm of `s = x + r` into `y`, writing `s` too: one kernel where the three share a
    /// layout (the usual case), else the Add and then the norm (an operand that is a view folded
    /// differently).
    fn record_residual_norm(
        rec: &mut Recorder,
        (x, r, s): (&Tensor, &Tensor, &Tensor),
        spec: &k::NormSpec,
        y: &Tensor,
    ) -> vk_backend::Result<()> {
        if x.desc() == r.desc() && x.desc() == s.desc() {
            let residual = k::Residual {
                residual: r,
                sum: s,
            };
            return k::residual_norm_into(rec, x, residual, spec, y);
        }
        k::binary_into(rec, k::BinaryOp::Add, x, r, s)?;
        Self::record_norm(rec, s, spec, y)
    }

    /// The norm `spec` of `x` (of `s = x + r`, writing `s`, with a residual `(r, s)`) written
    /// only as `packed`, the MatMuls' packed A (`k::norm_packed_into`): one kernel where the
    /// three share a layout, else the Add first.
    fn record_packed_norm(
        rec: &mut Recorder,
        x: &Tensor,
        residual: Option<&(Tensor, Tensor)>,
        spec: &k::NormSpec,
        packed: &Tensor,
    ) -> vk_backend::Result<()> {
        let Some((r, s)) = residual else {
            return k::norm_packed_into(rec, x, None, spec, packed);
        };
        if x.desc() == r.desc() && x.desc() == s.desc() {
            let residual = k::Residual {
                residual: r,
                sum: s,
            };
            return k::norm_packed_into(rec, x, Some(residual), spec, packed);
        }
        k::binary_into(rec, k::BinaryOp::Add, x, r, s)?;
        k::norm_packed_into(rec, s, None, spec, packed)
    }

    /// The LayerNorm or RMSNorm `spec` of `x` into `y`.
    fn record_norm(
        rec: &mut Recorder,
        x: &Tensor,
        spec: &k::NormSpec,
        y: &Tensor,
    ) -> vk_backend::Result<()> {
        let (axis, eps, scale) = (spec.axis, spec.epsilon, spec.scale_offset);
        if spec.rms {
            k::rmsnorm_into(rec, x, axis, eps, scale, y)
        } else {
            k::layernorm_into(rec, x, axis, eps, scale, spec.bias_offset, y)
        }
    }

    /// Reductions and ArgMax; a keepdims mean over H, W of an NCHW tensor runs as
    /// GlobalAveragePool.
    fn record_reduce(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let r = match &n.op {
            Op::Reduce { op, axes, keepdims } => {
                let op = match op {
                    ReduceOp::Mean => k::ReduceOp::Mean,
                    ReduceOp::Sum => k::ReduceOp::Sum,
                    ReduceOp::Max => k::ReduceOp::Max,
                    ReduceOp::Min => k::ReduceOp::Min,
                };
                // The pool kernel is exact on large planes, where the generic reduce kernel was
                // measured wrong (det at 640: ReduceMean over 160x160 off by 70% of the range).
                if op == k::ReduceOp::Mean && *keepdims && x.shape().len() == 4 && axes == &[2, 3] {
                    k::global_avg_pool_into(rec, &x, &y)
                } else {
                    let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                    k::reduce_into(rec, op, &x, &axes, *keepdims, &y)
                }
            }
            Op::ArgMax {
                axis,
                keepdims,
                select_last_index,
            } => {
                let op = k::ReduceOp::ArgMax {
                    select_last_index: *select_last_index,
                };
                k::reduce_into(rec, op, &x, &[*axis as i64], *keepdims, &y)
            }
            _ => return Err(unsupported(n)),
        };
        r.map_err(kernel_error(n))
    }

    /// MaxPool / AveragePool (1-D ones on [N, C, 1, L] copies) and GlobalAveragePool.
    fn record_pool(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let (window, ceil_mode, kind) = match &n.op {
            Op::MaxPool { window, ceil_mode } => (window, *ceil_mode, k::PoolKind::Max),
            Op::AveragePool {
                window,
                ceil_mode,
                count_include_pad,
            } => (
                window,
                *ceil_mode,
                k::PoolKind::Average {
                    count_include_pad: *count_include_pad,
                },
            ),
            Op::GlobalAveragePool if x.shape().len() == 4 => {
                return k::global_avg_pool_into(rec, &x, &y).map_err(kernel_error(n))
            }
            _ => return Err(unsupported(n)),
        };
        let p = k::Pool2dParams {
            kind,
            window: window2d(window),
            ceil_mode,
        };
        self.spatial_2d(rec, ni, window.spatial_rank == 1, (&x, &y), |r, x, y| {
            k::pool2d_into(r, x, &p, y)
        })
    }

    /// Concat (many inputs), Split (many outputs) and Slice.
    fn record_concat_split_slice(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let r = match &n.op {
            Op::Concat { axis } => {
                let ins = (0..n.inputs.len())
                    .map(|i| self.input(n, i))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&Tensor> = ins.iter().collect();
                k::concat_into(rec, &refs, *axis as i64, &self.output(n, 0)?)
            }
            Op::Split { axis, .. } => {
                let outs = (0..n.outputs.len())
                    .map(|i| self.output(n, i))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&Tensor> = outs.iter().collect();
                k::split_into(rec, &self.input(n, 0)?, *axis as i64, &refs)
            }
            Op::Slice {
                starts,
                ends,
                steps,
            } => {
                let axes: Vec<i64> = (0..starts.len() as i64).collect();
                // A normalized end of -1 with a negative step means "through index 0", which
                // ONNX spells as any end below -dim.
                let ends: Vec<i64> = ends
                    .iter()
                    .zip(steps)
                    .map(|(&e, &s)| if s < 0 && e < 0 { i64::MIN / 2 } else { e })
                    .collect();
                let (x, y) = (self.input(n, 0)?, self.output(n, 0)?);
                k::slice_into(rec, &x, starts, &ends, &axes, steps, &y)
            }
            _ => return Err(unsupported(n)),
        };
        r.map_err(kernel_error(n))
    }

    /// A Gather of rows of a packed row table, read from the atlas. Streamed models write only
    /// the rows on resident pages (the stream executor runs the step once per page it loads).
    fn record_lookup(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let Some(&WeightKind::Rows { rows, width }) = self.weight_entry(ni, 0).map(|w| &w.kind)
        else {
            return Err(unsupported(n));
        };
        let table = k::RowTable {
            texel_offset: self
                .woff(ni, 0, |k| matches!(k, WeightKind::Rows { .. }))?
                .unwrap_or(0),
            rows,
            width,
        };
        let (ids, y) = (self.input(n, 1)?, self.output(n, 0)?);
        k::gather_rows_into(rec, table, &ids, &y, self.streamed_lookups).map_err(kernel_error(n))
    }

    /// Attention node `n`'s operands as its inputs (split ones as rows), its mask and options.
    fn attention_call(&self, n: &Node) -> Result<([Tensor; 3], Option<Tensor>, k::AttentionOpts)> {
        let Op::Attention { split_heads, .. } = &n.op else {
            return Err(unsupported(n));
        };
        let operands = [self.input(n, 0)?, self.input(n, 1)?, self.input(n, 2)?];
        self.attention_args(n, operands, split_heads.dims())
    }

    /// The mask and options of attention node `n` over `operands`, of which those with a head
    /// dim in `dims` are split rows.
    fn attention_args(
        &self,
        n: &Node,
        [q, kk, v]: [Tensor; 3],
        dims: [Option<usize>; 3],
    ) -> Result<([Tensor; 3], Option<Tensor>, k::AttentionOpts)> {
        let Op::Attention {
            scale,
            key_rows,
            nan_to_zero,
            merge_heads,
            ..
        } = &n.op
        else {
            return Err(unsupported(n));
        };
        // Heads of a split operand: its rows' width over its head dim.
        let heads_of = |t: &vk_backend::Tensor, d: Option<usize>| {
            d.map(|d| t.shape().last().copied().unwrap_or(0) / d.max(1))
        };
        let [dq, dk, dv] = dims;
        let split_heads = dims.iter().any(Option::is_some).then(|| k::SplitHeads {
            heads: heads_of(&q, dq).unwrap_or(q.layout().c as usize),
            kv_heads: heads_of(&kk, dk)
                .or(heads_of(&v, dv))
                .unwrap_or(kk.layout().c as usize),
            q: dq.is_some(),
            k: dk.is_some(),
            v: dv.is_some(),
            packed_kv: false,
        });
        let mask = match n.input(3) {
            Some(t) => Some(self.t(n, t)?),
            None => None,
        };
        let opts = k::AttentionOpts {
            scale: *scale,
            key_rows: *key_rows,
            nan_to_zero: *nan_to_zero,
            merge_heads: *merge_heads,
            split_heads,
        };
        Ok(([q, kk, v], mask, opts))
    }

    /// Attention. Operands split into heads (`HeadSplits`) are read from their rows, or, on a
    /// device whose options ask for copies (`DeviceOptions::attention_head_copies`), copied into
    /// heads in the node's scratch first, as the exporters' Reshape and Transpose would.
    fn record_attention(&mut self, rec: &mut Recorder, ni: usize, n: &Node) -> Result<()> {
        let Op::Attention { split_heads, .. } = &n.op else {
            return Err(unsupported(n));
        };
        let mut operands = [self.input(n, 0)?, self.input(n, 1)?, self.input(n, 2)?];
        let mut dims = split_heads.dims();
        if self.device.features().attention_head_copies {
            for (slot, d) in dims.iter_mut().enumerate() {
                let Some(d) = d.take() else {
                    continue;
                };
                let x = &operands[slot];
                let &[1, rows, width] = x.shape() else {
                    return Err(self.bad(n, format!("input {slot} is not split rows")));
                };
                let heads = width / d.max(1);
                let shape = [1, heads, rows, d];
                let t = self.scratch(1 + slot, &shape)?;
                k::heads_from_rows_into(rec, x, &t).map_err(kernel_error(n))?;
                operands[slot] = t;
            }
        }
        let (operands, mask, mut opts) = self.attention_args(n, operands, dims)?;
        let y = self.output(n, 0)?;
        // K and V their projections wrote packed (`attention_packed_kv`), read as those copies.
        let [q, mut kk, mut v] = operands;
        if !self.device.features().attention_head_copies {
            if let Some([k_shape, v_shape]) = self.attention_packed_kv(rec, ni)? {
                kk = self.packed_copy_of(n.input(1), MatMulScratch::AttentionKey, &k_shape)?;
                v = self.packed_copy_of(n.input(2), MatMulScratch::AttentionValue, &v_shape)?;
                if let Some(split) = opts.split_heads.as_mut() {
                    split.packed_kv = true;
                }
            }
        }
        // A decode step's key spans keep their partial results in the node's scratch.
        let spans = k::attention_partials_shape(&q, &kk, &v, mask.as_ref(), &opts)
            .map_err(kernel_error(n))?;
        let partials = match spans {
            Some(shape) => Some(self.scratch_as(0, &shape, vk_backend::Precision::F32)?),
            None => None,
        };
        let inputs = k::AttentionInputs {
            q: &q,
            k: &kk,
            v: &v,
            mask: mask.as_ref(),
        };
        // Merged heads written as the packed A of the MatMul right after it, where that one
        // reads them (and only it does) through a copy of the shape the attention can write.
        let packed = match (
            n.outputs.first(),
            k::attention_packed_out_shape(&inputs, &opts, &y).map_err(kernel_error(n))?,
        ) {
            (Some(&y_id), Some(shape)) => self
                .next_packed_a(rec, ni, y_id)?
                .filter(|next| *next == shape)
                .map(|_| (y_id, shape)),
            _ => None,
        };
        let Some((y_id, shape)) = packed else {
            return k::attention_into(rec, &inputs, &opts, &y, partials.as_ref())
                .map_err(kernel_error(n));
        };
        let target = self.packed_copy(y_id, MatMulScratch::PackedA, &shape)?;
        k::attention_packed_into(rec, &inputs, &opts, (&y, &target), partials.as_ref())
            .map_err(kernel_error(n))?;
        // The MatMul after it finds its copy made (`record_const_matmul`).
        self.packed_a_last = Some((ni, Some(y_id), shape));
        self.packed_only.insert(y_id);
        Ok(())
    }

    /// One-input copy ops: Transpose, Reshape, Gather and GatherElements (indices as input 1), Cast,
    /// Expand, Tile.
    fn record_copy_op(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let r = match &n.op {
            Op::Transpose { perm, read_as } => match read_as {
                None => k::transpose_into(rec, &x, perm, &y),
                Some(shape) => k::transpose_as_into(rec, &x, shape, perm, &y),
            },
            Op::Reshape { .. } => k::reshape_into(rec, &x, &y),
            Op::Gather { axis } => k::gather_into(rec, &x, &self.input(n, 1)?, *axis as i64, &y),
            Op::GatherElements { axis } => {
                k::gather_elements_into(rec, &x, &self.input(n, 1)?, *axis as i64, &y)
            }
            Op::Cast { to } => {
                let to = match to {
                    DType::F32 | DType::F16 | DType::F64 => k::CastTo::Float,
                    DType::Bool => k::CastTo::Bool,
                    _ => k::CastTo::Int,
                };
                k::cast_into(rec, &x, to, &y)
            }
            Op::Expand { .. } => k::expand_into(rec, &x, &y),
            Op::Tile { repeats } => k::tile_into(rec, &x, repeats, &y),
            _ => return Err(unsupported(n)),
        };
        r.map_err(kernel_error(n))
    }

    /// Resize over H and W only.
    fn record_resize(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let Op::Resize {
            mode,
            coord,
            nearest,
            scales,
            from_scales,
            ..
        } = &n.op
        else {
            return Err(unsupported(n));
        };
        let x = self.input(n, 0)?;
        let y = self.output(n, 0)?;
        let r = scales.len();
        if r < 2 || scales[..r - 2].iter().any(|&s| s != 1.0) {
            return Err(self.bad(
                n,
                format!("only H/W resizes run on the GPU (scales {scales:?})"),
            ));
        }
        let mode = match mode {
            ResizeMode::Linear => k::ResizeMode::Linear,
            ResizeMode::Nearest => k::ResizeMode::Nearest(match nearest {
                NearestMode::RoundPreferFloor => k::NearestMode::RoundPreferFloor,
                NearestMode::RoundPreferCeil => k::NearestMode::RoundPreferCeil,
                NearestMode::Floor => k::NearestMode::Floor,
                NearestMode::Ceil => k::NearestMode::Ceil,
            }),
        };
        let coord = match coord {
            CoordMode::HalfPixel => k::CoordMode::HalfPixel,
            CoordMode::PytorchHalfPixel => k::CoordMode::PytorchHalfPixel,
            CoordMode::AlignCorners => k::CoordMode::AlignCorners,
            CoordMode::Asymmetric => k::CoordMode::Asymmetric,
        };
        let p = k::ResizeParams {
            mode,
            coord,
            scales: Some([scales[r - 2], scales[r - 1]]),
            length_from_scales: *from_scales,
        };
        k::resize_into(rec, &x, &p, &y).map_err(kernel_error(n))
    }

    /// Pad (constant, reflect or edge).
    fn record_pad(&mut self, rec: &mut Recorder, n: &Node) -> Result<()> {
        let Op::Pad { mode, pads, value } = &n.op else {
            return Err(unsupported(n));
        };
        let (x, y) = (self.input(n, 0)?, self.output(n, 0)?);
        let p = k::PadParams {
            mode: match mode {
                PadMode::Constant => k::PadMode::Constant,
                PadMode::Reflect => k::PadMode::Reflect,
                PadMode::Edge => k::PadMode::Edge,
            },
            pads: pads.clone(),
            value: *value,
        };
        k::pad_into(rec, &x, &p, &y).map_err(kernel_error(n))
    }

    /// LSTM: packed W, R (and bias), optional initial states, up to three outputs.
    fn record_lstm(
        &mut self,
        rec: &mut Recorder,
        ni: usize,
        n: &Node,
        hidden_size: usize,
    ) -> Result<()> {
        let x = self.input(n, 0)?;
        let mat = |k: &WeightKind| matches!(k, WeightKind::MatrixKN { .. });
        let w_offset = self
            .woff(ni, 1, mat)?
            .ok_or_else(|| self.bad(n, "W is not a packed matrix"))?;
        let r_offset = self
            .woff(ni, 2, mat)?
            .ok_or_else(|| self.bad(n, "R is not a packed matrix"))?;
        let bias_offset = self.woff(ni, 3, |k| matches!(k, WeightKind::Vector { .. }))?;
        let h0 = n.input(5).map(|t| self.t(n, t)).transpose()?;
        let c0 = n.input(6).map(|t| self.t(n, t)).transpose()?;
        let outs = (0..n.outputs.len().min(3))
            .map(|i| self.output(n, i))
            .collect::<Result<Vec<_>>>()?;
        let o = k::LstmOutputs {
            y: outs.first(),
            y_h: outs.get(1),
            y_c: outs.get(2),
        };
        let w = k::LstmWeights {
            w_offset,
            r_offset,
            bias_offset,
        };
        k::lstm_into(rec, &x, w, hidden_size, h0.as_ref(), c0.as_ref(), o).map_err(kernel_error(n))
    }
}

/// MatMul's B, owning its tensor.
enum Rhs {
    Tensor(Tensor),
    Weights {
        texel_offset: u32,
        k: usize,
        n: usize,
        /// Stored by rows (B^T, a row table a tied head shares).
        rows: bool,
    },
}

impl Rhs {
    fn is_weights(&self) -> bool {
        matches!(self, Rhs::Weights { .. })
    }
    fn as_mat_rhs(&self) -> MatRhs<'_> {
        match self {
            Rhs::Tensor(t) => MatRhs::Tensor(t),
            &Rhs::Weights {
                texel_offset,
                k,
                n,
                rows: false,
            } => MatRhs::Weights { texel_offset, k, n },
            &Rhs::Weights {
                texel_offset,
                k,
                n,
                rows: true,
            } => MatRhs::WeightRows { texel_offset, k, n },
        }
    }
}

/// Node `n`'s kernel errors.
fn kernel_error(n: &Node) -> impl Fn(vk_backend::VkError) -> RuntimeError + '_ {
    move |source| RuntimeError::Kernel {
        node: n.name.clone(),
        source,
    }
}

/// Node `n`'s op has no kernel (named by its variant).
fn unsupported(n: &Node) -> RuntimeError {
    RuntimeError::UnsupportedOp {
        node: n.name.clone(),
        op: format!("{:?}", n.op)
            .split([' ', '(', '{'])
            .next()
            .unwrap_or("?")
            .to_string(),
    }
}
