//! The delivery of each group's outbox (see `raftq_engine::outbox`): on the group's leader, the
//! messages on their way to queues of other groups are read from the applied state with their
//! payloads, sent to each target's group in outbox order (`Command::InsertMoved`), and dropped
//! from the outbox once that group committed them (`Command::OutboxDone`). A queue the
//! directory no longer holds (deleted meanwhile) refuses its messages here, and they go back
//! where they came from.
//!
//! Delivery is at least once and arrival exactly once: a leader that changes, an answer that is
//! lost or two nodes that deliver at once send an entry again, and its target's group takes it
//! once (its lane of this group holds every number taken).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use raftq_engine::command::Arrival;
use raftq_engine::outbox::{MoveResult, Outgoing};
use raftq_engine::{Command, Outcome};
use raftq_store::GroupId;
use tokio::sync::watch;
use uuid::Uuid;

use crate::error::NodeError;
use crate::member::GroupCore;
use crate::pace::Pace;

use super::Router;

/// How often the groups this node leads are looked at for outbox entries.
const EVERY: Duration = Duration::from_millis(50);

/// The most outbox entries one pass delivers per group.
const AT_ONCE: usize = 128;

/// Delivers the outboxes of the groups this node leads, every [`EVERY`], until `shutdown`.
pub(crate) async fn deliver(router: Arc<Router>, shutdown: watch::Receiver<bool>) {
    let mut pace = Pace::new(EVERY, shutdown);
    let mut failing = Failing::default();
    while pace.tick().await {
        // Each group's pass at once: one whose target group has no leader for a while holds
        // up no other group's.
        let router = &router;
        let led = router
            .groups
            .all()
            .into_iter()
            .filter(|core| core.is_leader());
        let passes =
            led.map(|core| async move { (core.group, router.deliver_outbox(&core).await) });
        for (group, result) in join_all(passes).await {
            failing.note(group, result);
        }
    }
}

/// What [`Failing::note`] logged of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logged {
    /// Nothing: the pass delivered, as the one before it.
    Nothing,
    /// A warning: the group's first failed pass since it last delivered.
    FirstFailure,
    /// A debug line: another failed pass of the same run.
    Again,
    /// The group delivers again, after this many failed passes.
    Recovered(u64),
}

/// The groups whose last passes failed, with how many in a row: a target group without a
/// leader fails a pass every [`EVERY`] until it has one, and that is one warning, not twenty a
/// second.
#[derive(Debug, Default)]
struct Failing(BTreeMap<GroupId, u64>);

impl Failing {
    fn note(&mut self, group: GroupId, result: Result<(), NodeError>) -> Logged {
        match result {
            Ok(()) => match self.0.remove(&group) {
                Some(failed) => {
                    tracing::info!(%group, failed_passes = failed, "outbox delivered again");
                    Logged::Recovered(failed)
                }
                None => Logged::Nothing,
            },
            Err(e) => {
                let failed = self.0.entry(group).or_default();
                *failed += 1;
                if *failed == 1 {
                    tracing::warn!(
                        %group,
                        error = %e,
                        retry_every_ms = EVERY.as_millis() as u64,
                        "outbox not delivered yet: retried, logged again once delivered"
                    );
                    Logged::FirstFailure
                } else {
                    tracing::debug!(%group, error = %e, failed, "outbox not delivered yet");
                    Logged::Again
                }
            }
        }
    }
}

