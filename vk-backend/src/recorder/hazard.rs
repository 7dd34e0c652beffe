//! Hazard tracking: the resources read and written since the last barrier, the barrier a
//! read-after-write, write-after-read or write-after-write needs, and the UNDEFINED → GENERAL
//! transition of an image's first use (images stay in GENERAL afterwards).

use foldhash::HashSet;

use ash::vk;

use super::command::Command;
use super::Recorder;
use crate::resource::{color_range, Image};

/// How a kernel uses a bound resource (drives barrier insertion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub(super) fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub(super) fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// Resource ids read and written since the last barrier.
#[derive(Debug, Default)]
pub(super) struct Hazards {
    written: HashSet<u64>,
    read: HashSet<u64>,
}

impl Hazards {
    /// Whether an operation reading `reads` and writing `writes` must wait for earlier work:
    /// it reads something written (RAW), or writes something read or written (WAR, WAW).
    pub(super) fn conflicts(&self, reads: &[u64], writes: &[u64]) -> bool {
        reads.iter().any(|r| self.written.contains(r))
            || writes
                .iter()
                .any(|w| self.written.contains(w) || self.read.contains(w))
    }

    pub(super) fn note(&mut self, reads: &[u64], writes: &[u64]) {
        self.read.extend(reads.iter().copied());
        self.written.extend(writes.iter().copied());
    }

    pub(super) fn clear(&mut self) {
        self.written.clear();
        self.read.clear();
    }
}

impl Recorder {
    /// The pipeline stages work on this recorder's queue runs in: a dedicated transfer queue
    /// supports no shader stage, so its barriers name only TRANSFER.
    pub(super) fn work_stages(&self) -> vk::PipelineStageFlags {
        if self.on_transfer_only_queue() {
            vk::PipelineStageFlags::TRANSFER
        } else {
            vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER
        }
    }

    /// The writes (`all == false`) or all accesses work on this recorder's queue makes.
    pub(super) fn work_access(&self, all: bool) -> vk::AccessFlags {
        let transfer = if all {
            vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE
        } else {
            vk::AccessFlags::TRANSFER_WRITE
        };
        if self.on_transfer_only_queue() {
            transfer
        } else if all {
            transfer | vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE
        } else {
            transfer | vk::AccessFlags::SHADER_WRITE
        }
    }

    /// Inserts a full memory barrier between everything before and after (compute + transfer).
    pub fn barrier(&mut self) {
        self.owed_barrier = false;
        let c = self.full_barrier();
        self.emit(c);
        self.hazards.clear();
        self.barriers += 1;
    }

    /// The full memory barrier [`Self::barrier`] emits, as a command.
    pub(super) fn full_barrier(&self) -> Command {
        let stages = self.work_stages();
        Command::MemoryBarrier {
            src_stage: stages,
            dst_stage: stages,
            src_access: self.work_access(false),
            dst_access: self.work_access(true),
        }
    }

    /// Declares the next operation's accesses; inserts a barrier on RAW/WAR/WAW hazards.
    pub(super) fn access(&mut self, reads: &[u64], writes: &[u64]) {
        if self.hazards.conflicts(reads, writes) {
            self.barrier();
        }
        self.hazards.note(reads, writes);
        if let Some(c) = &mut self.capture {
            c.note_access(reads, writes);
        }
    }

    /// Transitions an image to GENERAL the first time any recorder touches it.
    /// While capturing reusable commands the image is only noted: the recorder that executes
    /// them transitions it.
    pub(super) fn ensure_initialized(&mut self, image: &Image) {
        if let Some(c) = &mut self.capture {
            c.note_image(image);
            return;
        }
        if image.is_initialized() || self.init_ids.contains(&image.id()) {
            return;
        }
        // An image in shared memory may overlap one that earlier work (this or an earlier
        // submission) read or wrote: its transition waits for that work and its writes. A fresh
        // image of its own has nothing to wait for.
        let (src_stage, src_access) = if image.is_shared() {
            (self.work_stages(), self.work_access(false))
        } else {
            (
                vk::PipelineStageFlags::TOP_OF_PIPE,
                vk::AccessFlags::empty(),
            )
        };
        let b = vk::ImageMemoryBarrier::default()
            .src_access_mask(src_access)
            .dst_access_mask(self.work_access(true))
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::GENERAL)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .image(image.raw())
            .subresource_range(color_range(image.extent()[2]));
        let cmd = self.own_cmd();
        // SAFETY: recording state.
        unsafe {
            self.device.raw().cmd_pipeline_barrier(
                cmd,
                src_stage,
                self.work_stages(),
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[b],
            )
        };
        self.init_ids.insert(image.id());
        self.initialized.push(image.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::Hazards;

    #[test]
    fn reads_after_reads_need_no_barrier() {
        let mut h = Hazards::default();
        h.note(&[1, 2], &[]);
        assert!(!h.conflicts(&[1, 2, 3], &[]));
    }

    #[test]
    fn raw_war_and_waw_conflict() {
        let mut h = Hazards::default();
        h.note(&[1], &[2]);
        assert!(h.conflicts(&[2], &[]), "read after write");
        assert!(h.conflicts(&[], &[1]), "write after read");
        assert!(h.conflicts(&[], &[2]), "write after write");
        assert!(!h.conflicts(&[1], &[3]), "a new write and another read");
    }

    #[test]
    fn a_barrier_forgets_earlier_accesses() {
        let mut h = Hazards::default();
        h.note(&[1], &[2]);
        h.clear();
        assert!(!h.conflicts(&[2], &[1]));
    }
}
