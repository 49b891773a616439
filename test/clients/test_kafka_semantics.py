#!/usr/bin/python3
"""Kafka's error semantics where skiff used to differ (issue 16), through confluent-kafka and,
where no client exposes the exact answer, raw requests (test_admin_apis.exchange).

  - OffsetCommit for a topic that does not exist, or a partition past a topic's count, is
    UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleOffsetCommitRequest,
    KafkaApisTest.testOffsetCommitWithInvalidPartition); the known partitions of the same
    request are committed. A confluent-kafka Consumer.commit sees the error.
  - OffsetFetch for unknown topics and partitions: offset -1 and no error in v1+ (the
    coordinator has none), UNKNOWN_TOPIC_OR_PARTITION in v0 (handleOffsetFetchRequestFromZookeeper).
  - CreateTopics takes every topic config Kafka defines (the issue's delete.retention.ms among
    them), a key Kafka does not define is INVALID_CONFIG, a value as Kafka validates it
    (min.insync.replicas=0) INVALID_CONFIG; the same name again TOPIC_ALREADY_EXISTS
    (CreateTopicsRequestTest); DescribeConfigs lists every Kafka topic config with its source
    (set on the topic: DYNAMIC_TOPIC_CONFIG; a serve flag: STATIC_BROKER_CONFIG; else
    DEFAULT_CONFIG); AlterConfigs takes a config without meaning for a bucket (preallocate) and
    refuses an unknown key with INVALID_CONFIG; message.timestamp.before.max.ms is enforced.
  - CreatePartitions to fewer partitions is INVALID_PARTITIONS, for an unknown topic
    UNKNOWN_TOPIC_OR_PARTITION (CreatePartitionsRequestTest); DeleteTopics of an unknown topic
    UNKNOWN_TOPIC_OR_PARTITION (DeleteTopicsRequestTest).

    test_kafka_semantics.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, create_topic, producer, refused  # noqa: E402
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import ConfigResource, ConfigSource, NewPartitions, NewTopic  # noqa: E402
from test_admin_apis import _read_str, _str, exchange  # noqa: E402
from test_produce_validation import _deliver  # noqa: E402

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
NONE, UNKNOWN_TOPIC_OR_PARTITION = 0, 3


def offset_commit_v2(b, group, offsets):
    """offsets: {topic: {partition: offset}} -> {(topic, partition): error code}."""
    body = _str(group) + struct.pack(">i", -1) + _str("") + struct.pack(">q", -1)
    body += struct.pack(">i", len(offsets))
    for topic, parts in offsets.items():
        body += _str(topic) + struct.pack(">i", len(parts))
        for p, o in parts.items():
            body += struct.pack(">iq", p, o) + _str("")
    r = exchange(b, OFFSET_COMMIT, 2, 21, body, "OffsetCommit v2")
    out = {}
    for _ in range(r.take(">i")):
        topic = _read_str(r)
        for _ in range(r.take(">i")):
            p, err = r.take(">i"), r.take(">h")
            out[(topic, p)] = err
    return out


def offset_fetch(b, version, group, topics):
    """OffsetFetch v0 or v1 -> {(topic, partition): (offset, error code)}."""
    body = _str(group) + struct.pack(">i", len(topics))
    for topic, parts in topics.items():
        body += _str(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    r = exchange(b, OFFSET_FETCH, version, 22, body, f"OffsetFetch v{version}")
    out = {}
    for _ in range(r.take(">i")):
        topic = _read_str(r)
        for _ in range(r.take(">i")):
            p, offset = r.take(">i"), r.take(">q")
            _read_str(r)
            out[(topic, p)] = (offset, r.take(">h"))
    return out


def commit_error(c, tps):
    """Consumer.commit's answer for `tps`: {(topic, partition): KafkaError code or None}."""
    try:
        res = c.commit(offsets=tps, asynchronous=False)
    except KafkaException as e:
        return {(tp.topic, tp.partition): e.args[0].code() for tp in tps}
    return {(tp.topic, tp.partition): tp.error.code() if tp.error else None for tp in res}


