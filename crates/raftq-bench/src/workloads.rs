//! The workloads, written once against [`Driver`]: closed-loop and fixed-rate sends, send +
//! receive + ack end to end (closed loop, at a fixed rate, and FIFO), a backlog filled then drained, redelivery after
//! abandoned deliveries, redrive to a dead-letter queue, a fair queue's quiet tenants beside a
//! noisy one ([`fair`]), and the leader killed under load.

mod fair;

pub use fair::FairSettings;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::driver::{
    instant_of, nanos_at, now_nanos, since_stamp, stamp_body_at, Driver, Outgoing, QueueSpec,
    Received,
};
use crate::measure::{Measurement, Probe, Recorder, Usage, Window, INTENDED_PER_SEC};
use crate::timeline::Timeline;

/// Most messages a receive asks for (the largest raftq allows).
const RECEIVE_MAX: usize = 10;
/// Senders that fill a backlog, each sending batches of `FILL_BATCH`.
const FILL_TASKS: usize = 32;
const FILL_BATCH: usize = 10;
/// Drains of the near-empty baseline queue, of which the median counts.
const BASELINE_RUNS: usize = 3;
/// Consumers of a drain, a redelivery or a redrive run (the driver may allow fewer).
const DRAIN_CONSUMERS: usize = 32;
/// The lease of every queue. The redelivery and redrive runs hand their deliveries back
/// explicitly, so a message that comes back only when its lease runs out shows as a stall.
const QUEUE_LEASE: Duration = Duration::from_secs(30);
/// A phase that makes no progress for this long fails: longer than [`QUEUE_LEASE`], so that
/// messages whose delivery was lost in a failover (leased, never acked) come back first.
const STALL: Duration = Duration::from_secs(45);
/// Pause after an error before a task tries again, so that an outage is not a busy loop.
const ERROR_PAUSE: Duration = Duration::from_millis(20);
/// Senders of the failover run, and how long they run before the leader is killed.
const FAILOVER_SENDERS: usize = 16;
const FAILOVER_LEAD_IN: Duration = Duration::from_secs(3);
/// A failover send not answered within this counts as failed, so that a client that never hears
/// back from a killed node does not hold the run.
const FAILOVER_SEND_DEADLINE: Duration = Duration::from_secs(5);
/// How long a failover run may take beyond its window before it fails.
const FAILOVER_GRACE: Duration = Duration::from_secs(60);
/// Messages/s one consumer of a fixed-rate send+receive+ack run is given (each takes up to
/// [`RECEIVE_MAX`] a receive): 4 consumers at 1,000/s.
const PACED_PER_CONSUMER: f64 = 250.0;

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct Settings {
    pub warmup: Duration,
    pub seconds: Duration,
    pub size: usize,
    pub send_in_flight: Vec<usize>,
    pub batch_in_flight: Vec<usize>,
    /// Messages/s of the fixed-rate send rows.
    pub rates: Vec<f64>,
    pub rate_workers: usize,
    /// The fixed-rate send row at this rate keeps every send's times ([`Timeline`]).
    pub timeline_rate: Option<f64>,
    pub e2e_in_flight: Vec<usize>,
    /// Messages/s of the fixed-rate send+receive+ack rows.
    pub e2e_rates: Vec<f64>,
    pub fifo_groups: Vec<u64>,
    pub fifo_in_flight: usize,
    pub backlog: Option<u64>,
    pub backlog_baseline: u64,
    pub redeliver: Option<u64>,
    pub redrive: Option<u64>,
    pub fair: Option<FairSettings>,
    pub spread: Option<Spread>,
    pub failover: Option<Duration>,
}

/// The rows over many queues: sends, and send+receive+ack, each with `in_flight` messages in
/// flight spread over `queues` queues, every client talking to the node that leads its queue.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub queues: usize,
    pub in_flight: usize,
}

/// Runs workloads against one system and hands each row to `emit` as soon as it is measured.
pub struct Bench<D: Driver> {
    driver: Arc<D>,
    label: String,
    pids: Vec<u32>,
    probe: Probe,
    settings: Settings,
    run_id: String,
    queues: AtomicU64,
}

/// Makes the messages of a run: 1 KiB (by default) stamped bodies, and for FIFO queues a group
/// (round robin over `groups`) and a unique deduplication ID.
#[derive(Clone)]
struct Messages {
    size: usize,
    groups: Option<u64>,
    next: Arc<AtomicU64>,
}

