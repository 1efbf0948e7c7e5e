//! The fair-queue rows: on one standard queue, quiet tenants each send at a low fixed rate while a
//! fixed pool of consumers works through the queue; in two of the three runs one noisy tenant
//! sends many times as much, more than the consumers can take, so a backlog builds. A consumer
//! holds one message at a time (leased) while it works on it, then acks it, as a worker pool on
//! a standard queue does. A message's time in queue runs from the start of its send (the stamp
//! in its body) to its receive, so it includes the send's own latency; every row's latency is
//! the quiet tenants' time in queue.
//!
//! - `fair/alone`: the quiet tenants without the noisy one, each message carrying its tenant as
//!   group ID;
//! - `fair/fair`: the same beside the noisy tenant;
//! - `fair/unfair`: the same without group IDs, so the queue has one tenant and delivers oldest
//!   first: a quiet message waits behind the noisy tenant's backlog.
//!
//! raftq serves the tenant with the fewest messages in flight first (`docs/semantics.md`), so a
//! quiet tenant's message goes ahead of the noisy tenant's backlog; the target is a quiet p99
//! beside the noisy tenant within 2× the p99 alone. Systems without fair queues get rows saying
//! so.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinSet;

use super::{join_all, lock, wait_for, Bench, Pace, ERROR_PAUSE, QUEUE_LEASE};
use crate::driver::{
    nanos_at, now_nanos, sender_body, since_stamp, Driver, Outgoing, QueueSpec, Received,
};
use crate::measure::{Latency, Measurement, Recorder, Usage, Window};

/// Tasks that carry out the paced sends of every tenant.
const SENDERS: usize = 16;
/// Messages a consumer takes at a time: it holds each one's lease while it works on it, so the
/// queue picks every message by the tenants' messages in flight at that moment.
const RECEIVE_MAX: usize = 1;
/// The fractional part of the golden ratio: adding it over and over spreads points evenly over
/// [0, 1) in an order that never repeats.
const GOLDEN_FRACTION: f64 = 0.618_033_988_749_895;

/// The shape of the fair-queue rows.
#[derive(Debug, Clone)]
pub struct FairSettings {
    /// Messages/s of each quiet tenant.
    pub quiet_rate: f64,
    /// How many times the quiet tenants' rate the noisy tenant sends.
    pub noisy_times: u32,
    pub quiet_tenants: u32,
    pub consumers: usize,
    /// How long a consumer works on a message before it acks it, on average (see [`work_time`]).
    pub work: Duration,
    /// The measured window of each row.
    pub seconds: Duration,
}

impl FairSettings {
    /// Messages/s the consumers could take if receive and ack cost nothing.
    fn capacity(&self) -> f64 {
        self.consumers as f64 / self.work.as_secs_f64()
    }

    /// The p99 of how long a message that arrives while every consumer is busy waits for the
    /// first of them to finish its message: the least a quiet message beside the noisy
    /// tenant's backlog can wait, whatever order the queue delivers in, before even its receive
    /// and the time of its send. Each consumer's work takes from half to one and a half times
    /// the mean, spread evenly (see [`work_time`]), so the work left of a busy consumer at a
    /// random moment is longer than `r` with probability `E[(W − r)⁺] / E[W]`; the first of
    /// `consumers` to finish does so after `r` with that probability to the power `consumers`.
    fn busy_wait_p99(&self) -> Duration {
        let mean = self.work.as_secs_f64();
        let (low, high) = (mean / 2.0, mean * 1.5);
        // E[(W − r)⁺] for W spread evenly over [low, high].
        let beyond = |r: f64| {
            if r <= low {
                mean - r
            } else if r >= high {
                0.0
            } else {
                (high - r).powi(2) / (2.0 * (high - low))
            }
        };
        let none_done = |r: f64| (beyond(r) / mean).powi(self.consumers as i32);
        let (mut below, mut above) = (0.0, high);
        for _ in 0..60 {
            let middle = (below + above) / 2.0;
            if none_done(middle) > 0.01 {
                below = middle;
            } else {
                above = middle;
            }
        }
        Duration::from_secs_f64(above)
    }
}

/// The three runs of the fair-queue rows, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Alone,
    Fair,
    Unfair,
}

const RUNS: [Run; 3] = [Run::Alone, Run::Fair, Run::Unfair];

