//! The OCR pipeline shape of `texstream run`: which models are detector, classifier and
//! recognizer (read from the pipeline's steps), the demo image and dictionary, and one frame run
//! through the RapidOCR-exact steps with the three models streamed.
use super::*;

/// Which workload model plays which OCR role, and the step parameters.
#[derive(Debug, Clone)]
pub(super) struct OcrRoles {
    pub(super) det: usize,
    pub(super) cls: usize,
    pub(super) rec: usize,
    pub(super) det_in: String,
    pub(super) det_out: String,
    pub(super) cls_in: String,
    pub(super) cls_out: String,
    pub(super) rec_in: String,
    pub(super) rec_out: String,
    pub(super) cfg: OcrConfig,
    pub(super) expected: u32,
    pub(super) max: u32,
}

/// Reads the OCR pipeline's shape: ImageLoad, Normalize, Run(det), OcrBoxes, CropRotate,
/// Run(cls, per item), AngleFix, Run(rec, per item), CtcDecode.
pub(super) fn ocr_roles(
    w: &LoadedWorkload,
    p: &PipelineSpec,
) -> Result<(OcrRoles, String), RunError> {
    let err = |m: String| perr(w, p, m);
    let model_ix = |name: &str| {
        w.spec
            .models
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| err(format!("unknown model `{name}`")))
    };
    let kinds: Vec<&str> = p
        .steps
        .iter()
        .map(|s| match s {
            PipelineStep::ImageLoad(_) => "ImageLoad",
            PipelineStep::Normalize(_) => "Normalize",
            PipelineStep::Run(_) => "Run",
            PipelineStep::OcrBoxes(_) => "OcrBoxes",
            PipelineStep::CropRotate(_) => "CropRotate",
            PipelineStep::AngleFix(_) => "AngleFix",
            PipelineStep::CtcDecode(_) => "CtcDecode",
        })
        .collect();
    let want = [
        "ImageLoad",
        "Normalize",
        "Run",
        "OcrBoxes",
        "CropRotate",
        "Run",
        "AngleFix",
        "Run",
        "CtcDecode",
    ];
    if kinds != want {
        return Err(err(format!(
            "the runtime runs OCR pipelines of the form {want:?}; this one is {kinds:?}"
        )));
    }
    let run = |i: usize| match &p.steps[i] {
        PipelineStep::Run(r) => Ok(r.clone()),
        _ => Err(err(format!("step {i} must be a Run"))),
    };
    let (det, cls, rec) = (run(2)?, run(5)?, run(7)?);
    let one = |r: &crate::workload::Run, what: &str| -> Result<(String, String), RunError> {
        let i = r.inputs.keys().next().cloned();
        let o = r.outputs.keys().next().cloned();
        match (i, o, r.inputs.len(), r.outputs.len()) {
            (Some(i), Some(o), 1, 1) => Ok((i, o)),
            _ => Err(err(format!(
                "the {what} run must name exactly one model input and one output"
            ))),
        }
    };
    let (det_in, det_out) = one(&det, "detector")?;
    let (cls_in, cls_out) = one(&cls, "classifier")?;
    let (rec_in, rec_out) = one(&rec, "recognizer")?;
    let (expected, max) = match &rec.fan_out {
        FanOut::PerItem(pi) => (pi.expected, pi.max.unwrap_or(pi.expected.max(64))),
        FanOut::One => return Err(err("the recognizer run needs a PerItem fan-out".into())),
    };
    let mut cfg = OcrConfig::default();
    if let PipelineStep::Normalize(n) = &p.steps[1] {
        if n.mean.len() != 3 || n.std.len() != 3 || n.std.contains(&0.0) {
            return Err(err("Normalize needs 3 means and 3 non-zero stds".into()));
        }
        // The image is BGR; the workload lists RGB like the model cards.
        cfg.det.mean = [n.mean[2] as f64, n.mean[1] as f64, n.mean[0] as f64];
        cfg.det.std = [n.std[2] as f64, n.std[1] as f64, n.std[0] as f64];
    }
    if let PipelineStep::OcrBoxes(b) = &p.steps[3] {
        if let Some(t) = b.thresh {
            cfg.db.thresh = t;
        }
        if let Some(t) = b.box_thresh {
            cfg.db.box_thresh = t as f64;
        }
        if let Some(u) = b.unclip_ratio {
            cfg.db.unclip_ratio = u as f64;
        }
    }
    if let PipelineStep::AngleFix(a) = &p.steps[6] {
        if let Some(t) = a.thresh {
            cfg.cls_thresh = t;
        }
    }
    let dict = match &p.steps[8] {
        PipelineStep::CtcDecode(c) => c.dict.clone(),
        _ => String::new(),
    };
    Ok((
        OcrRoles {
            det: model_ix(&det.model)?,
            cls: model_ix(&cls.model)?,
            rec: model_ix(&rec.model)?,
            det_in,
            det_out,
            cls_in,
            cls_out,
            rec_in,
            rec_out,
            cfg,
            expected,
            max,
        },
        dict,
    ))
}

