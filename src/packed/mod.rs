//! Packed model files: the optimized IR, the weight space pre-packed in texel order into fixed-size
//! pages, per-step page lists, costs and activation peaks. See [`format`] for the byte layout.
pub mod cost;
pub mod format;
pub mod pack;
pub mod placement;
pub mod report;
pub mod temp;
pub mod texels;
pub mod validate;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use format::{Lookup, PackedHeader, Precision, StepInfo, WeightEntry, WeightKind};
pub use pack::{pack_graph, PackError, PackOptions, Packed};
pub use validate::HeaderError;

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
    #[error(
        "{file}: compiled by an older texstream (graph passes revision {found}; this one reads \
         {current}): compile it again with `texstream compile` (a workload recompiles its models \
         by itself)"
    )]
    Outdated {
        file: PathBuf,
        found: u32,
        current: u32,
    },
    /// Its graph may use fields this build does not know (it would ignore them and run
    /// something else): refused rather than misread.
    #[error(
        "{file}: compiled by a newer texstream (graph passes revision {found}; this one reads up \
         to {current}): run it with that texstream, or compile it again with this one (a \
         workload recompiles its models by itself)"
    )]
    Newer {
        file: PathBuf,
        found: u32,
        current: u32,
    },
    #[error("{file}: corrupt packed model header: {source}")]
    Header {
        file: PathBuf,
        #[source]
        source: HeaderError,
    },
    #[error("{file}: checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupt")]
    Checksum {
        file: PathBuf,
        stored: u32,
        computed: u32,
    },
    #[error("{file}: page {page} checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupt; delete it to compile it again")]
    PageChecksum {
        file: PathBuf,
        page: u64,
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
    p[12..16].copy_from_slice(&FLAG_PAGE_CRCS.to_le_bytes());
    p[16..24].copy_from_slice(&header_len.to_le_bytes());
    p[24..32].copy_from_slice(&data_offset.to_le_bytes());
    p[32..40].copy_from_slice(&page_bytes.to_le_bytes());
    p[40..48].copy_from_slice(&page_count.to_le_bytes());
    p
}

impl Packed {
    /// Writes to a temp file next to `path`, fsyncs it, then renames it into place, so a reader
    /// never sees a half-written file and a mapped old file is never truncated. The file gets
    /// each page's checksum and the header checksum (`FLAG_PAGE_CRCS`), for
    /// [`PackedModel::open_lazy`].
    pub fn write(&self, path: &Path) -> Result<(), PackedError> {
        let io = |source| PackedError::Io {
            file: path.to_path_buf(),
            source,
        };
        let corrupt = |reason: String| PackedError::Corrupt {
            file: path.into(),
            reason,
        };
        let (page_bytes, page_count) = (self.header.page_bytes, self.header.page_count);
        // A file whose data is not its pages could not be opened.
        if page_bytes.checked_mul(page_count) != Some(self.data.len() as u64) {
            return Err(corrupt(format!(
                "{} bytes of page data for {page_count} pages of {page_bytes} bytes",
                self.data.len()
            )));
        }
        // The checksums always describe the data written here, whatever the header held. (Zero-
        // byte pages cannot be checked or opened: `validate` refuses them.)
        let page_crcs = match usize::try_from(page_bytes) {
            Ok(pb) if pb > 0 => self.data.chunks_exact(pb).map(crc32fast::hash).collect(),
            _ => Vec::new(),
        };
        let header = PackedHeader {
            page_crcs,
            ..self.header.clone()
        };
        let header = serde_json::to_vec(&header).map_err(|e| corrupt(e.to_string()))?;
        let hl = header.len() as u64;
        let data_offset = (PREAMBLE_BYTES as u64 + hl).div_ceil(DATA_ALIGN) * DATA_ALIGN;
        let mut pre = preamble(hl, data_offset, page_bytes, page_count);
        let header_crc = header_crc(&pre, &header);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pre[..48]);
        crc.update(&header);
        crc.update(&self.data);
        pre[48..52].copy_from_slice(&crc.finalize().to_le_bytes());
        pre[52..56].copy_from_slice(&header_crc.to_le_bytes());
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Temp files of writers that died before they could clean up.
        temp::remove_stale(path);
        let tmp = temp::temp_path(path, std::process::id());
        let _in_progress = temp::InProgress::register(&tmp);
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

/// Positioned reads from a whole packed file, on disk or in memory.
trait ReadAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.read_exact_at(buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(buf.len())?))
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// CRC32 of the preamble's first 48 bytes and the header JSON (preamble bytes 52..56).
fn header_crc(pre: &[u8; PREAMBLE_BYTES], header: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&pre[..48]);
    crc.update(header);
    crc.finalize()
}

