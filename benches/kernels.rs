//! Kernel benchmark (`cargo bench --bench kernels`): every kernel case of `vk_backend::bench` with
//! its tensors in images and in storage buffers, side by side, and the upload bandwidth. The same
//! as `texstream bench kernels`; quick sizes unless `TEXSTREAM_BENCH_FULL=1` (a real GPU).
//! The device comes from the environment (`TEXSTREAM_DEVICE`, as everywhere).
use vk_backend::bench::{self, BenchConfig};
use vk_backend::{Device, DeviceOptions, Precision};

fn main() {
    let full = std::env::var_os("TEXSTREAM_BENCH_FULL").is_some();
    let device = match Device::new(&DeviceOptions::from_env()) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no Vulkan device ({e})");
            return;
        }
    };
    for precision in [Precision::F16, Precision::F32] {
        let cfg = BenchConfig::new(precision, !full);
        let report = match bench::run(&device, &cfg) {
            Ok(r) => r,
            Err(e) => {
                println!("{precision:?}: failed: {e}");
                continue;
            }
        };
        println!(
            "{} {:?}, median of {} runs",
            report.device, report.precision, report.runs
        );
        println!(
            "{:<10} {:<34} {:>11} {:>11} {:>11} {:>11} {:>9}",
            "kernel", "shape", "image ms", "image GF/s", "buffer ms", "buffer GF/s", "buf/img"
        );
        for k in &report.kernels {
            println!(
                "{:<10} {:<34} {:>11.3} {:>11.2} {:>11.3} {:>11.2} {:>9.2}",
                k.kernel,
                k.shape,
                k.image.median_ms,
                k.image.gflops,
                k.buffer.median_ms,
                k.buffer.gflops,
                k.image.median_ms / k.buffer.median_ms
            );
        }
        for c in &report.copies {
            println!(
                "copy {:<28} {:<9} {:>9.3} ms {:>8.2} GB/s ({:.2} of a device copy)",
                c.what, c.queue, c.median_ms, c.gbps, c.fraction_of_device_copy
            );
        }
        for (case, why) in &report.skipped {
            println!("skipped {case}: {why}");
        }
        println!();
    }
}
