#!/usr/bin/python3
"""confluent-kafka (librdkafka) against skiff: a consumer group across a rebalance, committed
offsets across restarts, the idempotent producer, and the admin API.

    test_confluent.py --skiff build/src/cli/skiff [--store local|s3] [-k group]
"""
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import (Consumer, KafkaError, KafkaException, TopicPartition, admin,  # noqa: E402
                    consume_partitions, create_topic, produce_all, producer, wait_partitions)
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic  # noqa: E402


def group_consumer(b, group, **conf):
    c = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "log.connection.close": False,
         "enable.auto.commit": False, "enable.partition.eof": False,
         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
         "partition.assignment.strategy": "range", "check.crcs": True}
    c.update(conf)
    return Consumer(c)


# ---------------------------------------------------------------------------------------------
# (a) two consumers of one group, the second joining mid-way: every message exactly once.

class Member:
    def __init__(self, name, b, topic, group, seen, lock, stop, per_message_s, fetch_bytes):
        self.name = name
        self.b, self.topic, self.group = b, topic, group
        self.seen, self.lock, self.stop = seen, lock, stop
        self.per_message_s = per_message_s
        self.fetch_bytes = fetch_bytes
        self.processed = 0
        self.assignments = []     # each assignment this member got, in order
        self.revocations = 0
        self.per_partition = {}   # partition -> messages processed
        self.errors = []
        self.thread = broker.CheckedThread(self.run, name=name)

    def run(self):
        c = group_consumer(self.b, self.group, **{"max.partition.fetch.bytes": self.fetch_bytes})

        def on_assign(cons, parts):
            self.assignments.append(sorted(p.partition for p in parts))

        def on_revoke(cons, parts):
            self.revocations += 1

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop.is_set():
                msgs = c.consume(50, 0.2)
                commit = {}
                for m in msgs:
                    if m.error():
                        self.errors.append(f"{self.name}: consume error {m.error()}")
                        continue
                    key = (m.partition(), m.offset())
                    with self.lock:
                        self.seen.setdefault(key, []).append(self.name)
                    self.processed += 1
                    self.per_partition[m.partition()] = self.per_partition.get(m.partition(), 0) + 1
                    commit[m.partition()] = m.offset() + 1
                    if self.per_message_s:
                        time.sleep(self.per_message_s)
                if commit:
                    try:
                        c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in commit.items()],
                                 asynchronous=False)
                    except KafkaException as e:
                        self.errors.append(f"{self.name}: synchronous commit of {commit} failed: {e}")
        finally:
            c.close()


