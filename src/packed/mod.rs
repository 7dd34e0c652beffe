//! Packed model files: the optimized IR, the weight space pre-packed in texel order into fixed-size
//! pages, per-step page lists, costs and activation peaks. See [`format`] for the byte layout.
pub mod cost;
pub mod format;
pub mod pack;
pub mod placement;
pub mod report;
pub mod texels;

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use format::{PackedHeader, StepInfo, StoredPrecision, WeightEntry, WeightKind};
pub use pack::{pack_graph, PackError, PackOptions, Packed};

use format::*;

#[derive(Debug, thiserror::Error)]
pub enum PackedError {
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not a texstream packed model (bad magic)")]
    BadMagic { file: PathBuf },
    #[error("{file}: packed format version {found} is not supported (expected {FORMAT_VERSION})")]
    Version { file: PathBuf, found: u32 },
    #[error("{file}: corrupt packed model: {reason}")]
    Corrupt { file: PathBuf, reason: String },
    #[error("{file}: checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupt")]
    Checksum {
        file: PathBuf,
        stored: u32,
        computed: u32,
    },
    #[error("{file}: page {page} out of range (model has {count} pages)")]
    PageRange {
        file: PathBuf,
        page: u64,
        count: u64,
    },
    #[error("{file}: read_page buffer is {got} bytes, page size is {want}")]
    Buffer {
        file: PathBuf,
        got: usize,
        want: u64,
    },
}

