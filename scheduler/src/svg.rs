//! Residency timeline as a hand-written SVG: resident bytes over time stacked by model with the
//! activation share and the cap line on top, then a transfer lane and a compute lane with stalls.
//! [`Timeline`] is what is drawn: a plan's simulation ([`Timeline::from_plan`]) or a run as it
//! really went (the engine builds one from its stream journal).
use crate::{format_size, Op, Plan};
use std::fmt::Write;

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac",
];
const W: f64 = 1200.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 56.0;
const AREA_H: f64 = 300.0;
const LANE_H: f64 = 26.0;

fn color(model: u32) -> &'static str {
    PALETTE[model as usize % PALETTE.len()]
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A round tick step giving about `target` ticks over `range`.
fn tick_step(range: f64, target: f64) -> f64 {
    if range <= 0.0 {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// What a residency plot shows, whether planned or measured: bytes per model over time on a
/// fixed base (the activation arena), a transfer lane and a compute lane, stalls, and marks
/// (request boundaries). Times are seconds from `t_start`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub title: String,
    pub subtitle: String,
    pub model_names: Vec<String>,
    /// What the grey base layer is ("activations", or what a measured run holds besides pages).
    pub base_label: String,
    pub cap_bytes: u64,
    pub t_start: f64,
    pub t_end: f64,
    /// Change points of the stacked areas: (time, layer, signed bytes). Layer `m` is model `m`;
    /// layer `model_names.len()` is the base.
    pub changes: Vec<(f64, usize, i64)>,
    /// Transfers and compute spans, (start, end, model); a compute span of no model is grey.
    pub transfers: Vec<(f64, f64, Option<u32>)>,
    pub compute: Vec<(f64, f64, Option<u32>)>,
    /// (start, end) of the times compute waited for pages.
    pub stalls: Vec<(f64, f64)>,
    /// Vertical marks with a label (request starts).
    pub marks: Vec<(f64, String)>,
}

impl Timeline {
    /// The plan's simulated timeline.
    pub fn from_plan(plan: &Plan) -> Timeline {
        let trace = &plan.trace;
        let sim = &plan.sim;
        let nm = trace.model_names.len();
        let st = &plan.stats;
        let t_end = sim.makespan_s.max(1e-12);
        let (tunit, tscale) = time_unit(t_end);
        let mut changes: Vec<(f64, usize, i64)> = Vec::new();
        let mut transfers = Vec::new();
        for (i, op) in plan.schedule.ops.iter().enumerate() {
            let (page, sign) = match *op {
                Op::Load { page, .. } => (page, 1),
                Op::Evict { page, .. } => (page, -1),
            };
            let model = trace.page_ref(page).model;
            changes.push((
                sim.op_start[i],
                model as usize,
                sign * plan.page_bytes as i64,
            ));
            if sign > 0 {
                transfers.push((sim.op_start[i], sim.op_end[i], Some(model)));
            }
        }
        if let Some(first) = trace.steps.first() {
            changes.push((0.0, nm, first.activation_bytes as i64));
        }
        for j in 1..trace.steps.len() {
            let d =
                trace.steps[j].activation_bytes as i64 - trace.steps[j - 1].activation_bytes as i64;
            if d != 0 {
                changes.push((sim.step_start[j], nm, d));
            }
        }
        let compute = trace
            .steps
            .iter()
            .enumerate()
            .map(|(j, stp)| (sim.step_start[j], sim.step_end[j], Some(stp.model)))
            .collect();
        let stalls = sim
            .stalls
            .iter()
            .enumerate()
            .filter(|(_, &stall)| stall > 0.0)
            .map(|(j, &stall)| (sim.step_start[j] - stall, sim.step_start[j]))
            .collect();
        Timeline {
            title: format!(
                "{} — cap {}, {} slots of {}",
                plan.policy.name(),
                format_size(plan.cap_bytes),
                plan.slots,
                format_size(plan.page_bytes)
            ),
            subtitle: format!(
                "predicted {:.3} {tunit}, lower bound {:.3} {tunit} (×{:.3}), streamed {}, peak {}, stalls {:.3} {tunit} in {} steps",
                st.predicted_s * tscale,
                st.lower_bound.bound_s * tscale,
                st.ratio,
                format_size(st.bytes_streamed),
                format_size(st.peak_bytes),
                st.total_stall_s * tscale,
                st.stalled_steps
            ),
            model_names: trace.model_names.clone(),
            base_label: "activations".into(),
            cap_bytes: plan.cap_bytes,
            t_start: 0.0,
            t_end,
            changes,
            transfers,
            compute,
            stalls,
            marks: Vec::new(),
        }
    }
}

/// The unit a time axis of `t_end` seconds is labelled in, and its scale from seconds.
pub fn time_unit(t_end: f64) -> (&'static str, f64) {
    if t_end < 1e-3 {
        ("µs", 1e6)
    } else if t_end < 1.0 {
        ("ms", 1e3)
    } else {
        ("s", 1.0)
    }
}

/// Renders `plan`'s simulated timeline as a standalone SVG document.
pub fn render(plan: &Plan) -> String {
    render_timeline(&Timeline::from_plan(plan))
}

/// Renders a timeline as a standalone SVG document.
pub fn render_timeline(tl: &Timeline) -> String {
    let nm = tl.model_names.len();
    let span = (tl.t_end - tl.t_start).max(1e-12);
    let (tunit, tscale) = time_unit(span);
    let plot_w = W - LEFT - RIGHT;
    let x = |t: f64| LEFT + ((t - tl.t_start) / span).clamp(0.0, 1.0) * plot_w;
    let mib = 1024.0 * 1024.0;
    let mut changes = tl.changes.clone();
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Sample the stacked levels at each distinct change time (merged to ~0.25 px). Changes
    // before the window set the starting levels.
    let mut level = vec![0i64; nm + 1];
    let mut k = 0;
    while k < changes.len() && changes[k].0 <= tl.t_start {
        level[changes[k].1.min(nm)] += changes[k].2;
        k += 1;
    }
    let mut samples: Vec<(f64, Vec<i64>)> = vec![(tl.t_start, level.clone())];
    let mut peak: i64 = level.iter().sum();
    let min_dt = span / plot_w / 4.0;
    while k < changes.len() && changes[k].0 <= tl.t_end {
        let t = changes[k].0;
        while k < changes.len() && changes[k].0 <= t + min_dt {
            level[changes[k].1.min(nm)] += changes[k].2;
            k += 1;
        }
        peak = peak.max(level.iter().sum());
        match samples.last_mut() {
            Some(last) if (last.0 - t).abs() <= min_dt => last.1 = level.clone(),
            _ => samples.push((t, level.clone())),
        }
    }
    let ymax_b = (tl.cap_bytes.max(peak.max(0) as u64) as f64 * 1.08).max(1.0);
    let y = |b: f64| TOP + AREA_H - b / ymax_b * AREA_H;
    let lane_tx = TOP + AREA_H + 44.0;
    let lane_cx = lane_tx + LANE_H + 14.0;
    let h = lane_cx + LANE_H + 56.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(&tl.title)
    );
    let _ = writeln!(s, r#"<text x="{LEFT}" y="40">{}</text>"#, esc(&tl.subtitle));
    // Layers bottom-up: models in order, then the base.
    for layer in 0..=nm {
        let mut upper = String::new();
        let mut lower: Vec<String> = Vec::new();
        for (idx, (t, lv)) in samples.iter().enumerate() {
            let base: i64 = lv[..layer].iter().sum();
            let top = base + lv[layer];
            let t_next = samples.get(idx + 1).map_or(tl.t_end, |n| n.0);
            let _ = write!(
                upper,
                "{:.1},{:.1} {:.1},{:.1} ",
                x(*t),
                y(top as f64),
                x(t_next),
                y(top as f64)
            );
            lower.push(format!(
                "{:.1},{:.1} {:.1},{:.1}",
                x(t_next),
                y(base as f64),
                x(*t),
                y(base as f64)
            ));
        }
        lower.reverse();
        let fill = if layer == nm {
            "#d0d0d0"
        } else {
            color(layer as u32)
        };
        let _ = writeln!(
            s,
            r#"<polygon points="{upper}{}" fill="{fill}" fill-opacity="0.85" stroke="none"/>"#,
            lower.join(" ")
        );
    }
    // Axes.
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        TOP + AREA_H,
        TOP + AREA_H,
        LEFT + plot_w,
        TOP + AREA_H
    );
    let ystep = tick_step(ymax_b / mib, 6.0);
    let mut v = 0.0;
    while v * mib <= ymax_b {
        let yy = y(v * mib);
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#000" stroke-opacity="0.12"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            trim(v)
        );
        v += ystep;
    }
    let _ = writeln!(
        s,
        r#"<text x="22" y="{:.1}" transform="rotate(-90 22 {:.1})" text-anchor="middle">resident bytes (MiB)</text>"#,
        TOP + AREA_H / 2.0,
        TOP + AREA_H / 2.0
    );
    let xstep = tick_step(span * tscale, 10.0);
    let mut tv = 0.0;
    while tv <= span * tscale * 1.0001 {
        let xx = x(tl.t_start + tv / tscale);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#333"/><line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#ccc" stroke-dasharray="2,3"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + AREA_H,
            TOP + AREA_H + 5.0,
            lane_tx - 4.0,
            lane_cx + LANE_H + 4.0,
            lane_cx + LANE_H + 20.0,
            trim(tv)
        );
        tv += xstep;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time ({tunit})</text>"#,
        LEFT + plot_w / 2.0,
        lane_cx + LANE_H + 40.0
    );
    // Marks (request starts).
    for (t, label) in &tl.marks {
        if *t < tl.t_start || *t > tl.t_end {
            continue;
        }
        let xx = x(*t);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#555" stroke-width="0.8"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
            lane_cx + LANE_H,
            xx + 2.0,
            TOP + 10.0,
            esc(label)
        );
    }
    // Cap line.
    let cy = y(tl.cap_bytes as f64);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="#d62728" stroke-width="2" stroke-dasharray="8,4"/><text x="{:.1}" y="{:.1}" fill="#d62728" text-anchor="end">cap {}</text>"##,
        LEFT + plot_w,
        LEFT + plot_w - 4.0,
        cy - 5.0,
        esc(&format_size(tl.cap_bytes))
    );
    // Lanes.
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">transfers</text><text x="{:.1}" y="{:.1}" text-anchor="end">compute</text>"#,
        LEFT - 6.0,
        lane_tx + LANE_H / 2.0 + 4.0,
        LEFT - 6.0,
        lane_cx + LANE_H / 2.0 + 4.0
    );
    let visible = |r: &&(f64, f64, Option<u32>)| r.1 >= tl.t_start && r.0 <= tl.t_end;
    let rects: Vec<_> = tl.transfers.iter().filter(visible).copied().collect();
    lane(&mut s, &rects, lane_tx, &x, span / plot_w * 0.5);
    let rects: Vec<_> = tl.compute.iter().filter(visible).copied().collect();
    lane(&mut s, &rects, lane_cx, &x, span / plot_w * 0.5);
    // Stalls: red bars on the compute lane and ticks under the area plot, neighbours closer than
    // half a pixel merged (a streamed decoder stalls thousands of times a second).
    let mut stalls: Vec<(f64, f64)> = tl
        .stalls
        .iter()
        .filter(|&&(a, b)| b >= tl.t_start && a <= tl.t_end)
        .copied()
        .collect();
    stalls.sort_by(|p, q| p.0.total_cmp(&q.0));
    let merge_dt = span / plot_w * 0.5;
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for (a, b) in stalls {
        match merged.last_mut() {
            Some(last) if a - last.1 <= merge_dt => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    for (a, b) in merged {
        let (a, b) = (x(a), x(b));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{:.1}" width="{:.2}" height="{LANE_H}" fill="#d62728"/><rect x="{a:.1}" y="{:.1}" width="{:.2}" height="4" fill="#d62728"/>"##,
            lane_cx,
            (b - a).max(0.8),
            TOP + AREA_H + 1.0,
            (b - a).max(0.8)
        );
    }
    // Legend.
    let lx = W - RIGHT + 16.0;
    let mut ly = TOP + 6.0;
    for (m, name) in tl.model_names.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{ly}" width="14" height="14" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            color(m as u32),
            lx + 20.0,
            ly + 11.0,
            esc(name)
        );
        ly += 20.0;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{lx}" y="{ly}" width="14" height="14" fill="#d0d0d0"/><text x="{}" y="{}">{}</text>"##,
        lx + 20.0,
        ly + 11.0,
        esc(&tl.base_label)
    );
    ly += 20.0;
    let _ = writeln!(
        s,
        r##"<rect x="{lx}" y="{ly}" width="14" height="14" fill="#d62728"/><text x="{}" y="{}">stall (compute waits)</text>"##,
        lx + 20.0,
        ly + 11.0
    );
    ly += 20.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#d62728" stroke-width="2" stroke-dasharray="8,4"/><text x="{}" y="{}">cap</text>"##,
        ly + 7.0,
        lx + 14.0,
        ly + 7.0,
        lx + 20.0,
        ly + 11.0
    );
    s.push_str("</svg>\n");
    s
}

