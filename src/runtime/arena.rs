//! Static activation arena: liveness over the topological order, then reuse of dead tensors'
//! images. Images are pooled by their physical extent (width, height, layers) at one precision:
//! a tensor whose planned image has the same extent as a dead one takes over that image
//! (`Tensor::reinterpret`), so no allocation is ever aliased by two live tensors.
use std::collections::HashMap;

use crate::ir::{Graph, TensorId, TensorLayout};

/// Physical image extent used as the pool key; `None` for tensors that never share (buffer
/// fallbacks).
pub type PoolKey = Option<(u32, u32, u32)>;

/// One physical allocation of the arena.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The first tensor assigned to it (its shape creates the image).
    pub first: TensorId,
    pub key: PoolKey,
    pub bytes: u64,
}

/// The plan: a slot per activation tensor that owns storage, views resolved to their root.
#[derive(Clone, Debug, Default)]
pub struct ArenaPlan {
    /// Per tensor: the tensor whose storage it uses (itself, or a view's root).
    pub root: Vec<TensorId>,
    /// Per tensor (roots only): its slot.
    pub slot: Vec<Option<usize>>,
    pub slots: Vec<Slot>,
    pub stats: ArenaStats,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Bytes of all arena images (what the run allocates for activations).
    pub allocated_bytes: u64,
    /// Bytes a naive one-image-per-tensor plan would allocate.
    pub naive_bytes: u64,
    /// Most bytes of live tensors at any step (a lower bound for any pooling).
    pub live_peak_bytes: u64,
    pub tensors: usize,
    pub images: usize,
}

/// Follows `ViewOf` links to the tensor that owns the storage.
pub fn root_of(g: &Graph, mut t: TensorId) -> TensorId {
    let mut hops = 0;
    while let TensorLayout::ViewOf(r) = g.tensors[t].layout {
        if r == t || hops > g.tensors.len() {
            break;
        }
        t = r;
        hops += 1;
    }
    t
}

/// Plans the arena. `key_bytes(t)` gives tensor `t`'s pool key and image bytes.
pub fn plan(g: &Graph, key_bytes: impl Fn(TensorId) -> (PoolKey, u64)) -> ArenaPlan {
    let nt = g.tensors.len();
    let root: Vec<TensorId> = (0..nt).map(|t| root_of(g, t)).collect();
    let is_act = |t: TensorId| !g.is_const(t);
    // Last node reading any tensor of a root; graph outputs live to the end.
    let end = g.nodes.len();
    let mut last = vec![None::<usize>; nt];
    for (i, n) in g.nodes.iter().enumerate() {
        for t in n.present_inputs() {
            last[root[t]] = Some(i);
        }
    }
    for p in &g.outputs {
        last[root[p.tensor]] = Some(end);
    }
    let mut slot = vec![None; nt];
    let mut slots: Vec<Slot> = Vec::new();
    let mut free: HashMap<(u32, u32, u32), Vec<usize>> = HashMap::new();
    let mut stats = ArenaStats::default();
    let mut live = 0u64;
    let alloc = |t: TensorId,
                 slot: &mut Vec<Option<usize>>,
                 slots: &mut Vec<Slot>,
                 free: &mut HashMap<(u32, u32, u32), Vec<usize>>,
                 stats: &mut ArenaStats| {
        let (key, bytes) = key_bytes(t);
        stats.naive_bytes += bytes;
        stats.tensors += 1;
        let reuse = key.and_then(|k| free.get_mut(&k).and_then(|v| v.pop()));
        let s = reuse.unwrap_or_else(|| {
            slots.push(Slot {
                first: t,
                key,
                bytes,
            });
            slots.len() - 1
        });
        slot[t] = Some(s);
        bytes
    };
    let release = |t: TensorId,
                   slot: &[Option<usize>],
                   slots: &[Slot],
                   free: &mut HashMap<(u32, u32, u32), Vec<usize>>| {
        if let Some(s) = slot[t] {
            if let Some(k) = slots[s].key {
                free.entry(k).or_default().push(s);
            }
        }
    };
    for p in &g.inputs {
        if is_act(p.tensor) && root[p.tensor] == p.tensor && slot[p.tensor].is_none() {
            live += alloc(p.tensor, &mut slot, &mut slots, &mut free, &mut stats);
        }
    }
    stats.live_peak_bytes = live;
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.outputs {
            if is_act(t) && root[t] == t && slot[t].is_none() {
                live += alloc(t, &mut slot, &mut slots, &mut free, &mut stats);
            }
        }
        stats.live_peak_bytes = stats.live_peak_bytes.max(live);
        // Free roots whose last reader is this node, and outputs nobody reads.
        let mut dying: Vec<TensorId> = n
            .present_inputs()
            .map(|t| root[t])
            .filter(|&r| last[r] == Some(i))
            .collect();
        dying.extend(
            n.outputs
                .iter()
                .map(|&t| root[t])
                .filter(|&r| last[r].is_none()),
        );
        dying.sort_unstable();
        dying.dedup();
        for r in dying {
            if slot[r].is_some() {
                live -= key_bytes(r).1;
                release(r, &slot, &slots, &mut free);
            }
        }
    }
    stats.allocated_bytes = slots.iter().map(|s| s.bytes).sum();
    stats.images = slots.len();
    ArenaPlan {
        root,
        slot,
        slots,
        stats,
    }
}
