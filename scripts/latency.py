"""The client and the analysis of `scripts/latency` (see there), run by it with the three
nodes up: the timeline of single sends and of sends in flight written to docs/latency.md, or
with `--tail` the causes of the slow sends at a fixed rate (`latency_tail.py`) printed."""

import bisect, http.client, json, os, platform, re, statistics, subprocess, sys, time

import latency_tail

(work, base, sends, warmup, out, command_line, binary, in_flight, seconds, bench, pid_list,
 mode, rate, over_ms) = sys.argv[1:]
base, sends, warmup, in_flight, seconds = int(base), int(sends), int(warmup), int(in_flight), int(seconds)
rate, over_ms = float(rate), float(over_ms)

def request(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"content-type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    return reply.status, (json.loads(data) if data else None)

def wait_for_leader():
    """The leader, once every node agrees on one."""
    deadline = time.time() + 60
    while True:
        if time.time() > deadline:
            sys.exit("no leader within 60 s")
        try:
            seen = set()
            for id in (1, 2, 3):
                conn = http.client.HTTPConnection("127.0.0.1", base + id - 1, timeout=5)
                status, state = request(conn, "GET", "/v1/cluster")
                conn.close()
                seen.add(state.get("leader") if status == 200 else None)
            if len(seen) == 1 and None not in seen:
                return seen.pop()
        except (OSError, ValueError, AttributeError):
            pass
        time.sleep(0.2)

LINE = re.compile(r"^(\S+Z)\s+TRACE .*?raftq::stage: (.*)$")
FIELD = re.compile(r'(\w+)=("[^"]*"|\S+)')

def stamp(text):
    # 2026-12-03T13:45:00.123456Z: nanoseconds since the epoch, to the microsecond.
    date, frac = text[:-1].split(".")
    seconds = time.mktime(time.strptime(date, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return int(seconds) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])

def read_events():
    """Each node's stage events, in time order, as (nanoseconds since the epoch, fields)."""
    events = {}
    for id in (1, 2, 3):
        with open(os.path.join(work, f"node-{id}.log")) as log:
            for text in log:
                m = LINE.match(text.strip())
                if not m:
                    continue
                fields = {k: v.strip('"') for k, v in FIELD.findall(m.group(2))}
                events.setdefault(id, []).append((stamp(m.group(1)), fields))
    return events

def events_between(events, stamped, node, after, before):
    """The events of `node` from `after` to `before`: a node's log is in time order."""
    stamps = stamped.get(node, [])
    return events.get(node, [])[bisect.bisect_left(stamps, after):bisect.bisect_right(stamps, before)]

def p(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]

def run_bench(*workload):
    """One `raftq-bench run` against the three nodes (1 s of warm-up, then `seconds`) with the
    workload flags given; its results file's lines, and when it started (ns since the epoch)."""
    endpoints = ",".join(f"http://127.0.0.1:{base + i}" for i in range(3))
    results = os.path.join(work, "bench.json")
    started = time.time_ns()
    subprocess.run(
        [bench, "run", "--system", "raftq-grpc", "--label", "raftq-3", "--endpoints", endpoints,
         "--pids", pid_list, "--out", results, "--seconds", str(seconds), "--warmup", "1",
         *workload],
        capture_output=True, text=True, timeout=seconds + 120, check=True)
    with open(results) as lines:
        return [json.loads(l) for l in lines if l.startswith("{")], started

leader = wait_for_leader()
if mode == "tail":
    rows, _ = run_bench("--workloads", "rate", "--rate", str(rate), "--timeline-rate", str(rate))
    time.sleep(0.5)
    print(latency_tail.report(rows, read_events(), leader, work, over_ms,
                              f"`{command_line}` ({binary})"))
    sys.exit(0)

conn = http.client.HTTPConnection("127.0.0.1", base + leader - 1, timeout=10)
status, _ = request(conn, "POST", "/v1/queues", {"name": "latency"})
assert status in (200, 201), status
body = "x" * 1024
windows = []
for i in range(warmup + sends):
    sent = time.time_ns()
    status, _ = request(conn, "POST", "/v1/queues/latency/messages", {"body": body})
    answered = time.time_ns()
    assert status in (200, 201), status
    if i >= warmup:
        windows.append((sent, answered))
    # Apart, so that every send is alone in its entry and its stages.
    time.sleep(0.002)
conn.close()
time.sleep(0.5)

# The load generator's window: from the end of its second of warm-up to its end.
flight = None
if in_flight > 0:
    rows, started = run_bench("--workloads", "send", "--send-in-flight", str(in_flight))
    row = next(r for r in rows if r.get("kind") == "result")
    flight = (started + 1_000_000_000, started + (1 + seconds) * 1_000_000_000, row)
    time.sleep(0.5)

events = read_events()
followers = [n for n in (1, 2, 3) if n != leader]
stamped = {node: [at for at, _ in evs] for node, evs in events.items()}

def between(node, after, before):
    return events_between(events, stamped, node, after, before)

def first(node, after, before, stage, index=None):
    for at, f in between(node, after, before):
        if f.get("stage") == stage:
            lo = int(f.get("first", f.get("last", -1)))
            hi = int(f.get("last", f.get("first", -1)))
            if index is None or lo <= index <= hi:
                return at
    return None

# Stages as an entry goes through them: (label, node, stage event, the stage it waits on). The
# leader sends the append once its log holds the entry, while its own fsync runs; a follower
# writes the entry and its fsync in one synced write.
STAGES = [
    ("the leader's API hands the send to the node", "leader", "write", None),
    ("group commit proposes the entry", "leader", "propose", "write"),
    ("the leader's log holds the entry (before fsync)", "leader", "appended", "propose"),
    ("the leader sends the append", "leader", "append_sent", "appended"),
    ("the leader's fsync is done", "leader", "synced", "appended"),
    ("the first follower receives the append", "follower", "append_received", "append_sent"),
    ("the follower's log holds the entry, fsynced (one synced write)", "follower", "synced", "append_received"),
    ("the follower answers the append", "follower", "append_answered", "synced@follower"),
    ("the leader hears the answer", "leader", "append_acked", "append_answered"),
    ("the leader applies the entry (committed)", "leader", "apply", "append_acked"),
    ("the leader has applied it", "leader", "applied", "apply"),
    ("the node answers the API", "leader", "written", "applied"),
]

def key(role, stage):
    return stage if role == "leader" or stage.startswith("append_") else f"{stage}@follower"

rows = {key(role, stage): [] for _, role, stage, _ in STAGES}
totals = []
matched = 0
for sent, answered in windows:
    proposed = first(leader, sent, answered, "propose")
    if proposed is None:
        continue
    index = None
    for at, f in events.get(leader, []):
        if at >= proposed and f.get("stage") == "appended":
            index = int(f["last"])
            break
    if index is None:
        continue
    times = {}
    for _, role, stage, _ in STAGES:
        if role == "leader":
            at = first(leader, sent, answered, stage, None if stage in ("write", "propose", "written") else index)
        else:
            # The follower that answers first is the one the commit waits for.
            candidates = [first(f, sent, answered, stage, index) for f in followers]
            candidates = [c for c in candidates if c is not None]
            at = min(candidates) if candidates else None
        times[key(role, stage)] = at
    if any(v is None for v in times.values()):
        continue
    matched += 1
    for k in rows:
        rows[k].append((times[k] - sent) / 1e6)
    totals.append((answered - sent) / 1e6)

if matched < len(windows) / 2:
    sys.exit(f"only {matched} of {len(windows)} sends could be followed through the logs")

def covered(node, stage, start, end):
    """The first time each log index was named by `stage` on `node` within [start, end]."""
    seen = {}
    for at, f in between(node, start, end):
        if f.get("stage") == stage and "first" in f:
            for index in range(int(f["first"]), int(f.get("last", f["first"])) + 1):
                seen.setdefault(index, at)
    return seen

# An entry's stages under load: (label, the stage, the stage it waits on); `@follower` is the
# follower that answered the append first.
FLIGHT_STAGES = [
    ("the leader's log holds the entry (before fsync)", "appended", "propose"),
    ("the leader's fsync is done", "synced", "appended"),
    ("the leader sends the append (after the answer to the one before)", "append_sent", "appended"),
    ("the first follower receives the append", "append_received@follower", "append_sent"),
    ("the follower's log holds the entry, fsynced", "synced@follower", "append_received@follower"),
    ("the follower answers the append", "append_answered@follower", "synced@follower"),
    ("the leader hears the answer", "append_acked", "append_answered@follower"),
    ("the leader applies the entry (committed)", "apply", "append_acked"),
    ("the leader has applied it", "applied", "apply"),
]

def write_flight(md, start, end, rate):
    """The table of every entry proposed in [start, end] while `in_flight` sends were kept going."""
    lo, hi = start - 1_000_000_000, end + 1_000_000_000
    around = between(leader, lo, hi)
    proposed = [(at, int(f["commands"])) for at, f in around if f.get("stage") == "propose"]
    appended = [int(f["first"]) for _, f in around if f.get("stage") == "appended"]
    # The k-th proposal traced is taken for the k-th entry appended: group commit starts one
    # entry's write at a time, so two swap only when their tasks start microseconds apart.
    entries = {index: (at, commands) for (at, commands), index in zip(proposed, appended)
               if start <= at <= end}
    at = {"propose": {i: a for i, (a, _) in entries.items()}}
    for stage in ("appended", "synced", "append_sent", "append_acked", "apply", "applied"):
        at[stage] = covered(leader, stage, lo, hi)
    seen = {f: {stage: covered(f, stage, lo, hi)
                for stage in ("append_received", "synced", "append_answered")}
            for f in followers}
    first_answer = {}
    for index in entries:
        times = [(seen[f]["append_answered"][index], f) for f in followers
                 if index in seen[f]["append_answered"]]
        if times:
            first_answer[index] = min(times)[1]
    for stage in ("append_received", "synced", "append_answered"):
        at[f"{stage}@follower"] = {i: seen[f][stage][i] for i, f in first_answer.items()
                                   if i in seen[f][stage]}
    sent = [(int(f["first"]), int(f["last"])) for _, f in between(leader, start, end)
            if f.get("stage") == "append_sent"]
    md.write(f"## Under load: {in_flight} sends in flight\n\n")
    md.write(f"The load generator (`raftq-bench run --system raftq-grpc --workloads send --send-in-flight {in_flight}`,\n")
    md.write(f"gRPC, 1 KiB bodies) kept {in_flight} sends going for {seconds} s after 1 s of warm-up: {rate['per_sec']:,.0f} sends a\n")
    md.write(f"second, p50 {rate['latency']['p50_ms']:.3f} ms. Every Raft entry proposed in that window is followed from its\n")
    md.write("proposal (the k-th proposal is the k-th entry the leader appends) to its apply on the leader.\n")
    commands = [c for _, c in entries.values()]
    md.write(f"Entries: {len(entries)}, {statistics.mean(commands):.1f} sends each on average; the leader's appends\n")
    md.write(f"carried {statistics.mean(h - l + 1 for l, h in sent):.2f} entries each on average.\n\n")
    md.write("| stage | step from | step p50 ms | step p90 ms |\n")
    md.write("|---|---|---|---|\n")
    labels = {stage: label for label, stage, _ in FLIGHT_STAGES}
    labels["propose"] = "group commit proposes the entry"
    def steps(stage, since):
        return [(at[stage][i] - at[since][i]) / 1e6 for i in entries
                if i in at[stage] and i in at[since]]
    for label, stage, since in FLIGHT_STAGES:
        s = steps(stage, since)
        md.write(f"| {label} | {labels[since]} | {p(s, 0.5):.3f} | {p(s, 0.9):.3f} |\n")
    total = steps("applied", "propose")
    md.write(f"| in all: proposed to applied on the leader | | {p(total, 0.5):.3f} | {p(total, 0.9):.3f} |\n\n")

MARKER = "<!-- written by hand below -->"
kept = ""
if os.path.exists(out):
    text = open(out).read()
    if MARKER in text:
        kept = text[text.index(MARKER):]

with open(out, "w") as md:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    md.write("# Where a send's time goes: one send through three nodes\n\n")
    md.write(f"Produced by `{command_line}` ({binary}): three `raftq serve` processes on\n")
    md.write("loopback, RocksDB on the local disk, every log append fsynced; a Python client sends 1 KiB\n")
    md.write("messages one at a time over one keep-alive HTTP connection to the leader. Each node logs\n")
    md.write("a timestamped event at every stage (`RAFTQ_LOG=raftq::stage=trace`); each send is matched\n")
    md.write("with its Raft entry and followed through the three logs. Times are from the moment the\n")
    md.write("client sent the request (same clock: one machine); a step is the time from the stage it\n")
    md.write("waits on. The follower is the one that answered first (the one the commit waits for).\n\n")
    md.write(f"Machine: {cpu}, {platform.release()}, {os.cpu_count()} cores shared by the three nodes and the client;\n")
    md.write(f"/proc/loadavg at the end: {open('/proc/loadavg').read().strip()}.\n")
    md.write(f"Sends followed: {matched} of {len(windows)} (after {warmup} not counted).\n\n")
    md.write("| stage | p50 ms since sent | step from | step p50 ms | step p90 ms |\n")
    md.write("|---|---|---|---|---|\n")
    labels = {key(role, stage): label for label, role, stage, _ in STAGES}
    for label, role, stage, waits_on in STAGES:
        since = rows[key(role, stage)]
        before = rows[waits_on] if waits_on else [0.0] * len(since)
        steps = [a - b for a, b in zip(since, before)]
        origin = labels[waits_on] if waits_on else "the client sent it"
        md.write(f"| {label} | {p(since, 0.5):.3f} | {origin} | {p(steps, 0.5):.3f} | {p(steps, 0.9):.3f} |\n")
    last = rows["written"]
    steps = [t - w for t, w in zip(totals, last)]
    md.write(f"| the client has the answer | {p(totals, 0.5):.3f} | the node answers the API | {p(steps, 0.5):.3f} | {p(steps, 0.9):.3f} |\n")
    md.write(f"\nRound trip seen by the client: p50 {p(totals, 0.5):.3f} ms, p90 {p(totals, 0.9):.3f} ms, p99 {p(totals, 0.99):.3f} ms.\n\n")
    if flight:
        write_flight(md, *flight)
    md.write(kept)
print(open(out).read())