def test_offset_commit_unknown_topic_or_partition(t):
    b = t.broker()
    topic = t.topic("orders")
    create_topic(b, topic, 2)
    group, missing = t.topic("group"), t.topic("missing")
    # The exact per-partition answer, on the wire.
    got = offset_commit_v2(b, group, {topic: {0: 10, 1: 11, 2: 12}, missing: {0: 1}})
    expected = {(topic, 0): NONE, (topic, 1): NONE, (topic, 2): UNKNOWN_TOPIC_OR_PARTITION,
                (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
    if got != expected:
        raise AssertionError(f"OffsetCommit v2: {got}, expected {expected}")
    # A client sees it (librdkafka's commit).
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        errs = commit_error(c, [TopicPartition(missing, 0, 5)])
        if errs != {(missing, 0): KafkaError.UNKNOWN_TOPIC_OR_PART}:
            raise AssertionError(f"Consumer.commit to a topic that does not exist: {errs}")
        errs = commit_error(c, [TopicPartition(topic, 1, 20)])
        if errs != {(topic, 1): None}:
            raise AssertionError(f"Consumer.commit to an existing partition: {errs}")
        committed = {(tp.topic, tp.partition): tp.offset
                     for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=20)}
        if committed != {(topic, 0): 10, (topic, 1): 20}:
            raise AssertionError(f"committed: {committed}")
    finally:
        c.close()
    # OffsetFetch: v1 (the coordinator) has no offset and no error for what does not exist,
    # v0 (ZooKeeper's, in Kafka) says UNKNOWN_TOPIC_OR_PARTITION.
    asked = {topic: [0, 2], missing: [0]}
    v1 = offset_fetch(b, 1, group, asked)
    if v1 != {(topic, 0): (10, NONE), (topic, 2): (-1, NONE), (missing, 0): (-1, NONE)}:
        raise AssertionError(f"OffsetFetch v1: {v1}")
    v0 = offset_fetch(b, 0, group, asked)
    if v0 != {(topic, 0): (10, NONE), (topic, 2): (-1, UNKNOWN_TOPIC_OR_PARTITION),
              (missing, 0): (-1, UNKNOWN_TOPIC_OR_PARTITION)}:
        raise AssertionError(f"OffsetFetch v0: {v0}")
    t.log(f"OffsetCommit {got}; OffsetFetch v0 {v0}")
    b.stop()


def _create(a, topic, partitions, config):
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)],
                         operation_timeout=30, request_timeout=30)
    try:
        fs[topic].result(30)
        return None
    except KafkaException as e:
        return e.args[0]


# Kafka's LogConfig: every topic config, each at a non-default value Kafka accepts.
EVERY_CONFIG = {
    "cleanup.policy": "delete", "compression.gzip.level": "6", "compression.lz4.level": "10",
    "compression.type": "zstd", "compression.zstd.level": "5", "delete.retention.ms": "3600000",
    "file.delete.delay.ms": "30000", "flush.messages": "1000", "flush.ms": "1000",
    "follower.replication.throttled.replicas": "*", "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "0:0", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "86400000", "max.message.bytes": "2000000", "message.downconversion.enable": "false",
    "message.format.version": "3.0-IV1", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "3600000", "message.timestamp.difference.max.ms": "3600000",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "2", "preallocate": "true", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "remote.storage.enable": "false", "retention.bytes": "100000000",
    "retention.ms": "86400000", "segment.bytes": "1048576", "segment.index.bytes": "1048576",
    "segment.jitter.ms": "1000", "segment.ms": "3600000", "unclean.leader.election.enable": "true",
}


