"""confluent_kafka helpers shared by the client tests (Debian's python3-confluent-kafka)."""
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap, "socket.timeout.ms": 10000,
                        "log.connection.close": False})


def create_topic(b, topic, partitions, timeout=30):
    a = admin(b)   # keep the client alive until the future resolves
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                         operation_timeout=timeout, request_timeout=timeout)
    fs[topic].result(timeout)
    wait_partitions(b, topic, partitions)


def wait_partitions(b, topic, partitions, timeout=20):
    """Waits until Metadata shows the topic with `partitions` partitions, each with a leader."""
    a = admin(b)
    deadline = time.monotonic() + timeout
    last = None
    while True:
        md = a.list_topics(topic=topic, timeout=10)
        tm = md.topics.get(topic)
        if tm is not None and tm.error is None and len(tm.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in tm.partitions.values()):
            return md
        last = tm and (tm.error, {p.id: (p.leader, p.error) for p in tm.partitions.values()})
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic}: metadata never showed {partitions} partitions "
                                 f"with leaders (last: {last})")
        time.sleep(0.2)


def producer(b, **conf):
    c = {"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
         "message.timeout.ms": 60000, "log.connection.close": False}
    c.update(conf)
    return Producer(c)


def produce_all(b, topic, msgs, timeout=90, **conf):
    """msgs: (partition or None, key, value, headers or None). Returns [(partition, offset)]
    per message; raises if any delivery failed."""
    p = producer(b, **conf)
    results = [None] * len(msgs)
    errors = []

    def cb_for(i):
        def cb(err, m):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = (m.partition(), m.offset())
        return cb

    for i, (part, key, value, headers) in enumerate(msgs):
        kw = {"key": key, "value": value, "on_delivery": cb_for(i)}
        if part is not None:
            kw["partition"] = part
        if headers:
            kw["headers"] = headers
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(timeout)
    if left:
        raise AssertionError(f"{left} of {len(msgs)} messages not delivered within {timeout} s")
    if errors:
        raise AssertionError(f"{len(errors)} deliveries failed, e.g. message #{errors[0][0]}: {errors[0][1]}")
    return results


def consume_partitions(b, topic, partitions, timeout=60, start=None, **conf):
    """Reads every partition from `start` (default: the beginning) to its high watermark with
    assign() (no group). Returns {partition: [Message]}."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "skiff-test-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "check.crcs": True, "enable.partition.eof": False, **conf})
    try:
        highs = {}
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            highs[p] = hi
        starts = {p: (start or {}).get(p, 0) for p in range(partitions)}
        c.assign([TopicPartition(topic, p, starts[p]) for p in range(partitions)])
        out = {p: [] for p in range(partitions)}
        pending = {p for p in range(partitions) if highs[p] > starts[p]}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {topic}: not all messages read within {timeout} s: "
                                     + ", ".join(f"p{p} at {out[p][-1].offset() + 1 if out[p] else starts[p]}"
                                                 f"/{highs[p]}" for p in sorted(pending)))
            for m in c.consume(500, 0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                out[m.partition()].append(m)
                if m.offset() + 1 >= highs[m.partition()]:
                    pending.discard(m.partition())
        return out, highs
    finally:
        c.close()


def check_no_error(err, what):
    if err is not None and err.code() != KafkaError.NO_ERROR:
        raise AssertionError(f"{what}: {err}")


__all__ = ["admin", "create_topic", "wait_partitions", "producer", "produce_all",
           "consume_partitions", "KafkaException", "KafkaError", "Consumer", "TopicPartition"]


def refused(fn, code, what):
    """Runs fn, which must raise a KafkaException with error `code`; returns that error."""
    try:
        fn()
    except KafkaException as e:
        if e.args[0].code() != code:
            raise AssertionError(f"{what}: {e}, expected {KafkaError(code).name()}")
        return e.args[0]
    raise AssertionError(f"{what}: accepted, expected {KafkaError(code).name()}")
