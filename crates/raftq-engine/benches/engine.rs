//! Engine throughput on one core: sends into a FIFO queue spread over 10,000 groups, into a
//! standard queue, into a standard queue whose messages spread over ten priority levels served
//! by weights, and (as scheduled messages) into a standard queue whose backlog is scheduled a
//! day ahead; and receive+ack cycles on each, on queues holding 1,000 and 1,000,000 messages.
//! The scheduled queue's receives take from a working set of visible messages beside its
//! scheduled backlog. Only `Engine::apply` is timed; building commands and keeping the queue at
//! its depth (refills, drains and cancels between timed chunks) are not.
//!
//! Run: `scripts/bench-engine` (writes docs/benchmarks-engine.md) or
//! `cargo bench -p raftq-engine --bench engine`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use raftq_engine::{Command, Engine, Entry, NewMessage, Outcome, QueueAttributes};
use uuid::Uuid;

const GROUPS: u64 = 10_000;
const CHUNK: u64 = 1_000;
const DEPTHS: [u64; 2] = [1_000, 1_000_000];
/// How far ahead the scheduled queue's messages are due.
const SCHEDULED_AHEAD_MS: i64 = 24 * 3600 * 1000;

/// What a queue's messages are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fifo,
    Standard,
    /// Priorities 0-9 in turn, on a queue with `priority_weights` 1-10.
    Weighted,
    /// Sent with a `deliver_at` a day ahead.
    Scheduled,
}

struct Fixture {
    engine: Engine,
    queue: &'static str,
    kind: Kind,
    now: u64,
    sent: u64,
}

