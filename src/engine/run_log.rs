//! What the last requests really did on the device: the stream engine's journal events (page
//! copies, evictions, compute batches with their stalls) and the request starts, kept for a
//! bounded window, and the residency timeline drawn from them (`GET /v1/residency.svg`, `texstream
//! run --residency-svg`). The plan's own timeline is a prediction; this one is measured.

use std::collections::VecDeque;

use scheduler::svg::Timeline;
use vk_backend::StreamEvent;

/// Requests the plot covers.
pub const WINDOW_REQUESTS: usize = 8;
/// Events kept at most (the oldest requests' go first).
const MAX_KEPT_EVENTS: usize = 200_000;

/// See the module docs.
pub struct RunLog {
    /// Events of the window, by time.
    events: VecDeque<StreamEvent>,
    /// Request starts of the window (seconds on the stream engine's clock) and their pipeline.
    marks: VecDeque<(f64, String)>,
    /// What each atlas slot held (its model) when the window starts.
    slots_at_start: Vec<Option<u32>>,
    /// Events the bounded journal dropped before they reached this log.
    pub dropped: u64,
}

/// What the plot says beside the events.
pub struct RunFacts<'a> {
    pub workload: &'a str,
    pub policy: &'a str,
    pub model_names: Vec<String>,
    pub cap_bytes: u64,
    pub page_bytes: u64,
    pub slots: u32,
    /// Device bytes the engine holds besides the atlas (arena, staging, state, page table).
    pub other_bytes: u64,
    pub now_s: f64,
}

impl RunLog {
    pub fn new(slots: u32) -> RunLog {
        RunLog {
            events: VecDeque::new(),
            marks: VecDeque::new(),
            slots_at_start: vec![None; slots as usize],
            dropped: 0,
        }
    }

    /// A request of `pipeline` starts at `at_s`; the oldest request beyond the window leaves.
    pub fn request_started(&mut self, at_s: f64, pipeline: &str) {
        self.marks.push_back((at_s, pipeline.to_string()));
        while self.marks.len() > WINDOW_REQUESTS {
            self.marks.pop_front();
        }
        let start = self.marks.front().map_or(at_s, |m| m.0);
        self.trim(|e| e.end_s() < start);
    }

    /// Adds journal events (any order) and the count the journal dropped.
    pub fn add(&mut self, events: Vec<StreamEvent>, dropped: u64) {
        self.dropped += dropped;
        self.events.extend(events);
        self.events
            .make_contiguous()
            .sort_by(|a, b| a.end_s().total_cmp(&b.end_s()));
        let excess = self.events.len().saturating_sub(MAX_KEPT_EVENTS);
        if excess > 0 {
            let cut = self.events[excess - 1].end_s();
            self.trim(|e| e.end_s() <= cut);
            // Marks older than what is left would label nothing.
            while self.marks.len() > 1 && self.marks[1].0 <= cut {
                self.marks.pop_front();
            }
        }
    }

    /// Folds the events at the front that `old` selects into the slots' starting state.
    fn trim(&mut self, old: impl Fn(&StreamEvent) -> bool) {
        while let Some(e) = self.events.front() {
            if !old(e) {
                break;
            }
            match *e {
                StreamEvent::Load { model, slot, .. } => {
                    if let Some(s) = self.slots_at_start.get_mut(slot as usize) {
                        *s = Some(model);
                    }
                }
                StreamEvent::Evict { slot, .. } => {
                    if let Some(s) = self.slots_at_start.get_mut(slot as usize) {
                        *s = None;
                    }
                }
                StreamEvent::Compute { .. } => {}
            }
            self.events.pop_front();
        }
    }

