//! Compiles `proto/raft.proto` with the vendored protoc (no system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    println!("cargo:rerun-if-changed=../../proto/raft.proto");
    tonic_prost_build::configure().compile_protos(&["../../proto/raft.proto"], &["../../proto"])?;
    Ok(())
}