impl Messages {
    fn new(size: usize, groups: Option<u64>) -> Messages {
        Messages {
            size,
            groups,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `n` messages stamped with the current time.
    fn batch(&self, n: usize) -> Vec<Outgoing> {
        (0..n).map(|_| self.stamped(now_nanos())).collect()
    }

    /// The next message, stamped with `sent_nanos` (see [`stamp_body_at`]).
    fn stamped(&self, sent_nanos: u64) -> Outgoing {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        Outgoing {
            body: stamp_body_at(sent_nanos, self.size),
            group: self.groups.map(|g| format!("g{}", i % g)),
            dedup_id: self.groups.map(|_| format!("m{i}")),
        }
    }
}

/// How sends are paced: back to back, or at intended times handed out by a dispatcher.
enum Pace {
    Closed,
    Rate(Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Instant>>>),
}

impl Pace {
    /// Sends at `rate` messages/s over `window` (warm-up included), and the dispatcher handing
    /// out their intended times.
    fn at_rate(rate: f64, window: Window) -> (Pace, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let pace = Pace::Rate(Arc::new(tokio::sync::Mutex::new(rx)));
        let from = Instant::now();
        let dispatcher = tokio::task::spawn_blocking(move || dispatch(tx, rate, from, window.end));
        (pace, dispatcher)
    }

    /// When the next send is meant to start: now while `window` is open (closed loop), or the
    /// next intended time handed out; `None` once sending is over.
    async fn next(&self, window: Window) -> Option<Instant> {
        match self {
            Pace::Closed => window.open().then(Instant::now),
            Pace::Rate(intended) => intended.lock().await.recv().await,
        }
    }

    /// Whether a send meant to start at `intended` and confirmed at `done` counts in `window`.
    /// Closed loop: both inside it. Fixed rate: meant to start inside it, however late it was
    /// confirmed; leaving out the sends that a stall at the window's end held up would leave out
    /// the very latencies a fixed-rate row is about (coordinated omission).
    fn counts(&self, window: Window, intended: Instant, done: Instant) -> bool {
        match self {
            Pace::Closed => window.contains(intended) && window.contains(done),
            Pace::Rate(_) => window.contains(intended),
        }
    }
}

/// A shared record of the last successful send, to find the longest stretch without one, and
/// the latencies of the sends on either side of the failover: those started before the kill,
/// and those started once that stretch was over (the survivors alone).
struct Gaps {
    last_ok: Instant,
    killed_at: Option<Instant>,
    longest: Duration,
    /// When the longest stretch after the kill ended.
    recovered_at: Option<Instant>,
    first_ok_after_kill: Option<Duration>,
    before_kill: Recorder,
    /// Each send started after the kill: its start and its latency.
    after_kill: Vec<(Instant, Duration)>,
}

impl Gaps {
    /// Nothing sent yet; the run started at `start`.
    fn new(start: Instant) -> Gaps {
        Gaps {
            last_ok: start,
            killed_at: None,
            longest: Duration::ZERO,
            recovered_at: None,
            first_ok_after_kill: None,
            before_kill: Recorder::new(),
            after_kill: Vec::new(),
        }
    }

    /// A send that started at `started` succeeded at `at`.
    fn ok(&mut self, started: Instant, at: Instant) {
        match self.killed_at {
            Some(killed) if started >= killed => {
                self.first_ok_after_kill.get_or_insert(at - killed);
                self.after_kill.push((started, at - started));
            }
            _ => self.before_kill.record(1, at - started),
        }
        if self.killed_at.is_some_and(|killed| at > killed) {
            let gap = at.saturating_duration_since(self.last_ok);
            if gap > self.longest {
                self.longest = gap;
                self.recovered_at = Some(at);
            }
        }
        self.last_ok = self.last_ok.max(at);
    }

    /// Closes the record at `end`, the window's end: a last success long before it is a stretch
    /// without one that never ended, so there was no recovery.
    fn finish(&mut self, end: Instant) {
        let open = end.saturating_duration_since(self.last_ok);
        if open > self.longest {
            self.longest = open;
            self.recovered_at = None;
        }
    }

    /// The sends started once the longest stretch without a success after the kill was over.
    fn after_recovery(&self) -> Recorder {
        let mut rec = Recorder::new();
        if let Some(recovered) = self.recovered_at {
            for (started, latency) in &self.after_kill {
                if *started >= recovered {
                    rec.record(1, *latency);
                }
            }
        }
        rec
    }

    /// The p50 and p99 of each side of the failover, as a row's notes.
    fn phases(&self) -> Vec<(String, f64)> {
        let after_recovery = self.after_recovery();
        quantile_notes(&[
            ("before_kill", &self.before_kill),
            ("after_recovery", &after_recovery),
        ])
    }
}

/// The p50 and p99 of each named part of a row that has samples, as the row's notes
/// (`p50_{name}_ms`, `p99_{name}_ms`).
fn quantile_notes(parts: &[(&str, &Recorder)]) -> Vec<(String, f64)> {
    let mut notes = Vec::new();
    for (name, rec) in parts {
        if let Some(l) = rec.latency_summary() {
            notes.push((format!("p50_{name}_ms"), l.p50_ms));
            notes.push((format!("p99_{name}_ms"), l.p99_ms));
        }
    }
    notes
}

/// When a phase's events began and ended, and how many came after the first.
#[derive(Debug, Default)]
struct Span {
    first: Option<Instant>,
    last: Option<Instant>,
    after_first: u64,
}

impl Span {
    /// Opens the span at `at` unless it is open already.
    fn begin(&mut self, at: Instant) {
        self.first.get_or_insert(at);
    }

    /// Counts `n` events at `at`; the first events open the span and are not counted.
    fn count(&mut self, n: u64, at: Instant) {
        if self.first.is_some() {
            self.after_first += n;
        } else {
            self.first = Some(at);
        }
        self.last = Some(at);
    }

    /// Seconds from the first event to the last, and the events counted in between.
    fn measured(&self) -> Result<(f64, u64)> {
        match (self.first, self.last) {
            (Some(first), Some(last)) => {
                Ok(((last - first).as_secs_f64().max(0.001), self.after_first))
            }
            _ => bail!("nothing happened"),
        }
    }
}

/// What a consumer does with each batch it receives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Acks it; each receive and ack is a latency sample.
    Ack,
    /// Abandons the messages delivered for the first time, opening the span, and acks those
    /// delivered again.
    Redeliver,
    /// Abandons it, opening the span.
    Abandon,
}

impl Round {
    /// Receives a batch on `session` and does the round's work with it; answers how many
    /// messages it finished (acked, or abandoned for [`Round::Abandon`]).
    async fn run<D: Driver>(
        self,
        driver: &D,
        session: &mut D::Session,
        span: &Mutex<Span>,
    ) -> Result<u64> {
        let delivered = driver.receive(session, RECEIVE_MAX).await?;
        match self {
            Round::Ack => ack_counted(driver, session, receipts(delivered), span).await,
            Round::Redeliver => {
                let (again, first): (Vec<_>, Vec<_>) =
                    delivered.into_iter().partition(|d| d.redelivered);
                if !first.is_empty() {
                    lock(span)?.begin(Instant::now());
                    driver.abandon(session, receipts(first)).await?;
                }
                ack_counted(driver, session, receipts(again), span).await
            }
            Round::Abandon => {
                let count = delivered.len() as u64;
                if count > 0 {
                    lock(span)?.begin(Instant::now());
                }
                driver.abandon(session, receipts(delivered)).await?;
                Ok(count)
            }
        }
    }
}

/// The receipts of `delivered`.
pub(crate) fn receipts<R>(delivered: Vec<Received<R>>) -> Vec<R> {
    delivered.into_iter().map(|d| d.receipt).collect()
}

/// Acknowledges `receipts` and counts them into `span`; returns how many there were.
async fn ack_counted<D: Driver>(
    driver: &D,
    session: &mut D::Session,
    receipts: Vec<D::Receipt>,
    span: &Mutex<Span>,
) -> Result<u64> {
    let count = receipts.len() as u64;
    driver.ack(session, receipts).await?;
    if count > 0 {
        lock(span)?.count(count, Instant::now());
    }
    Ok(count)
}

/// Waits until `done` reaches `target` (stopping the consumers if it stalls) and merges what
/// they recorded.
async fn settle(
    mut tasks: JoinSet<Result<Recorder>>,
    done: &AtomicU64,
    target: u64,
    what: &str,
) -> Result<Recorder> {
    let waited = wait_for(done, target, what).await;
    if waited.is_err() {
        tasks.abort_all();
    }
    let rec = join_all(tasks).await;
    waited?;
    rec
}

/// A record the workers share, locked.
fn lock<T>(shared: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    shared
        .lock()
        .map_err(|_| anyhow!("a worker panicked holding a shared record"))
}

async fn join_all(mut tasks: JoinSet<Result<Recorder>>) -> Result<Recorder> {
    let mut total = Recorder::new();
    while let Some(joined) = tasks.join_next().await {
        total.merge(&joined.context("a worker panicked")??);
    }
    Ok(total)
}

/// Waits until `done` reaches `target`, failing when it stops moving for [`STALL`].
async fn wait_for(done: &AtomicU64, target: u64, what: &str) -> Result<()> {
    let mut seen = done.load(Ordering::Relaxed);
    let mut moved = Instant::now();
    while seen < target {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = done.load(Ordering::Relaxed);
        if now != seen {
            seen = now;
            moved = Instant::now();
        } else if moved.elapsed() > STALL {
            bail!("{what} stalled at {seen} of {target}");
        }
    }
    Ok(())
}

impl<D: Driver> Bench<D> {
    pub fn new(driver: D, label: String, pids: Vec<u32>, settings: Settings) -> Result<Bench<D>> {
        let probe = Probe::new(pids.clone())?;
        let run_id = format!("b{}", std::process::id());
        Ok(Bench {
            driver: Arc::new(driver),
            label,
            pids,
            probe,
            settings,
            run_id,
            queues: AtomicU64::new(0),
        })
    }

    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// Runs every configured workload; a workload that fails becomes a row with its error.
    pub async fn run(&self, emit: &mut impl FnMut(Measurement) -> Result<()>) -> Result<()> {
        let s = self.settings.clone();
        for &n in &s.send_in_flight {
            let (key, what) = (format!("send/b1/c{n}"), format!("send, {n} in flight"));
            let row = self.send(1, n, 1, None).await;
            emit(self.row(key, what, row))?;
        }
        for &n in &s.batch_in_flight {
            let key = format!("send/b10/c{n}");
            let what = format!("send batches of 10, {n} in flight");
            let row = self.send(1, n, 10, None).await;
            emit(self.row(key, what, row))?;
        }
        for &n in &s.e2e_in_flight {
            let key = format!("e2e/c{n}");
            let what = format!("send+receive+ack, {n} in flight");
            let row = self.end_to_end(1, n, None).await;
            emit(self.row(key, what, row))?;
        }
        self.fixed_rate_rows(emit).await?;
        if let Some(spread) = s.spread {
            self.spread_rows(spread, emit).await?;
        }
        for &g in &s.fifo_groups {
            let n = s.fifo_in_flight;
            let key = format!("fifo/g{g}/c{n}");
            let what = format!("FIFO send+receive+ack, {g} groups, {n} in flight");
            let row = self.end_to_end(1, n, Some(g)).await;
            emit(self.row(key, what, row))?;
        }
        if let Some(n) = s.redeliver {
            let what = format!("redelivery of {n} abandoned deliveries");
            let row = self.redeliver(n).await;
            emit(self.row("redeliver".into(), what, row))?;
        }
        if let Some(n) = s.redrive {
            let what = format!("redrive of {n} messages to a dead-letter queue");
            let row = if self.driver.supports_dead_letter() {
                self.redrive(n).await
            } else {
                Ok(self.not_applicable("redrive", &what, "no dead-letter queues"))
            };
            emit(self.row("redrive".into(), what, row))?;
        }
        if let Some(fair) = &s.fair {
            for row in self.fair_rows(fair).await {
                emit(row)?;
            }
        }
        if let Some(n) = s.backlog {
            for row in self.backlog(n).await {
                emit(row)?;
            }
        }
        if let Some(after) = s.failover {
            let what = format!("leader killed under load ({FAILOVER_SENDERS} senders)");
            let limit = FAILOVER_LEAD_IN + after + FAILOVER_GRACE;
            let row = tokio::time::timeout(limit, self.failover(after))
                .await
                .unwrap_or_else(|_| Err(anyhow!("the run did not end within {limit:?}")));
            emit(self.row("failover".into(), what, row))?;
        }
        Ok(())
    }

