//! Run metrics: a small in-process `metrics` recorder (counters, gauges, histograms kept in
//! memory) and the run summary built from it — the CLI table and the `--metrics-json` document.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ::metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use serde::Serialize;

/// Metric names used by the runtime.
pub mod names {
    pub const MODEL_LATENCY: &str = "texstream_model_latency_seconds";
    pub const PIPELINE_LATENCY: &str = "texstream_pipeline_latency_seconds";
    pub const BYTES_STREAMED: &str = "texstream_bytes_streamed_total";
    pub const PAGES_LOADED: &str = "texstream_pages_loaded_total";
    pub const EVICTIONS: &str = "texstream_evictions_total";
    pub const STALL: &str = "texstream_gpu_stall_seconds";
    pub const TRANSFER_BUSY: &str = "texstream_transfer_busy_seconds";
    pub const COMPUTE_BUSY: &str = "texstream_compute_busy_seconds";
    pub const PEAK_DEVICE_BYTES: &str = "texstream_peak_device_bytes";
    pub const CAP_BYTES: &str = "texstream_cap_bytes";
}

#[derive(Default)]
struct Hist(Mutex<Vec<f64>>);

impl HistogramFn for Hist {
    fn record(&self, value: f64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(value);
    }
}

/// Keeps every metric in memory; read it back after the run.
#[derive(Default)]
pub struct MemoryRecorder {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Hist>>>,
}

/// `name{k=v,...}`, labels in key order.
fn key_string(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    if labels.is_empty() {
        return key.name().to_string();
    }
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

fn entry<T: Default>(m: &Mutex<BTreeMap<String, Arc<T>>>, key: &Key) -> Arc<T> {
    m.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key_string(key))
        .or_default()
        .clone()
}

impl Recorder for MemoryRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(entry(&self.counters, key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(entry(&self.gauges, key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(entry(&self.histograms, key))
    }
}

impl MemoryRecorder {
    /// A counter's value (`name` or `name{k=v}`), 0 when never touched.
    pub fn counter(&self, name: &str) -> u64 {
        let m = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        m.get(name).map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// A gauge's value, 0.0 when never set.
    pub fn gauge(&self, name: &str) -> f64 {
        let m = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        m.get(name)
            .map_or(0.0, |g| f64::from_bits(g.load(Ordering::Relaxed)))
    }
    /// Every histogram whose key starts with `name`, with its samples.
    pub fn histograms(&self, name: &str) -> Vec<(String, Vec<f64>)> {
        let m = self.histograms.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
            .map(|(k, h)| {
                (
                    k.clone(),
                    h.0.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                )
            })
            .collect()
    }
}

/// Nearest-rank percentile (`p` in 0..=100) of unsorted samples; 0 for none.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Latency of one model or pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub name: String,
    pub count: usize,
    pub p50_s: f64,
    pub p95_s: f64,
}

fn latencies(rec: &MemoryRecorder, metric: &str, label: &str) -> Vec<Latency> {
    rec.histograms(metric)
        .into_iter()
        .map(|(k, v)| {
            let name = k
                .split_once(&format!("{label}="))
                .map(|(_, r)| r.trim_end_matches('}').split(',').next().unwrap_or(r))
                .unwrap_or(&k)
                .to_string();
            Latency {
                name,
                count: v.len(),
                p50_s: percentile(&v, 50.0),
                p95_s: percentile(&v, 95.0),
            }
        })
        .collect()
}

/// `VK_EXT_memory_budget` reading of one device-local heap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeapReading {
    pub heap: u32,
    pub budget_bytes: u64,
    pub usage_bytes: u64,
}

/// Everything `texstream run` reports about one policy's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub workload: String,
    pub policy: String,
    pub iterations: u32,
    pub cap_bytes: u64,
    pub min_cap_bytes: u64,
    pub peak_device_bytes: u64,
    pub slots: u32,
    pub bytes_streamed: u64,
    pub pages_loaded: u64,
    pub evictions: u64,
    pub replans: u32,
    pub stall_s: f64,
    pub transfer_busy_s: f64,
    pub compute_busy_s: f64,
    pub measured_s: f64,
    pub predicted_s: f64,
    pub lower_bound_s: f64,
    pub measured_over_predicted: f64,
    pub measured_over_lower_bound: f64,
    pub models: Vec<Latency>,
    pub pipelines: Vec<Latency>,
    /// Our counters against the driver's, where the extension exists.
    pub vk_memory_budget: Option<Vec<HeapReading>>,
    /// Whether `predicted_s`/`lower_bound_s` use step costs calibrated on a profiling frame; then
    /// `measured_s` and `model_s` cover the frames after it.
    pub calibrated: bool,
    /// Wall time of the profiling frames when calibrated (the first, or the first two when
    /// there are three or more; costs come from the last of them).
    pub profiling_frame_s: f64,
    /// Part of `measured_s` spent in model runs (upload, GPU work, download); the rest is the
    /// pipeline's CPU steps, which the scheduler does not model.
    pub model_s: f64,
    pub model_over_predicted: f64,
    pub model_over_lower_bound: f64,
    /// Loads skipped at re-plans because the page was already in place.
    pub kept_pages: u64,
    /// `model_s` by phase.
    pub model_phases: HostPhases,
    /// The rest of `measured_s` by OCR stage (OCR pipelines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_stages: Option<CpuStages>,
}

