#!/usr/bin/python3
"""Kafka admin APIs that tools call (issue: OffsetDelete, DescribeLogDirs, DescribeProducers, ...),
checked on the wire against a running broker.

  - DescribeProducers (API 61, v0, KIP-664): after a confluent-kafka idempotent producer wrote
    200 records to one partition, the partition lists exactly that producer, with epoch 0, last
    sequence 199 and its last batch's timestamp; the other partition lists none; an unknown
    partition is UNKNOWN_TOPIC_OR_PARTITION; after a restart the same answer (rebuilt from the
    log). ApiVersions lists API 61 at v0.

  - DescribeLogDirs (API 35, v1 and v4): one log dir, the data directory (its absolute path) or
    s3://bucket/namespace, holding every partition of a topic with its size: on a local store
    exactly the bytes of its .kfs and .index files; a request for some partitions gets only
    those; v4 tells the local volume's total and usable bytes (-1 for a bucket).

  - OffsetDelete (API 47, v0): a group with a live confluent-kafka consumer subscribed to one
    topic: that topic's offsets are GROUP_SUBSCRIBED_TO_TOPIC, another topic's are deleted (the
    consumer's committed() shows none), an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; once the
    consumer left, the subscribed topic's offsets delete too, and a restart keeps the deletion;
    an unknown group is GROUP_ID_NOT_FOUND.

  - --node-id 7 on one broker: Metadata names broker 7 (controller, leader of every
    partition), FindCoordinator answers 7, a confluent-kafka producer and consumer work against
    it; --node-id and --broker-id that disagree are refused at start-up with one sentence.

  - Metadata's auto-creation answer (as Kafka's AutoTopicCreationManager): the Metadata v4
    request that creates a topic gets LEADER_NOT_AVAILABLE and no partitions, the next one the
    partitions; without allow_auto_topic_creation an unknown topic is UNKNOWN_TOPIC_OR_PARTITION
    and is not created; a topic deleted and then asked for comes back as new (LEADER_NOT_AVAILABLE
    first), and a confluent-kafka producer writes to an auto-created topic.

  - ElectLeaders (API 43, v0-v2) on one broker: ELECTION_NOT_NEEDED for each partition named,
    UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or partition; every partition (a null list):
    each topic listed with no partitions (none needed an election); an unknown election type is
    INVALID_REQUEST. (The cluster case is in test_cluster.py.)

  - DescribeClientQuotas / AlterClientQuotas (APIs 48, 49, v0): entities by client id, user,
    both and their defaults with producer_byte_rate / consumer_byte_rate; Kafka's refusals with
    its messages (empty entity, duplicate or unknown entity type, ip with user, unknown key,
    a value <= 0, a fractional byte rate) and skiff's (keys it does not enforce); validate_only
    stores nothing; Kafka's filters (exact, default, specified; strict); kept across a restart;
    a removal. (Enforcement through a real producer is in test_quotas.py.)

  - AlterPartitionReassignments / ListPartitionReassignments (APIs 45, 46, v0) on one broker:
    Kafka's answers for a one-broker cluster (a reassignment to broker 0 is a no-op, an unknown
    broker, an empty or repeated list INVALID_REPLICA_ASSIGNMENT with Kafka's messages, a cancel
    NO_REASSIGNMENT_IN_PROGRESS, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; none
    listed). The cluster case (a real move, listed while in progress) is in test_cluster.py.

No Python admin client in Debian 12 nor kafkajs speaks these APIs, so the requests are encoded
here from Kafka's schemas (flexible versions: compact strings and arrays, tagged fields).

    test_admin_apis.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, create_topic, produce_all, producer  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from test_bad_input import connect, recv_response, request  # noqa: E402

METADATA, FIND_COORDINATOR, API_VERSIONS, DESCRIBE_LOG_DIRS, ELECT_LEADERS, OFFSET_DELETE, DESCRIBE_PRODUCERS = \
    3, 10, 18, 35, 43, 47, 61
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 3, 5, 42, 69
ELECTION_NOT_NEEDED, GROUP_SUBSCRIBED_TO_TOPIC, UNSUPPORTED_VERSION = 84, 86, 35
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 39, 85


def uvarint(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        if n == 0:
            return None
        s = self.data[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return s

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

def exchange(b, api, version, corr, body, what, flexible=False, timeout=10):
    """Sends one request on a fresh connection; a Reader past the response header (its
    correlation id checked, and its tags for a flexible version)."""
    with connect(b) as s:
        s.sendall(request(api, version, corr, body, flexible=flexible))
        resp = recv_response(s, timeout=timeout)
    if resp is None:
        raise AssertionError(f"{what}: connection closed")
    r = Reader(resp)
    if r.take(">i") != corr:
        raise AssertionError(f"{what}: wrong correlation id")
    if flexible:
        r.uvarint()  # response header tags
    return r



def describe_producers(b, topic, partitions, corr=7):
    body = uvarint(2)                                   # one topic
    body += uvarint(len(topic) + 1) + topic.encode()
    body += uvarint(len(partitions) + 1) + b"".join(struct.pack(">i", p) for p in partitions)
    body += b"\x00"                                      # topic's tagged fields
    body += b"\x00"                                      # request's tagged fields
    with connect(b) as s:
        s.sendall(request(DESCRIBE_PRODUCERS, 0, corr, body, flexible=True, client_id=b"skiff-admin-test"))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("the broker closed the connection on DescribeProducers")
    r = Reader(resp)
    if r.take(">i") != corr:
        raise AssertionError("wrong correlation id")
    r.tags()                                             # response header v1
    r.take(">i")                                         # throttle_time_ms
    out = {}
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        for _ in range(r.uvarint() - 1):
            index, error = r.take(">ih")
            message = r.compact_string()
            producers = []
            for _ in range(r.uvarint() - 1):
                pid, epoch, last_seq, last_ts, coord_epoch, txn_start = r.take(">qiiqiq")
                r.tags()
                producers.append({"producer_id": pid, "epoch": epoch, "last_sequence": last_seq,
                                  "last_timestamp": last_ts, "coordinator_epoch": coord_epoch,
                                  "current_txn_start_offset": txn_start})
            r.tags()
            out[(name, index)] = (error, message, producers)
        r.tags()
    return out


def describe_log_dirs(b, version, topics=None, corr=9):
    """DescribeLogDirs v1 (classic encoding) or v4 (flexible). topics: None for all, else
    {topic: [partitions]}. Returns [(error, log_dir, {(topic, p): (size, lag, future)}, total, usable)]."""
    flexible = version >= 2

    def string(x):
        x = x.encode()
        return uvarint(len(x) + 1) + x if flexible else struct.pack(">h", len(x)) + x

    def count(n, nullable_null=False):
        if flexible:
            return uvarint(0 if nullable_null else n + 1)
        return struct.pack(">i", -1 if nullable_null else n)

    if topics is None:
        body = count(0, nullable_null=True)
    else:
        body = count(len(topics))
        for name, parts in topics.items():
            body += string(name) + count(len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
            body += b"\x00" if flexible else b""
    body += b"\x00" if flexible else b""
    with connect(b) as s:
        s.sendall(request(DESCRIBE_LOG_DIRS, version, corr, body, flexible=flexible, client_id=b"skiff-admin-test"))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError(f"the broker closed the connection on DescribeLogDirs v{version}")
    r = Reader(resp)
    if r.take(">i") != corr:
        raise AssertionError("wrong correlation id")
    if flexible:
        r.tags()

    def rcount():
        return r.uvarint() - 1 if flexible else r.take(">i")

    def rstring():
        if flexible:
            return r.compact_string()
        n = r.take(">h")
        v = r.data[r.pos:r.pos + n].decode()
        r.pos += n
        return v

    r.take(">i")                                          # throttle_time_ms
    if version >= 3 and r.take(">h") != 0:
        raise AssertionError("DescribeLogDirs: top-level error")
    dirs = []
    for _ in range(rcount()):
        error = r.take(">h")
        log_dir = rstring()
        parts = {}
        for _ in range(rcount()):
            name = rstring()
            for _ in range(rcount()):
                index, size, lag, future = r.take(">iqqb")
                if flexible:
                    r.tags()
                parts[(name, index)] = (size, lag, future)
            if flexible:
                r.tags()
        total = usable = -1
        if version >= 4:
            total, usable = r.take(">qq")
        if flexible:
            r.tags()
        dirs.append((error, log_dir, parts, total, usable))
    return dirs


def test_describe_log_dirs(t):
    b = t.broker()
    topic = t.topic("logdirs")
    create_topic(b, topic, 3)
    p = producer(b)
    for i in range(3000):
        p.produce(topic, b"x" * (100 + i % 50), f"k{i}".encode(), partition=i % 3)
    if p.flush(60) != 0:
        raise AssertionError("produce did not finish")
    if served_versions(b).get(DESCRIBE_LOG_DIRS) != (0, 4):
        raise AssertionError(f"ApiVersions: DescribeLogDirs {served_versions(b).get(DESCRIBE_LOG_DIRS)}")
    if b.store == "s3":
        expected_dir = f"s3://{os.environ['S3_BUCKET']}/{b.namespace}"
    else:
        expected_dir = os.path.abspath(b.data_dir)
    for version in (1, 4):
        dirs = describe_log_dirs(b, version)
        if len(dirs) != 1:
            raise AssertionError(f"v{version}: {len(dirs)} log dirs")
        error, log_dir, parts, total, usable = dirs[0]
        if error != 0 or log_dir != expected_dir:
            raise AssertionError(f"v{version}: error {error}, log dir {log_dir!r}, expected {expected_dir!r}")
        mine = {k: v for k, v in parts.items() if k[0] == topic}
        if sorted(k[1] for k in mine) != [0, 1, 2]:
            raise AssertionError(f"v{version}: partitions {sorted(mine)}")
        for (name, index), (size, lag, future) in mine.items():
            if size <= 100_000 or lag != 0 or future:
                raise AssertionError(f"v{version}: partition {index}: size {size}, lag {lag}, future {future}")
            if b.store != "s3":
                pdir = os.path.join(b.data_dir, "default", topic, str(index))
                on_disk = sum(os.path.getsize(os.path.join(pdir, f)) for f in os.listdir(pdir)
                              if f.endswith(".kfs") or f.endswith(".index"))
                if size != on_disk:
                    raise AssertionError(f"v{version}: partition {index}: {size} bytes, {on_disk} on disk")
        if version >= 4:
            if b.store == "s3" and (total, usable) != (-1, -1):
                raise AssertionError(f"v4 on a bucket: total {total}, usable {usable}")
            if b.store != "s3" and not (0 < usable <= total):
                raise AssertionError(f"v4: total {total}, usable {usable}")
    # Some partitions only, in the flexible version.
    dirs = describe_log_dirs(b, 4, {topic: [1], "no-such-topic": [0]})
    asked = dirs[0][2]
    if sorted(asked) != [(topic, 1)]:
        raise AssertionError(f"v4 for partition 1 only: {sorted(asked)}")
    t.log(f"log dir {expected_dir}: sizes {[mine[(topic, i)][0] for i in range(3)]}")
    b.stop()


def offset_delete(b, group, topics, corr=11):
    """OffsetDelete v0. topics: {topic: [partitions]}. Returns (error, {(topic, p): error})."""
    def string(x):
        x = x.encode()
        return struct.pack(">h", len(x)) + x

    body = string(group) + struct.pack(">i", len(topics))
    for name, parts in topics.items():
        body += string(name) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    with connect(b) as s:
        s.sendall(request(OFFSET_DELETE, 0, corr, body, client_id=b"skiff-admin-test"))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("the broker closed the connection on OffsetDelete")
    r = Reader(resp)
    if r.take(">i") != corr:
        raise AssertionError("wrong correlation id")
    error, _throttle = r.take(">hi")
    out = {}
    for _ in range(r.take(">i")):
        n = r.take(">h")
        name = r.data[r.pos:r.pos + n].decode()
        r.pos += n
        for _ in range(r.take(">i")):
            index, perr = r.take(">ih")
            out[(name, index)] = perr
    return error, out


def committed(b, group, tps):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=20)}
    finally:
        c.close()


def test_offset_delete(t):
    b = t.broker()
    subscribed, other = t.topic("subscribed"), t.topic("other")
    create_topic(b, subscribed, 2)
    create_topic(b, other, 1)
    produce_all(b, subscribed, [(i % 2, None, f"v{i}".encode(), None) for i in range(20)])
    group = t.topic("group")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    c.subscribe([subscribed])
    got = 0
    deadline = time.monotonic() + 60
    while got < 20 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    if got < 20:
        raise AssertionError(f"the consumer read {got} of 20 records")
    c.commit(asynchronous=False)
    c.commit(offsets=[TopicPartition(other, 0, 5)], asynchronous=False)
    before = committed(b, group, [TopicPartition(subscribed, 0), TopicPartition(subscribed, 1),
                                  TopicPartition(other, 0)])
    if before[(other, 0)] != 5 or before[(subscribed, 0)] != 10 or before[(subscribed, 1)] != 10:
        raise AssertionError(f"committed before: {before}")
    error, parts = offset_delete(b, group, {subscribed: [0], other: [0], "no-such-topic": [0]})
    expected = {(subscribed, 0): GROUP_SUBSCRIBED_TO_TOPIC, (other, 0): 0,
                ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    if error != 0 or parts != expected:
        raise AssertionError(f"OffsetDelete with a live member: error {error}, {parts}")
    after = committed(b, group, [TopicPartition(subscribed, 0), TopicPartition(other, 0)])
    if after[(other, 0)] >= 0 or after[(subscribed, 0)] != 10:
        raise AssertionError(f"committed after the first OffsetDelete: {after}")
    c.close()   # leaves the group: Empty
    error, parts = offset_delete(b, group, {subscribed: [0]})
    if error != 0 or parts != {(subscribed, 0): 0}:
        raise AssertionError(f"OffsetDelete of the empty group: error {error}, {parts}")
    b.restart()
    b.wait_restored()
    final = committed(b, group, [TopicPartition(subscribed, 0), TopicPartition(subscribed, 1),
                                 TopicPartition(other, 0)])
    if final[(subscribed, 0)] >= 0 or final[(other, 0)] >= 0 or final[(subscribed, 1)] != 10:
        raise AssertionError(f"committed after a restart: {final}")
    error, parts = offset_delete(b, "no-such-group", {subscribed: [0]})
    if error != GROUP_ID_NOT_FOUND or parts:
        raise AssertionError(f"OffsetDelete of an unknown group: error {error}, {parts}")
    t.log(f"committed {before} -> {final} (negative: none)")
    b.stop()


def served_versions(b):
    with connect(b) as s:
        s.sendall(request(API_VERSIONS, 0, 1))
        resp = recv_response(s)
    r = Reader(resp)
    r.take(">i")
    if r.take(">h") != 0:
        raise AssertionError("ApiVersions failed")
    return {k: (lo, hi) for k, lo, hi in (r.take(">hhh") for _ in range(r.take(">i")))}


def test_describe_producers(t):
    b = t.broker()
    topic = t.topic("producers")
    create_topic(b, topic, 2)
    if served_versions(b).get(DESCRIBE_PRODUCERS) != (0, 0):
        raise AssertionError(f"ApiVersions: DescribeProducers {served_versions(b).get(DESCRIBE_PRODUCERS)}")
    p = producer(b, **{"enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i in range(200):
        p.produce(topic, f"v{i}".encode(), b"k", partition=0,
                  on_delivery=lambda err, m: errors.append(err) if err else None)
    if p.flush(60) != 0 or errors:
        raise AssertionError(f"idempotent produce: {errors[:3]}")
    before = time.time() * 1000

    def check(where):
        got = describe_producers(b, topic, [0, 1, 7])
        err0, _, prods0 = got[(topic, 0)]
        if err0 != 0 or len(prods0) != 1:
            raise AssertionError(f"{where}: partition 0: error {err0}, producers {prods0}")
        pr = prods0[0]
        if pr["producer_id"] < 0 or pr["epoch"] != 0 or pr["last_sequence"] != 199:
            raise AssertionError(f"{where}: partition 0: {pr}")
        if not (before - 120_000 < pr["last_timestamp"] <= before + 1000):
            raise AssertionError(f"{where}: last timestamp {pr['last_timestamp']}, produced before {before:.0f}")
        if pr["coordinator_epoch"] != -1 or pr["current_txn_start_offset"] != -1:
            raise AssertionError(f"{where}: transactional fields {pr}")
        if got[(topic, 1)][0] != 0 or got[(topic, 1)][2]:
            raise AssertionError(f"{where}: partition 1: {got[(topic, 1)]}")
        if got[(topic, 7)][0] != UNKNOWN_TOPIC_OR_PARTITION:
            raise AssertionError(f"{where}: partition 7: {got[(topic, 7)]}")
        return pr

    first = check("after producing")
    b.restart()
    b.wait_restored()
    again = check("after a restart")
    if again["producer_id"] != first["producer_id"]:
        raise AssertionError(f"producer id {again['producer_id']} after the restart, {first['producer_id']} before")
    t.log(f"producer {first['producer_id']}: epoch {first['epoch']}, last sequence {first['last_sequence']}, "
          f"before and after a restart")
    b.stop()



def find_coordinator_v0(b, group):
    """FindCoordinator v0 for a group: (error, node id, host, port)."""
    g = group.encode()
    with connect(b) as s:
        s.sendall(request(FIND_COORDINATOR, 0, 21, struct.pack(">h", len(g)) + g))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("FindCoordinator v0: connection closed")
    r = Reader(resp)
    corr, err, node = r.take(">i"), r.take(">h"), r.take(">i")
    n = r.take(">h")
    host = r.data[r.pos:r.pos + n].decode()
    r.pos += n
    port = r.take(">i")
    if corr != 21:
        raise AssertionError(f"FindCoordinator v0: correlation id {corr}")
    return err, node, host, port


def test_node_id(t):
    b = t.broker(extra_args=["--node-id", "7"])
    topic = t.topic("node")
    create_topic(b, topic, 2)
    md = admin(b).list_topics(timeout=20)
    if sorted(md.brokers) != [7] or md.controller_id != 7:
        raise AssertionError(f"Metadata with --node-id 7: brokers {sorted(md.brokers)}, controller {md.controller_id}")
    leaders = sorted(p.leader for p in md.topics[topic].partitions.values())
    if leaders != [7, 7]:
        raise AssertionError(f"Metadata with --node-id 7: partition leaders {leaders}")
    err, node, host, port = find_coordinator_v0(b, "g-node")
    if (err, node, host, port) != (0, 7, "127.0.0.1", b.port):
        raise AssertionError(f"FindCoordinator with --node-id 7: {(err, node, host, port)}")
    # Real clients follow the id to the same address.
    produce_all(b, topic, [(i % 2, b"k%d" % i, b"v%d" % i, None) for i in range(20)])
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-node", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got, deadline = 0, time.time() + 30
        while got < 20 and time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got += 1
    finally:
        c.close()
    if got != 20:
        raise AssertionError(f"a consumer of broker 7 read {got} of 20 records")
    b.stop()
    # The two names of the id must agree.
    bad = t.broker(extra_args=["--node-id", "1", "--broker-id", "2"], start=False)
    out = subprocess.run(bad.args(), capture_output=True, text=True, timeout=30)
    if out.returncode == 0 or "--node-id 1 and --broker-id 2" not in out.stderr:
        raise AssertionError(f"--node-id 1 --broker-id 2: exit {out.returncode}, stderr {out.stderr!r:.200}")


def metadata_v4(b, topics, allow_auto):
    """Metadata v4 for `topics`: {name: (error, [partition indexes])}."""
    body = struct.pack(">i", len(topics))
    for name in topics:
        body += struct.pack(">h", len(name)) + name.encode()
    body += struct.pack(">b", 1 if allow_auto else 0)
    with connect(b) as s:
        s.sendall(request(METADATA, 4, 31, body))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("Metadata v4: connection closed")
    r = Reader(resp)

    def string():
        n = r.take(">h")
        if n < 0:
            return None
        v = r.data[r.pos:r.pos + n].decode()
        r.pos += n
        return v

    if r.take(">i") != 31:
        raise AssertionError("Metadata v4: wrong correlation id")
    r.take(">i")  # throttle
    for _ in range(r.take(">i")):
        r.take(">i"), string(), r.take(">i"), string()
    string()  # cluster id
    r.take(">i")  # controller
    out = {}
    for _ in range(r.take(">i")):
        err, name, _internal = r.take(">h"), string(), r.take(">b")
        parts = []
        for _ in range(r.take(">i")):
            _perr, idx, _leader = r.take(">h"), r.take(">i"), r.take(">i")
            for _ in range(r.take(">i")):
                r.take(">i")
            for _ in range(r.take(">i")):
                r.take(">i")
            parts.append(idx)
        out[name] = (err, sorted(parts))
    return out


def test_metadata_auto_create(t):
    b = t.broker(extra_args=["--auto-create-topics", "true", "--default-partitions", "3"])
    topic, unknown = t.topic("auto"), t.topic("never")
    got = metadata_v4(b, [unknown], allow_auto=False)
    if got != {unknown: (UNKNOWN_TOPIC_OR_PARTITION, [])}:
        raise AssertionError(f"Metadata without auto-creation: {got}")
    first = metadata_v4(b, [topic], allow_auto=True)
    if first != {topic: (LEADER_NOT_AVAILABLE, [])}:
        raise AssertionError(f"the Metadata that creates {topic}: {first}, expected LEADER_NOT_AVAILABLE and "
                             "no partitions")
    second = metadata_v4(b, [topic, unknown], allow_auto=False)
    if second != {topic: (0, [0, 1, 2]), unknown: (UNKNOWN_TOPIC_OR_PARTITION, [])}:
        raise AssertionError(f"the next Metadata: {second}")
    # Deleted, then asked for: it comes back as a new topic, not at once with partitions.
    a = admin(b)   # alive until the future resolves
    a.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    again = metadata_v4(b, [topic], allow_auto=True)
    if again != {topic: (LEADER_NOT_AVAILABLE, [])}:
        raise AssertionError(f"Metadata of a just-deleted topic: {again}")
    if metadata_v4(b, [topic], allow_auto=True) != {topic: (0, [0, 1, 2])}:
        raise AssertionError("the re-created topic has no partitions on the next Metadata")
    # A real producer follows the retry to an auto-created topic.
    fresh = t.topic("auto-produce")
    produce_all(b, fresh, [(None, b"k%d" % i, b"v%d" % i, None) for i in range(10)])
    if metadata_v4(b, [fresh], allow_auto=False)[fresh][0] != 0:
        raise AssertionError("the producer's topic was not created")


def elect_leaders(b, topics, election_type=0, version=1, timeout_ms=30000):
    """ElectLeaders v0-2. topics: {topic: [partitions]} or None (every partition).
    Returns (top-level error or None for v0, {topic: {partition: error}})."""
    flexible = version >= 2

    def string(x):
        x = x.encode()
        return uvarint(len(x) + 1) + x if flexible else struct.pack(">h", len(x)) + x

    def array_len(n):
        if n is None:
            return b"\x00" if flexible else struct.pack(">i", -1)
        return uvarint(n + 1) if flexible else struct.pack(">i", n)

    body = struct.pack(">b", election_type) if version >= 1 else b""
    if topics is None:
        body += array_len(None)
    else:
        body += array_len(len(topics))
        for name, parts in topics.items():
            body += string(name) + array_len(len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
            body += b"\x00" if flexible else b""
    body += struct.pack(">i", timeout_ms) + (b"\x00" if flexible else b"")
    r = exchange(b, ELECT_LEADERS, version, 41, body, f"ElectLeaders v{version}", flexible=flexible,
                 timeout=timeout_ms / 1000 + 30)

    def n_items():
        return r.uvarint() - 1 if flexible else r.take(">i")

    def rstring():
        if flexible:
            n = r.uvarint() - 1
        else:
            n = r.take(">h")
        if n < 0:
            return None
        v = r.data[r.pos:r.pos + n].decode()
        r.pos += n
        return v

    r.take(">i")  # throttle
    top = r.take(">h") if version >= 1 else None
    out = {}
    for _ in range(n_items()):
        topic = rstring()
        parts = {}
        for _ in range(n_items()):
            pid, err = r.take(">i"), r.take(">h")
            rstring()
            if flexible:
                r.uvarint()
            parts[pid] = err
        if flexible:
            r.uvarint()
        out[topic] = parts
    return top, out


def test_elect_leaders(t):
    b = t.broker()
    topic = t.topic("elect")
    create_topic(b, topic, 3)
    for v in (0, 1, 2):
        top, got = elect_leaders(b, {topic: [0, 2, 7], "no-such-topic": [0]}, version=v)
        want = {topic: {0: ELECTION_NOT_NEEDED, 2: ELECTION_NOT_NEEDED, 7: UNKNOWN_TOPIC_OR_PARTITION},
                "no-such-topic": {0: UNKNOWN_TOPIC_OR_PARTITION}}
        if got != want or top not in (None, 0):
            raise AssertionError(f"ElectLeaders v{v}: {top} {got}, expected {want}")
    top, got = elect_leaders(b, None, version=1)
    if top != 0 or got.get(topic) != {}:
        raise AssertionError(f"ElectLeaders of every partition: {top} {got}, expected {topic} with none listed")
    top, got = elect_leaders(b, {topic: [0]}, election_type=1, version=2)
    if (top, got) != (0, {topic: {0: ELECTION_NOT_NEEDED}}):
        raise AssertionError(f"an unclean ElectLeaders: {top} {got}")
    top, got = elect_leaders(b, {topic: [0]}, election_type=5, version=1)
    if top != INVALID_REQUEST:
        raise AssertionError(f"ElectLeaders with election type 5: top-level error {top}, expected 42")
    if served_versions(b).get(ELECT_LEADERS) != (0, 2):
        raise AssertionError(f"ApiVersions lists ElectLeaders as {served_versions(b).get(ELECT_LEADERS)}")


def _str(x):
    if x is None:
        return struct.pack(">h", -1)
    x = x.encode()
    return struct.pack(">h", len(x)) + x


def _read_str(r):
    n = r.take(">h")
    if n < 0:
        return None
    v = r.data[r.pos:r.pos + n].decode()
    r.pos += n
    return v


def _entity_key(parts):
    return tuple(sorted(parts))


def alter_client_quotas(b, entries, validate_only=False):
    """AlterClientQuotas v0. entries: [([(type, name or None)], [(key, value or None to remove)])].
    Returns [(error, message)] in request order."""
    body = struct.pack(">i", len(entries))
    for entity, ops in entries:
        body += struct.pack(">i", len(entity)) + b"".join(_str(t) + _str(n) for t, n in entity)
        body += struct.pack(">i", len(ops))
        for k, v in ops:
            body += _str(k) + struct.pack(">d", v if v is not None else 0.0) + struct.pack(">b", v is None)
    body += struct.pack(">b", validate_only)
    r = exchange(b, ALTER_CLIENT_QUOTAS, 0, 51, body, "AlterClientQuotas v0")
    r.take(">i")
    out = []
    for _ in range(r.take(">i")):
        err, msg = r.take(">h"), _read_str(r)
        for _ in range(r.take(">i")):
            _read_str(r), _read_str(r)
        out.append((err, msg))
    return out


def describe_client_quotas(b, components=(), strict=False):
    """DescribeClientQuotas v0. components: [(type, match_type, match)]. Returns (error, message,
    {entity key: {quota key: value}} or None)."""
    body = struct.pack(">i", len(components))
    for t, mt, m in components:
        body += _str(t) + struct.pack(">b", mt) + _str(m)
    body += struct.pack(">b", strict)
    r = exchange(b, DESCRIBE_CLIENT_QUOTAS, 0, 52, body, "DescribeClientQuotas v0")
    r.take(">i")
    err, msg = r.take(">h"), _read_str(r)
    n = r.take(">i")
    if n < 0:
        return err, msg, None
    out = {}
    for _ in range(n):
        entity = [(_read_str(r), _read_str(r)) for _ in range(r.take(">i"))]
        values = {}
        for _ in range(r.take(">i")):
            k = _read_str(r)
            values[k] = r.take(">d")
        out[_entity_key(entity)] = values
    return err, msg, out


def test_client_quotas_api(t):
    b = t.broker()
    if describe_client_quotas(b) != (0, None, {}):
        raise AssertionError(f"a fresh broker describes quotas {describe_client_quotas(b)}")
    slow = [("client-id", "slow")]
    defaults = [("user", None), ("client-id", None)]
    alice = [("user", "alice")]
    got = alter_client_quotas(b, [
        (slow, [("producer_byte_rate", 65536.0)]),
        (defaults, [("consumer_byte_rate", 1048576.0)]),
        (alice, [("producer_byte_rate", 2048.0), ("consumer_byte_rate", 4096.0)]),
        ([], [("producer_byte_rate", 1.0)]),
        ([("client-id", "a"), ("client-id", "b")], [("producer_byte_rate", 1.0)]),
        ([("group", "g")], [("producer_byte_rate", 1.0)]),
        ([("ip", "127.0.0.1"), ("user", "u")], [("connection_creation_rate", 1.0)]),
        ([("client-id", "")], [("producer_byte_rate", 1.0)]),
        (slow, [("no_such_key", 1.0)]),
        ([("client-id", "zero")], [("producer_byte_rate", 0.0)]),
        ([("client-id", "frac")], [("producer_byte_rate", 1.5)]),
        ([("client-id", "req")], [("request_percentage", 50.0)]),
    ])
    want = [
        (0, None), (0, None), (0, None),
        (INVALID_REQUEST, "Invalid empty client quota entity"),
        (INVALID_REQUEST, "Invalid client quota entity, duplicate entity entry client-id"),
        (INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (INVALID_REQUEST, "Empty client-id not supported"),
        (INVALID_REQUEST, "Invalid configuration key no_such_key"),
        (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
        (INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
        (INVALID_REQUEST, "request_percentage is not enforced by skiff; only producer_byte_rate and "
                          "consumer_byte_rate are"),
    ]
    if got != want:
        raise AssertionError("AlterClientQuotas answers:\n" + "\n".join(f"  {g} (want {w})" for g, w in zip(got, want)))
    # validate_only: checked, not stored.
    if alter_client_quotas(b, [([("client-id", "dry")], [("producer_byte_rate", 5.0)])], validate_only=True) != [(0, None)]:
        raise AssertionError("a validate_only AlterClientQuotas was refused")
    all_three = {_entity_key(slow): {"producer_byte_rate": 65536.0},
                 _entity_key(defaults): {"consumer_byte_rate": 1048576.0},
                 _entity_key(alice): {"consumer_byte_rate": 4096.0, "producer_byte_rate": 2048.0}}
    if describe_client_quotas(b) != (0, None, all_three):
        raise AssertionError(f"DescribeClientQuotas of everything: {describe_client_quotas(b)}")
    # Kafka's filters.
    cases = [
        (([("client-id", 0, "slow")], False), {_entity_key(slow): all_three[_entity_key(slow)]}),
        (([("client-id", 1, None)], False), {_entity_key(defaults): all_three[_entity_key(defaults)]}),
        (([("client-id", 2, None)], False), {k: all_three[k] for k in (_entity_key(slow), _entity_key(defaults))}),
        (([("client-id", 2, None)], True), {_entity_key(slow): all_three[_entity_key(slow)]}),
        (([("user", 0, "alice")], True), {_entity_key(alice): all_three[_entity_key(alice)]}),
        (([("user", 0, "bob")], False), {}),
    ]
    for (components, strict), want_entries in cases:
        got = describe_client_quotas(b, components, strict)
        if got != (0, None, want_entries):
            raise AssertionError(f"DescribeClientQuotas {components} strict={strict}: {got}, expected {want_entries}")
    refusals = [
        ([("group", 0, "x")], UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([("user", 0, None)], INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([("user", 1, "x")], INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([("user", 2, None), ("user", 0, "x")], INVALID_REQUEST, "Entity type user cannot appear more than once in the filter."),
        ([("ip", 2, None), ("user", 2, None)], INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
         "component should not be used with user or clientId filter component."),
        ([("user", 7, None)], INVALID_REQUEST, "Unknown match type 7"),
    ]
    for components, code, message in refusals:
        got = describe_client_quotas(b, components)
        if got != (code, message, None):
            raise AssertionError(f"DescribeClientQuotas {components}: {got}, expected {(code, message, None)}")
    # Stored: a restart has them back; a removal takes one key away, the last key the entity.
    b.restart()
    if describe_client_quotas(b) != (0, None, all_three):
        raise AssertionError(f"after a restart: {describe_client_quotas(b)}")
    if alter_client_quotas(b, [(alice, [("producer_byte_rate", None)]), (slow, [("producer_byte_rate", None)])]) != \
            [(0, None), (0, None)]:
        raise AssertionError("removing quotas was refused")
    left = {_entity_key(defaults): all_three[_entity_key(defaults)], _entity_key(alice): {"consumer_byte_rate": 4096.0}}
    if describe_client_quotas(b) != (0, None, left):
        raise AssertionError(f"after removals: {describe_client_quotas(b)}")
    if served_versions(b).get(DESCRIBE_CLIENT_QUOTAS) != (0, 1) or served_versions(b).get(ALTER_CLIENT_QUOTAS) != (0, 1):
        raise AssertionError("ApiVersions does not list DescribeClientQuotas and AlterClientQuotas v0-1")


def test_api_table_matches_docs(t):
    """docs/broker.md's table of APIs says exactly what ApiVersions lists."""
    b = t.broker()
    served = served_versions(b)
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "broker.md")
    documented = {}
    for line in open(doc):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].isdigit() and cells[3] != "not served":
            lo, _, hi = cells[3].partition("-")
            documented[int(cells[0])] = (int(lo), int(hi or lo))
    if documented != served:
        raise AssertionError(f"docs/broker.md lists {sorted(documented.items())}, ApiVersions {sorted(served.items())}")


