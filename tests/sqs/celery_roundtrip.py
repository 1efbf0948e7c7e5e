#!/usr/bin/env python3
"""A Celery application on an SQS-compatible endpoint, through kombu's SQS transport.

Set up as a user would (broker `sqs://KEY:SECRET@HOST:PORT`, the region and the queue-name prefix
in `broker_transport_options`, late acknowledgement), it sends N tasks to a standard queue and N
to a FIFO queue (two message groups, `MessageGroupId` given to `apply_async`), runs two workers
(subprocesses, `celery worker`, the solo pool, each consuming both queues), and checks that:

- every task ran exactly once: each task appends one line to a file, and the lines are counted;
- within each message group of the FIFO queue the tasks ran in the order they were sent;
- both queues are empty afterwards (every message was deleted by its acknowledgement);
- a publisher signing with a wrong secret is refused (`SignatureDoesNotMatch`) and sends nothing;
- late acknowledgement survives a crash: two more workers consume a third queue whose
  visibility timeout is short (4 s), one is killed (SIGKILL) while it runs its tasks, and every
  task still runs: at least once, and exactly once unless the killed worker had started it (the
  task it was running, and any whose deletion it had not yet sent, come back when their
  visibility timeout ends, as on SQS; those it held but had not started run once, elsewhere);
  the queue ends empty.

Every request is signed with SigV4 by the access key given. Queues are created by kombu under a
prefix of this run's own (`celery<time><random>-`) and deleted at the end. Each check prints PASS
or FAIL with its reason; the exit status is 1 when any check failed. Bounded in time: the tasks
must all have run within --timeout seconds.

Run it through scripts/celery-test, which provides the pinned packages and, without
--endpoint, a node of its own; see --help. The workers import this file as the module
`celery_roundtrip`: the settings reach them in the environment (RAFTQ_CELERY_SETTINGS).
"""

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import quote, urlsplit

import boto3
from botocore.exceptions import ClientError
from celery import Celery

TASK_NAME = "raftq_roundtrip.record"
SLOW_TASK_NAME = "raftq_roundtrip.record_slowly"
STANDARD = "standard"
FIFO = "ordered.fifo"
CRASH = "crash"
# The crash queue's visibility timeout: how soon a killed worker's messages come back.
CRASH_VISIBILITY_SECONDS = 4
# How long each crash task works after it is recorded, so that the kill lands mid-task.
CRASH_TASK_SECONDS = 0.2
GROUPS = ("group-a", "group-b")
SETTINGS_VARIABLE = "RAFTQ_CELERY_SETTINGS"
# How long a worker may take to stop after SIGTERM (a warm shutdown waits for its long poll).
STOP_SECONDS = 20


def broker_settings(endpoint, region, access_key_id, secret_access_key, prefix,
                    visibility_timeout=1800):
    """The Celery settings of an application whose broker is the SQS endpoint at `endpoint`, whose
    queues kombu creates with `visibility_timeout`."""
    url = urlsplit(endpoint)
    port = f":{url.port}" if url.port else ""
    return {
        # The credentials are the URL's user and password, quoted: a secret may hold `/` or `+`.
        "broker_url": f"sqs://{quote(access_key_id, safe='')}:"
        f"{quote(secret_access_key, safe='')}@{url.hostname}{port}",
        "broker_transport_options": {
            "region": region,
            "is_secure": url.scheme == "https",
            "queue_name_prefix": prefix,
            "wait_time_seconds": 5,
            "visibility_timeout": visibility_timeout,
        },
        "broker_connection_retry_on_startup": True,
        "task_default_queue": STANDARD,
        "task_acks_late": True,
        "task_ignore_result": True,
        "worker_prefetch_multiplier": 10,
    }


def make_app(name, settings):
    app = Celery(name)
    app.conf.update(settings)
    return app


_settings = json.loads(os.environ.get(SETTINGS_VARIABLE, "{}"))
app = make_app("raftq_roundtrip", _settings.get("celery", {}))


