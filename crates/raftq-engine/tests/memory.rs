//! Memory the engine holds per queued message, bodies excluded (they live in the store), measured
//! with a counting allocator: standard and FIFO queues of 200,000 messages, after the
//! deduplication window has passed so that only the message indexes remain.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use raftq_engine::{Command, Engine, Entry, NewMessage, QueueAttributes};
use uuid::Uuid;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MESSAGES: u64 = 200_000;
const BUDGET: f64 = 200.0;

/// Bytes held per message by a queue of `MESSAGES` messages.
fn bytes_per_message(queue: &str, groups: u64) -> f64 {
    let fifo = queue.ends_with(".fifo");
    let mut engine = Engine::new("local");
    let mut now = 1_700_000_000_000;
    let apply = |engine: &mut Engine, now: u64, command: Command| {
        engine
            .apply(Entry { now, command })
            .result
            .expect("applies");
    };
    apply(
        &mut engine,
        now,
        Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::from_u128(1),
            name: queue.into(),
            attributes: QueueAttributes::default(),
        },
    );
    let before = LIVE.load(Ordering::Relaxed);
    for n in 0..MESSAGES {
        let message = NewMessage {
            message_group_id: fifo.then(|| format!("group-{}", n % groups)),
            message_deduplication_id: fifo.then(|| format!("dedup-{n}")),
            trace_header: None,
            ..NewMessage::new(
                Uuid::from_u128(u128::from(n) + 10),
                "payload kept by the store",
            )
        };
        apply(
            &mut engine,
            now,
            Command::Send {
                account: "dev".into(),
                queue: queue.into(),
                message,
            },
        );
    }
    now += 10 * 60 * 1000;
    apply(&mut engine, now, Command::Tick);
    let held = LIVE.load(Ordering::Relaxed) - before;
    let stats = engine.stats("dev", queue, now).expect("stats");
    assert_eq!(stats.visible, MESSAGES, "every message is still queued");
    held as f64 / MESSAGES as f64
}

#[test]
fn index_overhead_per_queued_message_is_below_200_bytes() {
    let standard = bytes_per_message("standard", 1);
    let fifo = bytes_per_message("groups.fifo", 10_000);
    eprintln!("bytes per queued message: standard {standard:.1}, fifo (10k groups) {fifo:.1}");
    assert!(
        standard < BUDGET,
        "standard queue: {standard:.1} bytes per message"
    );
    assert!(fifo < BUDGET, "FIFO queue: {fifo:.1} bytes per message");
}
