#!/usr/bin/python3
"""kafka-python (Debian's python3-kafka: a pure-Python protocol implementation, independent of
librdkafka, speaking older request versions) against skiff: the admin client and Kafka's error
answers to it, the producer with acks=all/1/0 and every codec it can use (the stored batches
checked with a raw Fetch), a consumer group of two members across a rebalance, a member killed
with SIGKILL, a member across a broker restart, manual and automatic commits read back after a
restart, seek, offsets_for_times (inside compressed batches), beginning/end offsets, fetch size
limits, a pattern subscription, and (S3 only) fetches while the partitions restore.

kafka-python's snappy, lz4 and zstd codecs need python3-snappy, python3-lz4 and
python3-zstandard (tools/install-deps.sh --all); gzip is always there. A codec whose module is
missing fails the test rather than being skipped.

    test_kafka_python.py --skiff build/src/cli/skiff [--store local|s3] [-k codecs]
"""
import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

import kafka  # noqa: E402
import kafka.codec  # noqa: E402
import kafka.errors as Errors  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic  # noqa: E402
from kafka.client_async import KafkaClient  # noqa: E402
from kafka.protocol.fetch import FetchRequest  # noqa: E402
from kafka.record import MemoryRecords  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

# kafka-python logs every reconnect and rebalance step at WARNING/ERROR; the test asserts
# outcomes, so only its critical messages go to the test's output.
logging.basicConfig(level=logging.CRITICAL)

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HAS_CODEC = {None: lambda: True, "gzip": kafka.codec.has_gzip, "snappy": kafka.codec.has_snappy,
             "lz4": kafka.codec.has_lz4, "zstd": kafka.codec.has_zstd}


def admin(b):
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, client_id="kp-admin",
                            request_timeout_ms=20000)


def producer(b, **conf):
    c = dict(bootstrap_servers=b.bootstrap, client_id="kp-producer", acks="all",
             linger_ms=20, retries=5, request_timeout_ms=20000, max_block_ms=20000)
    c.update(conf)
    return KafkaProducer(**c)


def consumer(b, *topics, **conf):
    c = dict(bootstrap_servers=b.bootstrap, client_id="kp-consumer", auto_offset_reset="earliest",
             enable_auto_commit=False, consumer_timeout_ms=10000, request_timeout_ms=20000,
             check_crcs=True)
    c.update(conf)
    return KafkaConsumer(*topics, **c)


def create_topic(a, name, partitions, configs=None):
    r = a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})], timeout_ms=10000)
    errs = [(tn, code) for tn, code, *_ in r.topic_errors]
    assert errs == [(name, 0)], f"CreateTopics v{r.API_VERSION} {name}: {r}"


def expect_error(err, fn, *args, **kw):
    """Calls fn, which must raise kafka-python's error class err (its admin client raises the
    first error code of a CreateTopics, CreatePartitions or DeleteTopics answer)."""
    try:
        r = fn(*args, **kw)
    except err as e:
        return e
    raise AssertionError(f"{fn.__name__}: expected {err.__name__} (error {err.errno}), got {r}")


def topic_metadata(a, name):
    (md,) = a.describe_topics([name])
    return md


def read_all(c, want, what, timeout=30):
    """Polls consumer c until it has `want` records; returns them in (partition, offset) order."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {len(out)} of {want} records after {timeout} s")
        for recs in c.poll(timeout_ms=500).values():
            out.extend(recs)
    assert len(out) == want, f"{what}: {len(out)} records, expected {want}"
    return sorted(out, key=lambda r: (r.partition, r.offset))


def stored_batches(b, topic, partition):
    """[(codec id, record count)] of the batches a raw Fetch v4 from offset 0 returns: what the
    broker stored and serves, as kafka-python's record parser reads it."""
    cl = KafkaClient(bootstrap_servers=b.bootstrap, client_id="kp-raw", request_timeout_ms=20000)
    try:
        def connected(node):
            if cl.ready(node):      # ready() also starts the connection
                return True
            cl.poll(timeout_ms=100)
            return False
        broker.wait_until(lambda: cl.poll(timeout_ms=100) is not None and cl.cluster.brokers(), 20,
                          "the raw client's metadata")
        node = next(iter(cl.cluster.brokers())).nodeId
        broker.wait_until(lambda: connected(node), 20, "the raw client's connection")
        f = cl.send(node, FetchRequest[4](-1, 100, 1, 50_000_000, 0,
                                          [(topic, [(partition, 0, 50_000_000)])]))
        cl.poll(future=f, timeout_ms=20000)
        assert f.succeeded(), f.exception
        ((tn, parts),) = f.value.topics
        ((pn, err, _hw, _lso, _aborted, data),) = parts
        assert (tn, pn, err) == (topic, partition, 0), (tn, pn, err)
        mr, out = MemoryRecords(data), []
        while (bt := mr.next_batch()) is not None:
            out.append((bt.compression_type, sum(1 for _ in bt)))
        return out
    finally:
        cl.close()


def config_entries(resp, name):
    """{config name: value} of topic `name` in a list of DescribeConfigs responses."""
    for r in resp:
        for err, msg, rtype, rname, entries, *_ in r.resources:
            if rname == name:
                assert err == 0, f"DescribeConfigs {name}: error {err} {msg}"
                assert rtype == ConfigResourceType.TOPIC.value, rtype
                return {e[0]: e[1] for e in entries}
    raise AssertionError(f"DescribeConfigs: no resource {name} in {resp}")


# ---------------------------------------------------------------------------------------------