/// Where the wall time of the model runs went (the frames after the profiling ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostPhases {
    /// Packing inputs and copying them to the device (waits for the copy).
    pub upload_s: f64,
    /// Recording and submitting the model's steps (and the page loads issued with them).
    pub record_s: f64,
    /// Waiting for the model's last step on the GPU: compute, plus any wait for pages.
    pub wait_s: f64,
    /// Copying outputs back and unpacking them.
    pub download_s: f64,
}

/// Where an OCR pipeline's CPU steps went (the frames after the profiling ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuStages {
    /// Bounds resize, padding and normalization of the frame.
    pub preprocess_s: f64,
    /// Resizing the frame to the detector's input and its probability map back.
    pub det_resize_s: f64,
    /// DB box extraction and sorting.
    pub boxes_s: f64,
    /// Rotated crops.
    pub crops_s: f64,
    /// Classifier pre- and postprocessing.
    pub cls_s: f64,
    /// Recognizer preprocessing.
    pub rec_pre_s: f64,
    /// CTC decoding.
    pub ctc_s: f64,
}

impl CpuStages {
    /// Adds one frame's stage times.
    pub fn add(&mut self, t: &crate::ops::OcrStageTimes) {
        self.preprocess_s += t.preprocess.as_secs_f64();
        self.boxes_s += t.boxes.as_secs_f64();
        self.crops_s += t.crops.as_secs_f64();
        self.cls_s += t.cls.as_secs_f64();
        self.rec_pre_s += t.rec_pre.as_secs_f64();
        self.ctc_s += t.ctc.as_secs_f64();
    }
}