def test_group_rebalance(t):
    b = t.broker()
    topic = t.topic("group")
    create_topic(b, topic, 4)
    n = 2000
    # Small batches and small fetches, so A works on all four partitions at once and B has to
    # take over partitions in the middle, from A's committed offsets.
    produce_all(b, topic, [(i % 4, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(n)],
                **{"batch.num.messages": 20})

    seen, lock, stop = {}, threading.Lock(), threading.Event()
    group = t.topic("g")
    a = Member("A", b, topic, group, seen, lock, stop, per_message_s=0.004,
               fetch_bytes=1024)
    m2 = Member("B", b, topic, group, seen, lock, stop, per_message_s=0.004,
                fetch_bytes=1024)
    a.thread.start()
    broker.wait_until(lambda: len(a.per_partition) == 4 and min(a.per_partition.values()) >= 40, 60,
                      f"consumer A to process 40 messages of each partition (has {a.per_partition})")
    processed_when_b_joined = a.processed
    m2.thread.start()
    broker.wait_until(lambda: m2.assignments and m2.assignments[-1], 60,
                      "consumer B to get partitions")
    t.log(f"B joined after A processed {processed_when_b_joined}; assignments A={a.assignments} "
          f"B={m2.assignments}")
    broker.wait_until(lambda: len(seen) >= n or a.errors or m2.errors, 120,
                      f"all {n} messages to be consumed (have {len(seen)})")
    time.sleep(3)   # duplicates arriving late would show up now
    final_a, final_b = list(a.assignments[-1]), list(m2.assignments[-1])   # before anyone leaves
    stop.set()
    broker.run_threads_checked([a.thread, m2.thread])

    problems = a.errors + m2.errors
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    if dups:
        ex = sorted(dups.items())[:5]
        problems.append(f"{len(dups)} messages consumed more than once, e.g. {ex}")
    missing = n - len(seen)
    if missing:
        problems.append(f"{missing} of {n} messages never consumed")
    if m2.processed == 0:
        problems.append("consumer B joined but processed no message")
    if a.processed <= processed_when_b_joined:
        problems.append("consumer A processed nothing after B joined")
    if a.revocations == 0:
        problems.append("consumer A never had partitions revoked when B joined")
    for p in final_b:
        first_b = min((o for (pp, o), who in seen.items() if pp == p and "B" in who), default=None)
        if first_b is not None and first_b == 0:
            problems.append(f"B started partition {p} at offset 0, not at A's committed offset")
    if sorted(final_a + final_b) != [0, 1, 2, 3]:
        problems.append(f"the assignments with both members do not split the 4 partitions: "
                        f"A={final_a} B={final_b} (history A={a.assignments} B={m2.assignments})")
    if problems:
        raise AssertionError("; ".join(problems))
    t.log(f"A processed {a.processed}, B processed {m2.processed}, each of {n} exactly once")
    b.stop()


# ---------------------------------------------------------------------------------------------
# (b) committed offsets survive a clean restart (and, separately, a SIGKILL).

def committed(b, group, topic, partitions):
    c = group_consumer(b, group)
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        for tp in got:
            if tp.error:
                raise AssertionError(f"committed() for p{tp.partition}: {tp.error}")
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def consume_group(b, group, topic, count, timeout=60):
    """Subscribes in `group` and returns the first `count` messages (then closes, no commit)."""
    c = group_consumer(b, group)
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"group {group}: got {len(out)} of {count} messages in {timeout} s")
            for m in c.consume(count - len(out), 0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                out.append(m)
        return out
    finally:
        c.close()


def offsets_setup(t, b):
    topic = t.topic("offsets")
    create_topic(b, topic, 2)
    produce_all(b, topic, [(i % 2, f"k{i}".encode(), f"value-{i}".encode(), None) for i in range(100)])
    group = t.topic("g")
    c = group_consumer(b, group)
    c.subscribe([topic])
    # Consume a little so the member has its assignment, then commit explicit offsets.
    got = 0
    deadline = time.monotonic() + 60
    while got < 5:
        if time.monotonic() > deadline:
            raise AssertionError("group consumer received nothing in 60 s")
        got += len([m for m in c.consume(5, 0.5) if not m.error()])
    want = {0: 17, 1: 29}
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in want.items()], asynchronous=False)
    c.close()
    have = committed(b, group, topic, 2)
    if have != want:
        raise AssertionError(f"committed offsets read back as {have} right after commit, expected {want}")
    return topic, group, want


def check_resume(b, topic, group, want):
    have = committed(b, group, topic, 2)
    if have != want:
        raise AssertionError(f"after restart the committed offsets are {have}, expected {want}")
    total = sum(50 - o for o in want.values())
    msgs = consume_group(b, group, topic, total)
    firsts = {}
    for m in msgs:
        firsts.setdefault(m.partition(), m.offset())
        i = m.offset() * 2 + m.partition()
        if m.value() != f"value-{i}".encode() or m.key() != f"k{i}".encode():
            raise AssertionError(f"p{m.partition()}@{m.offset()}: key {m.key()!r} value {m.value()!r}, "
                                 f"expected k{i} / value-{i}")
    if firsts != want:
        raise AssertionError(f"the new member resumed at {firsts}, expected the committed {want}")


def test_offsets_survive_restart(t):
    b = t.broker()
    topic, group, want = offsets_setup(t, b)
    b.stop()            # SIGTERM: must drain and exit 0
    b.start()
    check_resume(b, topic, group, want)
    b.stop()


def test_offsets_survive_sigkill(t):
    b = t.broker()
    topic, group, want = offsets_setup(t, b)
    b.kill()
    b.start()
    check_resume(b, topic, group, want)
    b.stop()


# ---------------------------------------------------------------------------------------------
# (c) the idempotent producer: N messages, each exactly once, in order.

