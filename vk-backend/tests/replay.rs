//! `Replay`: commands recorded once and submitted again. Each replay reads what the host put in
//! its staging since the last one; a recording that would take an image from UNDEFINED on
//! every run is refused, and a replay whose image was discarded since reports itself stale.

use vk_backend::testing::{assert_no_validation_messages, device, Rng};
use vk_backend::{Buffer, Precision, QueueKind, Recorder, Tensor};

#[test]
fn a_replayed_copy_reads_the_staging_of_each_run() {
    for shape in [&[1usize, 5, 7, 9][..], &[1, 1], &[1, 96]] {
        replayed_copy(shape);
    }
}

fn replayed_copy(shape: &[usize]) {
    let d = device();
    let n: usize = shape.iter().product();
    let t = Tensor::from_data(&d, "t", shape, Precision::F32, &vec![0.0; n]).unwrap();
    let bytes = t.physical_bytes();
    let up = Buffer::staging_upload(&d, "up", bytes).unwrap();
    let down = Buffer::staging_download(&d, "down", bytes).unwrap();
    let mut rec = Recorder::new_replay(&d, QueueKind::Compute).unwrap();
    rec.copy_buffer_to_tensor(&up, 0, &t).unwrap();
    rec.copy_tensor_to_buffer(&t, &down, 0).unwrap();
    let mut replay = rec.finish_replay().unwrap();
    for seed in 0..3 {
        let data = Rng::new(seed).vec(n, -4.0, 4.0);
        up.with_mapped(|m| t.pack_bytes_into(&data, m))
            .unwrap()
            .unwrap();
        replay.submit_and_wait().unwrap();
        let back = t.unpack_bytes(&down.read(0, bytes as usize).unwrap());
        assert_eq!(back, data, "{shape:?} replay {seed}");
    }
    // Discarded (as an arena handed to another model is), the image needs its transition again.
    assert!(replay.is_current());
    t.discard();
    assert!(!replay.is_current());
    assert!(replay.submit_and_wait().is_err());
    assert_no_validation_messages(&d);
}

#[test]
fn a_recording_that_initializes_images_is_refused() {
    let d = device();
    let t = Tensor::new(&d, "fresh", &[1, 4, 8, 8], Precision::F16).unwrap();
    let up = Buffer::staging_upload(&d, "up", t.physical_bytes()).unwrap();
    let mut rec = Recorder::new_replay(&d, QueueKind::Compute).unwrap();
    rec.copy_buffer_to_tensor(&up, 0, &t).unwrap();
    let err = rec.finish_replay().err().expect("refused");
    assert!(err.to_string().contains("initialize"), "{err}");
    assert_no_validation_messages(&d);
}
