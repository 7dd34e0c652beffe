//! Walks an ONNX graph in topological order, converting each node into IR nodes or constants.
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use prost::Message;

use super::error::ImportError;
use super::peek::{count_ops, runtime_inputs};
use super::proto;
use super::tensor::{dims_to_shape, dtype_from_onnx, tensor_from_proto, MAX_ELEMENTS};
use super::{ImportOptions, Model};
use crate::ir::eval::eval;
use crate::ir::infer::{infer, InferError};
use crate::ir::{Graph, Node, Op, Port, TensorData, TensorId};

/// Import state: the graph being built and a stack of name scopes (one per inlined If branch).
pub(super) struct Ctx<'a> {
    pub file: PathBuf,
    pub model_dir: &'a Path,
    pub opset: i64,
    pub g: Graph,
    scopes: Vec<HashMap<String, TensorId>>,
    /// Concats that become in-place cache writes, by output name (see [`super::kv_cache`]),
    /// and the position input's tensor.
    kv: HashMap<String, super::kv_cache::CacheLink>,
    kv_position: Option<TensorId>,
}

/// Identifies the node being converted, for error messages.
pub(super) struct NodeRef<'p> {
    pub name: String,
    pub op: &'p str,
    pub proto: &'p proto::NodeProto,
}

impl Ctx<'_> {
    pub fn node_err(
        &self,
        n: &NodeRef,
        tensor: &str,
        reason: impl std::fmt::Display,
    ) -> ImportError {
        ImportError::Node {
            file: self.file.clone(),
            node: n.name.clone(),
            op: n.op.to_string(),
            tensor: tensor.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Shape inference of the node's IR op failed at `tensor`.
    pub fn infer_err(&self, n: &NodeRef, tensor: &str, source: InferError) -> ImportError {
        ImportError::Infer {
            file: self.file.clone(),
            node: n.name.clone(),
            op: n.op.to_string(),
            tensor: tensor.to_string(),
            source: Box::new(source),
        }
    }

    /// An error about the node's first output.
    pub fn output_err(&self, n: &NodeRef, reason: impl std::fmt::Display) -> ImportError {
        self.node_err(n, &self.first_output(n), reason)
    }

    pub fn lookup(&self, name: &str) -> Option<TensorId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// Runs `f` in a fresh name scope (an inlined If branch): names it binds are dropped after.
    pub fn in_new_scope<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.scopes.push(HashMap::new());
        let out = f(self);
        self.scopes.pop();
        out
    }

    pub fn bind(&mut self, name: &str, t: TensorId) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), t);
        }
    }

    pub fn konst(&self, t: TensorId) -> Option<&TensorData> {
        self.g.constants.get(&t)
    }

    /// Input #i of the node as a tensor id (None for absent optional inputs).
    pub fn input(&self, n: &NodeRef, i: usize) -> Result<Option<TensorId>, ImportError> {
        match n.proto.input.get(i).map(|s| s.as_str()) {
            None | Some("") => Ok(None),
            Some(name) => self.lookup(name).map(Some).ok_or_else(|| {
                self.node_err(
                    n,
                    name,
                    "input tensor is not produced by any node, initializer or graph input",
                )
            }),
        }
    }

    pub fn need_input(&self, n: &NodeRef, i: usize) -> Result<TensorId, ImportError> {
        self.input(n, i)?
            .ok_or_else(|| self.node_err(n, &format!("input #{i}"), "required input is missing"))
    }

    /// Input #i, which must be a constant after folding.
    pub fn const_input(
        &self,
        n: &NodeRef,
        i: usize,
        what: &str,
    ) -> Result<Option<&TensorData>, ImportError> {
        match self.input(n, i)? {
            None => Ok(None),
            Some(t) => self.konst(t).map(Some).ok_or_else(|| {
                self.node_err(
                    n,
                    &self.g.tensors[t].name,
                    format!("{what} must be a constant (it is computed at run time)"),
                )
            }),
        }
    }

    /// Input #i, which must be present and a constant; `what` names it in the error.
    pub fn need_const_input(
        &self,
        n: &NodeRef,
        i: usize,
        what: &str,
    ) -> Result<&TensorData, ImportError> {
        self.const_input(n, i, what)?
            .ok_or_else(|| self.output_err(n, format!("missing {what}")))
    }

    pub fn shape(&self, t: TensorId) -> &[usize] {
        &self.g.tensors[t].shape
    }

    /// Binds output `i` of the node to an existing tensor (Identity, Dropout, If outputs).
    pub fn alias_output(&mut self, n: &NodeRef, i: usize, t: TensorId) {
        if let Some(name) = n.proto.output.get(i).filter(|s| !s.is_empty()) {
            let name = name.clone();
            self.bind(&name, t);
        }
    }

    /// Registers a constant as output `i` of the node.
    pub fn const_output(&mut self, n: &NodeRef, i: usize, data: TensorData) {
        let name = n.proto.output.get(i).cloned().unwrap_or_default();
        let t = self.g.add_constant(name.clone(), data);
        if !name.is_empty() {
            self.bind(&name, t);
        }
    }

    /// Infers output shapes, folds when every input is constant, otherwise appends an IR node.
    /// Returns the output tensor ids.
    pub fn emit(
        &mut self,
        n: &NodeRef,
        op: Op,
        inputs: Vec<Option<TensorId>>,
    ) -> Result<Vec<TensorId>, ImportError> {
        let sigs: Vec<_> = inputs
            .iter()
            .map(|t| t.map(|t| (self.g.tensors[t].shape.clone(), self.g.tensors[t].dtype)))
            .collect();
        let outs = infer(&op, &sigs).map_err(|e| self.infer_err(n, &self.first_output(n), e))?;
        for (shape, _) in &outs {
            let ok = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .is_some_and(|v| v <= MAX_ELEMENTS);
            if !ok {
                return Err(self.node_err(
                    n,
                    &self.first_output(n),
                    format!("output shape {shape:?} is too large"),
                ));
            }
        }
        let all_const = inputs.iter().flatten().all(|t| self.g.is_const(*t))
            && inputs.iter().any(|t| t.is_some());
        if all_const {
            let data: Vec<Option<&TensorData>> = inputs
                .iter()
                .map(|t| t.and_then(|t| self.g.constants.get(&t)))
                .collect();
            let folded = eval(&op, &data).map_err(|source| ImportError::Fold {
                file: self.file.clone(),
                node: n.name.clone(),
                op: n.op.to_string(),
                tensor: self.first_output(n),
                source: Box::new(source),
            })?;
            if let Some(vals) = folded {
                let mut ids = Vec::new();
                for (i, v) in vals.into_iter().enumerate() {
                    self.const_output(n, i, v);
                    ids.push(self.g.tensors.len() - 1);
                }
                return Ok(ids);
            }
        }
        let mut ids = Vec::new();
        for (i, (shape, dt)) in outs.into_iter().enumerate() {
            let oname = n.proto.output.get(i).cloned().unwrap_or_default();
            let label = if oname.is_empty() {
                format!("{}:{i}", n.name)
            } else {
                oname.clone()
            };
            let t = self.g.add_tensor(label, shape, dt);
            if !oname.is_empty() {
                self.bind(&oname, t);
            }
            ids.push(t);
        }
        self.g.nodes.push(Node {
            name: n.name.clone(),
            op,
            inputs,
            outputs: ids.clone(),
        });
        Ok(ids)
    }

    /// Adds an internal node (not bound to ONNX names) and returns its single output.
    pub fn emit_internal(
        &mut self,
        name: &str,
        n: &NodeRef,
        op: Op,
        inputs: Vec<Option<TensorId>>,
    ) -> Result<TensorId, ImportError> {
        let sigs: Vec<_> = inputs
            .iter()
            .map(|t| t.map(|t| (self.g.tensors[t].shape.clone(), self.g.tensors[t].dtype)))
            .collect();
        let outs = infer(&op, &sigs).map_err(|e| self.infer_err(n, name, e))?;
        let (shape, dt) = outs
            .into_iter()
            .next()
            .ok_or_else(|| self.node_err(n, name, "op has no output"))?;
        let t = self.g.add_tensor(name, shape, dt);
        self.g.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs,
            outputs: vec![t],
        });
        Ok(t)
    }

    pub fn first_output(&self, n: &NodeRef) -> String {
        n.proto.output.first().cloned().unwrap_or_default()
    }

    /// Converts the nodes (and initializers) of a graph or If branch into the current scope.
    pub fn walk(&mut self, graph: &proto::GraphProto) -> Result<(), ImportError> {
        for init in &graph.initializer {
            self.add_initializer(init)?;
        }
        for (idx, node) in graph.node.iter().enumerate() {
            let op = node.op_type.as_deref().unwrap_or("");
            let name = match node.name.as_deref() {
                Some(s) if !s.is_empty() => s.to_string(),
                _ => format!(
                    "#{idx} ({op} -> {})",
                    node.output.first().map(|s| s.as_str()).unwrap_or("")
                ),
            };
            let nref = NodeRef {
                name,
                op,
                proto: node,
            };
            if let Some(link) = node.output.first().and_then(|o| self.kv.get(o)).cloned() {
                self.cache_write(&nref, &link)?;
                continue;
            }
            let domain = node.domain.as_deref().unwrap_or("");
            let in_onnx_domain = domain.is_empty() || domain == "ai.onnx";
            let convert = super::ops::converter(op)
                .filter(|_| in_onnx_domain)
                .ok_or_else(|| ImportError::UnknownOp {
                    file: self.file.clone(),
                    node: nref.name.clone(),
                    op: op.to_string(),
                    domain: domain.to_string(),
                })?;
            convert(self, &nref)?;
        }
        Ok(())
    }

    /// `present = Concat(past, new)` as an in-place write of `new` into the past's state tensor
    /// at the position input's first element; `present` names a view of the state.
    fn cache_write(
        &mut self,
        n: &NodeRef,
        link: &super::kv_cache::CacheLink,
    ) -> Result<(), ImportError> {
        let cache = self.need_input(n, 0)?;
        let new = self.need_input(n, 1)?;
        let pos = self.kv_position.ok_or_else(|| ImportError::KvCache {
            file: self.file.clone(),
            reason: "the position input is bound to a constant".into(),
        })?;
        let out = self.emit(
            n,
            Op::KvWrite {
                axis: link.axis,
                split_heads: false,
            },
            vec![Some(cache), Some(new), Some(pos)],
        )?;
        if let Some(&t) = out.first() {
            self.g.make_view(t, cache);
        }
        Ok(())
    }

    fn add_initializer(&mut self, init: &proto::TensorProto) -> Result<(), ImportError> {
        let name = init.name.clone().unwrap_or_default();
        let data =
            tensor_from_proto(init, self.model_dir).map_err(|source| ImportError::Constant {
                file: self.file.clone(),
                source,
            })?;
        let t = self.g.add_constant(name.clone(), data);
        self.bind(&name, t);
        Ok(())
    }
}