@app.task(name=TASK_NAME)
def record(kind, group, index):
    """Appends `kind group index pid` to the records file, one write of one line."""
    line = f"{kind} {group or '-'} {index} {os.getpid()}\n".encode()
    fd = os.open(_settings["records"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@app.task(name=SLOW_TASK_NAME)
def record_slowly(kind, index):
    """Records the task as `record` does, then works on: a worker killed meanwhile leaves it
    unacknowledged."""
    record(kind, "", index)
    time.sleep(CRASH_TASK_SECONDS)


class Checks:
    """Prints each check's outcome and remembers whether any failed."""

    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, condition, name, detail=""):
        if condition:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}: {detail}")
        sys.stdout.flush()


def read_records(path):
    """The records file's lines as (kind, group, index, pid), in the order they were written."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [(k, g, int(i), int(p)) for k, g, i, p in (line.split() for line in f)]


def once_each(records, kind, count):
    """What is wrong with the tasks of `kind`: indices missing or run more than once."""
    runs = collections.Counter(index for k, _, index, _ in records if k == kind)
    missing = sorted(set(range(count)) - set(runs))
    twice = sorted(index for index, n in runs.items() if n > 1)
    extra = sorted(index for index in runs if not 0 <= index < count)
    problems = []
    if missing:
        problems.append(f"{len(missing)} never ran (first {missing[:10]})")
    if twice:
        problems.append(f"{len(twice)} ran more than once (first {twice[:10]})")
    if extra:
        problems.append(f"unknown tasks ran: {extra[:10]}")
    return "; ".join(problems)


def out_of_order(records, group):
    """The first place where the group's FIFO tasks ran out of the order they were sent."""
    ran = [index for k, g, index, _ in records if k == "fifo" and g == group]
    for earlier, later in zip(ran, ran[1:]):
        if later <= earlier:
            return f"task {later} ran after task {earlier}"
    return ""


def queue_depths(sqs, url):
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return {name: int(attributes.get(name, "0")) for name in names}


