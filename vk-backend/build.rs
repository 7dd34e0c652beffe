//! Compiles every `shaders/*.comp` (repo root) to SPIR-V with glslc, once per precision
//! (`-DFMT=rgba16f` and `-DFMT=rgba32f`) and per activation storage (images, and storage buffers
//! with `-DTENSOR_STORAGE_BUFFER`), and generates `shaders.rs` embedding them. Shaders that read
//! the weight atlas (they include `weights.glsl`, directly or through another include) also get
//! a mixed variant: fp32 activations over an fp16 atlas (`-DWFMT=rgba16f`). Shaders whose source
//! names `CACHE_VARIANT` (they bind a key/value cache with `TENSOR_*_CACHE`) are also built as
//! `<stem>_kv16`, fp32 image activations with the cache's images `rgba16f` (`-DCACHE_HALF=1`):
//! a decoder's cache at half the bytes under fp32 activations.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let shader_dir = manifest.join("..").join("shaders");
    let include_dir = shader_dir.join("include");
    println!("cargo:rerun-if-changed={}", shader_dir.display());
    println!("cargo:rerun-if-changed={}", include_dir.display());
    println!("cargo:rerun-if-env-changed=GLSLC");

    let glslc = std::env::var("GLSLC").unwrap_or_else(|_| "glslc".to_string());
    if Command::new(&glslc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("glslc not found: install it with `sudo apt-get install glslc`");
        println!("cargo:warning=glslc not found: install it with `sudo apt-get install glslc`");
        std::process::exit(1);
    }

    let mut sources: Vec<PathBuf> = std::fs::read_dir(&shader_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "comp"))
                .collect()
        })
        .unwrap_or_default();
    sources.sort();
    for entry in std::fs::read_dir(&include_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }

    let mut jobs = Vec::new();
    let mut embedded: Vec<(String, Variant)> = Vec::new();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let stem = src
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let reads_weights = includes_weights(src, &include_dir, 0);
        for v in VARIANTS
            .iter()
            .filter(|v| v.precision == v.weights || reads_weights)
        {
            let dst = out.join(format!("{stem}.{}.spv", v.suffix));
            jobs.push((src.clone(), dst, *v, false));
            embedded.push((stem.clone(), *v));
        }
        // The fp16-cache build: fp32 image activations only (fp16 activations keep their cache
        // at fp16 anyway; buffer-fallback caches stay at the activations' precision).
        let has_cache_variant = std::fs::read_to_string(src)
            .map(|t| t.contains("CACHE_VARIANT"))
            .unwrap_or(false);
        if has_cache_variant {
            let v = VARIANTS[1];
            let kv_stem = format!("{stem}_kv16");
            jobs.push((
                src.clone(),
                out.join(format!("{kv_stem}.{}.spv", v.suffix)),
                v,
                true,
            ));
            embedded.push((kv_stem, v));
        }
    }
    // Run glslc in small parallel batches (CI has 2 cores).
    let mut failed = Vec::new();
    for batch in jobs.chunks(4) {
        let children: Vec<_> = batch
            .iter()
            .map(|(src, dst, v, cache_half)| {
                let mut cmd = Command::new(&glslc);
                cmd.arg("--target-env=vulkan1.2")
                    .arg("-O")
                    .arg(format!("-I{}", include_dir.display()))
                    .arg(format!("-DFMT={}", v.fmt))
                    .arg(format!("-DWFMT={}", v.wfmt))
                    .arg(format!("-DTENSOR_HALF={}", u8::from(v.precision == "F16")));
                if v.storage == "Buffer" {
                    cmd.arg("-DTENSOR_STORAGE_BUFFER");
                }
                if *cache_half {
                    cmd.arg("-DCACHE_HALF=1");
                }
                let child = cmd
                    .arg(src)
                    .arg("-o")
                    .arg(dst)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn();
                let what = format!(
                    "FMT={}, WFMT={}, {}{}",
                    v.fmt,
                    v.wfmt,
                    v.storage,
                    if *cache_half { ", CACHE_HALF" } else { "" }
                );
                (src, what, child)
            })
            .collect();
        for (src, what, child) in children {
            match child.and_then(|c| c.wait_with_output()) {
                Ok(o) if o.status.success() => {}
                Ok(o) => failed.push(format!(
                    "{} ({what}):\n{}{}",
                    src.display(),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )),
                Err(e) => failed.push(format!("{}: could not run glslc: {e}", src.display())),
            }
        }
    }
    if !failed.is_empty() {
        eprintln!("shader compilation failed:\n{}", failed.join("\n"));
        std::process::exit(1);
    }

    let mut gen = String::from("// Generated by vk-backend/build.rs.\n");
    gen.push_str(
        "/// Names (file stems) of every embedded shader.\npub const SHADER_NAMES: &[&str] = &[\n",
    );
    let mut stems: Vec<&str> = embedded.iter().map(|(s, _)| s.as_str()).collect();
    stems.dedup();
    for stem in stems {
        let _ = writeln!(gen, "    {stem:?},");
    }
    gen.push_str("];\n\n/// SPIR-V of a shader's image variant (weights at the activations' precision).\npub fn spirv(name: &str, precision: crate::layout::Precision) -> Option<&'static [u8]> {\n    spirv_variant(name, precision, precision, crate::pipeline::StorageKind::Image)\n}\n\n");
    gen.push_str("/// SPIR-V of a shader variant (activation precision x atlas precision x activation storage).\npub fn spirv_variant(\n    name: &str,\n    precision: crate::layout::Precision,\n    weights: crate::layout::Precision,\n    storage: crate::pipeline::StorageKind,\n) -> Option<&'static [u8]> {\n    match (name, precision, weights, storage) {\n");
    for (stem, v) in &embedded {
        let path = spv_path(&out, stem, v.suffix);
        let _ = writeln!(
            gen,
            "        ({stem:?}, crate::layout::Precision::{}, crate::layout::Precision::{}, crate::pipeline::StorageKind::{}) => Some(include_bytes!({path:?})),",
            v.precision, v.weights, v.storage
        );
    }
    gen.push_str("        _ => None,\n    }\n}\n");
    // The file-name suffix of each variant, for SPIR-V read from a directory instead
    // (DeviceOptions::shader_dir).
    gen.push_str("\n/// The suffix naming a variant's SPIR-V (`<name>.<suffix>.spv`), as this build names the embedded\n/// files; `None` for a combination no kernel is built in.\npub fn variant_suffix(\n    precision: crate::layout::Precision,\n    weights: crate::layout::Precision,\n    storage: crate::pipeline::StorageKind,\n) -> Option<&'static str> {\n    match (precision, weights, storage) {\n");
    for v in VARIANTS {
        let _ = writeln!(
            gen,
            "        (crate::layout::Precision::{}, crate::layout::Precision::{}, crate::pipeline::StorageKind::{}) => Some({:?}),",
            v.precision, v.weights, v.storage, v.suffix
        );
    }
    gen.push_str("        _ => None,\n    }\n}\n");
    if let Err(e) = std::fs::write(out.join("shaders.rs"), gen) {
        eprintln!("writing shaders.rs: {e}");
        std::process::exit(1);
    }
}

