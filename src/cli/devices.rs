//! `texstream devices`: every Vulkan device with its limits, queues, memory and the optional
//! features texstream cares about (text or `--json`).

use anyhow::Context as _;
use serde_json::{json, Value};
use vk_backend::info::{device_reports, DeviceReport};
use vk_backend::DeviceOptions;

#[derive(clap::Args, Debug)]
pub struct DevicesArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &DevicesArgs) -> anyhow::Result<()> {
    // The default choice is the device `TEXSTREAM_DEVICE` selects, as for every other command.
    let selector = DeviceOptions::from_env().device;
    let reports = device_reports(selector.as_deref()).context("cannot list Vulkan devices")?;
    let out = if args.json {
        let v = Value::Array(reports.iter().map(to_json).collect());
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        reports.iter().map(text).collect()
    };
    write_stdout(&out)?;
    if reports.is_empty() {
        anyhow::bail!(
            "no Vulkan device found; install a driver, e.g. `sudo apt-get install \
             mesa-vulkan-drivers` (lavapipe, CPU) or your GPU vendor's"
        );
    }
    Ok(())
}

/// Writes to stdout; a closed pipe (`texstream devices | head`) is not an error.
pub(crate) fn write_stdout(s: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn mib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn text(r: &DeviceReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let choice = if r.default_choice { "  [default]" } else { "" };
    let _ = writeln!(s, "#{} {} ({}){choice}", r.index, r.name, r.device_type);
    let _ = writeln!(
        s,
        "  vendor 0x{:04x} device 0x{:04x}, Vulkan {}, driver {}{}",
        r.vendor_id,
        r.device_id,
        r.api_version,
        r.driver_version,
        match (&r.driver_name, &r.driver_info) {
            (Some(n), Some(i)) => format!(" ({n}: {i})"),
            (Some(n), None) => format!(" ({n})"),
            _ => String::new(),
        }
    );
    match &r.usable {
        Ok(()) => {
            let _ = writeln!(s, "  usable by texstream: yes");
        }
        Err(why) => {
            let _ = writeln!(s, "  usable by texstream: NO ({why})");
        }
    }
    let l = &r.limits;
    let _ = writeln!(
        s,
        "  images: max 2D {} px, max {} layers; max storage buffer {}; push constants {} B",
        l.max_image_dimension_2d,
        l.max_image_array_layers,
        mib(l.max_storage_buffer_range as u64),
        l.max_push_constants_size
    );
    let sub = match (l.subgroup_size, l.min_subgroup_size, l.max_subgroup_size) {
        (Some(d), Some(lo), Some(hi)) => format!("subgroup {d} ({lo}..{hi})"),
        (Some(d), _, _) => format!("subgroup {d}"),
        _ => "subgroup ?".into(),
    };
    let _ = writeln!(
        s,
        "  compute: shared memory {} KiB, {} invocations/workgroup, {sub}, timestamp period {} ns",
        l.max_compute_shared_memory_size / 1024,
        l.max_compute_work_group_invocations,
        l.timestamp_period_ns
    );
    let _ = writeln!(s, "  queue families:");
    for q in &r.queue_families {
        let dedicated = if Some(q.index) == r.dedicated_transfer_family {
            "  <- dedicated transfer"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "    {}: {} x{}, timestamp bits {}{dedicated}",
            q.index,
            q.flags.join("|"),
            q.count,
            q.timestamp_valid_bits
        );
    }
    let _ = writeln!(s, "  memory heaps:");
    for h in &r.memory_heaps {
        let budget = match (h.budget, h.usage) {
            (Some(b), Some(u)) => format!(", budget {} (used {})", mib(b), mib(u)),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "    {}: {} {}{budget}",
            h.index,
            mib(h.size),
            if h.flags.is_empty() {
                "host".to_string()
            } else {
                h.flags.join("|")
            }
        );
    }
    let _ = writeln!(s, "  memory types:");
    for t in &r.memory_types {
        let _ = writeln!(
            s,
            "    {}: heap {} {}",
            t.index,
            t.heap_index,
            if t.flags.is_empty() {
                "-".to_string()
            } else {
                t.flags.join("|")
            }
        );
    }
    let f = &r.features;
    let _ = writeln!(
        s,
        "  features: shaderFloat16 {}, storageBuffer16BitAccess {}, shaderInt8 {}, \
         timelineSemaphore {}, hostQueryReset {}",
        yes(f.shader_float16),
        yes(f.storage_buffer_16bit_access),
        yes(f.shader_int8),
        yes(f.timeline_semaphore),
        yes(f.host_query_reset)
    );
    let _ = writeln!(
        s,
        "            storage images rgba16f {} / rgba32f {}, read/write without format {}/{}, \
         subgroup size control {}, subgroup arithmetic {}",
        yes(f.rgba16f_storage_image),
        yes(f.rgba32f_storage_image),
        yes(f.storage_image_read_without_format),
        yes(f.storage_image_write_without_format),
        yes(f.subgroup_size_control),
        yes(f.subgroup_arithmetic)
    );
    let _ = writeln!(
        s,
        "            cooperative matrix KHR {} / NV {}, memory budget {}",
        yes(f.cooperative_matrix_khr),
        yes(f.cooperative_matrix_nv),
        yes(f.memory_budget)
    );
    if let Some(a) = r.pci_address {
        let cores = if r.interrupt_cores.is_empty() {
            "not readable here".to_string()
        } else {
            r.interrupt_cores
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let _ = writeln!(s, "  PCI {a}, interrupts on host core {cores}");
    }
    if !r.cooperative_matrix_shapes.is_empty() {
        let _ = writeln!(
            s,
            "  cooperative matrix shapes: {}",
            r.cooperative_matrix_shapes.join(", ")
        );
    }
    let present: Vec<&str> = r
        .extensions
        .iter()
        .map(|(n, p)| if *p { n.as_str() } else { "" })
        .filter(|n| !n.is_empty())
        .collect();
    let _ = writeln!(
        s,
        "  extensions of interest present: {}",
        if present.is_empty() {
            "none".to_string()
        } else {
            present.join(", ")
        }
    );
    s.push('\n');
    s
}

fn to_json(r: &DeviceReport) -> Value {
    let l = &r.limits;
    let f = &r.features;
    json!({
        "index": r.index,
        "name": r.name,
        "type": r.device_type,
        "vendor_id": r.vendor_id,
        "device_id": r.device_id,
        "api_version": r.api_version,
        "driver_version": r.driver_version,
        "driver_name": r.driver_name,
        "driver_info": r.driver_info,
        "usable": r.usable.is_ok(),
        "unusable_reason": r.usable.as_ref().err().map(|e| e.to_string()),
        "default_choice": r.default_choice,
        "limits": {
            "max_image_dimension_2d": l.max_image_dimension_2d,
            "max_image_array_layers": l.max_image_array_layers,
            "max_storage_buffer_range": l.max_storage_buffer_range,
            "max_push_constants_size": l.max_push_constants_size,
            "max_compute_shared_memory_size": l.max_compute_shared_memory_size,
            "max_compute_work_group_invocations": l.max_compute_work_group_invocations,
            "max_compute_work_group_count": l.max_compute_work_group_count,
            "timestamp_period_ns": l.timestamp_period_ns,
            "subgroup_size": l.subgroup_size,
            "min_subgroup_size": l.min_subgroup_size,
            "max_subgroup_size": l.max_subgroup_size,
        },
        "queue_families": r.queue_families.iter().map(|q| json!({
            "index": q.index,
            "flags": q.flags,
            "count": q.count,
            "timestamp_valid_bits": q.timestamp_valid_bits,
            "min_image_transfer_granularity": q.min_image_transfer_granularity,
        })).collect::<Vec<_>>(),
        "dedicated_transfer_family": r.dedicated_transfer_family,
        "memory_heaps": r.memory_heaps.iter().map(|h| json!({
            "index": h.index,
            "size": h.size,
            "flags": h.flags,
            "budget": h.budget,
            "usage": h.usage,
        })).collect::<Vec<_>>(),
        "memory_types": r.memory_types.iter().map(|t| json!({
            "index": t.index,
            "heap_index": t.heap_index,
            "flags": t.flags,
        })).collect::<Vec<_>>(),
        "features": {
            "shader_float16": f.shader_float16,
            "storage_buffer_16bit_access": f.storage_buffer_16bit_access,
            "uniform_and_storage_buffer_16bit_access": f.uniform_and_storage_buffer_16bit_access,
            "storage_push_constant_16": f.storage_push_constant_16,
            "shader_int8": f.shader_int8,
            "timeline_semaphore": f.timeline_semaphore,
            "host_query_reset": f.host_query_reset,
            "storage_image_read_without_format": f.storage_image_read_without_format,
            "storage_image_write_without_format": f.storage_image_write_without_format,
            "subgroup_size_control": f.subgroup_size_control,
            "subgroup_arithmetic": f.subgroup_arithmetic,
            "cooperative_matrix_khr": f.cooperative_matrix_khr,
            "cooperative_matrix_nv": f.cooperative_matrix_nv,
            "memory_budget": f.memory_budget,
            "rgba16f_storage_image": f.rgba16f_storage_image,
            "rgba32f_storage_image": f.rgba32f_storage_image,
        },
        "extensions": r.extensions.iter().map(|(n, p)| (n.clone(), json!(p)))
            .collect::<serde_json::Map<_, _>>(),
        "cooperative_matrix_shapes": r.cooperative_matrix_shapes,
        "pci_address": r.pci_address.map(|a| a.to_string()),
        "interrupt_cores": r.interrupt_cores,
    })
}