/// The OCR pipeline's image and dictionary, and its models' inputs checked.
pub(super) fn ocr_shape(
    w: &LoadedWorkload,
    pipeline: &PipelineSpec,
    models: &[(String, Arc<PackedModel>)],
    opts: &RunOptions,
    roles: OcrRoles,
    dict_path: &str,
) -> Result<Shape, RunError> {
    let image_path = match &opts.image {
        Some(p) => p.clone(),
        None => {
            let src = match &pipeline.steps[0] {
                PipelineStep::ImageLoad(l) => l.source.clone(),
                _ => None,
            };
            let demo = w
                .spec
                .demo_inputs
                .iter()
                .find(|d| src.as_deref().is_none_or(|s| s == d.name))
                .ok_or_else(|| {
                    perr(
                        w,
                        pipeline,
                        "no demo input for the ImageLoad step (give --image)".into(),
                    )
                })?;
            resolve(w, &demo.path)
        }
    };
    let image = ops::load_image(&image_path)?;
    let dict_file = resolve(w, dict_path);
    let dict = match std::fs::read_to_string(&dict_file) {
        Ok(t) => ops::dict_from_metadata(&t),
        Err(e) => {
            let meta = models[roles.rec]
                .1
                .header()
                .metadata
                .get("character")
                .cloned();
            match meta {
                Some(s) => ops::dict_from_metadata(&s),
                None => {
                    return Err(perr(
                        w,
                        pipeline,
                        format!(
                            "dictionary {}: {e} (and the recognizer has no `character` metadata)",
                            dict_file.display()
                        ),
                    ))
                }
            }
        }
    };
    for (role, ix, input) in [
        ("detector", roles.det, &roles.det_in),
        ("classifier", roles.cls, &roles.cls_in),
        ("recognizer", roles.rec, &roles.rec_in),
    ] {
        let g = models[ix].1.graph();
        if !g.inputs.iter().any(|p| &p.name == input) || g.inputs.len() != 1 {
            return Err(perr(
                w,
                pipeline,
                format!("the {role} must have exactly one input, named `{input}`"),
            ));
        }
    }
    Ok(Shape::Ocr {
        roles: Box::new(roles),
        image,
        dict,
    })
}

/// Pipeline stages for frames with `counts` boxes each, after `partial` (the rest of a frame).
pub(super) fn stages(r: &OcrRoles, partial: &[Stage], frames: u32, count: u32) -> Pipeline {
    let mut stages = partial.to_vec();
    for _ in 0..frames {
        stages.push(Stage {
            model: r.det,
            count: 1,
        });
        stages.push(Stage {
            model: r.cls,
            count,
        });
        stages.push(Stage {
            model: r.rec,
            count,
        });
    }
    Pipeline {
        stages,
        repetitions: 1,
    }
}

/// Bilinear resize of an NCHW tensor's H and W (half-pixel centers).
fn resize_nchw(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (n, c, h, w) = (shape[0], shape[1], shape[2], shape[3]);
    if (h, w) == (h2, w2) {
        return data.to_vec();
    }
    let mut out = vec![0.0f32; n * c * h2 * w2];
    let src = |v: usize, s: usize, d: usize| -> (usize, usize, f32) {
        let x = ((v as f32 + 0.5) * s as f32 / d as f32 - 0.5).max(0.0);
        let x0 = (x.floor() as usize).min(s - 1);
        let x1 = (x0 + 1).min(s - 1);
        (x0, x1, x - x0 as f32)
    };
    // Column taps are the same on every row: computed once.
    let cols: Vec<(usize, usize, f32)> = (0..w2).map(|x| src(x, w, w2)).collect();
    for p in 0..n * c {
        let base = &data[p * h * w..(p + 1) * h * w];
        for y in 0..h2 {
            let (y0, y1, fy) = src(y, h, h2);
            let (r0, r1) = (&base[y0 * w..(y0 + 1) * w], &base[y1 * w..(y1 + 1) * w]);
            let row = &mut out[p * h2 * w2 + y * w2..p * h2 * w2 + (y + 1) * w2];
            for (o, &(x0, x1, fx)) in row.iter_mut().zip(&cols) {
                let a = r0[x0] * (1.0 - fx) + r0[x1] * fx;
                let b = r1[x0] * (1.0 - fx) + r1[x1] * fx;
                *o = a * (1.0 - fy) + b * fy;
            }
        }
    }
    out
}