    /// The window's timeline, as it really ran.
    pub fn timeline(&self, f: &RunFacts) -> Timeline {
        let nm = f.model_names.len();
        let t_start = self
            .marks
            .front()
            .map(|m| m.0)
            .or_else(|| self.events.front().map(|e| e.end_s()))
            .unwrap_or(0.0);
        let t_end = self
            .events
            .iter()
            .map(|e| e.end_s())
            .fold(f.now_s.max(t_start), f64::max);
        // The base is everything but occupied slots, so the stack's top is the device bytes
        // the engine holds (constant: the atlas, arena and staging are allocated once).
        let page = f.page_bytes as i64;
        let free_at_start = self.slots_at_start.iter().filter(|s| s.is_none()).count() as i64;
        let mut changes = vec![(t_start, nm, f.other_bytes as i64 + free_at_start * page)];
        for m in self.slots_at_start.iter().flatten() {
            changes.push((t_start, *m as usize, page));
        }
        let (mut transfers, mut compute, mut stalls) = (Vec::new(), Vec::new(), Vec::new());
        let (mut streamed, mut stall_s, mut busy_s) = (0u64, 0.0, 0.0);
        for e in &self.events {
            match *e {
                StreamEvent::Load {
                    model,
                    start_s,
                    end_s,
                    ..
                } => {
                    changes.push((end_s, model as usize, page));
                    changes.push((end_s, nm, -page));
                    transfers.push((start_s, end_s, Some(model)));
                    streamed += f.page_bytes;
                }
                StreamEvent::Evict { model, at_s, .. } => {
                    changes.push((at_s, model as usize, -page));
                    changes.push((at_s, nm, page));
                }
                StreamEvent::Compute {
                    model,
                    start_s,
                    end_s,
                    stall_s: s,
                    ..
                } => {
                    compute.push((start_s, end_s, model));
                    if s > 0.0 {
                        stalls.push((start_s - s, start_s));
                    }
                    stall_s += s;
                    busy_s += end_s - start_s;
                }
            }
        }
        compute.sort_by(|a, b| a.0.total_cmp(&b.0));
        transfers.sort_by(|a, b| a.0.total_cmp(&b.0));
        let span = t_end - t_start;
        let (unit, scale) = scheduler::svg::time_unit(span);
        let size = scheduler::format_size;
        Timeline {
            title: format!(
                "{} as it ran — {}, cap {}, {} slots of {}",
                f.workload,
                f.policy,
                size(f.cap_bytes),
                f.slots,
                size(f.page_bytes)
            ),
            subtitle: format!(
                "last {} requests over {:.3} {unit}: streamed {}, GPU compute {:.3} {unit}, stall {:.3} {unit}; device bytes {} of cap",
                self.marks.len(),
                span * scale,
                size(streamed),
                busy_s * scale,
                stall_s * scale,
                size(f.other_bytes + f.slots as u64 * f.page_bytes),
            ),
            model_names: f.model_names.clone(),
            base_label: "arena, staging, free slots".into(),
            cap_bytes: f.cap_bytes,
            t_start,
            t_end: t_end.max(t_start + 1e-9),
            changes,
            transfers,
            compute,
            stalls,
            marks: self
                .marks
                .iter()
                .map(|(t, p)| (*t, p.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(model: u32, slot: u32, t: f64) -> StreamEvent {
        StreamEvent::Load {
            model,
            page: 0,
            slot,
            start_s: t - 0.5,
            end_s: t,
            submitted_s: t - 0.6,
            after_value: 0,
            ticket: 1,
            reader: 0,
            issued_s: t - 0.7,
        }
    }

    fn evict(model: u32, slot: u32, t: f64) -> StreamEvent {
        StreamEvent::Evict {
            model,
            page: 0,
            slot,
            at_s: t,
        }
    }

    fn facts() -> RunFacts<'static> {
        RunFacts {
            workload: "w",
            policy: "planned",
            model_names: vec!["a".into(), "b".into()],
            cap_bytes: 100,
            page_bytes: 10,
            slots: 2,
            other_bytes: 30,
            now_s: 20.0,
        }
    }

    #[test]
    fn pages_loaded_before_the_window_start_it_resident() {
        let mut log = RunLog::new(2);
        log.request_started(0.0, "p");
        log.add(vec![load(0, 0, 1.0), load(1, 1, 2.0)], 0);
        for i in 1..=WINDOW_REQUESTS {
            log.request_started(10.0 + i as f64, "p");
        }
        log.add(vec![evict(0, 0, 12.5), load(1, 0, 13.0)], 0);
        let tl = log.timeline(&facts());
        assert_eq!(tl.t_start, 11.0);
        assert_eq!(tl.marks.len(), WINDOW_REQUESTS);
        // Both pages from before the window are resident at its start, above the base.
        let at_start: Vec<_> = tl.changes.iter().filter(|c| c.0 == 11.0).collect();
        // The base: 30 bytes besides the atlas, no free slot.
        assert!(at_start.contains(&&(11.0, 2, 30)));
        assert!(at_start.contains(&&(11.0, 0, 10)));
        assert!(at_start.contains(&&(11.0, 1, 10)));
        // The window's own events follow.
        assert!(tl.changes.contains(&(12.5, 0, -10)));
        assert!(tl.changes.contains(&(12.5, 2, 10)));
        assert!(tl.changes.contains(&(13.0, 1, 10)));
        assert!(tl.changes.contains(&(13.0, 2, -10)));
        // The stack's top is the device bytes all along.
        let level: i64 = tl.changes.iter().map(|c| c.2).sum();
        assert_eq!(level, 30 + 2 * 10);
        let svg = scheduler::svg::render_timeline(&tl);
        assert!(svg.starts_with("<svg") && svg.contains("as it ran"));
    }
}
