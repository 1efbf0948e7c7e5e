//! Callbacks used by Storage API

use std::io;

use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::async_runtime::AsyncOneshotSendExt;
use crate::core::notify::Notify;
use crate::raft_state::io_state::log_io_id::LogIOId;
use crate::type_config::alias::OneshotSenderOf;
use crate::LogId;
use crate::RaftTypeConfig;
use crate::StorageIOError;
use crate::Vote;

/// A oneshot callback for completion of log io operation.
pub struct LogFlushed<C>
where C: RaftTypeConfig
{
    log_io_id: LogIOId<C::NodeId>,
    /// `None` once reported.
    to: Option<FlushedTo<C>>,
}

/// raftq: who hears of the flush: the core awaiting it, or, for a leader's own append that the
/// core did not wait for, the core's notification channel, as `Notify::LocalFlushed`.
enum FlushedTo<C>
where C: RaftTypeConfig
{
    Waiter(OneshotSenderOf<C, Result<LogIOId<C::NodeId>, io::Error>>),
    Core {
        tx_notify: mpsc::UnboundedSender<Notify<C>>,
        vote: Vote<C::NodeId>,
        log_id: LogId<C::NodeId>,
    },
}

impl<C> LogFlushed<C>
where C: RaftTypeConfig
{
    pub(crate) fn new(
        log_io_id: LogIOId<C::NodeId>,
        tx: OneshotSenderOf<C, Result<LogIOId<C::NodeId>, io::Error>>,
    ) -> Self {
        Self {
            log_io_id,
            to: Some(FlushedTo::Waiter(tx)),
        }
    }

    /// raftq: a callback that reports the flush of the leader's own append under `vote`, up to
    /// `log_id`, as `Notify::LocalFlushed` on `tx_notify`.
    pub(crate) fn to_core(
        vote: Vote<C::NodeId>,
        log_id: LogId<C::NodeId>,
        tx_notify: mpsc::UnboundedSender<Notify<C>>,
    ) -> Self {
        Self {
            log_io_id: LogIOId::new(vote.clone(), Some(log_id.clone())),
            to: Some(FlushedTo::Core { tx_notify, vote, log_id }),
        }
    }

    /// raftq: whether the core waits for this flush before it runs its next command (a
    /// follower's append, `initialize`'s), rather than hearing of it later (the leader's own
    /// append): a store may then sync within `append` and call back from there.
    pub fn is_awaited(&self) -> bool {
        matches!(self.to, Some(FlushedTo::Waiter(_)))
    }

    /// Report log io completion event.
    ///
    /// It will be called when the log is successfully appended to the storage or an error occurs.
    pub fn log_io_completed(mut self, result: Result<(), io::Error>) {
        if let Err(e) = &result {
            tracing::error!("LogFlush error: {}, while flushing upto {}", e, self.log_io_id);
        }
        self.report(result);
    }

    fn report(&mut self, result: Result<(), io::Error>) {
        match self.to.take() {
            None => {}
            Some(FlushedTo::Waiter(tx)) => {
                let res = tx.send(result.map(|()| self.log_io_id.clone()));
                if let Err(e) = res {
                    tracing::error!("failed to send log io completion event: {:?}", e);
                }
            }
            Some(FlushedTo::Core { tx_notify, vote, log_id }) => {
                let result = result.map_err(|e| e.to_string());
                // The core is gone when the channel is closed: nothing waits for this flush.
                let _ = tx_notify.send(Notify::LocalFlushed { vote, log_id, result });
            }
        }
    }
}

/// raftq: a callback dropped unreported fails the flush for the core, as a dropped oneshot does
/// for a core that awaits it.
impl<C> Drop for LogFlushed<C>
where C: RaftTypeConfig
{
    fn drop(&mut self) {
        if let Some(FlushedTo::Core { .. }) = &self.to {
            self.report(Err(io::Error::other("the log store dropped the flush callback")));
        }
    }
}

/// A oneshot callback for completion of applying logs to state machine.
pub struct LogApplied<C>
where C: RaftTypeConfig
{
    last_log_id: LogId<C::NodeId>,
    tx: oneshot::Sender<Result<(LogId<C::NodeId>, Vec<C::R>), StorageIOError<C::NodeId>>>,
}

impl<C> LogApplied<C>
where C: RaftTypeConfig
{
    #[allow(dead_code)]
    pub(crate) fn new(
        last_log_id: LogId<C::NodeId>,
        tx: oneshot::Sender<Result<(LogId<C::NodeId>, Vec<C::R>), StorageIOError<C::NodeId>>>,
    ) -> Self {
        Self { last_log_id, tx }
    }

    /// Report apply io completion event.
    ///
    /// It will be called when the log is successfully applied to the state machine or an error
    /// occurs.
    pub fn completed(self, result: Result<Vec<C::R>, StorageIOError<C::NodeId>>) {
        let res = match result {
            Ok(x) => {
                tracing::debug!("LogApplied upto {}", self.last_log_id);
                let resp = (self.last_log_id.clone(), x);
                self.tx.send(Ok(resp))
            }
            Err(e) => {
                tracing::error!("LogApplied error: {}, while applying upto {}", e, self.last_log_id);
                self.tx.send(Err(e))
            }
        };

        if let Err(_e) = res {
            tracing::error!("failed to send apply complete event, last_log_id: {}", self.last_log_id);
        }
    }
}