fn describe_dims(t: &proto::TypeProto) -> (Vec<Option<usize>>, String) {
    let dims: Vec<Option<usize>> = match &t.value {
        Some(proto::type_proto::Value::TensorType(tt)) => tt
            .shape
            .as_ref()
            .map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(proto::tensor_shape_proto::dimension::Value::DimValue(v))
                            if *v > 0 =>
                        {
                            Some(*v as usize)
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let text = format!(
        "[{}]",
        dims.iter()
            .map(|d| d.map_or("?".to_string(), |v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    (dims, text)
}

fn elem_type(t: &proto::TypeProto) -> i32 {
    match &t.value {
        Some(proto::type_proto::Value::TensorType(tt)) => tt.elem_type.unwrap_or(1),
        _ => 0,
    }
}

pub(super) fn run(
    bytes: &[u8],
    file: &Path,
    model_dir: &Path,
    opts: &ImportOptions,
) -> Result<Model, ImportError> {
    let file = file.to_path_buf();
    let model = proto::ModelProto::decode(bytes).map_err(|e| ImportError::Decode {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    let graph = model.graph.as_ref().ok_or_else(|| ImportError::NotOnnx {
        file: file.clone(),
        reason: "the file has no graph (wrong file type?)".into(),
    })?;
    if model.ir_version.unwrap_or(0) <= 0 {
        return Err(ImportError::NotOnnx {
            file,
            reason: "missing ir_version (wrong file type?)".into(),
        });
    }
    let mut opset = None;
    for o in &model.opset_import {
        let domain = o.domain.clone().unwrap_or_default();
        let v = o.version.unwrap_or(0);
        if domain.is_empty() || domain == "ai.onnx" {
            if !(11..=18).contains(&v) {
                return Err(ImportError::Opset {
                    file,
                    domain: "ai.onnx".into(),
                    version: v,
                });
            }
            opset = Some(v);
        }
    }
    let opset = opset.ok_or_else(|| ImportError::NotOnnx {
        file: file.clone(),
        reason: "no ai.onnx opset_import".into(),
    })?;

    let mut ctx = Ctx {
        file: file.clone(),
        model_dir,
        opset,
        g: Graph::default(),
        scopes: vec![HashMap::new()],
        kv: HashMap::new(),
        kv_position: None,
    };
    let links = match &opts.kv_cache {
        Some(kv) => super::kv_cache::find_links(graph, kv, &file)?,
        None => HashMap::new(),
    };
    let past: HashMap<&str, &super::kv_cache::CacheLink> =
        links.values().map(|l| (l.past.as_str(), l)).collect();

    let real_inputs = runtime_inputs(graph);
    let names: Vec<String> = real_inputs
        .iter()
        .map(|i| i.name.clone().unwrap_or_default())
        .collect();
    for given in opts.input_shapes.keys().chain(opts.bindings.keys()) {
        if !names.contains(given) {
            return Err(ImportError::UnknownInput {
                file,
                input: given.clone(),
                available: names.join(", "),
            });
        }
    }
    for vi in &real_inputs {
        let name = vi.name.clone().unwrap_or_default();
        let ty = vi.r#type.clone().unwrap_or_default();
        let (dims, declared) = describe_dims(&ty);
        let dtype = dtype_from_onnx(elem_type(&ty)).map_err(|e| ImportError::Tensor {
            file: file.clone(),
            tensor: name.clone(),
            reason: e.to_string(),
        })?;
        if let Some(val) = opts.bindings.get(&name) {
            let mut v = val.clone();
            if dims.len() != v.shape.len() {
                v.shape = vec![1; dims.len()];
            }
            let v = TensorData::from_f64s(
                dtype,
                v.shape.clone(),
                (0..v.numel()).map(|i| v.values.get_f(i)),
            );
            let t = ctx.g.add_constant(name.clone(), v);
            ctx.bind(&name, t);
            continue;
        }
        let link = past.get(name.as_str()).copied();
        let shape = match (opts.input_shapes.get(&name), link, &opts.kv_cache) {
            // A cache is its full length on the axis it grows along.
            (None, Some(l), Some(kv)) => {
                let mut d = dims.clone();
                if let Some(a) = d.get_mut(l.axis) {
                    *a = Some(kv.max_len);
                }
                d.iter()
                    .copied()
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| ImportError::MissingInputShape {
                        file: file.clone(),
                        input: name.clone(),
                        declared: declared.clone(),
                    })?
            }
            (Some(given), _, _) => {
                let ok = given.len() == dims.len()
                    && dims
                        .iter()
                        .zip(given)
                        .all(|(d, g)| d.is_none_or(|d| d == *g));
                if !ok {
                    return Err(ImportError::InputShape {
                        file,
                        input: name,
                        expected: declared,
                        given: format!("{given:?}"),
                    });
                }
                given.clone()
            }
            (None, _, _) => match dims.iter().copied().collect::<Option<Vec<usize>>>() {
                Some(s) => s,
                None => {
                    return Err(ImportError::MissingInputShape {
                        file,
                        input: name,
                        declared,
                    })
                }
            },
        };
        dims_to_shape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>()).map_err(|e| {
            ImportError::Tensor {
                file: file.clone(),
                tensor: name.clone(),
                reason: e.to_string(),
            }
        })?;
        let t = ctx.g.add_tensor(name.clone(), shape, dtype);
        ctx.bind(&name, t);
        match link {
            Some(l) => ctx.g.state.push(crate::ir::StatePort {
                name,
                present: l.present.clone(),
                tensor: t,
                axis: l.axis,
            }),
            None => {
                if opts.kv_cache.as_ref().map(|k| &k.position_input) == Some(&name) {
                    ctx.kv_position = Some(t);
                }
                ctx.g.inputs.push(Port::new(name, t));
            }
        }
    }
    ctx.kv = links;

    ctx.walk(graph)?;

    for o in &graph.output {
        let name = o.name.clone().unwrap_or_default();
        if ctx.kv.contains_key(&name) {
            // The cache's state is the output now; nobody reads it back.
            continue;
        }
        let t = ctx.lookup(&name).ok_or_else(|| ImportError::Tensor {
            file: ctx.file.clone(),
            tensor: name.clone(),
            reason: "graph output is not produced by any node".into(),
        })?;
        ctx.g.outputs.push(Port::new(name, t));
    }
    ctx.g.prune_constants();
    let mut onnx_ops = BTreeMap::new();
    count_ops(graph, &mut onnx_ops);
    let metadata = model
        .metadata_props
        .iter()
        .map(|p| {
            (
                p.key.clone().unwrap_or_default(),
                p.value.clone().unwrap_or_default(),
            )
        })
        .collect();
    let value_names = ctx
        .scopes
        .first()
        .map(|s| s.iter().map(|(k, &v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    Ok(Model {
        graph: ctx.g,
        opset,
        producer: model.producer_name.clone().unwrap_or_default(),
        onnx_ops,
        value_names,
        metadata,
    })
}
