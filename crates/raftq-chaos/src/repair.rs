//! What a fault leaves done, and the repair of a node that does not come back: it is replaced
//! as docs/operations.md tells an operator (wiped, started blank, `raftq cluster replace`).

use std::time::Duration;

use crate::docker::Compose;
use crate::nodes::Nodes;

/// How long a repaired or added node may take to catch up and answer.
pub const REPAIR_WAIT: Duration = Duration::from_secs(60);

/// What an injected fault did, for the history and the run's output.
#[derive(Debug, Default)]
pub struct Done {
    /// What the cluster did, printed with the fault.
    pub note: Option<String>,
    /// When every node the fault stopped was running again.
    pub restarted: Option<u64>,
    /// The nodes a power loss left unable to come back.
    pub unrecovered: Vec<String>,
    /// Why the fault went wrong part-way, when it did after doing something worth recording.
    pub error: Option<String>,
}

impl Done {
    pub fn noted(note: String) -> Done {
        Done {
            note: Some(note),
            ..Done::default()
        }
    }
}

/// Wipes `target`'s data, starts it blank, and repairs the cluster with `raftq cluster
/// replace`, as docs/operations.md tells an operator.
pub async fn replace(compose: &Compose, nodes: &Nodes, target: &str) -> Result<String, String> {
    compose.wipe(target).await?;
    compose.up(target).await?;
    let id = target.trim_start_matches("node");
    if let Ok(n) = id.parse() {
        nodes.wait_answering(n, REPAIR_WAIT).await?;
    }
    let members: Vec<String> = nodes
        .services()
        .into_iter()
        .filter(|s| s != target)
        .collect();
    // The address is given, as an operator who knows it would: a replace that removed the
    // node and then failed to add it is finished by the next try.
    let addr = format!("{target}:7000");
    let mut errors = Vec::new();
    for service in &members {
        match compose
            .cli(
                service,
                &["cluster", "replace", "--id", id, "--raft-addr", &addr],
            )
            .await
        {
            Ok(_) => {
                nodes.wait_healthy(REPAIR_WAIT).await;
                return Ok("replaced with a blank node".into());
            }
            Err(e) => errors.push(format!("on {service}: {e}")),
        }
    }
    Err(format!("raftq cluster replace: {}", errors.join("; ")))
}
