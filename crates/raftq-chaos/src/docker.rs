//! Control of the compose cluster's containers through the docker CLI: crash (`kill -s KILL`),
//! start, pause (SIGSTOP of every process, via the freezer), network disconnect and reconnect.

use std::path::PathBuf;

use tokio::process::Command;

/// The compose project under test.
#[derive(Debug, Clone)]
pub struct Compose {
    pub project: String,
    pub file: PathBuf,
    /// `docker compose` (the plugin) or `docker-compose` (the standalone tool).
    program: Vec<String>,
}

impl Compose {
    /// The project, driven by whichever compose tool this machine has.
    pub async fn detect(project: String, file: PathBuf) -> Result<Compose, String> {
        let program = if Self::run("docker", &["compose", "version"]).await.is_ok() {
            vec!["docker".to_string(), "compose".to_string()]
        } else if Self::run("docker-compose", &["version"]).await.is_ok() {
            vec!["docker-compose".to_string()]
        } else {
            return Err("neither `docker compose` nor `docker-compose` is available".into());
        };
        Ok(Compose {
            project,
            file,
            program,
        })
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

    async fn compose(&self, args: &[&str]) -> Result<String, String> {
        let file = self.file.to_string_lossy().to_string();
        let mut all: Vec<&str> = self.program[1..].iter().map(String::as_str).collect();
        all.extend_from_slice(&["-p", &self.project, "-f", &file]);
        all.extend_from_slice(args);
        Self::run(&self.program[0], &all).await
    }

    /// The container of a compose service.
    pub async fn container(&self, service: &str) -> Result<String, String> {
        let id = self.compose(&["ps", "-a", "-q", service]).await?;
        id.lines()
            .next()
            .map(str::to_string)
            .ok_or_else(|| format!("no container for {service}"))
    }

    async fn docker_on(&self, service: &str, args: &[&str]) -> Result<(), String> {
        let id = self.container(service).await?;
        let mut all = args.to_vec();
        all.push(&id);
        Self::run("docker", &all).await.map(|_| ())
    }

    /// `kill -9` of the node's process.
    pub async fn kill(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["kill", "-s", "KILL"]).await
    }

    pub async fn start(&self, service: &str) -> Result<(), String> {
        self.docker_on(service, &["start"]).await
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

    /// The compose network the nodes talk on.
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
