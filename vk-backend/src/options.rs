//! How to open a device ([`DeviceOptions`]) and the one place the environment is read
//! ([`DeviceOptions::from_env`], in the spirit of wgpu's `InstanceFlags::with_env`). The CLI and
//! the test harnesses call it; the library itself only takes the options it is given.

use std::path::PathBuf;

use crate::adapter::ImageLimits;

/// Which device to open and how.
#[derive(Debug, Clone, Default)]
pub struct DeviceOptions {
    /// Device selector: an index into the enumeration order, or a case-insensitive name
    /// substring. `None`: preference order (discrete > integrated > virtual > CPU).
    pub device: Option<String>,
    /// Enable the Khronos validation layer and record its messages
    /// ([`crate::Device::check_validation`]).
    pub validation: bool,
    /// Where to load/save the VkPipelineCache; `None` keeps it in memory only.
    pub pipeline_cache_path: Option<PathBuf>,
    /// Let the threads that drive the device run on any core, including those servicing its
    /// interrupts (`TEXSTREAM_THREADS_ANYWHERE`); by default they keep off those
    /// ([`crate::placement`]).
    pub threads_anywhere: bool,
    /// Read the device's interrupts from a stand-in sysfs and procfs (tests of the placement on
    /// devices without a PCI address).
    #[doc(hidden)]
    pub interrupt_source: Option<crate::placement::InterruptSource>,
    /// Hard cap on device-local bytes; allocations beyond it fail before Vulkan is called.
    pub memory_cap: Option<u64>,
    /// Pretend the device has smaller image limits (tests exercise folding cheaply with this).
    pub limits_override: Option<ImageLimits>,
    /// Do not use a dedicated transfer family even if one exists.
    pub no_transfer_queue: bool,
    /// Treat images as padded to power-of-two row blocks (`Some(true)`: test the folds that
    /// avoid it on any device) or not; `None` probes the driver.
    pub pads_image_rows: Option<bool>,
    /// Stack every tensor's layers under 8 rows into taller ones (`Some(true)`: to test
    /// those folds on any device) or keep them all; `None` asks the driver, shape by shape,
    /// whether stacking saves memory (`Device::fold_layout`).
    pub pads_short_layers: Option<bool>,
    /// Do not enable cooperative-matrix kernels even where the device has them: the portable
    /// kernels run instead, e.g. to compare the two.
    pub no_cooperative_matrix: bool,
    /// Run every cooperative-matrix convolution on this tile instead of the one
    /// [`crate::kernels::conv2d_kernel`] picks by shape (to measure one against the other).
    pub coop_conv_tile: Option<crate::kernels::CoopTile>,
    /// Run every few-row MatMul (`matmul_const_gemv.comp`) with this staging divisor (1, 2 or 4:
    /// `4 * MP` output columns a workgroup, at least its rows allow) instead of 4: to test every
    /// spread on any device and measure one against another.
    pub gemv_spread: Option<u32>,
    /// Run every few-row MatMul on `matmul_const_gemv_deep.comp` (16 weight texels an invocation
    /// in flight, twice the A chunk; `Some(true)`) or on `matmul_const_gemv.comp` (8;
    /// `Some(false)`) instead of picking by shape: to measure one against the other.
    pub gemv_deep: Option<bool>,
    /// The fewest 64x64 output tiles a MatMul with a constant B takes the tensor cores with
    /// (`None`: one a streaming multiprocessor, [`crate::kernels::coop_min_tiles`]): to measure
    /// the tensor-core kernel against the portable one on smaller outputs.
    pub coop_min_tiles: Option<u64>,
    /// Run every tensor-core MatMul on tiles of this many rows (64 or 32) instead of picking by
    /// shape ([`crate::kernels::coop_rows`]): to measure one against the other.
    pub coop_rows: Option<u32>,
    /// Run every tensor-core MatMul that reads A packed on 64-row tiles of this many columns (64
    /// or 96) instead of picking by shape ([`crate::kernels::coop_cols`]): to measure one
    /// against the other.
    pub coop_cols: Option<u32>,
    /// Split the keys of every tensor-core attention with more than a decode step's rows into
    /// this many spans (at most one a key block; 1: none) instead of picking by shape
    /// ([`crate::kernels::attention_into`]): to measure one against the other.
    pub attention_splits: Option<u32>,
    /// Do not use subgroup arithmetic even where the device has it: the row normalizations
    /// reduce through a shared-memory tree instead, e.g. to test or measure that path.
    pub no_subgroup_arithmetic: bool,
    /// Copy attention operands that a compiled model reads from a projection's rows into heads
    /// before the kernel (a copy each, as the exporters' head split) instead of reading the
    /// rows: to measure one against the other.
    pub attention_head_copies: bool,
    /// Run every tensor-core attention with this many blocks of 16 query rows a head lane (1,
    /// or 3 or 4 where its head dims are at most 64: `attention_coop_wide3.comp`,
    /// `attention_coop_wide.comp`) instead of picking by shape
    /// ([`crate::kernels::attention_into`]): to measure one against the other.
    pub attention_query_blocks: Option<u32>,
    /// Copy A of every tensor-core MatMul with one A matrix into `[4, K/4, M]` first (four
    /// values a texel; `Some(true)`) or not (`Some(false)`) instead of picking by shape
    /// ([`crate::kernels::matmul_packed_a_shape`]): to measure one against the other.
    pub matmul_packed_a: Option<bool>,
    /// Let a tensor-core MatMul whose output only the next MatMul reads, as its packed A, write
    /// it as that copy ([`crate::kernels::matmul_packed_out_shape`]; the default) or not
    /// (`Some(false)`): to measure one against the other. On an H200 (session 37, run 1) it
    /// took the Whisper-tiny encoder from 2.679 to 2.477 ms, its output bit for bit the same.
    pub matmul_packed_out: Option<bool>,
    /// Let a LayerNorm or RMSNorm whose output only the tensor-core MatMuls right after it read,
    /// as their packed A, write it as that copy ([`crate::kernels::norm_packed_out_shape`]; the
    /// default) or not (`Some(false)`): to measure one against the other.
    pub norm_packed_out: Option<bool>,
    /// Let the tensor-core attention whose merged heads only the next MatMul reads, as its
    /// packed A, write them as that copy ([`crate::kernels::attention_packed_out_shape`]; the
    /// default) or not (`Some(false)`): to measure one against the other.
    pub attention_packed_out: Option<bool>,
    /// Let the key and value projections whose rows only a tensor-core attention reads write
    /// them packed, `[4, H * D / 4, S]` ([`crate::kernels::attention_packed_kv_shapes`]): for
    /// the one-block kernels (the default), for every tensor-core kernel (`Some(true)`), or
    /// nowhere (`Some(false)`): to measure one against the other.
    pub attention_packed_kv: Option<bool>,
    /// Run every tensor-core MatMul with a B packed [K, N] on 128 k a step (`Some(128)`) or 64
    /// (`Some(64)`) instead of picking by shape: to measure one against the other.
    pub coop_step_k: Option<u32>,
    /// Split the reduction of every tensor-core MatMul into `Some(n)` spans over workgroups
    /// (where it has the steps for them; `Some(1)`: never), each span's tile summed by a second
    /// kernel, instead of picking by shape ([`crate::kernels::matmul_split_k_shape`]: where the
    /// tiles leave half the multiprocessors idle): to measure one against the other.
    pub matmul_split_k: Option<u32>,
    /// Split the reduction of every tensor-core convolution on the small or wide tile into
    /// `Some(n)` spans over workgroups (`Some(1)`: never, and the small tile where its shape
    /// picks it), each span's sum finished by a second kernel, instead of picking by shape
    /// ([`crate::kernels::conv2d_split_shape`]): to measure one against the other.
    pub conv_split_k: Option<u32>,
    /// Run a dense convolution on the tensor cores only from `Some(n)` output pixels up, the
    /// direct kernels below, instead of from the small tile's 16
    /// ([`crate::kernels::conv2d_kernel`]): to measure one against the other.
    pub coop_conv_min_pixels: Option<u32>,
    /// Run every LayerNorm and RMSNorm over W alone of short rows with eight rows a workgroup
    /// (`Some(true)`, where the rows fit) or one (`Some(false)`) instead of picking by shape
    /// ([`crate::kernels::norm_rows`]): to measure one against the other.
    pub norm_row_groups: Option<bool>,
    /// Run every LayerNorm and RMSNorm over W alone on 1024 invocations a row (`Some(true)`,
    /// where the rows fit and do not take row groups) instead of 256 (the default: on an H100
    /// the wide kernels were slower, [`crate::kernels::norm_rows`]): to measure one against the
    /// other.
    pub norm_wide_rows: Option<bool>,
    /// Run the tensor-core attention in two passes over the keys (`Some(false)`) instead of one
    /// (the default, `attention_coop*_1p*.comp`: the accumulators rescaled where a row's max
    /// grows): to measure one against the other.
    pub attention_one_pass: Option<bool>,
    /// Read outputs back as copies of their texels (`Some(false)`) instead of their values
    /// packed densely on the device first (the default, `pack_dense.comp`:
    /// [`crate::kernels::readback_into`]): to measure one against the other.
    pub dense_readback: Option<bool>,
    /// Read a kernel's SPIR-V from `<dir>/<kernel>.<variant>.spv` where that file exists
    /// (`<variant>` as the build names the embedded ones: `f16`, `f32`, `f16.buf`, `f32.buf`,
    /// `f32w16`, `f32w16.buf`) instead of the embedded code: a shader change compiled with
    /// glslc measured without rebuilding the engine. [`crate::Device::shader_overrides`] lists
    /// the kernels taken from there. Nothing checks such a file beyond its SPIR-V header: it
    /// must keep the kernel's bindings and push constants (`scripts/shader_variant.sh` builds
    /// it from the same sources and defines as the build).
    pub shader_dir: Option<PathBuf>,
}