/// Pads (zeros on the right) or resizes the width of a [1, C, H, W] item to `w2`.
fn fit_width(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (c, h, w) = (shape[1], shape[2], shape[3]);
    if h != h2 || w > w2 {
        return resize_nchw(shape, data, h2, w2);
    }
    let mut out = vec![0.0f32; c * h2 * w2];
    for p in 0..c {
        for y in 0..h {
            out[(p * h2 + y) * w2..(p * h2 + y) * w2 + w]
                .copy_from_slice(&data[(p * h + y) * w..(p * h + y) * w + w]);
        }
    }
    out
}

pub(super) fn run_frame(d: &mut Driver<'_>) -> Result<Vec<TextLine>, RunError> {
    let Shape::Ocr { roles, image, dict } = &d.prep.shape else {
        return Ok(Vec::new());
    };
    let (r, image, dict) = (roles.clone(), image.clone(), dict.clone());
    let det_hw = shape_hw(&d.models[r.det], &r.det_in)?;
    let cls_hw = shape_hw(&d.models[r.cls], &r.cls_in)?;
    let rec_hw = shape_hw(&d.models[r.rec], &r.rec_in)?;
    let mut cfg = r.cfg.clone();
    cfg.cls_hw = cls_hw;
    cfg.rec_hw = rec_hw;
    let cell = std::cell::RefCell::new(d);
    let det = |t: ops::Tensor| -> Result<ops::Tensor, RunError> {
        let (ih, iw) = (t.shape[2], t.shape[3]);
        let t0 = std::time::Instant::now();
        let x = resize_nchw(&t.shape, &t.data, det_hw.0, det_hw.1);
        let mut resize = t0.elapsed();
        let (shape, y) = cell.borrow_mut().run(r.det, &r.det_in, &r.det_out, &x)?;
        let t0 = std::time::Instant::now();
        let y = resize_nchw(&shape, &y, ih, iw);
        resize += t0.elapsed();
        cell.borrow_mut().cpu_stages.det_resize_s += resize.as_secs_f64();
        Ok(ops::Tensor::new(vec![1, 1, ih, iw], y)?)
    };
    let per_item = |m: usize, input: &str, output: &str, t: ops::Tensor, hw: (usize, usize)| {
        let n = t.shape[0];
        let item = t.data.len() / n.max(1);
        let mut out = Vec::new();
        let mut oshape = Vec::new();
        for i in 0..n {
            let mut s = t.shape.clone();
            s[0] = 1;
            let x = fit_width(&s, &t.data[i * item..(i + 1) * item], hw.0, hw.1);
            let (sh, y) = cell.borrow_mut().run(m, input, output, &x)?;
            oshape = sh;
            out.extend(y);
        }
        if let Some(b) = oshape.first_mut() {
            *b = n;
        }
        Ok::<_, RunError>(ops::Tensor::new(oshape, out)?)
    };
    let cls = |t: ops::Tensor| per_item(r.cls, &r.cls_in, &r.cls_out, t, cls_hw);
    let rec = |t: ops::Tensor| per_item(r.rec, &r.rec_in, &r.rec_out, t, rec_hw);
    let trace = ops::ocr_pipeline_traced(&image, &cfg, &dict, det, cls, rec)?;
    cell.borrow_mut().cpu_stages.add(&trace.times);
    Ok(trace.lines)
}

fn shape_hw(m: &StreamedModel, input: &str) -> Result<(usize, usize), RunError> {
    match m.input_shape(input).as_deref() {
        Some([_, _, h, w]) => Ok((*h, *w)),
        other => Err(RunError::Model {
            workload: PathBuf::new(),
            model: m.name.clone(),
            msg: format!("input `{input}` must be [N, C, H, W], it is {other:?}"),
        }),
    }
}
