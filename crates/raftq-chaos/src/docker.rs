//! Control of the compose cluster's containers through the docker CLI: crash (`kill -s KILL`),
//! start, pause (SIGSTOP of every process, via the freezer), network disconnect and reconnect,
//! a one-way cut (a packet filter in the node's network namespace), a wiped node started afresh,
//! the clock offset a node's libfaketime reads, copies of its files, a power loss armed in its
//! powerfs layer (docs/powerfs.md), and its log. The log of every container it removes is kept
//! first, in the run's directory.
//!
//! Every node runs on powerfs (the override `scripts/chaos` writes): its volume is mounted at
//! [`BACKING`], its files are in [`BACKING_DATA`], and `/data`, where the node reads them while it
//! runs, is the layer's mount point on a tmpfs, empty while the node is stopped.

use std::path::{Path, PathBuf};

use tokio::process::Command;

/// The compose project under test: its nodes come from the `base` files (the cluster it starts
/// with); the services only the `spare` files define (nodes a `grow` adds) from those.
#[derive(Debug, Clone)]
pub struct Compose {
    pub project: String,
    base: Vec<PathBuf>,
    spare: Vec<PathBuf>,
    base_services: Vec<String>,
    /// `docker compose` (the plugin) or `docker-compose` (the standalone tool).
    program: Vec<String>,
    /// The file the logs of the containers the run removes are appended to.
    removed_log: PathBuf,
}

/// The file inside a node's container that its libfaketime reads the clock offset from.
pub const CLOCK_OFFSET_FILE: &str = "/tmp/clock-offset";
/// The nodes' peer port in the compose files.
const PEER_PORT: &str = "7000";
/// Where a node's volume is mounted: powerfs's backing directory.
pub const BACKING: &str = "/backing";
/// Where a node's files are in its volume, which `docker cp` reads and writes while it is
/// stopped (its `/data` through the layer while it runs).
pub const BACKING_DATA: &str = "/backing/data";
/// The powerfs command in the chaos image.
const POWERFS: &str = "/raftq-powerfs";

impl Compose {
    /// The project, driven by whichever compose tool this machine has; the logs of the
    /// containers it removes are appended to `removed_log`.
    pub async fn detect(
        project: String,
        base: Vec<PathBuf>,
        spare: Vec<PathBuf>,
        removed_log: PathBuf,
    ) -> Result<Compose, String> {
        let program = if Self::run("docker", &["compose", "version"]).await.is_ok() {
            vec!["docker".to_string(), "compose".to_string()]
        } else if Self::run("docker-compose", &["version"]).await.is_ok() {
            vec!["docker-compose".to_string()]
        } else {
            return Err("neither `docker compose` nor `docker-compose` is available".into());
        };
        let mut compose = Compose {
            project,
            base,
            spare,
            base_services: Vec::new(),
            program,
            removed_log,
        };
        compose.base_services = compose
            .compose_with(&compose.base, &["config", "--services"])
            .await?
            .lines()
            .map(str::to_string)
            .collect();
        Ok(compose)
    }

    /// Whether `service` is one the cluster did not start with.
    pub fn is_spare(&self, service: &str) -> bool {
        !self.base_services.iter().any(|s| s == service)
    }

    /// The files that define `service`.
    fn files(&self, service: &str) -> &[PathBuf] {
        if !self.is_spare(service) || self.spare.is_empty() {
            &self.base
        } else {
            &self.spare
        }
    }

