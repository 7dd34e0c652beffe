//! Device bring-up: features, queues, memory accounting + cap, timeline semaphores, validation.

use vk_backend::testing::{assert_no_validation_messages, device};
use vk_backend::{
    vk, Buffer, MemoryCategory, MemoryLocation, QueueKind, Recorder, SemaphoreSignal,
    SemaphoreWait, Tensor, TimelineSemaphore, VkError,
};

#[test]
fn opens_and_reports() {
    let d = device();
    let f = d.features();
    assert!(f.timeline_semaphore);
    let l = d.image_limits();
    assert!(l.max_image_dimension_2d >= 4096 && l.max_image_array_layers >= 256);
    // The transfer role always resolves to a queue.
    let _ = d.queue(QueueKind::Transfer).family;
    if f.memory_budget {
        assert!(d.memory_budget().is_some_and(|b| !b.is_empty()));
    } else {
        assert!(d.memory_budget().is_none());
    }
    assert_no_validation_messages(&d);
}

#[test]
fn memory_counting_and_cap() {
    let d = device();
    // Other tests in this binary allocate concurrently: measure our own delta on a private cap.
    let before = d.memory_stats();
    let b = Buffer::new(
        &d,
        "counted scratch",
        1 << 20,
        vk::BufferUsageFlags::STORAGE_BUFFER,
        MemoryLocation::GpuOnly,
        MemoryCategory::Scratch,
    )
    .unwrap();
    let mid = d.memory_stats();
    assert!(
        mid.category(MemoryCategory::Scratch)
            >= before.category(MemoryCategory::Scratch) + (1 << 20)
    );
    assert!(mid.peak_bytes >= mid.current_bytes);
    drop(b);
    let after = d.memory_stats();
    assert!(
        after.category(MemoryCategory::Scratch)
            <= mid.category(MemoryCategory::Scratch) - (1 << 20)
    );
    assert_no_validation_messages(&d);
}

#[test]
fn cap_rejects_before_vulkan() {
    // A private device so the cap does not disturb other tests.
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
        memory_cap: Some(4 << 20),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    let t = Tensor::new(&d, "fits", &[1, 4, 256, 256], vk_backend::Precision::F16).unwrap(); // 512 KiB
    let err = Tensor::new(
        &d,
        "too big",
        &[1, 64, 256, 256],
        vk_backend::Precision::F16,
    )
    .unwrap_err();
    assert!(matches!(err, VkError::CapExceeded { .. }), "{err}");
    assert!(err.to_string().contains("too big"));
    assert!(d.memory_stats().current_bytes <= 4 << 20);
    drop(t);
    assert_eq!(d.memory_stats().current_bytes, 0);
    assert_no_validation_messages(&d);
}

