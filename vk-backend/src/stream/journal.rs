//! The stream journal: what the engine really did, as it completes on the GPU. It feeds two
//! things that must not wait for the end of a run: the live GPU-time counters (transfer busy,
//! compute busy, compute stall) and a bounded log of [`StreamEvent`]s from which a caller plots
//! residency as it really ran.
//!
//! Times come from the timestamp queries of both queues, moved to the host clock (seconds since
//! the engine started) with the measured clock offset. A page copy is timed by the transfer
//! submission that carried it (several copies share one span). An eviction happens, on the
//! GPU's side, when the batch holding the slot's last reader ends: from then on nothing reads
//! the old page and the slot's next copy may overwrite it. A compute batch's stall is the time
//! it waited for its pages after the GPU had it (see [`super::timing::StallMeter`]).
//!
//! Everything here is bounded: the event ring keeps the newest [`MAX_EVENTS`] (older ones are
//! counted as dropped), and the bookkeeping holds only batches and loads not yet resolved, which
//! is the work in flight.

use std::collections::VecDeque;

use super::timing::{BatchTiming, Span, StallMeter};

/// Events kept for [`super::StreamEngine::take_events`]; older ones are dropped (and counted).
pub const MAX_EVENTS: usize = 1 << 17;

/// Recently finished compute batches remembered to time evictions by their last reader.
const RECENT_BATCHES: usize = 4096;
/// Recently finished transfer submissions remembered to find when a batch's pages landed.
const RECENT_TRANSFERS: usize = 4096;

/// One thing the stream engine did, on the host clock (seconds since the engine started).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamEvent {
    /// A page copied into a slot: the GPU span of the transfer submission that carried it, or
    /// the host time its completion was seen where that submission was not timed; when the
    /// transfer thread submitted it, and the compute value it waited for (its slot's last
    /// reader; 0 = none): a copy that starts late waited for the host or for that step.
    /// `ticket` is the load's place in copy order, `reader` the compute value of its own
    /// slot's (or page's) last reader when the engine issued it at `issued_s`: the submission
    /// may wait for more (`after_value`: the end of that reader's part, or what the GPU had
    /// finished where it went out with later copies).
    Load {
        model: u32,
        page: u32,
        slot: u32,
        start_s: f64,
        end_s: f64,
        submitted_s: f64,
        after_value: u64,
        ticket: u64,
        reader: u64,
        issued_s: f64,
    },
    /// A page left its slot: when the batch holding its last reader ended.
    Evict {
        model: u32,
        page: u32,
        slot: u32,
        at_s: f64,
    },
    /// A compute batch's GPU span, the part of it spent waiting for pages, its step count and
    /// the model most of its steps belong to (as labelled with
    /// [`super::StreamEngine::label_steps`]), and when the host submitted it: a start well
    /// after the previous batch's end, without a stall, is the host's. `last_value` is the
    /// compute value it signals at its end; `wait_ticket` the newest load it waited for (0 =
    /// none).
    Compute {
        model: Option<u32>,
        start_s: f64,
        end_s: f64,
        stall_s: f64,
        steps: u32,
        submitted_s: f64,
        last_value: u64,
        wait_ticket: u64,
    },
}

impl StreamEvent {
    /// When the event ends (a load's landing, a batch's end).
    pub fn end_s(&self) -> f64 {
        match *self {
            StreamEvent::Load { end_s, .. } | StreamEvent::Compute { end_s, .. } => end_s,
            StreamEvent::Evict { at_s, .. } => at_s,
        }
    }
}

/// A finished transfer submission: its ticket range and, when it was timed, its GPU span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransferDone {
    pub first_ticket: u64,
    pub last_ticket: u64,
    pub span: Option<Span>,
    /// The compute value the submission waited for (0 = none).
    pub compute_wait: u64,
    /// When the transfer thread submitted it (ns on the engine's clock).
    pub submitted_ns: f64,
}

