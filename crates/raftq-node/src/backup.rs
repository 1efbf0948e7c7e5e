//! Backups of the cluster's state ([`raftq_store::backup`]) as a node takes them: every group's
//! section, in group order, from this node's replica of the group or, for a group it holds no
//! replica of, pulled from a member chunk by chunk (the member's side: `sections`).
//!
//! Each group's section is read at an index at least as new as the group's leader's applied
//! index when the backup began (so it holds every write acknowledged before), once the replica
//! that reads it applied that far: this node's, or, where it lags, another member's.

use std::io::{self, Write};
use std::time::Duration;

use raftq_store::backup::{BackupSummary, BackupWriter};
use raftq_store::{GroupId, StateReader};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::error::NodeError;
use crate::member::routing::{ForwardReply, Forwarded};
use crate::member::GroupCore;
use crate::network::PeerClient;
use crate::sections::{SectionPart, SectionPull, CHUNKS_AHEAD};

/// How long one pull may take, the wait for the member's replica to apply included.
const PULL_WAIT: Duration = Duration::from_secs(30);

/// Where a group's section comes from.
enum Source {
    /// This node's replica, which applied far enough.
    Local(GroupId, StateReader),
    /// A member, through a task that pulls the section's parts once told to begin (a section
    /// opened early would wait for its reader, and be dropped as idle).
    Remote {
        begin: oneshot::Sender<()>,
        parts: mpsc::Receiver<Result<SectionPart, NodeError>>,
    },
}

/// A backup's groups, each with where its section comes from.
#[derive(Default)]
pub(crate) struct Plan {
    sources: Vec<Source>,
}

impl Plan {
    /// Reads `core`'s group's section from `core`, which applied far enough.
    pub fn local(&mut self, core: &GroupCore) {
        self.sources
            .push(Source::Local(core.group, core.reader.clone()));
    }

    /// Pulls `group`'s section at `index` or later from `members` (their peer clients), tried
    /// in turn until one opens it.
    pub fn remote(&mut self, members: Vec<PeerClient>, index: Option<u64>) {
        let (sender, parts) = mpsc::channel(CHUNKS_AHEAD);
        let (begin, begun) = oneshot::channel();
        tokio::spawn(async move {
            if begun.await.is_ok() {
                pull(members, index, sender).await;
            }
        });
        self.sources.push(Source::Remote { begin, parts });
    }

    /// Writes the backup to `out` on this (blocking) thread: the header, then each section as
    /// its source gives it.
    pub fn write(
        self,
        cluster: Option<Uuid>,
        region: String,
        taken_at_ms: u64,
        out: impl Write,
    ) -> Result<BackupSummary, NodeError> {
        let written = |e: io::Error| NodeError::Storage(format!("writing the backup: {e}"));
        let mut writer = BackupWriter::start(cluster, region, taken_at_ms, out).map_err(written)?;
        for source in self.sources {
            match source {
                Source::Local(group, reader) => writer.add(group, &reader).map_err(written)?,
                Source::Remote { begin, mut parts } => {
                    let _ = begin.send(());
                    loop {
                        match parts.blocking_recv() {
                            Some(Ok(SectionPart::Bytes(bytes))) => {
                                writer.copy(&bytes).map_err(written)?
                            }
                            Some(Ok(SectionPart::Done(summary))) => {
                                writer.copied(summary);
                                break;
                            }
                            Some(Err(e)) => return Err(e),
                            Some(Ok(SectionPart::Opened(_))) | None => {
                                return Err(NodeError::Unavailable(
                                    "a member's section of the backup ended unfinished".into(),
                                ))
                            }
                        }
                    }
                }
            }
        }
        writer.finish().map_err(written)
    }
}

/// Opens a section at one of `members`, then sends its parts to `parts` until it is whole, an
/// error ended it, or the backup's writer went away.
async fn pull(
    members: Vec<PeerClient>,
    index: Option<u64>,
    parts: mpsc::Sender<Result<SectionPart, NodeError>>,
) {
    let mut opened = None;
    let mut refusal = NodeError::Unavailable("the group has no member".into());
    for mut member in members {
        match ask(&mut member, SectionPull::Open { index }).await {
            Ok(SectionPart::Opened(id)) => {
                opened = Some((member, id));
                break;
            }
            Ok(_) => {
                refusal = NodeError::Unavailable(
                    "a member answered the opening of a backup's section with another part".into(),
                )
            }
            Err(e) => refusal = e,
        }
    }
    let Some((mut member, id)) = opened else {
        let _ = parts.send(Err(refusal)).await;
        return;
    };
    loop {
        let part = ask(&mut member, SectionPull::Next { id }).await;
        let done = !matches!(part, Ok(SectionPart::Bytes(_)));
        if parts.send(part).await.is_err() || done {
            return;
        }
    }
}

/// Sends `pull` to `member` and returns its answer.
async fn ask(member: &mut PeerClient, pull: SectionPull) -> Result<SectionPart, NodeError> {
    let sent: Forwarded = Forwarded::Backup(pull);
    let reply = member
        .forward::<_, Result<ForwardReply, NodeError>>(&sent, PULL_WAIT)
        .await
        .map_err(|e| NodeError::Unavailable(format!("pulling a backup's section: {e}")))??;
    match reply {
        ForwardReply::Backup(part) => Ok(part),
        _ => Err(NodeError::Unavailable(
            "a member answered a backup's pull with a reply of another kind".into(),
        )),
    }
}