def _cstr(x):
    if x is None:
        return b"\x00"
    x = x.encode()
    return uvarint(len(x) + 1) + x


def _read_cstr(r):
    n = r.uvarint() - 1
    if n < 0:
        return None
    v = r.data[r.pos:r.pos + n].decode()
    r.pos += n
    return v


def alter_reassignments(b, topics, timeout_ms=30000):
    """AlterPartitionReassignments v0 (flexible). topics: {topic: {partition: [replicas] or None}}.
    Returns (error, message, {topic: {partition: (error, message)}})."""
    body = struct.pack(">i", timeout_ms) + uvarint(len(topics) + 1)
    for name, parts in topics.items():
        body += _cstr(name) + uvarint(len(parts) + 1)
        for p, replicas in parts.items():
            body += struct.pack(">i", p)
            if replicas is None:
                body += b"\x00"
            else:
                body += uvarint(len(replicas) + 1) + b"".join(struct.pack(">i", x) for x in replicas)
            body += b"\x00"
        body += b"\x00"
    body += b"\x00"
    r = exchange(b, ALTER_PARTITION_REASSIGNMENTS, 0, 61, body, "AlterPartitionReassignments", flexible=True,
                 timeout=timeout_ms / 1000 + 30)
    r.take(">i")
    err, msg = r.take(">h"), _read_cstr(r)
    out = {}
    for _ in range(r.uvarint() - 1):
        name = _read_cstr(r)
        parts = {}
        for _ in range(r.uvarint() - 1):
            p, perr, pmsg = r.take(">i"), r.take(">h"), _read_cstr(r)
            r.uvarint()
            parts[p] = (perr, pmsg)
        r.uvarint()
        out[name] = parts
    return err, msg, out


