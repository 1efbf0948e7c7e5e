//! raftq's Raft type configuration: engine entries go into the log, [`Response`]s come out of the
//! state machine.

use std::fmt;
use std::sync::Arc;

use raftq_engine::legacy::{
    CommandV0, CommandV1, CommandV2, CommandV3, NewMessageV3, QueueAttributesV3,
};
use raftq_engine::{Command, Delivery, EngineError, Outcome, Payload};
use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

openraft::declare_raft_types!(
    /// Log entries carry a [`CommandGroup`] and answer one [`Response`] per command; node
    /// ids are `u64`; snapshots are files (see `crate::snapshot`).
    pub TypeConfig:
        D = CommandGroup,
        R = Vec<Response>,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = crate::snapshot_file::SnapshotFile,
        AsyncRuntime = crate::random::Runtime,
);

/// A node's id in the cluster.
pub type NodeId = u64;

/// A Raft group of a cluster: a replicated log and the state it applies, each queue in one.
/// Group 1 holds the queues of a cluster of one group, as every cluster was before groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The group of a cluster with one group.
    pub const FIRST: GroupId = GroupId(1);
}

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One Raft log entry: commands proposed together (group commit: one entry, one fsync per
/// node), applied in order at the leader's time `now`.
///
/// The commands are shared: openraft reads an entry back once per follower it replicates to,
/// and each read is a clone; only applying it needs commands of its own.
///
/// Encoded as `(LOG_FORMAT, now, commands)`. Entries of log format 0, written before the log
/// had a format number, are `(now, commands)`: their first number is a wall-clock reading in
/// milliseconds, far above any format number, and their commands are read as
/// [`CommandV0`]s; entries of formats 1, 2 and 3 are read as [`CommandV1`]s, [`CommandV2`]s
/// and [`CommandV3`]s.
/// A format newer than this build's is refused, never guessed at.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandGroup {
    pub now: u64,
    pub commands: Arc<Vec<Command>>,
}

/// The log entry format this build writes: 1 added queue retry backoffs and release delays, 2
/// typed message attributes, queue tags and default waits, receive attempt IDs, the move task
/// commands and those of parked receives, 3 queue deduplication scopes, throughput limits and
/// policies, and message trace headers, 4 message priorities and `deliver_at` times, queue
/// default priorities and priority weights, and the cancel of a scheduled message, 5 the
/// placement commands of the metadata group (a last command kind: entries of format 4 read as
/// they are), 6 the placement command that begins a queue's deletion (a last placement command:
/// entries of format 5 read as they are), 7 the placement command that sets a group's target
/// members (a last placement command: entries of format 6 read as they are), 8 the commands of
/// moves across groups, `WithRemote`, `InsertMoved` and `OutboxDone` (last command kinds:
/// entries of format 7 read as they are).
pub const LOG_FORMAT: u64 = 8;

/// The log entry format before the commands of moves across groups.
const LOG_FORMAT_7: u64 = 7;

/// The log entry format before the placement commands.
const LOG_FORMAT_4: u64 = 4;

/// The log entry format before the placement command that begins a queue's deletion.
const LOG_FORMAT_5: u64 = 5;

/// The log entry format before the placement command that sets a group's target members.
const LOG_FORMAT_6: u64 = 6;

/// The log entry format before typed attributes, tags, default waits, attempt IDs, move tasks and
/// parked receives.
const LOG_FORMAT_1: u64 = 1;

/// The log entry format before deduplication scopes, throughput limits, policies and trace
/// headers.
const LOG_FORMAT_2: u64 = 2;

/// The log entry format before priorities and scheduled messages.
const LOG_FORMAT_3: u64 = 3;

/// Today's commands from those of log format 2.
fn from_format_2(old: Vec<CommandV2>) -> Vec<Command> {
    old.into_iter()
        .map(|c| c.convert::<QueueAttributesV3, NewMessageV3>().convert())
        .collect()
}

/// Below this, an entry's first number is a format number; from it up, the time of a format 0
/// entry (2^32 ms is in 1970).
const FIRST_WALL_CLOCK: u64 = 1 << 32;

