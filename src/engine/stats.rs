//! What an engine reports about itself: request and model-run latencies (bounded sample
//! windows, so hours of serving take constant memory), streaming counters, GPU time, memory
//! against the cap, plan changes by cause, and reloads. A snapshot is a copy taken by the
//! worker between requests; reading it never touches residency. Every figure is also sent to
//! the `metrics` facade under the names in [`names`], for whatever recorder the application
//! installed (the service installs a Prometheus exporter).
use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// Metric names sent to the `metrics` facade.
pub mod names {
    pub const REQUESTS: &str = "texstream_requests_total";
    pub const REQUEST_LATENCY: &str = "texstream_request_latency_seconds";
    pub const MODEL_RUNS: &str = "texstream_model_runs_total";
    pub const MODEL_LATENCY: &str = "texstream_model_latency_seconds";
    pub const QUEUE_DEPTH: &str = "texstream_queue_depth";
    pub const BYTES_STREAMED: &str = "texstream_bytes_streamed_total";
    pub const PAGES_LOADED: &str = "texstream_pages_loaded_total";
    pub const EVICTIONS: &str = "texstream_evictions_total";
    // Seconds summed over finished sessions, sent as gauges (the facade's counters are
    // integers), so without the `_total` that Prometheus reserves for counters.
    pub const STALL: &str = "texstream_gpu_stall_seconds";
    pub const TRANSFER_BUSY: &str = "texstream_transfer_busy_seconds";
    pub const COMPUTE_BUSY: &str = "texstream_compute_busy_seconds";
    pub const RESIDENT_BYTES: &str = "texstream_resident_bytes";
    pub const CAP_BYTES: &str = "texstream_cap_bytes";
    pub const DEVICE_BYTES: &str = "texstream_device_bytes";
    pub const PEAK_DEVICE_BYTES: &str = "texstream_peak_device_bytes";
    pub const REPLANS: &str = "texstream_replans_total";
    pub const RELOADS: &str = "texstream_reloads_total";
}

/// Latency samples kept per pipeline or model: percentiles cover the most recent ones.
const WINDOW: usize = 10_000;

/// A bounded window of latency samples and running totals.
#[derive(Debug, Clone, Default)]
pub struct LatencyWindow {
    samples: VecDeque<f64>,
    count: u64,
    sum_s: f64,
}

impl LatencyWindow {
    pub fn record(&mut self, s: f64) {
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
        self.count += 1;
        self.sum_s += s;
    }

    pub fn summary(&self, name: &str) -> Latency {
        let mut v: Vec<f64> = self.samples.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        Latency {
            name: name.into(),
            count: self.count,
            mean_s: if self.count > 0 {
                self.sum_s / self.count as f64
            } else {
                0.0
            },
            p50_s: percentile(&v, 50.0),
            p95_s: percentile(&v, 95.0),
            p99_s: percentile(&v, 99.0),
        }
    }
}

/// Nearest-rank percentile of sorted samples (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency of one pipeline or model over its recent window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub name: String,
    pub count: u64,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p95_s: f64,
    pub p99_s: f64,
}

/// Why the plan changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReplanCounts {
    /// The plan's look-ahead ran out (not a misprediction).
    pub horizon: u64,
    /// A request the plan did not predict arrived (another pipeline than planned).
    pub unpredicted_request: u64,
    /// A fan-out had another count than planned.
    pub fan_out: u64,
    /// The observed request mix moved away from the planned one.
    pub mix: u64,
    /// Step costs were calibrated on measured runs.
    pub calibration: u64,
    /// Re-plans (of those above) that took a plan the planner thread had made ahead, off the
    /// request path.
    pub prepared: u64,
}

impl ReplanCounts {
    /// Adds another session's counts.
    pub fn add(&mut self, o: &ReplanCounts) {
        self.horizon += o.horizon;
        self.unpredicted_request += o.unpredicted_request;
        self.fan_out += o.fan_out;
        self.mix += o.mix;
        self.calibration += o.calibration;
        self.prepared += o.prepared;
    }