    /// The fixed-rate rows: sends, then send+receive+ack, at each of their rates.
    async fn fixed_rate_rows(
        &self,
        emit: &mut impl FnMut(Measurement) -> Result<()>,
    ) -> Result<()> {
        let s = &self.settings;
        for &rate in &s.rates {
            let key = format!("rate/b1/r{rate}");
            let what = format!("send at a fixed {rate}/s (latency from intended time)");
            let row = self.send(1, s.rate_workers, 1, Some(rate)).await;
            emit(self.row(key, what, row))?;
        }
        for &rate in &s.e2e_rates {
            let key = format!("e2e/r{rate}");
            let what = format!("send+receive+ack at a fixed {rate}/s (latency from intended time)");
            let row = self.end_to_end_at_rate(rate).await;
            emit(self.row(key, what, row))?;
        }
        Ok(())
    }

    /// The rows over many queues: sends, then send+receive+ack.
    async fn spread_rows(
        &self,
        Spread { queues, in_flight }: Spread,
        emit: &mut impl FnMut(Measurement) -> Result<()>,
    ) -> Result<()> {
        let key = format!("spread/send/q{queues}/c{in_flight}");
        let what = format!("send over {queues} queues, {in_flight} in flight");
        let row = self.send(queues, in_flight, 1, None).await;
        emit(self.row(key, what, row))?;
        let key = format!("spread/e2e/q{queues}/c{in_flight}");
        let what = format!("send+receive+ack over {queues} queues, {in_flight} in flight");
        let row = self.end_to_end(queues, in_flight, None).await;
        emit(self.row(key, what, row))
    }

    /// The row a workload emits: its key and description, the body size, or its error.
    fn row(&self, key: String, workload: String, row: Result<Measurement>) -> Measurement {
        let mut m = match row {
            Ok(mut m) => {
                m.key = key;
                m.workload = workload;
                m
            }
            Err(e) => {
                let mut m = self.not_applicable(&key, &workload, "");
                m.note = Some(format!("failed: {e:#}"));
                m
            }
        };
        m.body_bytes = Some(self.settings.size);
        m
    }

    fn not_applicable(&self, key: &str, workload: &str, why: &str) -> Measurement {
        Measurement::not_applicable(&self.label, key.into(), workload.into(), why)
    }

    fn measurement(
        &self,
        shape: (usize, usize),
        seconds: f64,
        recorder: &Recorder,
        usage: Usage,
    ) -> Measurement {
        Measurement::new(
            &self.label,
            String::new(),
            String::new(),
            shape,
            seconds,
            recorder,
            usage,
        )
    }

    /// Creates a fresh queue for one workload.
    async fn queue(&self, what: &str, fifo: bool, lease: Duration) -> Result<QueueSpec> {
        let n = self.queues.fetch_add(1, Ordering::Relaxed);
        let spec = QueueSpec {
            name: format!("{}_{what}_{n}", self.run_id),
            fifo,
            lease,
            dead_letter: None,
        };
        self.driver.create_queue(&spec).await?;
        Ok(spec)
    }

    /// The node clients talk to: the queue's leader when the system says which it is.
    async fn home(&self, spec: &QueueSpec) -> Result<usize> {
        Ok(self.driver.leader(spec).await?.unwrap_or(0))
    }

    /// Deletes a workload's queue; a failure only leaves the queue behind.
    async fn drop_queue(&self, spec: &QueueSpec) {
        if let Err(e) = self.driver.delete_queue(spec).await {
            eprintln!("{}: could not delete {}: {e:#}", self.label, spec.name);
        }
    }

    /// `count` fresh queues for one workload, each with the node its clients talk to.
    async fn routes(&self, what: &str, fifo: bool, count: usize) -> Result<Vec<Route>> {
        if count == 0 {
            bail!("a workload needs at least one queue");
        }
        let mut routes = Vec::with_capacity(count);
        for _ in 0..count {
            let spec = self.queue(what, fifo, QUEUE_LEASE).await?;
            let node = self.home(&spec).await?;
            routes.push(Route { spec, node });
        }
        Ok(routes)
    }

    async fn drop_routes(&self, routes: &[Route]) {
        for route in routes {
            self.drop_queue(&route.spec).await;
        }
    }

    /// Notes in a row over several queues how many there were and how many of them each node
    /// served (`queues_via_node_N`, N counting from 1 in endpoint order).
    fn note_routes(&self, m: &mut Measurement, routes: &[Route]) {
        if routes.len() < 2 {
            return;
        }
        m.extra.insert("queues".into(), routes.len() as f64);
        for (i, count) in per_node(routes, self.pids.len()).into_iter().enumerate() {
            m.extra
                .insert(format!("queues_via_node_{}", i + 1), count as f64);
        }
    }

