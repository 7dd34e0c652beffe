//! Cap accounting for a streamed run: what the engine itself takes on this device (measured with
//! the counted allocator, not assumed), and the scheduler cap that leaves for slots + activations.
use scheduler::{
    min_feasible_cap, min_feasible_cap_trace, plan_trace_from, Bandwidth, Choice, Pipeline, Plan,
    PlanError, Policy, Profile, Trace,
};
use vk_backend::{AtlasConfig, Device, StackLimits, StreamConfig, VkError, WeightAtlas};

/// Device bytes the stream engine takes besides its page slots, measured on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineCost {
    /// Counted bytes per atlas slot (a layer; ≥ the page size when the driver pads).
    pub slot_bytes: u64,
    /// Page-table buffer plus its transient init staging buffer.
    pub table_bytes: u64,
    /// Counted bytes of the staging ring or the host mirror (0 when it lives in host-only
    /// memory).
    pub staging_bytes: u64,
    /// How the atlas stacks pages where its slots outnumber the device's layers: the slots a
    /// cap allows are rounded down to whole layers, so the image never outgrows them.
    pub stack: StackLimits,
}

impl EngineCost {
    /// Everything except the slots.
    pub fn fixed_bytes(&self) -> u64 {
        self.table_bytes + self.staging_bytes
    }
}

/// [`EngineCost`] for `config` (precision, page height, staging) and `logical_pages`, from the
/// driver's memory requirements for a 1- and a 2-slot atlas and one staging buffer: exactly what
/// the counted allocator will count, found without allocating (so a tiny cap cannot be exceeded
/// while finding out that it is too small).
pub fn measure_engine_cost(
    device: &Device,
    config: &StreamConfig,
    logical_pages: u32,
) -> Result<EngineCost, VkError> {
    let needs = |slots| {
        WeightAtlas::memory_needs(
            device,
            &AtlasConfig {
                slots,
                precision: config.precision,
                page_height: config.page_height,
                logical_pages: logical_pages.max(1),
            },
        )
    };
    let (one, two) = (needs(1)?, needs(2)?);
    let page_height = config
        .page_height
        .unwrap_or_else(|| config.precision.default_page_height());
    let page_bytes = 512 * page_height as u64 * config.precision.bytes_per_texel() as u64;
    let slot_bytes = two
        .image_bytes
        .saturating_sub(one.image_bytes)
        .max(page_bytes);
    let table = (one.image_bytes + one.table_bytes).saturating_sub(slot_bytes);
    // Staging: the ring, or the host mirror of every page that replaces it.
    let staging_bytes = if config.host_mirror {
        config
            .staging_memory
            .mirror_cost(device, page_bytes, logical_pages as u64)?
    } else {
        config.staging_memory.ring_buffer_cost(device, page_bytes)? * config.staging_slots as u64
    };
    Ok(EngineCost {
        slot_bytes,
        // The table's init upload goes through a staging buffer of the same size.
        table_bytes: 2 * table.max(one.table_staging_bytes),
        staging_bytes,
        stack: StackLimits::of(device, page_height),
    })
}

/// The cap is below what the workload needs; says the minimum and what sets it.
#[derive(Debug, thiserror::Error)]
pub enum CapError {
    #[error(
        "cap {cap} B is below the minimum feasible cap {min} B: step `{step}` of model `{model}` reads {pages} pages \
         ({page_bytes} B each), the largest activation peak is {activation} B, and the engine's page table + staging take {fixed} B"
    )]
    TooSmall {
        cap: u64,
        min: u64,
        model: String,
        step: String,
        pages: u32,
        page_bytes: u64,
        activation: u64,
        fixed: u64,
    },
    /// Found before anything is allocated, from the packed models' own activation peaks: the
    /// exact minimum (with activations as this device places them) is at least this.
    #[error(
        "cap {cap} B is below the minimum feasible cap, which is at least {at_least} B: step \
         `{step}` of model `{model}` reads {pages} pages ({page_bytes} B each), the models' \
         activation peak is at least {activation} B, and the engine's page table + staging take \
         {fixed} B (a cap of at least that gets the exact minimum named, or a higher bound)"
    )]
    BelowLowerBound {
        cap: u64,
        at_least: u64,
        model: String,
        step: String,
        pages: u32,
        page_bytes: u64,
        activation: u64,
        fixed: u64,
    },
    #[error(transparent)]
    Plan(#[from] PlanError),
}

impl CapError {
    /// `cap` is below `min` (exactly the minimum, or `exact == false`: at least it).
    pub fn too_small(
        cap: u64,
        min: u64,
        mc: scheduler::MinCap,
        cost: &EngineCost,
        exact: bool,
    ) -> CapError {
        if exact {
            CapError::TooSmall {
                cap,
                min,
                model: mc.model,
                step: mc.step,
                pages: mc.step_pages,
                page_bytes: cost.slot_bytes,
                activation: mc.activation_bytes,
                fixed: cost.fixed_bytes(),
            }
        } else {
            CapError::BelowLowerBound {
                cap,
                at_least: min,
                model: mc.model,
                step: mc.step,
                pages: mc.step_pages,
                page_bytes: cost.slot_bytes,
                activation: mc.activation_bytes,
                fixed: cost.fixed_bytes(),
            }
        }
    }
}

/// The smallest cap the workload runs under with this engine cost, and what sets it.
pub fn min_cap(
    profiles: &[Profile],
    pipeline: &Pipeline,
    cost: &EngineCost,
) -> Result<(u64, scheduler::MinCap), CapError> {
    Ok(min_cap_of(min_feasible_cap(profiles, pipeline)?, cost))
}

/// [`min_cap`] from the scheduler's minimum.
fn min_cap_of(mc: scheduler::MinCap, cost: &EngineCost) -> (u64, scheduler::MinCap) {
    let slots = (mc.step_pages + mc.lookup_slots) as u64;
    (
        cost.fixed_bytes() + mc.activation_bytes + slots * cost.slot_bytes,
        mc,
    )
}

/// A plan under a device cap, and the workload's minimum cap on this device.
pub struct CappedPlan {
    pub plan: Plan,
    pub min_cap: u64,
}

/// Plans under `cap` device bytes: the engine's fixed bytes come off first, and the scheduler
/// cap is rounded so that its slots, at the measured per-slot bytes, still fit. A cap below
/// the minimum is refused, naming the minimum and the step that sets it. With `choice.previous`
/// (the construction the last plan chose) `planned` re-plans as [`scheduler::replan`] does;
/// with `choice.only` it builds that construction alone. The pipeline is unrolled once for both
/// the minimum and the plan.
pub fn plan_under_cap(
    profiles: &[Profile],
    pipeline: &Pipeline,
    cap: u64,
    bw: &Bandwidth,
    policy: Policy,
    cost: &EngineCost,
    choice: Choice,
) -> Result<CappedPlan, CapError> {
    let trace = Trace::build(profiles, pipeline)?;
    let (min, mc) = min_cap_of(min_feasible_cap_trace(&trace), cost);
    if cap < min {
        return Err(CapError::too_small(cap, min, mc, cost, true));
    }
    let page = profiles.first().map_or(1, |p| p.page_bytes.max(1));
    let act = mc.activation_bytes;
    let room = cap - cost.fixed_bytes() - act;
    let sched_cap = act + cost.stack.usable_slots(room / cost.slot_bytes) * page;
    Ok(CappedPlan {
        plan: plan_trace_from(trace, sched_cap, bw, policy, choice)?,
        min_cap: min,
    })
}
