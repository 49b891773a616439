#!/usr/bin/python3
"""Kafka transactions (KIP-98) with real clients: confluent-kafka (librdkafka 2.0.2), kafkajs
(node/kafkajs_txn_test.js) and raw requests for what neither client has.

  - consume-transform-produce: 10,000 records through a transactional loop whose every 5th
    batch aborts and is re-processed; read_committed sees each record once and nothing of an
    aborted batch (also after a restart), read_uncommitted sees everything in order, the
    group's offsets are the ends
  - SIGKILL of the broker inside a transaction: the open transaction is aborted at recovery
    with the epoch bumped (the old producer is fenced, its pending TxnOffsetCommit dropped), a
    new instance initialises, committed records and offsets stay
  - SIGKILL of the producer inside a transaction: a new instance aborts it at init_transactions;
    without one, transaction.timeout.ms aborts it and read_committed readers move on
  - fencing: a second instance with the same transactional.id fences the first
  - ListTransactions / DescribeTransactions (KIP-664; confluent-kafka 2.0.2 lacks them): raw
  - EndTxn / AddPartitionsToTxn with an unknown id, a wrong producer id, a stale epoch: raw

    test_transactions.py --skiff build/src/cli/skiff [--store local|s3] [-k fencing]
"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import (Consumer, KafkaError, KafkaException, TopicPartition,  # noqa: E402
                    create_topic, produce_all)
from confluent_kafka import Producer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")

# Kafka's ways of saying "a newer instance of this transactional.id exists": librdkafka's own
# _FENCED, PRODUCER_FENCED (KIP-588) and, for older request versions, INVALID_PRODUCER_EPOCH.
FENCING_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}

# Raw protocol: api keys and error codes.
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, API_VERSIONS = 65, 66, 18
INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED = 47, 49, 90
TRANSACTIONAL_ID_NOT_FOUND = 105
RETRIABLE = {14, 15, 51}   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS


# --- confluent-kafka helpers --------------------------------------------------------------------

def txn_producer(b, tid, **conf):
    c = {"bootstrap.servers": b.bootstrap, "transactional.id": tid, "acks": "all",
         "linger.ms": 5, "log.connection.close": False, "socket.timeout.ms": 10000}
    c.update(conf)
    return Producer(c)


def group_consumer(b, group, **conf):
    c = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "enable.partition.eof": False, "log.connection.close": False,
         "isolation.level": "read_committed", "session.timeout.ms": 10000,
         "heartbeat.interval.ms": 500}
    c.update(conf)
    return Consumer(c)


def high_watermarks(b, topic, partitions):
    """The high watermarks (read_uncommitted ListOffsets: librdkafka asks with the consumer's
    isolation level, and read_committed would answer the last stable offset)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "txn-test-watermarks",
                  "isolation.level": "read_uncommitted", "log.connection.close": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def read_all(b, topic, partitions, isolation, timeout, ends=None):
    """Reads every partition from offset 0 until the consumer reports the partition's end
    (EOF: the high watermark, or for read_committed the last stable offset) at or past
    `ends` (default: the current high watermarks), so a read_committed read only finishes once
    no open transaction holds the LSO back. Returns {partition: [(offset, key, value)]}."""
    ends = ends if ends is not None else high_watermarks(b, topic, partitions)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"txn-reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "isolation.level": isolation,
                  "log.connection.close": False, "check.crcs": True})
    out = {p: [] for p in range(partitions)}
    eof = {}
    pending = {p for p in range(partitions) if ends[p] > 0}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{isolation} read of {topic} did not reach the ends {ends} within {timeout} s: "
                    + ", ".join(f"p{p}: {len(out[p])} records, last end reported "
                                f"{eof.get(p, 'none')}" for p in sorted(pending)))
            for m in c.consume(500, 0.3):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof[m.partition()] = m.offset()
                        if m.offset() >= ends[m.partition()]:
                            pending.discard(m.partition())
                        continue
                    raise AssertionError(f"{isolation} read of {topic}: {err}")
                out[m.partition()].append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def values(recs):
    return [v.decode() for p in sorted(recs) for (_, _, v) in recs[p]]


