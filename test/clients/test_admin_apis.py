#!/usr/bin/python3
"""Kafka admin APIs that tools call (issue: OffsetDelete, DescribeLogDirs, DescribeProducers, ...),
checked on the wire against a running broker.

  - DescribeProducers (API 61, v0, KIP-664): after a confluent-kafka idempotent producer wrote
    200 records to one partition, the partition lists exactly that producer, with epoch 0, last
    sequence 199 and its last batch's timestamp; the other partition lists none; an unknown
    partition is UNKNOWN_TOPIC_OR_PARTITION; after a restart the same answer (rebuilt from the
    log). ApiVersions lists API 61 at v0.

No Python or JavaScript admin client in Debian 12 or npm's kafkajs speaks DescribeProducers, so
the request is encoded here from Kafka's schema (flexible v0: compact strings and arrays,
tagged fields).

    test_admin_apis.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, create_topic, producer  # noqa: E402
from test_bad_input import connect, recv_response, request  # noqa: E402

API_VERSIONS, DESCRIBE_PRODUCERS = 18, 61
UNKNOWN_TOPIC_OR_PARTITION = 3


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


if __name__ == "__main__":
    broker.main([(test_describe_producers, 120)])
