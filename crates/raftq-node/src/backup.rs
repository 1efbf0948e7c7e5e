//! Backups of the cluster's state ([`raftq_store::backup`]) as a node takes them: every group's
//! section, in group order, from this node's replica of the group or, for a group it holds no
//! replica of, pulled from a member chunk by chunk.
//!
//! Each group's section is read at an index at least as new as the group's leader's applied
//! index when the backup began (so it holds every write acknowledged before), once the replica
//! that reads it applied that far.
//!
//! A member serves a pull ([`SectionPull`]) by writing the section on a blocking thread into a
//! bounded channel ([`Sections`]); the node taking the backup asks for one chunk at a time and
//! copies it into the file, so neither side holds more than a few chunks. A section nobody
//! asks the next chunk of for [`IDLE`] is dropped, and its thread ends.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use raftq_store::backup::{self, BackupSummary, BackupWriter, SectionSummary};
use raftq_store::{GroupId, StateReader};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::NodeError;
use crate::member::routing::{ForwardReply, Forwarded, LEADER_WAIT};
use crate::member::GroupCore;

/// The size of the chunks a backup is written and pulled in.
const CHUNK: usize = 256 * 1024;
/// How many chunks may wait for their reader: the writer pauses beyond that.
pub const CHUNKS_AHEAD: usize = 4;
/// How long a member keeps a section whose next chunk nobody asks for.
const IDLE: Duration = Duration::from_secs(60);
/// How long one pull may take, the wait for the member's replica to apply included.
const PULL_WAIT: Duration = Duration::from_secs(30);

/// A request of the node taking a backup to a member of a group it holds no replica of.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) enum SectionPull {
    /// Begin the group's section at `index` or later (none: the group has no entry yet).
    Open { index: Option<u64> },
    /// The next part of section `id`.
    Next { id: Uuid },
}

/// A member's answer to a [`SectionPull`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum SectionPart {
    Opened(Uuid),
    Bytes(Vec<u8>),
    /// The section is whole.
    Done(SectionSummary),
}

/// A writer that sends what it is given in chunks of [`CHUNK`] bytes over a channel, waiting
/// while the channel is full (it runs on a blocking thread); it fails once the receiver is gone.
pub struct ChunkWriter {
    chunks: mpsc::Sender<Result<Vec<u8>, NodeError>>,
    pending: Vec<u8>,
}

impl ChunkWriter {
    pub fn new(chunks: mpsc::Sender<Result<Vec<u8>, NodeError>>) -> ChunkWriter {
        ChunkWriter {
            chunks,
            pending: Vec::with_capacity(CHUNK),
        }
    }

    fn send_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.pending, Vec::with_capacity(CHUNK));
        self.chunks
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the reader went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= CHUNK {
            self.send_pending()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()
    }
}

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
pub(crate) struct Plan {
    sources: Vec<Source>,
}

impl Plan {
    pub fn new() -> Plan {
        Plan {
            sources: Vec::new(),
        }
    }

    /// Reads `group`'s section from `core`, once it applied up to `index`.
    pub async fn local(&mut self, core: &GroupCore, index: Option<u64>) -> Result<(), NodeError> {
        applied_up_to(core, index).await?;
        self.sources
            .push(Source::Local(core.group, core.reader.clone()));
        Ok(())
    }