def test_topic_configs_as_kafka_defines_them(t):
    b = t.broker(extra_args=["--retention-ms", "7200000"])
    a = admin(b)
    # The case, then every config Kafka defines at once.
    plain = t.topic("delete-retention")
    err = _create(a, plain, 1, {"delete.retention.ms": "3600000"})
    if err is not None:
        raise AssertionError(f"CreateTopics with delete.retention.ms: {err}")
    every = t.topic("every")
    err = _create(a, every, 1, EVERY_CONFIG)
    if err is not None:
        raise AssertionError(f"CreateTopics with every Kafka topic config: {err}")
    for name, config, code in [(t.topic("unknown"), {"retention.msec": "1"}, KafkaError.INVALID_CONFIG),
                               (t.topic("isr0"), {"min.insync.replicas": "0"}, KafkaError.INVALID_CONFIG),
                               (t.topic("lag"), {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
                                KafkaError.INVALID_CONFIG),
                               (plain, {}, KafkaError.TOPIC_ALREADY_EXISTS)]:
        err = _create(a, name, 1, config)
        if err is None or err.code() != code:
            raise AssertionError(f"CreateTopics {name} {config}: {err}, expected {KafkaError(code).name()}")
        t.log(f"CreateTopics {config}: {err.name()} ({err.str()})")
    # DescribeConfigs: every Kafka config, with its source.
    res = ConfigResource(ConfigResource.Type.TOPIC, plain)
    cfg = a.describe_configs([res])[res].result(30)
    missing = set(EVERY_CONFIG) - set(cfg)
    if missing:
        raise AssertionError(f"DescribeConfigs lacks {sorted(missing)}")
    expect = {"delete.retention.ms": ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
              "retention.ms": ("7200000", ConfigSource.STATIC_BROKER_CONFIG),
              "preallocate": ("false", ConfigSource.DEFAULT_CONFIG),
              "min.insync.replicas": ("1", ConfigSource.DEFAULT_CONFIG)}
    for k, (value, source) in expect.items():
        e = cfg[k]
        if e.value != value or getattr(e.source, "value", e.source) != source.value:
            raise AssertionError(f"DescribeConfigs {k}: {e.value} from {e.source}, expected {value} from {source}")
    res = ConfigResource(ConfigResource.Type.TOPIC, every)
    cfg = a.describe_configs([res])[res].result(30)
    wrong = {k: cfg[k].value for k, v in EVERY_CONFIG.items() if cfg[k].value != v}
    if wrong:
        raise AssertionError(f"DescribeConfigs of the topic with every config: {wrong}")
    # AlterConfigs: a config without meaning for a bucket is stored; an unknown key refused.
    res = ConfigResource(ConfigResource.Type.TOPIC, plain, set_config={"preallocate": "true",
                                                                       "delete.retention.ms": "1000"})
    a.alter_configs([res], request_timeout=30)[res].result(30)
    bad = ConfigResource(ConfigResource.Type.TOPIC, plain, set_config={"no.such.config": "1"})
    err = refused(lambda: a.alter_configs([bad], request_timeout=30)[bad].result(30), KafkaError.INVALID_CONFIG,
                   "AlterConfigs with an unknown key")
    if "no.such.config" not in err.str():
        raise AssertionError(f"the refusal does not name the key: {err.str()}")
    res = ConfigResource(ConfigResource.Type.TOPIC, plain)
    cfg = a.describe_configs([res])[res].result(30)
    if cfg["preallocate"].value != "true" or cfg["delete.retention.ms"].value != "1000":
        raise AssertionError(f"after AlterConfigs: {cfg['preallocate']}, {cfg['delete.retention.ms']}")
    # message.timestamp.before.max.ms is honoured (LogValidator.validateTimestamp): two hours
    # old is refused, two hours ahead (after.max.ms unset, and so unlimited) is taken.
    ts_topic = t.topic("before")
    err = _create(a, ts_topic, 1, {"message.timestamp.before.max.ms": "3600000"})
    if err is not None:
        raise AssertionError(f"CreateTopics with message.timestamp.before.max.ms: {err}")
    p = producer(b, **{"linger.ms": 0, "retries": 0})
    now = int(time.time() * 1000)
    old = _deliver(p, [(ts_topic, 0, b"k", b"old", now - 7200000)])
    ahead = _deliver(p, [(ts_topic, 0, b"k", b"ahead", now + 7200000)])
    if old[0][0] is None or old[0][0].code() != KafkaError.INVALID_TIMESTAMP or ahead[0][0] is not None:
        raise AssertionError(f"message.timestamp.before.max.ms=3600000: two hours old {old}, ahead {ahead}")
    t.log(f"message.timestamp.before.max.ms=3600000: two hours old {old[0][0].name()}, two hours ahead accepted")
    del p
    b.stop()


def test_admin_unknown_topic_and_invalid_partitions(t):
    b = t.broker()
    a = admin(b)
    topic = t.topic("three")
    create_topic(b, topic, 3)
    fs = a.create_partitions([NewPartitions(topic, 2)], request_timeout=30)
    refused(lambda: fs[topic].result(30), KafkaError.INVALID_PARTITIONS, "CreatePartitions to fewer")
    missing = t.topic("missing")
    fs = a.create_partitions([NewPartitions(missing, 2)], request_timeout=30)
    refused(lambda: fs[missing].result(30), KafkaError.UNKNOWN_TOPIC_OR_PART, "CreatePartitions of an unknown topic")
    fs = a.delete_topics([missing], operation_timeout=30, request_timeout=30)
    refused(lambda: fs[missing].result(30), KafkaError.UNKNOWN_TOPIC_OR_PART, "DeleteTopics of an unknown topic")
    res = ConfigResource(ConfigResource.Type.TOPIC, missing)
    refused(lambda: a.describe_configs([res])[res].result(30), KafkaError.UNKNOWN_TOPIC_OR_PART,
             "DescribeConfigs of an unknown topic")
    b.stop()


if __name__ == "__main__":
    broker.main([test_offset_commit_unknown_topic_or_partition, test_topic_configs_as_kafka_defines_them,
                 test_admin_unknown_topic_and_invalid_partitions])