def expect_fenced(fn, what):
    """fn must raise a KafkaException with one of Kafka's fencing codes; returns the error."""
    try:
        fn()
    except KafkaException as e:
        err = e.args[0]
        if err.code() not in FENCING_CODES:
            raise AssertionError(f"{what}: failed with {err.name()} ({err}), expected one of "
                                 f"_FENCED, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH")
        return err
    raise AssertionError(f"{what}: succeeded, expected the producer to be fenced")


def produce_txn_records(p, topic, vals, partition=None):
    for v in vals:
        kw = {"value": v.encode(), "key": v.encode()}
        if partition is not None:
            kw["partition"] = partition
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(30)
    if left:
        raise AssertionError(f"{left} transactional records not delivered within 30 s")


# --- 1. consume-transform-produce ---------------------------------------------------------------

def test_consume_transform_produce(t):
    b = t.broker()
    src, dst, group, tid = t.topic("ctp-in"), t.topic("ctp-out"), t.topic("ctp-g"), t.topic("ctp-tx")
    create_topic(b, src, 3)
    create_topic(b, dst, 3)
    n = 10000
    produce_all(b, src, [(i % 3, str(i).encode(), f"in-{i}".encode(), None) for i in range(n)],
                **{"batch.num.messages": 500})
    in_ends = high_watermarks(b, src, 3)
    if sum(in_ends.values()) != n:
        raise AssertionError(f"input ends {in_ends}: expected {n} records in all")

    p = txn_producer(b, tid)
    p.init_transactions(30)
    c = group_consumer(b, group)
    c.subscribe([src])
    committed = {q: 0 for q in range(3)}    # offsets of the last committed transaction
    nxt = dict(committed)                   # what the loop consumed up to
    done = set()                            # input ids of committed batches
    aborted_batches, committed_batches = set(), 0
    batch_no = 0
    deadline = time.monotonic() + 75
    t0 = time.monotonic()
    try:
        while len(done) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the loop committed {len(done)} of {n} records within 75 s "
                                     f"({committed_batches} commits, {len(aborted_batches)} aborts)")
            batch = []
            fill_deadline = time.monotonic() + 2
            while len(batch) < 200 and time.monotonic() < fill_deadline:
                for m in c.consume(200 - len(batch), 0.2):
                    if m.error():
                        raise AssertionError(f"input consumer: {m.error()}")
                    batch.append(m)
            if not batch:
                continue
            batch_no += 1
            abort = batch_no % 5 == 0
            p.begin_transaction()
            for m in batch:
                i = int(m.key())
                # The batch number tells the records of aborted batches apart.
                p.produce(dst, key=m.key(), value=f"out-{i}-b{batch_no}".encode(),
                          partition=m.partition())
                p.poll(0)
                if m.offset() != nxt[m.partition()]:
                    raise AssertionError(f"input p{m.partition()}: offset {m.offset()} consumed, "
                                         f"expected {nxt[m.partition()]} (after a seek?)")
                nxt[m.partition()] = m.offset() + 1
            if abort:
                # Flushed first: abort_transaction purges what librdkafka has not sent, and
                # the aborted records must be in the log for read_committed to skip them.
                if p.flush(30):
                    raise AssertionError("the batch to abort was not delivered within 30 s")
                p.abort_transaction(30)
                aborted_batches.add(batch_no)
                # Re-process: back to the last committed offsets.
                for q in range(3):
                    c.seek(TopicPartition(src, q, committed[q]))
                nxt = dict(committed)
                continue
            touched = sorted({m.partition() for m in batch})
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(src, q) for q in touched])}
            if pos != {q: nxt[q] for q in touched}:
                raise AssertionError(f"consumer.position {pos} disagrees with the consumed offsets "
                                     f"{ {q: nxt[q] for q in touched} }")
            offsets = [TopicPartition(src, q, nxt[q]) for q in range(3)]
            p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            committed_batches += 1
            committed = dict(nxt)
            for m in batch:
                i = int(m.key())
                if i in done:
                    raise AssertionError(f"input record {i} was in two committed batches")
                done.add(i)
    finally:
        c.close()
    t.log(f"loop: {committed_batches} commits, {len(aborted_batches)} aborts in "
          f"{time.monotonic() - t0:.1f} s")

    out_ends = high_watermarks(b, dst, 3)
    rc = read_all(b, dst, 3, "read_committed", 30, ends=out_ends)
    ru = read_all(b, dst, 3, "read_uncommitted", 30, ends=out_ends)

    # read_committed: each input record exactly once, none from an aborted batch.
    seen = {}
    for v in values(rc):
        _, i, bno = v.split("-")
        if int(bno[1:]) in aborted_batches:
            raise AssertionError(f"read_committed returned {v!r} of aborted batch {bno}")
        seen.setdefault(int(i), []).append(v)
    dups = {i: vs for i, vs in seen.items() if len(vs) > 1}
    missing = set(range(n)) - set(seen)
    if dups or missing:
        raise AssertionError(f"read_committed: {len(dups)} records more than once (e.g. "
                             f"{sorted(dups.items())[:3]}), {len(missing)} missing (e.g. {sorted(missing)[:5]})")
    # Per partition the output keeps the input's partition and order.
    for q in range(3):
        ids = [int(v.decode().split("-")[1]) for (_, _, v) in rc[q]]
        if ids != sorted(ids) or any(i % 3 != q for i in ids):
            raise AssertionError(f"read_committed p{q}: records out of order or misplaced: {ids[:20]}...")

    # read_uncommitted: everything written, aborted batches included, offsets increasing.
    all_vals = values(ru)
    aborted_seen = {int(v.split("-")[2][1:]) for v in all_vals} & aborted_batches
    if aborted_seen != aborted_batches:
        raise AssertionError(f"read_uncommitted misses aborted batches {sorted(aborted_batches - aborted_seen)}")
    if len(all_vals) <= n or len(all_vals) - n != sum(1 for v in all_vals if int(v.split("-")[2][1:]) in aborted_batches):
        raise AssertionError(f"read_uncommitted: {len(all_vals)} records, expected {n} committed plus "
                             "the aborted batches' records")
    for q in range(3):
        offs = [o for (o, _, _) in ru[q]]
        if any(a >= b2 for a, b2 in zip(offs, offs[1:])):
            raise AssertionError(f"read_uncommitted p{q}: offsets not increasing")
        # Per partition the batches appear in the order they were produced.
        bnos = [int(v.decode().split("-")[2][1:]) for (_, _, v) in ru[q]]
        if bnos != sorted(bnos):
            raise AssertionError(f"read_uncommitted p{q}: batches out of order")
    t.log(f"read_committed {sum(len(v) for v in rc.values())}, read_uncommitted {len(all_vals)} "
          f"records; output ends {out_ends}")

    # After a restart the aborted ranges come from the store, not from memory: the same view.
    b.restart()
    b.wait_restored()
    rc2 = read_all(b, dst, 3, "read_committed", 30, ends=out_ends)
    if values(rc2) != values(rc):
        raise AssertionError(f"read_committed after a restart: {len(values(rc2))} records, "
                             f"{sum(1 for v in values(rc2) if int(v.split('-')[2][1:]) in aborted_batches)} "
                             f"of aborted batches; before the restart {len(values(rc))}")

    # The group's committed offsets are the input's ends.
    cc = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "log.connection.close": False})
    try:
        got = {tp.partition: tp.offset for tp in cc.committed([TopicPartition(src, q) for q in range(3)], timeout=10)}
    finally:
        cc.close()
    if got != in_ends:
        raise AssertionError(f"group {group}: committed offsets {got}, expected the input ends {in_ends}")