    /// Senders against `queues` fresh standard queues (worker i on queue i modulo `queues`):
    /// `workers` closed-loop tasks, or a dispatcher at `rate` messages/s whose latencies count
    /// from each message's intended send time; the fixed-rate row at the timeline rate keeps
    /// every send's times as well.
    async fn send(
        &self,
        queues: usize,
        workers: usize,
        batch: usize,
        rate: Option<f64>,
    ) -> Result<Measurement> {
        let routes = self.routes("send", false, queues).await?;
        let window = Window::after(self.settings.warmup, self.settings.seconds);
        let (pace, dispatcher) = match rate {
            Some(rate) => {
                let (pace, dispatcher) = Pace::at_rate(rate, window);
                (pace, Some(dispatcher))
            }
            None => (Pace::Closed, None),
        };
        let timed = rate.is_some() && rate == self.settings.timeline_rate;
        let senders = Arc::new(Senders {
            driver: Arc::clone(&self.driver),
            messages: Messages::new(self.settings.size, None),
            batch,
            pace,
            window,
            timeline: timed.then(|| Mutex::new(Timeline::starting(window.start))),
        });
        let usage = tokio::spawn(self.probe.clone().during(window));
        let mut tasks = JoinSet::new();
        for route in spread(&routes, workers) {
            let session = self.driver.session(&route.spec, route.node).await?;
            tasks.spawn(Arc::clone(&senders).run(session));
        }
        let total = join_all(tasks).await?;
        if let Some(d) = dispatcher {
            d.await?;
        }
        let usage = usage.await?;
        self.drop_routes(&routes).await;
        let mut m = self.measurement((workers, batch), window.seconds(), &total, usage);
        self.note_routes(&mut m, &routes);
        if let Some(rate) = rate {
            m.extra.insert(INTENDED_PER_SEC.into(), rate);
        }
        if let Some(timeline) = &senders.timeline {
            m.timeline = Some(std::mem::take(&mut *lock(timeline)?));
        }
        Ok(m)
    }

    /// Senders and consumers on `queues` queues at once (sender i on queue i modulo `queues`,
    /// as many consumers on each), closed over the whole path: at most `senders` messages are
    /// between the start of their send and the return of their ack. A message counts when its
    /// ack returns, with the latency from its send.
    async fn end_to_end(
        &self,
        queues: usize,
        senders: usize,
        groups: Option<u64>,
    ) -> Result<Measurement> {
        let routes = self.routes("e2e", groups.is_some(), queues).await?;
        let consumers = (senders / 8).clamp(1, DRAIN_CONSUMERS);
        let window = Window::after(self.settings.warmup, self.settings.seconds);
        let messages = Messages::new(self.settings.size, groups);
        let shared = EndToEnd::new(&self.driver, window, messages, Pace::Closed, Some(senders));
        self.run_end_to_end(&routes, &Arc::new(shared), (senders, consumers))
            .await
    }

    /// Senders at a fixed `rate` and consumers on one queue: each message carries the time it
    /// was meant to be sent, and counts when its ack returns, with the latency from that time.
    /// After the window the consumers go on until every message meant to be sent inside it
    /// was acked, so that those a stall at the window's end held up count too.
    async fn end_to_end_at_rate(&self, rate: f64) -> Result<Measurement> {
        let routes = self.routes("e2erate", false, 1).await?;
        let consumers = ((rate / PACED_PER_CONSUMER).ceil() as usize).clamp(1, DRAIN_CONSUMERS);
        let window = Window::after(self.settings.warmup, self.settings.seconds);
        let (pace, dispatcher) = Pace::at_rate(rate, window);
        let messages = Messages::new(self.settings.size, None);
        let shared = EndToEnd::new(&self.driver, window, messages, pace, None);
        let mut m = self
            .run_end_to_end(
                &routes,
                &Arc::new(shared),
                (self.settings.rate_workers, consumers),
            )
            .await?;
        dispatcher.await?;
        m.extra.insert(INTENDED_PER_SEC.into(), rate);
        Ok(m)
    }

    /// Runs `senders` of `shared` spread over `routes`, and on each route its share of
    /// `consumers` (as many as the driver allows), until the senders are done and, at a fixed
    /// rate, every message they sent that counts was acked.
    async fn run_end_to_end(
        &self,
        routes: &[Route],
        shared: &Arc<EndToEnd<D>>,
        (senders, consumers): (usize, usize),
    ) -> Result<Measurement> {
        let window = shared.window;
        let usage = tokio::spawn(self.probe.clone().during(window));
        let mut send_tasks = JoinSet::new();
        for route in spread(routes, senders) {
            let session = self.driver.session(&route.spec, route.node).await?;
            send_tasks.spawn(Arc::clone(shared).send(session));
        }
        let mut receive_tasks = JoinSet::new();
        let per_route = consumers.div_ceil(routes.len().max(1));
        for route in routes {
            for _ in 0..self.driver.consumers(&route.spec, per_route) {
                let session = self.driver.session(&route.spec, route.node).await?;
                receive_tasks.spawn(Arc::clone(shared).consume(session));
            }
        }
        let consumers = receive_tasks.len();
        let mut total = join_all(send_tasks).await?;
        let sent = shared.sent.load(Ordering::Relaxed);
        let waited = match shared.pace {
            Pace::Closed => Ok(()),
            Pace::Rate(_) => wait_for(&shared.acked, sent, "acking the messages sent").await,
        };
        shared.stop.store(true, Ordering::Relaxed);
        if waited.is_err() {
            receive_tasks.abort_all();
        }
        let received = join_all(receive_tasks).await;
        waited?;
        total.merge(&received?);
        let usage = usage.await?;
        self.drop_routes(routes).await;
        let seconds = window.seconds();
        let mut m = self.measurement((senders, 1), seconds, &total, usage);
        m.extra
            .insert("sends_per_sec".into(), sent as f64 / seconds);
        m.extra.insert("consumers".into(), consumers as f64);
        m.extra.extend(lock(&shared.stages)?.notes());
        self.note_routes(&mut m, routes);
        Ok(m)
    }