/// Draws lane rectangles, merging neighbours of one model closer than `merge_dt` to keep files small.
fn lane(
    s: &mut String,
    rects: &[(f64, f64, Option<u32>)],
    top: f64,
    x: &dyn Fn(f64) -> f64,
    merge_dt: f64,
) {
    let _ = writeln!(
        s,
        r##"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{LANE_H}" fill="#f6f6f6" stroke="#ccc"/>"##,
        LEFT,
        W - LEFT - RIGHT
    );
    let mut cur: Option<(f64, f64, Option<u32>)> = None;
    let emit = |s: &mut String, r: (f64, f64, Option<u32>)| {
        let (a, b) = (x(r.0), x(r.1));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}" stroke="white" stroke-width="0.3"/>"##,
            top + 2.0,
            (b - a).max(0.5),
            LANE_H - 4.0,
            r.2.map_or("#9a9a9a", color)
        );
    };
    for &r in rects {
        cur = match cur {
            Some(c) if c.2 == r.2 && r.0 - c.1 <= merge_dt => Some((c.0, r.1.max(c.1), c.2)),
            Some(c) => {
                emit(s, c);
                Some(r)
            }
            None => Some(r),
        };
    }
    if let Some(c) = cur {
        emit(s, c);
    }
}

fn trim(v: f64) -> String {
    let t = format!("{v:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}
