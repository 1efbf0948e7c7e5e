//! Compiles the client side of `proto/raftq.proto` with the vendored protoc. The bench compiles
//! its own copy rather than depending on `raftq-api`, so that a client tool does not link the
//! server (RocksDB, openraft).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    println!("cargo:rerun-if-changed=../../proto/raftq.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&["../../proto/raftq.proto"], &["../../proto"])?;
    Ok(())
}
