//! Requests routed to the group of their queue: queues spread over the groups, any node
//! reaches any queue (through the group's leader, forwarded where the node takes no part in
//! the group), listings cover every group, and a queue's old id never reaches a queue again.

use raftq_engine::placement::PlacementCommand;
use raftq_engine::placement::QueueEntryState::Ready;
use raftq_node::{question, LongPoll};
use raftq_store::GroupId;

use super::groups::{create_in, stats_in};
use super::*;

/// The group and id the placement of node `id` gives queue `name`, once node `id` applied
/// its entry.
async fn placed(cluster: &Cluster, id: u64, name: &str) -> (GroupId, Uuid) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(entry) = cluster.placement(id).queue(ACCOUNT, name) {
            return (GroupId(entry.group), entry.id);
        }
        assert!(
            Instant::now() < deadline,
            "{name} is not in node {id}'s directory"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until node `id`'s directory has no queue `name`.
async fn gone(cluster: &Cluster, id: u64, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.placement(id).queue(ACCOUNT, name).is_some() {
        assert!(
            Instant::now() < deadline,
            "{name} is still in node {id}'s directory"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

/// Three nodes and three groups, every group formed.
async fn three_groups() -> Cluster {
    let cluster = Cluster::start_groups(3, 3).await;
    cluster.formed(1).await;
    cluster
}

/// Three nodes and three groups, with queue `jobs` holding two messages: its group and id.
async fn jobs_on_three_groups() -> (Cluster, GroupId, Uuid) {
    let cluster = three_groups().await;
    create_and_fill(cluster.node(1), "jobs", 2).await;
    let (group, id) = placed(&cluster, 1, "jobs").await;
    (cluster, group, id)
}

/// Three nodes and three groups with queues `first` and `second`, made in turn through node 1
/// (the second goes to the least loaded group, another than the first's): their groups.
async fn two_queues(first: &str, second: &str) -> (Cluster, GroupId, GroupId) {
    let cluster = three_groups().await;
    create_queue(cluster.node(1), first).await;
    create_queue(cluster.node(1), second).await;
    let (first_group, _) = placed(&cluster, 1, first).await;
    let (second_group, _) = placed(&cluster, 1, second).await;
    (cluster, first_group, second_group)
}

/// Deletes queue `dlq` through `node`, which refuses it: a source uses it.
async fn dead_letter_queue_in_use(node: &Node) {
    let deleted = Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: "dlq".into(),
    };
    let refused = node.write(deleted).await.expect("answered");
    assert!(
        matches!(refused.result, Some(Err(EngineError::QueueInUse { .. }))),
        "{refused:?}"
    );
}

/// The names listed through `node`.
async fn listed(node: &Node) -> Vec<String> {
    let query = Query::ListQueues {
        account: ACCOUNT.into(),
        prefix: String::new(),
    };
    match node.read(query).await {
        Ok(Ok(QueryResult::Queues(views))) => views.into_iter().map(|v| v.name).collect(),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn queues_spread_over_the_groups_and_every_node_reaches_each() {
    within(Duration::from_secs(90), async {
        let cluster = three_groups().await;
        let names: Vec<String> = (0..6).map(|i| format!("q{i}")).collect();
        for name in &names {
            create_queue(cluster.node(1), name).await;
        }
        let mut per_group = BTreeMap::new();
        for name in &names {
            let (group, _) = placed(&cluster, 1, name).await;
            *per_group.entry(group).or_insert(0) += 1;
            for other in 1..=3 {
                let held = stats_in(cluster.node(1), GroupId(other), name).await;
                assert_eq!(
                    held.is_some(),
                    GroupId(other) == group,
                    "{name} in group {other}"
                );
            }
        }
        assert_eq!(
            per_group.into_values().collect::<Vec<_>>(),
            [2, 2, 2],
            "the least loaded group takes each new queue"
        );
        for name in &names {
            for id in 1..=3 {
                send_plain(cluster.node(id), name, &format!("via {id}")).await;
            }
            assert_eq!(stats(cluster.node(2), name).await.visible, 3, "{name}");
            match outcome(
                cluster
                    .node(3)
                    .write(receive(name, 10, 30))
                    .await
                    .expect("receive"),
            ) {
                Outcome::Received(deliveries) => assert_eq!(deliveries.len(), 3, "{name}"),
                other => panic!("unexpected {other:?}"),
            }
        }
        for id in 1..=3 {
            assert_eq!(
                listed(cluster.node(id)).await,
                names,
                "listed through node {id}"
            );
        }
        match cluster.node(2).read(Query::Accounts).await {
            Ok(Ok(QueryResult::Accounts(accounts))) => {
                assert_eq!(accounts.len(), 1);
                assert_eq!(
                    (accounts[0].account.as_str(), accounts[0].queues),
                    (ACCOUNT, 6)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        // A backup covers every group.
        let backup = cluster.node(1).backup(std::io::sink()).await;
        let sections = backup.expect("backup").sections;
        let groups: Vec<u32> = sections.iter().map(|s| s.group.0).collect();
        assert_eq!(groups, [1, 2, 3]);
    })
    .await;
}

#[tokio::test]
async fn a_queue_made_again_under_its_name_is_a_new_queue_and_its_old_id_finds_nothing() {
    within(Duration::from_secs(90), async {
        let (cluster, first_group, first_id) = jobs_on_three_groups().await;
        let deleted = Command::DeleteQueue {
            account: ACCOUNT.into(),
            queue: "jobs".into(),
        };
        outcome(cluster.node(2).write(deleted).await.expect("delete"));
        gone(&cluster, 2, "jobs").await;
        gone(&cluster, 3, "jobs").await;
        // The old group holds another queue now, so the name goes elsewhere.
        create_queue(cluster.node(3), "filler").await;
        create_queue(cluster.node(3), "jobs").await;
        let (group, id) = placed(&cluster, 3, "jobs").await;
        assert_ne!(id, first_id);
        assert_ne!(group, first_group);
        let old = first_id.to_string();
        let refused = cluster
            .node(1)
            .write(plain(&old, "lost?"))
            .await
            .expect("answered");
        match refused.result {
            Some(Err(EngineError::QueueNotFound(named))) => assert_eq!(named, old),
            other => panic!("unexpected {other:?}"),
        }
        fill(cluster.node(1), "jobs", 1).await;
        assert_eq!(
            stats(cluster.node(2), "jobs").await.visible,
            1,
            "only the new message"
        );
        let in_first = stats_in(cluster.node(1), first_group, "jobs").await;
        assert!(
            in_first.is_none(),
            "the old group holds no queue of the name"
        );
    })
    .await;
}

#[tokio::test]
async fn a_node_outside_a_group_reaches_its_queues_through_the_members() {
    within(Duration::from_secs(120), async {
        let cluster = Cluster::start_groups(5, 2).await;
        let groups = cluster.formed(1).await;
        let members = &groups[&2].members;
        create_queue(cluster.node(5), "first").await;
        create_queue(cluster.node(5), "second").await;
        let (group, _) = placed(&cluster, 5, "second").await;
        assert_eq!(group, GroupId(2), "the emptier group");
        let outside: Vec<u64> = (1..=5).filter(|id| !members.contains(id)).collect();
        assert!(!outside.is_empty());
        for id in &outside {
            assert!(
                cluster.node(*id).raft_of(group).is_err(),
                "node {id} runs no replica"
            );
            fill(cluster.node(*id), "second", 2).await;
            assert_eq!(listed(cluster.node(*id)).await, ["first", "second"]);
            let view = cluster
                .node(*id)
                .ask(question::get_queue(ACCOUNT.into(), "second".into()));
            assert_eq!(view.await.expect("read").expect("queue").group, 2);
            // Each group as this node sees it: its own replica of group 1 only.
            let status = cluster.node(*id).status().await;
            let seen: Vec<_> = (status.groups.iter())
                .map(|g| (g.group, g.queues, g.replica.is_some()))
                .collect();
            assert_eq!(seen, [(1, 1, true), (2, 1, false)], "node {id}");
            let data = &status.groups[1];
            assert_eq!(data.members, members.iter().copied().collect::<Vec<_>>());
            assert!(data.formed);
            // Its leader as the placement last saw it, once the leader recorded itself.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let status = cluster.node(*id).status().await;
                if let Some(leader) = status.groups[1].leader {
                    assert!(members.contains(&leader), "group 2 led by {leader}");
                    break;
                }
                assert!(Instant::now() < deadline, "node {id} knows no leader");
                sleep(Duration::from_millis(50)).await;
            }
        }
        let member = *members.first().expect("a member");
        let status = cluster.node(member).status().await;
        let replica = status.groups[1].replica.expect("a member's replica");
        assert!(replica.last_applied > 0 && replica.commit_index >= replica.last_applied);
        let expected = 2 * outside.len() as u64;
        assert_eq!(
            stats(cluster.node(outside[0]), "second").await.visible,
            expected
        );
        match outcome(
            cluster
                .node(outside[0])
                .write(receive("second", 10, 30))
                .await
                .expect("receive"),
        ) {
            Outcome::Received(deliveries) => assert_eq!(deliveries.len() as u64, expected),
            other => panic!("unexpected {other:?}"),
        }
        // A wait its node could not answer is a plain receive there: nothing, at once.
        let waiter = Uuid::new_v4();
        let node = cluster.node(outside[0]);
        let _slot = node.await_answer(ACCOUNT, "second", waiter).await;
        let waited = node.write(receive_wait("second", 20, 30, waiter)).await;
        assert_eq!(
            outcome(waited.expect("receive")),
            Outcome::Received(Vec::new())
        );
        // A long poll there is served whole by a member: it waits, and the send that wakes it
        // answers it.
        let poll = |wait| {
            LongPoll::new(
                ACCOUNT.into(),
                "second".into(),
                None,
                None,
                wait,
                Uuid::new_v4(),
            )
        };
        let started = Instant::now();
        let ended = node
            .long_poll(poll(1))
            .await
            .expect("poll")
            .expect("delivered");
        assert!(ended.deliveries.is_empty(), "{ended:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "it waited its second"
        );
        let wake = async {
            sleep(Duration::from_millis(300)).await;
            send_plain(cluster.node(member), "second", "woken").await;
        };
        let started = Instant::now();
        let (woken, ()) = tokio::join!(node.long_poll(poll(20)), wake);
        let woken = woken.expect("poll").expect("delivered");
        assert_eq!(woken.deliveries.len(), 1);
        assert_eq!(woken.payloads[0].1.body, "woken");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(10),
            "{took:?}"
        );
    })
    .await;
}

/// A deletion that stopped after retiring its queue's entry (its node gone) is finished by the
/// next creation of the name, which then makes a new queue; the stopped deletion's last steps,
/// should they still come, find nothing of the new queue to take away.
#[tokio::test]
async fn a_creation_finishes_a_deletion_begun_under_its_name_and_keeps_the_new_queue() {
    within(Duration::from_secs(90), async {
        let (cluster, first_group, first_id) = jobs_on_three_groups().await;
        let place = |change| Command::Place { change };
        let retire = PlacementCommand::Retire { id: first_id };
        outcome(cluster.node(2).write(place(retire)).await.expect("retire"));

        create_queue(cluster.node(3), "jobs").await;
        let (group, id) = placed(&cluster, 3, "jobs").await;
        assert_ne!(id, first_id, "a new queue, not the one being deleted");
        let in_first = stats_in(cluster.node(1), first_group, "jobs").await;
        assert!(
            first_group != group || in_first.is_some_and(|s| s.visible == 0),
            "the old queue and its messages are gone"
        );
        fill(cluster.node(1), "jobs", 1).await;

        // The stopped deletion's last steps, late: they change nothing of the new queue.
        let late_delete = Command::DeleteQueue {
            account: ACCOUNT.into(),
            queue: first_id.to_string(),
        };
        let deleted = cluster.node(1).write_in(first_group, late_delete).await;
        assert!(
            matches!(
                deleted.expect("answered").result,
                Some(Err(EngineError::QueueNotFound(_)))
            ),
            "the old queue is gone already"
        );
        let deregister = PlacementCommand::Deregister { id: first_id };
        let late = cluster
            .node(2)
            .write(place(deregister))
            .await
            .expect("answered");
        assert!(matches!(late.result, Some(Err(_))), "{late:?}");
        assert_eq!(placed(&cluster, 2, "jobs").await, (group, id));
        assert_eq!(stats(cluster.node(2), "jobs").await.visible, 1);
        assert_eq!(listed(cluster.node(2)).await, ["jobs"]);
    })
    .await;
}

#[tokio::test]
async fn a_receive_parked_in_a_data_group_is_answered_by_the_send_that_wakes_it() {
    within(Duration::from_secs(90), async {
        let (cluster, _, group) = two_queues("first", "waited").await;
        assert_ne!(group, GroupId::FIRST);
        let waiter = Uuid::new_v4();
        let mut slot = cluster
            .node(2)
            .await_answer(ACCOUNT, "waited", waiter)
            .await;
        let parked = cluster
            .node(2)
            .write(receive_wait("waited", 20, 30, waiter))
            .await
            .expect("park");
        assert_eq!(outcome(parked), Outcome::Parked);
        fill(cluster.node(3), "waited", 1).await;
        let answer = timeout(Duration::from_secs(5), slot.answer())
            .await
            .expect("answered in the send's commit")
            .expect("an answer");
        assert_eq!(answer.deliveries.len(), 1);
        let end = Command::EndWait { waiter };
        outcome(cluster.node(2).write(end).await.expect("end the wait"));
    })
    .await;
}

#[tokio::test]
async fn a_queue_goes_to_the_group_of_its_dead_letter_queue() {
    within(Duration::from_secs(90), async {
        let cluster = three_groups().await;
        for name in ["a", "dlq", "c"] {
            create_queue(cluster.node(2), name).await;
        }
        let (dead_letters, _) = placed(&cluster, 2, "dlq").await;
        assert_eq!(
            dead_letters,
            GroupId(2),
            "the second queue, in the second group"
        );
        let redrive = QueueAttributes {
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: Some("dlq".into()),
                max_receive_count: Some(1),
            })),
            ..QueueAttributes::default()
        };
        let node = cluster.node(3);
        outcome(node.write(create("work", redrive)).await.expect("create"));
        let (group, _) = placed(&cluster, 3, "work").await;
        assert_eq!(
            group, dead_letters,
            "beside its dead-letter queue, not in the emptiest group"
        );
        fill(node, "work", 1).await;
        outcome(node.write(receive("work", 1, 1)).await.expect("receive"));
        let deadline = Instant::now() + Duration::from_secs(15);
        while stats(node, "dlq").await.visible == 0 {
            assert!(
                Instant::now() < deadline,
                "the message never reached the dead-letter queue"
            );
            sleep(Duration::from_millis(100)).await;
        }
        // Its deletion refused while a source uses it, the dead-letter queue stays, its entry
        // as it was, and a creation of its name finds it there.
        dead_letter_queue_in_use(node).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while cluster.placement(3).queue(ACCOUNT, "dlq").map(|e| e.state) != Some(Ready) {
            assert!(
                Instant::now() < deadline,
                "the entry was not confirmed again"
            );
            sleep(Duration::from_millis(20)).await;
        }
        let again = cluster
            .node(1)
            .write(create("dlq", QueueAttributes::default()));
        let again = again.await.expect("answered");
        assert!(
            matches!(again.result, Some(Err(EngineError::QueueExists(_)))),
            "{again:?}"
        );
        assert_eq!(stats(node, "dlq").await.visible, 1, "the same queue");
    })
    .await;
}

/// Waits until `check` holds of the bodies of `queue` read through `node`.
async fn bodies_until(node: &Node, queue: &str, what: &str, check: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let held = bodies(node, queue).await;
        if check(&held) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {queue} holds {held:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_dead_letter_queue_in_another_group_takes_each_message_once_and_gives_it_back() {
    within(Duration::from_secs(90), async {
        let (cluster, dead_letters, group) = two_queues("dlq", "work").await;
        assert_ne!(group, dead_letters, "the least loaded group takes each");
        let node = cluster.node(3);
        let redrive = QueueAttributes {
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: Some("dlq".into()),
                max_receive_count: Some(1),
            })),
            ..QueueAttributes::default()
        };
        let patch = Command::PatchQueue {
            account: ACCOUNT.into(),
            queue: "work".into(),
            attributes: redrive,
        };
        match outcome(node.write(patch).await.expect("patch")) {
            Outcome::Queue(view) => {
                let policy = view.redrive_policy.expect("a redrive policy");
                assert_eq!(policy.dead_letter_target.name, "dlq");
            }
            other => panic!("unexpected {other:?}"),
        }
        fill(node, "work", 5).await;
        // A zero-length lease ends at once: each message is dead-lettered by its receive.
        while stats(node, "work").await.visible > 0 {
            outcome(node.write(receive("work", 10, 0)).await.expect("receive"));
        }
        let expected: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
        bodies_until(cluster.node(1), "dlq", "dead-lettered", |b| b == expected).await;
        assert!(bodies(node, "work").await.is_empty());
        // Every replica shows its group's outbox, emptied once the target's answer is applied.
        let empty: Vec<_> = (1..=3).map(|g| (g, Some(0))).collect();
        for id in 1..=3 {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let status = cluster.node(id).status().await;
                let outboxes: Vec<_> = (status.groups.iter())
                    .map(|g| (g.group, g.replica.map(|r| r.outbox)))
                    .collect();
                if outboxes == empty {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {id}: outboxes {outboxes:?}"
                );
                sleep(Duration::from_millis(50)).await;
            }
        }

        let sources = Query::DeadLetterSources {
            account: ACCOUNT.into(),
            queue: "dlq".into(),
        };
        match cluster.node(1).read(sources).await {
            Ok(Ok(QueryResult::Refs(refs))) => {
                let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
                assert_eq!(names, ["work"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        dead_letter_queue_in_use(node).await;

        let start = Command::StartMoveTask {
            account: ACCOUNT.into(),
            queue: "dlq".into(),
            task_handle: Uuid::new_v4(),
            task: MoveTaskInput::default(),
        };
        match outcome(cluster.node(2).write(start).await.expect("start")) {
            Outcome::MoveTask(task) => assert_eq!(task.to_move, 5),
            other => panic!("unexpected {other:?}"),
        }
        bodies_until(node, "work", "moved back", |b| b == expected).await;
        assert!(bodies(node, "dlq").await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_node_whose_directory_lags_sends_on_the_fresh_route_not_the_old_one() {
    within(Duration::from_secs(90), async {
        let cluster = three_groups().await;
        create_queue(cluster.node(1), "jobs").await;
        let lagging = 3;
        let (old_group, old_id) = placed(&cluster, lagging, "jobs").await;
        // Node 3 misses the deletion and the new queue of the same name in another group.
        isolate(&cluster, lagging, true);
        let deleted = Command::DeleteQueue {
            account: ACCOUNT.into(),
            queue: "jobs".into(),
        };
        outcome(cluster.node(1).write(deleted).await.expect("delete"));
        create_queue(cluster.node(1), "filler").await;
        create_queue(cluster.node(2), "jobs").await;
        let (new_group, new_id) = placed(&cluster, 1, "jobs").await;
        assert_ne!((new_group, new_id), (old_group, old_id));
        assert_eq!(
            cluster
                .placement(lagging)
                .queue(ACCOUNT, "jobs")
                .map(|e| e.id),
            Some(old_id),
            "node 3 still routes to the old queue"
        );
        isolate(&cluster, lagging, false);
        fill(cluster.node(lagging), "jobs", 1).await;
        assert_eq!(
            stats_in(cluster.node(1), new_group, "jobs")
                .await
                .map(|s| s.visible),
            Some(1)
        );
        assert!(
            stats_in(cluster.node(1), old_group, "jobs").await.is_none(),
            "nothing was applied in the old group"
        );
    })
    .await;
}

/// A creation or a deletion whose client stopped between its steps leaves its queue's entry
/// half made; once it is old enough, group 1's leader settles it: a reservation whose queue
/// was never made is released, one whose queue its group holds is confirmed, and a retired
/// entry's queue is deleted and the entry taken out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_made_directory_entries_are_settled_by_the_metadata_leader() {
    within(Duration::from_secs(90), async {
        let logs = BTreeMap::new();
        let mut cluster = Cluster::start_on(0, 20_000, BTreeMap::new(), 50, logs).await;
        cluster.groups = 3;
        cluster.settle_after = Duration::from_secs(1);
        let cluster = cluster.launch_all(3).await;
        cluster.formed(1).await;
        let node = cluster.node(2);
        let ghost = PlacementCommand::Reserve {
            account: ACCOUNT.into(),
            name: "ghost".into(),
            id: Uuid::new_v4(),
            group: Some(2),
        };
        outcome(
            node.write(Command::Place { change: ghost })
                .await
                .expect("reserve"),
        );
        create_in(node, GroupId(3), "half").await;
        create_and_fill(node, "doomed", 2).await;
        let (group, doomed) = placed(&cluster, 2, "doomed").await;
        let retire = PlacementCommand::Retire { id: doomed };
        outcome(
            node.write(Command::Place { change: retire })
                .await
                .expect("retire"),
        );

        gone(&cluster, 3, "ghost").await;
        gone(&cluster, 3, "doomed").await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while cluster.placement(3).queue(ACCOUNT, "half").map(|e| e.state) != Some(Ready) {
            assert!(Instant::now() < deadline, "half is not confirmed");
            sleep(Duration::from_millis(50)).await;
        }
        let crn = raftq_engine::model::crn("local", ACCOUNT, doomed);
        let left = node.read_in(
            group,
            Query::GetQueue {
                account: ACCOUNT.into(),
                queue: crn,
            },
        );
        assert!(
            matches!(
                left.await.expect("read"),
                Err(EngineError::QueueNotFound(_))
            ),
            "the retired queue is deleted in its group"
        );
        assert_eq!(listed(node).await, ["half"]);
        assert_eq!(stats(node, "half").await.visible, 0);
    })
    .await;
}