    async fn run(program: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .output()
            .await
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    async fn compose_with(&self, files: &[PathBuf], args: &[&str]) -> Result<String, String> {
        let mut all: Vec<String> = self.program[1..].to_vec();
        all.extend(["-p".to_string(), self.project.clone()]);
        for file in files {
            all.extend(["-f".to_string(), file.to_string_lossy().to_string()]);
        }
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        Self::run(&self.program[0], &all).await
    }

    /// The container of a compose service.
    pub async fn container(&self, service: &str) -> Result<String, String> {
        let id = self
            .compose_with(self.files(service), &["ps", "-a", "-q", service])
            .await?;
        id.lines()
            .next()
            .map(str::to_string)
            .ok_or_else(|| format!("no container for {service}"))
    }

    /// Creates and starts `service` (a spare, or one whose container was removed).
    pub async fn up(&self, service: &str) -> Result<(), String> {
        self.compose_with(self.files(service), &["up", "-d", "--no-deps", service])
            .await
            .map(|_| ())
    }

    /// This project with `file` as its last compose file, which overrides the others (for the
    /// cluster's nodes; the spares keep their own files).
    pub fn with_file(&self, file: &Path) -> Compose {
        let mut compose = self.clone();
        if !compose.base.iter().any(|f| f == file) {
            compose.base.push(file.to_path_buf());
        }
        compose
    }

    /// Removes `service`'s container (its log kept first, see [`Compose::keep_log`]), then
    /// creates and starts it as the compose files now say, on the same volumes.
    pub async fn recreate(&self, service: &str) -> Result<(), String> {
        let id = self.container(service).await?;
        self.keep_log(service, &id).await;
        self.compose_with(self.files(service), &["rm", "-f", "-s", service])
            .await?;
        self.up(service).await
    }

    /// Stops `service` at once and removes its container and its data volume (the volume at
    /// [`BACKING`] under powerfs, at `/data` without it; the certificates' volume, shared by
    /// every node, stays): its data is gone. The container's log is kept first (see
    /// [`Compose::keep_log`]).
    pub async fn wipe(&self, service: &str) -> Result<(), String> {
        let id = self.container(service).await?;
        self.keep_log(service, &id).await;
        // Named volumes only: under powerfs `/data` is a tmpfs, which has no name.
        let volumes = Self::run(
            "docker",
            &[
                "inspect",
                "-f",
                "{{range .Mounts}}{{if and (eq .Type \"volume\") (or (eq .Destination \"/data\") \
                 (eq .Destination \"/backing\"))}}{{.Name}} {{end}}{{end}}",
                &id,
            ],
        )
        .await?;
        if volumes.is_empty() {
            return Err(format!(
                "{service} has no data volume at /data or {BACKING}"
            ));
        }
        self.compose_with(self.files(service), &["rm", "-f", "-s", service])
            .await?;
        for volume in volumes.split_whitespace() {
            Self::run("docker", &["volume", "rm", volume]).await?;
        }
        Ok(())
    }

    /// Appends the log of `service`'s container `id` (every start's, timestamped) to the removed
    /// containers' log, under a header that names it. A log that cannot be read or kept is
    /// reported and does not stop the fault: the run's history matters more than one log.
    async fn keep_log(&self, service: &str, id: &str) {
        let out = match Command::new("docker")
            .args(["logs", "--timestamps", id])
            .output()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                println!("warning: the log of {service} ({id}) is lost: docker logs: {e}");
                return;
            }
        };
        let mut log = format!("=== {service} ({id}), removed\n").into_bytes();
        log.extend_from_slice(&out.stdout);
        log.extend_from_slice(&out.stderr);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.removed_log)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &log));
        if let Err(e) = written {
            let path = self.removed_log.display();
            println!("warning: the log of {service} ({id}) is lost: {path}: {e}");
        }
    }

    async fn docker_on(&self, service: &str, args: &[&str]) -> Result<(), String> {
        self.docker_on_all(&[service.to_string()], args).await
    }

    /// One `docker ARGS` command on the containers of all `services`: their ids are looked up
    /// first, so that the command reaches them at once.
    async fn docker_on_all(&self, services: &[String], args: &[&str]) -> Result<(), String> {
        let mut ids = Vec::new();
        for service in services {
            ids.push(self.container(service).await?);
        }
        let mut all = args.to_vec();
        all.extend(ids.iter().map(String::as_str));
        Self::run("docker", &all).await.map(|_| ())
    }

    /// `kill -9` of the node's process.
    pub async fn kill(&self, service: &str) -> Result<(), String> {
        self.kill_all(&[service.to_string()]).await
    }

    /// `kill -9` of the processes of all `services` at once.
    pub async fn kill_all(&self, services: &[String]) -> Result<(), String> {
        self.docker_on_all(services, &["kill", "-s", "KILL"]).await
    }

    pub async fn start(&self, service: &str) -> Result<(), String> {
        self.start_all(&[service.to_string()]).await
    }

    /// Starts the containers of all `services` with one command.
    pub async fn start_all(&self, services: &[String]) -> Result<(), String> {
        self.docker_on_all(services, &["start"]).await
    }

    pub async fn pause(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["pause"]).await
    }

    pub async fn unpause(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["unpause"]).await
    }

    /// A graceful restart (SIGTERM, then start).
    pub async fn restart(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["restart", "-t", "5"]).await
    }

    /// A graceful stop (SIGTERM; SIGKILL after 10 s).
    pub async fn stop(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["stop", "-t", "10"]).await
    }

    /// Runs `raftq ARGS` inside `service`'s container (the image holds the CLI), against that
    /// node's own API over TLS, trusting the compose files' CA.
    pub async fn cli(&self, service: &str, args: &[&str]) -> Result<String, String> {
        let id = self.container(service).await?;
        let mut all = vec![
            "exec",
            &id,
            "/raftq",
            "--endpoint",
            "https://127.0.0.1:8080",
        ];
        all.extend_from_slice(&["--ca-cert", "/certs/ca.pem"]);
        all.extend_from_slice(args);
        Self::run("docker", &all).await
    }

    /// Arms a power loss in `service`'s powerfs layer: the next start of its container first
    /// reverts what was not fsynced, with `seed` (as root: the journal is root's).
    pub async fn arm_power_loss(&self, service: &str, seed: u64) -> Result<(), String> {
        let id = self.container(service).await?;
        let seed = seed.to_string();
        let args = ["exec", "-u", "0", &id, POWERFS, "arm", "--backing", BACKING];
        let mut all = args.to_vec();
        all.extend_from_slice(&["--seed", &seed]);
        Self::run("docker", &all).await.map(|_| ())
    }

    /// The lines `service`'s container logged (stdout and stderr, each with docker's timestamp
    /// in front, in order): since `since_ms` (ms since the Unix epoch) when given, the last
    /// `tail` when given.
    pub async fn log_lines(
        &self,
        service: &str,
        since_ms: Option<u64>,
        tail: Option<usize>,
    ) -> Result<Vec<String>, String> {
        let id = self.container(service).await?;
        let since = since_ms.map(|ms| format!("{}.{:03}", ms / 1000, ms % 1000));
        let tail = tail.map(|n| n.to_string());
        let mut args = vec!["logs", "--timestamps"];
        if let Some(since) = &since {
            args.extend_from_slice(&["--since", since]);
        }
        if let Some(tail) = &tail {
            args.extend_from_slice(&["--tail", tail]);
        }
        args.push(&id);
        let out = Command::new("docker")
            .args(&args)
            .output()
            .await
            .map_err(|e| format!("docker logs: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!("docker logs {service}: {}", err.trim()));
        }
        Ok(merge_streams(&out.stdout, &out.stderr))
    }

    /// Sets the offset of `service`'s clock for its libfaketime (`+3600`, `-3600`, `+0`); it
    /// reads the file again within a second.
    pub async fn set_clock_offset(&self, service: &str, offset: &str) -> Result<(), String> {
        let local = std::env::temp_dir().join(format!("raftq-chaos-clock-{}", std::process::id()));
        std::fs::write(&local, format!("{offset}\n")).map_err(|e| e.to_string())?;
        let id = self.container(service).await?;
        let target = format!("{id}:{CLOCK_OFFSET_FILE}");
        let result = Self::run("docker", &["cp", &local.to_string_lossy(), &target]).await;
        let _ = std::fs::remove_file(&local);
        result.map(|_| ())
    }

    /// Copies the directory `path` out of `service`'s container into `into`.
    pub async fn copy_out(&self, service: &str, path: &str, into: &Path) -> Result<(), String> {
        let id = self.container(service).await?;
        let source = format!("{id}:{path}");
        Self::run("docker", &["cp", &source, &into.to_string_lossy()])
            .await
            .map(|_| ())
    }

    /// Copies the file `from` over the file at `path` in `service`'s container (the copy is
    /// root's and readable by all: the node reads its damaged files, it need not write them).
    pub async fn copy_in(&self, service: &str, from: &Path, path: &str) -> Result<(), String> {
        let id = self.container(service).await?;
        let target = format!("{id}:{path}");
        Self::run("docker", &["cp", &from.to_string_lossy(), &target])
            .await
            .map(|_| ())
    }

    /// The address `service` has on the compose network.
    pub async fn address(&self, service: &str) -> Result<String, String> {
        let id = self.container(service).await?;
        Self::run(
            "docker",
            &[
                "inspect",
                "-f",
                "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
                &id,
            ],
        )
        .await?
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| format!("{service} has no address"))
    }

    /// Runs `iptables ARGS` in `service`'s network namespace (through its process, from the
    /// host: the image has no tools).
    async fn iptables(&self, service: &str, args: &[&str]) -> Result<(), String> {
        let id = self.container(service).await?;
        let pid = Self::run("docker", &["inspect", "-f", "{{.State.Pid}}", &id]).await?;
        let mut all = vec!["-t", &pid, "-n", "iptables"];
        all.extend_from_slice(args);
        Self::run("nsenter", &all).await.map(|_| ())
    }

    /// Drops every packet `service` receives from `from` on its peer port: `from`'s calls to
    /// `service` (appends, votes, pings, forwards) no longer arrive, while `service`'s calls to
    /// `from` and their answers still go through (one way).
    pub async fn drop_from(&self, service: &str, from: &str) -> Result<(), String> {
        let address = self.address(from).await?;
        let rule = [
            "-s", &address, "-p", "tcp", "--dport", PEER_PORT, "-j", "DROP",
        ];
        let mut args = vec!["-I", "INPUT"];
        args.extend_from_slice(&rule);
        self.iptables(service, &args).await
    }

    /// Removes every packet filter of `service`.
    pub async fn undrop(&self, service: &str) -> Result<(), String> {
        self.iptables(service, &["-F", "INPUT"]).await
    }

    /// The compose network `service` is on (the one the nodes talk on).
    pub async fn network_of(&self, service: &str) -> Result<String, String> {
        self.network(&self.container(service).await?).await
    }

    /// The network a container is on.
    async fn network(&self, container: &str) -> Result<String, String> {
        let names = Self::run(
            "docker",
            &[
                "inspect",
                "-f",
                "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
                container,
            ],
        )
        .await?;
        names
            .split_whitespace()
            .next()
            .map(str::to_string)
            .ok_or_else(|| format!("{container} is on no network"))
    }

    /// Cuts the node off its peers (and the host's port mapping keeps working only if the
    /// container stays on the network: a disconnected node is unreachable from clients too).
    pub async fn disconnect(&self, service: &str) -> Result<String, String> {
        let id = self.container(service).await?;
        let network = self.network(&id).await?;
        Self::run("docker", &["network", "disconnect", &network, &id]).await?;
        Ok(network)
    }

    /// Puts the node back on `network` under its service name.
    pub async fn connect(&self, service: &str, network: &str) -> Result<(), String> {
        let id = self.container(service).await?;
        Self::run(
            "docker",
            &["network", "connect", "--alias", service, network, &id],
        )
        .await
        .map(|_| ())
    }

    /// Whether a container is running and not paused.
    pub async fn running(&self, service: &str) -> bool {
        let Ok(id) = self.container(service).await else {
            return false;
        };
        Self::run("docker", &["inspect", "-f", "{{.State.Status}}", &id])
            .await
            .is_ok_and(|s| s == "running")
    }
}