    pub fn total(&self) -> u64 {
        self.horizon + self.unpredicted_request + self.fan_out + self.mix + self.calibration
    }
}

/// Where the wall time of the model runs went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostPhases {
    /// Packing inputs and copying them to the device (waits for the copy).
    pub upload_s: f64,
    /// Re-planning on the request's path before a run that did not fit the plan (a count
    /// other than the planned one); not part of the model runs' time.
    pub replan_s: f64,
    /// Recording and submitting the model's steps (and the page loads issued with them).
    pub record_s: f64,
    /// The CPU time the recording thread used in `record_s` (user and system): far below
    /// `record_s`, the recording waited (a lock, a blocking call).
    pub record_cpu_s: f64,
    /// Of `record_cpu_s`, the time in the kernel (system calls into the driver, page faults).
    pub record_sys_s: f64,
    /// Minor page faults of the recording thread during `record_s` (fresh memory touched).
    pub record_faults: u64,
    /// Times the recording thread gave up the CPU to wait during `record_s`.
    pub record_waits: u64,
    /// Times the scheduler took the CPU from it during `record_s`.
    pub record_preempted: u64,
    /// Waiting for the model's last step on the GPU: compute, plus any wait for pages.
    pub wait_s: f64,
    /// Copying outputs back and unpacking them.
    pub download_s: f64,
}

/// Where the stream engine's host time went (most of [`HostPhases::record_s`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RecordParts {
    /// Issuing page loads and evictions.
    pub loads_s: f64,
    /// Steps' bookkeeping: page-table maps, residency, starting batches.
    pub steps_s: f64,
    /// Recording the kernels' commands.
    pub kernels_s: f64,
    /// Of `kernels_s`, the driver calls that emitted recorded steps' commands again.
    pub kernels_driver_s: f64,
    /// Ending, submitting and retiring compute batches.
    pub submit_s: f64,
}

impl From<vk_backend::HostTime> for RecordParts {
    fn from(h: vk_backend::HostTime) -> Self {
        RecordParts {
            loads_s: h.loads.as_secs_f64(),
            steps_s: h.steps.as_secs_f64(),
            kernels_s: h.recording.as_secs_f64(),
            kernels_driver_s: h.emitting.as_secs_f64(),
            submit_s: h.submitting.as_secs_f64(),
        }
    }
}

/// `VK_EXT_memory_budget` reading of one device-local heap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeapReading {
    pub heap: u32,
    pub budget_bytes: u64,
    pub usage_bytes: u64,
}

/// The outcome of the last reload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadOutcome {
    pub ok: bool,
    /// What was loaded, or why not (with the file, line and column where there is one).
    pub message: String,
    /// Seconds since the Unix epoch.
    pub at_unix_s: f64,
}