/// The preamble's sizes, checked to add up to the file's length.
struct Preamble {
    flags: u32,
    header_len: u64,
    data_offset: u64,
    page_bytes: u64,
    page_count: u64,
    crc: u32,
    header_crc: u32,
}

impl Preamble {
    /// Magic, version, and sizes that add up to `file_len` exactly (checked arithmetic), so
    /// that nothing later allocates more than the file holds.
    fn parse(
        file: &Path,
        pre: &[u8; PREAMBLE_BYTES],
        file_len: u64,
    ) -> Result<Preamble, PackedError> {
        if &pre[..8] != MAGIC {
            return Err(PackedError::BadMagic { file: file.into() });
        }
        let u32_at = |o: usize| u32::from_le_bytes([pre[o], pre[o + 1], pre[o + 2], pre[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&pre[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(PackedError::Version {
                file: file.into(),
                found: version,
            });
        }
        let p = Preamble {
            flags: u32_at(12),
            header_len: u64_at(16),
            data_offset: u64_at(24),
            page_bytes: u64_at(32),
            page_count: u64_at(40),
            crc: u32_at(48),
            header_crc: u32_at(52),
        };
        let header_end = p.header_len.checked_add(PREAMBLE_BYTES as u64);
        let data_end = p
            .page_bytes
            .checked_mul(p.page_count)
            .and_then(|d| d.checked_add(p.data_offset));
        let fits = p.data_offset.is_multiple_of(DATA_ALIGN)
            && header_end.is_some_and(|e| e <= p.data_offset)
            && data_end == Some(file_len);
        if !fits {
            return Err(PackedError::Corrupt {
                file: file.into(),
                reason: format!(
                    "sizes disagree: the file is {file_len} bytes; the preamble says a {}-byte header, data at {} (a multiple of {DATA_ALIGN} past the header), {} pages of {} bytes (truncated?)",
                    p.header_len, p.data_offset, p.page_count, p.page_bytes
                ),
            });
        }
        Ok(p)
    }
}

/// A packed file's preamble and header JSON, read with the sizes checked against the file's
/// length but nothing verified yet.
struct Head {
    raw: [u8; PREAMBLE_BYTES],
    pre: Preamble,
    json: Vec<u8>,
}

impl Head {
    /// Reads the preamble and the header JSON of a packed file of `len` bytes.
    fn read<R: ReadAt + ?Sized>(file: &Path, source: &R, len: u64) -> Result<Head, PackedError> {
        let io = |source| PackedError::Io {
            file: file.to_path_buf(),
            source,
        };
        let mut raw = [0u8; PREAMBLE_BYTES];
        if len < PREAMBLE_BYTES as u64 {
            if len >= 8 {
                source.read_at(&mut raw[..8], 0).map_err(io)?;
                if &raw[..8] != MAGIC {
                    return Err(PackedError::BadMagic { file: file.into() });
                }
            }
            return Err(PackedError::Corrupt {
                file: file.into(),
                reason: format!(
                    "file is {len} bytes, shorter than the {PREAMBLE_BYTES}-byte preamble"
                ),
            });
        }
        source.read_at(&mut raw, 0).map_err(io)?;
        let pre = Preamble::parse(file, &raw, len)?;
        // Bounded by the file length (checked above).
        let mut json = vec![0u8; pre.header_len as usize];
        source
            .read_at(&mut json, PREAMBLE_BYTES as u64)
            .map_err(io)?;
        Ok(Head { raw, pre, json })
    }

    /// Checks the whole-file checksum, reading every page byte of `source` (`len` bytes).
    fn verify_all<R: ReadAt + ?Sized>(
        &self,
        file: &Path,
        source: &R,
        len: u64,
    ) -> Result<(), PackedError> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.raw[..48]);
        crc.update(&self.json);
        let mut buf = vec![0u8; (1 << 20).min(len - self.pre.data_offset) as usize];
        let mut off = self.pre.data_offset;
        while off < len {
            let n = ((len - off) as usize).min(buf.len());
            source
                .read_at(&mut buf[..n], off)
                .map_err(|source| PackedError::Io {
                    file: file.to_path_buf(),
                    source,
                })?;
            crc.update(&buf[..n]);
            off += n as u64;
        }
        checksum(file, self.pre.crc, crc.finalize())
    }

    /// Checks the header checksum (preamble bytes 52..56): the preamble and the header only.
    fn verify_header(&self, file: &Path) -> Result<(), PackedError> {
        checksum(file, self.pre.header_crc, header_crc(&self.raw, &self.json))
    }

    /// Parses and checks the header, and that it agrees with the preamble on the pages.
    fn parse(&self, file: &Path) -> Result<PackedHeader, PackedError> {
        let header = parse_header(file, &self.json)?;
        let p = &self.pre;
        if header.page_bytes != p.page_bytes || header.page_count != p.page_count {
            return Err(PackedError::Header {
                file: file.into(),
                source: HeaderError::PreambleMismatch {
                    header_count: header.page_count,
                    header_bytes: header.page_bytes,
                    preamble_count: p.page_count,
                    preamble_bytes: p.page_bytes,
                },
            });
        }
        Ok(header)
    }
}

fn checksum(file: &Path, stored: u32, computed: u32) -> Result<(), PackedError> {
    if stored == computed {
        Ok(())
    } else {
        Err(PackedError::Checksum {
            file: file.into(),
            stored,
            computed,
        })
    }
}

/// Reads and verifies a whole packed file of `len` bytes from `source`: preamble, checksum,
/// header. Returns the header and where the page data starts.
fn decode<R: ReadAt + ?Sized>(
    file: &Path,
    source: &R,
    len: u64,
) -> Result<(PackedHeader, u64), PackedError> {
    let head = Head::read(file, source, len)?;
    head.verify_all(file, source, len)?;
    Ok((head.parse(file)?, head.pre.data_offset))
}

/// Parses a header's JSON and checks every index and size in it
/// ([`validate::check_header`]); `file` names it in errors.
pub fn parse_header(file: &Path, json: &[u8]) -> Result<PackedHeader, PackedError> {
    let header: PackedHeader = serde_json::from_slice(json).map_err(|e| {
        outdated(file, json).unwrap_or_else(|| PackedError::Corrupt {
            file: file.into(),
            reason: format!("bad header: {e}"),
        })
    })?;
    if header.compiler_revision > COMPILER_REVISION {
        return Err(PackedError::Newer {
            file: file.into(),
            found: header.compiler_revision,
            current: COMPILER_REVISION,
        });
    }
    validate::check_header(&header).map_err(|source| PackedError::Header {
        file: file.into(),
        source,
    })?;
    Ok(header)
}

/// A header that does not parse but names an older compiler revision: the file predates a
/// change to the graph's ops (revision 17 gave `Rope` a field), it is not damaged.
fn outdated(file: &Path, json: &[u8]) -> Option<PackedError> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    // Absent in the oldest files: revision 1.
    let found = v.get("compiler_revision").map_or(Some(1), |r| r.as_u64())?;
    let found = u32::try_from(found).ok()?;
    (found < COMPILER_REVISION).then(|| PackedError::Outdated {
        file: file.into(),
        found,
        current: COMPILER_REVISION,
    })
}