/// raftq: the flush callback of the leader's own append (`LogFlushed::to_core`), which reports to
/// the core's notification channel, and the awaited one (`LogFlushed::new`), as published.
#[cfg(test)]
mod tests {
    use std::io;

    use tokio::sync::mpsc;

    use super::LogFlushed;
    use crate::core::notify::Notify;
    use crate::engine::testing::UTConfig;
    use crate::raft_state::io_state::log_io_id::LogIOId;
    use crate::testing::log_id;
    use crate::type_config::TypeConfigExt;
    use crate::MessageSummary;
    use crate::Vote;

    /// The one notification on `rx`, as (vote, log_id, result); panics unless there is exactly
    /// one, and it is `LocalFlushed`.
    fn only_local_flushed(
        rx: &mut mpsc::UnboundedReceiver<Notify<UTConfig>>,
    ) -> (Vote<u64>, crate::LogId<u64>, Result<(), String>) {
        let n = rx.try_recv().expect("one notification");
        assert!(rx.try_recv().is_err(), "exactly one notification");
        assert!(n.summary().starts_with("LocalFlushed: "), "summary: {}", n.summary());
        match n {
            Notify::LocalFlushed { vote, log_id, result } => (vote, log_id, result),
            other => panic!("expected LocalFlushed, got {}", other.summary()),
        }
    }

    #[test]
    fn test_to_core_reports_flush_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let cb = LogFlushed::<UTConfig>::to_core(Vote::new_committed(3, 1), log_id(3, 1, 7), tx);

        assert!(!cb.is_awaited(), "the leader's own append is not awaited");
        cb.log_io_completed(Ok(()));

        // Reported once: the drop after `log_io_completed` sends nothing more.
        assert_eq!(
            (Vote::new_committed(3, 1), log_id(3, 1, 7), Ok(())),
            only_local_flushed(&mut rx)
        );
    }

    #[test]
    fn test_to_core_reports_failed_flush() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let cb = LogFlushed::<UTConfig>::to_core(Vote::new_committed(3, 1), log_id(3, 1, 7), tx);

        cb.log_io_completed(Err(io::Error::other("fdatasync: EIO")));

        let (vote, lid, result) = only_local_flushed(&mut rx);
        assert_eq!((Vote::new_committed(3, 1), log_id(3, 1, 7)), (vote, lid));
        assert!(result.unwrap_err().contains("fdatasync: EIO"));
    }

    #[test]
    fn test_to_core_dropped_unreported_fails_the_flush() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let cb = LogFlushed::<UTConfig>::to_core(Vote::new_committed(3, 1), log_id(3, 1, 7), tx);

        drop(cb);

        let (vote, lid, result) = only_local_flushed(&mut rx);
        assert_eq!((Vote::new_committed(3, 1), log_id(3, 1, 7)), (vote, lid));
        assert_eq!(Err("the log store dropped the flush callback".to_string()), result);
    }

    #[test]
    fn test_to_core_after_the_core_is_gone() {
        let (tx, rx) = mpsc::unbounded_channel();
        drop(rx);

        // Neither a report nor a drop panics when nothing listens any more.
        let cb = LogFlushed::<UTConfig>::to_core(Vote::new_committed(3, 1), log_id(3, 1, 7), tx.clone());
        cb.log_io_completed(Ok(()));
        let cb = LogFlushed::<UTConfig>::to_core(Vote::new_committed(3, 1), log_id(3, 1, 8), tx);
        drop(cb);
    }

    #[test]
    fn test_awaited_callback_as_published() {
        let io_id = LogIOId::new(Vote::new_committed(3, 2), Some(log_id(3, 2, 5)));

        // Reported: the awaiting core receives the log io id.
        let (tx, mut rx) = UTConfig::oneshot();
        let cb = LogFlushed::<UTConfig>::new(io_id, tx);
        assert!(cb.is_awaited(), "a follower's append is awaited");
        cb.log_io_completed(Ok(()));
        assert_eq!(io_id, rx.try_recv().unwrap().unwrap());

        // Failed: the error goes to the awaiting core.
        let (tx, mut rx) = UTConfig::oneshot();
        LogFlushed::<UTConfig>::new(io_id, tx).log_io_completed(Err(io::Error::other("EIO")));
        assert_eq!("EIO", rx.try_recv().unwrap().unwrap_err().to_string());

        // Dropped unreported: the awaiting core sees its oneshot closed, as published.
        let (tx, mut rx) = UTConfig::oneshot();
        drop(LogFlushed::<UTConfig>::new(io_id, tx));
        assert!(rx.try_recv().is_err());
    }
}
