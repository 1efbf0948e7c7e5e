//! A backup's sections as members write them for the node taking the backup
//! (`crate::backup`): what that node asks ([`SectionPull`]) and is answered ([`SectionPart`]),
//! and the sections a member writes ([`Sections`]), each on a blocking thread into a bounded
//! channel of chunks ([`ChunkWriter`]), taken one pull at a time, and dropped when no pull comes
//! for [`IDLE`] (its thread then ends at its next chunk).

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use raftq_store::backup::{self, SectionSummary};
use raftq_store::{GroupId, StateReader};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::NodeError;

/// The size of the chunks a backup is written and pulled in.
const CHUNK: usize = 256 * 1024;
/// How many chunks may wait for their reader: the writer pauses beyond that.
pub const CHUNKS_AHEAD: usize = 4;
/// How long a member keeps a section whose next chunk nobody asks for.
const IDLE: Duration = Duration::from_secs(60);

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

    /// Begins a section of `group`, read from `reader` (a replica that applied far enough);
    /// its id, for the pulls of its parts.
    pub(crate) fn open(self: &Arc<Self>, group: GroupId, reader: StateReader) -> Uuid {
        let id = raftq_store::random::uuid();
        let section = Section {
            parts: tokio::sync::Mutex::new(write_section(group, reader)),
            asked: Mutex::new(Instant::now()),
        };
        self.lock().insert(id, Arc::new(section));
        let sections = Arc::clone(self);
        tokio::spawn(async move {
            while !sections.drop_if_idle(id) {
                tokio::time::sleep(IDLE).await;
            }
        });
        id
    }

    /// The next part of section `id`: a chunk, or its summary once the chunks ended. A section
    /// that ended, whole or not, is dropped.
    pub(crate) async fn next(&self, id: Uuid) -> Result<SectionPart, NodeError> {
        let found = self.lock().get(&id).cloned();
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
                .map_err(|_| {
                    NodeError::Unavailable(format!("backup section {id} ended unfinished"))
                }),
        };
        *section.asked() = Instant::now();
        if !matches!(part, Ok(SectionPart::Bytes(_))) {
            self.lock().remove(&id);
        }
        part
    }
}

/// Starts writing `group`'s section from `reader` on a blocking thread; its parts as they come.
fn write_section(group: GroupId, reader: StateReader) -> Parts {
    let (chunks, received) = mpsc::channel(CHUNKS_AHEAD);
    let (done, summary) = oneshot::channel();
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