/// A submitted compute batch, until it is resolved.
#[derive(Debug, Clone)]
pub(crate) struct BatchInfo {
    /// Its timestamp key (the first compute value it was opened for).
    pub key: u64,
    /// Its last compute value (what it signals).
    pub last: u64,
    /// Newest load it waits for (0 = none).
    pub wait: u64,
    /// When the CPU submitted it (ns since the engine started).
    pub submitted_ns: f64,
    /// Steps per model label, in recording order.
    pub models: Vec<(Option<u32>, u32)>,
    /// Whether it carries a timestamp pair.
    pub timed: bool,
}

impl BatchInfo {
    fn steps(&self) -> u32 {
        self.models.iter().map(|m| m.1).sum()
    }

    /// The label with the most steps (the first among equals).
    fn model(&self) -> Option<u32> {
        let steps_of =
            |m: Option<u32>| -> u32 { self.models.iter().filter(|x| x.0 == m).map(|x| x.1).sum() };
        let mut best = (None, 0);
        for &(m, _) in &self.models {
            let n = steps_of(m);
            if n > best.1 {
                best = (m, n);
            }
        }
        best.0
    }
}

/// A load the engine issued, until its copy is reported.
pub(crate) struct IssuedLoad {
    pub ticket: u64,
    pub model: u32,
    pub page: u32,
    pub slot: u32,
    /// Compute value of the last reader the copy must follow (0 = none).
    pub reader: u64,
    /// When the engine issued it (ns on the engine's clock).
    pub issued_ns: f64,
}

struct PendingEvict {
    model: u32,
    page: u32,
    slot: u32,
    /// Compute value of the page's last reader (0 = never read).
    after: u64,
}

/// Live GPU totals in seconds; `None` where the queue has no timestamps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct GpuTotals {
    pub transfer_busy_s: Option<f64>,
    /// Pages the timed copy submissions carried (what `transfer_busy_s` covers).
    pub transfer_timed_pages: u64,
    pub compute_busy_s: Option<f64>,
    pub compute_stall_s: Option<f64>,
}

/// See the module docs.
pub(crate) struct Journal {
    /// GPU timestamp clock minus the host clock, in ns (0 where it could not be measured).
    offset_ns: f64,
    compute_timed: bool,
    transfer_timed: bool,
    loads: VecDeque<IssuedLoad>,
    evicts: VecDeque<PendingEvict>,
    batches: VecDeque<BatchInfo>,
    /// Harvested compute spans not matched to a batch yet.
    compute_spans: Vec<Span>,
    transfers: VecDeque<TransferDone>,
    /// Every transfer ticket up to this one has completed and been reported.
    transfers_through: u64,
    /// (last value, end ns) of recently resolved timed batches, in order.
    recent: VecDeque<(u64, f64)>,
    /// Compute values up to this one are resolved, and the GPU end (ns) of the newest timed one.
    done_value: u64,
    done_end_ns: Option<f64>,
    meter: StallMeter,
    transfer_busy_ns: f64,
    transfer_timed_pages: u64,
    /// Copy submissions reported, and how many of them were timed.
    transfer_reports: u64,
    transfer_spans: u64,
    compute_busy_ns: f64,
    stall_ns: f64,
    events: VecDeque<StreamEvent>,
    dropped: u64,
}

