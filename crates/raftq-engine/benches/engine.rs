//! Engine throughput on one core: sends into a FIFO queue spread over 10,000 groups and into a
//! standard queue, and receive+ack cycles, each on queues holding 1,000 and 1,000,000 messages.
//! Only `Engine::apply` is timed; building commands and keeping the queue at its depth (refills
//! and drains between timed chunks) are not.
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

struct Fixture {
    engine: Engine,
    queue: &'static str,
    fifo: bool,
    now: u64,
    sent: u64,
}

impl Fixture {
    fn new(queue: &'static str, depth: u64) -> Fixture {
        let mut f = Fixture {
            engine: Engine::new("local"),
            queue,
            fifo: queue.ends_with(".fifo"),
            now: 1_700_000_000_000,
            sent: 0,
        };
        f.apply(Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::from_u128(1),
            name: queue.into(),
            attributes: QueueAttributes::default(),
        });
        f.fill(depth);
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

    fn send_command(&mut self) -> Command {
        self.sent += 1;
        let n = self.sent;
        Command::Send {
            account: "dev".into(),
            queue: self.queue.into(),
            message: NewMessage {
                message_group_id: self.fifo.then(|| format!("group-{}", n % GROUPS)),
                message_deduplication_id: self.fifo.then(|| format!("dedup-{n}")),
                trace_header: None,
                ..NewMessage::new(Uuid::from_u128(u128::from(n) + 1_000), "x".repeat(16))
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

    fn fill(&mut self, n: u64) {
        for _ in 0..n {
            let c = self.send_command();
            self.apply(c);
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

    /// Times `iters` sends in chunks, draining each chunk again untimed.
    fn time_sends(&mut self, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(CHUNK);
            let commands: Vec<Command> = (0..n).map(|_| self.send_command()).collect();
            let start = Instant::now();
            for command in commands {
                black_box(self.engine.apply(Entry {
                    now: self.now,
                    command,
                }));
            }
            total += start.elapsed();
            self.now += 1;
            for _ in 0..n {
                self.cycle();
            }
            left -= n;
        }
        total
    }

    /// Times `iters` receive+ack cycles in chunks, refilling each chunk again untimed.
    fn time_cycles(&mut self, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(CHUNK);
            let start = Instant::now();
            for _ in 0..n {
                assert!(self.cycle(), "queue ran dry");
            }
            total += start.elapsed();
            self.now += 1;
            self.fill(n);
            left -= n;
        }
        total
    }
}

fn queues() -> [(&'static str, &'static str); 2] {
    [("fifo_10k_groups", "bench.fifo"), ("standard", "bench")]
}

fn sends(c: &mut Criterion) {
    for (label, queue) in queues() {
        let mut group = c.benchmark_group(format!("send/{label}"));
        group.throughput(Throughput::Elements(1));
        for depth in DEPTHS {
            let mut f = Fixture::new(queue, depth);
            group.bench_function(BenchmarkId::from_parameter(depth), |b| {
                b.iter_custom(|iters| f.time_sends(iters))
            });
        }
        group.finish();
    }
}

fn receive_ack(c: &mut Criterion) {
    for (label, queue) in queues() {
        let mut group = c.benchmark_group(format!("receive_ack/{label}"));
        group.throughput(Throughput::Elements(1));
        for depth in DEPTHS {
            let mut f = Fixture::new(queue, depth);
            group.bench_function(BenchmarkId::from_parameter(depth), |b| {
                b.iter_custom(|iters| f.time_cycles(iters))
            });
        }
        group.finish();
    }
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