# --- 2. SIGKILL of the broker inside a transaction ----------------------------------------------

def test_broker_sigkill_mid_transaction(t):
    b = t.broker()
    topic, tid = t.topic("bk"), t.topic("bk-tx")
    create_topic(b, topic, 2)
    p1 = txn_producer(b, tid)
    p1.init_transactions(30)
    group = t.topic("bk-g")
    gc = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "log.connection.close": False})
    gmeta = gc.consumer_group_metadata()
    p1.begin_transaction()
    produce_txn_records(p1, topic, [f"committed-{i}" for i in range(50)])
    p1.send_offsets_to_transaction([TopicPartition(topic, 0, 42)], gmeta, 30)
    p1.commit_transaction(30)
    p1.begin_transaction()
    produce_txn_records(p1, topic, [f"open-{i}" for i in range(50)])   # acknowledged, not committed
    p1.send_offsets_to_transaction([TopicPartition(topic, 0, 99)], gmeta, 30)
    gc.close()
    before = describe_transactions(b, [tid])[tid]
    if before["state"] != "Ongoing":
        raise AssertionError(f"DescribeTransactions before the kill: {before}")
    b.kill()
    b.start()
    b.wait_restored()
    # The coordinator's state came back from the store: the ongoing transaction is aborted
    # with the epoch bumped, so the old instance is fenced.
    after = broker.wait_until(
        lambda: (lambda d: d if d["state"] == "CompleteAbort" else None)(describe_transactions(b, [tid])[tid]),
        15, f"{tid} to be CompleteAbort after the restart")
    if after["pid"] != before["pid"] or after["epoch"] <= before["epoch"]:
        raise AssertionError(f"after the restart: {after}; expected producer {before['pid']} with an "
                             f"epoch above {before['epoch']}")

    try:
        p1.commit_transaction(30)
    except KafkaException as e:
        err = e.args[0]
        t.log(f"old producer's commit after the restart: {err.name()} (fatal={err.fatal()}, "
              f"abortable={err.txn_requires_abort()})")
    else:
        raise AssertionError("the old producer committed a transaction the restarted broker "
                             "should have aborted (its epoch bumped)")
    p2 = txn_producer(b, tid)
    p2.init_transactions(30)
    p2.begin_transaction()
    produce_txn_records(p2, topic, [f"after-{i}" for i in range(50)])
    p2.commit_transaction(30)

    rc = values(read_all(b, topic, 2, "read_committed", 20))
    ru = values(read_all(b, topic, 2, "read_uncommitted", 20))
    want = sorted([f"committed-{i}" for i in range(50)] + [f"after-{i}" for i in range(50)])
    if sorted(rc) != want:
        opened = [v for v in rc if v.startswith("open-")]
        raise AssertionError(f"read_committed after the restart: {len(rc)} records, "
                             f"{len(opened)} of the uncommitted transaction (e.g. {opened[:3]}); "
                             f"missing {sorted(set(want) - set(rc))[:5]}")
    cc = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "log.connection.close": False})
    try:
        got = cc.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        cc.close()
    if got != 42:
        raise AssertionError(f"group {group}: committed offset {got} after the restart, expected 42 "
                             "(the committed transaction's, not the aborted one's 99)")
    if sum(v.startswith("open-") for v in ru) != 50:
        raise AssertionError("read_uncommitted does not show the 50 acknowledged records of the "
                             "aborted transaction: the test did not test what it should")


