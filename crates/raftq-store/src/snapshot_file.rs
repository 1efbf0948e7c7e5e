//! A snapshot file as the Raft core reads, writes and seeks it (its `SnapshotData`).
//!
//! With [`Work::Threads`] (a server) it is tokio's file, at its path on the operating system's
//! disk: every call goes through the blocking pool, so no read of a large snapshot stalls a
//! runtime worker. With [`Work::Tasks`] (a simulation) it is a [`Cursor`] over a file of the
//! store's [`Disk`](crate::disk::Disk), and every call is made on the task that asks, at a
//! moment the runtime decides: a paused, seeded runtime then replays a snapshot's transfer
//! exactly, where a blocking-pool thread would answer at a moment of real time, and a power loss
//! of the simulated disk takes what a transfer wrote and did not sync.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::disk::{Cursor, DiskFile, Open, RealDisk};
use crate::snapshot::SnapshotDir;
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
        cursor: Cursor,
        /// The outcome of the seek started last, until it is polled.
        seek: Option<io::Result<u64>>,
    },
}

impl SnapshotFile {
    /// Opens the file named `name` in `dir` for reading.
    pub async fn open(dir: &SnapshotDir, name: &str, work: Work) -> io::Result<SnapshotFile> {
        match work {
            Work::Threads => tokio::fs::File::open(dir.file(name))
                .await
                .map(SnapshotFile::pooled),
            Work::Tasks { .. } => dir
                .open_file(name, Open::Existing)
                .map(SnapshotFile::inline),
        }
    }

    /// Creates the file named `name` in `dir`, which must not exist, for reading and writing.
    pub async fn create_new(dir: &SnapshotDir, name: &str, work: Work) -> io::Result<SnapshotFile> {
        match work {
            Work::Threads => tokio::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(dir.file(name))
                .await
                .map(SnapshotFile::pooled),
            Work::Tasks { .. } => dir
                .open_file(name, Open::CreateNew)
                .map(SnapshotFile::inline),
        }
    }

    fn pooled(file: tokio::fs::File) -> SnapshotFile {
        SnapshotFile {
            inner: Inner::Pooled(file),
        }
    }

    fn inline(file: Arc<dyn DiskFile>) -> SnapshotFile {
        SnapshotFile {
            inner: Inner::Inline {
                cursor: Cursor::new(file),
                seek: None,
            },
        }
    }

    /// Cuts or grows the file to `len` bytes.
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        match &self.inner {
            Inner::Pooled(file) => file.set_len(len).await,
            Inner::Inline { cursor, .. } => cursor.file().set_len(len),
        }
    }

    /// Writes what is buffered and returns the file, to be read from its first byte with
    /// positioned reads.
    pub async fn into_file(self) -> io::Result<Arc<dyn DiskFile>> {
        match self.inner {
            Inner::Pooled(mut file) => {
                tokio::io::AsyncWriteExt::flush(&mut file).await?;
                Ok(RealDisk::file(file.into_std().await))
            }
            Inner::Inline { cursor, .. } => Ok(Arc::clone(cursor.file())),
        }
    }

    /// Checks the whole file as a snapshot file ([`crate::snapshot::check`]), from its first
    /// byte, without moving this handle's position; on the blocking pool or here, as `work`
    /// says.
    pub async fn check(&self, work: Work) -> io::Result<()> {
        let file = match &self.inner {
            Inner::Pooled(file) => RealDisk::file(file.try_clone().await?.into_std().await),
            Inner::Inline { cursor, .. } => Arc::clone(cursor.file()),
        };
        work.blocking(move || crate::snapshot::check(Cursor::new(file)))
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
            Inner::Inline { cursor, .. } => {
                let read = cursor.read(buf.initialize_unfilled())?;
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
            Inner::Inline { cursor, .. } => Poll::Ready(cursor.write(buf)),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_flush(cx),
            Inner::Inline { cursor, .. } => Poll::Ready(cursor.flush()),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_shutdown(cx),
            Inner::Inline { cursor, .. } => Poll::Ready(cursor.flush()),
        }
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).start_seek(position),
            Inner::Inline { cursor, seek } => {
                *seek = Some(cursor.seek(position));
                Ok(())
            }
        }
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match &mut self.inner {
            Inner::Pooled(file) => Pin::new(file).poll_complete(cx),
            Inner::Inline { cursor, seek } => {
                Poll::Ready(seek.take().unwrap_or(Ok(cursor.position())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash_disk::CrashDisk;
    use crate::disk::Disk;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    const TASKS: Work = Work::Tasks {
        fsync: Duration::ZERO,
    };

    #[tokio::test]
    async fn every_kind_writes_seeks_reads_and_cuts_alike() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let real: Arc<dyn Disk> = Arc::new(RealDisk);
        let kinds: [(Work, Arc<dyn Disk>); 3] = [
            (Work::Threads, Arc::clone(&real)),
            (TASKS, real),
            (TASKS, Arc::new(CrashDisk::new())),
        ];
        for (kind, (work, disk)) in kinds.into_iter().enumerate() {
            let path = tmp.path().join(kind.to_string());
            let dir = SnapshotDir::open(disk, path, None).expect("directory");
            let mut file = SnapshotFile::create_new(&dir, "s", work)
                .await
                .expect("create");
            file.write_all(b"0123456789").await.expect("write");
            assert_eq!(file.seek(SeekFrom::Start(4)).await.expect("seek"), 4);
            file.write_all(b"ab").await.expect("write at 4");
            file.flush().await.expect("flush");
            file.set_len(8).await.expect("cut");
            file.seek(SeekFrom::Start(0)).await.expect("rewind");
            let mut read = String::new();
            file.read_to_string(&mut read).await.expect("read");
            assert_eq!(read, "0123ab67", "{work:?}");
            assert_eq!(file.seek(SeekFrom::End(-2)).await.expect("seek"), 6);
            assert!(file.check(work).await.is_err(), "not a snapshot file");
            let mut tail = String::new();
            file.read_to_string(&mut tail).await.expect("read");
            assert_eq!(tail, "67", "the check leaves the position");
            assert!(SnapshotFile::create_new(&dir, "s", work).await.is_err());
            let mut again = SnapshotFile::open(&dir, "s", work).await.expect("open");
            let mut first = [0u8; 3];
            again.read_exact(&mut first).await.expect("read");
            assert_eq!(&first, b"012", "{work:?}");
            let whole = file.into_file().await.expect("the file");
            let mut bytes = String::new();
            Cursor::new(whole).read_to_string(&mut bytes).expect("read");
            assert_eq!(bytes, "0123ab67", "{work:?}");
        }
    }
}