/// Numbers a run hands to [`RunSummary::build`] besides the recorder.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub workload: String,
    pub policy: String,
    pub iterations: u32,
    pub cap_bytes: u64,
    pub min_cap_bytes: u64,
    pub slots: u32,
    pub replans: u32,
    pub measured_s: f64,
    pub predicted_s: f64,
    pub lower_bound_s: f64,
    pub vk_memory_budget: Option<Vec<HeapReading>>,
    pub calibrated: bool,
    pub profiling_frame_s: f64,
    pub model_s: f64,
    pub kept_pages: u64,
    pub phases: HostPhases,
    pub cpu_stages: Option<CpuStages>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl RunSummary {
    pub fn build(rec: &MemoryRecorder, f: RunFacts) -> RunSummary {
        RunSummary {
            models: latencies(rec, names::MODEL_LATENCY, "model"),
            pipelines: latencies(rec, names::PIPELINE_LATENCY, "pipeline"),
            peak_device_bytes: rec.gauge(names::PEAK_DEVICE_BYTES) as u64,
            bytes_streamed: rec.counter(names::BYTES_STREAMED),
            pages_loaded: rec.counter(names::PAGES_LOADED),
            evictions: rec.counter(names::EVICTIONS),
            stall_s: rec.gauge(names::STALL),
            transfer_busy_s: rec.gauge(names::TRANSFER_BUSY),
            compute_busy_s: rec.gauge(names::COMPUTE_BUSY),
            measured_over_predicted: ratio(f.measured_s, f.predicted_s),
            measured_over_lower_bound: ratio(f.measured_s, f.lower_bound_s),
            model_over_predicted: ratio(f.model_s, f.predicted_s),
            model_over_lower_bound: ratio(f.model_s, f.lower_bound_s),
            calibrated: f.calibrated,
            profiling_frame_s: f.profiling_frame_s,
            model_s: f.model_s,
            kept_pages: f.kept_pages,
            model_phases: f.phases,
            cpu_stages: f.cpu_stages,
            workload: f.workload,
            policy: f.policy,
            iterations: f.iterations,
            cap_bytes: f.cap_bytes,
            min_cap_bytes: f.min_cap_bytes,
            slots: f.slots,
            replans: f.replans,
            measured_s: f.measured_s,
            predicted_s: f.predicted_s,
            lower_bound_s: f.lower_bound_s,
            vk_memory_budget: f.vk_memory_budget,
        }
    }

    /// The human summary table.
    pub fn table(&self) -> String {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let ms = |s: f64| s * 1e3;
        let mut o = String::new();
        o += &format!(
            "workload {}  policy {}  iterations {}  slots {}  re-plans {}\n",
            self.workload, self.policy, self.iterations, self.slots, self.replans
        );
        o += &format!(
            "{:<24} {:>8} {:>10} {:>10}\n",
            "latency", "runs", "p50 ms", "p95 ms"
        );
        for (kind, rows) in [("model", &self.models), ("pipeline", &self.pipelines)] {
            for l in rows {
                o += &format!(
                    "{:<24} {:>8} {:>10.3} {:>10.3}\n",
                    format!("{kind} {}", l.name),
                    l.count,
                    ms(l.p50_s),
                    ms(l.p95_s)
                );
            }
        }
        o += &format!(
            "bytes streamed      {:.2} MiB ({} pages), evictions {}, kept in place at re-plans {}\n",
            mib(self.bytes_streamed),
            self.pages_loaded,
            self.evictions,
            self.kept_pages
        );
        o += &format!(
            "GPU stall {:.3} ms, transfer busy {:.3} ms, compute busy {:.3} ms (GPU timestamps, every frame)\n",
            ms(self.stall_s),
            ms(self.transfer_busy_s),
            ms(self.compute_busy_s)
        );
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
                "profiling frame(s) {:.3} ms (step costs calibrated on the last); the rest:\n",
                ms(self.profiling_frame_s)
            );
        } else {
            o += "step costs uncalibrated (one frame): predicted and LB use the compile-time estimates\n";
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
            "model runs by phase: upload {:.3} ms, record+submit {:.3} ms, GPU wait {:.3} ms, readback {:.3} ms\n",
            ms(p.upload_s),
            ms(p.record_s),
            ms(p.wait_s),
            ms(p.download_s)
        );
        if let Some(c) = &self.cpu_stages {
            o += &format!(
                "CPU steps by stage: preprocess {:.3} ms, detector resizes {:.3} ms, boxes {:.3} ms, crops {:.3} ms, classifier pre/post {:.3} ms, recognizer pre {:.3} ms, CTC {:.3} ms\n",
                ms(c.preprocess_s),
                ms(c.det_resize_s),
                ms(c.boxes_s),
                ms(c.crops_s),
                ms(c.cls_s),
                ms(c.rec_pre_s),
                ms(c.ctc_s)
            );
        }
        o += &format!(
            "measured/predicted {:.2}, measured/LB {:.2}; model runs/predicted {:.2}, model runs/LB {:.2}\n",
            self.measured_over_predicted,
            self.measured_over_lower_bound,
            self.model_over_predicted,
            self.model_over_lower_bound
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_keeps_counters_and_histograms_by_label() {
        let rec = MemoryRecorder::default();
        ::metrics::with_local_recorder(&rec, || {
            ::metrics::counter!(names::BYTES_STREAMED).increment(5);
            ::metrics::counter!(names::BYTES_STREAMED).increment(7);
            ::metrics::gauge!(names::STALL).set(0.25);
            for v in [3.0, 1.0, 2.0, 4.0] {
                ::metrics::histogram!(names::MODEL_LATENCY, "model" => "det").record(v);
            }
        });
        assert_eq!(rec.counter(names::BYTES_STREAMED), 12);
        assert_eq!(rec.gauge(names::STALL), 0.25);
        let s = RunSummary::build(&rec, RunFacts::default());
        assert_eq!(s.models.len(), 1);
        assert_eq!(s.models[0].name, "det");
        assert_eq!((s.models[0].p50_s, s.models[0].p95_s), (2.0, 4.0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
