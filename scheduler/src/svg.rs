//! Residency timeline as a hand-written SVG: resident bytes over time stacked by model with the
//! activation share and the cap line on top, then a transfer lane and a compute lane with stalls.
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

/// Renders `plan` as a standalone SVG document.
pub fn render(plan: &Plan) -> String {
    let trace = &plan.trace;
    let sim = &plan.sim;
    let nm = trace.model_names.len().max(1);
    let t_end = sim.makespan_s.max(1e-12);
    let (tunit, tscale) = if t_end < 1e-3 {
        ("µs", 1e6)
    } else if t_end < 1.0 {
        ("ms", 1e3)
    } else {
        ("s", 1.0)
    };
    let plot_w = W - LEFT - RIGHT;
    let x = |t: f64| LEFT + t / t_end * plot_w;
    let mib = 1024.0 * 1024.0;
    let ymax_b = (plan.cap_bytes.max(plan.stats.peak_bytes) as f64 * 1.08).max(1.0);
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
    let st = &plan.stats;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{} — cap {}, {} slots of {}</text>"#,
        esc(plan.policy.name()),
        esc(&format_size(plan.cap_bytes)),
        plan.slots,
        esc(&format_size(plan.page_bytes))
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="40">predicted {:.3} {tunit}, lower bound {:.3} {tunit} (×{:.3}), streamed {}, peak {}, stalls {:.3} {tunit} in {} steps</text>"#,
        st.predicted_s * tscale,
        st.lower_bound.bound_s * tscale,
        st.ratio,
        esc(&format_size(st.bytes_streamed)),
        esc(&format_size(st.peak_bytes)),
        st.total_stall_s * tscale,
        st.stalled_steps
    );

    // Stacked resident bytes per model: change points from ops, activation from steps.
    let mut changes: Vec<(f64, usize, i64)> = Vec::new();
    for (i, op) in plan.schedule.ops.iter().enumerate() {
        match *op {
            Op::Load { page, .. } => changes.push((
                sim.op_start[i],
                trace.page_ref(page).model as usize,
                plan.page_bytes as i64,
            )),
            Op::Evict { page, .. } => changes.push((
                sim.op_start[i],
                trace.page_ref(page).model as usize,
                -(plan.page_bytes as i64),
            )),
        }
    }
    let act_layer = nm;
    if let Some(first) = trace.steps.first() {
        changes.push((0.0, act_layer, first.activation_bytes as i64));
    }
    for j in 1..trace.steps.len() {
        let d = trace.steps[j].activation_bytes as i64 - trace.steps[j - 1].activation_bytes as i64;
        if d != 0 {
            changes.push((sim.step_start[j], act_layer, d));
        }
    }
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Sample the stacked levels at each distinct change time (merged to ~0.25 px).
    let mut level = vec![0i64; nm + 1];
    let mut samples: Vec<(f64, Vec<i64>)> = vec![(0.0, level.clone())];
    let min_dt = t_end / plot_w / 4.0;
    let mut k = 0;
    while k < changes.len() {
        let t = changes[k].0;
        while k < changes.len() && changes[k].0 <= t + min_dt {
            level[changes[k].1] += changes[k].2;
            k += 1;
        }
        match samples.last_mut() {
            Some(last) if (last.0 - t).abs() <= min_dt => last.1 = level.clone(),
            _ => samples.push((t, level.clone())),
        }
    }
    // Layers bottom-up: models in order, then activations.
    for layer in 0..=nm {
        let mut upper = String::new();
        let mut lower: Vec<String> = Vec::new();
        for (idx, (t, lv)) in samples.iter().enumerate() {
            let base: i64 = lv[..layer].iter().sum();
            let top = base + lv[layer];
            let t_next = samples.get(idx + 1).map_or(t_end, |n| n.0);
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
    let xstep = tick_step(t_end * tscale, 10.0);
    let mut tv = 0.0;
    while tv <= t_end * tscale * 1.0001 {
        let xx = x(tv / tscale);
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
    // Cap line.
    let cy = y(plan.cap_bytes as f64);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="#d62728" stroke-width="2" stroke-dasharray="8,4"/><text x="{:.1}" y="{:.1}" fill="#d62728" text-anchor="end">cap {}</text>"##,
        LEFT + plot_w,
        LEFT + plot_w - 4.0,
        cy - 5.0,
        esc(&format_size(plan.cap_bytes))
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
    let mut rects: Vec<(f64, f64, u32)> = Vec::new();
    for (i, op) in plan.schedule.ops.iter().enumerate() {
        if let Op::Load { page, .. } = *op {
            rects.push((sim.op_start[i], sim.op_end[i], trace.page_ref(page).model));
        }
    }
    lane(&mut s, &rects, lane_tx, &x, t_end / plot_w * 0.5);
    rects.clear();
    for (j, stp) in trace.steps.iter().enumerate() {
        rects.push((sim.step_start[j], sim.step_end[j], stp.model));
    }
    lane(&mut s, &rects, lane_cx, &x, t_end / plot_w * 0.5);
    // Stalls: red bars on the compute lane and ticks under the area plot.
    for (j, &stall) in sim.stalls.iter().enumerate() {
        if stall > 0.0 {
            let (a, b) = (x(sim.step_start[j] - stall), x(sim.step_start[j]));
            let _ = writeln!(
                s,
                r##"<rect x="{a:.1}" y="{:.1}" width="{:.2}" height="{LANE_H}" fill="#d62728"/><rect x="{a:.1}" y="{:.1}" width="{:.2}" height="4" fill="#d62728"/>"##,
                lane_cx,
                (b - a).max(0.8),
                TOP + AREA_H + 1.0,
                (b - a).max(0.8)
            );
        }
    }
    // Legend.
    let lx = W - RIGHT + 16.0;
    let mut ly = TOP + 6.0;
    for (m, name) in trace.model_names.iter().enumerate() {
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
        r##"<rect x="{lx}" y="{ly}" width="14" height="14" fill="#d0d0d0"/><text x="{}" y="{}">activations</text>"##,
        lx + 20.0,
        ly + 11.0
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
    rects: &[(f64, f64, u32)],
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
    let mut cur: Option<(f64, f64, u32)> = None;
    let emit = |s: &mut String, r: (f64, f64, u32)| {
        let (a, b) = (x(r.0), x(r.1));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}" stroke="white" stroke-width="0.3"/>"##,
            top + 2.0,
            (b - a).max(0.5),
            LANE_H - 4.0,
            color(r.2)
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
