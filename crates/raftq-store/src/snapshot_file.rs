//! A snapshot file as the Raft core reads, writes and seeks it (its `SnapshotData`).
//!
//! With [`Work::Threads`] it is tokio's file: every call goes through the blocking pool, so no
//! read of a large snapshot stalls a runtime worker. With [`Work::Tasks`] (a simulation) every
//! call is a plain system call made on the task that asks, at a moment the runtime decides: a
//! paused, seeded runtime then replays a snapshot's transfer exactly, where a blocking-pool
//! thread would answer at a moment of real time.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::Work;

/// An open snapshot file.
#[derive(Debug)]
pub struct SnapshotFile {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Pooled(tokio::fs::File),
    Inline {
        file: File,
        /// The outcome of the seek started last, until it is polled.
        seek: Option<io::Result<u64>>,
    },
}

impl SnapshotFile {
    /// Opens the file at `path` for reading.
    pub async fn open(path: &Path, work: Work) -> io::Result<SnapshotFile> {
        match work {
            Work::Threads => tokio::fs::File::open(path).await.map(SnapshotFile::pooled),
            Work::Tasks { .. } => File::open(path).map(SnapshotFile::inline),
        }
    }

    /// Creates the file at `path`, which must not exist, for reading and writing.
    pub async fn create_new(path: &Path, work: Work) -> io::Result<SnapshotFile> {
        let mut how = OpenOptions::new();
        how.read(true).write(true).create_new(true);
        match work {
            Work::Threads => tokio::fs::OpenOptions::from(how)
                .open(path)
                .await
                .map(SnapshotFile::pooled),
            Work::Tasks { .. } => how.open(path).map(SnapshotFile::inline),
        }
    }

    fn pooled(file: tokio::fs::File) -> SnapshotFile {
        SnapshotFile {
            inner: Inner::Pooled(file),
        }
    }

    fn inline(file: File) -> SnapshotFile {
        SnapshotFile {
            inner: Inner::Inline { file, seek: None },
        }
    }

    /// Cuts or grows the file to `len` bytes.
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        match &self.inner {
            Inner::Pooled(file) => file.set_len(len).await,
            Inner::Inline { file, .. } => file.set_len(len),
        }
    }

    /// Writes what is buffered and returns the file as a standard one, at its current position.
    pub async fn into_std(self) -> io::Result<File> {
        match self.inner {
            Inner::Pooled(mut file) => {
                tokio::io::AsyncWriteExt::flush(&mut file).await?;
                Ok(file.into_std().await)
            }
            Inner::Inline { mut file, .. } => {
                file.flush()?;
                Ok(file)
            }
        }
    }

    /// Checks the whole file as a snapshot file ([`crate::snapshot::check`]), from its first
    /// byte, without moving this handle's position; on the blocking pool or here, as `work`
    /// says.
    pub async fn check(&self, work: Work) -> io::Result<()> {
        let mut reading = match &self.inner {
            Inner::Pooled(file) => file.try_clone().await?.into_std().await,
            Inner::Inline { file, .. } => file.try_clone()?,
        };
        work.blocking(move || {
            reading.seek(SeekFrom::Start(0))?;
            crate::snapshot::check(reading)
        })
        .await?
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_read(cx, buf),
            Inner::Inline { file, .. } => {
                let read = file.read(buf.initialize_unfilled())?;
                buf.advance(read);
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_write(cx, buf),
            Inner::Inline { file, .. } => Poll::Ready(file.write(buf)),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_flush(cx),
            Inner::Inline { file, .. } => Poll::Ready(file.flush()),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_shutdown(cx),
            Inner::Inline { file, .. } => Poll::Ready(file.flush()),
        }
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).start_seek(position),
            Inner::Inline { file, seek } => {
                *seek = Some(file.seek(position));
                Ok(())
            }
        }
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_complete(cx),
            Inner::Inline { file, seek } => {
                Poll::Ready(seek.take().unwrap_or_else(|| file.stream_position()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    const WORKS: [Work; 2] = [
        Work::Threads,
        Work::Tasks {
            fsync: Duration::ZERO,
        },
    ];

    #[tokio::test]
    async fn both_kinds_write_seek_read_and_cut_alike() {
        for work in WORKS {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("snapshot");
            let mut file = SnapshotFile::create_new(&path, work).await.expect("create");
            file.write_all(b"0123456789").await.expect("write");
            assert_eq!(file.seek(SeekFrom::Start(4)).await.expect("seek"), 4);
            file.write_all(b"ab").await.expect("write at 4");
            file.flush().await.expect("flush");
            file.set_len(8).await.expect("cut");
            file.seek(SeekFrom::Start(0)).await.expect("rewind");
            let mut read = String::new();
            file.read_to_string(&mut read).await.expect("read");
            assert_eq!(read, "0123ab67", "{work:?}");
            assert!(SnapshotFile::create_new(&path, work).await.is_err());
            let mut again = SnapshotFile::open(&path, work).await.expect("open");
            let mut first = [0u8; 3];
            again.read_exact(&mut first).await.expect("read");
            assert_eq!(&first, b"012", "{work:?}");
        }
    }
}
