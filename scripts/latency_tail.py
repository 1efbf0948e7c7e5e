"""The causes of the slow sends at a fixed rate, for `scripts/latency --tail`.

Every send of the load generator's fixed-rate row (its timeline: when each send was meant to
start, started and was confirmed) slower than a bound from its intended time is followed through
the three nodes' stage events (`raftq::stage`): the request reaching the leader's node (`write`),
group commit proposing its entry (`propose`; the k-th proposal is the k-th entry the leader
appends), the leader's append and fsync, the append's way to the first follower to answer, that
follower's synced write, the answer, the apply, the answer to the client. The step it spent the
longest in is the stage it waited in, and the cause is what ran on that step's node meanwhile
(the longest overlap wins):

- segment roll-over: `roll`..`rolled` (a new log segment), `spare`..`spare_made` (the zeros of
  the next one, written by a thread of their own);
- snapshot: `snapshot`..`snapshotted`;
- compaction: a RocksDB flush or compaction (the `EVENT_LOG_v1` lines of the RocksDB `LOG`
  files under the node's data directory);
- purge: `purge`..`purged` (the log purged behind a snapshot), `purge_remove`..`purge_removed`
  (the purged segment files removed);
- group-commit wait: the send waited for group commit (`write`..`propose`: every slot for an
  entry in flight taken) and none of the above ran anywhere during the send;
- scheduler/other: any other wait with none of the above under way.

A step spent waiting before the server (in the load generator: its dispatch, a free worker) or in group commit
is a queue behind earlier sends: its cause is looked for on every node over the whole send.

`python3 scripts/latency_tail.py` runs the self-test."""

import bisect, glob, json, os, statistics, sys, tempfile

# The begin and end stage events of what can hold a node up, and the cause each stands for.
SPANS = [
    ("roll", "rolled", "segment roll-over"),
    ("spare", "spare_made", "segment roll-over"),
    ("snapshot", "snapshotted", "snapshot"),
    ("purge", "purged", "purge"),
    ("purge_remove", "purge_removed", "purge"),
]
COMPACTION = "compaction"
GROUP_COMMIT = "group-commit wait"
OTHER = "scheduler/other"
CAUSES = ["segment roll-over", "snapshot", COMPACTION, "purge", GROUP_COMMIT, OTHER]

CLIENT_WAIT = "in the load generator before the send (its dispatch, a free worker)"
TO_LEADER = "the request on its way to the leader's node"
IN_GROUP_COMMIT = "group commit (every slot for an entry in flight taken)"
QUEUES = (CLIENT_WAIT, IN_GROUP_COMMIT)


def stage_spans(events, end):
    """Per node, (start, end, cause) of each begin..end pair of SPANS; one still open when the
    log ends runs to `end`."""
    spans = {}
    for node, evs in events.items():
        opened = {}
        for at, f in evs:
            stage = f.get("stage")
            for begin, finish, cause in SPANS:
                if stage == begin:
                    opened.setdefault(begin, (at, cause))
                elif stage == finish and begin in opened:
                    spans.setdefault(node, []).append((opened.pop(begin)[0], at, cause))
        for at, cause in opened.values():
            spans.setdefault(node, []).append((at, end, cause))
    return spans


def rocksdb_spans(directory):
    """(start, end, COMPACTION) of each flush and compaction in the RocksDB `LOG` files under
    `directory` (their `EVENT_LOG_v1` lines, stamped in microseconds since the epoch)."""
    started, spans = {}, []
    for path in sorted(glob.glob(os.path.join(directory, "**", "LOG*"), recursive=True)):
        with open(path, errors="replace") as log:
            for text in log:
                if "EVENT_LOG_v1" not in text:
                    continue
                try:
                    event = json.loads(text[text.index("{"):])
                except ValueError:
                    continue
                kind, at = event.get("event", ""), int(event.get("time_micros", 0)) * 1000
                job = (path, event.get("job"), kind.rsplit("_", 1)[0])
                if kind in ("flush_started", "compaction_started"):
                    started[job] = at
                elif kind in ("flush_finished", "compaction_finished") and job in started:
                    spans.append((started.pop(job), at, COMPACTION))
    return spans