# --- 3. SIGKILL of the producer inside a transaction --------------------------------------------

_CHILD = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, tid, topic, n, timeout_ms, ready = sys.argv[1:7]
conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "acks": "all", "linger.ms": 5}
if int(timeout_ms) > 0:
    conf.update({"transaction.timeout.ms": int(timeout_ms), "message.timeout.ms": int(timeout_ms),
                 "socket.timeout.ms": int(timeout_ms)})
p = Producer(conf)
p.init_transactions(30)
p.begin_transaction()
for i in range(int(n)):
    p.produce(topic, key=b"k", value=f"killed-{i}".encode(), partition=0)
if p.flush(30):
    sys.exit("not flushed")
open(ready, "w").write("ready")
time.sleep(600)
"""


def killed_producer(t, b, tid, topic, n, timeout_ms=0):
    """Runs a producer that opens a transaction on partition 0, writes n records, flushes, and
    is then SIGKILLed."""
    ready = os.path.join(t.workdir, f"{tid}.ready")
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, b.bootstrap, tid, topic, str(n),
                             str(timeout_ms), ready],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t.cleanups.append(lambda: (proc.kill(), proc.wait()))
    broker.wait_until(lambda: os.path.exists(ready) or proc.poll() is not None, 30,
                      "the child producer to flush its transaction")
    if proc.poll() is not None:
        raise AssertionError(f"child producer exited with {proc.returncode}: "
                             f"{proc.stdout.read().decode(errors='replace')[-2000:]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_producer_sigkill_new_instance(t):
    b = t.broker()
    topic, tid = t.topic("pk"), t.topic("pk-tx")
    create_topic(b, topic, 1)
    killed_producer(t, b, tid, topic, 100)
    ends = high_watermarks(b, topic, 1)
    if ends[0] != 100:
        raise AssertionError(f"high watermark {ends[0]} after the killed producer's 100 records")
    # The open transaction holds read_committed readers at its first offset.
    try:
        read_all(b, topic, 1, "read_committed", 3, ends=ends)
    except AssertionError as e:
        if "did not reach" not in str(e):
            raise
    else:
        raise AssertionError("read_committed read past an open transaction")

    p = txn_producer(b, tid)
    p.init_transactions(30)   # aborts the dead instance's transaction
    p.begin_transaction()
    produce_txn_records(p, topic, [f"after-{i}" for i in range(20)], partition=0)
    p.commit_transaction(30)
    rc = values(read_all(b, topic, 1, "read_committed", 15))
    if rc != [f"after-{i}" for i in range(20)]:
        raise AssertionError(f"read_committed after the new instance's commit: {len(rc)} records, "
                             f"e.g. {rc[:3]}; expected only the 20 after-* records")


def test_producer_sigkill_timeout(t):
    b = t.broker()
    topic, tid = t.topic("pt"), t.topic("pt-tx")
    create_topic(b, topic, 1)
    killed_producer(t, b, tid, topic, 100, timeout_ms=3000)
    t_killed = time.monotonic()
    # Another transactional id commits behind the dead one's open transaction.
    p = txn_producer(b, t.topic("pt-other"))
    p.init_transactions(30)
    p.begin_transaction()
    produce_txn_records(p, topic, [f"other-{i}" for i in range(20)], partition=0)
    p.commit_transaction(30)
    ends = high_watermarks(b, topic, 1)
    rc = values(read_all(b, topic, 1, "read_committed", 15, ends=ends))
    t.log(f"read_committed got past the dead transaction {time.monotonic() - t_killed:.1f} s after the kill")
    if rc != [f"other-{i}" for i in range(20)]:
        raise AssertionError(f"read_committed after the timeout: {len(rc)} records, e.g. {rc[:3]}; "
                             "expected only the other id's 20 committed records")


# --- 4. fencing ---------------------------------------------------------------------------------

def test_fencing(t):
    b = t.broker()
    topic, tid = t.topic("fence"), t.topic("fence-tx")
    create_topic(b, topic, 1)
    p1 = txn_producer(b, tid)
    p1.init_transactions(30)
    p1.begin_transaction()
    produce_txn_records(p1, topic, [f"first-{i}" for i in range(10)], partition=0)
    p2 = txn_producer(b, tid)
    p2.init_transactions(30)   # a newer instance: p1's transaction is aborted, p1 fenced

    def first_goes_on():
        try:
            p1.produce(topic, value=b"first-late", partition=0)
            p1.flush(10)
        except KafkaException as e2:
            # _STATE: the transaction already failed; commit_transaction tells how.
            if e2.args[0].code() != KafkaError._STATE:
                raise
        p1.commit_transaction(20)
    err = expect_fenced(first_goes_on, "the first instance after the second's init_transactions")
    t.log(f"first instance: {err.name()} (fatal={err.fatal()}, abortable={err.txn_requires_abort()})")
    if not err.fatal():
        if not err.txn_requires_abort():
            raise AssertionError(f"fenced error {err.name()} is neither fatal nor abortable")
        # Abortable (INVALID_PRODUCER_EPOCH on a Produce): after the abort the old instance
        # still must not commit anything (its epoch bump is refused as fenced).
        def again():
            try:
                p1.abort_transaction(20)
            except KafkaException as e2:
                if e2.args[0].code() in FENCING_CODES:
                    raise
            p1.begin_transaction()
            p1.produce(topic, value=b"first-again", partition=0)
            p1.flush(10)
            p1.commit_transaction(20)
        expect_fenced(again, "the first instance's next transaction after an abortable fence")

    p2.begin_transaction()
    produce_txn_records(p2, topic, [f"second-{i}" for i in range(10)], partition=0)
    p2.commit_transaction(30)
    rc = values(read_all(b, topic, 1, "read_committed", 15))
    if rc != [f"second-{i}" for i in range(10)]:
        raise AssertionError(f"read_committed: {rc[:15]}; expected only the second instance's records")


# --- raw protocol helpers -----------------------------------------------------------------------

def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s_(v, flex):
    if v is None:
        return uvarint(0) if flex else struct.pack(">h", -1)
    e = v.encode()
    return (uvarint(len(e) + 1) if flex else struct.pack(">h", len(e))) + e


def arr(items, flex):
    return (uvarint(len(items) + 1) if flex else struct.pack(">i", len(items))) + b"".join(items)


class Reader:
    def __init__(self, data, flex):
        self.d, self.pos, self.flex = data, 0, flex

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def uvarint(self):
        shift = n = 0
        while True:
            c = self.d[self.pos]
            self.pos += 1
            n |= (c & 0x7F) << shift
            if c < 0x80:
                return n
            shift += 7

    def string(self):
        n = self.uvarint() - 1 if self.flex else self.take(">h")
        if n < 0:
            return None
        s = self.d[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def count(self):
        return self.uvarint() - 1 if self.flex else self.take(">i")

    def tags(self):
        if self.flex:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError("the broker closed the connection instead of answering")
        buf += chunk
    return buf


_corr = [100]


def exchange(b, api, version, body, flex):
    """One request on a fresh connection (header v2 with empty tags when flexible); a Reader
    past the response header."""
    _corr[0] += 1
    corr = _corr[0]
    hdr = struct.pack(">hhih", api, version, corr, 8) + b"txn-test"
    if flex:
        hdr += b"\x00"
    msg = hdr + body
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.settimeout(15)
        s.sendall(struct.pack(">i", len(msg)) + msg)
        (n,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, n)
    r = Reader(resp, flex)
    if r.take(">i") != corr:
        raise AssertionError(f"api {api}: wrong correlation id")
    r.tags()
    return r


def api_max_versions(b):
    r = exchange(b, API_VERSIONS, 0, b"", False)
    err = r.take(">h")
    if err:
        raise AssertionError(f"ApiVersions: error {err}")
    out = {}
    for _ in range(r.count()):
        k, lo, hi = r.take(">h"), r.take(">h"), r.take(">h")
        out[k] = (lo, hi)
    return out


def list_transactions(b, states=(), pids=()):
    body = arr([s_(x, True) for x in states], True) + arr([struct.pack(">q", x) for x in pids], True) + b"\x00"
    r = exchange(b, LIST_TRANSACTIONS, 0, body, True)
    r.take(">i")
    err = r.take(">h")
    if err:
        raise AssertionError(f"ListTransactions: error {err}")
    out = []
    for _ in range(r.count()):
        tid, pid, state = r.string(), r.take(">q"), r.string()
        r.tags()
        out.append((tid, pid, state))
    return out


def describe_transactions(b, tids):
    body = arr([s_(x, True) for x in tids], True) + b"\x00"
    r = exchange(b, DESCRIBE_TRANSACTIONS, 0, body, True)
    try:
        return _parse_describe_transactions(r)
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise AssertionError(f"DescribeTransactions v0 response does not parse with Kafka's layout: "
                             f"{e}; body {r.d.hex(' ')}")


def _parse_describe_transactions(r):
    r.take(">i")
    out = {}
    for _ in range(r.count()):
        d = {"error": r.take(">h"), "id": r.string(), "state": r.string(),
             "timeout_ms": r.take(">i"), "start_ms": r.take(">q"), "pid": r.take(">q"),
             "epoch": r.take(">i"), "partitions": {}}
        for _ in range(r.count()):
            name = r.string()
            d["partitions"][name] = sorted(r.take(">i") for _ in range(r.count()))
            r.tags()
        r.tags()
        out[d["id"]] = d
    r.tags()
    if r.pos != len(r.d):
        raise AssertionError(f"DescribeTransactions response: {len(r.d) - r.pos} bytes left over "
                             f"after Kafka's v0 layout (parsed {out})")
    return out


def init_producer_id(b, tid, timeout_ms=60000):
    """InitProducerId v1 (retrying Kafka's retriable answers); (error, pid, epoch)."""
    deadline = time.monotonic() + 20
    while True:
        r = exchange(b, INIT_PRODUCER_ID, 1, s_(tid, False) + struct.pack(">i", timeout_ms), False)
        r.take(">i")
        err, pid, epoch = r.take(">h"), r.take(">q"), r.take(">h")
        if err not in RETRIABLE or time.monotonic() > deadline:
            return err, pid, epoch
        time.sleep(0.2)


def end_txn(b, tid, pid, epoch, commit, version=2):
    body = s_(tid, False) + struct.pack(">qh?", pid, epoch, commit)
    r = exchange(b, END_TXN, version, body, False)
    r.take(">i")
    return r.take(">h")


def add_partitions_to_txn(b, tid, pid, epoch, topic, partitions, version=2):
    body = (s_(tid, False) + struct.pack(">qh", pid, epoch)
            + arr([s_(topic, False) + arr([struct.pack(">i", q) for q in partitions], False)], False))
    r = exchange(b, ADD_PARTITIONS_TO_TXN, version, body, False)
    r.take(">i")
    out = {}
    for _ in range(r.count()):
        name = r.string()
        for _ in range(r.count()):
            q, err = r.take(">i"), r.take(">h")
            out[(name, q)] = err
    return out


# --- 5. ListTransactions / DescribeTransactions ---------------------------------------------------

def test_list_describe_transactions(t):
    b = t.broker()
    topic, tid = t.topic("adm"), t.topic("adm-tx")
    create_topic(b, topic, 3)
    vers = api_max_versions(b)
    for k, name in ((LIST_TRANSACTIONS, "ListTransactions"), (DESCRIBE_TRANSACTIONS, "DescribeTransactions")):
        if k not in vers:
            raise AssertionError(f"ApiVersions does not list {name} ({k})")
    p = txn_producer(b, tid, **{"transaction.timeout.ms": 45000})
    p.init_transactions(30)
    p.begin_transaction()
    produce_txn_records(p, topic, ["a"], partition=0)
    produce_txn_records(p, topic, ["b"], partition=2)
    t_begin_ms = int(time.time() * 1000)

    mine = [x for x in list_transactions(b) if x[0] == tid]
    if len(mine) != 1 or mine[0][2] != "Ongoing":
        raise AssertionError(f"ListTransactions with an open transaction: {mine}, expected {tid} Ongoing")
    pid = mine[0][1]
    if pid < 0:
        raise AssertionError(f"ListTransactions: producer id {pid}")
    if [x[0] for x in list_transactions(b, states=["Ongoing"], pids=[pid])] != [tid]:
        raise AssertionError("ListTransactions filtered by Ongoing and its producer id does not list it")
    if any(x[0] == tid for x in list_transactions(b, states=["CompleteCommit"])):
        raise AssertionError("ListTransactions filtered by CompleteCommit lists an open transaction")
    if any(x[0] == tid for x in list_transactions(b, pids=[pid + 1000003])):
        raise AssertionError("ListTransactions filtered by another producer id lists it")

    unknown = t.topic("nobody")
    d = describe_transactions(b, [tid, unknown])
    mined = d.get(tid)
    if mined is None or mined["error"] != 0:
        raise AssertionError(f"DescribeTransactions({tid}): {mined}")
    if mined["state"] != "Ongoing" or mined["pid"] != pid or mined["timeout_ms"] != 45000 \
            or mined["partitions"] != {topic: [0, 2]} or mined["epoch"] < 0:
        raise AssertionError(f"DescribeTransactions of the open transaction: {mined}; expected Ongoing, "
                             f"producer {pid}, timeout 45000, partitions {{{topic}: [0, 2]}}")
    if abs(mined["start_ms"] - t_begin_ms) > 60000:
        raise AssertionError(f"DescribeTransactions: start time {mined['start_ms']}, now {t_begin_ms}")
    if d.get(unknown, {}).get("error") != TRANSACTIONAL_ID_NOT_FOUND:
        raise AssertionError(f"DescribeTransactions of an unknown id: {d.get(unknown)}, expected "
                             f"TRANSACTIONAL_ID_NOT_FOUND ({TRANSACTIONAL_ID_NOT_FOUND})")

    p.commit_transaction(30)
    mine = [x for x in list_transactions(b) if x[0] == tid]
    if mine != [(tid, pid, "CompleteCommit")]:
        raise AssertionError(f"ListTransactions after the commit: {mine}, expected CompleteCommit")
    mined = describe_transactions(b, [tid])[tid]
    if mined["state"] != "CompleteCommit" or mined["partitions"]:
        raise AssertionError(f"DescribeTransactions after the commit: {mined}")


# --- 6. bad input -------------------------------------------------------------------------------

def test_bad_txn_requests(t):
    b = t.broker()
    topic, tid = t.topic("bad"), t.topic("bad-tx")
    create_topic(b, topic, 1)
    err = end_txn(b, t.topic("unknown-tx"), 12345, 0, True)
    if err != INVALID_PRODUCER_ID_MAPPING:
        raise AssertionError(f"EndTxn for an unknown transactional id: error {err}, "
                             f"expected INVALID_PRODUCER_ID_MAPPING ({INVALID_PRODUCER_ID_MAPPING})")
    err0, pid, e0 = init_producer_id(b, tid)
    err1, pid1, e1 = init_producer_id(b, tid)
    if err0 or err1 or pid1 != pid or e1 <= e0:
        raise AssertionError(f"InitProducerId twice: ({err0}, {pid}, {e0}) then ({err1}, {pid1}, {e1}); "
                             "expected the same producer id with a higher epoch")
    res = add_partitions_to_txn(b, tid, pid, e0, topic, [0])
    if res.get((topic, 0)) not in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH):
        raise AssertionError(f"AddPartitionsToTxn with the stale epoch {e0} (current {e1}): {res}, "
                             f"expected PRODUCER_FENCED ({PRODUCER_FENCED}) or INVALID_PRODUCER_EPOCH")
    err = end_txn(b, tid, pid + 1, e1, True)
    if err != INVALID_PRODUCER_ID_MAPPING:
        raise AssertionError(f"EndTxn with another producer id: error {err}, expected "
                             f"INVALID_PRODUCER_ID_MAPPING ({INVALID_PRODUCER_ID_MAPPING})")
    res = add_partitions_to_txn(b, tid, pid, e1, topic, [0])
    if res != {(topic, 0): 0}:
        raise AssertionError(f"AddPartitionsToTxn with the current epoch: {res}")
    err = end_txn(b, tid, pid, e0, False)
    if err not in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH):
        raise AssertionError(f"EndTxn with the stale epoch: error {err}, expected PRODUCER_FENCED or "
                             "INVALID_PRODUCER_EPOCH")
    err = end_txn(b, tid, pid, e1, False)
    if err:
        raise AssertionError(f"EndTxn abort with the current epoch: error {err}")
    d = describe_transactions(b, [tid])[tid]
    if d["state"] != "CompleteAbort":
        raise AssertionError(f"DescribeTransactions after the abort: {d}")