impl Run {
    fn key(self) -> &'static str {
        match self {
            Run::Alone => "fair/alone",
            Run::Fair => "fair/fair",
            Run::Unfair => "fair/unfair",
        }
    }

    fn tenants(self, settings: &FairSettings) -> Tenants {
        Tenants {
            quiet: settings.quiet_tenants,
            noisy_times: (self != Run::Alone).then_some(settings.noisy_times),
        }
    }

    fn group_ids(self) -> bool {
        self != Run::Unfair
    }

    fn workload(self, s: &FairSettings) -> String {
        let quiet = format!(
            "fair queue: {} quiet tenants at {}/s each",
            s.quiet_tenants, s.quiet_rate
        );
        let beside = match self {
            Run::Alone => "alone".to_string(),
            Run::Fair => format!("beside one at {}×, group IDs", s.noisy_times),
            Run::Unfair => format!("beside one at {}×, no group IDs", s.noisy_times),
        };
        format!(
            "{quiet}, {beside} ({} consumers × {} ms a message on average); quiet tenants' \
             time in queue",
            s.consumers,
            s.work.as_millis()
        )
    }
}

/// Whose message it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Quiet,
    Noisy,
}

/// Who sends in a run: the quiet tenants, numbered from 0, then the noisy one when there is one.
#[derive(Debug, Clone, Copy)]
struct Tenants {
    quiet: u32,
    noisy_times: Option<u32>,
}

impl Tenants {
    fn class(self, sender: u32) -> Class {
        if sender < self.quiet {
            Class::Quiet
        } else {
            Class::Noisy
        }
    }

    /// One cycle of senders, taken in turn at the quiet rate times its length: each quiet tenant
    /// once, spread evenly, and the noisy tenant `noisy_times` times in between.
    fn cycle(self) -> Vec<u32> {
        let noisy = self.quiet;
        let len = self.quiet + self.noisy_times.unwrap_or(0);
        let mut cycle = vec![noisy; len as usize];
        for tenant in 0..self.quiet {
            cycle[(u64::from(tenant) * u64::from(len) / u64::from(self.quiet)) as usize] = tenant;
        }
        cycle
    }

    fn group(sender: u32) -> String {
        format!("tenant{sender}")
    }
}

/// The send times that count: those inside the measured window, in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy)]
struct Stamps {
    start: u64,
    end: u64,
}

impl Stamps {
    fn of(window: Window) -> Stamps {
        Stamps {
            start: nanos_at(window.start),
            end: nanos_at(window.end),
        }
    }

    fn contain(self, sent_nanos: u64) -> bool {
        (self.start..=self.end).contains(&sent_nanos)
    }
}

/// The quiet and the noisy tenants' times in queue, of the messages sent inside the window.
#[derive(Debug, Default)]
struct TimesInQueue {
    quiet: Recorder,
    noisy: Recorder,
}

impl TimesInQueue {
    /// Records a first delivery received at `received_nanos`, sent by `sender` at `sent_nanos`:
    /// the class it counted for, `None` when it was sent outside `stamps` or says not by whom.
    fn record(
        &mut self,
        tenants: Tenants,
        stamps: Stamps,
        (sender, sent_nanos): (Option<u32>, Option<u64>),
        received_nanos: u64,
    ) -> Option<Class> {
        let (sender, sent_nanos) = (sender?, sent_nanos?);
        if !stamps.contain(sent_nanos) {
            return None;
        }
        let class = tenants.class(sender);
        let recorder = match class {
            Class::Quiet => &mut self.quiet,
            Class::Noisy => &mut self.noisy,
        };
        let waited = Duration::from_nanos(received_nanos.saturating_sub(sent_nanos));
        recorder.record(1, waited);
        Some(class)
    }
}

/// How long a consumer works on its `nth` message: from half to one and a half times `mean`,
/// spread evenly (a golden-ratio sequence from `offset`, in [0, 1), one per consumer). With one
/// fixed time the busy consumers would run in lockstep, all asking for their next message at
/// once, and a message sent just after would wait a whole round whatever the queue's order.
fn work_time(mean: Duration, offset: f64, nth: u64) -> Duration {
    let spread = (offset + nth as f64 * GOLDEN_FRACTION).fract();
    mean.mul_f64(0.5 + spread)
}

/// How many times the quiet tenants' p99 alone their p99 in `row` is.
fn p99_ratio(alone: Option<Latency>, row: Option<Latency>) -> Option<f64> {
    let (alone, row) = (alone?.p99_ms, row?.p99_ms);
    (alone > 0.0).then(|| row / alone)
}