class Cluster:
    """The three nodes' stage events, indexed for following sends."""

    def __init__(self, events, leader, since):
        self.leader = leader
        self.followers = [n for n in (1, 2, 3) if n != leader]
        self.times, self.seen = {}, {}
        for node, evs in events.items():
            for at, f in evs:
                self.times.setdefault(node, {}).setdefault(f.get("stage"), []).append(at)
                if "first" in f:
                    named = self.seen.setdefault(node, {}).setdefault(f["stage"], {})
                    for index in range(int(f["first"]), int(f.get("last", f["first"])) + 1):
                        named.setdefault(index, at)
        own = [(at, f) for at, f in events.get(leader, []) if at >= since]
        proposed = [at for at, f in own if f.get("stage") == "propose"]
        appended = [i for _, f in own if f.get("stage") == "appended"
                    for i in range(int(f["first"]), int(f["last"]) + 1)]
        self.proposals = list(zip(proposed, appended))
        self.proposed = [at for at, _ in self.proposals]

    def after(self, node, stage, at):
        """The first `stage` event of `node` at or after `at`."""
        times = self.times.get(node, {}).get(stage, [])
        i = bisect.bisect_left(times, at)
        return times[i] if i < len(times) else None

    def named(self, node, stage, index):
        """When `stage` of `node` first named log index `index`."""
        return self.seen.get(node, {}).get(stage, {}).get(index)

    def steps(self, intended, started, done):
        """The steps of one send as (label, node or None for every node, start, end), or None
        when its events cannot be found."""
        lead = self.leader
        write = self.after(lead, "write", started)
        k = bisect.bisect_left(self.proposed, write) if write is not None else len(self.proposed)
        if write is None or write > done or k == len(self.proposals):
            return None
        proposed, index = self.proposals[k]
        at = {stage: self.named(lead, stage, index)
              for stage in ("appended", "synced", "append_sent", "append_acked", "applied")}
        answers = sorted((self.named(f, "append_answered", index), f) for f in self.followers
                         if self.named(f, "append_answered", index) is not None)
        if None in at.values() or not answers:
            return None
        follower = answers[0][1]
        received = self.named(follower, "append_received", index)
        written = self.named(follower, "synced", index)
        if None in (received, written):
            return None
        steps = [(CLIENT_WAIT, None, intended, started), (TO_LEADER, lead, started, write),
                 (IN_GROUP_COMMIT, lead, write, proposed),
                 ("the leader's log append", lead, proposed, at["appended"])]
        if at["synced"] >= at["append_acked"]:
            steps.append(("the leader's fsync", lead, at["appended"], at["synced"]))
        else:
            steps += [("the leader sends the append", lead, at["appended"], at["append_sent"]),
                      ("the append on its way to the follower", follower, at["append_sent"], received),
                      ("the follower's synced write", follower, received, written),
                      ("the answer on its way to the leader", lead, written, at["append_acked"])]
        committed = max(at["synced"], at["append_acked"])
        steps += [("commit to applied on the leader", lead, committed, at["applied"]),
                  ("the answer on its way to the client", lead, at["applied"], done)]
        return steps


def overlapping(spans, nodes, start, end):
    """The cause of the span among `nodes`' that overlaps [start, end] the longest, if any."""
    best = (0, None)
    for node in nodes:
        for s, e, cause in spans.get(node, []):
            best = max(best, (min(e, end) - max(s, start), cause), key=lambda b: b[0])
    return best[1]


def slow_causes(timeline, events, leader, spans, over_ms):
    """Each send of `timeline` slower than `over_ms` from its intended time, as (latency ms,
    the step it waited longest in, its cause), or (latency ms, None, None) when it cannot be
    followed; `spans` are each node's (start, end, cause)."""
    origin = timeline["start_unix_nanos"]
    cluster = Cluster(events, leader, origin)
    every = (1, 2, 3)
    slow = []
    for intended, started, done in timeline["sends"]:
        latency = (done - intended) / 1000
        if latency <= over_ms:
            continue
        times = [origin + t * 1000 for t in (intended, started, done)]
        steps = cluster.steps(*times)
        if steps is None:
            slow.append((latency, None, None))
            continue
        label, node, start, end = max(steps, key=lambda s: s[3] - s[2])
        cause = overlapping(spans, [node] if node else every, start, end)
        if cause is None and label in QUEUES:
            cause = overlapping(spans, every, times[0], times[2])
        if cause is None:
            cause = GROUP_COMMIT if label == IN_GROUP_COMMIT else OTHER
        slow.append((latency, label, cause))
    return slow


def all_spans(events, work):
    """Each node's stage spans and RocksDB flushes and compactions."""
    end = max((evs[-1][0] for evs in events.values() if evs), default=0)
    spans = stage_spans(events, end)
    for node in (1, 2, 3):
        spans.setdefault(node, []).extend(rocksdb_spans(os.path.join(work, f"node-{node}")))
    return spans


