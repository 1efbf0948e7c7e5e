//! The `raftq` command (see [`raftq::run`]).

fn main() -> std::process::ExitCode {
    raftq::run()
}