impl DeviceOptions {
    /// The defaults with what the environment sets:
    /// - `TEXSTREAM_DEVICE=<index or name substring>`: [`DeviceOptions::device`];
    /// - `TEXSTREAM_VALIDATION=1`: [`DeviceOptions::validation`];
    /// - `TEXSTREAM_NO_TRANSFER_QUEUE=1`: [`DeviceOptions::no_transfer_queue`];
    /// - `TEXSTREAM_NO_COOPMAT=1`: [`DeviceOptions::no_cooperative_matrix`];
    /// - `TEXSTREAM_NO_SUBGROUP_ARITHMETIC=1`: [`DeviceOptions::no_subgroup_arithmetic`];
    /// - `TEXSTREAM_PAD_ROWS=1` (or any other value for "no"): [`DeviceOptions::pads_image_rows`];
    /// - `TEXSTREAM_PAD_SHORT_LAYERS=1` (or any other value for "no"):
    ///   [`DeviceOptions::pads_short_layers`];
    /// - `TEXSTREAM_COOP_CONV_TILE=small`, `wide`, `large` or `large-wide`:
    ///   [`DeviceOptions::coop_conv_tile`] (any other value leaves the choice to the shapes);
    /// - `TEXSTREAM_GEMV_SPREAD=1`, `2` or `4`: [`DeviceOptions::gemv_spread`];
    /// - `TEXSTREAM_GEMV_DEEP=1` or `0`: [`DeviceOptions::gemv_deep`];
    /// - `TEXSTREAM_COOP_MIN_TILES=N`: [`DeviceOptions::coop_min_tiles`];
    /// - `TEXSTREAM_COOP_ROWS=64` or `32`: [`DeviceOptions::coop_rows`];
    /// - `TEXSTREAM_COOP_COLS=64` or `96`: [`DeviceOptions::coop_cols`];
    /// - `TEXSTREAM_ATTENTION_SPLITS=N` (N >= 1): [`DeviceOptions::attention_splits`];
    /// - `TEXSTREAM_ATTENTION_HEAD_COPIES=1`: [`DeviceOptions::attention_head_copies`];
    /// - `TEXSTREAM_ATTENTION_QUERY_BLOCKS=1`, `3` or `4`:
    ///   [`DeviceOptions::attention_query_blocks`];
    /// - `TEXSTREAM_MATMUL_PACKED_A=1` or `0`: [`DeviceOptions::matmul_packed_a`];
    /// - `TEXSTREAM_MATMUL_PACKED_OUT=1` or `0`: [`DeviceOptions::matmul_packed_out`];
    /// - `TEXSTREAM_NORM_PACKED_OUT=1` or `0`: [`DeviceOptions::norm_packed_out`];
    /// - `TEXSTREAM_ATTENTION_PACKED_OUT=1` or `0`: [`DeviceOptions::attention_packed_out`];
    /// - `TEXSTREAM_ATTENTION_PACKED_KV=1` or `0`: [`DeviceOptions::attention_packed_kv`];
    /// - `TEXSTREAM_COOP_STEP_K=64` or `128`: [`DeviceOptions::coop_step_k`];
    /// - `TEXSTREAM_MATMUL_SPLIT_K=N` (N >= 1): [`DeviceOptions::matmul_split_k`];
    /// - `TEXSTREAM_CONV_SPLIT_K=N` (N >= 1): [`DeviceOptions::conv_split_k`];
    /// - `TEXSTREAM_NORM_ROW_GROUPS=1` or `0`: [`DeviceOptions::norm_row_groups`];
    /// - `TEXSTREAM_NORM_WIDE_ROWS=1` or `0`: [`DeviceOptions::norm_wide_rows`];
    /// - `TEXSTREAM_ATTENTION_ONE_PASS=1` or `0`: [`DeviceOptions::attention_one_pass`];
    /// - `TEXSTREAM_DENSE_READBACK=1` or `0`: [`DeviceOptions::dense_readback`];
    /// - `TEXSTREAM_SHADER_DIR=<dir>`: [`DeviceOptions::shader_dir`];
    /// - `TEXSTREAM_MAX_ARRAY_LAYERS=N`: [`DeviceOptions::limits_override`] with at most `N`
    ///   image array layers (the weight atlas stacks pages beyond them, as on a GPU for models
    ///   over 2048 pages).
    ///
    /// Flags take `1`, `true`, `yes` or `on`. Set fields on the result to override them (an
    /// explicit `--device` flag, a test's own cap).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let flag = |name: &str| {
            var(name).is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
        };
        // `1` or `0`: fixes a choice made by shape; anything else leaves it to the shape.
        let on_off = |name: &str| match var(name)?.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        };
        DeviceOptions {
            device: var("TEXSTREAM_DEVICE"),
            validation: flag("TEXSTREAM_VALIDATION"),
            threads_anywhere: flag("TEXSTREAM_THREADS_ANYWHERE"),
            no_transfer_queue: flag("TEXSTREAM_NO_TRANSFER_QUEUE"),
            no_cooperative_matrix: flag("TEXSTREAM_NO_COOPMAT"),
            no_subgroup_arithmetic: flag("TEXSTREAM_NO_SUBGROUP_ARITHMETIC"),
            attention_head_copies: flag("TEXSTREAM_ATTENTION_HEAD_COPIES"),
            pads_image_rows: var("TEXSTREAM_PAD_ROWS").map(|v| v == "1"),
            pads_short_layers: var("TEXSTREAM_PAD_SHORT_LAYERS").map(|v| v == "1"),
            coop_conv_tile: var("TEXSTREAM_COOP_CONV_TILE").and_then(|v| {
                match v.trim().to_ascii_lowercase().as_str() {
                    "small" => Some(crate::kernels::CoopTile::Small),
                    "wide" => Some(crate::kernels::CoopTile::Wide),
                    "large" => Some(crate::kernels::CoopTile::Large),
                    "large-wide" => Some(crate::kernels::CoopTile::LargeWide),
                    _ => None,
                }
            }),
            gemv_spread: var("TEXSTREAM_GEMV_SPREAD")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| matches!(n, 1 | 2 | 4)),
            gemv_deep: on_off("TEXSTREAM_GEMV_DEEP"),
            coop_min_tiles: var("TEXSTREAM_COOP_MIN_TILES")
                .and_then(|v| v.trim().parse::<u64>().ok()),
            coop_rows: var("TEXSTREAM_COOP_ROWS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| matches!(n, 32 | 64)),
            coop_cols: var("TEXSTREAM_COOP_COLS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| matches!(n, 64 | 96)),
            attention_query_blocks: var("TEXSTREAM_ATTENTION_QUERY_BLOCKS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| matches!(n, 1 | 3 | 4)),
            matmul_packed_a: on_off("TEXSTREAM_MATMUL_PACKED_A"),
            matmul_packed_out: on_off("TEXSTREAM_MATMUL_PACKED_OUT"),
            norm_packed_out: on_off("TEXSTREAM_NORM_PACKED_OUT"),
            attention_packed_out: on_off("TEXSTREAM_ATTENTION_PACKED_OUT"),
            attention_packed_kv: on_off("TEXSTREAM_ATTENTION_PACKED_KV"),
            norm_row_groups: on_off("TEXSTREAM_NORM_ROW_GROUPS"),
            norm_wide_rows: on_off("TEXSTREAM_NORM_WIDE_ROWS"),
            attention_one_pass: on_off("TEXSTREAM_ATTENTION_ONE_PASS"),
            dense_readback: on_off("TEXSTREAM_DENSE_READBACK"),
            shader_dir: var("TEXSTREAM_SHADER_DIR")
                .filter(|v| !v.trim().is_empty())
                .map(PathBuf::from),
            coop_step_k: var("TEXSTREAM_COOP_STEP_K")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| matches!(n, 64 | 128)),
            matmul_split_k: var("TEXSTREAM_MATMUL_SPLIT_K")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|&n| n > 0),
            conv_split_k: var("TEXSTREAM_CONV_SPLIT_K")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|&n| n > 0),
            coop_conv_min_pixels: var("TEXSTREAM_COOP_CONV_MIN_PIXELS")
                .and_then(|v| v.trim().parse::<u32>().ok()),
            attention_splits: var("TEXSTREAM_ATTENTION_SPLITS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|&n| n > 0),
            limits_override: var("TEXSTREAM_MAX_ARRAY_LAYERS")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|&n| n > 0)
                .map(|layers| ImageLimits {
                    max_image_dimension_2d: u32::MAX,
                    max_image_array_layers: layers,
                }),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceOptions;

    fn with(vars: &[(&str, &str)]) -> DeviceOptions {
        DeviceOptions::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn nothing_set_is_the_default() {
        let o = with(&[]);
        assert_eq!(o.device, None);
        assert!(!o.validation && !o.no_transfer_queue && !o.no_cooperative_matrix);
        assert!(!o.no_subgroup_arithmetic && !o.attention_head_copies);
        assert_eq!(o.pads_image_rows, None);
        assert_eq!(o.coop_conv_tile, None);
        assert_eq!(o.limits_override, None);
        assert_eq!(o.coop_min_tiles, None);
        assert_eq!(o.coop_rows, None);
        assert_eq!(o.coop_cols, None);
        assert_eq!(o.attention_splits, None);
        assert_eq!(o.attention_query_blocks, None);
        assert_eq!(o.matmul_packed_a, None);
        assert_eq!(o.matmul_packed_out, None);
        assert_eq!(o.norm_packed_out, None);
        assert_eq!(o.attention_packed_out, None);
        assert_eq!(o.attention_packed_kv, None);
        assert_eq!(o.coop_step_k, None);
        assert_eq!(o.matmul_split_k, None);
        assert_eq!(o.conv_split_k, None);
        assert_eq!(o.coop_conv_min_pixels, None);
        assert_eq!(o.norm_row_groups, None);
        assert_eq!(o.norm_wide_rows, None);
        assert_eq!(o.attention_one_pass, None);
        assert_eq!(o.dense_readback, None);
        assert_eq!(o.shader_dir, None);
        assert_eq!(with(&[("TEXSTREAM_SHADER_DIR", " ")]).shader_dir, None);
    }

    #[test]
    fn every_variable_sets_its_field() {
        let o = with(&[
            ("TEXSTREAM_DEVICE", "nvidia"),
            ("TEXSTREAM_VALIDATION", " Yes "),
            ("TEXSTREAM_NO_TRANSFER_QUEUE", "1"),
            ("TEXSTREAM_NO_COOPMAT", "on"),
            ("TEXSTREAM_NO_SUBGROUP_ARITHMETIC", "true"),
            ("TEXSTREAM_PAD_ROWS", "1"),
            ("TEXSTREAM_PAD_SHORT_LAYERS", "1"),
            ("TEXSTREAM_COOP_CONV_TILE", " Wide"),
            ("TEXSTREAM_MAX_ARRAY_LAYERS", " 16"),
            ("TEXSTREAM_COOP_MIN_TILES", " 24"),
            ("TEXSTREAM_COOP_ROWS", "32 "),
            ("TEXSTREAM_ATTENTION_SPLITS", " 4"),
            ("TEXSTREAM_ATTENTION_HEAD_COPIES", "1"),
            ("TEXSTREAM_ATTENTION_QUERY_BLOCKS", " 4"),
            ("TEXSTREAM_MATMUL_PACKED_A", "1"),
            ("TEXSTREAM_MATMUL_PACKED_OUT", "1"),
            ("TEXSTREAM_NORM_PACKED_OUT", "0"),
            ("TEXSTREAM_ATTENTION_PACKED_OUT", "0"),
            ("TEXSTREAM_ATTENTION_PACKED_KV", "0"),
            ("TEXSTREAM_COOP_STEP_K", "128"),
            ("TEXSTREAM_MATMUL_SPLIT_K", " 1"),
            ("TEXSTREAM_NORM_ROW_GROUPS", "0"),
            ("TEXSTREAM_NORM_WIDE_ROWS", "1"),
            ("TEXSTREAM_ATTENTION_ONE_PASS", "1"),
            ("TEXSTREAM_DENSE_READBACK", "0"),
            ("TEXSTREAM_SHADER_DIR", "/tmp/spv"),
        ]);
        assert_eq!(o.shader_dir, Some(std::path::PathBuf::from("/tmp/spv")));
        assert_eq!(o.attention_one_pass, Some(true));
        assert_eq!(o.dense_readback, Some(false));
        assert_eq!(o.norm_row_groups, Some(false));
        assert_eq!(o.norm_wide_rows, Some(true));
        assert_eq!(o.matmul_split_k, Some(1));
        assert_eq!(
            with(&[("TEXSTREAM_MATMUL_SPLIT_K", "3")]).matmul_split_k,
            Some(3)
        );
        assert_eq!(
            with(&[("TEXSTREAM_CONV_SPLIT_K", "4")]).conv_split_k,
            Some(4)
        );
        assert_eq!(
            with(&[("TEXSTREAM_MATMUL_SPLIT_K", "0")]).matmul_split_k,
            None
        );
        assert_eq!(o.coop_step_k, Some(128));
        assert_eq!(o.matmul_packed_a, Some(true));
        assert_eq!(o.matmul_packed_out, Some(true));
        assert_eq!(o.norm_packed_out, Some(false));
        assert_eq!(o.attention_packed_out, Some(false));
        assert_eq!(o.attention_packed_kv, Some(false));
        assert_eq!(o.attention_query_blocks, Some(4));
        assert_eq!(
            with(&[("TEXSTREAM_ATTENTION_QUERY_BLOCKS", "2")]).attention_query_blocks,
            None
        );
        assert!(o.attention_head_copies);
        assert_eq!(o.attention_splits, Some(4));
        assert_eq!(
            with(&[("TEXSTREAM_ATTENTION_SPLITS", "0")]).attention_splits,
            None
        );
        assert_eq!(o.coop_min_tiles, Some(24));
        assert_eq!(o.coop_rows, Some(32));
        assert_eq!(with(&[("TEXSTREAM_COOP_ROWS", "48")]).coop_rows, None);
        assert_eq!(with(&[("TEXSTREAM_COOP_COLS", " 96")]).coop_cols, Some(96));
        assert_eq!(with(&[("TEXSTREAM_COOP_COLS", "32")]).coop_cols, None);
        assert_eq!(
            o.limits_override.map(|l| l.max_image_array_layers),
            Some(16)
        );
        assert_eq!(o.device.as_deref(), Some("nvidia"));
        assert!(o.validation && o.no_transfer_queue && o.no_cooperative_matrix);
        assert!(o.no_subgroup_arithmetic);
        assert_eq!(o.pads_image_rows, Some(true));
        assert_eq!(o.pads_short_layers, Some(true));
        assert_eq!(o.coop_conv_tile, Some(crate::kernels::CoopTile::Wide));
        let small = with(&[("TEXSTREAM_COOP_CONV_TILE", "small")]);
        assert_eq!(small.coop_conv_tile, Some(crate::kernels::CoopTile::Small));
        let large = with(&[("TEXSTREAM_COOP_CONV_TILE", "LARGE")]);
        assert_eq!(large.coop_conv_tile, Some(crate::kernels::CoopTile::Large));
        let large_wide = with(&[("TEXSTREAM_COOP_CONV_TILE", "large-wide")]);
        assert_eq!(
            large_wide.coop_conv_tile,
            Some(crate::kernels::CoopTile::LargeWide)
        );
    }

    #[test]
    fn other_values_mean_no() {
        let o = with(&[
            ("TEXSTREAM_VALIDATION", "0"),
            ("TEXSTREAM_NO_COOPMAT", "off"),
            ("TEXSTREAM_PAD_ROWS", "0"),
            ("TEXSTREAM_PAD_SHORT_LAYERS", "no"),
            ("TEXSTREAM_COOP_CONV_TILE", "auto"),
            ("TEXSTREAM_MAX_ARRAY_LAYERS", "0"),
        ]);
        assert_eq!(o.limits_override, None);
        assert!(!o.validation && !o.no_cooperative_matrix);
        assert_eq!(o.pads_image_rows, Some(false));
        assert_eq!(o.pads_short_layers, Some(false));
        assert_eq!(o.coop_conv_tile, None);
    }
}
