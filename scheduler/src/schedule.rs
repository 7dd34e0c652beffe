//! The structure of a plan: the transfer engine's op queue and what each compute step waits for.
use serde::Serialize;

/// One op of the transfer engine, executed strictly in queue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    /// Copy global page `page` into atlas slot `slot` (the slot must be empty). Takes one transfer time;
    /// the slot counts as occupied from the op's start.
    Load {
        page: u32,
        slot: u32,
        after_step: Option<u32>,
    },
    /// Drop global page `page` from `slot` (a page-table update, zero duration). The runtime must have
    /// seen every earlier reader of the page finish; `after_step` names the last one.
    Evict {
        page: u32,
        slot: u32,
        after_step: Option<u32>,
    },
}

impl Op {
    /// The step that must have finished before the op may start.
    pub fn after_step(&self) -> Option<u32> {
        match *self {
            Op::Load { after_step, .. } | Op::Evict { after_step, .. } => after_step,
        }
    }
}

/// A plan's structure, independent of timing: ops in transfer order, plus for every step the op it
/// waits for (the step may start once that op and, by queue order, every earlier op has finished).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Schedule {
    pub slots: u32,
    pub ops: Vec<Op>,
    pub step_wait: Vec<Option<u32>>,
}

impl Schedule {
    /// Number of load ops.
    pub fn loads(&self) -> u64 {
        self.ops
            .iter()
            .filter(|o| matches!(o, Op::Load { .. }))
            .count() as u64
    }

    /// For every op, the first of `steps` steps that waits for it or for a later op (ops run in
    /// order, so that step needs it done); `steps` where none does.
    pub(crate) fn first_waits(&self, steps: usize) -> Vec<usize> {
        let mut need = vec![steps; self.ops.len()];
        let mut next = 0usize;
        for (j, w) in self.step_wait.iter().enumerate() {
            if let Some(w) = w {
                while next <= *w as usize && next < need.len() {
                    need[next] = j;
                    next += 1;
                }
            }
        }
        need
    }
}