/// Verifies a whole packed file held in memory (what [`PackedModel::open`] checks) and
/// returns its header; `file` names it in errors.
pub fn parse_bytes(file: &Path, bytes: &[u8]) -> Result<PackedHeader, PackedError> {
    decode(file, bytes, bytes.len() as u64).map(|(header, _)| header)
}

/// An open packed model. `read_page` takes `&self` and uses positioned reads, so I/O threads can
/// share one `PackedModel` (e.g. in an `Arc`).
pub struct PackedModel {
    path: PathBuf,
    file: File,
    header: PackedHeader,
    data_offset: u64,
    /// Opened by [`PackedModel::open_lazy`] without reading the pages: `read_page` checks each
    /// page against `header.page_crcs` (then one per page).
    verify_pages: bool,
}

/// Converts per-step FLOPs/bytes to seconds with a simple roofline: max(flops/F, bytes/B).
#[derive(Clone, Copy, Debug)]
pub struct CostModel {
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
}

impl CostModel {
    /// The compile-time guess for plans made before any run is measured (replaced by
    /// measured times once the engine calibrates).
    pub const NOMINAL: CostModel = CostModel {
        flops_per_s: 1e12,
        bytes_per_s: 200e9,
    };
}

/// Drops a file's pages from the operating system's page cache (written pages are flushed
/// first), so that the next reads come from the disk: what a process started after a reboot,
/// or after other work pushed the model out of memory, would see. For cold-start measurements;
/// needs no privileges (`posix_fadvise(POSIX_FADV_DONTNEED)` on the file).
pub fn drop_from_page_cache(path: &Path) -> std::io::Result<()> {
    let file = File::open(path)?;
    file.sync_all()?;
    nix::fcntl::posix_fadvise(
        &file,
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )
    .map_err(std::io::Error::from)
}

/// The rate `path` reads from disk: drops it from the page cache, reads up to `max_bytes` of it
/// in order, and drops it again (so what follows still starts cold). Returns the bytes read and
/// the seconds that took.
pub fn probe_disk_read(path: &Path, max_bytes: u64) -> std::io::Result<(u64, f64)> {
    use std::io::Read;
    drop_from_page_cache(path)?;
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 8 << 20];
    let (mut read, start) = (0u64, std::time::Instant::now());
    while read < max_bytes {
        let want = buf.len().min((max_bytes - read) as usize);
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    drop_from_page_cache(path)?;
    Ok((read, secs))
}