def test_version_and_codecs(t):
    """The broker version kafka-python infers from ApiVersions decides which features it uses
    (record batches v2 with headers from 0.11, zstd from 2.1): skiff must look like >= 2.1."""
    b = t.broker()
    a = admin(b)
    try:
        v = a.config["api_version"]
        t.log(f"kafka-python {kafka.__version__}, broker version inferred as {v}")
        assert v >= (2, 1, 0), f"kafka-python infers broker version {v}: no zstd, older APIs"
    finally:
        a.close()
    missing = [c for c in CODECS if not HAS_CODEC[c]()]
    assert not missing, (f"kafka-python here lacks codecs {missing}: install python3-snappy, "
                         "python3-lz4, python3-zstandard (tools/install-deps.sh --all)")


def test_admin(t):
    b = t.broker()
    a = admin(b)
    name = t.topic("kp-admin")
    try:
        # CreateTopics with configs, then the same name again: TOPIC_ALREADY_EXISTS (36).
        create_topic(a, name, 3, {"retention.ms": "3600000", "max.message.bytes": "200000",
                                  "cleanup.policy": "delete"})
        expect_error(Errors.TopicAlreadyExistsError, a.create_topics, [NewTopic(name, 3, 1)],
                     timeout_ms=10000)
        # validate_only: nothing is created.
        ghost = t.topic("kp-ghost")
        r = a.create_topics([NewTopic(ghost, 2, 1)], timeout_ms=10000, validate_only=True)
        assert [e[1] for e in r.topic_errors] == [0], r
        assert ghost not in a.list_topics(), "CreateTopics validate_only created the topic"

        assert name in a.list_topics()
        md = topic_metadata(a, name)
        assert md["error_code"] == 0 and md["topic"] == name, md
        parts = sorted(md["partitions"], key=lambda p: p["partition"])
        assert [p["partition"] for p in parts] == [0, 1, 2], parts
        nodes = {n["node_id"] for n in a.describe_cluster()["brokers"]}
        for p in parts:
            assert p["error_code"] == 0 and p["leader"] in nodes, p
            assert p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]], p

        # DescribeConfigs shows what CreateTopics set, and defaults for the rest.
        cfg = config_entries(a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)]), name)
        assert cfg["retention.ms"] == "3600000", cfg
        assert cfg["max.message.bytes"] == "200000", cfg
        assert cfg["cleanup.policy"] == "delete", cfg
        # Only the named keys when the resource names some.
        only = config_entries(a.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": None})]), name)
        assert only == {"retention.ms": "3600000"}, only

        # The broker's own configs, asked of node 0 (kafka-python sends a BROKER resource to the
        # broker it names).
        (node,) = nodes
        cl = a.describe_cluster()
        assert cl["controller_id"] == node, cl
        bcfg = {}
        for r in a.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node))]):
            for err, msg, rtype, rname, entries, *_ in r.resources:
                assert (err, rtype, rname) == (0, ConfigResourceType.BROKER.value, str(node)), r
                bcfg.update({e[0]: e[1] for e in entries})
        assert bcfg.get("message.max.bytes") == "1048588", bcfg
        assert bcfg.get("num.partitions") == "1", bcfg
        assert bcfg.get("broker.id") == str(node), bcfg

        # AlterConfigs (not incremental) replaces the topic's whole config: max.message.bytes,
        # not named, returns to its default (the broker's message.max.bytes, 1048588).
        r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                            configs={"retention.ms": "7200000"})])
        assert [(e[0], e[3]) for e in r.resources] == [(0, name)], r
        cfg = config_entries(a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)]), name)
        assert cfg["retention.ms"] == "7200000", cfg
        assert cfg["max.message.bytes"] == "1048588", cfg

        # CreatePartitions: 3 -> 5; going down is INVALID_PARTITIONS (37).
        r = a.create_partitions({name: NewPartitions(5)}, timeout_ms=10000)
        assert [(e[0], e[1]) for e in r.topic_errors] == [(name, 0)], r
        md = topic_metadata(a, name)
        assert sorted(p["partition"] for p in md["partitions"]) == [0, 1, 2, 3, 4], md
        expect_error(Errors.InvalidPartitionsError, a.create_partitions, {name: NewPartitions(2)},
                     timeout_ms=10000)
        assert len(topic_metadata(a, name)["partitions"]) == 5

        # DeleteTopics, then again: UNKNOWN_TOPIC_OR_PARTITION (3).
        r = a.delete_topics([name], timeout_ms=10000)
        assert [tuple(e[:2]) for e in r.topic_error_codes] == [(name, 0)], r
        broker.wait_until(lambda: name not in a.list_topics(), 10, "the deleted topic to leave Metadata")
        expect_error(Errors.UnknownTopicOrPartitionError, a.delete_topics, [name], timeout_ms=10000)
    finally:
        a.close()