def test_idempotent_producer(t):
    b = t.broker()
    topic = t.topic("idem")
    parts = 3
    create_topic(b, topic, parts)
    n = 6000
    rnd = random.Random(3)
    msgs = []
    for i in range(n):
        if i % 97 == 0:
            value = b""                           # empty, not NULL
        elif i % 101 == 0:
            value = None                          # NULL
        else:
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
        key = b"" if i % 89 == 0 else f"{i}".encode()
        msgs.append((i % parts, key, value, [("seq", str(i).encode())]))
    acked = produce_all(b, topic, msgs, **{"enable.idempotence": True, "acks": "all",
                                           "max.in.flight.requests.per.connection": 5,
                                           "linger.ms": 2, "batch.num.messages": 200})
    out, highs = consume_partitions(b, topic, parts)
    problems = []
    for p in range(parts):
        expect = [i for i in range(n) if i % parts == p]
        got = out[p]
        if highs[p] != len(expect):
            problems.append(f"p{p}: high watermark {highs[p]}, expected {len(expect)}")
        for pos, m in enumerate(got):
            if pos >= len(expect):
                problems.append(f"p{p}: extra message at offset {m.offset()}")
                break
            i = expect[pos]
            want_key = msgs[i][1]
            hdrs = m.headers() or []
            if m.offset() != pos:
                problems.append(f"p{p}: message #{pos} has offset {m.offset()}")
            if hdrs != [("seq", str(i).encode())]:
                problems.append(f"p{p}@{m.offset()}: headers {hdrs}, expected seq={i} (out of order or duplicated)")
            if m.key() != want_key or m.value() != msgs[i][2]:
                problems.append(f"p{p}@{m.offset()}: key {m.key()!r} value {m.value()!r:.60}, "
                                f"expected message #{i}: key {want_key!r} value {msgs[i][2]!r:.60}")
            if acked[i] != (p, m.offset()):
                problems.append(f"message #{i}: acknowledged at {acked[i]}, found at p{p}@{m.offset()}")
            if len(problems) > 10:
                break
        if len(got) < len(expect):
            problems.append(f"p{p}: {len(got)} messages, expected {len(expect)}")
    if problems:
        raise AssertionError("; ".join(problems[:12]))
    t.log(f"{n} idempotent messages, each once and in order; empty and NULL values preserved")
    b.stop()


# ---------------------------------------------------------------------------------------------
# (d) the admin API

