//! Build script: compiles the vendored ONNX protobuf schema with protox + prost-build (no protoc binary).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "src/onnx/proto/onnx.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["src/onnx/proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
