#!/usr/bin/env python3
"""Checks an SQS-compatible endpoint with the real Python clients: boto3 and the AWS CLI v1.

Each check prints PASS or FAIL with its reason, one line each; the exit status is 1 when any
check failed (2 on bad usage). Every queue is created under a prefix of its own
(`py<time><random>-...`) and deleted at the end, so runs do not see each other's queues.

The checks follow SQS's API as AWS documents it: CreateQueue (idempotent with the same
attributes, QueueAlreadyExists otherwise), GetQueueUrl, SendMessage with typed message attributes
(String, Number, Binary and custom types) and the MD5 digests SQS computes, ReceiveMessage with
system attributes, ChangeMessageVisibility, DeleteMessage (repeated: a success), SQS's default
MaximumMessageSize and error codes, a FIFO queue's order and
deduplication (explicit ids and content-based), a dead-letter queue filled by the redrive policy,
ListDeadLetterSourceQueues, a message move task back to the source (Start, List,
CancelMessageMoveTask), ListQueues with a prefix and pages, DeleteQueue, the same through
the AWS CLI, and requests refused for a wrong secret (SignatureDoesNotMatch) or an unknown access
key (InvalidClientTokenId). With --open (a server without a key file) the refusals are replaced
by a check that any credentials are accepted.

Run it through scripts/sqs-clients, which provides the pinned clients; see --help.
"""

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import time
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

QUEUE_EXISTS_CODES = {"QueueAlreadyExists", "QueueNameExists"}
NO_QUEUE_CODES = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
CLI_TIMEOUT_SECONDS = 60


class CheckFailed(Exception):
    """A check found the endpoint answering otherwise than SQS would."""


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def expect_equal(actual, expected, what):
    expect(actual == expected, f"{what}: expected {expected!r}, got {actual!r}")


def error_code(call):
    """The SQS error code the call fails with; fails the check when it succeeds."""
    try:
        call()
    except ClientError as error:
        return error.response.get("Error", {}).get("Code", "")
    raise CheckFailed("the call succeeded, but an error was expected")


def md5_of_body(body):
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def md5_of_attributes(attributes):
    """MD5OfMessageAttributes as SQS computes it: for each attribute, by name in ascending order,
    the name, the data type, a transport byte (1 for String and Number, 2 for Binary) and the
    value, each string or binary prefixed with its length as a 4-byte big-endian integer."""

    def sized(data):
        return struct.pack(">I", len(data)) + data

    encoded = b""
    for name in sorted(attributes):
        attribute = attributes[name]
        encoded += sized(name.encode("utf-8")) + sized(attribute["DataType"].encode("utf-8"))
        if "BinaryValue" in attribute:
            encoded += b"\x02" + sized(attribute["BinaryValue"])
        else:
            encoded += b"\x01" + sized(attribute["StringValue"].encode("utf-8"))
    return hashlib.md5(encoded).hexdigest()


