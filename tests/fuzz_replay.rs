//! The fuzz targets' entry points (`texstream::fuzz_entry`) as a stable test: every checked-in
//! corpus file of every target (`fuzz/corpus/<target>/`), then a seeded mutation run of a few
//! thousand inputs per target. Any panic fails the test and saves the input for the corpus.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use texstream::fuzz_entry;

/// A fuzz entry point: whether the input parsed.
type Entry = fn(&[u8]) -> bool;

/// (target, entry point, mutated inputs to run).
const TARGETS: &[(&str, Entry, usize)] = &[
    ("import", fuzz_entry::onnx_import, 2000),
    ("npy", fuzz_entry::npy, 4000),
    ("packed_header", fuzz_entry::packed_header, 3000),
    ("workload", fuzz_entry::workload, 3000),
];

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the {target} corpus went missing");
    files
}

/// xorshift64: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Numbers that tend to break size arithmetic, for text formats (JSON headers, RON).
const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "4096",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "1e308",
];

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    if b.is_empty() {
        return vec![rng.next() as u8; rng.below(16)];
    }
    match rng.below(7) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let k = rng.below(b.len());
                b[k] = rng.next() as u8;
            }
        }
        1 => b.truncate(rng.below(b.len())),
        2 => {
            let k = rng.below(b.len());
            b.insert(k, rng.next() as u8);
        }
        3 => {
            // A run of 0xff: large varints, lengths and sizes.
            let k = rng.below(b.len());
            let end = (k + 1 + rng.below(8)).min(b.len());
            b[k..end].fill(0xff);
        }
        4 => {
            // Splice another corpus file's tail in.
            let (k, j) = (rng.below(b.len()), rng.below(other.len()));
            b.truncate(k);
            b.extend_from_slice(&other[j..]);
        }
        _ => {
            // Replace a run of digits with an interesting number (text formats).
            let digits: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit()).collect();
            if digits.is_empty() {
                b.truncate(rng.below(b.len()));
            } else {
                let start = digits[rng.below(digits.len())];
                let end = (start..b.len())
                    .find(|&i| !b[i].is_ascii_digit())
                    .unwrap_or(b.len());
                let n = INTERESTING[rng.below(INTERESTING.len())];
                b.splice(start..end, n.bytes());
            }
        }
    }
    b
}

/// Mutants of whole packed files only get past the checksum if it is fixed up.
fn fix_packed_checksum(b: &mut [u8]) {
    if b.len() < 64 || &b[..8] != texstream::packed::format::MAGIC {
        return;
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[..48]);
    let header_len = u64::from_le_bytes(b[16..24].try_into().unwrap());
    let data_offset = u64::from_le_bytes(b[24..32].try_into().unwrap());
    let header_end = header_len.saturating_add(64).min(b.len() as u64) as usize;
    crc.update(&b[64..header_end]);
    crc.update(&b[(data_offset.min(b.len() as u64) as usize)..]);
    let sum = crc.finalize().to_le_bytes();
    b[48..52].copy_from_slice(&sum);
}

fn run_one(target: &str, entry: Entry, input: &[u8], what: &str) -> bool {
    match catch_unwind(AssertUnwindSafe(|| entry(input))) {
        Ok(parsed) => parsed,
        Err(_) => {
            let dump = std::env::temp_dir().join(format!("texstream-crash-{target}-{what}"));
            std::fs::write(&dump, input).unwrap();
            panic!(
                "{target}: panic on {what} (input saved to {}; add it to fuzz/corpus/{target}/)",
                dump.display()
            );
        }
    }
}

#[test]
fn every_corpus_file_and_mutant_gives_ok_or_an_error() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for &(target, entry, mutants) in TARGETS {
        let files = corpus(target);
        let mut parsed = 0;
        for (path, bytes) in &files {
            let name = path.file_name().unwrap().to_string_lossy();
            parsed += run_one(target, entry, bytes, &name) as usize;
        }
        assert!(
            parsed > 0,
            "{target}: no corpus file parses, so no mutant gets deep"
        );
        let mut mutants_parsed = 0;
        for i in 0..mutants {
            let base = &files[rng.below(files.len())].1;
            let other = &files[rng.below(files.len())].1;
            let mut input = mutate(&mut rng, base, other);
            if target == "packed_header" && rng.below(2) == 0 {
                fix_packed_checksum(&mut input);
            }
            mutants_parsed += run_one(target, entry, &input, &format!("mutant-{i}")) as usize;
        }
        println!(
            "{target}: {parsed} of {} corpus files and {mutants_parsed} of {mutants} mutants parse",
            files.len()
        );
    }
}