/// One compiled variant of a shader.
#[derive(Clone, Copy)]
struct Variant {
    suffix: &'static str,
    /// Activation image format, and the `Precision` variant it stands for.
    fmt: &'static str,
    precision: &'static str,
    /// Weight atlas image format, and its `Precision` variant.
    wfmt: &'static str,
    weights: &'static str,
    /// `StorageKind` variant of the activation tensors.
    storage: &'static str,
}

const fn variant(
    suffix: &'static str,
    (fmt, precision): (&'static str, &'static str),
    (wfmt, weights): (&'static str, &'static str),
    storage: &'static str,
) -> Variant {
    Variant {
        suffix,
        fmt,
        precision,
        wfmt,
        weights,
        storage,
    }
}

const F16: (&str, &str) = ("rgba16f", "F16");
const F32: (&str, &str) = ("rgba32f", "F32");
const VARIANTS: [Variant; 6] = [
    variant("f16", F16, F16, "Image"),
    variant("f32", F32, F32, "Image"),
    variant("f16.buf", F16, F16, "Buffer"),
    variant("f32.buf", F32, F32, "Buffer"),
    // Mixed: fp32 activations, fp16 weights (only for shaders that read the atlas).
    variant("f32w16", F32, F16, "Image"),
    variant("f32w16.buf", F32, F16, "Buffer"),
];

/// Whether `src` includes `weights.glsl`, directly or through the repo's include files.
fn includes_weights(src: &Path, include_dir: &Path, depth: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(src) else {
        return false;
    };
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#include"))
        .filter_map(|rest| {
            rest.trim()
                .trim_matches(|c| c == '"' || c == '<' || c == '>')
                .split('"')
                .next()
                .map(str::to_string)
        })
        .any(|name| {
            name == "weights.glsl"
                || (depth < 8 && includes_weights(&include_dir.join(&name), include_dir, depth + 1))
        })
}

fn spv_path(out: &Path, stem: &str, suffix: &str) -> String {
    out.join(format!("{stem}.{suffix}.spv"))
        .display()
        .to_string()
}