/// A snapshot of an engine's state and history.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EngineStats {
    pub workload: String,
    pub policy: String,
    /// The construction the current plan was built by (`planned` weighs several).
    pub construction: String,
    pub device: String,
    pub cap_bytes: u64,
    pub min_cap_bytes: u64,
    pub slots: u32,
    /// Compute steps per submission.
    pub steps_per_batch: u32,
    /// Least steps per part of a submission (the part a copy's wait covers).
    pub steps_per_part: u32,
    /// Recorded steps submitted as command buffers of their own (`StreamTuning::step_buffers`).
    pub step_buffers: bool,
    /// Most compute submissions in flight before the host waits (`StreamTuning::host_lead`).
    pub host_lead: Option<u32>,
    /// Times the host waited for the GPU to keep to `host_lead`.
    pub host_lead_waits: u64,
    /// Where the engine's threads run beside the device's interrupts
    /// (`vk_backend::placement::HostPlacement::describe`); empty where the device has none.
    pub thread_placement: String,
    pub page_bytes: u64,
    /// Seconds one page takes to stream in the plans' transfer model: the workload's guess,
    /// then the measured time once the engine calibrated.
    pub page_transfer_s: f64,
    pub device_bytes: u64,
    pub peak_device_bytes: u64,
    pub vk_memory_budget: Option<Vec<HeapReading>>,
    /// Requests answered (with outputs), failed, refused because the queue was full.
    pub requests_ok: u64,
    pub requests_failed: u64,
    pub requests_busy: u64,
    pub queue_depth: usize,
    pub pipelines: Vec<Latency>,
    pub models: Vec<Latency>,
    pub bytes_streamed: u64,
    pub pages_loaded: u64,
    pub evictions: u64,
    /// GPU time from timestamps, summed over finished streaming sessions (a session ends at a
    /// reload, at shutdown, or at [`crate::Engine::stats_now`]).
    pub stall_s: f64,
    pub transfer_busy_s: f64,
    pub compute_busy_s: f64,
    /// Pages the staging ring holds, the time spent reading pages into it (summed over the I/O
    /// threads) and the time its dispatcher waited for a free page (every page still waiting
    /// for its copy).
    pub staging_pages: u32,
    /// Compute and copy submissions (copies: of ended streaming sessions only).
    pub compute_submits: u64,
    /// Parts of those submissions, each with its own wait and signal.
    pub compute_parts: u64,
    /// Command pools the device created for recorders because no reset one was free.
    pub command_pools_created: u64,
    /// Part boundaries a copy forced (`vk_backend::StreamStats::forced_cuts`).
    pub forced_cuts: u64,
    pub transfer_submits: u64,
    /// The stream engine's host time by part.
    pub record_parts: RecordParts,
    /// Bytes of the host mirror every load copies from instead (0: none), and the time it took
    /// to fill. The fill runs behind the first requests: while it still runs, this is its time
    /// so far.
    pub host_mirror_bytes: u64,
    pub mirror_fill_s: f64,
    /// The part of `mirror_fill_s` after the stream engine opened (behind the first requests).
    pub mirror_fill_behind_s: f64,
    /// Wall-clock seconds one page's copy from the mirror took when the engine started.
    pub copy_probe_s: Option<f64>,
    /// Seconds a wait between the copy and the compute queue took when the engine started.
    pub handoff_probe_s: Option<f64>,
    pub page_read_s: f64,
    pub staging_wait_s: f64,
    /// The transfer thread's time holding copies until their slots' last readers were
    /// submitted (their compute batch still being recorded).
    pub reader_submit_wait_s: f64,
    pub replans: ReplanCounts,
    /// Loads skipped at re-plans because the page was already in place.
    pub kept_pages: u64,
    /// Of the requests since calibration: their wall time, the scheduler's prediction and
    /// lower bound for the same work, and the part spent in model runs.
    pub measured_s: f64,
    pub predicted_s: f64,
    pub lower_bound_s: f64,
    pub model_s: f64,
    pub model_phases: HostPhases,
    /// CPU time of the built-in steps, by step label.
    pub cpu_steps: BTreeMap<String, f64>,
    /// Whether step costs were calibrated (after the first requests).
    pub calibrated: bool,
    /// Wall time of the requests before calibration.
    pub profiling_s: f64,
    /// Bytes of each model's weights resident now.
    pub resident_bytes: Vec<(String, u64)>,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub last_reload: Option<ReloadOutcome>,
    /// Where the engine started cold (`StreamTuning::cold_read_bytes_per_s`): its first request
    /// alone as planned from disk.
    pub cold_first_request: Option<FirstRequestEstimate>,
}

