#!/usr/bin/python3
"""Kafka's produce validation (issue 18) through real clients and raw requests: every rule
answers the error Kafka answers, for its partition only; the other partitions of the same
request are appended.

  - raw Produce v8, one request over eight partitions: too large for the topic's
    max.message.bytes (10), keyless records on a compacted topic (87 + record_errors),
    timestamps out of message.timestamp.difference.max.ms (32 + record_errors), magic 1 (43),
    a count that disagrees with the records (87), a transactional batch without a
    transactional id (87), and two valid
    batches, which are the only ones stored
  - confluent-kafka (librdkafka) and kafka-python (Debian's python3-kafka 2.0.2): the same
    size, key and timestamp rules, each produced together with a record for a normal topic
    in the same linger window (so in the same Produce request) which must be delivered;
    LogAppendTime topics give the broker's time to consumers; a topic's compression.type
    recompresses what is stored (codec read from the stored batch with a raw Fetch) and
    consumers read it back (librdkafka decodes all four codecs as skiff writes them)
  - kafka-python 2.0.2 does not know error 87 (INVALID_RECORD): it reports UnknownError, so
    the code itself is asserted with the raw request and librdkafka
  - CreateTopics refuses bad values of the configs these rules read (INVALID_CONFIG) and
    accepts delete.retention.ms; --message-max-bytes / SKIFF_MESSAGE_MAX_BYTES is the
    default limit and DescribeConfigs reports it

    test_produce_validation.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, consume_partitions, producer, wait_partitions  # noqa: E402
from test_bad_input import (API_PRODUCE, Reader, api_versions, connect, crc32c, recv_response,  # noqa: E402
                            request, varint)

from confluent_kafka import KafkaError, TIMESTAMP_LOG_APPEND_TIME  # noqa: E402
from confluent_kafka.admin import ConfigResource, NewTopic  # noqa: E402

API_FETCH = 1
MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT = 10, 32, 43
INVALID_RECORD, INVALID_CONFIG = 87, 40
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def now_ms():
    return int(time.time() * 1000)


# --- topics --------------------------------------------------------------------------------------

def create_topics(b, specs, timeout=30):
    """specs: {name: (partitions, {config: value})}"""
    a = admin(b)
    fs = a.create_topics([NewTopic(n, num_partitions=p, replication_factor=1, config=c)
                          for n, (p, c) in specs.items()], operation_timeout=timeout, request_timeout=timeout)
    for n, f in fs.items():
        f.result(timeout)
    for n, (p, _) in specs.items():
        wait_partitions(b, n, p)


def standard_topics(t):
    names = {k: t.topic(k) for k in ("small", "compact", "strict", "lat", "normal")}
    specs = {
        names["small"]: (1, {"max.message.bytes": "1000"}),
        names["compact"]: (1, {"cleanup.policy": "compact"}),
        names["strict"]: (1, {"message.timestamp.difference.max.ms": "60000"}),
        names["lat"]: (1, {"message.timestamp.type": "LogAppendTime"}),
        names["normal"]: (6, {}),
    }
    return names, specs


# --- raw Produce v8 / Fetch v4 -----------------------------------------------------------------

def record(offset_delta, key, value, ts_delta=0):
    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)
    return varint(len(body)) + body


def batch(records, ts=None, ts_deltas=None, attributes=0, magic=2, count=None, producer_id=-1, epoch=-1,
          sequence=-1):
    ts = now_ms() if ts is None else ts
    deltas = ts_deltas or [0] * len(records)
    recs = b"".join(record(i, k, v, deltas[i]) for i, (k, v) in enumerate(records))
    n = len(records) if count is None else count
    after_crc = struct.pack(">hiqqqhii", attributes, len(records) - 1, ts, ts + max(deltas), producer_id, epoch,
                            sequence, n) + recs
    rest = struct.pack(">ibI", -1, magic, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(rest)) + rest


def produce_v8(b, parts, corr=7):
    """parts: [(topic, partition, batch bytes)], grouped by topic in one request. Returns
    {(topic, partition): (error, base_offset, [record_error batch indexes], error_message)}."""
    by_topic = {}
    for tp, p, data in parts:
        by_topic.setdefault(tp, []).append((p, data))
    body = struct.pack(">h", -1) + struct.pack(">hi", -1, 15000) + struct.pack(">i", len(by_topic))
    for tp, ps in by_topic.items():
        name = tp.encode()
        body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(ps))
        for p, data in ps:
            body += struct.pack(">i", p) + struct.pack(">i", len(data)) + data
    lo, hi = api_versions(b)[API_PRODUCE]
    if not lo <= 8 <= hi:
        raise AssertionError(f"Produce v8 not served ({lo}..{hi})")
    with connect(b) as s:
        s.sendall(request(API_PRODUCE, 8, corr, body))
        resp = recv_response(s, timeout=30)
    if resp is None:
        raise AssertionError("Produce v8: connection closed")
    r = Reader(resp)
    if r.take(">i") != corr:
        raise AssertionError("Produce v8: wrong correlation id")
    out = {}
    for _ in range(r.take(">i")):
        name = r.string()
        for _ in range(r.take(">i")):
            idx, err, base = r.take(">i"), r.take(">h"), r.take(">q")
            r.take(">q")  # log_append_time
            r.take(">q")  # log_start_offset
            rec_errs = []
            for _ in range(r.take(">i")):
                rec_errs.append(r.take(">i"))
                r.string()
            msg = r.string()
            out[(name, idx)] = (err, base, rec_errs, msg)
    return out


def fetch_batches(b, topic, partition):
    """The stored batches of a partition from offset 0 (raw Fetch v4): [(attributes, max_timestamp,
    record_count)]."""
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 500, 1, 4 << 20, 0) + struct.pack(">i", 1)
    body += struct.pack(">h", len(name)) + name + struct.pack(">i", 1) + struct.pack(">iqi", partition, 0, 4 << 20)
    with connect(b) as s:
        s.sendall(request(API_FETCH, 4, 11, body))
        resp = recv_response(s, timeout=30)
    r = Reader(resp)
    r.take(">i")  # correlation id
    r.take(">i")  # throttle
    out = []
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            _, err = r.take(">i"), r.take(">h")
            r.take(">q")
            r.take(">q")
            n_aborted = r.take(">i")
            for _ in range(max(n_aborted, 0)):
                r.take(">qq")
            size = r.take(">i")
            data = r.d[r.p:r.p + max(size, 0)]
            r.p += max(size, 0)
            if err != 0:
                raise AssertionError(f"Fetch {topic}/{partition}: error {err}")
            pos = 0
            while pos + 61 <= len(data):
                (length,) = struct.unpack_from(">i", data, pos + 8)
                if pos + 12 + length > len(data):
                    break
                (attrs,) = struct.unpack_from(">h", data, pos + 21)
                (max_ts,) = struct.unpack_from(">q", data, pos + 35)
                (count,) = struct.unpack_from(">i", data, pos + 57)
                (crc,) = struct.unpack_from(">I", data, pos + 17)
                if crc32c(data[pos + 21:pos + 12 + length]) != crc:
                    raise AssertionError(f"{topic}/{partition}: a stored batch has a wrong CRC")
                out.append((attrs, max_ts, count))
                pos += 12 + length
    return out


def high_watermark(b, topic, partition):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "hw-reader"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


# --- tests -----------------------------------------------------------------------------------------

def test_raw_one_request_every_rule(t):
    b = t.broker()
    names, specs = standard_topics(t)
    create_topics(b, specs)
    normal = names["normal"]
    old = now_ms() - 3600 * 1000
    parts = [
        (names["small"], 0, batch([(b"k", b"x" * 3000)])),
        (names["compact"], 0, batch([(b"k1", b"a"), (None, b"b"), (b"k3", b"c"), (None, b"d")])),
        (names["strict"], 0, batch([(b"k1", b"a"), (b"k2", b"b")], ts=old, ts_deltas=[0, 3500 * 1000])),
        (normal, 0, batch([(b"k", b"good-0")])),
        (normal, 1, batch([(b"k", b"v1")], magic=1)),
        (normal, 2, batch([(b"k", b"a"), (b"k", b"b")], count=3)),
        (normal, 3, batch([(b"k", b"t")], attributes=0x10, producer_id=1, epoch=0, sequence=0)),
        (normal, 4, batch([(b"k", b"good-4a"), (b"k", b"good-4b")])),
    ]
    got = produce_v8(b, parts)
    want = {
        (names["small"], 0): (MESSAGE_TOO_LARGE, []),
        (names["compact"], 0): (INVALID_RECORD, [1, 3]),
        # Both out of the minute allowed: an hour ago and 100 s ago.
        (names["strict"], 0): (INVALID_TIMESTAMP, [0, 1]),
        (normal, 0): (0, []),
        (normal, 1): (UNSUPPORTED_FOR_MESSAGE_FORMAT, []),
        (normal, 2): (INVALID_RECORD, []),
        (normal, 3): (INVALID_RECORD, []),
        (normal, 4): (0, []),
    }
    for key, (err, rec_errs) in want.items():
        g = got.get(key)
        if g is None or g[0] != err or g[2] != rec_errs:
            raise AssertionError(f"{key}: got {g}, expected error {err} with record_errors {rec_errs}")
        if err != 0 and not g[3]:
            raise AssertionError(f"{key}: error {err} without an error_message")
        t.log(f"{key[0]}/{key[1]}: error {g[0]} record_errors {g[2]} {g[3]!r}")
    out, highs = consume_partitions(b, normal, 6)
    vals = {p: [m.value() for m in ms] for p, ms in out.items() if ms}
    if vals != {0: [b"good-0"], 4: [b"good-4a", b"good-4b"]}:
        raise AssertionError(f"stored in {normal}: {vals} (expected only the two valid batches)")
    for n in ("small", "compact", "strict"):
        if high_watermark(b, names[n], 0) != 0:
            raise AssertionError(f"{n}: a rejected batch was stored")
    b.stop()


def _deliver(p, sends, timeout=60):
    """sends: [(topic, partition, key, value, timestamp or 0)]; all produced in one linger
    window. Returns [(error or None, offset)]."""
    res = [None] * len(sends)

    def cb_for(i):
        def cb(err, m):
            res[i] = (err, None if err else m.offset())
        return cb

    for i, (tp, part, key, value, ts) in enumerate(sends):
        kw = {"partition": part, "key": key, "value": value, "on_delivery": cb_for(i)}
        if ts:
            kw["timestamp"] = ts
        p.produce(tp, **kw)
    if p.flush(timeout):
        raise AssertionError("deliveries still pending")
    return res


def test_confluent_rules(t):
    b = t.broker()
    names, specs = standard_topics(t)
    create_topics(b, specs)
    normal = names["normal"]
    # linger: every record below goes to the broker in one Produce request per case.
    p = producer(b, **{"linger.ms": 300, "compression.type": "none", "retries": 0,
                       "message.timeout.ms": 30000})
    cases = [
        ("too large", (names["small"], 0, b"k", b"x" * 5000, 0), KafkaError.MSG_SIZE_TOO_LARGE),
        ("keyless on compacted", (names["compact"], 0, None, b"v", 0), INVALID_RECORD),
        ("old timestamp", (names["strict"], 0, b"k", b"v", now_ms() - 3600 * 1000), KafkaError.INVALID_TIMESTAMP),
    ]
    for i, (what, send, code) in enumerate(cases):
        res = _deliver(p, [send, (normal, i, b"k", f"ok-{i}".encode(), 0)])
        err, _ = res[0]
        if err is None or err.code() != code:
            raise AssertionError(f"{what}: delivery error {err}, expected code {code}")
        if res[1][0] is not None:
            raise AssertionError(f"{what}: the normal topic's record in the same request failed: {res[1][0]}")
        t.log(f"{what}: {err.code()} ({err.str()}); the other partition got offset {res[1][1]}")
    out, _ = consume_partitions(b, normal, 6)
    got = {pt: [m.value() for m in ms] for pt, ms in out.items() if ms}
    if got != {0: [b"ok-0"], 1: [b"ok-1"], 2: [b"ok-2"]}:
        raise AssertionError(f"{normal} holds {got}")
    # Keyed records are fine on the compacted topic, fresh ones on the strict one.
    res = _deliver(p, [(names["compact"], 0, b"k", b"v", 0), (names["strict"], 0, b"k", b"v", now_ms())])
    if any(e is not None for e, _ in res):
        raise AssertionError(f"valid records refused: {res}")

    # LogAppendTime: the consumer sees the broker's time, not the producer's.
    before = now_ms()
    res = _deliver(p, [(names["lat"], 0, b"k", b"v", 1000)])
    if res[0][0] is not None:
        raise AssertionError(f"LogAppendTime produce: {res[0][0]}")
    out, _ = consume_partitions(b, names["lat"], 1)
    (ts_type, ts) = out[0][0].timestamp()
    if ts_type != TIMESTAMP_LOG_APPEND_TIME or not before - 1000 <= ts <= now_ms() + 1000:
        raise AssertionError(f"LogAppendTime topic: consumed timestamp {(ts_type, ts)}, expected the append time")
    stored = fetch_batches(b, names["lat"], 0)
    if not stored or not stored[0][0] & 0x08:
        raise AssertionError(f"LogAppendTime topic: stored batch attributes {stored}")
    t.log(f"LogAppendTime: consumed {(ts_type, ts)}")
    p.flush(10)
    b.stop()


def test_confluent_recompression(t):
    b = t.broker()
    want_codec = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "uncompressed": 0}
    # Every codec librdkafka writes. librdkafka 2.0 compresses with gzip, snappy and lz4 only
    # when the broker lists Produce v0 in ApiVersions; skiff once listed v3+ and every such
    # batch arrived uncompressed (regression: test_librdkafka_compresses below).
    for sent, sent_codec in (("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)):
        topics = {codec: t.topic(f"{sent}-to-{codec}") for codec in list(want_codec) + ["producer"]}
        create_topics(b, {n: (1, {"compression.type": c}) for c, n in topics.items()})
        p = producer(b, **{"linger.ms": 50, "compression.type": sent})
        values = [f"{sent}-{i}-".encode() * 20 for i in range(20)]
        for n in topics.values():
            for v in values:
                p.produce(n, key=b"k", value=v, partition=0)
        if p.flush(60):
            raise AssertionError("deliveries pending")
        for codec, n in topics.items():
            expected = want_codec.get(codec, sent_codec)
            stored = fetch_batches(b, n, 0)
            codecs = {CODECS[a & 7] for a, _, _ in stored}
            if codecs != {CODECS[expected]}:
                raise AssertionError(f"{sent} -> topic {codec}: stored batches are {codecs}")
            out, _ = consume_partitions(b, n, 1)
            if [m.value() for m in out[0]] != values:
                raise AssertionError(f"{sent} -> topic {codec}: read back {len(out[0])} messages, not the 20 sent")
        t.log(f"producer {sent}: stored as each topic's codec, read back")
    b.stop()


def test_librdkafka_compresses(t):
    """librdkafka's batches arrive with the codec the producer asked for (a topic with
    compression.type=producer stores them as sent)."""
    b = t.broker()
    for codec, want in (("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)):
        n = t.topic(f"sent-{codec}")
        create_topics(b, {n: (1, {})})
        p = producer(b, **{"linger.ms": 20, "compression.type": codec})
        for i in range(50):
            p.produce(n, key=b"k", value=f"{codec}-{i}-".encode() * 10, partition=0)
        if p.flush(60):
            raise AssertionError("deliveries pending")
        stored = {a & 7 for a, _, _ in fetch_batches(b, n, 0)}
        if stored != {want}:
            raise AssertionError(f"librdkafka compression.type={codec}: stored codecs {sorted(stored)}")
    b.stop()


def test_produce_v2_message_set_refused(t):
    """Produce v0-2 are listed (for librdkafka's compression check) but carry message sets of
    magic 0/1, which skiff does not store: refused per partition, the connection stays."""
    b = t.broker()
    n = t.topic("v2")
    create_topics(b, {n: (1, {})})
    # One magic-1 message: offset, size, crc, magic 1, attributes, timestamp, key null, value.
    value = b"old"
    msg = struct.pack(">bbq", 1, 0, now_ms()) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", 0) + msg  # a CRC-32 the broker must not get as far as checking
    mset = struct.pack(">qi", 0, len(msg)) + msg
    name = n.encode()
    body = struct.pack(">hi", -1, 15000) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(mset)) + mset
    with connect(b) as s:
        s.sendall(request(API_PRODUCE, 2, 21, body))
        resp = recv_response(s, timeout=30)
        if resp is None:
            raise AssertionError("Produce v2: connection closed")
        r = Reader(resp)
        if r.take(">i") != 21 or r.take(">i") != 1 or r.string() != n or r.take(">i") != 1:
            raise AssertionError(f"Produce v2: unexpected response {resp!r:.80}")
        idx, err = r.take(">i"), r.take(">h")
        if (idx, err) != (0, UNSUPPORTED_FOR_MESSAGE_FORMAT):
            raise AssertionError(f"Produce v2 with a magic-1 message set: partition {idx} error {err}")
    if high_watermark(b, n, 0) != 0:
        raise AssertionError("a refused v2 message set was stored")
    b.stop()


def test_kafka_python_rules(t):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka import errors as kerrors
    b = t.broker()
    names, specs = standard_topics(t)
    gz, unc = t.topic("kp-gzip"), t.topic("kp-unc")
    specs[gz] = (1, {"compression.type": "gzip"})
    specs[unc] = (1, {"compression.type": "uncompressed"})
    create_topics(b, specs)
    normal = names["normal"]
    p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=300, retries=0, acks="all",
                      request_timeout_ms=30000)
    cases = [
        ("too large", dict(topic=names["small"], partition=0, key=b"k", value=b"x" * 5000),
         kerrors.MessageSizeTooLargeError),
        # kafka-python 2.0.2 has no class for 87 (INVALID_RECORD): UnknownError.
        ("keyless on compacted", dict(topic=names["compact"], partition=0, value=b"v"), kerrors.UnknownError),
        ("old timestamp", dict(topic=names["strict"], partition=0, key=b"k", value=b"v",
                               timestamp_ms=now_ms() - 3600 * 1000), kerrors.InvalidTimestampError),
    ]
    for i, (what, kw, exc) in enumerate(cases):
        bad = p.send(**kw)
        good = p.send(normal, key=b"k", value=f"kp-{i}".encode(), partition=i)
        p.flush(60)
        try:
            bad.get(timeout=30)
            raise AssertionError(f"{what}: accepted")
        except exc as e:
            t.log(f"{what}: {type(e).__name__} {e}")
        md = good.get(timeout=30)
        t.log(f"{what}: the normal topic's record in the same request got offset {md.offset}")

    # LogAppendTime through kafka-python's consumer.
    before = now_ms()
    p.send(names["lat"], key=b"k", value=b"v", partition=0, timestamp_ms=1000).get(timeout=30)
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                      enable_auto_commit=False)
    c.assign([TopicPartition(names["lat"], 0)])
    c.seek_to_beginning()
    recs = list(c)
    c.close()
    if len(recs) != 1 or recs[0].timestamp_type != 1 or not before - 1000 <= recs[0].timestamp <= now_ms() + 1000:
        raise AssertionError(f"LogAppendTime via kafka-python: {[(r.timestamp_type, r.timestamp) for r in recs]}")

    # Recompression: kafka-python writes gzip or nothing (the other codecs need modules
    # Debian does not ship with it); the stored codec is the topic's.
    for comp in (None, "gzip"):
        pp = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=50, compression_type=comp, acks="all")
        for n in (gz, unc):
            for i in range(10):
                pp.send(n, key=b"k", value=f"{comp}-{i}".encode() * 30, partition=0)
        pp.flush(60)
        pp.close()
    for n, codec in ((gz, 1), (unc, 0)):
        stored = fetch_batches(b, n, 0)
        if {a & 7 for a, _, _ in stored} != {codec}:
            raise AssertionError(f"kafka-python -> {n}: stored codecs {[a & 7 for a, _, _ in stored]}")
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                          enable_auto_commit=False)
        c.assign([TopicPartition(n, 0)])
        c.seek_to_beginning()
        got = list(c)
        c.close()
        if len(got) != 20:
            raise AssertionError(f"kafka-python read {len(got)} of 20 records back from {n}")
    # The normal topic holds exactly the three good records.
    out, _ = consume_partitions(b, normal, 6)
    got = {pt: [m.value() for m in ms] for pt, ms in out.items() if ms}
    if got != {0: [b"kp-0"], 1: [b"kp-1"], 2: [b"kp-2"]}:
        raise AssertionError(f"{normal} holds {got}")
    p.close()
    b.stop()


def test_create_topics_configs_and_broker_limit(t):
    b = t.broker(extra_args=["--message-max-bytes", "2000"])
    a = admin(b)
    bad = {"compression.type": "brotli", "cleanup.policy": "compacted", "message.timestamp.type": "createtime",
           "max.message.bytes": "-1", "message.timestamp.difference.max.ms": "soon", "delete.retention.ms": "-3"}
    for k, v in bad.items():
        n = t.topic("bad")
        fs = a.create_topics([NewTopic(n, num_partitions=1, replication_factor=1, config={k: v})],
                             operation_timeout=30, request_timeout=30)
        try:
            fs[n].result(30)
            raise AssertionError(f"CreateTopics accepted {k}={v}")
        except Exception as e:  # KafkaException
            err = e.args[0]
            if err.code() != KafkaError.INVALID_CONFIG:
                raise AssertionError(f"{k}={v}: {err}, expected INVALID_CONFIG")
            t.log(f"{k}={v}: {err.str()}")
    ok = t.topic("ok")
    create_topics(b, {ok: (1, {"delete.retention.ms": "1000", "compression.type": "ZSTD",
                               "cleanup.policy": "compact,delete"})})
    dflt = t.topic("dflt")
    create_topics(b, {dflt: (1, {})})
    r = a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0"),
                            ConfigResource(ConfigResource.Type.TOPIC, dflt)])
    res = {k.restype: f.result(30) for k, f in r.items()}
    got_b = res[ConfigResource.Type.BROKER]["message.max.bytes"].value
    got_t = res[ConfigResource.Type.TOPIC]["max.message.bytes"].value
    if got_b != "2000" or got_t != "2000":
        raise AssertionError(f"DescribeConfigs: broker message.max.bytes {got_b}, topic max.message.bytes {got_t}")
    # The broker's limit applies to a topic that sets none.
    p = producer(b, **{"linger.ms": 0, "retries": 0, "compression.type": "none"})
    res = _deliver(p, [(dflt, 0, b"k", b"x" * 3000, 0), (ok, 0, b"k", b"small", 0)])
    if res[0][0] is None or res[0][0].code() != KafkaError.MSG_SIZE_TOO_LARGE or res[1][0] is not None:
        raise AssertionError(f"--message-max-bytes 2000: {res}")
    b.stop()
    # The same limit from the environment.
    b2 = t.broker(env={"SKIFF_MESSAGE_MAX_BYTES": "1500"})
    a2 = admin(b2)  # alive until the future resolves
    r = a2.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    v = list(r.values())[0].result(30)["message.max.bytes"].value
    if v != "1500":
        raise AssertionError(f"SKIFF_MESSAGE_MAX_BYTES=1500: DescribeConfigs says {v}")
    b2.stop()


if __name__ == "__main__":
    broker.main([(test_raw_one_request_every_rule, 120), (test_confluent_rules, 180),
                 (test_confluent_recompression, 300), (test_librdkafka_compresses, 120),
                 (test_produce_v2_message_set_refused, 60), (test_kafka_python_rules, 240),
                 (test_create_topics_configs_and_broker_limit, 180)])