#[test]
fn timeline_semaphores_order_gpu_work() {
    let d = device();
    let sem = TimelineSemaphore::new(&d, 0).unwrap();
    let data: Vec<f32> = (0..4 * 8 * 8).map(|i| i as f32).collect();
    let t = Tensor::new(&d, "sem tensor", &[4, 8, 8], vk_backend::Precision::F32).unwrap();
    let staging = Buffer::staging_upload(&d, "sem staging", t.physical_bytes()).unwrap();
    staging.write(0, &t.pack_bytes(&data).unwrap()).unwrap();
    // Upload on the transfer role, signal 1; download on compute waits for 1 on the GPU side.
    let mut up = Recorder::new(&d, QueueKind::Transfer).unwrap();
    up.copy_buffer_to_tensor(&staging, 0, &t).unwrap();
    let back = Buffer::staging_download(&d, "sem back", t.physical_bytes()).unwrap();
    let mut down = Recorder::new(&d, QueueKind::Compute).unwrap();
    down.copy_tensor_to_buffer(&t, &back, 0).unwrap();
    let wait = [SemaphoreWait {
        semaphore: sem.clone(),
        value: 1,
        stage: vk::PipelineStageFlags::TRANSFER,
    }];
    let sig2 = [SemaphoreSignal {
        semaphore: sem.clone(),
        value: 2,
    }];
    let sig1 = [SemaphoreSignal {
        semaphore: sem.clone(),
        value: 1,
    }];
    let (s1, s2) = if d.has_dedicated_transfer_queue() {
        // Wait-before-signal across queues: the consumer must not run before the producer.
        let s2 = down.submit(&wait, &sig2).unwrap();
        assert!(
            !sem.wait(2, 1_000_000).unwrap(),
            "consumer ran before its wait was satisfied"
        );
        (up.submit(&[], &sig1).unwrap(), s2)
    } else {
        // One queue: a wait-before-signal on the same queue could deadlock; submit in order.
        let s1 = up.submit(&[], &sig1).unwrap();
        (s1, down.submit(&wait, &sig2).unwrap())
    };
    assert!(sem.wait(2, 5_000_000_000).unwrap());
    s1.wait().unwrap();
    s2.wait().unwrap();
    assert_eq!(
        t.unpack_bytes(&back.read(0, t.physical_bytes() as usize).unwrap()),
        data
    );
    // A GPU wait released by a host signal.
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.clear_tensor(&t).unwrap();
    let s3 = rec
        .submit(
            &[SemaphoreWait {
                semaphore: sem.clone(),
                value: 5,
                stage: vk::PipelineStageFlags::TRANSFER,
            }],
            &[SemaphoreSignal {
                semaphore: sem.clone(),
                value: 6,
            }],
        )
        .unwrap();
    assert!(!sem.wait(6, 1_000_000).unwrap());
    sem.signal(5).unwrap();
    assert!(sem.wait(6, 5_000_000_000).unwrap());
    s3.wait().unwrap();
    assert!(t.download().unwrap().iter().all(|&v| v == 0.0));
    assert_no_validation_messages(&d);
}

#[test]
fn bad_selector_is_a_clear_error() {
    let err = vk_backend::Device::new(&vk_backend::DeviceOptions {
        device: Some("no-such-gpu-xyz".into()),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap_err();
    assert!(matches!(err, VkError::NoDevice(_)));
    assert!(err.to_string().contains("no-such-gpu-xyz"));
}

#[test]
fn validation_layer_records_errors() {
    // A private device: the deliberate error must not leak into the shared one.
    let d = match vk_backend::Device::new(&vk_backend::DeviceOptions {
        validation: true,
        ..vk_backend::DeviceOptions::from_env()
    }) {
        Ok(d) => d,
        Err(VkError::NoValidationLayer) => return, // layer not installed: nothing to check
        Err(e) => panic!("{e}"),
    };
    assert!(d.validation_enabled());
    // Zero-sized buffers are invalid (VUID-VkBufferCreateInfo-size-00912).
    let ci = vk::BufferCreateInfo::default()
        .size(0)
        .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
    // SAFETY: deliberately invalid create info, destroyed right after if it was created.
    unsafe {
        if let Ok(b) = d.raw().create_buffer(&ci, None) {
            d.raw().destroy_buffer(b, None);
        }
    }
    assert!(!d.validation_messages().is_empty());
    assert!(d.check_validation().is_err());
}

/// A finished submission hands its reset command pool to the next recorder: a steady run of
/// submissions creates no pool after the first (each new pool's first recordings touch fresh
/// driver memory, which the streamed runs' host time must not pay per batch).
#[test]
fn finished_submissions_hand_their_command_pools_on() {
    // A device of its own: the other tests' recorders would count on the shared one.
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions::from_env()).unwrap();
    let t = Tensor::new(&d, "pool tensor", &[4, 8, 8], vk_backend::Precision::F32).unwrap();
    let record = || {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.clear_tensor(&t).unwrap();
        rec
    };
    let before = d.command_pools_created();
    // Two recorders open at once need two pools.
    let (a, b) = (record(), record());
    assert_eq!(d.command_pools_created() - before, 2);
    a.submit_and_wait().unwrap();
    b.submit_and_wait().unwrap();
    for _ in 0..20 {
        record().submit_and_wait().unwrap();
    }
    assert_eq!(
        d.command_pools_created() - before,
        2,
        "finished submissions' pools are reused"
    );
    assert_no_validation_messages(&d);
}