def start_workers(count, env, directory, queues, label="w"):
    """`count` Celery workers consuming `queues`, each logging to `<label><n>.log` in
    `directory`."""
    workers = []
    for n in range(count):
        log = open(os.path.join(directory, f"{label}{n}.log"), "wb")
        command = [
            sys.executable, "-m", "celery", "-A", "celery_roundtrip", "worker",
            "--queues", ",".join(queues), "--pool", "solo", "--hostname", f"{label}{n}@raftq",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel", "WARNING",
        ]
        process = subprocess.Popen(
            command, cwd=os.path.dirname(os.path.abspath(__file__)), env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        workers.append((process, log))
    return workers


def stop_workers(workers):
    """A warm shutdown of each worker (SIGTERM), then SIGKILL for any still running."""
    for process, _ in workers:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for process, log in workers:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def wait_for(condition, deadline, workers):
    """Polls `condition` until it holds, the deadline passes or a worker exits; its last value."""
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        if any(process.poll() is not None for process, _ in workers):
            return value
        time.sleep(0.2)


def refused_publish(args, prefix):
    """The error code of a send by an application signing with a wrong secret ('' if none)."""
    wrong = broker_settings(args.endpoint, args.region, args.access_key_id, "wrong" * 8, prefix)
    refused = make_app("raftq_refused", wrong)
    try:
        refused.send_task(TASK_NAME, args=("refused", "", 0), queue=STANDARD, retry=False)
    except ClientError as error:
        return error.response.get("Error", {}).get("Code", "") or str(error)
    except Exception as error:  # kombu may wrap the client's error
        cause = error.__cause__ or error.__context__
        if isinstance(cause, ClientError):
            return cause.response.get("Error", {}).get("Code", "")
        return f"{type(error).__name__}: {error}"
    finally:
        refused.close()
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoint", required=True, help="the SQS endpoint, http(s)://HOST:PORT")
    parser.add_argument("--region", default="local", help="the region requests are signed for")
    parser.add_argument("--access-key-id", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    parser.add_argument("--secret-access-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    parser.add_argument("--tasks", type=int, default=200, help="tasks per queue (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (default 2)")
    parser.add_argument(
        "--timeout", type=float, default=90, help="seconds for all tasks to run (default 90)"
    )
    parser.add_argument(
        "--crash-tasks", type=int, default=30,
        help="tasks of the run with a killed worker (default 30; 0 skips it)",
    )
    args = parser.parse_args()
    if not args.access_key_id or not args.secret_access_key:
        parser.error("--access-key-id and --secret-access-key (or AWS_* variables) are needed")

    started = time.monotonic()
    prefix = f"celery{int(time.time())}{uuid.uuid4().hex[:6]}-"
    checks = Checks()
    sqs = boto3.client(
        "sqs", endpoint_url=args.endpoint, region_name=args.region,
        aws_access_key_id=args.access_key_id, aws_secret_access_key=args.secret_access_key,
    )
    with tempfile.TemporaryDirectory(prefix="raftq-celery-") as directory:
        settings = broker_settings(
            args.endpoint, args.region, args.access_key_id, args.secret_access_key, prefix
        )
        records = os.path.join(directory, "records")
        _settings.update(celery=settings, records=records)
        app.conf.update(settings)
        env = dict(os.environ, **{SETTINGS_VARIABLE: json.dumps(_settings)})
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
        workers = start_workers(args.workers, env, directory, (STANDARD, FIFO))
        try:
            run(args, app, sqs, prefix, records, workers, checks)
            if args.crash_tasks > 0:
                crash_run(args, sqs, prefix, directory, checks)
        finally:
            stop_workers(workers)
            if checks.failed:
                for name in sorted(os.listdir(directory)):
                    if not name.endswith(".log"):
                        continue
                    with open(os.path.join(directory, name), errors="replace") as f:
                        print(f"--- {name} (last 40 lines)")
                        print("".join(f.readlines()[-40:]), end="")
            delete_queues(sqs, prefix)
    elapsed = time.monotonic() - started
    print(f"{checks.passed} passed, {checks.failed} failed")
    print(f"celery round trip: {2 * args.tasks} tasks, {args.workers} workers, "
          f"{args.crash_tasks} tasks with a killed worker, {elapsed:.1f} s")
    return 1 if checks.failed else 0


def run(args, app, sqs, prefix, records, workers, checks):
    """Sends the tasks, waits for them, stops the workers and checks what ran."""
    code = refused_publish(args, prefix)
    checks.check(code == "SignatureDoesNotMatch",
                 "a publisher with a wrong secret is refused (SignatureDoesNotMatch)",
                 f"got {code!r}")
    sent_at = time.monotonic()
    for index in range(args.tasks):
        record.apply_async(args=("standard", "", index), queue=STANDARD)
    for index in range(args.tasks):
        group = GROUPS[index % len(GROUPS)]
        record.apply_async(args=("fifo", group, index), queue=FIFO, MessageGroupId=group)
    print(f"sent {2 * args.tasks} tasks in {time.monotonic() - sent_at:.1f} s")

    def tasks_ran():
        return len([r for r in read_records(records) if r[0] in ("standard", "fifo")])

    wait_for(lambda: tasks_ran() >= 2 * args.tasks, time.monotonic() + args.timeout, workers)
    print(f"{tasks_ran()} tasks ran {time.monotonic() - sent_at:.1f} s after the first send")
    urls = {name: sqs.get_queue_url(QueueName=prefix + name)["QueueUrl"]
            for name in (STANDARD, FIFO)}
    # The last acknowledgements (deletes) follow the last records closely.
    drained = wait_for(
        lambda: all(sum(queue_depths(sqs, url).values()) == 0 for url in urls.values()),
        time.monotonic() + 10, workers,
    )
    exited = [n for n, (process, _) in enumerate(workers) if process.poll() is not None]
    checks.check(not exited, "the workers run until stopped", f"worker(s) {exited} exited")
    stop_workers(workers)

    ran = read_records(records)
    checks.check(not [r for r in ran if r[0] == "refused"],
                 "nothing sent by the refused publisher ran")
    for kind in ("standard", "fifo"):
        problems = once_each(ran, kind, args.tasks)
        checks.check(not problems, f"each of the {args.tasks} {kind} tasks ran exactly once",
                     problems)
    for group in GROUPS:
        problem = out_of_order(ran, group)
        checks.check(not problem, f"the FIFO tasks of {group} ran in the order sent", problem)
    for name, url in urls.items():
        depths = queue_depths(sqs, url)
        checks.check(drained and sum(depths.values()) == 0,
                     f"the queue {name} is empty after the run", str(depths))
    pids = collections.Counter(pid for *_, pid in ran)
    print(f"tasks per worker process: {sorted(pids.values(), reverse=True)}")


def crash_run(args, sqs, prefix, directory, checks):
    """Sends the crash tasks to two new workers, kills (SIGKILL) the first to run one while it
    works, and checks that every task still ran, each exactly once unless the killed worker had
    started it, and that the queue ends empty."""
    settings = broker_settings(
        args.endpoint, args.region, args.access_key_id, args.secret_access_key, prefix,
        visibility_timeout=CRASH_VISIBILITY_SECONDS,
    )
    records = os.path.join(directory, "crash-records")
    env = dict(os.environ, **{SETTINGS_VARIABLE: json.dumps({"celery": settings,
                                                             "records": records})})
    env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
    publisher = make_app("raftq_crash", settings)
    workers = start_workers(2, env, directory, (CRASH,), label="crash")
    try:
        for index in range(args.crash_tasks):
            publisher.send_task(SLOW_TASK_NAME, args=("crash", index), queue=CRASH)
        deadline = time.monotonic() + args.timeout
        # The first worker to record a task is killed once it has recorded three.
        first = wait_for(lambda: len(read_records(records)) >= 3, deadline, workers)
        killed_pid = read_records(records)[0][3] if first else None
        killed = [(p, log) for p, log in workers if p.pid == killed_pid]
        checks.check(bool(killed), "a crash worker ran tasks before the kill",
                     f"records {read_records(records)[:5]}")
        for process, _ in killed:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        killed_at = time.monotonic()
        survivors = [w for w in workers if w not in killed]

        def all_ran():
            return {i for k, _, i, _ in read_records(records)} >= set(range(args.crash_tasks))

        ran_all = wait_for(all_ran, deadline, survivors)
        url = sqs.get_queue_url(QueueName=prefix + CRASH)["QueueUrl"]
        drained = wait_for(lambda: sum(queue_depths(sqs, url).values()) == 0,
                           time.monotonic() + 10, survivors)
        print(f"after the kill, the crash tasks all ran in {time.monotonic() - killed_at:.1f} s")
    finally:
        stop_workers(workers)
        publisher.close()
    ran = read_records(records)
    runs = collections.Counter(index for _, _, index, _ in ran)
    checks.check(ran_all, f"each of the {args.crash_tasks} crash tasks ran at least once",
                 f"never ran: {sorted(set(range(args.crash_tasks)) - set(runs))[:10]}")
    received_by_killed = {index for _, _, index, pid in ran if pid == killed_pid}
    again = sorted(index for index, n in runs.items() if n > 1)
    checks.check(set(again) <= received_by_killed,
                 "the crash tasks ran exactly once, but those the killed worker had started",
                 f"ran more than once: {again}; the killed worker ran {sorted(received_by_killed)}")
    print(f"crash tasks run again after the kill: {again}")
    checks.check(drained, "the crash queue is empty after the run",
                 str(queue_depths(sqs, url)))


def delete_queues(sqs, prefix):
    try:
        for url in sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", []):
            sqs.delete_queue(QueueUrl=url)
    except ClientError as error:
        print(f"could not delete the queues {prefix}*: {error}")


if __name__ == "__main__":
    sys.exit(main())
