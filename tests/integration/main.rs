//! raftq's cross-crate tests, in one binary: in-process clusters on loopback (`cluster`), the
//! REST and gRPC APIs end to end over a served node (`http`, `grpc`, set up by `serving`), and
//! the `raftq` command as a user runs it (`process`), with TLS on its listener (`tls`) and
//! between peers (`peers`), with certificates from `certs`, and its limits against abuse
//! (`limits`). Every test is bounded in time and removes
//! what it started. Tests of one crate stay beside its code.

mod certs;
mod cluster;
mod grpc;
mod http;
mod limits;
mod peers;
mod process;
mod serving;
mod tls;
