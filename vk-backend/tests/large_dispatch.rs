//! Per-texel kernels over tensors that need more than one row of workgroups (more than 65535
//! x 64 texels): every texel is written, in both precisions' layouts.
use vk_backend::kernels::{binary, unary, BinaryOp, UnaryOp};
use vk_backend::testing::{assert_no_validation_messages, device};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

/// Whisper tiny.en's attention scores have this shape. Texels past the first row of workgroups
/// used to stay unwritten: `global_id_1d` read `gl_WorkGroupSize` before the shader declared it.
#[test]
fn every_texel_of_a_large_tensor_is_written() {
    let d = device();
    // [1, 6, 1500, 1500]: 4.5 M texels, 70 313 workgroups of 64 (Whisper's attention scores).
    let shape = [1usize, 6, 1500, 1500];
    let n: usize = shape.iter().product();
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    // Integers below 2048 are exact in fp16 too.
    for precision in [Precision::F32, Precision::F16] {
        let a = Tensor::from_data(&d, "a", &shape, precision, &x).unwrap();
        let two = Tensor::from_data(&d, "two", &[1], precision, &[2.0]).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let y = binary(&mut rec, BinaryOp::Mul, &a, &two, "y").unwrap();
        let z = unary(&mut rec, UnaryOp::Neg, &a, "z").unwrap();
        rec.submit_and_wait().unwrap();
        let (y, z) = (y.download().unwrap(), z.download().unwrap());
        let bad_y = (0..n).find(|&i| y[i] != 2.0 * x[i]);
        let bad_z = (0..n).find(|&i| z[i] != -x[i]);
        assert_eq!(
            (bad_y, bad_z),
            (None, None),
            "first wrong element of Mul, Neg at {precision:?}"
        );
    }
    assert_no_validation_messages(&d);
}