/// Counts of what a run sent and delivered, shared by its tasks.
#[derive(Default)]
struct Counts {
    /// The quiet tenants' sends confirmed whose send time is inside the window.
    quiet_sent: AtomicU64,
    /// First deliveries of the quiet tenants' messages sent inside the window.
    quiet_received: AtomicU64,
    /// Set once every counted quiet message was received: the consumers stop.
    stop: AtomicBool,
}

/// How long a consumer works on each of its messages in turn: [`work_time`]'s sequence from its
/// own offset.
struct WorkTimes {
    mean: Duration,
    offset: f64,
    worked_on: u64,
}

impl WorkTimes {
    /// The work times of consumer `consumer` of `settings.consumers`, their offsets spread evenly.
    fn of(settings: &FairSettings, consumer: usize) -> WorkTimes {
        WorkTimes {
            mean: settings.work,
            offset: consumer as f64 / settings.consumers as f64,
            worked_on: 0,
        }
    }

    /// How long to work on the next message.
    fn next(&mut self) -> Duration {
        let time = work_time(self.mean, self.offset, self.worked_on);
        self.worked_on += 1;
        time
    }
}

/// One run under way: what its consumers and senders share.
struct FairRun<D: Driver> {
    driver: Arc<D>,
    run: Run,
    tenants: Tenants,
    /// The senders' turns, taken in order round the cycle.
    cycle: Vec<u32>,
    turns: AtomicU64,
    window: Window,
    stamps: Stamps,
    counts: Counts,
    times: Mutex<TimesInQueue>,
}

impl<D: Driver> FairRun<D> {
    fn new(driver: Arc<D>, run: Run, settings: &FairSettings, window: Window) -> FairRun<D> {
        let tenants = run.tenants(settings);
        FairRun {
            driver,
            run,
            tenants,
            cycle: tenants.cycle(),
            turns: AtomicU64::new(0),
            window,
            stamps: Stamps::of(window),
            counts: Counts::default(),
            times: Mutex::new(TimesInQueue::default()),
        }
    }

    /// Messages/s of all tenants together: one cycle of turns at each quiet tenant's rate.
    fn arrival(&self, settings: &FairSettings) -> f64 {
        settings.quiet_rate * self.cycle.len() as f64
    }