impl Fixture {
    fn new(queue: &'static str, kind: Kind, depth: u64) -> Fixture {
        let mut f = Fixture {
            engine: Engine::new("local"),
            queue,
            kind,
            now: 1_700_000_000_000,
            sent: 0,
        };
        let priority_weights = (kind == Kind::Weighted).then(|| Some((1..=10).collect()));
        f.apply(Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::from_u128(1),
            name: queue.into(),
            attributes: QueueAttributes {
                priority_weights,
                ..QueueAttributes::default()
            },
        });
        f.fill(depth);
        if kind == Kind::Scheduled {
            f.fill_visible(CHUNK);
        }
        f
    }

    fn apply(&mut self, command: Command) -> Option<Outcome> {
        self.engine
            .apply(Entry {
                now: self.now,
                command,
            })
            .result
            .ok()
    }

    /// A send of the queue's kind of message; `scheduled` false sends a visible one.
    fn send_command(&mut self, scheduled: bool) -> Command {
        self.sent += 1;
        let n = self.sent;
        let fifo = self.kind == Kind::Fifo;
        let weighted = self.kind == Kind::Weighted;
        Command::Send {
            account: "dev".into(),
            queue: self.queue.into(),
            message: NewMessage {
                message_group_id: fifo.then(|| format!("group-{}", n % GROUPS)),
                message_deduplication_id: fifo.then(|| format!("dedup-{n}")),
                priority: weighted.then_some((n % 10) as i64),
                deliver_at: scheduled.then_some(self.now as i64 + SCHEDULED_AHEAD_MS),
                ..NewMessage::new(message_id(n), "x".repeat(16))
            },
        }
    }

    fn receive_command(&self) -> Command {
        Command::Receive {
            account: "dev".into(),
            queue: self.queue.into(),
            max_messages: Some(1),
            lease_seconds: Some(300),
            attempt_id: None,
        }
    }

    fn ack_command(&self, receipt: String) -> Command {
        Command::Ack {
            account: "dev".into(),
            queue: self.queue.into(),
            receipts: vec![receipt],
        }
    }

    /// Sends `n` messages of the queue's kind.
    fn fill(&mut self, n: u64) {
        for _ in 0..n {
            let c = self.send_command(self.kind == Kind::Scheduled);
            self.apply(c);
        }
    }

    /// Sends `n` visible messages.
    fn fill_visible(&mut self, n: u64) {
        for _ in 0..n {
            let c = self.send_command(false);
            self.apply(c);
        }
    }

    /// Takes the messages sent last, `first_sent` on, out of the queue again: receives them
    /// (cancels them, on the scheduled queue, where they are not deliverable).
    fn drain(&mut self, first_sent: u64) {
        if self.kind != Kind::Scheduled {
            for _ in first_sent..=self.sent {
                self.cycle();
            }
            return;
        }
        for n in first_sent..=self.sent {
            self.apply(Command::CancelScheduled {
                account: "dev".into(),
                queue: self.queue.into(),
                id: message_id(n),
            });
        }
    }

    /// Receives and acknowledges one message; false when nothing was deliverable.
    fn cycle(&mut self) -> bool {
        let receipt = match self.apply(self.receive_command()) {
            Some(Outcome::Received(mut d)) if !d.is_empty() => d.remove(0).receipt,
            _ => return false,
        };
        self.apply(self.ack_command(receipt));
        true
    }

    /// Times `iters` operations in chunks of at most `CHUNK`: `chunk` runs a chunk of the size
    /// it is given and answers the time its timed part took.
    fn time_in_chunks(
        &mut self,
        iters: u64,
        mut chunk: impl FnMut(&mut Self, u64) -> Duration,
    ) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(CHUNK);
            total += chunk(self, n);
            left -= n;
        }
        total
    }

    /// Times `iters` sends in chunks, draining each chunk again untimed.
    fn time_sends(&mut self, iters: u64) -> Duration {
        self.time_in_chunks(iters, |f, n| {
            let first_sent = f.sent + 1;
            let scheduled = f.kind == Kind::Scheduled;
            let commands: Vec<Command> = (0..n).map(|_| f.send_command(scheduled)).collect();
            let start = Instant::now();
            for command in commands {
                black_box(f.engine.apply(Entry {
                    now: f.now,
                    command,
                }));
            }
            let elapsed = start.elapsed();
            f.now += 1;
            f.drain(first_sent);
            elapsed
        })
    }

    /// Times `iters` receive+ack cycles in chunks, refilling each chunk again untimed.
    fn time_cycles(&mut self, iters: u64) -> Duration {
        self.time_in_chunks(iters, |f, n| {
            let start = Instant::now();
            for _ in 0..n {
                assert!(f.cycle(), "queue ran dry");
            }
            let elapsed = start.elapsed();
            f.now += 1;
            f.fill_visible(n);
            elapsed
        })
    }
}

/// The message ID of the `n`th message sent.
fn message_id(n: u64) -> Uuid {
    Uuid::from_u128(u128::from(n) + 1_000)
}

fn queues() -> [(&'static str, &'static str, Kind); 4] {
    [
        ("fifo_10k_groups", "bench.fifo", Kind::Fifo),
        ("standard", "bench", Kind::Standard),
        ("weighted_priorities", "bench", Kind::Weighted),
        ("scheduled_backlog", "bench", Kind::Scheduled),
    ]
}

/// Benchmarks `time` (which times a number of operations on a fixture) on each queue at each
/// depth, in the groups `<name>/<queue's label>`.
fn bench_queues(c: &mut Criterion, name: &str, time: fn(&mut Fixture, u64) -> Duration) {
    for (label, queue, kind) in queues() {
        let mut group = c.benchmark_group(format!("{name}/{label}"));
        group.throughput(Throughput::Elements(1));
        for depth in DEPTHS {
            let mut f = Fixture::new(queue, kind, depth);
            group.bench_function(BenchmarkId::from_parameter(depth), |b| {
                b.iter_custom(|iters| time(&mut f, iters))
            });
        }
        group.finish();
    }
}

fn sends(c: &mut Criterion) {
    bench_queues(c, "send", Fixture::time_sends);
}

fn receive_ack(c: &mut Criterion) {
    bench_queues(c, "receive_ack", Fixture::time_cycles);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = sends, receive_ack
}
criterion_main!(benches);
