//! `texstream devices --json` and `texstream bench kernels --quick --json` end to end: the
//! binary runs, prints valid JSON with the documented fields, and exits 0.

use std::process::Command;

fn texstream(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_texstream"))
        .args(args)
        .output()
        .expect("run texstream");
    assert!(
        out.status.success(),
        "texstream {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn devices_json_lists_limits_queues_memory_features() {
    let v = texstream(&["devices", "--json"]);
    let devs = v.as_array().expect("array");
    assert!(!devs.is_empty());
    assert_eq!(
        devs.iter()
            .filter(|d| d["default_choice"] == serde_json::json!(true))
            .count(),
        1
    );
    for d in devs {
        assert!(d["name"].is_string() && d["api_version"].is_string());
        assert!(d["limits"]["max_image_dimension_2d"].as_u64().unwrap() >= 4096);
        assert!(d["limits"]["max_image_array_layers"].as_u64().unwrap() >= 256);
        let qf = d["queue_families"].as_array().unwrap();
        assert!(qf.iter().any(|q| q["flags"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("COMPUTE"))));
        assert!(qf.iter().all(|q| q["timestamp_valid_bits"].is_u64()));
        assert!(!d["memory_heaps"].as_array().unwrap().is_empty());
        assert!(!d["memory_types"].as_array().unwrap().is_empty());
        for f in [
            "shader_float16",
            "storage_buffer_16bit_access",
            "cooperative_matrix_khr",
            "cooperative_matrix_nv",
            "memory_budget",
            "subgroup_size_control",
        ] {
            assert!(d["features"][f].is_boolean(), "feature {f}");
        }
        assert!(d["extensions"]["VK_KHR_cooperative_matrix"].is_boolean());
    }
}

#[test]
fn bench_kernels_quick_json() {
    let v = texstream(&[
        "bench",
        "kernels",
        "--quick",
        "--runs",
        "1",
        "--copy-mib",
        "1",
        "--json",
        "--only",
        "unary",
    ]);
    let k = v["kernels"].as_array().unwrap();
    assert_eq!(k.len(), 1);
    assert!(k[0]["image"]["gflops"].as_f64().unwrap() > 0.0);
    assert!(k[0]["buffer"]["gflops"].as_f64().unwrap() > 0.0);
    let c = v["copies"].as_array().unwrap();
    assert!(c.iter().any(|c| {
        let w = c["what"].as_str().unwrap_or_default();
        w.starts_with("staging[") && w.ends_with("-> image")
    }));
}