/// The lines of a container's two output streams as one log, in the order of the timestamps
/// `docker logs --timestamps` puts in front of each (RFC 3339 in UTC with nanoseconds, so that
/// their text order is their time order; the sort is stable for equal ones).
fn merge_streams(stdout: &[u8], stderr: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = [stdout, stderr]
        .iter()
        .flat_map(|stream| {
            String::from_utf8_lossy(stream)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|line| !line.is_empty())
        .collect();
    lines.sort_by(|a, b| {
        let stamp = |line: &str| line.split_once(' ').map_or("", |(t, _)| t).to_string();
        stamp(a).cmp(&stamp(b))
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_streams_merge_in_the_order_of_their_timestamps() {
        let stdout = b"2026-12-05T16:00:01.000000001Z raftq serving\n\
                       2026-12-05T16:00:03.000000000Z raftq stopped\n";
        let stderr = b"2026-12-05T16:00:00.500000000Z power loss: unsynced changes reverted\n\
                       2026-12-05T16:00:02.000000000Z mounted\n";
        let lines = merge_streams(stdout, stderr);
        let words: Vec<&str> = lines
            .iter()
            .map(|l| l.split(' ').nth(1).unwrap_or(""))
            .collect();
        assert_eq!(words, ["power", "raftq", "mounted", "raftq"]);
    }
}
