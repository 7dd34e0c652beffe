//! The checked-in C header is what cbindgen generates from the crate now: a change to the
//! exported functions or types without regenerating the header fails here.
use std::path::PathBuf;

#[test]
fn checked_in_header_is_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    // cbindgen follows the `mod` declarations from lib.rs itself, so it needs no `cargo
    // metadata` run.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"));
    let mut generated = Vec::new();
    builder
        .generate()
        .expect("cbindgen could not read capi/src")
        .write(&mut generated);
    let path = dir.join("include/texstream.h");
    if std::env::var_os("TEXSTREAM_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("writing include/texstream.h");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "capi/include/texstream.h is out of date: run `TEXSTREAM_UPDATE_HEADER=1 cargo test -p \
         texstream-capi --test header` to update it"
    );
}