class Run:
    """One run of the checks against one endpoint, with the queues it made."""

    def __init__(self, args):
        self.args = args
        self.prefix = f"py{int(time.time())}{uuid.uuid4().hex[:6]}"
        self.sqs = self.client(args.access_key_id, args.secret_access_key)
        self.queues = []
        self.failed = []
        # What the dead-letter check leaves for the move task check: the dead-letter queue's ARN
        # and the source's URL.
        self.dead_letters = None

    def client(self, access_key_id, secret_access_key):
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=40,
        )
        return boto3.session.Session().client(
            "sqs",
            endpoint_url=self.args.endpoint,
            region_name=self.args.region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            verify=self.args.ca_cert or True,
            config=config,
        )

    def check(self, name, function):
        try:
            function()
        except Exception as error:  # a check fails on whatever it raises, with its message
            self.failed.append(name)
            print(f"FAIL  {name}: {type(error).__name__}: {error}", flush=True)
        else:
            print(f"PASS  {name}", flush=True)

    def create(self, suffix, attributes=None):
        name = f"{self.prefix}-{suffix}"
        url = self.sqs.create_queue(QueueName=name, Attributes=attributes or {})["QueueUrl"]
        self.queues.append(url)
        expect(url.endswith(f"/{name}"), f"the queue URL {url} does not end with /{name}")
        return url

    def attribute(self, url, name):
        answer = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])
        return answer["Attributes"][name]

    def receive(self, url, wait_seconds, visibility_seconds=30):
        answer = self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=visibility_seconds,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        return answer.get("Messages", [])

    def receive_one(self, url):
        messages = self.receive(url, wait_seconds=5)
        expect_equal(len(messages), 1, "messages received")
        return messages[0]

    # The checks, in the order they run.

    def create_queue(self):
        url = self.create("std", {"VisibilityTimeout": "30"})
        name = f"{self.prefix}-std"
        expect_equal(self.sqs.get_queue_url(QueueName=name)["QueueUrl"], url, "GetQueueUrl")
        again = self.sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30"})
        expect_equal(again["QueueUrl"], url, "CreateQueue again with the same attributes")
        code = error_code(
            lambda: self.sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})
        )
        expect(code in QUEUE_EXISTS_CODES, f"CreateQueue with other attributes gave {code!r}")
        expect_equal(self.attribute(url, "VisibilityTimeout"), "30", "VisibilityTimeout")
        arn = self.attribute(url, "QueueArn")
        expect(arn.startswith("arn:aws:sqs:") and arn.endswith(f":{name}"), f"QueueArn {arn}")

    def typed_attributes_round_trip(self):
        url = self.create("typed")
        body = "hello from boto3: caf\u00e9 \u2713"
        attributes = {
            "Text": {"DataType": "String", "StringValue": "h\u00e9llo w\u00f6rld"},
            "Amount": {"DataType": "Number", "StringValue": "-12.5e3"},
            "Blob": {"DataType": "Binary", "BinaryValue": bytes([0, 1, 127, 128, 254, 255])},
            "Ratio": {"DataType": "Number.float", "StringValue": "3.14"},
            "Label": {"DataType": "String.label", "StringValue": "x"},
        }
        sent = self.sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
        expect(sent.get("MessageId"), "SendMessage returned no MessageId")
        expect_equal(sent.get("MD5OfMessageBody"), md5_of_body(body), "sent MD5OfMessageBody")
        expect_equal(
            sent.get("MD5OfMessageAttributes"),
            md5_of_attributes(attributes),
            "sent MD5OfMessageAttributes",
        )
        message = self.receive_one(url)
        expect_equal(message["MessageId"], sent["MessageId"], "MessageId")
        expect_equal(message["Body"], body, "Body")
        expect_equal(message["MD5OfBody"], md5_of_body(body), "received MD5OfBody")
        expect_equal(message.get("MessageAttributes"), attributes, "MessageAttributes")
        expect_equal(
            message.get("MD5OfMessageAttributes"),
            md5_of_attributes(attributes),
            "received MD5OfMessageAttributes",
        )
        system = message.get("Attributes", {})
        for name in ("SenderId", "SentTimestamp", "ApproximateFirstReceiveTimestamp"):
            expect(name in system, f"system attribute {name} missing from {system}")
        expect_equal(system.get("ApproximateReceiveCount"), "1", "ApproximateReceiveCount")

    def receive_change_visibility_and_delete(self):
        url = self.create("delete")
        plain = self.sqs.send_message(QueueUrl=url, MessageBody="no attributes")
        expect(
            "MD5OfMessageAttributes" not in plain,
            "MD5OfMessageAttributes is sent for a message without attributes",
        )
        first = self.receive_one(url)
        expect_equal(self.receive(url, wait_seconds=1), [], "a second receive while leased")
        self.sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
        )
        second = self.receive_one(url)
        expect_equal(second["MessageId"], first["MessageId"], "the released message")
        expect_equal(
            second["Attributes"].get("ApproximateReceiveCount"), "2", "ApproximateReceiveCount"
        )
        self.sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
        expect_equal(self.receive(url, wait_seconds=2), [], "a receive after the delete")

    def sqs_answers(self):
        """SQS's own answers: its default message size (1 MiB since 2025), a delete retried
        with the same receipt handle (a success, as an SDK retry needs), a visibility change of
        a deleted message (InvalidParameterValue), a FIFO send without a group
        (MissingParameter), a bare queue name as QueueUrl."""
        url = self.create("answers")
        expect_equal(self.attribute(url, "MaximumMessageSize"), "1048576", "MaximumMessageSize")
        name = url.rsplit("/", 1)[1]
        self.sqs.send_message(QueueUrl=name, MessageBody="by name")
        receipt = self.receive_one(url)["ReceiptHandle"]
        for _ in range(2):
            self.sqs.delete_message(QueueUrl=url, ReceiptHandle=receipt)
        batch = self.sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": "again", "ReceiptHandle": receipt}]
        )
        expect_equal([e["Id"] for e in batch.get("Successful", [])], ["again"], "a batch retry")
        code = error_code(
            lambda: self.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=5
            )
        )
        expect_equal(code, "InvalidParameterValue", "a visibility change of a deleted message")
        fifo = self.create("answers.fifo", {"FifoQueue": "true"})
        code = error_code(
            lambda: self.sqs.send_message(
                QueueUrl=fifo, MessageBody="x", MessageDeduplicationId="d"
            )
        )
        expect_equal(code, "MissingParameter", "a FIFO send without MessageGroupId")

    def fifo_order_and_deduplication(self):
        url = self.create("order.fifo", {"FifoQueue": "true"})
        ids, sequence_numbers = [], []
        for index in range(5):
            sent = self.sqs.send_message(
                QueueUrl=url,
                MessageBody=f"m{index}",
                MessageGroupId="g",
                MessageDeduplicationId=f"d{index}",
            )
            ids.append(sent["MessageId"])
            sequence_numbers.append(int(sent["SequenceNumber"]))
        expect(
            sequence_numbers == sorted(set(sequence_numbers)),
            f"sequence numbers do not increase: {sequence_numbers}",
        )
        duplicate = self.sqs.send_message(
            QueueUrl=url, MessageBody="m1 again", MessageGroupId="g", MessageDeduplicationId="d1"
        )
        expect_equal(duplicate["MessageId"], ids[1], "MessageId of a deduplicated send")
        bodies = []
        for _ in range(5):
            messages = self.receive(url, wait_seconds=2)
            for message in messages:
                bodies.append(message["Body"])
                expect_equal(message["Attributes"].get("MessageGroupId"), "g", "MessageGroupId")
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if len(bodies) >= 5:
                break
        expect_equal(bodies, [f"m{index}" for index in range(5)], "FIFO order")
        expect_equal(self.receive(url, wait_seconds=1), [], "the duplicate delivered")

        url = self.create(
            "content.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        )
        first = self.sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
        second = self.sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
        expect_equal(second["MessageId"], first["MessageId"], "content-based deduplication")
        expect_equal(len(self.receive(url, wait_seconds=2)), 1, "messages of a deduplicated pair")

    def high_throughput_policy_and_trace_header(self):
        """DeduplicationScope=messageGroup with FifoThroughputLimit=perMessageGroupId takes one
        deduplication ID once in each group; a Policy is kept as given and removed by "";
        AWSTraceHeader comes back with its message, with MD5OfMessageSystemAttributes."""
        url = self.create(
            "fast.fifo",
            {
                "FifoQueue": "true",
                "DeduplicationScope": "messageGroup",
                "FifoThroughputLimit": "perMessageGroupId",
            },
        )
        expect_equal(self.attribute(url, "DeduplicationScope"), "messageGroup", "the scope")
        ids = [
            self.sqs.send_message(
                QueueUrl=url, MessageBody=group, MessageGroupId=group,
                MessageDeduplicationId="same",
            )["MessageId"]
            for group in ("a", "b", "a")
        ]
        expect(ids[0] != ids[1], "the same deduplication ID in two groups is two messages")
        expect_equal(ids[2], ids[0], "MessageId of a send deduplicated within its group")
        code = error_code(
            lambda: self.sqs.set_queue_attributes(
                QueueUrl=url, Attributes={"DeduplicationScope": "queue"}
            )
        )
        expect_equal(code, "InvalidAttributeValue", "perMessageGroupId with the queue scope")

        policy = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow"}]})
        url = self.create("policy", {"Policy": policy})
        expect_equal(self.attribute(url, "Policy"), policy, "the Policy")
        self.sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
        answer = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        expect("Policy" not in answer.get("Attributes", {}), "a Policy set to \"\" is gone")

        header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
        sent = self.sqs.send_message(
            QueueUrl=url, MessageBody="traced",
            MessageSystemAttributes={
                "AWSTraceHeader": {"DataType": "String", "StringValue": header}
            },
        )
        expect_equal(
            sent.get("MD5OfMessageSystemAttributes"),
            md5_of_attributes({"AWSTraceHeader": {"DataType": "String", "StringValue": header}}),
            "MD5OfMessageSystemAttributes",
        )
        message = self.receive_one(url)
        expect_equal(message["Attributes"].get("AWSTraceHeader"), header, "AWSTraceHeader")

    def dead_letter_queue_redrive(self):
        dead = self.create("dlq")
        dead_arn = self.attribute(dead, "QueueArn")
        policy = {"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1}
        source = self.create("src", {"RedrivePolicy": json.dumps(policy), "VisibilityTimeout": "1"})
        source_arn = self.attribute(source, "QueueArn")
        stored = json.loads(self.attribute(source, "RedrivePolicy"))
        expect_equal(stored.get("deadLetterTargetArn"), dead_arn, "RedrivePolicy target")
        expect_equal(int(stored.get("maxReceiveCount", 0)), 1, "RedrivePolicy maxReceiveCount")
        sent = self.sqs.send_message(QueueUrl=source, MessageBody="poison")
        self.receive(source, wait_seconds=5, visibility_seconds=1)
        moved = []
        deadline = time.monotonic() + 20
        while not moved and time.monotonic() < deadline:
            again = self.receive(source, wait_seconds=1, visibility_seconds=1)
            expect_equal(again, [], "a delivery past maxReceiveCount")
            moved = self.receive(dead, wait_seconds=1)
        expect_equal(len(moved), 1, "messages in the dead-letter queue after 20 s")
        expect_equal(moved[0]["MessageId"], sent["MessageId"], "the dead-lettered message")
        expect_equal(moved[0]["Body"], "poison", "the dead-lettered body")
        expect_equal(
            moved[0]["Attributes"].get("DeadLetterQueueSourceArn"),
            source_arn,
            "DeadLetterQueueSourceArn",
        )
        sources = self.sqs.list_dead_letter_source_queues(QueueUrl=dead).get("queueUrls", [])
        expect_equal(sources, [source], "ListDeadLetterSourceQueues")
        self.sqs.change_message_visibility(
            QueueUrl=dead, ReceiptHandle=moved[0]["ReceiptHandle"], VisibilityTimeout=0
        )
        self.dead_letters = (dead_arn, source)

    def message_move_task(self):
        expect(self.dead_letters is not None, "the dead-letter check left a dead letter")
        dead_arn, source = self.dead_letters
        handle = self.sqs.start_message_move_task(SourceArn=dead_arn)["TaskHandle"]
        expect(handle, "StartMessageMoveTask gave no TaskHandle")
        task = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            results = self.sqs.list_message_move_tasks(SourceArn=dead_arn).get("Results", [])
            expect_equal(len(results), 1, "ListMessageMoveTasks results")
            task = results[0]
            if task["Status"] != "RUNNING":
                break
            time.sleep(0.2)
        expect_equal(task.get("Status"), "COMPLETED", "the move task's status")
        expect_equal(task.get("SourceArn"), dead_arn, "the move task's SourceArn")
        expect_equal(task.get("ApproximateNumberOfMessagesMoved"), 1, "messages moved")
        back = self.receive(source, wait_seconds=5)
        expect_equal([m["Body"] for m in back], ["poison"], "the message back in its source")
        error_code(lambda: self.sqs.cancel_message_move_task(TaskHandle=handle))

    def list_queues(self):
        everything = self.sqs.list_queues(QueueNamePrefix=self.prefix).get("QueueUrls", [])
        expect_equal(sorted(everything), sorted(self.queues), "ListQueues with the run's prefix")
        paged, token = [], None
        for _ in range(len(self.queues) + 2):
            request = {"QueueNamePrefix": self.prefix, "MaxResults": 1}
            if token:
                request["NextToken"] = token
            page = self.sqs.list_queues(**request)
            expect(len(page.get("QueueUrls", [])) <= 1, f"a page of MaxResults=1: {page}")
            paged += page.get("QueueUrls", [])
            token = page.get("NextToken")
            if not token:
                break
        expect_equal(sorted(paged), sorted(self.queues), "ListQueues page by page")
        none = self.sqs.list_queues(QueueNamePrefix=f"{self.prefix}-nothing")
        expect_equal(none.get("QueueUrls", []), [], "ListQueues with an unused prefix")

    def aws_cli(self, *arguments, access_key_id=None, secret_access_key=None):
        """Runs `aws sqs ...` with JSON output; returns (exit code, parsed stdout, stderr)."""
        environment = {
            key: value for key, value in os.environ.items() if not key.startswith("AWS_")
        }
        environment.update(
            AWS_ACCESS_KEY_ID=access_key_id or self.args.access_key_id,
            AWS_SECRET_ACCESS_KEY=secret_access_key or self.args.secret_access_key,
            AWS_DEFAULT_REGION=self.args.region,
            AWS_CONFIG_FILE=os.devnull,
            AWS_SHARED_CREDENTIALS_FILE=os.devnull,
            AWS_RETRY_MODE="standard",
            AWS_MAX_ATTEMPTS="1",
            AWS_EC2_METADATA_DISABLED="true",
        )
        command = [self.args.aws, "sqs", *arguments, "--endpoint-url", self.args.endpoint]
        command += ["--output", "json"]
        if self.args.ca_cert:
            command += ["--ca-bundle", self.args.ca_cert]
        done = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_SECONDS,
            check=False,
        )
        output = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
        return done.returncode, output, done.stderr

    def aws_cli_ok(self, *arguments):
        code, output, stderr = self.aws_cli(*arguments)
        expect(code == 0, f"aws sqs {arguments[0]} exited with {code}: {stderr.strip()}")
        return output

    def aws_cli_round_trip(self):
        name = f"{self.prefix}-cli"
        url = self.aws_cli_ok("create-queue", "--queue-name", name)["QueueUrl"]
        self.queues.append(url)
        expect_equal(
            self.aws_cli_ok("get-queue-url", "--queue-name", name)["QueueUrl"], url, "get-queue-url"
        )
        attributes = {
            "Color": {"DataType": "String", "StringValue": "blue"},
            "Count": {"DataType": "Number", "StringValue": "3"},
        }
        sent = self.aws_cli_ok(
            "send-message",
            "--queue-url",
            url,
            "--message-body",
            "from the cli",
            "--message-attributes",
            json.dumps(attributes),
        )
        expect_equal(sent.get("MD5OfMessageBody"), md5_of_body("from the cli"), "MD5OfMessageBody")
        expect_equal(
            sent.get("MD5OfMessageAttributes"),
            md5_of_attributes(attributes),
            "MD5OfMessageAttributes",
        )
        received = self.aws_cli_ok(
            "receive-message",
            "--queue-url",
            url,
            "--wait-time-seconds",
            "5",
            "--message-attribute-names",
            "All",
            "--message-system-attribute-names",
            "All",
        )
        messages = received.get("Messages", [])
        expect_equal(len(messages), 1, "messages received")
        expect_equal(messages[0]["Body"], "from the cli", "Body")
        expect_equal(messages[0].get("MessageAttributes"), attributes, "MessageAttributes")
        self.aws_cli_ok(
            "delete-message", "--queue-url", url, "--receipt-handle", messages[0]["ReceiptHandle"]
        )
        listed = self.aws_cli_ok("list-queues", "--queue-name-prefix", name).get("QueueUrls", [])
        expect_equal(listed, [url], "list-queues")

    def bad_signatures(self):
        wrong_secret = self.client(self.args.access_key_id, "not-" + self.args.secret_access_key)
        code = error_code(lambda: wrong_secret.list_queues(QueueNamePrefix=self.prefix))
        expect_equal(code, "SignatureDoesNotMatch", "boto3 with a wrong secret")
        unknown = self.client(self.args.unknown_access_key_id, self.args.secret_access_key)
        code = error_code(lambda: unknown.list_queues(QueueNamePrefix=self.prefix))
        expect_equal(code, "InvalidClientTokenId", "boto3 with an unknown access key")
        for expected, credentials in [
            (
                "SignatureDoesNotMatch",
                (self.args.access_key_id, "not-" + self.args.secret_access_key),
            ),
            (
                "InvalidClientTokenId",
                (self.args.unknown_access_key_id, self.args.secret_access_key),
            ),
        ]:
            code, _, stderr = self.aws_cli(
                "list-queues", access_key_id=credentials[0], secret_access_key=credentials[1]
            )
            expect(
                code != 0 and f"({expected})" in stderr,
                f"aws sqs list-queues: {code} {stderr.strip()}",
            )

    def any_credentials_in_open_mode(self):
        anyone = self.client("AKIA" + uuid.uuid4().hex[:12].upper(), uuid.uuid4().hex)
        listed = anyone.list_queues(QueueNamePrefix=self.prefix).get("QueueUrls", [])
        expect_equal(sorted(listed), sorted(self.queues), "ListQueues with made-up credentials")

    def delete_queues(self):
        # The newest first: a source goes before the dead-letter queue it names.
        for url in reversed(self.queues):
            self.sqs.delete_queue(QueueUrl=url)
        for url in self.queues:
            name = url.rsplit("/", 1)[-1]
            code = error_code(lambda: self.sqs.get_queue_url(QueueName=name))
            expect(code in NO_QUEUE_CODES, f"GetQueueUrl of the deleted {name} gave {code!r}")
        self.queues = []


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--endpoint", required=True, help="the endpoint URL, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument("--region", default="local", help="the server's --region (default: local)")
    parser.add_argument(
        "--access-key-id",
        default=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        help="an access key id of the key file (default: $AWS_ACCESS_KEY_ID, else test)",
    )
    parser.add_argument(
        "--secret-access-key",
        default=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        help="its secret (default: $AWS_SECRET_ACCESS_KEY, else test)",
    )
    parser.add_argument(
        "--unknown-access-key-id",
        default="AKIAUNKNOWN000000000",
        help="an access key id the key file does not hold",
    )
    parser.add_argument(
        "--open",
        action="store_true",
        help="the server has no key file: check that any credentials work instead of refusals",
    )
    parser.add_argument("--ca-cert", help="PEM CA certificate of an https endpoint")
    parser.add_argument("--aws", default="aws", help="the AWS CLI to run (default: aws on PATH)")
    return parser.parse_args()


def main():
    run = Run(arguments())
    print(f"checking {run.args.endpoint} with queues named {run.prefix}-*", flush=True)
    checks = [
        ("CreateQueue, GetQueueUrl, QueueAlreadyExists", run.create_queue),
        (
            "SendMessage and ReceiveMessage with typed attributes and MD5s",
            run.typed_attributes_round_trip,
        ),
        (
            "ReceiveMessage, ChangeMessageVisibility, DeleteMessage",
            run.receive_change_visibility_and_delete,
        ),
        ("SQS's defaults, repeated deletes and its error codes", run.sqs_answers),
        ("FIFO order and deduplication", run.fifo_order_and_deduplication),
        (
            "per-group deduplication, Policy and AWSTraceHeader",
            run.high_throughput_policy_and_trace_header,
        ),
        ("dead-letter queue by redrive policy", run.dead_letter_queue_redrive),
        ("message move task back to the source", run.message_move_task),
        ("ListQueues with a prefix and pages", run.list_queues),
        ("AWS CLI round trip", run.aws_cli_round_trip),
    ]
    if run.args.open:
        checks.append(("open mode takes any credentials", run.any_credentials_in_open_mode))
    else:
        checks.append(("bad signatures refused", run.bad_signatures))
    checks.append(("DeleteQueue", run.delete_queues))
    for name, check in checks:
        run.check(name, check)
    print(f"{len(checks)} checks, {len(run.failed)} failed", flush=True)
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
