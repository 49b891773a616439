#!/usr/bin/python3
"""Retention and DeleteRecords changed by clients at runtime (docs/broker.md, "Topic configs and
DeleteRecords"): AlterConfigs (confluent-kafka) sets retention.bytes on a topic with data and the
low watermark rises within seconds, consumers (confluent-kafka, kcat) start there, a fetch below
it is OFFSET_OUT_OF_RANGE, and a restart keeps it; refused changes store nothing;
IncrementalAlterConfigs and DeleteRecords (kafka-python's network client with the two requests
defined here: no installed Python client has them) round-trip and survive a SIGKILL.

    test_retention.py --skiff build/src/cli/skiff [--store local|s3]
"""
import glob
import os
import subprocess
import time

import broker
import ckutil
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import ConfigResource

# Small segments, deleted soon after they leave the log, so retention shows within seconds.
SERVE_ARGS = ["--auto-create-topics", "false", "--segment-bytes", "4096", "--file-delete-delay-ms", "100"]


def watermarks(b, topic, partition=0):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "skiff-retention-wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def set_configs(b, topic, configs, validate_only=False):
    """AlterConfigs: the topic's configs become exactly `configs`. Raises KafkaException."""
    a = ckutil.admin(b)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=configs)
    return a.alter_configs([res], validate_only=validate_only, request_timeout=30)[res].result(30)


def topic_configs(b, topic):
    a = ckutil.admin(b)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: (e.value, e.is_default) for k, e in a.describe_configs([res])[res].result(30).items()}


def first_from_beginning(b, topic):
    """(offset, value) of the first record a consumer reads from OFFSET_BEGINNING."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "skiff-retention-begin",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise AssertionError(f"consuming from the beginning: {m.error()}")
            return m.offset(), m.value()
        raise AssertionError("no record read from the beginning within 30 s")
    finally:
        c.close()


def fetch_below_start(b, topic, offset):
    """The error a fetch at `offset` gets with auto.offset.reset=error."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "skiff-retention-below",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return m.error()
            raise AssertionError(f"a fetch at {offset}, below the log start, read offset {m.offset()}")
        raise AssertionError(f"a fetch at {offset} got neither a record nor an error within 30 s")
    finally:
        c.close()


def kcat_first_offset(b, topic):
    p = subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                        "-c", "1", "-e", "-q", "-f", "%o\\n"], capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"kcat -C exited {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}")
    return int(p.stdout.decode().split()[0])


def segment_files(b, topic):
    """The partition's .kfs objects (local store only)."""
    return sorted(glob.glob(os.path.join(b.data_dir, "default", topic, "0", "*.kfs")))


def produce_in_flushes(b, topic, flushes, per_flush):
    """flushes x per_flush records, value "v{i}" padded to 120 bytes; each flush acknowledged
    (acks=all, so stored) before the next, which gives several segments."""
    for f in range(flushes):
        msgs = [(0, f"k{i}".encode(), f"v{i}-".encode().ljust(120, b"x"), None)
                for i in range(f * per_flush, (f + 1) * per_flush)]
        ckutil.produce_all(b, topic, msgs)