/// Opens `path` for positioned reads and gets its length.
fn open_file(path: &Path) -> Result<(File, u64), PackedError> {
    let file_err = |source| PackedError::Io {
        file: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(file_err)?;
    let len = file.metadata().map_err(file_err)?.len();
    Ok((file, len))
}

impl PackedModel {
    /// Opens and fully verifies a packed model: magic, version, sizes against the file length
    /// (before any allocation of those sizes), checksum, then every index and size of the
    /// header ([`validate::check_header`]).
    pub fn open(path: &Path) -> Result<PackedModel, PackedError> {
        let (file, len) = open_file(path)?;
        let (header, data_offset) = decode(path, &file, len)?;
        Ok(PackedModel {
            path: path.to_path_buf(),
            file,
            header,
            data_offset,
            verify_pages: false,
        })
    }

    /// Opens a packed model reading only its preamble and header, when the file carries page
    /// checksums (`FLAG_PAGE_CRCS`): the header checksum and every check of [`Self::open`] on
    /// the preamble and header are made now, and each page is verified by [`Self::read_page`]
    /// when it is read. A file without them is fully verified, as by [`Self::open`].
    pub fn open_lazy(path: &Path) -> Result<PackedModel, PackedError> {
        let (file, len) = open_file(path)?;
        let head = Head::read(path, &file, len)?;
        let verify_pages = head.pre.flags & FLAG_PAGE_CRCS != 0;
        if verify_pages {
            head.verify_header(path)?;
        } else {
            head.verify_all(path, &file, len)?;
        }
        let header = head.parse(path)?;
        // The flag promises one checksum per page; `read_page` relies on it.
        if verify_pages && header.page_crcs.len() as u64 != header.page_count {
            return Err(PackedError::Corrupt {
                file: path.into(),
                reason: format!(
                    "the preamble flags page checksums, but the header has {} for {} pages",
                    header.page_crcs.len(),
                    header.page_count
                ),
            });
        }
        Ok(PackedModel {
            path: path.to_path_buf(),
            file,
            header,
            data_offset: head.pre.data_offset,
            verify_pages,
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

    /// Reads logical page `i` into `buf` (exactly `page_bytes` long) with a positioned read,
    /// and checks its checksum if the model was opened by [`Self::open_lazy`] without reading
    /// the pages.
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
            })?;
        if self.verify_pages {
            // `open_lazy` checked there is one checksum per page.
            if let Some(&stored) = self.header.page_crcs.get(i as usize) {
                let computed = crc32fast::hash(buf);
                if computed != stored {
                    return Err(PackedError::PageChecksum {
                        file: self.path.clone(),
                        page: i,
                        stored,
                        computed,
                    });
                }
            }
        }
        Ok(())
    }

    /// The scheduler's load profile ([`PackedHeader::load_profile`]).
    pub fn load_profile(&self, model: &str, cost: CostModel) -> scheduler::Profile {
        self.header.load_profile(model, cost)
    }
}

impl PackedHeader {
    /// The activation precision to run at: `asked` (the workload or the command line), else
    /// the one measured at compile time, else none (the weights').
    pub fn activations_or_measured(
        &self,
        asked: Option<crate::Precision>,
    ) -> Option<crate::Precision> {
        asked.or(self.activations.as_ref().map(|c| c.precision))
    }

    /// The scheduler's load profile: one step per non-view node, with its pages, roofline
    /// compute time and live activation bytes. Page counts fit u32 once the header is checked.
    pub fn load_profile(&self, model: &str, cost: CostModel) -> scheduler::Profile {
        let steps = self
            .steps
            .iter()
            .filter(|s| !s.is_view)
            .map(|s| scheduler::Step {
                name: s.name.clone(),
                pages: s.pages.clone(),
                compute_s: (s.flops as f64 / cost.flops_per_s)
                    .max(s.bytes as f64 / cost.bytes_per_s),
                activation_bytes: s.live_activation_bytes,
                lookup: s.lookup.is_some(),
            })
            .collect();
        scheduler::Profile {
            model: model.to_string(),
            page_bytes: self.page_bytes,
            total_pages: self.page_count as u32,
            steps,
        }
    }

    /// [`Self::load_profile`] for a model run with its activations stored at `activations`
    /// (fp16 weights with fp32 activations, say): the packed liveness is counted at the weight
    /// precision, so each step's activation bytes scale by the ratio of the two.
    pub fn load_profile_at(
        &self,
        model: &str,
        cost: CostModel,
        activations: Option<crate::Precision>,
    ) -> scheduler::Profile {
        let mut p = self.load_profile(model, cost);
        if let Some(a) = activations {
            let (num, den) = (
                a.bytes_per_value() as u64,
                self.precision.bytes_per_value() as u64,
            );
            for s in &mut p.steps {
                s.activation_bytes = s.activation_bytes * num / den;
            }
        }
        p
    }
}
