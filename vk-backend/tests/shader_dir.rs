//! Kernels' SPIR-V read from a directory (`DeviceOptions::shader_dir`): a file named as the
//! build names the embedded variant replaces it (here the embedded bytes themselves, so the
//! results must still match a CPU reference), the device lists it, a file that is not SPIR-V
//! or is far too large fails with its path named, and a directory without the file leaves the
//! embedded code.

use std::path::PathBuf;

use vk_backend::kernels::{unary, UnaryOp};
use vk_backend::pipeline::StorageKind;
use vk_backend::testing::assert_no_validation_messages;
use vk_backend::{Device, DeviceOptions, Precision, QueueKind, Recorder, Tensor};

/// A fresh directory under the system's temporary one.
fn scratch(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("texstream-shader-dir-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn device_with(dir: &std::path::Path) -> Device {
    Device::new(&DeviceOptions {
        shader_dir: Some(dir.to_path_buf()),
        ..DeviceOptions::from_env()
    })
    .unwrap()
}

/// ReLU of `values` on `d` (fp32 images).
fn relu(d: &Device, values: &[f32]) -> vk_backend::Result<Vec<f32>> {
    let x = Tensor::from_data(d, "x", &[values.len()], Precision::F32, values)?;
    let mut rec = Recorder::new(d, QueueKind::Compute)?;
    let y = unary(&mut rec, UnaryOp::Relu, &x, "y")?;
    rec.submit_and_wait()?;
    y.download()
}

#[test]
fn spirv_from_a_directory_replaces_the_embedded_variant() {
    let values: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 7.0).collect();
    let want: Vec<f32> = values.iter().map(|v| v.max(0.0)).collect();

    let dir = scratch("copy");
    let suffix =
        vk_backend::shaders::variant_suffix(Precision::F32, Precision::F32, StorageKind::Image)
            .unwrap();
    let path = dir.join(format!("unary.{suffix}.spv"));
    std::fs::write(
        &path,
        vk_backend::shaders::spirv("unary", Precision::F32).unwrap(),
    )
    .unwrap();
    let d = device_with(&dir);
    assert_eq!(relu(&d, &values).unwrap(), want);
    assert_eq!(d.shader_overrides(), vec![path.clone()]);
    assert_no_validation_messages(&d);

    // Not SPIR-V: the error names the file.
    let bad = scratch("bad");
    let bad_path = bad.join(format!("unary.{suffix}.spv"));
    std::fs::write(&bad_path, b"not spir-v").unwrap();
    let d = device_with(&bad);
    let err = relu(&d, &values).unwrap_err().to_string();
    assert!(err.contains(&bad_path.display().to_string()), "{err}");
    assert!(d.shader_overrides().is_empty());

    // Far larger than any kernel (sparse, 17 MiB): refused before it is read, named.
    let huge = scratch("huge");
    let huge_path = huge.join(format!("unary.{suffix}.spv"));
    std::fs::File::create(&huge_path)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    let d = device_with(&huge);
    let err = relu(&d, &values).unwrap_err().to_string();
    assert!(err.contains(&huge_path.display().to_string()), "{err}");
    assert!(err.contains("bytes"), "{err}");
    assert!(d.shader_overrides().is_empty());

    // No file for the kernel: the embedded code.
    let empty = scratch("empty");
    let d = device_with(&empty);
    assert_eq!(relu(&d, &values).unwrap(), want);
    assert!(d.shader_overrides().is_empty());
    assert_no_validation_messages(&d);

    for dir in [dir, bad, huge, empty] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