def stable_low(b, topic, settle=3.0, timeout=30):
    """Waits until the low watermark stops moving for `settle` seconds; returns it."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        low, _ = watermarks(b, topic)
        if low != last:
            last, since = low, time.monotonic()
        elif time.monotonic() - since >= settle:
            return low
        time.sleep(0.2)
    raise AssertionError(f"the low watermark of {topic} kept moving for {timeout} s (last {last})")


def test_retention_bytes_set_live(t):
    b = t.broker(extra_args=SERVE_ARGS)
    topic = t.topic("retention")
    ckutil.create_topic(b, topic, 1)
    produce_in_flushes(b, topic, 10, 20)
    low, high = watermarks(b, topic)
    if (low, high) != (0, 200):
        raise AssertionError(f"watermarks after 200 records: {(low, high)}")
    before = segment_files(b, topic) if b.store == "local" else []
    t.log(f"200 records stored in {len(before) or 'several'} segments")

    set_configs(b, topic, {"retention.bytes": "5000"})
    cfg = topic_configs(b, topic)
    if cfg["retention.bytes"] != ("5000", False):
        raise AssertionError(f"describe_configs after the change: retention.bytes {cfg['retention.bytes']}")
    low = broker.wait_until(lambda: watermarks(b, topic)[0], 20, "the low watermark to rise above 0")
    low = stable_low(b, topic)
    if not 0 < low < 200:
        raise AssertionError(f"low watermark {low} after retention.bytes=5000 (high 200)")
    t.log(f"retention.bytes=5000: the low watermark rose to {low}")

    off, value = first_from_beginning(b, topic)
    if (off, value[:len(f"v{low}-")]) != (low, f"v{low}-".encode()):
        raise AssertionError(f"a consumer from the beginning read offset {off} ({value[:12]!r}), expected {low}")
    if kcat_first_offset(b, topic) != low:
        raise AssertionError(f"kcat -o beginning does not start at {low}")
    err = fetch_below_start(b, topic, 0)
    if err.code() != KafkaError._AUTO_OFFSET_RESET or "out of range" not in err.str().lower():
        raise AssertionError(f"a fetch below the log start: {err}, expected offset out of range")
    t.log("confluent-kafka and kcat start at the low watermark; below it: offset out of range")

    if b.store == "local":
        broker.wait_until(lambda: len(segment_files(b, topic)) < len(before), 20,
                          "the segments below the log start to be deleted")

    b.stop()  # SIGTERM
    b.start()
    b.wait_restored()
    ckutil.wait_partitions(b, topic, 1)
    if watermarks(b, topic) != (low, 200):
        raise AssertionError(f"after a restart the watermarks are {watermarks(b, topic)}, expected {(low, 200)}")
    if first_from_beginning(b, topic)[0] != low:
        raise AssertionError("after a restart a consumer from the beginning does not start at the low watermark")
    t.log("a restart keeps the low watermark")

    # Back to unlimited: what is left stays, and new records are kept.
    set_configs(b, topic, {})
    produce_in_flushes(b, topic, 2, 20)
    time.sleep(2)
    if watermarks(b, topic) != (low, 240):
        raise AssertionError(f"with retention.bytes back to its default: watermarks {watermarks(b, topic)}")
    b.stop()


def test_refused_changes_store_nothing(t):
    b = t.broker(extra_args=SERVE_ARGS)
    topic = t.topic("refused")
    ckutil.create_topic(b, topic, 1)
    set_configs(b, topic, {"retention.ms": "3600000"})
    err = ckutil.refused(lambda: set_configs(b, topic, {"retention.ms": "-5"}), KafkaError.INVALID_CONFIG, "retention.ms=-5")
    t.log(f"retention.ms=-5: {err.name()} ({err.str()})")
    ckutil.refused(lambda: set_configs(b, topic, {"retention.bytes": "much"}), KafkaError.INVALID_CONFIG,
            "retention.bytes=much")
    err = ckutil.refused(lambda: set_configs(b, topic, {"retention.msec": "1"}), KafkaError.INVALID_CONFIG,
                  "an unknown config")
    if "retention.msec" not in err.str():
        raise AssertionError(f"the refusal of an unknown config does not name it: {err.str()}")
    set_configs(b, topic, {"retention.ms": "1000"}, validate_only=True)
    ckutil.refused(lambda: set_configs(b, t.topic("missing"), {"retention.ms": "1"}), KafkaError.UNKNOWN_TOPIC_OR_PART,
            "a topic that does not exist")
    a = ckutil.admin(b)
    res = ConfigResource(ConfigResource.Type.BROKER, "0", set_config={"log.retention.ms": "1000"})
    err = ckutil.refused(lambda: a.alter_configs([res], request_timeout=30)[res].result(30), KafkaError.INVALID_REQUEST,
                  "a broker config")
    t.log(f"a broker config: {err.name()} ({err.str()})")
    cfg = topic_configs(b, topic)
    if cfg["retention.ms"] != ("3600000", False) or cfg["retention.bytes"][1] is not True:
        raise AssertionError(f"after refused and validate-only changes: {cfg['retention.ms']}, {cfg['retention.bytes']}")
    b.restart()
    if topic_configs(b, topic)["retention.ms"] != ("3600000", False):
        raise AssertionError("the stored retention.ms changed across a restart")
    b.stop()


# ---- IncrementalAlterConfigs and DeleteRecords with kafka-python's client ----------------------

def kafka_python_requests():
    """IncrementalAlterConfigs v0 and DeleteRecords v0, which kafka-python 2.0.2 does not define."""
    from kafka.protocol.api import Request, Response
    from kafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Int64, Schema, String

    class IncrementalAlterConfigsResponse_v0(Response):
        API_KEY = 44
        API_VERSION = 0
        SCHEMA = Schema(
            ('throttle_time_ms', Int32),
            ('responses', Array(('error_code', Int16), ('error_message', String('utf-8')),
                                ('resource_type', Int8), ('resource_name', String('utf-8')))))

    class IncrementalAlterConfigsRequest_v0(Request):
        API_KEY = 44
        API_VERSION = 0
        RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
        SCHEMA = Schema(
            ('resources', Array(('resource_type', Int8), ('resource_name', String('utf-8')),
                                ('configs', Array(('name', String('utf-8')), ('config_operation', Int8),
                                                  ('value', String('utf-8')))))),
            ('validate_only', Boolean))

    class DeleteRecordsResponse_v0(Response):
        API_KEY = 21
        API_VERSION = 0
        SCHEMA = Schema(
            ('throttle_time_ms', Int32),
            ('topics', Array(('name', String('utf-8')),
                             ('partitions', Array(('partition_index', Int32), ('low_watermark', Int64),
                                                  ('error_code', Int16))))))

    class DeleteRecordsRequest_v0(Request):
        API_KEY = 21
        API_VERSION = 0
        RESPONSE_TYPE = DeleteRecordsResponse_v0
        SCHEMA = Schema(
            ('topics', Array(('name', String('utf-8')),
                             ('partitions', Array(('partition_index', Int32), ('offset', Int64))))),
            ('timeout_ms', Int32))

    return IncrementalAlterConfigsRequest_v0, DeleteRecordsRequest_v0


class KafkaPythonAdmin:
    """kafka-python's admin client sending requests it has no method for (its private
    _send_request_to_node; skiff is a single broker, every node is the leader)."""

    def __init__(self, b):
        from kafka.admin import KafkaAdminClient
        self.a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=30000)
        self.incremental_request, self.delete_request = kafka_python_requests()

    def send(self, req):
        fut = self.a._send_request_to_node(self.a._client.least_loaded_node(), req)
        self.a._wait_for_futures([fut])
        return fut.value

    def incremental(self, topic, ops, validate_only=False):
        """ops: (name, operation, value); returns (error_code, error_message)."""
        r = self.send(self.incremental_request(resources=[(2, topic, list(ops))], validate_only=validate_only))
        code, message, _, _ = r.responses[0]
        return code, message

    def delete_records(self, topic, offset):
        """Returns (low_watermark, error_code) of partition 0."""
        r = self.send(self.delete_request(topics=[(topic, [(0, offset)])], timeout_ms=10000))
        _, low, code = r.topics[0][1][0]
        return low, code

    def close(self):
        self.a.close()


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_CONFIG, INVALID_REQUEST, OFFSET_OUT_OF_RANGE = 40, 42, 1


def test_incremental_alter_configs_and_delete_records(t):
    b = t.broker(extra_args=SERVE_ARGS)
    topic = t.topic("incremental")
    ckutil.create_topic(b, topic, 1)
    produce_in_flushes(b, topic, 3, 20)
    kp = KafkaPythonAdmin(b)
    try:
        if kp.incremental(topic, [("retention.ms", SET, "3600000"), ("cleanup.policy", APPEND, "compact")]) \
                != (0, None):
            raise AssertionError("IncrementalAlterConfigs SET + APPEND refused")
        cfg = topic_configs(b, topic)
        if cfg["retention.ms"] != ("3600000", False) or cfg["cleanup.policy"] != ("delete,compact", False):
            raise AssertionError(f"after SET and APPEND: {cfg['retention.ms']}, {cfg['cleanup.policy']}")
        if kp.incremental(topic, [("retention.ms", DELETE, None), ("cleanup.policy", SUBTRACT, "compact")]) \
                != (0, None):
            raise AssertionError("IncrementalAlterConfigs DELETE + SUBTRACT refused")
        cfg = topic_configs(b, topic)
        if cfg["retention.ms"][1] is not True or cfg["cleanup.policy"] != ("delete", False):
            raise AssertionError(f"after DELETE and SUBTRACT: {cfg['retention.ms']}, {cfg['cleanup.policy']}")
        code, message = kp.incremental(topic, [("retention.ms", APPEND, "5")])
        if code != INVALID_CONFIG:
            raise AssertionError(f"APPEND to retention.ms: error {code} ({message}), expected INVALID_CONFIG")
        code, message = kp.incremental(topic, [("retention.ms", SET, "-5")])
        if code != INVALID_CONFIG:
            raise AssertionError(f"SET retention.ms=-5: error {code} ({message}), expected INVALID_CONFIG")
        if kp.incremental(topic, [("retention.ms", SET, None)])[0] != INVALID_REQUEST:
            raise AssertionError("SET with a null value is not INVALID_REQUEST")
        if kp.incremental(topic, [("retention.ms", SET, "7")], validate_only=True) != (0, None):
            raise AssertionError("a valid validate_only IncrementalAlterConfigs refused")
        if topic_configs(b, topic)["retention.ms"][1] is not True:
            raise AssertionError("a refused or validate_only change was stored")
        t.log("IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT; INVALID_CONFIG and INVALID_REQUEST")

        if kp.delete_records(topic, 25) != (25, 0):
            raise AssertionError("DeleteRecords to 25 did not answer low watermark 25")
        if kp.delete_records(topic, 61)[1] != OFFSET_OUT_OF_RANGE:
            raise AssertionError("DeleteRecords past the high watermark is not OFFSET_OUT_OF_RANGE")
        if watermarks(b, topic) != (25, 60):
            raise AssertionError(f"watermarks after DeleteRecords: {watermarks(b, topic)}")
    finally:
        kp.close()
    # The answer came once the new start was stored: even a SIGKILL keeps it.
    b.kill()
    b.start()
    b.wait_restored()
    ckutil.wait_partitions(b, topic, 1)
    if watermarks(b, topic) != (25, 60):
        raise AssertionError(f"after SIGKILL and restart: watermarks {watermarks(b, topic)}, expected (25, 60)")
    if first_from_beginning(b, topic)[0] != 25:
        raise AssertionError("after SIGKILL a consumer from the beginning does not start at 25")
    t.log("DeleteRecords: low watermark 25, kept across SIGKILL")
    b.stop()


if __name__ == "__main__":
    broker.main([(test_retention_bytes_set_live, 180), (test_refused_changes_store_nothing, 120),
                 (test_incremental_alter_configs_and_delete_records, 120)])
