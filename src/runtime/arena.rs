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
    /// First and last position (0: graph inputs, i + 1: node i) at which any tensor of the
    /// slot is alive.
    pub live: (usize, usize),
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

impl ArenaPlan {
    /// The slot that holds tensor `t` and nothing else (no view of `t`, no other tensor taking
    /// it over): its memory is `t`'s alone while the slot lives, so another image may stand in
    /// for `t` there. `None` where `t` has no slot or shares it.
    pub fn sole_slot(&self, t: TensorId) -> Option<usize> {
        let s = self.slot.get(t).copied().flatten()?;
        let viewed = self.root.iter().enumerate().any(|(u, &r)| r == t && u != t);
        let shared = self.slot.iter().filter(|&&x| x == Some(s)).count() > 1;
        (self.root.get(t) == Some(&t) && !viewed && !shared).then_some(s)
    }
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

/// Plans the arena. `key_bytes(t)` gives tensor `t`'s pool key and image bytes. Tensors in
/// `pinned` (graph inputs a caller keeps on the device between runs) live to the end of the
/// run, like graph outputs, so no later tensor takes their storage. Tensors in `transient`
/// (neither graph inputs nor node outputs: constants that a streamed model copies out of the
/// weight atlas right before each node that reads them) take arena storage from their first
/// reader to their last, instead of an image of their own for the whole session.
pub fn plan(
    g: &Graph,
    key_bytes: impl Fn(TensorId) -> (PoolKey, u64),
    pinned: &[TensorId],
    transient: &[TensorId],
) -> ArenaPlan {
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
    for &t in pinned {
        if let Some(r) = root.get(t) {
            last[*r] = Some(end);
        }
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
                live: (usize::MAX, 0),
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
        let first_read: Vec<TensorId> = n
            .present_inputs()
            .filter(|t| transient.contains(t) && slot[*t].is_none())
            .collect();
        for &t in first_read.iter().chain(&n.outputs) {
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
    // Slot lifetimes: a tensor lives from its definition to its last reader.
    let mut def = vec![None::<usize>; nt];
    for p in &g.inputs {
        def[p.tensor] = Some(0);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        // A transient constant is written right before its first reader runs: from there on it
        // is live, as that node's outputs are.
        let first_read = n.present_inputs().filter(|t| transient.contains(t));
        for t in n.outputs.iter().copied().chain(first_read) {
            def[t].get_or_insert(i + 1);
        }
    }
    for t in 0..nt {
        if let (Some(s), Some(d)) = (slot[t], def[t]) {
            let end = last[t].map_or(d, |l| (l + 1).max(d));
            let live = &mut slots[s].live;
            *live = (live.0.min(d), live.1.max(end));
        }
    }
    for s in &mut slots {
        if s.live.0 > s.live.1 {
            s.live = (0, end + 1);
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

/// Offsets that place `slots` (each with its lifetime, size and alignment) in one memory so that
/// slots alive at the same time never overlap: largest first, each at the lowest offset that
/// fits between the already placed slots it overlaps in time (the "greedy by size" strategy of
/// TFLite's arena planner). Returns the offsets and the memory size.
pub fn pack_offsets(slots: &[((usize, usize), u64, u64)]) -> (Vec<u64>, u64) {
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(slots[i].1), i));
    let mut offsets = vec![0u64; slots.len()];
    let mut placed: Vec<usize> = Vec::new();
    let mut size = 0u64;
    for i in order {
        let ((a0, a1), bytes, align) = slots[i];
        let align = align.max(1);
        // Ranges taken by slots alive at the same time, by offset.
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|&&j| {
                let (b0, b1) = slots[j].0;
                a0 <= b1 && b0 <= a1
            })
            .map(|&j| (offsets[j], offsets[j] + slots[j].1))
            .collect();
        busy.sort_unstable();
        let mut at = 0u64;
        for (lo, hi) in busy {
            if at + bytes <= lo {
                break;
            }
            at = at.max(hi.next_multiple_of(align));
        }
        offsets[i] = at;
        size = size.max(at + bytes);
        placed.push(i);
    }
    (offsets, size)
}

#[cfg(test)]
mod tests {
    use super::{pack_offsets, plan};
    use crate::ir::{DType, Graph, Node, Op, Port, UnaryOp};

    /// x -> a -> b -> c (output), every tensor of one shape: one image pool.
    fn chain() -> (Graph, usize) {
        let mut g = Graph::default();
        let t: Vec<usize> = ["x", "a", "b", "c"]
            .iter()
            .map(|n| g.add_tensor(*n, vec![1, 4, 8, 8], DType::F32))
            .collect();
        for i in 0..3 {
            g.nodes.push(Node {
                name: format!("n{i}"),
                op: Op::Unary(UnaryOp::Abs),
                inputs: vec![Some(t[i])],
                outputs: vec![t[i + 1]],
            });
        }
        g.inputs.push(Port::new("x", t[0]));
        g.outputs.push(Port::new("c", t[3]));
        (g, t[0])
    }

    #[test]
    fn a_pinned_input_keeps_its_image_to_the_end() {
        let (g, x) = chain();
        let key = |_| (Some((8, 8, 1)), 1024);
        let free = plan(&g, key, &[], &[]);
        // x dies at n0, so b (written by n1) takes its image.
        assert_eq!(free.slot[x], free.slot[2]);
        assert_eq!(free.slots.len(), 2);
        let pinned = plan(&g, key, &[x], &[]);
        assert!((1..4).all(|t| pinned.slot[t] != pinned.slot[x]));
        // Alive past the last node, like the output.
        assert_eq!(
            pinned.slots[pinned.slot[x].unwrap()].live.1,
            g.nodes.len() + 1
        );
        assert_eq!(pinned.slots.len(), 3);
    }

    /// A constant read by n1 alone (`w`: no producer, not an input), as a streamed model's
    /// per-run copy out of the atlas: it takes arena storage from n1 on, never at n0 or n2's
    /// outputs' time, and shares no image with a, b (alive at n1) or c.
    #[test]
    fn a_transient_constant_lives_only_at_its_reader() {
        let (mut g, x) = chain();
        let w = g.add_tensor("w", vec![1, 4, 8, 8], DType::F32);
        g.nodes[1].op = Op::Binary(crate::ir::BinaryOp::Add);
        g.nodes[1].inputs.push(Some(w));
        let key = |_| (Some((8, 8, 1)), 1024);
        let without = plan(&g, key, &[], &[]);
        assert_eq!(without.slot[w], None, "not in the arena unless asked");
        // Unpooled (a slot a tensor): its own lifetime.
        let own = plan(&g, |_| (None, 1024), &[], &[w]);
        let s = own.slot[w].expect("the constant has an arena slot");
        assert_eq!(
            own.slots[s].live,
            (2, 2),
            "written before n1 (position 2), read by it"
        );
        assert_eq!(own.stats.live_peak_bytes, 3 * 1024, "a, w and b at n1");
        // Pooled: it takes x's image (dead after n0), never a's or b's (alive at n1).
        let p = plan(&g, key, &[], &[w]);
        assert_eq!(p.slot[w], p.slot[x]);
        assert_ne!(p.slot[1], p.slot[w]);
        assert_ne!(p.slot[2], p.slot[w]);
        assert_eq!(p.slots.len(), 3);
    }

    /// A slot is one tensor's alone unless the pool hands it to another tensor or a view
    /// reads the tensor through it.
    #[test]
    fn a_sole_slot_holds_one_tensor_and_no_view() {
        let (mut g, _) = chain();
        let pooled = plan(&g, |_| (Some((8, 8, 1)), 1024), &[], &[]);
        // x's image goes on to b, a's to c: no slot is one tensor's.
        assert_eq!(pooled.slots.len(), 2);
        assert!((0..4).all(|t| pooled.sole_slot(t).is_none()));
        let own = plan(&g, |_| (None, 1024), &[], &[]);
        assert!((0..4).all(|t| own.sole_slot(t) == own.slot[t]));
        // c read through a view `v` of b: b's slot is no longer b's alone.
        let v = g.add_tensor("v", vec![1, 4, 8, 8], DType::F32);
        g.tensors[v].layout = crate::ir::TensorLayout::ViewOf(2);
        g.nodes[2].inputs = vec![Some(v)];
        let viewed = plan(&g, |_| (None, 1024), &[], &[]);
        assert_eq!(viewed.sole_slot(2), None);
        assert_eq!(viewed.sole_slot(1), viewed.slot[1]);
        assert_eq!(viewed.sole_slot(v), None, "a view has no slot of its own");
    }

    /// Brute force: every pair alive together is disjoint in memory, offsets are aligned.
    fn check(slots: &[((usize, usize), u64, u64)]) -> u64 {
        let (off, size) = pack_offsets(slots);
        for (i, a) in slots.iter().enumerate() {
            assert_eq!(off[i] % a.2.max(1), 0);
            assert!(off[i] + a.1 <= size);
            for (j, b) in slots.iter().enumerate().skip(i + 1) {
                let together = a.0 .0 <= b.0 .1 && b.0 .0 <= a.0 .1;
                let apart = off[i] + a.1 <= off[j] || off[j] + b.1 <= off[i];
                assert!(!together || apart, "slots {i} and {j} overlap: {off:?}");
            }
        }
        size
    }

    #[test]
    fn chain_reuses_memory() {
        // a -> b -> c -> d: only neighbours are alive together.
        let s = [
            ((0, 1), 96, 16),
            ((1, 2), 96, 16),
            ((2, 3), 96, 16),
            ((3, 4), 96, 16),
        ];
        assert_eq!(check(&s), 192);
    }

    #[test]
    fn random_cases_never_overlap() {
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200 {
            let n = 1 + rnd(30) as usize;
            let slots: Vec<_> = (0..n)
                .map(|_| {
                    let a = rnd(20) as usize;
                    let b = a + rnd(6) as usize;
                    ((a, b), 1 + rnd(5000), 1 << rnd(9))
                })
                .collect();
            let size = check(&slots);
            let sum: u64 = slots.iter().map(|s| s.1 + s.2).sum();
            assert!(size <= sum);
        }
    }
}