impl Journal {
    pub fn new(offset_ns: Option<f64>, compute_timed: bool, transfer_timed: bool) -> Journal {
        Journal {
            offset_ns: offset_ns.unwrap_or(0.0),
            compute_timed,
            transfer_timed,
            loads: VecDeque::new(),
            evicts: VecDeque::new(),
            batches: VecDeque::new(),
            compute_spans: Vec::new(),
            transfers: VecDeque::new(),
            transfers_through: 0,
            recent: VecDeque::new(),
            done_value: 0,
            done_end_ns: None,
            meter: StallMeter::default(),
            transfer_busy_ns: 0.0,
            transfer_timed_pages: 0,
            transfer_reports: 0,
            transfer_spans: 0,
            compute_busy_ns: 0.0,
            stall_ns: 0.0,
            events: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Host seconds of a GPU timestamp.
    fn host_s(&self, gpu_ns: f64) -> f64 {
        ((gpu_ns - self.offset_ns) / 1e9).max(0.0)
    }

    fn push(&mut self, e: StreamEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back(e);
    }

    pub fn load_issued(&mut self, load: IssuedLoad) {
        self.loads.push_back(load);
    }

    pub fn evicted(&mut self, model: u32, page: u32, slot: u32, after: u64) {
        self.evicts.push_back(PendingEvict {
            model,
            page,
            slot,
            after,
        });
    }

    pub fn batch_submitted(&mut self, info: BatchInfo) {
        self.batches.push_back(info);
    }

    /// Finished transfer submissions, and the ticket every earlier one is reported up to.
    pub fn transfers_done(&mut self, done: Vec<TransferDone>, through: u64, now_ns: f64) {
        for d in done {
            self.transfer_reports += 1;
            if let Some(s) = d.span {
                self.transfer_spans += 1;
                self.transfer_busy_ns += (s.end_ns - s.start_ns).max(0.0);
                self.transfer_timed_pages += d.last_ticket.saturating_sub(d.first_ticket) + 1;
            }
            self.transfers.push_back(d);
        }
        self.transfers_through = self.transfers_through.max(through);
        // Loads whose submission has completed. Copies sharing a submission share its span; a
        // load whose submission was not timed is placed when its completion was seen.
        while let Some(l) = self.loads.front() {
            if l.ticket > self.transfers_through {
                break;
            }
            let sub = self.transfer_of(l.ticket);
            let (submitted_s, after_value) =
                sub.map_or((0.0, 0), |t| (t.submitted_ns / 1e9, t.compute_wait));
            let (start_s, end_s) = match sub.and_then(|t| t.span) {
                Some(s) => (self.host_s(s.start_ns), self.host_s(s.end_ns)),
                None => (now_ns / 1e9, now_ns / 1e9),
            };
            let e = StreamEvent::Load {
                model: l.model,
                page: l.page,
                slot: l.slot,
                start_s,
                end_s,
                submitted_s,
                after_value,
                ticket: l.ticket,
                reader: l.reader,
                issued_s: l.issued_ns / 1e9,
            };
            self.loads.pop_front();
            self.push(e);
        }
        while self.transfers.len() > RECENT_TRANSFERS {
            self.transfers.pop_front();
        }
    }

    /// Harvested compute spans (any order).
    pub fn compute_spans(&mut self, spans: Vec<Span>) {
        self.compute_spans.extend(spans);
    }

    /// When load `ticket` landed (GPU ns); `Some(None)` = known not to be timed or too old to
    /// matter; `None` = not reported yet.
    fn landed(&self, ticket: u64) -> Option<Option<f64>> {
        if ticket == 0 {
            return Some(None);
        }
        if ticket > self.transfers_through {
            return None;
        }
        Some(
            self.transfer_of(ticket)
                .and_then(|t| t.span)
                .map(|s| s.end_ns),
        )
    }

    /// The remembered submission that carried `ticket` (they finish in ticket order).
    fn transfer_of(&self, ticket: u64) -> Option<&TransferDone> {
        let i = self.transfers.partition_point(|t| t.last_ticket < ticket);
        self.transfers.get(i).filter(|t| t.first_ticket <= ticket)
    }

    /// Resolves every batch that has completed on the GPU (compute value `completed`) and whose
    /// pages' landing is known; `final_pass` resolves the rest as far as anything is known (the
    /// engine has stopped).
    pub fn resolve(&mut self, completed: u64, now_ns: f64, final_pass: bool) {
        while let Some(b) = self.batches.front() {
            if b.last > completed && !final_pass {
                break;
            }
            let span_at = if b.timed {
                self.compute_spans.iter().position(|s| s.key == b.key)
            } else {
                None
            };
            if b.timed && span_at.is_none() && !final_pass {
                // Completed but not harvested yet.
                break;
            }
            let landed = match self.landed(b.wait) {
                Some(l) => l,
                None if final_pass => None,
                None => break,
            };
            let Some(b) = self.batches.pop_front() else {
                break;
            };
            if let Some(i) = span_at {
                let span = self.compute_spans.swap_remove(i);
                let timing = BatchTiming {
                    span,
                    landed_ns: landed.unwrap_or(0.0),
                    submitted_ns: Some(b.submitted_ns + self.offset_ns),
                };
                let (busy, stall) = self.meter.add(&timing);
                self.compute_busy_ns += busy;
                self.stall_ns += stall;
                let e = StreamEvent::Compute {
                    model: b.model(),
                    start_s: self.host_s(span.start_ns),
                    end_s: self.host_s(span.end_ns),
                    stall_s: stall / 1e9,
                    steps: b.steps(),
                    submitted_s: b.submitted_ns / 1e9,
                    last_value: b.last,
                    wait_ticket: b.wait,
                };
                self.push(e);
                self.recent.push_back((b.last, span.end_ns));
                if self.recent.len() > RECENT_BATCHES {
                    self.recent.pop_front();
                }
                self.done_end_ns = Some(span.end_ns);
            }
            self.done_value = self.done_value.max(b.last);
        }
        // Evictions whose last reader is resolved: at the end of the batch that held it, or,
        // where that batch was not timed, at the newest timed end known.
        let mut keep = VecDeque::new();
        while let Some(e) = self.evicts.pop_front() {
            if e.after > self.done_value && !final_pass {
                keep.push_back(e);
                continue;
            }
            let i = self.recent.partition_point(|&(last, _)| last < e.after);
            let at_ns = self.recent.get(i).map(|r| r.1).or(self.done_end_ns);
            let at_s = at_ns.map_or(now_ns / 1e9, |ns| self.host_s(ns));
            self.push(StreamEvent::Evict {
                model: e.model,
                page: e.page,
                slot: e.slot,
                at_s,
            });
        }
        self.evicts = keep;
        if final_pass {
            self.compute_spans.clear();
        }
    }

    pub fn totals(&self) -> GpuTotals {
        let s = |timed: bool, ns: f64| timed.then_some(ns / 1e9);
        // Where the transfer queue could not be timed at all, its busy time is unknown, not 0.
        let transfers_timed =
            self.transfer_timed && (self.transfer_spans > 0 || self.transfer_reports == 0);
        GpuTotals {
            transfer_busy_s: s(transfers_timed, self.transfer_busy_ns),
            transfer_timed_pages: self.transfer_timed_pages,
            compute_busy_s: s(self.compute_timed, self.compute_busy_ns),
            compute_stall_s: s(self.compute_timed, self.stall_ns),
        }
    }

    /// Takes the events logged so far and how many older ones were dropped since the last take.
    pub fn take_events(&mut self) -> (Vec<StreamEvent>, u64) {
        let dropped = std::mem::take(&mut self.dropped);
        (self.events.drain(..).collect(), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(key: u64, a: f64, b: f64) -> Span {
        Span {
            key,
            start_ns: a,
            end_ns: b,
        }
    }

    fn batch(key: u64, last: u64, wait: u64, submitted: f64, model: u32) -> BatchInfo {
        BatchInfo {
            key,
            last,
            wait,
            submitted_ns: submitted,
            models: vec![(Some(model), (last - key + 1) as u32)],
            timed: true,
        }
    }

    #[test]
    fn resolves_in_order_once_the_pages_landing_is_known() {
        let mut j = Journal::new(Some(0.0), true, true);
        j.load_issued(IssuedLoad {
            ticket: 1,
            model: 0,
            page: 3,
            slot: 0,
            reader: 5,
            issued_ns: 2.0,
        });
        j.batch_submitted(batch(1, 2, 1, 0.0, 0));
        j.compute_spans(vec![span(1, 50.0, 60.0)]);
        // The batch completed, but its page's copy is not reported yet: nothing resolves.
        j.resolve(2, 70.0, false);
        assert_eq!(j.totals().compute_busy_s, Some(0.0));
        j.transfers_done(
            vec![TransferDone {
                first_ticket: 1,
                last_ticket: 1,
                span: Some(span(1, 10.0, 50.0)),
                compute_wait: 7,
                submitted_ns: 4.0,
            }],
            1,
            70.0,
        );
        j.evicted(0, 3, 0, 2);
        j.resolve(2, 70.0, false);
        let t = j.totals();
        assert_eq!(t.transfer_busy_s, Some(40e-9));
        assert_eq!(t.transfer_timed_pages, 1);
        assert_eq!(t.compute_busy_s, Some(10e-9));
        // Submitted at 0, pages landed at 50: 50 ns of stall.
        assert_eq!(t.compute_stall_s, Some(50e-9));
        let (events, dropped) = j.take_events();
        assert_eq!(dropped, 0);
        assert_eq!(events.len(), 3);
        assert!(events.contains(&StreamEvent::Load {
            model: 0,
            page: 3,
            slot: 0,
            start_s: 10e-9,
            end_s: 50e-9,
            submitted_s: 4e-9,
            after_value: 7,
            ticket: 1,
            reader: 5,
            issued_s: 2e-9,
        }));
        // The batch with the value it signals and the load it waited for.
        assert!(events.iter().any(|e| matches!(
            e,
            StreamEvent::Compute {
                last_value: 2,
                steps: 2,
                wait_ticket: 1,
                ..
            }
        )));
        // Evicted when its last reader's batch ended.
        assert!(events.contains(&StreamEvent::Evict {
            model: 0,
            page: 3,
            slot: 0,
            at_s: 60e-9
        }));
    }

    #[test]
    fn copy_time_counts_only_the_pages_of_timed_submissions() {
        let mut j = Journal::new(Some(0.0), true, true);
        j.transfers_done(
            vec![
                TransferDone {
                    first_ticket: 1,
                    last_ticket: 3,
                    span: Some(span(3, 0.0, 60.0)),
                    compute_wait: 0,
                    submitted_ns: 0.0,
                },
                TransferDone {
                    first_ticket: 4,
                    last_ticket: 5,
                    span: None,
                    compute_wait: 0,
                    submitted_ns: 0.0,
                },
            ],
            5,
            70.0,
        );
        let t = j.totals();
        assert_eq!(t.transfer_busy_s, Some(60e-9));
        assert_eq!(t.transfer_timed_pages, 3);
    }

    #[test]
    fn an_untimed_batch_advances_and_the_ring_is_bounded() {
        let mut j = Journal::new(Some(0.0), true, true);
        let mut b = batch(1, 1, 0, 0.0, 0);
        b.timed = false;
        j.batch_submitted(b);
        j.batch_submitted(batch(2, 2, 0, 0.0, 1));
        j.compute_spans(vec![span(2, 5.0, 6.0)]);
        j.resolve(2, 10.0, false);
        assert_eq!(j.done_value, 2);
        for i in 0..(MAX_EVENTS as u64 + 5) {
            j.evicted(0, i as u32, 0, 0);
        }
        j.resolve(2, 10.0, false);
        let (events, dropped) = j.take_events();
        assert_eq!(events.len(), MAX_EVENTS);
        assert_eq!(dropped, 6);
    }

    #[test]
    fn the_label_with_most_steps_names_the_batch() {
        let b = BatchInfo {
            key: 1,
            last: 6,
            wait: 0,
            submitted_ns: 0.0,
            models: vec![(Some(0), 2), (Some(1), 3), (Some(0), 2)],
            timed: true,
        };
        assert_eq!(b.model(), Some(0));
        assert_eq!(b.steps(), 7);
    }
}