impl Router {
    /// One pass over `core`'s group's outbox: its first [`AT_ONCE`] entries delivered, and
    /// what their groups took committed.
    async fn deliver_outbox(&self, core: &Arc<GroupCore>) -> Result<(), NodeError> {
        let entries = core.reader.with_engine(|engine| {
            let entries = engine.outbox().take(AT_ONCE);
            entries.map(|(seq, o)| (seq, o.clone())).collect::<Vec<_>>()
        });
        let entries = entries.unwrap_or_default();
        let Some(&(acked_below, _)) = entries.first() else {
            return Ok(());
        };
        let (lanes, mut results) = self.lanes(core, entries).await?;
        for (group, arrivals) in lanes {
            let insert = Command::InsertMoved {
                from_group: core.group.0,
                acked_below,
                arrivals,
            };
            match self.route_to(group, &insert).await?.result {
                Some(Ok(Outcome::Arrived(taken))) => results.extend(taken),
                other => {
                    tracing::warn!(%group, ?other, "the target group did not take its arrivals")
                }
            }
        }
        if results.is_empty() {
            return Ok(());
        }
        match core.route(&Command::OutboxDone { results }).await?.result {
            Some(Ok(_)) => Ok(()),
            other => Err(NodeError::Unavailable(format!(
                "the outbox kept its delivered entries: {other:?}"
            ))),
        }
    }

    /// The arrivals of `entries` by the group of their queue, each lane in outbox order, and
    /// the entries refused here (their queue is in no group, or, by the directory, in this
    /// one, whose state does not hold it).
    async fn lanes(
        &self,
        core: &GroupCore,
        entries: Vec<(u64, Outgoing)>,
    ) -> Result<(BTreeMap<GroupId, Vec<Arrival>>, Vec<MoveResult>), NodeError> {
        let mut refreshed = false;
        let mut groups = Vec::with_capacity(entries.len());
        for (_, outgoing) in &entries {
            let mut group = self.group_of(outgoing.target);
            if group.is_none() && !refreshed {
                // This node's directory may lag behind the queue's creation.
                self.refresh().await?;
                refreshed = true;
                group = self.group_of(outgoing.target);
            }
            groups.push(group.filter(|g| *g != core.group));
        }
        let keys: Vec<u64> = entries.iter().map(|(_, o)| o.message.storage_key).collect();
        let payloads =
            (core.reader.payloads(&keys)).map_err(|e| NodeError::Storage(e.to_string()))?;
        let mut lanes: BTreeMap<GroupId, Vec<Arrival>> = BTreeMap::new();
        let mut stopped = Vec::new();
        let mut refused = Vec::new();
        for (((seq, outgoing), group), payload) in entries.into_iter().zip(groups).zip(payloads) {
            let Some(group) = group else {
                let reason = format!("queue {} does not exist", outgoing.target);
                refused.push(MoveResult {
                    seq,
                    refused: Some(reason),
                });
                continue;
            };
            // A payload gone means the entry was done meanwhile (another pass); the lane stops
            // there so that it never takes a later number before this one.
            match payload.filter(|_| !stopped.contains(&group)) {
                Some(payload) => lanes.entry(group).or_default().push(Arrival {
                    seq,
                    outgoing,
                    payload,
                }),
                None => stopped.push(group),
            }
        }
        Ok((lanes, refused))
    }

    /// The group the directory places the queue `id` in.
    fn group_of(&self, id: Uuid) -> Option<GroupId> {
        let group = self.metadata.reader.with_engine(|engine| {
            let entry = engine.placement().queue_by_id(id)?;
            Some(GroupId(entry.group))
        });
        group.flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failed_passes_is_logged_once_and_its_end_once() {
        let mut failing = Failing::default();
        let (two, three) = (GroupId(2), GroupId(3));
        let down = || Err(NodeError::Unavailable("no leader".into()));
        assert_eq!(failing.note(two, Ok(())), Logged::Nothing);
        assert_eq!(failing.note(two, down()), Logged::FirstFailure);
        assert_eq!(failing.note(two, down()), Logged::Again);
        // Another group's run is its own.
        assert_eq!(failing.note(three, down()), Logged::FirstFailure);
        assert_eq!(failing.note(two, down()), Logged::Again);
        assert_eq!(failing.note(two, Ok(())), Logged::Recovered(3));
        assert_eq!(failing.note(two, Ok(())), Logged::Nothing);
        assert_eq!(failing.note(two, down()), Logged::FirstFailure);
        assert_eq!(failing.note(three, Ok(())), Logged::Recovered(1));
    }
}