def list_reassignments(b, topics=None):
    """ListPartitionReassignments v0. topics: {topic: [partitions]} or None. Returns
    {topic: {partition: (replicas, adding, removing)}}."""
    body = struct.pack(">i", 30000)
    if topics is None:
        body += b"\x00"
    else:
        body += uvarint(len(topics) + 1)
        for name, parts in topics.items():
            body += _cstr(name) + uvarint(len(parts) + 1) + b"".join(struct.pack(">i", p) for p in parts) + b"\x00"
    body += b"\x00"
    r = exchange(b, LIST_PARTITION_REASSIGNMENTS, 0, 62, body, "ListPartitionReassignments", flexible=True)
    r.take(">i")
    err, msg = r.take(">h"), _read_cstr(r)
    if err != 0:
        raise AssertionError(f"ListPartitionReassignments: error {err} {msg}")

    def ints():
        return [r.take(">i") for _ in range(r.uvarint() - 1)]

    out = {}
    for _ in range(r.uvarint() - 1):
        name = _read_cstr(r)
        parts = {}
        for _ in range(r.uvarint() - 1):
            p = r.take(">i")
            parts[p] = (ints(), ints(), ints())
            r.uvarint()
        r.uvarint()
        out[name] = parts
    return out


def test_reassignments_one_broker(t):
    b = t.broker()
    topic = t.topic("reassign")
    create_topic(b, topic, 2)
    err, msg, got = alter_reassignments(b, {topic: {0: [0], 1: [5], 7: [0]}, "nope": {0: [0]}})
    want = {topic: {0: (0, None),
                    1: (INVALID_REPLICA_ASSIGNMENT,
                        "The manual partition assignment includes broker 5, but no such broker is registered."),
                    7: (UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:7.")},
            "nope": {0: (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")}}
    if (err, msg, got) != (0, None, want):
        raise AssertionError(f"AlterPartitionReassignments: {(err, msg, got)}, expected {want}")
    _, _, got = alter_reassignments(b, {topic: {0: [], 1: [0, 0]}})
    want = {topic: {0: (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
                    1: (INVALID_REPLICA_ASSIGNMENT,
                        "The manual partition assignment includes the broker 0 more than once.")}}
    if got != want:
        raise AssertionError(f"AlterPartitionReassignments of bad lists: {got}")
    _, _, got = alter_reassignments(b, {topic: {0: None}})
    if got != {topic: {0: (NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")}}:
        raise AssertionError(f"cancelling with nothing in progress: {got}")
    if list_reassignments(b) != {} or list_reassignments(b, {topic: [0, 1]}) != {}:
        raise AssertionError("a single broker lists a reassignment in progress")

if __name__ == "__main__":
    broker.main([(test_describe_producers, 120), (test_describe_log_dirs, 120), (test_offset_delete, 180),
                 (test_node_id, 120), (test_metadata_auto_create, 120),
                 (test_elect_leaders, 120),
                 (test_client_quotas_api, 120),
                 (test_api_table_matches_docs, 60),
                 (test_reassignments_one_broker, 60)])
