//! Compiles `proto/raftq.proto` (the client gRPC API) with the vendored protoc (no system protoc
//! needed), server and client both: `raftq-api` serves the server, the tests and the benchmark
//! use the client.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    println!("cargo:rerun-if-changed=../../proto/raftq.proto");
    tonic_prost_build::configure()
        // Attributes as BTreeMap, like the engine's messages.
        .btree_map(".")
        .compile_protos(&["../../proto/raftq.proto"], &["../../proto"])?;
    Ok(())
}