    /// A consumer until the run stops it: the acks inside the window, and the errors.
    async fn consume(
        self: Arc<Self>,
        mut session: D::Session,
        mut work: WorkTimes,
    ) -> Result<Recorder> {
        let mut rec = Recorder::new();
        while !self.counts.stop.load(Ordering::Relaxed) {
            match self.take(&mut session, &mut work).await {
                Ok(acked) => rec.messages += acked,
                Err(e) => {
                    rec.error(&e);
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
        Ok(rec)
    }

    /// One receive: each message it delivered recorded, worked on, then acked; answers how many
    /// acks returned inside the window.
    async fn take(&self, session: &mut D::Session, work: &mut WorkTimes) -> Result<u64> {
        let mut acked = 0;
        for delivery in self.driver.receive(session, RECEIVE_MAX).await? {
            self.note_delivery(&delivery, now_nanos())?;
            tokio::time::sleep(work.next()).await;
            self.driver.ack(session, vec![delivery.receipt]).await?;
            if self.window.contains(Instant::now()) {
                acked += 1;
            }
        }
        Ok(acked)
    }

    /// Records the time in queue of a message received at `received_nanos` when this is its
    /// first delivery, and counts it when a quiet tenant sent it inside the window.
    fn note_delivery(&self, delivery: &Received<D::Receipt>, received_nanos: u64) -> Result<()> {
        if delivery.redelivered {
            return Ok(());
        }
        let sent = (delivery.sender, delivery.sent_nanos);
        let class = lock(&self.times)?.record(self.tenants, self.stamps, sent, received_nanos);
        if class == Some(Class::Quiet) {
            self.counts.quiet_received.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A sender until `pace` ends the sending: at each paced time, the message of the next
    /// turn, its latency counted when it was sent inside the window.
    async fn send(
        self: Arc<Self>,
        mut session: D::Session,
        pace: Arc<Pace>,
        size: usize,
    ) -> Result<Recorder> {
        let mut rec = Recorder::new();
        while pace.next(self.window).await.is_some() {
            let turn = self.turns.fetch_add(1, Ordering::Relaxed) as usize;
            let sender = self.cycle[turn % self.cycle.len()];
            let sent_nanos = now_nanos();
            let message = Outgoing {
                body: sender_body(sent_nanos, sender, size),
                group: self.run.group_ids().then(|| Tenants::group(sender)),
                dedup_id: None,
            };
            match self.driver.send(&mut session, vec![message]).await {
                Ok(()) if self.stamps.contain(sent_nanos) => {
                    rec.record(1, since_stamp(sent_nanos));
                    if self.tenants.class(sender) == Class::Quiet {
                        self.counts.quiet_sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(()) => {}
                Err(e) => {
                    rec.error(&e);
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
        Ok(rec)
    }
}

/// What a run's tasks tallied, for its row.
struct Tallies {
    /// The senders' latencies and errors.
    sent: Recorder,
    /// The consumers' acks inside the window and errors.
    delivered: Recorder,
    /// The tenants' times in queue.
    times: TimesInQueue,
    /// Messages left in the queue once the senders stopped.
    backlog: u64,
}

impl<D: Driver> Bench<D> {
    /// The three fair-queue rows; the rows beside the noisy tenant also give their quiet p99 as
    /// a multiple of the p99 alone.
    pub(super) async fn fair_rows(&self, settings: &FairSettings) -> Vec<Measurement> {
        let mut rows: Vec<Measurement> = Vec::new();
        for run in RUNS {
            let what = run.workload(settings);
            let row = if self.driver.supports_fair_queues() {
                self.fair(run, settings).await
            } else {
                let why = "no fair delivery across tenants on a standard queue";
                Ok(self.not_applicable(run.key(), &what, why))
            };
            let mut row = self.row(run.key().into(), what, row);
            let alone = rows.first().and_then(|alone| alone.latency);
            if let Some(ratio) = p99_ratio(alone, row.latency) {
                row.extra.insert("quiet_p99_vs_alone".into(), ratio);
            }
            rows.push(row);
        }
        rows
    }

    /// One run on a fresh queue, deleted afterwards whether the run succeeded or not.
    async fn fair(&self, run: Run, settings: &FairSettings) -> Result<Measurement> {
        let spec = self.queue("fair", false, QUEUE_LEASE).await?;
        let measured = self.fair_on(&spec, run, settings).await;
        self.drop_queue(&spec).await;
        measured
    }

    /// Paced senders and the consumers over the warm-up and the window; then the consumers go on
    /// until every quiet message sent inside the window was received, so that the last ones,
    /// which waited longest, count too.
    async fn fair_on(
        &self,
        spec: &QueueSpec,
        run: Run,
        settings: &FairSettings,
    ) -> Result<Measurement> {
        let node = self.home(spec).await?;
        let window = Window::after(self.settings.warmup, settings.seconds);
        let shared = Arc::new(FairRun::new(
            Arc::clone(&self.driver),
            run,
            settings,
            window,
        ));
        let usage = tokio::spawn(self.probe.clone().during(window));
        let mut consumers = JoinSet::new();
        for consumer in 0..settings.consumers {
            let session = self.driver.session(spec, node).await?;
            let work = WorkTimes::of(settings, consumer);
            consumers.spawn(Arc::clone(&shared).consume(session, work));
        }
        let (pace, dispatcher) = Pace::at_rate(shared.arrival(settings), window);
        let pace = Arc::new(pace);
        let mut senders = JoinSet::new();
        for _ in 0..SENDERS {
            let session = self.driver.session(spec, node).await?;
            senders.spawn(Arc::clone(&shared).send(session, Arc::clone(&pace), self.settings.size));
        }
        let sent = join_all(senders).await?;
        dispatcher.await?;
        let backlog = self.driver.depth(spec).await?;
        let counts = &shared.counts;
        let quiet_sent = counts.quiet_sent.load(Ordering::Relaxed);
        let waited = wait_for(
            &counts.quiet_received,
            quiet_sent,
            "the quiet tenants' messages",
        )
        .await;
        counts.stop.store(true, Ordering::Relaxed);
        if waited.is_err() {
            consumers.abort_all();
        }
        let delivered = join_all(consumers).await;
        waited?;
        let usage = usage.await?;
        let tallies = Tallies {
            sent,
            delivered: delivered?,
            times: std::mem::take(&mut *lock(&shared.times)?),
            backlog,
        };
        Ok(self.fair_row(&shared, settings, tallies, usage))
    }

    /// The row: the quiet tenants' time in queue, the acks inside the window, and the consumers'
    /// and the senders' errors; with the rates, the noisy tenant's p99 and, beside the noisy
    /// tenant, the floor of the quiet p99.
    fn fair_row(
        &self,
        shared: &FairRun<D>,
        settings: &FairSettings,
        Tallies {
            sent,
            delivered,
            times,
            backlog,
        }: Tallies,
        usage: Usage,
    ) -> Measurement {
        let mut rec = times.quiet.clone();
        rec.messages = delivered.messages;
        rec.errors = delivered.errors + sent.errors;
        rec.first_error = delivered.first_error.or_else(|| sent.first_error.clone());
        let seconds = shared.window.seconds();
        let mut m = self.measurement((settings.consumers, RECEIVE_MAX), seconds, &rec, usage);
        m.extra
            .insert("quiet_messages".into(), times.quiet.messages as f64);
        m.extra
            .insert("arrival_per_sec".into(), shared.arrival(settings));
        m.extra
            .insert("sends_per_sec".into(), sent.messages as f64 / seconds);
        if let Some(send) = sent.latency_summary() {
            m.extra.insert("send_p99_ms".into(), send.p99_ms);
        }
        m.extra
            .insert("capacity_per_sec".into(), settings.capacity());
        m.extra.insert("backlog_at_end".into(), backlog as f64);
        if shared.run != Run::Alone {
            let floor = settings.busy_wait_p99().as_secs_f64() * 1000.0;
            m.extra.insert("busy_wait_p99_ms".into(), floor);
        }
        if let Some(noisy) = times.noisy.latency_summary() {
            m.extra.insert("noisy_p99_ms".into(), noisy.p99_ms);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: FairSettings = FairSettings {
        quiet_rate: 2.0,
        noisy_times: 100,
        quiet_tenants: 9,
        consumers: 8,
        work: Duration::from_millis(50),
        seconds: Duration::from_secs(90),
    };

    #[test]
    fn a_cycle_holds_each_quiet_tenant_once_spread_among_the_noisy_turns() {
        let tenants = Run::Fair.tenants(&SETTINGS);
        let cycle = tenants.cycle();
        assert_eq!(cycle.len(), 109);
        let noisy = cycle.iter().filter(|s| tenants.class(**s) == Class::Noisy);
        assert!(noisy.clone().all(|s| *s == 9));
        assert_eq!(noisy.count(), 100);
        let (quiet, in_order): (Vec<usize>, Vec<u32>) = cycle
            .iter()
            .enumerate()
            .filter(|(_, s)| **s < 9)
            .map(|(i, s)| (i, *s))
            .unzip();
        assert_eq!(in_order, (0..9).collect::<Vec<_>>());
        // Evenly spread: consecutive quiet turns (round the cycle) are 12 or 13 apart.
        for (i, at) in quiet.iter().enumerate() {
            let next = quiet.get(i + 1).copied().unwrap_or(quiet[0] + cycle.len());
            assert!((12..=13).contains(&(next - at)), "{quiet:?}");
        }
    }

    #[test]
    fn alone_the_cycle_is_the_quiet_tenants_in_turn() {
        let tenants = Run::Alone.tenants(&SETTINGS);
        assert_eq!(tenants.cycle(), (0..9).collect::<Vec<u32>>());
        assert_eq!(Run::Unfair.tenants(&SETTINGS).cycle().len(), 109);
    }

    #[test]
    fn times_in_queue_are_split_by_tenant_class_and_count_only_sends_inside_the_window() {
        let tenants = Run::Fair.tenants(&SETTINGS);
        let stamps = Stamps {
            start: 1_000_000_000,
            end: 2_000_000_000,
        };
        let ms = 1_000_000;
        let mut times = TimesInQueue::default();
        // 99 quiet messages that waited 10 ms, one that waited 500 ms; noisy ones 2 s each.
        for i in 0..100u64 {
            let sent = stamps.start + i * ms;
            let waited = if i == 99 { 500 * ms } else { 10 * ms };
            let quiet = times.record(tenants, stamps, (Some(3), Some(sent)), sent + waited);
            assert_eq!(quiet, Some(Class::Quiet));
            let noisy = times.record(tenants, stamps, (Some(9), Some(sent)), sent + 2000 * ms);
            assert_eq!(noisy, Some(Class::Noisy));
        }
        // Sent before or after the window, or from a body that does not say: not counted.
        let outside = [
            (Some(3), Some(stamps.start - 1)),
            (Some(3), Some(stamps.end + 1)),
            (None, Some(stamps.start)),
            (Some(3), None),
        ];
        for sent in outside {
            assert_eq!(times.record(tenants, stamps, sent, stamps.end), None);
        }
        assert_eq!((times.quiet.messages, times.noisy.messages), (100, 100));
        let quiet = times.quiet.latency_summary().expect("quiet");
        assert!((quiet.p50_ms - 10.0).abs() < 0.1, "{quiet:?}");
        assert!((quiet.p99_ms - 10.0).abs() < 0.1, "{quiet:?}");
        assert!((quiet.max_ms - 500.0).abs() < 1.0, "{quiet:?}");
        let noisy = times.noisy.latency_summary().expect("noisy");
        assert!((noisy.p99_ms - 2000.0).abs() < 2.0, "{noisy:?}");
    }

    #[test]
    fn the_busy_wait_floor_is_the_p99_of_the_first_of_the_consumers_to_finish() {
        // Eight consumers, 25-75 ms a message: (1 − r/50)^8 = 0.01 at r = 50 × (1 − 0.01^⅛).
        let floor = SETTINGS.busy_wait_p99().as_secs_f64() * 1000.0;
        let expected = 50.0 * (1.0 - 0.01f64.powf(1.0 / 8.0));
        assert!((floor - expected).abs() < 0.01, "{floor} vs {expected}");
        // One consumer: the work left exceeds r with probability (75 − r)² / 5000.
        let one = FairSettings {
            consumers: 1,
            ..SETTINGS
        };
        let floor = one.busy_wait_p99().as_secs_f64() * 1000.0;
        let expected = 75.0 - (0.01f64 * 5000.0).sqrt();
        assert!((floor - expected).abs() < 0.01, "{floor} vs {expected}");
        // And by simulation: the first of eight to finish, at moments spread over a long run.
        let mut waits: Vec<f64> = (0..8u32)
            .map(|c| {
                let mut ends = Vec::new();
                let mut at = 0.0;
                for n in 0..20_000u64 {
                    at += work_time(SETTINGS.work, f64::from(c) / 8.0, n).as_secs_f64() * 1000.0;
                    ends.push(at);
                }
                ends
            })
            .fold(Vec::new(), |mut first, ends| {
                let horizon = 900_000.0;
                let samples = 20_000;
                for i in 0..samples {
                    let moment = horizon * (i as f64 + 0.5) / samples as f64;
                    let next = ends.get(ends.partition_point(|&end| end <= moment));
                    let wait = next.map_or(f64::MAX, |end| end - moment);
                    match first.get_mut(i) {
                        Some(w) if wait < *w => *w = wait,
                        Some(_) => {}
                        None => first.push(wait),
                    }
                }
                first
            });
        waits.sort_by(f64::total_cmp);
        let simulated = waits[waits.len() * 99 / 100];
        let floor = SETTINGS.busy_wait_p99().as_secs_f64() * 1000.0;
        assert!((simulated - floor).abs() < 1.5, "{simulated} vs {floor}");
    }

    #[test]
    fn work_times_spread_between_half_and_one_and_a_half_times_the_mean() {
        let mean = Duration::from_millis(50);
        for offset in [0.0, 0.375, 0.875] {
            let times: Vec<Duration> = (0..1000).map(|n| work_time(mean, offset, n)).collect();
            assert!(times.iter().all(|t| *t >= mean / 2 && *t < mean * 3 / 2));
            let average = times.iter().sum::<Duration>() / 1000;
            assert!(
                average.abs_diff(mean) < Duration::from_micros(500),
                "{average:?}"
            );
            // Spread, not bunched: each tenth of the range holds about a tenth of them.
            for tenth in 0..10u32 {
                let low = mean / 2 + mean * tenth / 10;
                let count = times
                    .iter()
                    .filter(|t| **t >= low && **t < low + mean / 10)
                    .count();
                assert!((90..=110).contains(&count), "{offset} {tenth}: {count}");
            }
        }
        // Consumers starting elsewhere in the sequence do not work in step.
        assert_ne!(work_time(mean, 0.0, 0), work_time(mean, 0.5, 0));
    }

    #[test]
    fn the_ratio_divides_by_the_p99_alone() {
        let latency = |p99_ms| Latency {
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms,
            p999_ms: p99_ms,
            max_ms: p99_ms,
        };
        assert_eq!(
            p99_ratio(Some(latency(10.0)), Some(latency(15.0))),
            Some(1.5)
        );
        assert_eq!(p99_ratio(Some(latency(0.0)), Some(latency(15.0))), None);
        assert_eq!(p99_ratio(None, Some(latency(15.0))), None);
        assert_eq!(p99_ratio(Some(latency(10.0)), None), None);
    }
}