# --- 7. kafkajs ---------------------------------------------------------------------------------

def test_kafkajs_transactions(t):
    node = shutil.which("node")
    if node is None:
        raise AssertionError("node not found: run tools/install-deps.sh --all")
    if not os.path.isfile(os.path.join(NODE_DIR, "node_modules", "kafkajs", "package.json")):
        raise AssertionError(f"kafkajs not installed in {NODE_DIR}/node_modules: run tools/install-deps.sh --all")
    b = t.broker(extra_args=["--auto-create-topics", "false"])
    env = dict(os.environ, SKIFF_BOOTSTRAP=b.bootstrap, KAFKAJS_NO_PARTITIONER_WARNING="1")
    p = subprocess.run([node, os.path.join(NODE_DIR, "kafkajs_txn_test.js")], cwd=NODE_DIR, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=80)
    print(p.stdout.decode(errors="replace").rstrip(), flush=True)
    if p.returncode != 0:
        raise AssertionError(f"kafkajs_txn_test.js exited with status {p.returncode}")


if __name__ == "__main__":
    broker.main([(test_consume_transform_produce, 150), (test_broker_sigkill_mid_transaction, 120),
                 (test_producer_sigkill_new_instance, 90), (test_producer_sigkill_timeout, 90),
                 (test_fencing, 90), (test_list_describe_transactions, 90),
                 (test_bad_txn_requests, 60), (test_kafkajs_transactions, 100)])