def test_admin_errors(t):
    """The error answers kafka-python's admin client gets, each as Kafka gives it."""
    b = t.broker()
    a = admin(b)
    try:
        # Metadata v5 with allow_auto_topic_creation=false (what the admin client sends) for a
        # topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (3), and nothing is created
        # although the broker auto-creates topics for producers.
        ghost = t.topic("kp-nope")
        assert topic_metadata(a, ghost) == {"error_code": 3, "topic": ghost, "is_internal": False,
                                            "partitions": []}
        assert ghost not in a.list_topics()
        # CreateTopics: 0 partitions is INVALID_PARTITIONS (37), a name with '/' is
        # INVALID_TOPIC_EXCEPTION (17), a bad value or an unknown key INVALID_CONFIG (40); a
        # config Kafka defines that means little in a bucket (delete.retention.ms) is accepted.
        expect_error(Errors.InvalidPartitionsError, a.create_topics, [NewTopic(t.topic("kp-p0"), 0, 1)])
        expect_error(Errors.InvalidTopicError, a.create_topics, [NewTopic("kp/bad", 1, 1)])
        for cfg in ({"retention.ms": "soon"}, {"no.such.config": "1"}):
            bad = t.topic("kp-cfg")
            expect_error(Errors.InvalidConfigurationError, a.create_topics,
                         [NewTopic(bad, 1, 1, topic_configs=cfg)])
            assert bad not in a.list_topics(), f"{bad} created with {cfg}"
        ok = t.topic("kp-dr")
        create_topic(a, ok, 1, {"delete.retention.ms": "1000"})
        assert config_entries(a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, ok)]),
                              ok)["delete.retention.ms"] == "1000"
        # A topic that does not exist: DescribeConfigs, AlterConfigs and CreatePartitions answer
        # UNKNOWN_TOPIC_OR_PARTITION (3) for it.
        (r,) = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, ghost)])
        assert [(e[0], e[3]) for e in r.resources] == [(3, ghost)], r
        r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, ghost, configs={"retention.ms": "1"})])
        assert [(e[0], e[3]) for e in r.resources] == [(3, ghost)], r
        expect_error(Errors.UnknownTopicOrPartitionError, a.create_partitions, {ghost: NewPartitions(3)})
        assert ghost not in a.list_topics()
        # A group nobody used: DescribeGroups says Dead with no members (no error, as Kafka);
        # OffsetFetch of all its offsets is empty.
        nog = t.topic("kp-nogroup")
        (g,) = a.describe_consumer_groups([nog])
        assert (g.error_code, g.group, g.state, list(g.members)) == (0, nog, "Dead", []), g
        assert a.list_consumer_group_offsets(nog) == {}
    finally:
        a.close()


