//! OCR pre/post-processing steps against RapidOCR 3.10.0 (recorded by scripts/ocr_reference.py into
//! tests/data/ocr/) and against hand-computed cases.

use std::path::{Path, PathBuf};

use serde_json::Value;
use texstream::ops::{
    self, cls_preprocess, db_postprocess, decode_image, det_preprocess, dict_from_metadata,
    get_rotate_crop_image, load_image, plan_batches, rec_preprocess, resize_linear, sort_boxes,
    BgrImage, CtcDecoder, DbParams, DetPreprocess, Tensor,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data(name: &str) -> PathBuf {
    root().join("tests/data/ocr").join(name)
}

/// The reference record for an image, or None (with a loud note) when it was never generated.
fn reference(stem: &str) -> Option<Value> {
    let p = data(&format!("{stem}.json"));
    match std::fs::read_to_string(&p) {
        Ok(s) => Some(serde_json::from_str(&s).expect("reference json parses")),
        Err(_) => {
            eprintln!(
                "SKIPPED: {} missing; run `.venv/bin/python scripts/ocr_reference.py`",
                p.display()
            );
            None
        }
    }
}

/// The source image (fetched, not committed), or None with a loud note.
fn source_image(rec: &Value) -> Option<BgrImage> {
    let p = root().join(rec["image"].as_str().expect("image path"));
    if !p.exists() {
        eprintln!(
            "SKIPPED: {} missing; run `scripts/fetch_test_images.sh`",
            p.display()
        );
        return None;
    }
    Some(load_image(&p).expect("test image decodes"))
}

fn png(name: &str) -> BgrImage {
    load_image(&data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The detector's probability map stored as 16-bit PNG, as f32 exactly as the script fed RapidOCR.
fn prob_map(name: &str) -> Tensor {
    let f = std::fs::File::open(data(name)).expect("prob map png");
    let mut r = png::Decoder::new(std::io::BufReader::new(f))
        .read_info()
        .expect("png header");
    let mut buf = vec![0u8; r.output_buffer_size().expect("size")];
    let info = r.next_frame(&mut buf).expect("png frame");
    assert_eq!(info.bit_depth, png::BitDepth::Sixteen);
    let (w, h) = (info.width as usize, info.height as usize);
    let vals = buf[..w * h * 2]
        .chunks_exact(2)
        .map(|b| f32::from(u16::from_be_bytes([b[0], b[1]])) / 65535.0)
        .collect();
    Tensor::new(vec![1, 1, h, w], vals).expect("prob tensor")
}

fn f(v: &Value) -> f64 {
    v.as_f64().expect("number")
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

fn quad(v: &Value) -> [[f32; 2]; 4] {
    let a = v.as_array().expect("box");
    std::array::from_fn(|i| [f(&a[i][0]) as f32, f(&a[i][1]) as f32])
}

/// Sum and |sum| of a tensor in f64, like numpy's.
fn sums(d: &[f32]) -> (f64, f64) {
    d.iter().fold((0.0, 0.0), |(s, a), &v| {
        (s + f64::from(v), a + f64::from(v).abs())
    })
}

fn check_stats(what: &str, t: &Tensor, st: &Value, tol_per_value: f64) {
    assert_eq!(t.shape, shape(&st["shape"]), "{what}: shape");
    let (s, a) = sums(&t.data);
    let n = t.data.len() as f64;
    let (rs, ra) = (f(&st["sum"]), f(&st["abs_sum"]));
    eprintln!("{what}: sum {s:.3} vs {rs:.3}, |sum| {a:.3} vs {ra:.3}");
    assert!(
        (s - rs).abs() <= tol_per_value * n,
        "{what}: sum {s} vs {rs}"
    );
    assert!(
        (a - ra).abs() <= tol_per_value * n,
        "{what}: abs sum {a} vs {ra}"
    );
}

/// Max and mean absolute difference between normalized values of two images' pixels.
fn image_diff(a: &BgrImage, b: &BgrImage) -> (u8, f64) {
    assert_eq!((a.width, a.height), (b.width, b.height));
    let mut max = 0u8;
    let mut sum = 0u64;
    for (x, y) in a.data.iter().zip(&b.data) {
        let d = x.abs_diff(*y);
        max = max.max(d);
        sum += u64::from(d);
    }
    (max, sum as f64 / a.data.len() as f64)
}

/// Polygon IoU of two convex quads, by rasterizing at 1/4 px.
fn iou(a: &[[f32; 2]; 4], b: &[[f32; 2]; 4]) -> f64 {
    let inside = |q: &[[f32; 2]; 4], x: f32, y: f32| {
        let mut sign = 0i32;
        for i in 0..4 {
            let (p, r) = (q[i], q[(i + 1) % 4]);
            let c = (r[0] - p[0]) * (y - p[1]) - (r[1] - p[1]) * (x - p[0]);
            let s = if c > 0.0 {
                1
            } else if c < 0.0 {
                -1
            } else {
                0
            };
            if s != 0 {
                if sign != 0 && s != sign {
                    return false;
                }
                sign = s;
            }
        }
        true
    };
    let all: Vec<[f32; 2]> = a.iter().chain(b.iter()).copied().collect();
    let (x0, x1) = (
        all.iter().map(|p| p[0]).fold(f32::MAX, f32::min),
        all.iter().map(|p| p[0]).fold(f32::MIN, f32::max),
    );
    let (y0, y1) = (
        all.iter().map(|p| p[1]).fold(f32::MAX, f32::min),
        all.iter().map(|p| p[1]).fold(f32::MIN, f32::max),
    );
    let (mut inter, mut uni) = (0u64, 0u64);
    let mut y = y0;
    while y <= y1 {
        let mut x = x0;
        while x <= x1 {
            let (ia, ib) = (inside(a, x, y), inside(b, x, y));
            inter += u64::from(ia && ib);
            uni += u64::from(ia || ib);
            x += 0.25;
        }
        y += 0.25;
    }
    inter as f64 / uni.max(1) as f64
}

fn reference_dict() -> Vec<String> {
    let s = std::fs::read_to_string(data("rec_dict.txt")).expect("rec_dict.txt");
    dict_from_metadata(&s)
}

/// The crops as the recognizer saw them: RapidOCR's crops, turned 180° where it did.
fn classified_crops(rec: &Value) -> Vec<BgrImage> {
    let rotated = rec["cls_rotated"].as_array().expect("cls_rotated");
    (0..rotated.len())
        .map(|i| {
            let c = png(&format!("page_crop{i}.png"));
            if rotated[i].as_bool() == Some(true) {
                c.rotate_180()
            } else {
                c
            }
        })
        .collect()
}

/// Dense recognizer output rebuilt from the recorded top-k (every other class 0): same argmax and max.
fn rec_output(batch: &Value) -> Tensor {
    let s = shape(&batch["output_shape"]);
    let mut t = Tensor::zeros(s.clone());
    let (idx, prob) = (
        batch["topk_index"].as_array().unwrap(),
        batch["topk_prob"].as_array().unwrap(),
    );
    for n in 0..s[0] {
        for step in 0..s[1] {
            for k in 0..idx[n][step].as_array().unwrap().len() {
                let c = idx[n][step][k].as_u64().unwrap() as usize;
                t.data[(n * s[1] + step) * s[2] + c] = f(&prob[n][step][k]) as f32;
            }
        }
    }
    t
}

#[test]
fn det_preprocess_matches_rapidocr() {
    let Some(rec) = reference("page") else { return };
    let Some(img) = source_image(&rec) else {
        return;
    };
    let t = det_preprocess(&img, &DetPreprocess::default()).expect("non-empty");
    check_stats("page det input", &t, &rec["det_input"], 1e-6);
    // Element-wise against the recorded tensor (stored as the u8 image it was normalized from).
    let want = png("page_det_in.png");
    let (h, w) = (t.shape[2], t.shape[3]);
    assert_eq!((want.width, want.height), (w, h));
    let mut max = 0f32;
    let mut differ = 0usize;
    for (i, px) in want.data.chunks_exact(3).enumerate() {
        for (c, &v) in px.iter().enumerate() {
            let r = (f32::from(v) / 255.0 - 0.5) / 0.5;
            let d = (t.data[c * h * w + i] - r).abs();
            max = max.max(d);
            differ += usize::from(d > 1e-6);
        }
    }
    eprintln!(
        "page det input: max abs diff {max}, {differ} of {} values differ",
        t.data.len()
    );
    assert!(max < 1e-6, "det input differs from RapidOCR by {max}");

    let Some(rec) = reference("text") else { return };
    let Some(img) = source_image(&rec) else {
        return;
    };
    let t = det_preprocess(&img, &DetPreprocess::default()).expect("non-empty");
    check_stats("text det input", &t, &rec["det_input"], 1e-6);
}

#[test]
fn db_boxes_match_rapidocr() {
    let Some(rec) = reference("page") else { return };
    let prob = prob_map("page_det_prob.png");
    let dims = shape(&rec["det_image_shape"]);
    let mut boxes = db_postprocess(&prob, dims[0], dims[1], &DbParams::default()).expect("db");
    let want: Vec<[[f32; 2]; 4]> = rec["det_raw_boxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(quad)
        .collect();
    let scores: Vec<f64> = rec["det_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(f)
        .collect();
    assert_eq!(boxes.len(), want.len(), "box count: {boxes:?}");
    for (w, s) in want.iter().zip(&scores) {
        let (best, i) = boxes
            .iter()
            .enumerate()
            .map(|(i, b)| (iou(&b.points, w), i))
            .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
        eprintln!(
            "box {w:?}: IoU {best:.4} with {:?}, score {:.5} vs {s:.5}",
            boxes[i].points, boxes[i].score
        );
        assert!(best > 0.9, "no box matches {w:?}");
        assert!(
            (boxes[i].score - s).abs() < 0.01,
            "score {} vs {s}",
            boxes[i].score
        );
    }
    sort_boxes(&mut boxes);
    let sorted: Vec<[[f32; 2]; 4]> = rec["det_sorted_boxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(quad)
        .collect();
    for (b, w) in boxes.iter().zip(&sorted) {
        assert!(
            iou(&b.points, w) > 0.9,
            "reading order differs at {w:?}: {:?}",
            b.points
        );
    }
}

#[test]
fn crops_match_rapidocr() {
    let Some(rec) = reference("page") else { return };
    let Some(img) = source_image(&rec) else {
        return;
    };
    let boxes: Vec<[[f32; 2]; 4]> = rec["det_sorted_boxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(quad)
        .collect();
    let dims: Vec<Vec<usize>> = rec["crops"].as_array().unwrap().iter().map(shape).collect();
    for (i, (b, d)) in boxes.iter().zip(&dims).enumerate() {
        let crop = get_rotate_crop_image(&img, b).expect("crop");
        assert_eq!([crop.height, crop.width, 3], d[..], "crop {i} dims");
        let (max, mean) = image_diff(&crop, &png(&format!("page_crop{i}.png")));
        eprintln!(
            "crop {i}: {}x{}, max abs diff {max}, mean {mean:.4}",
            crop.width, crop.height
        );
        assert!(max <= 1, "crop {i} differs by up to {max}");
    }
}

#[test]
fn cls_and_rec_inputs_match_rapidocr() {
    let Some(rec) = reference("page") else { return };
    let crops: Vec<BgrImage> = (0..rec["crops"].as_array().unwrap().len())
        .map(|i| png(&format!("page_crop{i}.png")))
        .collect();
    let batches = plan_batches(&crops, 6);
    let want = rec["cls_batches"].as_array().unwrap();
    assert_eq!(batches.len(), want.len());
    for (k, idx) in batches.iter().enumerate() {
        check_stats(
            &format!("cls batch {k}"),
            &cls_preprocess(&crops, idx, 48, 192),
            &want[k]["input"],
            1e-6,
        );
    }
    let upright = classified_crops(&rec);
    let batches = plan_batches(&upright, 6);
    let want = rec["rec_batches"].as_array().unwrap();
    for (k, idx) in batches.iter().enumerate() {
        check_stats(
            &format!("rec batch {k}"),
            &rec_preprocess(&upright, idx, 48, 320),
            &want[k]["input"],
            1e-6,
        );
    }
    for (i, single) in rec["rec_single"].as_array().unwrap().iter().enumerate() {
        let mut t = rec_preprocess(&upright, &[i], 48, 320);
        t.shape.remove(0);
        check_stats(&format!("rec crop {i}"), &t, &single["stats"], 1e-6);
        let (w, rw) = (t.shape[2], single["resized_w"].as_u64().unwrap() as usize);
        let img = png(&format!("page_rec_in{i}.png"));
        assert_eq!((img.width, img.height), (rw, 48));
        for (p, px) in img.data.chunks_exact(3).enumerate() {
            let (y, x) = (p / rw, p % rw);
            for (c, &v) in px.iter().enumerate() {
                let r = (f32::from(v) / 255.0 - 0.5) / 0.5;
                assert!(
                    (t.data[(c * 48 + y) * w + x] - r).abs() < 1e-6,
                    "rec input {i} at ({x},{y},{c})"
                );
            }
        }
    }
}

#[test]
fn ctc_decode_of_reference_logits_gives_rapidocr_text() {
    let Some(rec) = reference("page") else { return };
    let dict = reference_dict();
    assert_eq!(dict.len(), 18708);
    let decoder = CtcDecoder::new(&dict);
    let upright = classified_crops(&rec);
    let want = rec["rec_res"].as_array().unwrap();
    for (k, idx) in plan_batches(&upright, 6).iter().enumerate() {
        let out = rec_output(&rec["rec_batches"][k]);
        assert_eq!(out.shape[2], decoder.classes());
        for (&i, (text, score)) in idx.iter().zip(decoder.decode(&out).expect("decode")) {
            assert_eq!(text, want[i][0].as_str().unwrap(), "crop {i}");
            assert!(
                (score - f(&want[i][1])).abs() < 1e-9,
                "crop {i}: score {score} vs {}",
                want[i][1]
            );
        }
    }
}

/// Plays RapidOCR's recorded model outputs back to the pipeline executor: the detector's
/// probability map, and per crop its row of the recorded classifier and recognizer batches.
struct Recorded {
    det_shape: Vec<usize>,
    det: Tensor,
    cls: Vec<Vec<f32>>,
    rec: Vec<Tensor>,
    calls: [usize; 3],
    in_models: std::time::Duration,
}

impl texstream::pipeline::ModelRunner for Recorded {
    fn run_model(
        &mut self,
        call: texstream::pipeline::ModelCall<'_>,
    ) -> Result<Vec<texstream::Tensor>, Box<dyn std::error::Error + Send + Sync>> {
        let t0 = std::time::Instant::now();
        let i = self.calls[call.model];
        self.calls[call.model] += 1;
        let (shape, data) = match call.model {
            0 => {
                let x = call.inputs[0].1;
                if x.shape() != self.det_shape.as_slice() {
                    return Err(format!(
                        "det input {:?}, RapidOCR had {:?}",
                        x.shape(),
                        self.det_shape
                    )
                    .into());
                }
                (self.det.shape.clone(), self.det.data.clone())
            }
            1 => (vec![1, 2], self.cls[i].clone()),
            _ => (self.rec[i].shape.clone(), self.rec[i].data.clone()),
        };
        self.in_models += t0.elapsed();
        Ok(vec![texstream::Tensor::f32(shape, data)?])
    }
}

/// Batch rows → one entry per crop: `batches[k]` holds the crops `plan_batches(crops, 6)[k]`.
fn per_crop<T: Clone>(crops: &[BgrImage], rows: impl Fn(usize, usize) -> T) -> Vec<T> {
    let mut out: Vec<Option<T>> = vec![None; crops.len()];
    for (k, idx) in plan_batches(crops, 6).iter().enumerate() {
        for (r, &i) in idx.iter().enumerate() {
            out[i] = Some(rows(k, r));
        }
    }
    out.into_iter()
        .map(|x| x.expect("every crop in a batch"))
        .collect()
}

/// The PP-OCR pipeline as the workload language writes it, run by the pipeline executor with
/// RapidOCR's recorded model outputs in place of the models: the lines equal RapidOCR's.
#[test]
fn pipeline_with_reference_model_outputs_reproduces_rapidocr() {
    use texstream::pipeline::{execute, ModelPorts, PipelineGraph};
    let Some(rec) = reference("page") else { return };
    let Some(img) = source_image(&rec) else {
        return;
    };
    let det_shape = shape(&rec["det_input"]["shape"]);
    let (h, w) = (det_shape[2], det_shape[3]);
    let text = format!(
        r#"Workload(name: "ocr-replay", cap: "1GiB", models: [
            ModelSpec(name: "det", source: Synthetic(Uniform(layers: 1, bytes_per_layer: "4KiB", compute_per_layer_us: 1.0))),
            ModelSpec(name: "cls", source: Synthetic(Uniform(layers: 1, bytes_per_layer: "4KiB", compute_per_layer_us: 1.0))),
            ModelSpec(name: "rec", source: Synthetic(Uniform(layers: 1, bytes_per_layer: "4KiB", compute_per_layer_us: 1.0))),
        ], pipelines: [PipelineSpec(name: "ocr", steps: [
            ImageLoad(output: "frame", source: "image"),
            Normalize(input: "frame", output: "det_in", mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]),
            Run(model: "det", inputs: {{"x": "det_in"}}, outputs: {{"y": "prob"}}),
            OcrBoxes(input: "prob", output: "boxes"),
            CropRotate(image: "frame", boxes: "boxes", output: "crops"),
            TextlineTensors(input: "crops", output: "cls_in", kind: Classifier, height: 48, width: 192),
            Run(model: "cls", inputs: {{"x": "cls_in"}}, outputs: {{"y": "angles"}},
                fan_out: PerItem(over: "cls_in", expected: 8, max: 64)),
            AngleFix(crops: "crops", scores: "angles", output: "upright"),
            TextlineTensors(input: "upright", output: "rec_in", kind: Recognizer, height: 48, width: 320),
            Run(model: "rec", inputs: {{"x": "rec_in"}}, outputs: {{"y": "logits"}},
                fan_out: PerItem(over: "rec_in", expected: 8, max: 64)),
            CtcDecode(input: "logits", boxes: "boxes", output: "text", dict: "{dict}"),
        ])])"#,
        dict = data("rec_dict.txt").display()
    );
    let w_ =
        texstream::workload::parse_workload(&text, Path::new("ocr-replay.ron")).expect("workload");
    let port = |n: &str, s: Vec<usize>| (n.to_string(), s);
    let ports = vec![
        ModelPorts {
            name: "det".into(),
            inputs: vec![port("x", vec![1, 3, h, w])],
            outputs: vec![port("y", vec![1, 1, h, w])],
            metadata: Default::default(),
            cache_len: None,
        },
        ModelPorts {
            name: "cls".into(),
            inputs: vec![port("x", vec![1, 3, 48, 192])],
            outputs: vec![port("y", vec![1, 2])],
            metadata: Default::default(),
            cache_len: None,
        },
        ModelPorts {
            name: "rec".into(),
            inputs: vec![port("x", vec![1, 3, 48, 320])],
            outputs: vec![port("y", vec![1, 40, 6625])],
            metadata: Default::default(),
            cache_len: None,
        },
    ];
    let graph = PipelineGraph::build(&w_, &w_.spec.pipelines[0], &ports).expect("graph");
    let crops: Vec<BgrImage> = (0..rec["cls_rotated"].as_array().expect("cls").len())
        .map(|i| png(&format!("page_crop{i}.png")))
        .collect();
    let cls_rows = per_crop(&crops, |k, r| {
        rec["cls_batches"][k]["output"][r]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| f(v) as f32)
            .collect::<Vec<f32>>()
    });
    let upright = classified_crops(&rec);
    let rec_rows = per_crop(&upright, |k, r| {
        let b = rec_output(&rec["rec_batches"][k]);
        let (t, c) = (b.shape[1], b.shape[2]);
        Tensor::new(vec![1, t, c], b.data[r * t * c..(r + 1) * t * c].to_vec()).unwrap()
    });
    let mut runner = Recorded {
        det_shape: det_shape.clone(),
        det: prob_map("page_det_prob.png"),
        cls: cls_rows,
        rec: rec_rows,
        calls: [0; 3],
        in_models: std::time::Duration::ZERO,
    };
    let mut inputs = texstream::Values::new();
    let bytes = std::fs::read(root().join("models/images/page.png")).expect("page.png");
    inputs.insert(
        "image".into(),
        texstream::Value::Image(texstream::Image::decode(&bytes).expect("decode")),
    );
    let started = std::time::Instant::now();
    let ex = execute(&graph, inputs, &mut runner, &|| None).expect("pipeline");
    eprintln!(
        "pipeline CPU steps on page.png: {:.1} ms (excluding {:.1} ms in the recorded models)",
        (started.elapsed() - runner.in_models).as_secs_f64() * 1e3,
        runner.in_models.as_secs_f64() * 1e3
    );
    let _ = img;
    let lines = match ex.outputs.get("text") {
        Some(texstream::Value::TextLines(l)) => l.clone(),
        other => panic!("no text lines: {other:?}"),
    };
    let want = rec["final"].as_array().unwrap();
    let got: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    let exp: Vec<&str> = want.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(got, exp);
    for (l, w) in lines.iter().zip(want) {
        assert!((l.score - f(&w["score"])).abs() < 1e-9);
        assert!(
            iou(&l.points, &quad(&w["box"])) > 0.9,
            "{:?} vs {}",
            l.points,
            w["box"]
        );
    }
    assert_eq!(runner.calls, [1, crops.len(), crops.len()]);
}

// ---- Cases with hand-computed answers (no reference data needed) ----

#[test]
fn ctc_collapses_repeats_drops_blank_and_appends_space() {
    let dict: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
    let d = CtcDecoder::new(&dict); // classes: blank, a, b, " "
    let steps = [1usize, 1, 0, 1, 2, 3, 3, 0];
    let mut probs = vec![0.0f32; steps.len() * 4];
    for (t, &c) in steps.iter().enumerate() {
        probs[t * 4 + c] = 0.5 + 0.05 * t as f32;
    }
    let (text, score) = d.decode_one(&probs, steps.len()).unwrap();
    assert_eq!(text, "aab ");
    // Kept steps 0, 3, 4, 5 -> 0.5, 0.65, 0.7, 0.75.
    assert!((score - 0.65).abs() < 1e-9, "{score}");
    let (empty, s0) = d.decode_one(&[1.0, 0.0, 0.0, 0.0], 1).unwrap();
    assert_eq!((empty.as_str(), s0), ("", 0.0));
    assert!(d.decode_one(&[1.0, 0.0, 0.0], 1).is_err());
}

#[test]
fn dictionary_split_follows_python_splitlines() {
    assert_eq!(
        dict_from_metadata("a\nb\r\nc\rd\u{2028}e\n"),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(dict_from_metadata("x\n\ny"), ["x", "", "y"]);
}

#[test]
fn resize_same_size_is_identity_and_constant_stays_constant() {
    let img = BgrImage::filled(37, 11, [10, 200, 255]);
    assert_eq!(resize_linear(&img, 37, 11), img);
    let up = resize_linear(&img, 101, 48);
    assert!(up.data.chunks_exact(3).all(|p| p == [10, 200, 255]));
    let down = resize_linear(&img, 5, 3);
    assert!(down.data.chunks_exact(3).all(|p| p == [10, 200, 255]));
}

#[test]
fn rotations_move_pixels_where_numpy_and_opencv_do() {
    // 3 wide, 2 high; pixel value = 10*y + x in all channels.
    let img = BgrImage::from_gray(3, 2, &[0, 1, 2, 10, 11, 12]).unwrap();
    let r = img.rotate_180();
    assert_eq!(r.pixel(0, 0)[0], 12);
    assert_eq!(r.pixel(2, 1)[0], 0);
    let q = img.rotate_90_ccw(); // np.rot90: first row becomes the last column read upwards
    assert_eq!((q.width, q.height), (2, 3));
    assert_eq!(q.pixel(0, 0)[0], 2);
    assert_eq!(q.pixel(1, 0)[0], 12);
    assert_eq!(q.pixel(0, 2)[0], 0);
}

#[test]
fn axis_aligned_crop_copies_pixels_and_tall_crops_turn() {
    let (w, h) = (40usize, 30usize);
    let gray: Vec<u8> = (0..w * h)
        .map(|i| ((i % w) * 3 + (i / w) * 5) as u8)
        .collect();
    let img = BgrImage::from_gray(w, h, &gray).unwrap();
    // Integer box: the perspective map is a pure translation, so cubic sampling hits pixels exactly.
    let b = [[5.0, 4.0], [25.0, 4.0], [25.0, 14.0], [5.0, 14.0]];
    let c = get_rotate_crop_image(&img, &b).unwrap();
    assert_eq!((c.width, c.height), (20, 10));
    for y in 0..10 {
        for x in 0..20 {
            assert_eq!(c.pixel(x, y), img.pixel(x + 5, y + 4), "({x},{y})");
        }
    }
    let tall = [[5.0, 2.0], [11.0, 2.0], [11.0, 22.0], [5.0, 22.0]];
    let t = get_rotate_crop_image(&img, &tall).unwrap();
    assert_eq!((t.width, t.height), (20, 6));
    // After np.rot90 the crop's top-right pixel (x=5, y=0) of the 6x20 patch is at (0, 0).
    assert_eq!(t.pixel(0, 0), img.pixel(10, 2));
}

#[test]
fn db_finds_a_synthetic_text_bar() {
    // A filled rectangle of probability 0.9 on a 64x128 map: one box, expanded by the unclip distance
    // and scaled 2x.
    let (h, w) = (64usize, 128usize);
    let mut p = vec![0.0f32; h * w];
    for y in 20..30 {
        for x in 10..100 {
            p[y * w + x] = 0.9;
        }
    }
    let prob = Tensor::new(vec![1, 1, h, w], p).unwrap();
    let boxes = db_postprocess(&prob, h * 2, w * 2, &DbParams::default()).unwrap();
    assert_eq!(boxes.len(), 1, "{boxes:?}");
    let b = &boxes[0];
    // Scored over the dilated 91 x 11 px rectangle, 90 x 10 of which hold 0.9.
    assert!((b.score - 0.9 * 900.0 / 1001.0).abs() < 1e-6, "{}", b.score);
    // Dilated mask spans x 10..=100, y 20..=30: contour rect 90 x 10, d = 900*1.6/200 = 7.2.
    let want = [[2.8, 12.8], [107.2, 12.8], [107.2, 37.2], [2.8, 37.2]]
        .map(|q: [f32; 2]| [q[0] * 2.0, q[1] * 2.0]);
    for (g, e) in b.points.iter().zip(&want) {
        assert!(
            (g[0] - e[0]).abs() <= 2.0 && (g[1] - e[1]).abs() <= 2.0,
            "{:?} vs {want:?}",
            b.points
        );
    }
}

#[test]
fn decode_rejects_garbage_with_a_clear_error() {
    let e = decode_image(b"not an image", "x.bin")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.bin"), "{e}");
    let missing = load_image(Path::new("/nonexistent/ocr.png"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("/nonexistent/ocr.png"), "{missing}");
    let _ = ops::OcrError::Invalid(String::new());
}

#[test]
fn image_loading_matches_rapidocr_loadimage() {
    let p = data("loader.json");
    let Ok(s) = std::fs::read_to_string(&p) else {
        eprintln!(
            "SKIPPED: {} missing; run `.venv/bin/python scripts/ocr_reference.py`",
            p.display()
        );
        return;
    };
    let want: Value = serde_json::from_str(&s).expect("loader.json parses");
    for (name, max_ok) in [("tiny_rgba.png", 0u8), ("tiny_la.png", 0), ("tiny.jpg", 2)] {
        let img = png(name);
        let rows = want[name].as_array().expect("rows");
        assert_eq!(
            (img.height, img.width),
            (rows.len(), rows[0].as_array().unwrap().len()),
            "{name}"
        );
        let flat: Vec<u8> = rows
            .iter()
            .flat_map(|r| {
                r.as_array().unwrap().iter().flat_map(|p| {
                    p.as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_u64().unwrap() as u8)
                })
            })
            .collect();
        let reference = BgrImage::new(img.width, img.height, flat).unwrap();
        let (max, mean) = image_diff(&img, &reference);
        eprintln!("{name}: max abs diff {max}, mean {mean:.4}");
        // JPEG: jpeg-decoder and libjpeg-turbo (PIL) may round the IDCT/upsampling differently.
        assert!(max <= max_ok, "{name}: differs from RapidOCR by {max}");
    }
}