impl Serialize for CommandGroup {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(3)?;
        tuple.serialize_element(&LOG_FORMAT)?;
        tuple.serialize_element(&self.now)?;
        tuple.serialize_element(&*self.commands)?;
        tuple.end()
    }
}

impl<'de> Deserialize<'de> for CommandGroup {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;

        impl<'de> Visitor<'de> for Visit {
            type Value = CommandGroup;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a log format number or a time, then the commands")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CommandGroup, A::Error> {
                let missing = || de::Error::custom("log entry ends early");
                let first: u64 = seq.next_element()?.ok_or_else(missing)?;
                let (now, commands) = if first >= FIRST_WALL_CLOCK {
                    let old: Vec<CommandV0> = seq.next_element()?.ok_or_else(missing)?;
                    let v2 = old.into_iter().map(CommandV2::from);
                    (first, from_format_2(v2.collect()))
                } else if first == LOG_FORMAT_1 {
                    let now = seq.next_element()?.ok_or_else(missing)?;
                    let old: Vec<CommandV1> = seq.next_element()?.ok_or_else(missing)?;
                    (
                        now,
                        from_format_2(old.into_iter().map(CommandV2::from).collect()),
                    )
                } else if first == LOG_FORMAT_2 {
                    let now = seq.next_element()?.ok_or_else(missing)?;
                    (now, from_format_2(seq.next_element()?.ok_or_else(missing)?))
                } else if first == LOG_FORMAT_3 {
                    let now = seq.next_element()?.ok_or_else(missing)?;
                    let old: Vec<CommandV3> = seq.next_element()?.ok_or_else(missing)?;
                    (now, old.into_iter().map(CommandV3::convert).collect())
                } else if [
                    LOG_FORMAT,
                    LOG_FORMAT_7,
                    LOG_FORMAT_6,
                    LOG_FORMAT_5,
                    LOG_FORMAT_4,
                ]
                .contains(&first)
                {
                    let now = seq.next_element()?.ok_or_else(missing)?;
                    (now, seq.next_element()?.ok_or_else(missing)?)
                } else {
                    return Err(de::Error::custom(format!(
                        "log entry format {first} is not one this build reads (0 to {LOG_FORMAT})"
                    )));
                };
                Ok(CommandGroup {
                    now,
                    commands: Arc::new(commands),
                })
            }
        }

        deserializer.deserialize_tuple(3, Visit)
    }
}

/// What applying one command answers to its proposer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Response {
    /// The command's outcome.
    pub result: Option<Result<Outcome, EngineError>>,
    /// Payloads of the messages the outcome delivers, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}

/// The answer to a parked receive of this node's client: the messages an entry delivered to
/// it (none when its wait ended empty), with their payloads by storage key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Delivered {
    pub deliveries: Vec<Delivery>,
    pub payloads: Vec<(u64, Payload)>,
}

#[cfg(test)]
mod tests {
    use raftq_engine::{NewMessage, QueueAttributes, RedrivePolicyInput};
    use uuid::Uuid;

    use super::*;

    /// The commands of an entry written at 1,700,000,000,000 ms, given in hex.
    fn decoded(entry: &str) -> Vec<Command> {
        let bytes = hex::decode(entry).expect("hex");
        let group: CommandGroup = postcard::from_bytes(&bytes).expect("the entry decodes");
        assert_eq!(group.now, 1_700_000_000_000);
        Arc::unwrap_or_clone(group.commands)
    }

