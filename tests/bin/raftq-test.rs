//! The `raftq` command, for the process tests.

fn main() -> std::process::ExitCode {
    raftq::run()
}