    /// Pulls `group`'s section at `index` or later from `members` (their peer clients), tried
    /// in turn until one opens it.
    pub fn remote(&mut self, members: Vec<crate::network::PeerClient>, index: Option<u64>) {
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

/// Waits until `core`'s replica applied up to `index`.
async fn applied_up_to(core: &GroupCore, index: Option<u64>) -> Result<(), NodeError> {
    let Some(index) = index else {
        return Ok(());
    };
    core.raft
        .wait(Some(LEADER_WAIT))
        .applied_index_at_least(Some(index), "the leader's applied index")
        .await
        .map(drop)
        .map_err(|e| {
            NodeError::Unavailable(format!("group {} applying up to {index}: {e}", core.group))
        })
}

/// Opens a section at one of `members`, then sends its parts to `parts` until it is whole, an
/// error ended it, or the backup's writer went away.
async fn pull(
    members: Vec<crate::network::PeerClient>,
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
            Ok(other) => refusal = unexpected(&other),
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
async fn ask(
    member: &mut crate::network::PeerClient,
    pull: SectionPull,
) -> Result<SectionPart, NodeError> {
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

fn unexpected(part: &SectionPart) -> NodeError {
    NodeError::Unavailable(format!(
        "a member answered the opening of a backup's section with {}",
        match part {
            SectionPart::Opened(_) => "an opening",
            SectionPart::Bytes(_) => "bytes",
            SectionPart::Done(_) => "its end",
        }
    ))
}

/// A section a member writes for another node: its parts, taken by one pull at a time, and
/// when a pull last came.
struct Section {
    parts: tokio::sync::Mutex<Parts>,
    asked: Mutex<Instant>,
}

/// The chunks of a section as its thread writes them, then what it holds.
struct Parts {
    chunks: mpsc::Receiver<Result<Vec<u8>, NodeError>>,
    summary: oneshot::Receiver<SectionSummary>,
}

impl Section {
    fn asked(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sections this node writes for others, by id.
#[derive(Default)]
pub(crate) struct Sections(Mutex<HashMap<Uuid, Arc<Section>>>);

impl Sections {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Section>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops section `id` if no pull is under way and none came for [`IDLE`] (its thread
    /// then ends at its next chunk); whether it is gone.
    fn drop_if_idle(&self, id: Uuid) -> bool {
        let mut sections = self.lock();
        let Some(section) = sections.get(&id) else {
            return true;
        };
        let idle = section.asked().elapsed() >= IDLE && section.parts.try_lock().is_ok();
        if idle {
            sections.remove(&id);
        }
        idle
    }
}

/// Serves `pull` for `core`'s group from this node's replica.
pub(crate) async fn serve(core: &GroupCore, pull: SectionPull) -> Result<SectionPart, NodeError> {
    let sections = Arc::clone(&core.node.sections);
    match pull {
        SectionPull::Open { index } => {
            applied_up_to(core, index).await?;
            let id = raftq_store::random::uuid();
            let section = Section {
                parts: tokio::sync::Mutex::new(write_section(core)),
                asked: Mutex::new(Instant::now()),
            };
            sections.lock().insert(id, Arc::new(section));
            tokio::spawn(async move {
                while !sections.drop_if_idle(id) {
                    tokio::time::sleep(IDLE).await;
                }
            });
            Ok(SectionPart::Opened(id))
        }
        SectionPull::Next { id } => next_part(&sections, id).await,
    }
}

/// Starts writing `core`'s group's section on a blocking thread; its parts as they come.
fn write_section(core: &GroupCore) -> Parts {
    let (chunks, received) = mpsc::channel(CHUNKS_AHEAD);
    let (done, summary) = oneshot::channel();
    let (group, reader) = (core.group, core.reader.clone());
    tokio::task::spawn_blocking(move || {
        let mut out = ChunkWriter::new(chunks.clone());
        let written = backup::write_section(group, &reader, &mut out)
            .and_then(|summary| out.flush().map(|()| summary));
        match written {
            Ok(summary) => {
                let _ = done.send(summary);
            }
            Err(e) => {
                let e = NodeError::Storage(format!("writing group {group}'s section: {e}"));
                let _ = chunks.blocking_send(Err(e));
            }
        }
    });
    Parts {
        chunks: received,
        summary,
    }
}

/// The next part of section `id`: a chunk, or its summary once the chunks ended. A section
/// that ended, whole or not, is dropped.
async fn next_part(sections: &Sections, id: Uuid) -> Result<SectionPart, NodeError> {
    let found = sections.lock().get(&id).cloned();
    let section = found.ok_or_else(|| {
        NodeError::Unavailable(format!(
            "no backup section {id} here (it ended, or waited for its reader too long)"
        ))
    })?;
    let mut parts = section.parts.lock().await;
    *section.asked() = Instant::now();
    let part = match parts.chunks.recv().await {
        Some(Ok(chunk)) => Ok(SectionPart::Bytes(chunk)),
        Some(Err(e)) => Err(e),
        None => (&mut parts.summary)
            .await
            .map(SectionPart::Done)
            .map_err(|_| NodeError::Unavailable(format!("backup section {id} ended unfinished"))),
    };
    *section.asked() = Instant::now();
    if !matches!(part, Ok(SectionPart::Bytes(_))) {
        sections.lock().remove(&id);
    }
    part
}
