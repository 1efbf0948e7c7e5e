//! raftq's cross-crate tests, in one binary: in-process clusters on loopback (`cluster`), the
//! client API end to end over a served node (set up by `serving`): every operation through both
//! of its fronts (`api`, over the REST and gRPC views of `front`, gRPC's by way of `protojson`),
//! and what only one front has (`http`, `grpc`); the `raftq` command as a user runs it
//! (`process`) and its backups (`backup`), the data directories of earlier builds it opens and
//! newer ones it refuses (`fixtures`), with TLS on its listener (`tls`) and between peers
//! (`peers`), with certificates from `certs`, its limits against abuse (`limits`), and a disk of
//! its own that fills (`full_disk`, on a tmpfs it mounts: root only); the SQS-compatible endpoint with the
//! AWS SDK for Rust and hand-built Query requests (`sqs`). Every test is bounded in time and
//! removes what it started. Tests of one crate stay beside its code.

mod api;
mod backup;
mod certs;
mod cluster;
mod fixtures;
mod front;
mod full_disk;
mod grpc;
mod http;
mod limits;
mod peers;
mod process;
mod protojson;
mod serving;
mod sqs;
mod tls;
