//! Record once, replay per run: an [`Executable`]'s second run records its uploads (from
//! staging buffers it keeps), every node and its downloads (into buffers it keeps) into one
//! reusable command buffer; that run and every later one only packs the inputs into the kept
//! staging, submits the recording again and unpacks the outputs. The first run records as
//! usual, which initializes every image, so the recording holds no layout transition that would
//! discard state between runs.
use std::time::Instant;

use vk_backend::{Buffer, QueueKind, Recorder, Replay, Tensor};

use super::error::{vk, Result};
use super::executor::{read_downloads, Download, Executable, HostTensor, NamedOutputs, RunTimings};

/// The recorded run and the buffers its commands read and write.
pub(crate) struct RunReplay {
    commands: Replay,
    /// Per graph input, in the graph's order: its tensor and the staging its upload reads.
    uploads: Vec<(Tensor, Buffer)>,
    /// Per input, its packed bytes: packed in host memory, then copied into the staging in one
    /// sequential write (the staging may be write-combined device memory, where the packer's
    /// scattered lane writes cost more than the copy; on the H200 the detector's input took
    /// 2.37 ms packed in place against 1.68 ms through a host buffer).
    packed: Vec<Vec<u8>>,
    downloads: Vec<Download>,
    stamps: Option<vk_backend::TimestampQueries>,
}

impl Executable {
    /// Records the run for replay.
    fn record_replay(&mut self) -> Result<RunReplay> {
        let g = self.header.graph.clone();
        let stamps = self.run_stamps()?;
        let mut rec = Recorder::new_replay(&self.device, QueueKind::Compute)
            .map_err(vk("recording a run for replay"))?;
        if let Some(q) = &stamps {
            rec.write_timestamp(q, 0).map_err(vk("run timestamp"))?;
        }
        let mut uploads = Vec::with_capacity(g.inputs.len());
        for p in &g.inputs {
            let t = self.port_tensor(p)?;
            let staging = Buffer::staging_upload(&self.device, "input staging", t.physical_bytes())
                .map_err(vk("input staging"))?;
            rec.copy_buffer_to_tensor(&staging, 0, &t)
                .map_err(vk(format!("uploading input `{}`", p.name)))?;
            uploads.push((t, staging));
        }
        rec.use_weights(&self.weights.atlas);
        for ni in 0..g.nodes.len() {
            self.record_node(&mut rec, ni)?;
        }
        let mut downloads = Vec::with_capacity(g.outputs.len());
        for p in &g.outputs {
            let t = self.port_tensor(p)?;
            let size = vk_backend::kernels::readback_bytes(&t);
            let staging = Buffer::staging_download(&self.device, "output staging", size)
                .map_err(vk("output staging"))?;
            vk_backend::kernels::readback_into(&mut rec, &t, &staging, 0)
                .map_err(vk(format!("downloading output `{}`", p.name)))?;
            downloads.push(Download {
                name: p.name.clone(),
                shape: g.port_shape(p).to_vec(),
                tensor: t,
                staging,
            });
        }
        if let Some(q) = &stamps {
            rec.write_timestamp(q, 1).map_err(vk("run timestamp"))?;
        }
        let commands = rec
            .finish_replay()
            .map_err(vk("recording a run for replay"))?;
        Ok(RunReplay {
            commands,
            packed: uploads
                .iter()
                .map(|(t, _)| vec![0; t.physical_bytes() as usize])
                .collect(),
            uploads,
            downloads,
            stamps,
        })
    }

    /// The dispatches and barriers of the recorded run, once a run has been replayed.
    pub fn replay_counts(&self) -> Option<(u32, u32)> {
        let c = &self.replay.as_ref()?.commands;
        Some((c.dispatch_count(), c.barrier_count()))
    }

    /// A run that submits the recorded commands again (recording them first when there are
    /// none, or when an image they use was discarded since).
    pub(crate) fn run_replayed(&mut self, feeds: &[&HostTensor]) -> Result<NamedOutputs> {
        let t0 = Instant::now();
        if self
            .replay
            .as_ref()
            .is_some_and(|r| !r.commands.is_current())
        {
            self.replay = None;
        }
        let mut replay = match self.replay.take() {
            Some(r) => r,
            None => self.record_replay()?,
        };
        let names = self.header.graph.inputs.iter().map(|p| &p.name);
        let inputs = replay.uploads.iter().zip(replay.packed.iter_mut());
        for (((t, staging), bytes), (host, name)) in inputs.zip(feeds.iter().zip(names)) {
            t.pack_bytes_into(&host.data, bytes)
                .and_then(|()| staging.write(0, bytes))
                .map_err(vk(format!("input `{name}`")))?;
        }
        let t1 = Instant::now();
        let submitted = replay
            .commands
            .submit_and_wait()
            .map_err(vk("running the model"));
        // Kept even after a failed run: the recording does not depend on the inputs.
        let outcome = submitted.and_then(|()| {
            self.device
                .check_validation()
                .map_err(vk("Vulkan validation"))
        });
        let t2 = Instant::now();
        let out = outcome.and_then(|()| read_downloads(&replay.downloads));
        let gpu_ns = replay.stamps.as_ref().and_then(|q| q.elapsed_ns(0, 1).ok());
        self.replay = Some(replay);
        let out = out?;
        self.last_timings = RunTimings {
            record: t1 - t0,
            gpu: t2 - t1,
            readback: t2.elapsed(),
            gpu_ns,
            replayed: true,
        };
        Ok(out)
    }
}