    /// Account `dev` creating the queue `name` (UUID 7) with `attributes`.
    fn created(name: &str, attributes: QueueAttributes) -> Command {
        Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::from_u128(7),
            name: name.into(),
            attributes,
        }
    }

    /// Account `dev` sending `message` to the queue `work`.
    fn sent_to_work(message: NewMessage) -> Command {
        Command::Send {
            account: "dev".into(),
            queue: "work".into(),
            message,
        }
    }

    /// `(now, commands)` as the build before log format 1 wrote it: a queue created with a
    /// redrive policy, a send, a release and a tick, at 1,700,000,000,000 ms.
    const FORMAT_0_ENTRY: &str = "80d095ffbc31040003646576100000000000000000000000000000000704776f\
        726b00015a00000001010103646c71010600030364657604776f726b10000000000000000000000000000000\
        090568656c6c6f000001016700070364657604776f726b01720009";

    #[test]
    fn entries_of_log_format_0_read_as_today_s_commands() {
        let attributes = QueueAttributes {
            lease_seconds: Some(45),
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: Some("dlq".into()),
                max_receive_count: Some(3),
            })),
            ..Default::default()
        };
        let release = Command::ChangeLease {
            account: "dev".into(),
            queue: "work".into(),
            receipt: "r".into(),
            lease_seconds: 0,
            delay_seconds: None,
        };
        assert_eq!(
            decoded(FORMAT_0_ENTRY),
            vec![
                created("work", attributes),
                sent_to_work(NewMessage::new(Uuid::from_u128(9), "hello").in_group("g")),
                release,
                Command::Tick,
            ]
        );
    }

    /// `(1, now, commands)` as log format 1 wrote it: a send with the plain attribute `k` = `v`
    /// and a receive of 2, at 1,700,000,000,000 ms.
    const FORMAT_1_ENTRY: &str = "0180d095ffbc3102030364657604776f726b1000000000000000000000000000\
        0000090568656c6c6f01016b0176000000050364657604776f726b010400";

    #[test]
    fn entries_of_log_format_1_read_with_plain_attributes_and_no_attempt_id() {
        let mut message = NewMessage::new(Uuid::from_u128(9), "hello");
        message
            .attributes
            .insert("k".into(), raftq_engine::Attribute::string("v"));
        let receive = Command::Receive {
            account: "dev".into(),
            queue: "work".into(),
            max_messages: Some(2),
            lease_seconds: None,
            attempt_id: None,
        };
        assert_eq!(
            decoded(FORMAT_1_ENTRY),
            vec![sent_to_work(message), receive]
        );
    }

    /// `(2, now, commands)` as log format 2 wrote it: the FIFO queue `jobs.fifo` created with a
    /// 45 s lease, a 5 s default wait and the tag `team` = `core`, then a batch of one message
    /// with the `Number` attribute `n` = `1.5`, in group `g`, deduplication ID `d`, at
    /// 1,700,000,000,000 ms.
    const FORMAT_2_ENTRY: &str = "0280d095ffbc310200036465761000000000000000000000000000000007096a\
        6f62732e6669666f00015a000000000000010a0101047465616d0104636f72650403646576096a6f62732e66\
        69666f0102653110000000000000000000000000000000090568656c6c6f01016e064e756d6265720003312e\
        3500010167010164";

    #[test]
    fn entries_of_log_format_2_read_without_scopes_policies_or_trace_headers() {
        let mut message = NewMessage::new(Uuid::from_u128(9), "hello")
            .in_group("g")
            .deduplicated_by("d");
        message
            .attributes
            .insert("n".into(), raftq_engine::Attribute::text("Number", "1.5"));
        let attributes = QueueAttributes {
            lease_seconds: Some(45),
            receive_wait_seconds: Some(5),
            tags: Some([("team".to_string(), Some("core".to_string()))].into()),
            ..Default::default()
        };
        let batch = Command::SendBatch {
            account: "dev".into(),
            queue: "jobs.fifo".into(),
            entries: vec![raftq_engine::BatchEntry {
                id: "e1".into(),
                message,
            }],
        };
        assert_eq!(
            decoded(FORMAT_2_ENTRY),
            vec![created("jobs.fifo", attributes), batch]
        );
    }

    /// `(3, now, commands)` as log format 3 wrote it: the queue `work` created with a 45 s
    /// lease and the policy `p`, then a send with the trace header `t`, at 1,700,000,000,000 ms.
    const FORMAT_3_ENTRY: &str = "0380d095ffbc31020003646576100000000000000000000000000000000704\
        776f726b00015a0000000000000000000001010170030364657604776f726b1000000000000000000000000000\
        0000090568656c6c6f00000000010174";

    #[test]
    fn entries_of_log_format_3_read_without_priorities_or_deliver_at() {
        let mut message = NewMessage::new(Uuid::from_u128(9), "hello");
        message.trace_header = Some("t".into());
        let attributes = QueueAttributes {
            lease_seconds: Some(45),
            policy: Some(Some("p".into())),
            ..Default::default()
        };
        assert_eq!(
            decoded(FORMAT_3_ENTRY),
            vec![created("work", attributes), sent_to_work(message)]
        );
    }

    #[test]
    fn entries_round_trip_in_the_current_format_whatever_their_time() {
        for now in [0, 5, FIRST_WALL_CLOCK, 1_700_000_000_000] {
            let group = CommandGroup {
                now,
                commands: Arc::new(vec![Command::Tick]),
            };
            let bytes = postcard::to_allocvec(&group).expect("encode");
            assert_eq!(bytes[0], LOG_FORMAT as u8, "the format number leads");
            let back: CommandGroup = postcard::from_bytes(&bytes).expect("decode");
            assert_eq!(back, group);
        }
    }

    #[test]
    fn entries_of_log_format_1_read_as_they_are() {
        let group = CommandGroup {
            now: 5,
            commands: Arc::new(vec![Command::Tick]),
        };
        let mut bytes = postcard::to_allocvec(&group).expect("encode");
        bytes[0] = 1;
        let back: CommandGroup = postcard::from_bytes(&bytes).expect("format 1 decodes");
        assert_eq!(back, group);
    }

    #[test]
    fn entries_of_log_formats_4_to_7_read_as_they_are_and_placement_commands_round_trip() {
        let mut message = NewMessage::new(Uuid::from_u128(9), "hello");
        message.priority = Some(2);
        let group = CommandGroup {
            now: 5,
            commands: Arc::new(vec![sent_to_work(message), Command::Tick]),
        };
        for format in [LOG_FORMAT_4, LOG_FORMAT_5, LOG_FORMAT_6, LOG_FORMAT_7] {
            let mut bytes = postcard::to_allocvec(&group).expect("encode");
            bytes[0] = format as u8;
            let back: CommandGroup = postcard::from_bytes(&bytes).expect("an earlier format");
            assert_eq!(back, group, "format {format}");
        }
        use raftq_engine::placement::PlacementCommand;
        let places = [
            PlacementCommand::GroupFormed { group: 3 },
            PlacementCommand::Retire {
                id: Uuid::from_u128(4),
            },
            PlacementCommand::SetTarget {
                group: 2,
                members: [1, 4].into(),
            },
        ];
        let group = CommandGroup {
            now: 6,
            commands: Arc::new(places.map(|change| Command::Place { change }).to_vec()),
        };
        let bytes = postcard::to_allocvec(&group).expect("encode");
        assert_eq!(bytes[0], 8, "written in log format 8");
        let back: CommandGroup = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(back, group);
    }

    #[test]
    fn the_commands_of_moves_across_groups_round_trip() {
        use raftq_engine::command::{Elsewhere, RemoteQueue};
        use raftq_engine::model::AllowPolicy;
        use raftq_engine::outbox::MoveResult;
        let remote = RemoteQueue {
            reference: "dlq".into(),
            id: Uuid::from_u128(5),
            name: "dlq".into(),
            queue_type: raftq_engine::QueueType::Standard,
            redrive_allow_policy: AllowPolicy::AllowAll,
        };
        let patch = Command::PatchQueue {
            account: "dev".into(),
            queue: "work".into(),
            attributes: QueueAttributes::default(),
        };
        let commands = vec![
            Command::WithRemote {
                elsewhere: Elsewhere {
                    queues: vec![remote],
                    has_sources: true,
                },
                command: Box::new(patch),
            },
            Command::InsertMoved {
                from_group: 2,
                acked_below: 7,
                arrivals: Vec::new(),
            },
            Command::OutboxDone {
                results: vec![MoveResult {
                    seq: 7,
                    refused: Some("gone".into()),
                }],
            },
        ];
        let group = CommandGroup {
            now: 6,
            commands: Arc::new(commands),
        };
        let bytes = postcard::to_allocvec(&group).expect("encode");
        let back: CommandGroup = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(back, group);
    }

    #[test]
    fn a_newer_log_format_is_refused_by_number() {
        let mut bytes = postcard::to_allocvec(&CommandGroup {
            now: 1,
            commands: Arc::new(vec![]),
        })
        .expect("encode");
        bytes[0] = LOG_FORMAT as u8 + 1;
        assert!(
            postcard::from_bytes::<CommandGroup>(&bytes).is_err(),
            "a format this build does not know is refused"
        );
    }
}