fn preamble(
    header_len: u64,
    data_offset: u64,
    page_bytes: u64,
    page_count: u64,
) -> [u8; PREAMBLE_BYTES] {
    let mut p = [0u8; PREAMBLE_BYTES];
    p[..8].copy_from_slice(MAGIC);
    p[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    p[16..24].copy_from_slice(&header_len.to_le_bytes());
    p[24..32].copy_from_slice(&data_offset.to_le_bytes());
    p[32..40].copy_from_slice(&page_bytes.to_le_bytes());
    p[40..48].copy_from_slice(&page_count.to_le_bytes());
    p
}

impl Packed {
    /// Writes to a temp file next to `path`, fsyncs it, then renames it into place, so a reader
    /// never sees a half-written file and a mapped old file is never truncated.
    pub fn write(&self, path: &Path) -> Result<(), PackedError> {
        let io = |source| PackedError::Io {
            file: path.to_path_buf(),
            source,
        };
        let header = serde_json::to_vec(&self.header).map_err(|e| PackedError::Corrupt {
            file: path.into(),
            reason: e.to_string(),
        })?;
        let hl = header.len() as u64;
        let data_offset = (PREAMBLE_BYTES as u64 + hl).div_ceil(DATA_ALIGN) * DATA_ALIGN;
        let mut pre = preamble(
            hl,
            data_offset,
            self.header.page_bytes,
            self.header.page_count,
        );
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pre[..48]);
        crc.update(&header);
        crc.update(&self.data);
        pre[48..52].copy_from_slice(&crc.finalize().to_le_bytes());
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let fname = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        // Unique per write: two engines in one process may compile the same model at once.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{fname}.tmp{}.{n}", std::process::id()));
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&pre)?;
            f.write_all(&header)?;
            f.write_all(&vec![
                0u8;
                (data_offset - PREAMBLE_BYTES as u64 - hl) as usize
            ])?;
            f.write_all(&self.data)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

/// An open packed model. `read_page` takes `&self` and uses positioned reads, so I/O threads can
/// share one `PackedModel` (e.g. in an `Arc`).
pub struct PackedModel {
    path: PathBuf,
    file: File,
    header: PackedHeader,
    data_offset: u64,
}

/// Converts per-step FLOPs/bytes to seconds with a simple roofline: max(flops/F, bytes/B).
#[derive(Clone, Copy, Debug)]
pub struct CostModel {
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
}

impl PackedModel {
    /// Opens and fully verifies a packed model (magic, version, sizes, checksum, header).
    pub fn open(path: &Path) -> Result<PackedModel, PackedError> {
        let file_err = |source| PackedError::Io {
            file: path.to_path_buf(),
            source,
        };
        let corrupt = |reason: String| PackedError::Corrupt {
            file: path.to_path_buf(),
            reason,
        };
        let mut file = File::open(path).map_err(file_err)?;
        let len = file.metadata().map_err(file_err)?.len();
        let mut pre = [0u8; PREAMBLE_BYTES];
        if len < PREAMBLE_BYTES as u64 {
            if len >= 8 {
                file.read_exact(&mut pre[..8]).map_err(file_err)?;
                if &pre[..8] != MAGIC {
                    return Err(PackedError::BadMagic { file: path.into() });
                }
            }
            return Err(corrupt(format!(
                "file is {len} bytes, shorter than the {PREAMBLE_BYTES}-byte preamble"
            )));
        }
        file.read_exact(&mut pre).map_err(file_err)?;
        if &pre[..8] != MAGIC {
            return Err(PackedError::BadMagic { file: path.into() });
        }
        let u32_at = |o: usize| u32::from_le_bytes([pre[o], pre[o + 1], pre[o + 2], pre[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(pre[o..o + 8].try_into().unwrap_or([0; 8]));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(PackedError::Version {
                file: path.into(),
                found: version,
            });
        }
        let (hl, data_offset, page_bytes, page_count, stored) =
            (u64_at(16), u64_at(24), u64_at(32), u64_at(40), u32_at(48));
        let expect = page_bytes
            .checked_mul(page_count)
            .and_then(|d| d.checked_add(data_offset));
        if !data_offset.is_multiple_of(DATA_ALIGN)
            || data_offset < PREAMBLE_BYTES as u64 + hl
            || expect != Some(len)
        {
            return Err(corrupt(format!(
                "sizes disagree: file {len} bytes, header {hl}, data at {data_offset}, {page_count} pages of {page_bytes} (truncated?)"
            )));
        }
        let mut header = vec![0u8; hl as usize];
        file.read_exact(&mut header).map_err(file_err)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pre[..48]);
        crc.update(&header);
        let mut buf = vec![0u8; 1 << 20];
        let mut off = data_offset;
        while off < len {
            let n = ((len - off) as usize).min(buf.len());
            file.read_exact_at(&mut buf[..n], off).map_err(file_err)?;
            crc.update(&buf[..n]);
            off += n as u64;
        }
        let computed = crc.finalize();
        if computed != stored {
            return Err(PackedError::Checksum {
                file: path.into(),
                stored,
                computed,
            });
        }
        let header: PackedHeader =
            serde_json::from_slice(&header).map_err(|e| corrupt(format!("bad header: {e}")))?;
        if header.page_bytes != page_bytes || header.page_count != page_count {
            return Err(corrupt("header and preamble disagree on pages".into()));
        }
        if let Some(p) = header
            .compensated_pages
            .iter()
            .find(|&&p| p as u64 >= page_count)
        {
            return Err(corrupt(format!(
                "compensated page {p} out of range ({page_count} pages)"
            )));
        }
        let g = &header.graph;
        for port in g.inputs.iter().chain(&g.outputs) {
            let Some(t) = g.tensors.get(port.tensor) else {
                return Err(corrupt(format!(
                    "port `{}` names a missing tensor",
                    port.name
                )));
            };
            let shown: usize = g.port_shape(port).iter().product();
            if shown != t.shape.iter().product::<usize>() {
                return Err(corrupt(format!(
                    "port `{}` shows {:?} over a tensor of shape {:?}",
                    port.name,
                    g.port_shape(port),
                    t.shape
                )));
            }
        }
        Ok(PackedModel {
            path: path.to_path_buf(),
            file,
            header,
            data_offset,
        })
    }

    pub fn header(&self) -> &PackedHeader {
        &self.header
    }
    pub fn graph(&self) -> &crate::ir::Graph {
        &self.header.graph
    }
    pub fn weights(&self) -> &[WeightEntry] {
        &self.header.weights
    }
    pub fn steps(&self) -> &[StepInfo] {
        &self.header.steps
    }
    pub fn page_count(&self) -> u64 {
        self.header.page_count
    }
    pub fn page_bytes(&self) -> u64 {
        self.header.page_bytes
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads logical page `i` into `buf` (exactly `page_bytes` long) with a positioned read.
    pub fn read_page(&self, i: u64, buf: &mut [u8]) -> Result<(), PackedError> {
        if i >= self.header.page_count {
            return Err(PackedError::PageRange {
                file: self.path.clone(),
                page: i,
                count: self.header.page_count,
            });
        }
        if buf.len() as u64 != self.header.page_bytes {
            return Err(PackedError::Buffer {
                file: self.path.clone(),
                got: buf.len(),
                want: self.header.page_bytes,
            });
        }
        self.file
            .read_exact_at(buf, self.data_offset + i * self.header.page_bytes)
            .map_err(|source| PackedError::Io {
                file: self.path.clone(),
                source,
            })
    }

    /// The scheduler's load profile: one step per non-view node, with its pages, roofline
    /// compute time and live activation bytes.
    pub fn load_profile(&self, model: &str, cost: CostModel) -> scheduler::Profile {
        let steps = self
            .header
            .steps
            .iter()
            .filter(|s| !s.is_view)
            .map(|s| scheduler::Step {
                name: s.name.clone(),
                pages: s.pages.clone(),
                compute_s: (s.flops as f64 / cost.flops_per_s)
                    .max(s.bytes as f64 / cost.bytes_per_s),
                activation_bytes: s.live_activation_bytes,
            })
            .collect();
        scheduler::Profile {
            model: model.to_string(),
            page_bytes: self.header.page_bytes,
            total_pages: self.header.page_count as u32,
            steps,
        }
    }
}