    /// Sends `n` messages in batches of [`FILL_BATCH`] from [`FILL_TASKS`] senders; returns the
    /// seconds it took.
    async fn fill(&self, spec: &QueueSpec, node: usize, n: u64) -> Result<f64> {
        let start = Instant::now();
        let claimed = Arc::new(AtomicU64::new(0));
        let messages = Messages::new(self.settings.size, None);
        let mut tasks = JoinSet::new();
        for _ in 0..FILL_TASKS {
            let mut session = self.driver.session(spec, node).await?;
            let (driver, messages, claimed) = (
                Arc::clone(&self.driver),
                messages.clone(),
                Arc::clone(&claimed),
            );
            tasks.spawn(async move {
                let mut rec = Recorder::new();
                loop {
                    let first = claimed.fetch_add(FILL_BATCH as u64, Ordering::Relaxed);
                    if first >= n {
                        break;
                    }
                    let count = (n - first).min(FILL_BATCH as u64);
                    let batch = messages.batch(usize::try_from(count)?);
                    // A fill must be complete: retry a failed batch until it goes through.
                    let mut failures = 0;
                    while let Err(e) = driver.send(&mut session, batch.clone()).await {
                        failures += 1;
                        if failures > 50 {
                            return Err(e.context("filling the queue"));
                        }
                        tokio::time::sleep(ERROR_PAUSE).await;
                    }
                    rec.messages += count;
                }
                Ok(rec)
            });
        }
        join_all(tasks).await?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Starts as many consumers on `spec` as the driver allows (up to [`DRAIN_CONSUMERS`]),
    /// each repeating `round` until `done` reaches `n`; what a round finished is added to
    /// `done`, and an error is recorded and followed by a short pause. Answers the tasks and the
    /// span the rounds count into.
    async fn consumers(
        &self,
        spec: &QueueSpec,
        node: usize,
        (done, n): (&Arc<AtomicU64>, u64),
        round: Round,
    ) -> Result<(JoinSet<Result<Recorder>>, Arc<Mutex<Span>>)> {
        let span = Arc::new(Mutex::new(Span::default()));
        let mut tasks = JoinSet::new();
        for _ in 0..self.driver.consumers(spec, DRAIN_CONSUMERS) {
            let mut session = self.driver.session(spec, node).await?;
            let (driver, done, span) = (
                Arc::clone(&self.driver),
                Arc::clone(done),
                Arc::clone(&span),
            );
            tasks.spawn(async move {
                let mut rec = Recorder::new();
                while done.load(Ordering::Relaxed) < n {
                    let t0 = Instant::now();
                    match round.run(&*driver, &mut session, &span).await {
                        Ok(0) => {}
                        Ok(count) => {
                            done.fetch_add(count, Ordering::Relaxed);
                            match round {
                                Round::Ack => rec.record(count, t0.elapsed()),
                                Round::Redeliver | Round::Abandon => rec.messages += count,
                            }
                        }
                        Err(e) => {
                            rec.error(&e);
                            tokio::time::sleep(ERROR_PAUSE).await;
                        }
                    }
                }
                Ok(rec)
            });
        }
        Ok((tasks, span))
    }

    /// Consumers that receive and ack until `n` messages were acked; each receive + ack round
    /// trip is one latency sample. The rate counts from the first ack (after the consumers
    /// set up) to the last.
    async fn drain(&self, spec: &QueueSpec, node: usize, n: u64) -> Result<(Recorder, Span)> {
        let done = Arc::new(AtomicU64::new(0));
        let (tasks, span) = self.consumers(spec, node, (&done, n), Round::Ack).await?;
        let total = settle(tasks, &done, n, "draining").await;
        let span = std::mem::take(&mut *lock(&span)?);
        Ok((total?, span))
    }

    /// A queue of `n` messages drained, against the same with the baseline size: how much
    /// a deep queue slows receiving down. A baseline drain lasts about a second, so it is run
    /// [`BASELINE_RUNS`] times and the row is the run of the median rate.
    async fn backlog(&self, n: u64) -> Vec<Measurement> {
        let size = self.settings.backlog_baseline;
        let what = format!("drain a backlog of {size} (receive+ack, 32 consumers)");
        let baseline = self.median_drain(size).await;
        let mut rows = vec![self.row("drain/baseline".into(), what, baseline)];
        let what = format!("drain a backlog of {n} (receive+ack, 32 consumers)");
        let backlog = self.drain_row(n).await;
        rows.push(self.row("drain/backlog".into(), what, backlog));
        rows
    }

    /// [`BASELINE_RUNS`] drains of `n`: the one of the median rate, with every run's rate.
    async fn median_drain(&self, n: u64) -> Result<Measurement> {
        let mut runs = Vec::new();
        for _ in 0..BASELINE_RUNS {
            runs.push(self.drain_row(n).await?);
        }
        let rates: Vec<f64> = runs.iter().map(|m| m.per_sec).collect();
        runs.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
        let mut median = runs.swap_remove(BASELINE_RUNS / 2);
        for (i, rate) in rates.into_iter().enumerate() {
            median.extra.insert(format!("run{}_per_sec", i + 1), rate);
        }
        Ok(median)
    }

    async fn drain_row(&self, n: u64) -> Result<Measurement> {
        let spec = self.queue("drain", false, QUEUE_LEASE).await?;
        let node = self.home(&spec).await?;
        let fill_seconds = self.fill(&spec, node, n).await?;
        let before = self.probe.sample();
        let (rec, span) = self.drain(&spec, node, n).await?;
        let usage = self.probe.since(&before);
        self.drop_queue(&spec).await;
        let (seconds, counted) = span.measured()?;
        let mut m = self.measurement((DRAIN_CONSUMERS, RECEIVE_MAX), seconds, &rec, usage);
        // The acks of the first batch opened the span: the rate is that of the ones after.
        m.per_sec = counted as f64 / seconds;
        m.extra
            .insert("fill_per_sec".into(), n as f64 / fill_seconds);
        Ok(m)
    }

    /// `n` messages each received once and abandoned (handed back by the system's explicit
    /// abandonment: a lease released, a nak), then received again and acked. The time runs from
    /// the first abandonment to the last ack of a second delivery.
    async fn redeliver(&self, n: u64) -> Result<Measurement> {
        let spec = self.queue("redeliver", false, QUEUE_LEASE).await?;
        let node = self.home(&spec).await?;
        self.fill(&spec, node, n).await?;
        let before = self.probe.sample();
        let redelivered = Arc::new(AtomicU64::new(0));
        let (tasks, span) = self
            .consumers(&spec, node, (&redelivered, n), Round::Redeliver)
            .await?;
        let rec = settle(tasks, &redelivered, n, "redelivery").await?;
        let usage = self.probe.since(&before);
        self.drop_queue(&spec).await;
        let (seconds, _) = lock(&span)?.measured()?;
        Ok(self.measurement((DRAIN_CONSUMERS, RECEIVE_MAX), seconds, &rec, usage))
    }

    /// `n` messages each received once and abandoned on a queue whose dead-letter queue takes
    /// them after that one delivery. The time runs from the first abandonment until all `n`
    /// are in the dead-letter queue.
    async fn redrive(&self, n: u64) -> Result<Measurement> {
        let dlq = self.queue("dlq", false, QUEUE_LEASE).await?;
        let mut spec = QueueSpec::standard(format!(
            "{}_redrive_{}",
            self.run_id,
            self.queues.fetch_add(1, Ordering::Relaxed)
        ));
        spec.dead_letter = Some(dlq.name.clone());
        self.driver.create_queue(&spec).await?;
        let node = self.home(&spec).await?;
        self.fill(&spec, node, n).await?;
        let before = self.probe.sample();
        let abandoned = Arc::new(AtomicU64::new(0));
        let (mut tasks, span) = self
            .consumers(&spec, node, (&abandoned, n), Round::Abandon)
            .await?;
        let mut last = (0, Instant::now());
        let outcome = loop {
            let depth = self.driver.depth(&dlq).await?;
            let now = Instant::now();
            if depth >= n {
                lock(&span)?.count(n, now);
                break Ok(());
            }
            if depth != last.0 {
                last = (depth, now);
            } else if now - last.1 > STALL {
                break Err(anyhow!("redrive stalled at {depth} of {n}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if outcome.is_err() {
            tasks.abort_all();
        }
        let rec = join_all(tasks).await;
        outcome?;
        let mut rec = rec?;
        let usage = self.probe.since(&before);
        self.drop_queue(&spec).await;
        self.drop_queue(&dlq).await;
        let (seconds, _) = lock(&span)?.measured()?;
        rec.messages = n;
        Ok(self.measurement((DRAIN_CONSUMERS, RECEIVE_MAX), seconds, &rec, usage))
    }

    /// Senders through the nodes that are not the queue's leader; the leader's process is
    /// killed after [`FAILOVER_LEAD_IN`], and the longest stretch without a successful send is
    /// the unavailability window. Leaves the system with one node down: run it last.
    async fn failover(&self, after: Duration) -> Result<Measurement> {
        let spec = self.queue("failover", false, QUEUE_LEASE).await?;
        let Some(leader) = self.driver.leader(&spec).await? else {
            return Ok(self.not_applicable("", "", "the system does not tell the leader"));
        };
        let pid = *self
            .pids
            .get(leader)
            .ok_or_else(|| anyhow!("no pid for node {leader}"))?;
        let survivors: Vec<usize> = (0..self.pids.len()).filter(|i| *i != leader).collect();
        if survivors.is_empty() {
            bail!("a single node has no failover");
        }
        let start = Instant::now();
        let window = Window {
            start,
            end: start + FAILOVER_LEAD_IN + after,
        };
        let gaps = Arc::new(Mutex::new(Gaps::new(start)));
        let messages = Messages::new(self.settings.size, None);
        let mut tasks = JoinSet::new();
        for i in 0..FAILOVER_SENDERS {
            let session = self
                .driver
                .session(&spec, survivors[i % survivors.len()])
                .await?;
            tasks.spawn(send_through_failover(
                Arc::clone(&self.driver),
                session,
                messages.clone(),
                window,
                Arc::clone(&gaps),
            ));
        }
        tokio::time::sleep(FAILOVER_LEAD_IN).await;
        let before = self.probe.sample();
        let killed_at = Instant::now();
        if let Ok(mut g) = gaps.lock() {
            g.killed_at = Some(killed_at);
        }
        kill(pid)?;
        let rec = join_all(tasks).await?;
        let usage = self.probe.since(&before);
        let mut g = gaps.lock().map_err(|_| anyhow!("poisoned"))?;
        g.finish(window.end);
        let mut m = self.measurement((FAILOVER_SENDERS, 1), window.seconds(), &rec, usage);
        m.extra
            .insert("unavailable_ms".into(), g.longest.as_secs_f64() * 1000.0);
        if let Some(first) = g.first_ok_after_kill {
            m.extra.insert(
                "first_ok_after_kill_ms".into(),
                first.as_secs_f64() * 1000.0,
            );
        }
        m.extra.insert("killed_node".into(), leader as f64);
        m.extra.extend(g.phases());
        Ok(m)
    }
}

/// A queue of a workload and the node (index in endpoint order) its clients talk to.
struct Route {
    spec: QueueSpec,
    node: usize,
}

/// The item each of `tasks` tasks works on: task i on item i modulo their number, so that the
/// items' shares differ by one task at most.
fn spread<T>(items: &[T], tasks: usize) -> impl Iterator<Item = &T> {
    items.iter().cycle().take(tasks)
}

/// How many of `routes` each of `nodes` nodes serves (a route's node beyond them counts for
/// none).
fn per_node(routes: &[Route], nodes: usize) -> Vec<usize> {
    let mut counts = vec![0; nodes];
    for route in routes {
        if let Some(count) = counts.get_mut(route.node) {
            *count += 1;
        }
    }
    counts
}

/// The senders of one send row: what their tasks share.
struct Senders<D: Driver> {
    driver: Arc<D>,
    messages: Messages,
    batch: usize,
    pace: Pace,
    window: Window,
    /// Every counted send's times, in the fixed-rate row at the timeline rate.
    timeline: Option<Mutex<Timeline>>,
}

impl<D: Driver> Senders<D> {
    /// A sender until its pace ends: each counted send is a latency sample from its intended
    /// time (closed loop: its start).
    async fn run(self: Arc<Self>, mut session: D::Session) -> Result<Recorder> {
        let mut rec = Recorder::new();
        while let Some(intended) = self.pace.next(self.window).await {
            let started = Instant::now();
            let batch = self.messages.batch(self.batch);
            let result = self.driver.send(&mut session, batch).await;
            let done = Instant::now();
            let counted = self.pace.counts(self.window, intended, done);
            match result {
                Ok(()) if counted => {
                    rec.record(self.batch as u64, done - intended);
                    if let Some(timeline) = &self.timeline {
                        lock(timeline)?.push(self.window.start, [intended, started, done]);
                    }
                }
                Ok(()) => {}
                Err(e) => {
                    if counted {
                        rec.error(&e);
                    }
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
        Ok(rec)
    }
}

/// An end-to-end run under way: what its senders and consumers share.
struct EndToEnd<D: Driver> {
    driver: Arc<D>,
    window: Window,
    messages: Messages,
    pace: Pace,
    /// Closed loop: one permit per message in flight, taken by its send, given back by its ack.
    in_flight: Option<Semaphore>,
    /// Sends that count (see [`Pace::counts`]).
    sent: AtomicU64,
    /// Fixed rate: acks of messages meant to be sent inside the window.
    acked: AtomicU64,
    /// Fixed rate: set once the consumers may stop.
    stop: AtomicBool,
    /// Where the counted messages' time went.
    stages: Mutex<Stages>,
}

/// Where an end-to-end run's counted messages spent their time: from the start of the send until
/// a receive returned the message, then the ack's round trip.
#[derive(Default)]
struct Stages {
    until_received: Recorder,
    ack: Recorder,
}

impl Stages {
    /// The p50 and p99 of each stage, as a row's notes.
    fn notes(&self) -> Vec<(String, f64)> {
        quantile_notes(&[("until_received", &self.until_received), ("ack", &self.ack)])
    }
}

impl<D: Driver> EndToEnd<D> {
    /// `messages` paced by `pace`; closed loop with `in_flight` messages at most.
    fn new(
        driver: &Arc<D>,
        window: Window,
        messages: Messages,
        pace: Pace,
        in_flight: Option<usize>,
    ) -> Self {
        EndToEnd {
            driver: Arc::clone(driver),
            window,
            messages,
            pace,
            in_flight: in_flight.map(Semaphore::new),
            sent: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            stages: Mutex::new(Stages::default()),
        }
    }

    /// When the next send is meant to start: closed loop, once a message in flight was acked;
    /// `None` once sending is over.
    async fn next(&self) -> Option<Instant> {
        if let Some(in_flight) = &self.in_flight {
            tokio::select! {
                permit = in_flight.acquire() => permit.ok()?.forget(),
                () = tokio::time::sleep_until(self.window.end.into()) => return None,
            }
        }
        self.pace.next(self.window).await
    }

    /// A sender until its pace ends; each message is stamped with its intended time (closed
    /// loop: its start).
    async fn send(self: Arc<Self>, mut session: D::Session) -> Result<Recorder> {
        let mut rec = Recorder::new();
        while let Some(intended) = self.next().await {
            let message = self.messages.stamped(nanos_at(intended));
            match self.driver.send(&mut session, vec![message]).await {
                Ok(()) if self.pace.counts(self.window, intended, Instant::now()) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                }
                Ok(()) => {}
                Err(e) => {
                    if let Some(in_flight) = &self.in_flight {
                        in_flight.add_permits(1);
                    }
                    rec.error(&e);
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
        Ok(rec)
    }

    /// Whether an ack returned at `now` of a message stamped `sent_nanos` counts: closed loop,
    /// an ack inside the window; fixed rate, a message meant to be sent inside it.
    fn counts(&self, sent_nanos: u64, now: Instant) -> bool {
        match self.pace {
            Pace::Closed => self.window.contains(now),
            Pace::Rate(_) => self.window.contains(instant_of(sent_nanos)),
        }
    }

    /// Whether the consumers are done: closed loop, once the window closed; fixed rate, once
    /// told to stop.
    fn over(&self) -> bool {
        match self.pace {
            Pace::Closed => !self.window.open(),
            Pace::Rate(_) => self.stop.load(Ordering::Relaxed),
        }
    }

    /// A consumer until the run is over: each message acked that counts is a latency sample
    /// from its stamp.
    async fn consume(self: Arc<Self>, mut session: D::Session) -> Result<Recorder> {
        let mut rec = Recorder::new();
        while !self.over() {
            match self.take(&mut session).await {
                Ok((stamps, received_at)) => {
                    let now = Instant::now();
                    let mut stages = lock(&self.stages)?;
                    for stamp in stamps.into_iter().flatten() {
                        if self.counts(stamp, now) {
                            rec.record(1, since_stamp(stamp));
                            let sent = instant_of(stamp);
                            let until_received = received_at.saturating_duration_since(sent);
                            stages.until_received.record(1, until_received);
                            stages.ack.record(1, now - received_at);
                            self.acked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(e) => {
                    rec.error(&e);
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
        Ok(rec)
    }

    /// One receive, its messages acked and their permits given back; answers their send
    /// stamps and when the receive returned them.
    async fn take(&self, session: &mut D::Session) -> Result<(Vec<Option<u64>>, Instant)> {
        let delivered = self.driver.receive(session, RECEIVE_MAX).await?;
        let received_at = Instant::now();
        let stamps: Vec<Option<u64>> = delivered.iter().map(|d| d.sent_nanos).collect();
        let receipts = delivered.into_iter().map(|d| d.receipt).collect();
        self.driver.ack(session, receipts).await?;
        if let Some(in_flight) = &self.in_flight {
            in_flight.add_permits(stamps.len());
        }
        Ok((stamps, received_at))
    }
}

/// A failover sender until `window` closes: one message at a time, a send not answered within
/// [`FAILOVER_SEND_DEADLINE`] failed, each success noted in `gaps`.
async fn send_through_failover<D: Driver>(
    driver: Arc<D>,
    mut session: D::Session,
    messages: Messages,
    window: Window,
    gaps: Arc<Mutex<Gaps>>,
) -> Result<Recorder> {
    let mut rec = Recorder::new();
    while window.open() {
        let t0 = Instant::now();
        let sent = driver.send(&mut session, messages.batch(1));
        let sent = tokio::time::timeout(FAILOVER_SEND_DEADLINE, sent)
            .await
            .unwrap_or_else(|_| Err(anyhow!("no answer within {FAILOVER_SEND_DEADLINE:?}")));
        match sent {
            Ok(()) => {
                let done = Instant::now();
                rec.record(1, done - t0);
                if let Ok(mut g) = gaps.lock() {
                    g.ok(t0, done);
                }
            }
            Err(e) => {
                rec.error(&e);
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    Ok(rec)
}

/// Kills process `pid` at once (`SIGKILL`).
fn kill(pid: u32) -> Result<()> {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -KILL {pid} failed");
    }
    Ok(())
}

/// Hands out the intended send times of a fixed rate from `from` (the run's start, so that a
/// thread that starts late hands the times it missed out at once, as late sends) until
/// `until`, each at its time, then closes the channel. It runs on a thread of its own and
/// sleeps until each time with the OS's timer (tens of microseconds late), not the runtime's,
/// which rounds every sleep up to the next millisecond: that lateness would count in every
/// send's latency, and the runtime's threads, busy with the sends, would add their own.
fn dispatch(tx: mpsc::UnboundedSender<Instant>, rate: f64, from: Instant, until: Instant) {
    for issued in 0u64.. {
        let at = from + Duration::from_secs_f64(issued as f64 / rate);
        if at >= until {
            return;
        }
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        if tx.send(at).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use super::*;
    use crate::driver::{read_stamp, SystemNotes};

    /// An in-memory queue whose sends all wait while a stall is under way: a send that starts
    /// inside `stall` is confirmed at its end, as when a server stops for a moment.
    struct Stalling {
        queue: Mutex<VecDeque<Outgoing>>,
        stall: Option<(Instant, Instant)>,
    }

    impl Driver for Stalling {
        type Session = ();
        type Receipt = ();

        fn notes(&self) -> SystemNotes {
            SystemNotes {
                durability: "memory".into(),
                syncs_before_ack: false,
                fifo: "none".into(),
                redelivery: "none".into(),
                dead_letter: "none".into(),
            }
        }

        async fn create_queue(&self, _: &QueueSpec) -> Result<()> {
            Ok(())
        }

        async fn delete_queue(&self, _: &QueueSpec) -> Result<()> {
            Ok(())
        }

        async fn leader(&self, _: &QueueSpec) -> Result<Option<usize>> {
            Ok(None)
        }

        async fn session(&self, _: &QueueSpec, _: usize) -> Result<()> {
            Ok(())
        }

        async fn send(&self, _: &mut (), messages: Vec<Outgoing>) -> Result<()> {
            if let Some((from, until)) = self.stall {
                if (from..until).contains(&Instant::now()) {
                    tokio::time::sleep_until(until.into()).await;
                }
            }
            lock(&self.queue)?.extend(messages);
            Ok(())
        }

        async fn receive(&self, _: &mut (), max: usize) -> Result<Vec<Received<()>>> {
            let taken: Vec<Outgoing> = {
                let mut queue = lock(&self.queue)?;
                let n = queue.len().min(max);
                queue.drain(..n).collect()
            };
            if taken.is_empty() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok(taken
                .into_iter()
                .map(|m| Received {
                    sent_nanos: read_stamp(m.body.as_bytes()),
                    sender: None,
                    redelivered: false,
                    receipt: (),
                })
                .collect())
        }

        async fn ack(&self, _: &mut (), _: Vec<()>) -> Result<()> {
            Ok(())
        }

        async fn abandon(&self, _: &mut (), _: Vec<()>) -> Result<()> {
            Ok(())
        }

        async fn depth(&self, _: &QueueSpec) -> Result<u64> {
            Ok(lock(&self.queue)?.len() as u64)
        }
    }

    fn route(node: usize) -> Route {
        Route {
            spec: QueueSpec::standard(format!("q{node}")),
            node,
        }
    }

    #[test]
    fn tasks_go_round_the_queues_so_that_shares_differ_by_one_at_most() {
        let queues = [0, 1, 2];
        let given: Vec<i32> = spread(&queues, 7).copied().collect();
        assert_eq!(given, [0, 1, 2, 0, 1, 2, 0]);
        let many: Vec<usize> = (0..18).collect();
        let mut shares = [0; 18];
        for q in spread(&many, 256) {
            shares[*q] += 1;
        }
        assert_eq!(shares.iter().sum::<usize>(), 256);
        assert_eq!(
            (shares.iter().min(), shares.iter().max()),
            (Some(&14), Some(&15))
        );
        assert_eq!(spread(&[] as &[usize], 5).count(), 0);
    }

    #[test]
    fn queues_are_counted_by_the_node_their_clients_talk_to() {
        let routes = [route(0), route(2), route(2), route(5)];
        assert_eq!(per_node(&routes, 3), [1, 0, 2]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_over_many_queues_make_each_queue_and_say_how_many() {
        let bench = bench(None, 1);
        let m = bench.end_to_end(3, 16, None).await.expect("row");
        assert!(m.messages > 0 && m.errors == 0, "{m:?}");
        // 16 senders make 2 consumers, at least one on each of the 3 queues.
        assert_eq!((m.extra["queues"], m.extra["consumers"]), (3.0, 3.0));
        let m = bench.send(3, 16, 1, None).await.expect("row");
        assert!(m.messages > 0 && m.errors == 0, "{m:?}");
        assert_eq!(m.extra["queues"], 3.0);
        let made = bench.queues.load(Ordering::Relaxed);
        assert_eq!(made, 6);
    }

    const WARMUP: Duration = Duration::from_millis(200);
    const SECONDS: Duration = Duration::from_secs(1);

    /// A bench over `Stalling` with a stall from `stall.0` to `stall.1` after its window opens
    /// (the window opens [`WARMUP`] after this call), keeping the timeline of a 1,000/s row.
    fn bench(stall: Option<(Duration, Duration)>, rate_workers: usize) -> Bench<Stalling> {
        let opens = Instant::now() + WARMUP;
        let driver = Stalling {
            queue: Mutex::new(VecDeque::new()),
            stall: stall.map(|(from, until)| (opens + from, opens + until)),
        };
        let settings = Settings {
            warmup: WARMUP,
            seconds: SECONDS,
            size: 64,
            send_in_flight: Vec::new(),
            batch_in_flight: Vec::new(),
            rates: Vec::new(),
            rate_workers,
            timeline_rate: Some(1000.0),
            e2e_in_flight: Vec::new(),
            e2e_rates: Vec::new(),
            fifo_groups: Vec::new(),
            fifo_in_flight: 1,
            backlog: None,
            backlog_baseline: 0,
            redeliver: None,
            redrive: None,
            fair: None,
            spread: None,
            failover: None,
        };
        Bench::new(driver, "fake".into(), Vec::new(), settings).expect("bench")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stall_counts_for_every_send_meant_to_start_during_it_even_past_the_window() {
        // One worker: a send held up by the stall keeps every later one from starting, so only
        // latencies from the intended times show the sends queued behind it. The stall runs
        // past the window's end, so the sends it holds up are confirmed after the window.
        let stall = (Duration::from_millis(900), Duration::from_millis(1100));
        let bench = bench(Some(stall), 1);
        let m = bench.send(1, 1, 1, Some(1000.0)).await.expect("row");
        assert!((900..=1100).contains(&m.messages), "{} sends", m.messages);
        let l = m.latency.expect("latency");
        assert!(l.p50_ms < 20.0, "{l:?}");
        // The sends meant for the last 100 ms of the window waited from 200 down to 100 ms.
        assert!(l.p99_ms >= 100.0 && l.max_ms >= 150.0, "{l:?}");
        let timeline = m.timeline.expect("the 1,000/s row keeps its sends' times");
        assert_eq!(timeline.sends.len() as u64, m.messages);
        let late = |over_ms: u64| {
            timeline
                .sends
                .iter()
                .filter(|[intended, _, done]| done - intended >= over_ms * 1000)
                .count()
        };
        assert!(late(100) >= 80, "{} sends took 100 ms or more", late(100));
        // Counted from their start, the worker's sends show the stall once or twice.
        let from_start = timeline
            .sends
            .iter()
            .filter(|[_, started, done]| done - started >= 100_000)
            .count();
        assert!(from_start <= 2, "{from_start}");
    }

    #[test]
    fn sends_are_told_apart_by_their_side_of_the_failover() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut gaps = Gaps::new(start);
        gaps.ok(start, start + ms(2));
        gaps.killed_at = Some(start + ms(10));
        // Started before the kill, answered after it: before the kill's side.
        gaps.ok(start + ms(9), start + ms(12));
        // Started after the kill and answered before the process was gone: the failover.
        gaps.ok(start + ms(11), start + ms(14));
        // Held up by the failover: the longest stretch without a success ends at 400 ms.
        gaps.ok(start + ms(14), start + ms(400));
        gaps.ok(start + ms(390), start + ms(410));
        // Started once the stretch was over: after the recovery.
        gaps.ok(start + ms(400), start + ms(404));
        gaps.ok(start + ms(500), start + ms(506));
        assert_eq!(gaps.first_ok_after_kill, Some(ms(4)));
        assert_eq!(gaps.longest, ms(386));
        assert_eq!(gaps.before_kill.messages, 2);
        assert_eq!(gaps.after_recovery().messages, 2);
        let notes: BTreeMap<String, f64> = gaps.phases().into_iter().collect();
        let rounded = |key: &str| notes[key].round();
        assert_eq!(rounded("p99_before_kill_ms"), 3.0);
        assert_eq!(rounded("p50_after_recovery_ms"), 4.0);
        assert_eq!(rounded("p99_after_recovery_ms"), 6.0);
    }

    #[test]
    fn a_failover_never_over_by_the_window_end_has_no_recovery() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut gaps = Gaps::new(start);
        gaps.killed_at = Some(start + ms(10));
        gaps.ok(start + ms(5), start + ms(12));
        gaps.ok(start + ms(12), start + ms(40));
        gaps.ok(start + ms(40), start + ms(43));
        gaps.finish(start + ms(1_000));
        assert_eq!(gaps.longest, ms(957));
        assert_eq!(gaps.after_recovery().messages, 0);
        let notes: BTreeMap<String, f64> = gaps.phases().into_iter().collect();
        assert!(notes.contains_key("p99_before_kill_ms"), "{notes:?}");
        assert!(!notes.contains_key("p99_after_recovery_ms"), "{notes:?}");
    }

    #[test]
    fn the_dispatcher_hands_out_every_intended_time_once_and_none_early() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let from = Instant::now();
        let until = from + Duration::from_millis(60);
        let dispatcher = std::thread::spawn(move || dispatch(tx, 1000.0, from, until));
        let mut times = Vec::new();
        while let Some(at) = rx.blocking_recv() {
            assert!(
                Instant::now() >= at,
                "an intended time handed out before it came"
            );
            times.push(at);
        }
        dispatcher.join().expect("the dispatcher ran");
        assert_eq!(times.len(), 60, "times in 60 ms at 1,000/s");
        for pair in times.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                gap.abs_diff(Duration::from_millis(1)) < Duration::from_micros(1),
                "{gap:?}"
            );
        }
        assert!(times.last().is_some_and(|last| *last < until));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_rate_round_trip_counts_every_message_meant_for_the_window_once() {
        let bench = bench(None, 16);
        let m = bench.end_to_end_at_rate(500.0).await.expect("row");
        let sends = m.extra["sends_per_sec"] * SECONDS.as_secs_f64();
        assert!((450.0..=550.0).contains(&sends), "{sends} sends");
        assert_eq!(m.messages as f64, sends.round());
        assert_eq!(m.extra["consumers"], 2.0);
        assert_eq!(m.extra[INTENDED_PER_SEC], 500.0);
        let latency = m.latency.expect("latency");
        assert!(latency.p50_ms < 50.0);
        // A message's time is its wait until received plus its ack's round trip, so neither
        // stage's quantile is above the whole's (within the histogram's 0.1% rounding).
        for stage in ["until_received", "ack"] {
            for (quantile, whole) in [("p50", latency.p50_ms), ("p99", latency.p99_ms)] {
                let part = m.extra[&format!("{quantile}_{stage}_ms")];
                assert!(part <= whole * 1.001, "{quantile} {stage} {part} > {whole}");
            }
        }
        assert!(m.timeline.is_none());
        assert_eq!(
            bench
                .driver()
                .depth(&QueueSpec::standard("q".into()))
                .await
                .ok(),
            Some(0)
        );
    }
}
