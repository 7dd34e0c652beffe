//! Timestamp writes into a [`TimestampQueries`] pool, reset in the command stream (or on the
//! host for a dedicated transfer queue, which cannot reset query pools).

use ash::vk;

use super::{Keep, Recorder};
use crate::error::{Result, VkError};
use crate::timestamps::TimestampQueries;

impl Recorder {
    /// Writes timestamp query `index` once every command recorded before it has completed
    /// (`BOTTOM_OF_PIPE`). To time a region, call [`Recorder::barrier`] and then write the start
    /// stamp (so the region's work cannot begin before it), record the work, then write the end
    /// stamp. The pool is reset in this command buffer before its first write here, so read its
    /// results ([`TimestampQueries::read_ns`]) before another recorder writes it.
    pub fn write_timestamp(&mut self, queries: &TimestampQueries, index: u32) -> Result<()> {
        if index >= queries.count() {
            return Err(VkError::Other(format!(
                "timestamp query {index} out of range ({} queries)",
                queries.count()
            )));
        }
        if self.capture.is_some() {
            return Err(VkError::Other(
                "a timestamp cannot be captured into reusable commands".into(),
            ));
        }
        let family = self.device.queue(self.queue).family;
        if queries.family() != family {
            return Err(VkError::Other(format!(
                "timestamp queries were made for queue family {}, this recorder records for {family}",
                queries.family()
            )));
        }
        let cmd = self.own_cmd();
        let dev = self.device.raw();
        if self.reset_pools.insert(queries.id()) {
            if self.on_transfer_only_queue() {
                // vkCmdResetQueryPool needs a compute or graphics queue: reset on the host now.
                if !self.device.features().host_query_reset {
                    return Err(VkError::Other(
                        "timestamps on the dedicated transfer queue need hostQueryReset".into(),
                    ));
                }
                // SAFETY: the caller read the pool's previous results; nothing pending uses it.
                unsafe { dev.reset_query_pool(queries.raw(), 0, queries.count()) };
            } else {
                // SAFETY: recording state, outside any render pass.
                unsafe { dev.cmd_reset_query_pool(cmd, queries.raw(), 0, queries.count()) };
            }
            self.keep.push(Keep::Timestamps(queries.clone()));
        }
        // SAFETY: recording state; the query was reset above in this command buffer.
        unsafe {
            dev.cmd_write_timestamp(
                cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                queries.raw(),
                index,
            )
        };
        Ok(())
    }
}