def test_admin(t):
    b = t.broker(extra_args=["--auto-create-topics", "false"])
    a = admin(b)
    topic = t.topic("admin")

    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)], operation_timeout=30)
    fs[topic].result(30)
    md = wait_partitions(b, topic, 3)
    if md.topics[topic].partitions.keys() != {0, 1, 2}:
        raise AssertionError(f"partitions {sorted(md.topics[topic].partitions)}, expected 0..2")
    if [br.id for br in md.brokers.values()] != [md.topics[topic].partitions[0].leader]:
        raise AssertionError(f"brokers {md.brokers} vs leader {md.topics[topic].partitions[0].leader}")
    listed = a.list_topics(timeout=10).topics
    if topic not in listed:
        raise AssertionError(f"list_topics does not show {topic}: {sorted(listed)}")

    # Creating it again: TOPIC_ALREADY_EXISTS (36).
    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)], operation_timeout=30)
    try:
        fs[topic].result(30)
        raise AssertionError("creating an existing topic succeeded")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise AssertionError(f"creating an existing topic: {e}, expected TOPIC_ALREADY_EXISTS")
    # An invalid name: INVALID_TOPIC_EXCEPTION (17).
    bad = "bad/name*"
    fs = a.create_topics([NewTopic(bad, num_partitions=1, replication_factor=1)], operation_timeout=30)
    try:
        fs[bad].result(30)
        raise AssertionError(f"creating topic {bad!r} succeeded")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_EXCEPTION:
            raise AssertionError(f"creating {bad!r}: {e}, expected INVALID_TOPIC_EXCEPTION")

    # Describe configs: the topic's configuration, with Kafka's standard keys.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = a.describe_configs([res])[res].result(30)
    for k in ("cleanup.policy", "retention.ms"):
        if k not in configs:
            raise AssertionError(f"describe_configs: no {k!r} among {sorted(configs)}")
    t.log(f"describe_configs: {len(configs)} entries, cleanup.policy={configs['cleanup.policy'].value}")
    missing = ConfigResource(ConfigResource.Type.TOPIC, t.topic("nosuch"))
    try:
        a.describe_configs([missing])[missing].result(30)
        raise AssertionError("describe_configs of a missing topic succeeded")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise AssertionError(f"describe_configs of a missing topic: {e}, expected UNKNOWN_TOPIC_OR_PARTITION")

    # Create partitions: 3 -> 5, and the new ones take writes.
    a.create_partitions([NewPartitions(topic, 5)], operation_timeout=30)[topic].result(30)
    wait_partitions(b, topic, 5)
    acked = produce_all(b, topic, [(4, b"k", b"in partition 4", None)])
    if acked != [(4, 0)]:
        raise AssertionError(f"produce to new partition 4 acknowledged at {acked}, expected [(4, 0)]")
    # Shrinking is refused (INVALID_PARTITIONS, 37).
    try:
        a.create_partitions([NewPartitions(topic, 2)], operation_timeout=30)[topic].result(30)
        raise AssertionError("create_partitions to fewer partitions succeeded")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.INVALID_PARTITIONS:
            raise AssertionError(f"create_partitions 5 -> 2: {e}, expected INVALID_PARTITIONS")

    # Delete: gone from the list; a second delete says UNKNOWN_TOPIC_OR_PARTITION.
    a.delete_topics([topic], operation_timeout=30)[topic].result(30)
    broker.wait_until(lambda: topic not in a.list_topics(timeout=10).topics, 15,
                      f"{topic} to disappear from list_topics")
    try:
        a.delete_topics([topic], operation_timeout=30)[topic].result(30)
        raise AssertionError("deleting a deleted topic succeeded")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise AssertionError(f"deleting a deleted topic: {e}, expected UNKNOWN_TOPIC_OR_PARTITION")
    # A new topic of the same name starts empty.
    create_topic(b, topic, 1)
    out, highs = consume_partitions(b, topic, 1)
    if highs[0] != 0:
        raise AssertionError(f"re-created topic has high watermark {highs[0]}, expected 0")
    b.stop()


def test_long_poll_wakes_on_commit(t):
    """A consumer waiting in Fetch (fetch.wait.max.ms 10 s) on two partitions owned by two
    different cores gets a record produced to either one well before its wait runs out: the
    commit wakes the long poll across cores."""
    b = t.broker()
    topic = t.topic("poll")
    create_topic(b, topic, 2)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "poller", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10000, "fetch.min.bytes": 1, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        p = producer(b)
        p.produce(topic, value=b"warm-up", partition=0)   # connections and metadata first
        p.flush(10)
        deadline = time.monotonic() + 10
        while True:
            m = c.poll(0.2)
            if m is not None and not m.error() and m.value() == b"warm-up":
                break
            if time.monotonic() > deadline:
                raise AssertionError("the warm-up record never arrived")
        for part in (0, 1, 0, 1):
            time.sleep(1.0)              # let the consumer settle into its long poll
            sent = time.monotonic()
            p.produce(topic, value=f"wake-{part}".encode(), partition=part)
            p.flush(10)
            while True:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    break
                if time.monotonic() - sent > 8:
                    raise AssertionError(f"partition {part}: record not delivered within 8 s "
                                         f"(the 10 s long poll was not woken)")
            waited = time.monotonic() - sent
            if m.value() != f"wake-{part}".encode() or m.partition() != part:
                raise AssertionError(f"got {m.value()!r} from partition {m.partition()}")
            t.log(f"partition {part}: delivered {waited * 1000:.0f} ms after produce")
            if waited > 2:
                raise AssertionError(f"partition {part}: {waited:.1f} s from produce to delivery")
    finally:
        c.close()
    b.stop()


if __name__ == "__main__":
    broker.main([(test_group_rebalance, 240), (test_offsets_survive_restart, 180),
                 (test_offsets_survive_sigkill, 180), (test_idempotent_producer, 180),
                 (test_admin, 180), (test_long_poll_wakes_on_commit, 120)])