def table(slow, over_ms):
    """The markdown table of `slow_causes`, one row a cause."""
    lines = [f"| cause | sends over {over_ms:g} ms | share | latency p50 ms | max ms | "
             "the stage they waited longest in (sends) |", "|---|---|---|---|---|---|"]
    rows = [(cause, [s for s in slow if s[2] == cause]) for cause in CAUSES]
    rows.append(("not followed (its events not found)", [s for s in slow if s[2] is None]))
    for cause, sends in rows:
        if not sends:
            lines.append(f"| {cause} | 0 | 0% | – | – | |")
            continue
        latencies = [s[0] for s in sends]
        stages = {}
        for _, label, _ in sends:
            if label:
                stages[label] = stages.get(label, 0) + 1
        where = ", ".join(f"{label} ({n})" for label, n in
                          sorted(stages.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {cause} | {len(sends)} | {len(sends) / len(slow):.0%} | "
                     f"{statistics.median(latencies):.2f} | {max(latencies):.2f} | {where} |")
    return "\n".join(lines)


def report(rows, events, leader, work, over_ms, produced_by):
    """The markdown section on the slow sends of the fixed-rate row in `rows` (the load
    generator's results file)."""
    timeline = next(r for r in rows if r.get("kind") == "timeline")
    row = next(r for r in rows if r.get("kind") == "result" and r["key"] == timeline["key"])
    slow = slow_causes(timeline, events, leader, all_spans(events, work), over_ms)
    l = row["latency"]
    head = (f"## The tail: {row['workload']}\n\n"
            f"Produced by {produced_by}: the load generator's fixed-rate row over gRPC, 1 KiB "
            f"bodies, {row['seconds']:g} s after 1 s of warm-up, against the three nodes: "
            f"{row['messages']:,} sends, from the intended time p50 {l['p50_ms']:.2f}, p99 "
            f"{l['p99_ms']:.2f}, p99.9 {l['p999_ms']:.2f}, max {l['max_ms']:.2f} ms. "
            f"{len(slow)} took over {over_ms:g} ms; each is followed through the nodes' stage "
            "events to the step it waited longest in, and the cause is what ran on that step's "
            "node meanwhile (`scripts/latency_tail.py` says how).\n\n")
    return head + table(slow, over_ms) + "\n"


def self_test():
    """Three sends through synthetic events: one held up by a follower's segment roll-over,
    one by a compaction beside the leader's fsync, one in group commit with nothing under way."""
    ms = 1_000_000
    origin = 1_000 * ms

    def entry(index, at, slow, slow_by):
        """Stage events of one send (written at `at`) and its entry `index`, the event `slow`
        (node, stage) `slow_by` late."""
        t = at
        out = {1: [], 2: [], 3: []}
        for node, stage, step in [(1, "write", 0.1), (1, "propose", 0.05), (1, "appended", 0.02),
                                  (1, "synced", 0.01), (1, "append_sent", 0.03),
                                  (2, "append_received", 0.1), (2, "synced", 0.2),
                                  (2, "append_answered", 0.05), (1, "append_acked", 0.1),
                                  (1, "applied", 0.05)]:
            t += int(step * ms) + (slow_by if (node, stage) == slow else 0)
            fields = {"stage": stage} if stage in ("write", "propose") else \
                {"stage": stage, "first": str(index), "last": str(index)}
            out[node].append((t, fields))
        return out, t

    events = {1: [], 2: [], 3: []}
    sends = []
    for index, (start_ms, slow) in enumerate([(10, (2, "synced")), (30, (1, "applied")),
                                              (60, (1, "propose"))], start=5):
        intended = origin + start_ms * ms
        evs, end = entry(index, intended, slow, 8 * ms)
        for node in events:
            events[node] += evs[node]
        sends.append([(intended - origin) // 1000, (intended - origin) // 1000,
                      (end + ms // 2 - origin) // 1000])
    # The first send waits in the follower's synced write while the follower rolls a segment;
    # the second between commit and apply while the leader's RocksDB compacts; the third in
    # group commit, with nothing under way.
    events[2].insert(0, (origin + 10 * ms, {"stage": "roll", "segment": "1"}))
    events[2].append((origin + 25 * ms, {"stage": "rolled", "segment": "1"}))
    for node in events:
        events[node].sort(key=lambda e: e[0])
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "node-1", "state")
        os.makedirs(db)
        with open(os.path.join(db, "LOG"), "w") as log:
            for kind, at in (("compaction_started", 31), ("compaction_finished", 45)):
                event = {"time_micros": (origin + at * ms) // 1000, "job": 7, "event": kind}
                log.write(f"2026/12/06-04:00:00.000000 1 EVENT_LOG_v1 {json.dumps(event)}\n")
        timeline = {"start_unix_nanos": origin, "sends": sends}
        slow = slow_causes(timeline, events, 1, all_spans(events, work), 5.0)
        rows = [{"kind": "timeline", "key": "rate/b1/r1000", **timeline},
                {"kind": "result", "key": "rate/b1/r1000", "workload": "send at a fixed 1000/s",
                 "seconds": 1.0, "messages": 3,
                 "latency": {"p50_ms": 9, "p99_ms": 9, "p999_ms": 9, "max_ms": 9}}]
        text = report(rows, events, 1, work, 5.0, "the self-test")
    causes = [(label, cause) for _, label, cause in slow]
    assert causes == [("the follower's synced write", "segment roll-over"),
                      ("commit to applied on the leader", COMPACTION),
                      (IN_GROUP_COMMIT, GROUP_COMMIT)], causes
    assert all(8 < latency < 10 for latency, _, _ in slow), slow
    assert "| segment roll-over | 1 | 33% |" in text, text
    assert "| snapshot | 0 | 0% | – | – | |" in text, text
    print("latency_tail self-test: 1 passed, 0 failed")


if __name__ == "__main__":
    self_test()