def produce_and_check(t, b, a, codec, acks, n=200):
    name = t.topic(f"kp-{codec or 'none'}-{acks}")
    create_topic(a, name, 2)
    base_ts = int(time.time() * 1000) - 3_600_000     # an hour ago: not the broker's clock
    p = producer(b, compression_type=codec, acks=acks, batch_size=64 * 1024)
    futures = []
    try:
        for i in range(n):
            part = i % 2
            key = None if i % 10 == 9 else f"k{i}".encode()
            value = (f"v{i}-" + "x" * (i % 37)).encode() * 3
            headers = [("h", f"{i}".encode()), ("codec", (codec or "none").encode())] if i % 3 else []
            futures.append(((part, key, value, headers, base_ts + i),
                            p.send(name, value=value, key=key, headers=headers, partition=part,
                                   timestamp_ms=base_ts + i)))
        p.flush(timeout=30)
        metas = [f.get(timeout=30) for _, f in futures]
    finally:
        p.close(timeout=10)
    sent = {0: [], 1: []}
    for (part, key, value, headers, ts), m in zip([x for x, _ in futures], metas):
        assert m.topic == name and m.partition == part, m
        if acks == 0:
            assert m.offset == -1, f"acks=0 gives no offset, got {m}"
        sent[part].append((key, value, headers, ts, m.offset))
    if acks != 0:
        for part, recs in sent.items():
            assert [o for *_, o in recs] == list(range(len(recs))), \
                f"{codec} acks={acks} p{part}: offsets {[o for *_, o in recs][:10]}..."

    c = consumer(b)
    try:
        tps = [TopicPartition(name, 0), TopicPartition(name, 1)]
        c.assign(tps)
        if acks == 0:
            # Nothing tells an acks=0 producer that its batches arrived: wait for them.
            broker.wait_until(lambda: sum(c.end_offsets(tps).values()) == n, 20,
                              f"{n} records produced with acks=0 to be readable")
        assert c.end_offsets(tps) == {tps[0]: n // 2, tps[1]: n // 2}, c.end_offsets(tps)
        c.seek_to_beginning()
        got = read_all(c, n, f"{codec} acks={acks}")
    finally:
        c.close()
    # kafka-python batched the records (linger_ms) and compressed each batch; the broker keeps
    # the batches as they came (no topic compression.type).
    for part in (0, 1):
        stored = stored_batches(b, name, part)
        assert {c for c, _ in stored} == {CODEC_ID[codec]}, f"{codec}: stored batches {stored}"
        assert sum(k for _, k in stored) == n // 2 and len(stored) < n // 2, stored
    for part in (0, 1):
        recs = [r for r in got if r.partition == part]
        assert [r.offset for r in recs] == list(range(n // 2)), [r.offset for r in recs][:10]
        for r, (key, value, headers, ts, _) in zip(recs, sent[part]):
            assert (r.key, r.value) == (key, value), (r, key, value)
            assert list(r.headers) == headers, (r.headers, headers)
            assert r.timestamp == ts and r.timestamp_type == 0, (r.timestamp, r.timestamp_type, ts)


def test_produce_codecs(t):
    """Each codec kafka-python has, acks=all: keys, values, headers, timestamps read back."""
    b = t.broker()
    a = admin(b)
    try:
        done = []
        for codec in CODECS:
            assert HAS_CODEC[codec](), f"kafka-python here cannot use {codec}"
            produce_and_check(t, b, a, codec, "all")
            done.append(codec or "none")
        t.log(f"codecs round-tripped: {', '.join(done)}")
    finally:
        a.close()


def test_produce_acks(t):
    """acks=1 and acks=0 (no answer at all from the broker) with a codec each."""
    b = t.broker()
    a = admin(b)
    try:
        produce_and_check(t, b, a, None, 1)
        produce_and_check(t, b, a, "lz4", 0)
        produce_and_check(t, b, a, "zstd", 1)

        # A batch over the topic's max.message.bytes: MESSAGE_TOO_LARGE (10), nothing stored,
        # and the producer goes on with the next batch.
        name = t.topic("kp-big")
        create_topic(a, name, 1, {"max.message.bytes": "100000"})
        p = producer(b, acks=1, max_request_size=1 << 20, retries=0)
        try:
            f = p.send(name, value=os.urandom(150_000), partition=0)
            try:
                m = f.get(timeout=30)
                raise AssertionError(f"a 150000-byte batch to a topic of max.message.bytes 100000: {m}")
            except Errors.MessageSizeTooLargeError:
                pass
            m = p.send(name, value=os.urandom(90_000), partition=0).get(timeout=30)
            assert m.offset == 0, m
        finally:
            p.close()
    finally:
        a.close()


def test_long_poll_wakes(t):
    """A consumer's Fetch that waits (fetch_max_wait_ms 10 s) is answered as soon as a record
    is produced, not when the wait ends."""
    b = t.broker()
    a = admin(b)
    name = t.topic("kp-wake")
    create_topic(a, name, 1)
    a.close()
    tp = TopicPartition(name, 0)
    p = producer(b, linger_ms=0)
    c = consumer(b, fetch_max_wait_ms=10000, fetch_min_bytes=1, request_timeout_ms=30000)
    try:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 0 and c.poll(timeout_ms=500) == {}
        lat = []
        for i in range(4):
            time.sleep(0.3)    # the consumer's Fetch is waiting at the broker
            t0 = time.monotonic()
            p.send(name, value=f"w{i}".encode(), partition=0)
            (r,) = read_all(c, 1, f"record {i}", timeout=15)
            lat.append(time.monotonic() - t0)
            assert (r.offset, r.value) == (i, f"w{i}".encode()), r
        t.log("produce-to-consume latencies: " + ", ".join(f"{x:.2f} s" for x in lat))
        assert max(lat) < 5, f"a waiting Fetch was not woken by the produce: {lat}"
    finally:
        c.close()
        p.close()


def delete_group_raw(a, group):
    """DeleteGroups through kafka-python's request, with the raw error codes: its
    delete_consumer_groups maps 68 (NON_EMPTY_GROUP), which it has no class for, to UnknownError."""
    coord = a._find_coordinator_ids([group])[group]
    f = a._delete_consumer_groups_send_request([group], coord)
    a._wait_for_futures([f])
    return [tuple(r) for r in f.value.results]


class Member:
    """A KafkaConsumer in a group, polled in its own thread (a JoinGroup blocks until every
    member has joined, so two members cannot share one thread). Commits what each poll
    returned, with the member's name as the metadata."""

    def __init__(self, name, b, topic, group, seen, lock):
        self.name = name
        self.b, self.topic, self.group = b, topic, group
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.assignment = set()
        self.uncommitted = set()     # (partition, offset) of records whose commit failed
        self.commit_failures = 0
        self.thread = broker.CheckedThread(self.run, name=name)

    def run(self):
        c = consumer(self.b, group_id=self.group, client_id=self.name, session_timeout_ms=10000,
                     heartbeat_interval_ms=500, max_poll_records=20)
        c.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                batch = c.poll(timeout_ms=200)
                self.assignment = {tp.partition for tp in c.assignment()}
                commit = {}
                for tp, recs in batch.items():
                    for r in recs:
                        with self.lock:
                            self.seen.setdefault((r.partition, r.offset), []).append(self.name)
                    commit[tp] = OffsetAndMetadata(recs[-1].offset + 1, self.name)
                if commit:
                    try:
                        c.commit(commit)
                    except Errors.CommitFailedError:
                        # The group moved on (a rebalance) between the poll and the commit, as
                        # an application sees it: its next poll rejoins; these records will be
                        # consumed again by whoever owns their partition.
                        self.commit_failures += 1
                        self.uncommitted |= {(r.partition, r.offset) for recs in batch.values() for r in recs}
                time.sleep(0.05)
        finally:
            c.close(autocommit=False)    # LeaveGroup


def test_consumer_group(t):
    """Two members: the second joins once the first consumes; each partition ends up owned by
    exactly one of them; every record is consumed; the admin client sees the group's members,
    assignment and committed offsets. Then the first leaves and the second takes everything
    over; with no member the group is Empty, a DeleteGroups of it while it had members was
    NON_EMPTY_GROUP, and afterwards it and its offsets are gone."""
    b = t.broker()
    a = admin(b)
    name, group = t.topic("kp-group"), t.topic("kp-g")
    nparts, per_part = 4, 150
    create_topic(a, name, nparts)
    other = t.topic("kp-other")
    create_topic(a, other, 1)

    def produce(first, count):
        p = producer(b)
        for i in range(first, first + count):
            p.send(name, value=f"m{i}".encode(), partition=i % nparts)
        p.flush(timeout=30)
        p.close()
    produce(0, nparts * per_part)

    seen, lock = {}, threading.Lock()
    m1 = Member("kp-m1", b, name, group, seen, lock)
    m2 = Member("kp-m2", b, name, group, seen, lock)
    try:
        m1.thread.start()
        broker.wait_until(lambda: m1.assignment == set(range(nparts)), 30, "m1 to own all partitions")
        broker.wait_until(lambda: len(seen) > 0, 20, "m1 to consume")
        m2.thread.start()
        broker.wait_until(lambda: m1.assignment and m2.assignment
                          and len(m1.assignment) + len(m2.assignment) == nparts, 40,
                          "the rebalance to give both members partitions")
        assert m1.assignment | m2.assignment == set(range(nparts)), (m1.assignment, m2.assignment)
        assert not m1.assignment & m2.assignment, (m1.assignment, m2.assignment)
        assert len(m1.assignment) == len(m2.assignment) == 2, (m1.assignment, m2.assignment)
        broker.wait_until(lambda: len(seen) == nparts * per_part, 40, "every record consumed")

        # The group as the admin client sees it, while both members are in it.
        groups = a.list_consumer_groups()
        assert (group, "consumer") in groups, groups
        (g,) = a.describe_consumer_groups([group])
        assert g.error_code == 0 and g.group == group and g.state == "Stable", g
        assert g.protocol_type == "consumer" and g.protocol in ("range", "roundrobin"), g
        assert sorted(m.client_id for m in g.members) == ["kp-m1", "kp-m2"], g.members
        owned = {}
        for m in g.members:
            assert list(m.member_metadata.subscription) == [name], m.member_metadata
            parts = [pp for tn, ps in m.member_assignment.assignment if tn == name for pp in ps]
            owned[m.client_id] = set(parts)
        assert owned == {"kp-m1": m1.assignment, "kp-m2": m2.assignment}, (owned, m1.assignment, m2.assignment)

        # Committed offsets reach the end of every partition (members commit after each poll).
        want = {TopicPartition(name, pp): per_part for pp in range(nparts)}

        def committed_all():
            offs = a.list_consumer_group_offsets(group)
            return {tp: o.offset for tp, o in offs.items()} == want and offs
        offs = broker.wait_until(committed_all, 20, "the commits of every partition's end")
        assert {o.metadata for o in offs.values()} <= {"kp-m1", "kp-m2"}, offs
        # A partition the group never committed: offset -1 and no error, as Kafka answers.
        offs = a.list_consumer_group_offsets(group, partitions=[TopicPartition(other, 0),
                                                                TopicPartition(name, 1)])
        assert {tp: o.offset for tp, o in offs.items()} == \
            {TopicPartition(other, 0): -1, TopicPartition(name, 1): per_part}, offs

        # DeleteGroups of a group with members: NON_EMPTY_GROUP (68), and nothing deleted.
        assert delete_group_raw(a, group) == [(group, 68)]

        # m1 leaves: m2 owns every partition and consumes what is produced next.
        m1.stop.set()
        broker.run_threads_checked([m1.thread])
        broker.wait_until(lambda: m2.assignment == set(range(nparts)), 30,
                          "m2 to own all partitions after m1 left")
        produce(nparts * per_part, 40)
        broker.wait_until(lambda: len(seen) == nparts * per_part + 40, 30, "m2 to consume the rest")
        assert all(seen[(i % nparts, per_part + (i - nparts * per_part) // nparts)][-1] == "kp-m2"
                   for i in range(nparts * per_part, nparts * per_part + 40))
        (g,) = a.describe_consumer_groups([group])
        assert [m.client_id for m in g.members] == ["kp-m2"] and g.state == "Stable", g
    finally:
        m1.stop.set()
        m2.stop.set()
        broker.run_threads_checked([th for th in (m1.thread, m2.thread) if th.ident is not None])

    try:
        (g,) = a.describe_consumer_groups([group])
        assert g.state == "Empty" and list(g.members) == [], g
        assert (group, "consumer") in a.list_consumer_groups()
        final = {TopicPartition(name, pp): per_part + 10 for pp in range(nparts)}
        broker.wait_until(lambda: {tp: o.offset for tp, o in a.list_consumer_group_offsets(group).items()}
                          == final, 10, "m2's last commits")
        assert delete_group_raw(a, group) == [(group, 0)]
        assert group not in [gid for gid, _ in a.list_consumer_groups()]
        assert a.list_consumer_group_offsets(group) == {}
    finally:
        a.close()
    dup = {k: v for k, v in seen.items() if len(v) > 1}
    # A record may be seen twice only across a rebalance (polled by one member, committed after
    # the other took its partition over); more than a few batches means offsets were not honoured.
    assert len(dup) <= 60, f"{len(dup)} records consumed more than once: {list(dup.items())[:5]}"
    assert sorted(seen) == sorted((pp, o) for pp in range(nparts) for o in range(per_part + 10))


CRASHING_MEMBER = r"""
import json, sys, time, logging
logging.basicConfig(level=logging.CRITICAL)
from kafka import KafkaConsumer
bootstrap, topic, group = sys.argv[1:4]
c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id="kp-doomed",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=6000, heartbeat_interval_ms=500)
c.subscribe([topic])
last = None
while True:
    c.poll(timeout_ms=200)
    a = sorted(tp.partition for tp in c.assignment())
    if a != last:
        print(json.dumps(a), flush=True)
        last = a
"""


def test_member_crash(t):
    """A member killed with SIGKILL sends no LeaveGroup: the coordinator expires it after its
    session timeout (6 s, the smallest Kafka allows by default) and the survivor gets its
    partitions."""
    b = t.broker()
    a = admin(b)
    name, group = t.topic("kp-crash"), t.topic("kp-cg")
    create_topic(a, name, 4)
    seen, lock = {}, threading.Lock()
    m = Member("kp-survivor", b, name, group, seen, lock)
    doomed = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, b.bootstrap, name, group],
                              stdout=subprocess.PIPE, text=True)
    t.cleanups.append(lambda: (doomed.kill(), doomed.wait()))
    assignments = []
    reader = threading.Thread(target=lambda: assignments.extend(json.loads(l) for l in doomed.stdout),
                              daemon=True)
    reader.start()
    try:
        broker.wait_until(lambda: assignments and assignments[-1] == [0, 1, 2, 3], 30,
                          "the first member to own every partition")
        m.thread.start()
        broker.wait_until(lambda: len(m.assignment) == 2 and len(assignments[-1]) == 2, 40,
                          "the rebalance to split the partitions")
        assert sorted(set(assignments[-1]) | m.assignment) == [0, 1, 2, 3], (assignments, m.assignment)
        doomed.kill()
        doomed.wait()
        t0 = time.monotonic()
        broker.wait_until(lambda: m.assignment == {0, 1, 2, 3}, 30,
                          "the survivor to get every partition after the session timeout")
        took = time.monotonic() - t0
        assert took > 3, f"the crashed member was removed after {took:.1f} s, before its session timed out"
        (g,) = a.describe_consumer_groups([group])
        assert [x.client_id for x in g.members] == ["kp-survivor"] and g.state == "Stable", g
        t.log(f"survivor took over {took:.1f} s after the kill")
    finally:
        m.stop.set()
        broker.run_threads_checked([m.thread] if m.thread.ident is not None else [])
        a.close()


def test_group_across_restart(t):
    """A member keeps consuming across a restart of the broker (its coordinator): it rejoins
    the restarted coordinator and resumes at its committed offsets, so every record produced
    before and after is consumed, and none that was committed is consumed again.

    skiff keeps a group's committed offsets in the store but not its membership (Kafka also
    stores the group's members and generation in __consumer_offsets), so the member's first
    request after the restart may be a commit that fails (UNKNOWN_MEMBER_ID, which kafka-python
    raises as CommitFailedError) before it rejoins: only the records of that commit may be
    consumed twice."""
    b = t.broker()
    a = admin(b)
    name, group = t.topic("kp-rs"), t.topic("kp-rsg")
    create_topic(a, name, 2)
    a.close()

    def produce(first, count):
        p = producer(b)
        for i in range(first, first + count):
            p.send(name, value=f"m{i}".encode(), partition=i % 2)
        p.flush(timeout=30)
        p.close()
    produce(0, 100)
    seen, lock = {}, threading.Lock()
    m = Member("kp-rs-m", b, name, group, seen, lock)
    try:
        m.thread.start()
        broker.wait_until(lambda: len(seen) == 100, 30, "the first 100 records")
        a = admin(b)
        try:
            broker.wait_until(lambda: {tp.partition: o.offset for tp, o in
                                       a.list_consumer_group_offsets(group).items()} == {0: 50, 1: 50},
                              20, "the member's commits")
        finally:
            a.close()
        b.restart()
        b.wait_restored()
        produce(100, 100)
        broker.wait_until(lambda: len(seen) == 200, 60, "the records produced after the restart")
        a = admin(b)
        try:
            broker.wait_until(lambda: {tp.partition: o.offset for tp, o in
                                       a.list_consumer_group_offsets(group).items()} == {0: 100, 1: 100},
                              20, "the member's commits after the restart")
            (g,) = a.describe_consumer_groups([group])
            assert [x.client_id for x in g.members] == ["kp-rs-m"] and g.state == "Stable", g
        finally:
            a.close()
    finally:
        m.stop.set()
        broker.run_threads_checked([m.thread] if m.thread.ident is not None else [])
    dup = {k for k, v in seen.items() if len(v) > 1}
    t.log(f"commits that failed after the restart: {m.commit_failures}, records consumed twice: {len(dup)}")
    assert dup <= m.uncommitted, f"committed records consumed again: {sorted(dup - m.uncommitted)[:10]}"
    assert sorted(seen) == sorted((i % 2, i // 2) for i in range(200))


def test_fetch_during_restore(t):
    """A consumer that fetches while the restarted broker is still restoring its partitions
    (every S3 answer held 300 ms by the fault proxy, so the restore takes seconds) keeps going:
    the Fetch answers NOT_LEADER_OR_FOLLOWER for such a partition, as Kafka does for one it does
    not serve yet. LEADER_NOT_AVAILABLE, a Metadata error, makes kafka-python's poll() raise
    (and the Java consumer's throw IllegalStateException)."""
    proxy = broker.start_fault_proxy(t, 300)
    b = t.broker(s3_endpoint=proxy)
    a = admin(b)
    name = t.topic("kp-restore")
    create_topic(a, name, 2)
    a.close()
    tps = [TopicPartition(name, 0), TopicPartition(name, 1)]
    p = producer(b)
    for i in range(20):
        p.send(name, value=f"a{i}".encode(), partition=i % 2)
    p.flush(timeout=30)
    p.close()
    c = consumer(b, reconnect_backoff_ms=20, reconnect_backoff_max_ms=200)
    try:
        c.assign(tps)
        c.seek_to_beginning()
        read_all(c, 20, "before the restart")
        b.stop()
        b.start()       # listening; the partitions restore behind the delayed store
        fetched_while_restoring = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            restoring = not _ready(b)
            assert c.poll(timeout_ms=100) == {}, "records that were not produced"
            fetched_while_restoring |= restoring
            if not restoring:
                break
        assert fetched_while_restoring, "the restore ended before the consumer fetched: no test"
        p = producer(b)
        for i in range(20, 30):
            p.send(name, value=f"a{i}".encode(), partition=i % 2)
        p.flush(timeout=30)
        p.close()
        got = read_all(c, 10, "after the restore")
        assert sorted(r.value for r in got) == sorted(f"a{i}".encode() for i in range(20, 30))
    finally:
        c.close()


def _ready(b):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/ready", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def test_commit_survives_restart(t):
    """commit() with metadata, committed() before and after a broker restart, and a new member
    of the group resuming exactly there."""
    b = t.broker()
    a = admin(b)
    name, group = t.topic("kp-commit"), t.topic("kp-cg")
    create_topic(a, name, 2)
    a.close()
    p = producer(b)
    for i in range(100):
        p.send(name, value=f"r{i}".encode(), key=f"{i}".encode(), partition=i % 2)
    p.flush(timeout=30)
    p.close()

    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    c = consumer(b, group_id=group)
    try:
        assert c.committed(tp0) is None, "no commit yet"
        c.assign([tp0, tp1])
        c.seek_to_beginning()
        got = read_all(c, 100, "first read")
        c.commit({tp0: OffsetAndMetadata(17, "seventeen"), tp1: OffsetAndMetadata(31, "")})
        assert c.committed(tp0) == 17 and c.committed(tp1) == 31
        assert c.committed(tp0, metadata=True) == OffsetAndMetadata(17, "seventeen")
        assert got[0].value == b"r0"

        b.restart()
        b.wait_restored()
        # The same consumer, its connections gone: it finds the coordinator again.
        assert c.committed(tp0, metadata=True) == OffsetAndMetadata(17, "seventeen"), \
            c.committed(tp0, metadata=True)
        c.commit({tp1: OffsetAndMetadata(30, "thirty")})
        c.commit({tp1: OffsetAndMetadata(31, "")})
    finally:
        c.close(autocommit=False)

    c = consumer(b, group_id=group)
    try:
        assert c.committed(tp0, metadata=True) == OffsetAndMetadata(17, "seventeen"), \
            c.committed(tp0, metadata=True)
        assert c.committed(tp1) == 31, c.committed(tp1)
        a = admin(b)
        try:
            offs = a.list_consumer_group_offsets(group)
            assert {tp: (o.offset, o.metadata) for tp, o in offs.items()} == \
                {tp0: (17, "seventeen"), tp1: (31, "")}, offs
            assert (group, "consumer") in a.list_consumer_groups() or \
                any(gid == group for gid, _ in a.list_consumer_groups()), a.list_consumer_groups()
        finally:
            a.close()
        c.subscribe([name])
        got = read_all(c, (50 - 17) + (50 - 31), "resumed read")
        first = {pp: min(r.offset for r in got if r.partition == pp) for pp in (0, 1)}
        assert first == {0: 17, 1: 31}, first
        assert next(r for r in got if r.partition == 0 and r.offset == 17).value == b"r34"
        c.commit()
        assert c.committed(tp0) == 50 and c.committed(tp1) == 50
    finally:
        c.close(autocommit=False)

    # enable_auto_commit: what was consumed is committed when the consumer closes.
    p = producer(b)
    for i in range(100, 110):
        p.send(name, value=f"r{i}".encode(), partition=0)
    p.flush(timeout=30)
    p.close()
    c = consumer(b, name, group_id=group, enable_auto_commit=True, auto_commit_interval_ms=60000)
    try:
        got = read_all(c, 10, "the auto-committing consumer")
        assert [r.offset for r in got] == list(range(50, 60)), [r.offset for r in got]
    finally:
        c.close()       # autocommit=True
    c = consumer(b, group_id=group)
    try:
        assert (c.committed(tp0), c.committed(tp1)) == (60, 50), (c.committed(tp0), c.committed(tp1))
    finally:
        c.close()


def tv(i):
    # kafka-python sends a batch uncompressed when its codec does not make it smaller: values
    # that compress well.
    return f"t{i}-".encode() + b"." * 100


def test_seek_and_times(t):
    """offsets_for_times, beginning/end offsets, seek and position on a partition whose records
    carry timestamps one second apart."""
    b = t.broker()
    a = admin(b)
    name = t.topic("kp-times")
    create_topic(a, name, 1)
    a.close()
    base = int(time.time() * 1000) - 86_400_000
    n = 40
    # gzip batches of 7 records (a flush after every 7th): the lookups land inside batches.
    p = producer(b, linger_ms=5000, compression_type="gzip")
    for i in range(n):
        p.send(name, value=tv(i), partition=0, timestamp_ms=base + i * 1000)
        if i % 7 == 6:
            p.flush(timeout=30)
    p.flush(timeout=30)
    p.close()

    assert stored_batches(b, name, 0) == [(1, 7)] * 5 + [(1, 5)], stored_batches(b, name, 0)

    tp = TopicPartition(name, 0)
    c = consumer(b)
    try:
        c.assign([tp])
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: n}
        r = c.offsets_for_times({tp: base + 5500})[tp]
        assert (r.offset, r.timestamp) == (6, base + 6000), r
        r = c.offsets_for_times({tp: base})[tp]
        assert (r.offset, r.timestamp) == (0, base), r
        r = c.offsets_for_times({tp: base + 20_000})[tp]
        assert (r.offset, r.timestamp) == (20, base + 20_000), r
        assert c.offsets_for_times({tp: base + n * 1000})[tp] is None, "past the last timestamp"

        c.seek(tp, 25)
        assert c.position(tp) == 25
        recs = read_all(c, n - 25, "read from 25")
        assert [r.offset for r in recs] == list(range(25, n))
        assert [r.value for r in recs] == [tv(i) for i in range(25, n)]
        assert [r.timestamp for r in recs] == [base + i * 1000 for i in range(25, n)]
        assert c.position(tp) == n and c.highwater(tp) == n
        c.seek_to_end(tp)
        assert c.position(tp) == n
        c.seek(tp, 3)
        (first, *_) = read_all(c, n - 3, "read from 3")
        assert (first.offset, first.value) == (3, tv(3))
    finally:
        c.close()

    # Timestamps out of order inside a batch (one gzip batch): Kafka answers the first record,
    # in offset order, of the first batch whose largest timestamp reaches the target.
    nm = t.topic("kp-times-nm")
    a = admin(b)
    create_topic(a, nm, 1)
    a.close()
    rel = [100, 50, 300, 200, 250]
    p = producer(b, linger_ms=5000, compression_type="gzip")
    for i, d in enumerate(rel):
        p.send(nm, value=tv(i), partition=0, timestamp_ms=base + d)
    p.flush(timeout=30)
    p.close()
    assert [c for c, _ in stored_batches(b, nm, 0)] == [1], stored_batches(b, nm, 0)
    ntp = TopicPartition(nm, 0)
    c = consumer(b)
    try:
        for target, want in ((40, (0, 100)), (60, (0, 100)), (100, (0, 100)), (150, (2, 300)),
                             (220, (2, 300)), (300, (2, 300))):
            r = c.offsets_for_times({ntp: base + target})[ntp]
            assert r is not None and (r.offset, r.timestamp - base) == want, (target, r, want)
        assert c.offsets_for_times({ntp: base + 301})[ntp] is None
    finally:
        c.close()

    # Out of range: auto_offset_reset decides; 'none' surfaces OFFSET_OUT_OF_RANGE (1).
    for reset, want in (("earliest", 0), ("latest", n)):
        c = consumer(b, auto_offset_reset=reset)
        try:
            c.assign([tp])
            c.seek(tp, n + 100)
            if want == 0:
                (first, *_) = read_all(c, n, f"reset to {reset}")
                assert first.offset == 0, first
            else:
                assert c.poll(timeout_ms=1500) == {}
                broker.wait_until(lambda: c.position(tp) == n, 10, "the reset to the end")
        finally:
            c.close()
    c = consumer(b, auto_offset_reset="none")
    try:
        c.assign([tp])
        c.seek(tp, n + 100)
        deadline = time.monotonic() + 10
        while True:
            try:
                c.poll(timeout_ms=300)
            except Errors.OffsetOutOfRangeError as e:
                assert e.args[0] == {tp: n + 100}, e.args
                break
            assert time.monotonic() < deadline, "no OffsetOutOfRangeError for offset n+100"
    finally:
        c.close()


def test_fetch_limits_and_auto_create(t):
    """A topic auto-created by the producer's Metadata request (--default-partitions 1), then
    read with fetch limits far below a record's size: the broker must still return the first
    batch of each fetch (KIP-74), so the consumer makes progress one batch at a time."""
    b = t.broker()
    name = t.topic("kp-auto")
    p = producer(b, linger_ms=0)
    big = [bytes([(i * 7 + j) % 251 for j in range(3000 + i * 10)]) for i in range(30)]
    metas = [p.send(name, value=v, key=f"{i}".encode()).get(timeout=30) for i, v in enumerate(big)]
    p.close()
    assert [(m.partition, m.offset) for m in metas] == [(0, i) for i in range(30)], metas
    a = admin(b)
    try:
        md = topic_metadata(a, name)
        assert md["error_code"] == 0 and [pp["partition"] for pp in md["partitions"]] == [0], md
    finally:
        a.close()

    c = consumer(b, name, group_id=t.topic("kp-small"), fetch_max_bytes=1024,
                 max_partition_fetch_bytes=512)
    try:
        assert c.partitions_for_topic(name) == {0}
        got = read_all(c, 30, "reading with 512-byte fetches")
        assert [(r.offset, r.key, r.value) for r in got] == \
            [(i, f"{i}".encode(), v) for i, v in enumerate(big)]
    finally:
        c.close()


def test_pattern_subscription(t):
    """subscribe(pattern=...): the topics that match when it joins, and one created later."""
    b = t.broker()
    a = admin(b)
    prefix = t.topic("kp-pat")
    create_topic(a, f"{prefix}-a", 2)
    create_topic(a, f"other-{prefix}", 1)
    p = producer(b)
    for i in range(10):
        p.send(f"{prefix}-a", value=f"a{i}".encode(), partition=i % 2)
        p.send(f"other-{prefix}", value=f"o{i}".encode())
    p.flush(timeout=30)
    c = consumer(b, group_id=t.topic("kp-patg"), metadata_max_age_ms=500)
    try:
        c.subscribe(pattern=f"^{prefix}-.*")
        got = read_all(c, 10, "the matching topic")
        assert {r.topic for r in got} == {f"{prefix}-a"}, {r.topic for r in got}
        c.commit()     # the rebalance that the new topic brings resumes from here
        create_topic(a, f"{prefix}-b", 1)
        for i in range(5):
            p.send(f"{prefix}-b", value=f"b{i}".encode())
        p.flush(timeout=30)
        got = read_all(c, 5, "the topic created after the subscription")
        assert [r.value for r in got] == [f"b{i}".encode() for i in range(5)]
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
        assert c.poll(timeout_ms=500) == {}, "records of a topic that does not match"
    finally:
        c.close()
        p.close()
        a.close()


if __name__ == "__main__":
    broker.main([(test_version_and_codecs, 60), (test_admin, 90), (test_admin_errors, 60),
                 (test_produce_codecs, 120), (test_produce_acks, 90), (test_long_poll_wakes, 90),
                 (test_consumer_group, 150), (test_member_crash, 120),
                 (test_group_across_restart, 120), (test_fetch_during_restore, 120, {"s3"}),
                 (test_commit_survives_restart, 120), (test_seek_and_times, 90),
                 (test_fetch_limits_and_auto_create, 90), (test_pattern_subscription, 90)])