/// A cold start's first request alone as the scheduler plans it: every page it needs read from
/// disk (one read after another, in the plan's first-load order) before its first copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct FirstRequestEstimate {
    pub predicted_s: f64,
    pub lower_bound_s: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl EngineStats {
    /// Model-run time over the plan's prediction: both cover the model runs only (the plan
    /// does not model CPU steps), so this is the like-for-like check of the prediction.
    pub fn model_over_predicted(&self) -> f64 {
        ratio(self.model_s, self.predicted_s)
    }
    pub fn measured_over_lower_bound(&self) -> f64 {
        ratio(self.measured_s, self.lower_bound_s)
    }
    pub fn model_over_lower_bound(&self) -> f64 {
        ratio(self.model_s, self.lower_bound_s)
    }

    /// The human summary table.
    pub fn table(&self) -> String {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let ms = |s: f64| s * 1e3;
        let r = &self.replans;
        let mut o = String::new();
        let mut submission_notes = String::new();
        if self.step_buffers {
            submission_notes += ", step buffers";
        }
        match self.host_lead {
            None => {}
            Some(n) => {
                let batches = if n == 1 { "batch" } else { "batches" };
                submission_notes += &format!(
                    ", the host at most {n} {batches} ahead, held back {} times",
                    self.host_lead_waits
                )
            }
        }
        o += &format!(
            "workload {}  policy {} ({})  requests {}  slots {}  steps per batch {} (parts of {}{})  re-plans {} (look-ahead {}, \
             unpredicted requests {}, fan-out counts {}, mix {}, calibration {}; {} made ahead)\n",
            self.workload,
            self.policy,
            self.construction,
            self.requests_ok,
            self.slots,
            self.steps_per_batch,
            self.steps_per_part,
            submission_notes,
            r.total(),
            r.horizon,
            r.unpredicted_request,
            r.fan_out,
            r.mix,
            r.calibration,
            r.prepared
        );
        if !self.thread_placement.is_empty() {
            o += &format!("host threads: {}\n", self.thread_placement);
        }
        o += &format!(
            "{:<24} {:>8} {:>10} {:>10} {:>10}\n",
            "latency", "runs", "p50 ms", "p95 ms", "p99 ms"
        );
        for (kind, rows) in [("model", &self.models), ("pipeline", &self.pipelines)] {
            for l in rows {
                o += &format!(
                    "{:<24} {:>8} {:>10.3} {:>10.3} {:>10.3}\n",
                    format!("{kind} {}", l.name),
                    l.count,
                    ms(l.p50_s),
                    ms(l.p95_s),
                    ms(l.p99_s)
                );
            }
        }
        o += &format!(
            "bytes streamed      {:.2} MiB ({} pages), evictions {}, kept in place at re-plans {}; plans stream a page in {:.1} µs\n",
            mib(self.bytes_streamed),
            self.pages_loaded,
            self.evictions,
            self.kept_pages,
            self.page_transfer_s * 1e6
        );
        o += &format!(
            "GPU stall {:.3} ms, transfer busy {:.3} ms, compute busy {:.3} ms (GPU timestamps); {} compute submissions in {} parts ({} of the cuts forced by a copy) and {} copy submissions\n",
            ms(self.stall_s),
            ms(self.transfer_busy_s),
            ms(self.compute_busy_s),
            self.compute_submits,
            self.compute_parts,
            self.forced_cuts,
            self.transfer_submits
        );
        o += &if self.host_mirror_bytes > 0 {
            format!(
                "host mirror {:.2} MiB (every load copies from it), filled in {:.3} ms ({:.3} ms of it behind the requests); page reads {:.3} ms (summed over I/O threads); copies held for their readers' submission {:.3} ms; a page's copy probed at {}, a hand-off between the queues at {}\n",
                mib(self.host_mirror_bytes),
                ms(self.mirror_fill_s),
                ms(self.mirror_fill_behind_s),
                ms(self.page_read_s),
                ms(self.reader_submit_wait_s),
                self.copy_probe_s
                    .map_or("-".into(), |t| format!("{:.1} µs", t * 1e6)),
                self.handoff_probe_s
                    .map_or("-".into(), |t| format!("{:.1} µs", t * 1e6))
            )
        } else {
            format!(
                "staging ring {} pages: page reads {:.3} ms (summed over I/O threads), waits for a free staging page {:.3} ms; a hand-off between the queues at {}\n",
                self.staging_pages,
                ms(self.page_read_s),
                ms(self.staging_wait_s),
                self.handoff_probe_s
                    .map_or("-".into(), |t| format!("{:.1} µs", t * 1e6))
            )
        };
        o += &format!(
            "peak device bytes   {} of cap {} ({:.2} / {:.2} MiB; minimum feasible {:.2} MiB)\n",
            self.peak_device_bytes,
            self.cap_bytes,
            mib(self.peak_device_bytes),
            mib(self.cap_bytes),
            mib(self.min_cap_bytes)
        );
        if let Some(b) = &self.vk_memory_budget {
            for h in b {
                o += &format!(
                    "VK_EXT_memory_budget heap {}: usage {:.2} MiB of budget {:.2} MiB\n",
                    h.heap,
                    mib(h.usage_bytes),
                    mib(h.budget_bytes)
                );
            }
        }
        if self.calibrated {
            o += &format!(
                "profiling requests {:.3} ms (step costs calibrated on them); the rest:\n",
                ms(self.profiling_s)
            );
        } else {
            o += "step costs uncalibrated: predicted and LB use the compile-time estimates\n";
        }
        o += &format!(
            "measured {:.3} ms (model runs {:.3} ms, CPU steps {:.3} ms), predicted {:.3} ms, LB {:.3} ms\n",
            ms(self.measured_s),
            ms(self.model_s),
            ms((self.measured_s - self.model_s).max(0.0)),
            ms(self.predicted_s),
            ms(self.lower_bound_s),
        );
        let p = &self.model_phases;
        o += &format!(
            "model runs by phase: upload {:.3} ms, record+submit {:.3} ms (thread CPU {:.3} ms, {:.3} ms of it in the kernel, {} page faults, {} waits, {} preemptions), GPU wait {:.3} ms, readback {:.3} ms; re-planning before them {:.3} ms\n",
            ms(p.upload_s),
            ms(p.record_s),
            ms(p.record_cpu_s),
            ms(p.record_sys_s),
            p.record_faults,
            p.record_waits,
            p.record_preempted,
            ms(p.wait_s),
            ms(p.download_s),
            ms(p.replan_s)
        );
        let r = &self.record_parts;
        o += &format!(
            "stream engine host time (every request): loads {:.3} ms, step bookkeeping {:.3} ms, kernel recording {:.3} ms ({:.3} ms of it in the driver's calls), submitting {:.3} ms; command pools created {}\n",
            ms(r.loads_s),
            ms(r.steps_s),
            ms(r.kernels_s),
            ms(r.kernels_driver_s),
            ms(r.submit_s),
            self.command_pools_created
        );
        if !self.cpu_steps.is_empty() {
            let steps: Vec<String> = self
                .cpu_steps
                .iter()
                .map(|(k, v)| format!("{k} {:.3} ms", ms(*v)))
                .collect();
            o += &format!("CPU steps: {}\n", steps.join(", "));
        }
        o += &format!(
            "model runs/predicted {:.2}, model runs/LB {:.2}; whole requests/LB {:.2}\n",
            self.model_over_predicted(),
            self.model_over_lower_bound(),
            self.measured_over_lower_bound()
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn the_window_is_bounded_but_counts_everything() {
        let mut w = LatencyWindow::default();
        for i in 0..(WINDOW + 500) {
            w.record(i as f64);
        }
        let s = w.summary("x");
        assert_eq!(s.count, (WINDOW + 500) as u64);
        assert_eq!(w.samples.len(), WINDOW);
        assert_eq!(s.p50_s, (500 + WINDOW / 2 - 1) as f64);
    }
}
