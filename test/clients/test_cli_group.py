#!/usr/bin/python3
"""`skiff produce`, `skiff consume` and `skiff group list|describe|delete|reset-offsets` against
a running broker, checked against confluent-kafka (librdkafka) on the other side:

  - skiff produce -> confluent-kafka: keys split at -K (values keep later separators), -H
    headers on every record, the partition of each key the same as librdkafka's murmur2
    partitioner picks, every compression codec, --json's offsets.
  - confluent-kafka -> skiff consume: --json (keys, values, null key, headers, a value that is
    not UTF-8 as value_base64, timestamps), the -K text form, --from/--to offsets, -N, times
    (@ms and ISO), -n.
  - group list/describe: a confluent-kafka group's state, member (client id, assignment),
    committed offsets, log end and lag per partition.
  - reset-offsets: a dry run changes nothing; --execute on the Empty group, and a
    confluent-kafka consumer of the group resumes exactly at the reset offsets; --shift-by and
    --to-datetime plans; --execute against a live member is refused with Kafka's error.
  - delete, and each error's exit code (2 usage, 1 broker said no, 3 unreachable).

    test_cli_group.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import (Consumer, TopicPartition, consume_partitions, create_topic,  # noqa: E402
                    produce_all)


def skiff(t, b, *args, stdin=None, expect=0, brokers=None, env=None):
    """Runs `skiff ARGS --brokers ...` (no --brokers when brokers == ""; env: variables to add);
    asserts the exit code; returns (stdout, stderr)."""
    cmd = [t.skiff, *args] + (["--brokers", brokers or b.bootstrap] if brokers != "" else [])
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=60,
                       env={**os.environ, **(env or {})})
    if p.returncode != expect:
        raise AssertionError(f"{' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                             f"stdout: {p.stdout[-2000:]!r}\nstderr: {p.stderr[-2000:]!r}")
    return p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def json_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def group_consumer(b, group, **conf):
    c = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
         "client.id": "cli-test-client", "log.connection.close": False}
    c.update(conf)
    return Consumer(c)


def consume_n(c, n, timeout=30):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"got {len(out)} of {n} messages within {timeout} s")
        for m in c.consume(n - len(out), 0.5):
            if m.error():
                raise AssertionError(f"consume error: {m.error()}")
            out.append(m)
    return out


# ---------------------------------------------------------------------------------------------

def test_produce_read_by_confluent(t):
    b = t.broker()
    topic = t.topic("prod")
    create_topic(b, topic, 3)
    lines = [f"key-{i}:value:{i}" for i in range(30)]
    out, _ = skiff(t, b, "produce", "-t", topic, "-K", ":", "-H", "origin=cli", "-H", "eq=a=b",
                   "--json", stdin=("\n".join(lines) + "\n").encode())
    summary = json.loads(out)
    assert summary["topic"] == topic and summary["records"] == 30, summary
    assert sum(x["records"] for x in summary["batches"]) == 30
    msgs, highs = consume_partitions(b, topic, 3)
    got = {}
    for p, ms in msgs.items():
        for m in ms:
            assert m.headers() == [("origin", b"cli"), ("eq", b"a=b")], m.headers()
            got[m.key().decode()] = (p, m.value().decode())
    assert sorted(got) == sorted(f"key-{i}" for i in range(30))
    for i in range(30):
        assert got[f"key-{i}"][1] == f"value:{i}", got[f"key-{i}"]
    # The same keys through librdkafka's Java-compatible partitioner land on the same partitions.
    ref = t.topic("ref")
    create_topic(b, ref, 3)
    placed = produce_all(b, ref, [(None, f"key-{i}".encode(), b"x", None) for i in range(30)],
                         partitioner="murmur2_random")
    for i in range(30):
        assert placed[i][0] == got[f"key-{i}"][0], (i, placed[i], got[f"key-{i}"])
    # Keyless lines spread round-robin; -p pins; --value writes one record.
    rr = t.topic("rr")
    create_topic(b, rr, 3)
    skiff(t, b, "produce", "-t", rr, stdin=b"a\nb\nc\nd\ne\nf\n")
    msgs, highs = consume_partitions(b, rr, 3)
    assert highs == {0: 2, 1: 2, 2: 2}, highs
    out, _ = skiff(t, b, "produce", "-t", rr, "-p", "1", "--key", "k", "--value", "one", "--json")
    assert json.loads(out)["batches"] == [{"partition": 1, "base_offset": 2, "records": 1}], out
    # Lines typed one at a time are sent as they come, not at end of input.
    live = t.topic("live")
    create_topic(b, live, 1)
    proc = subprocess.Popen([t.skiff, "produce", "-t", live, "--brokers", b.bootstrap], stdin=subprocess.PIPE)
    try:
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        broker.wait_until(lambda: skiff(t, b, "consume", "-t", live, "-e")[0] == "first\n", 20,
                          "the first line to be written while stdin is still open")
        proc.stdin.write(b"second")   # no newline at the end: still a record
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    assert skiff(t, b, "consume", "-t", live, "-e")[0] == "first\nsecond\n"
    # Every codec librdkafka reads.
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        ct = t.topic(codec)
        skiff(t, b, "produce", "-t", ct, "-z", codec, stdin=("".join(f"{codec}-{i}\n" for i in range(50))).encode())
        msgs, highs = consume_partitions(b, ct, 1)
        assert [m.value().decode() for m in msgs[0]] == [f"{codec}-{i}" for i in range(50)], codec
        # ... and skiff consume decodes its own compressed batches, from the middle of one.
        out, _ = skiff(t, b, "consume", "-t", ct, "--from", "45", "-e")
        assert out.splitlines() == [f"{codec}-{i}" for i in range(45, 50)], (codec, out)


def test_consume_written_by_confluent(t):
    b = t.broker()
    topic = t.topic("cons")
    create_topic(b, topic, 2)
    base = 1_700_000_000_000
    msgs = []
    for i in range(10):
        msgs.append((0, f"k{i}".encode(), f"v:{i}".encode(), [("h", f"{i}".encode())]))
    produce_all(b, topic, msgs)
    # Partition 1: a null key, a value that is not UTF-8, explicit timestamps.
    from ckutil import producer
    p = producer(b)
    p.produce(topic, partition=1, value=b"plain", timestamp=base)
    p.produce(topic, partition=1, key=b"bin", value=b"\xff\x00\x01", timestamp=base + 1000)
    p.produce(topic, partition=1, key=b"late", value=b"late", timestamp=base + 2000)
    assert p.flush(30) == 0
    out, _ = skiff(t, b, "consume", "-t", topic, "-e", "--json")
    recs = json_lines(out)
    p0 = [r for r in recs if r["partition"] == 0]
    p1 = [r for r in recs if r["partition"] == 1]
    assert [r["offset"] for r in p0] == list(range(10))
    assert [(r["key"], r["value"]) for r in p0] == [(f"k{i}", f"v:{i}") for i in range(10)]
    assert p0[3]["headers"] == [{"key": "h", "value": "3"}], p0[3]
    assert p0[0]["topic"] == topic and p0[0]["timestamp_type"] == "CreateTime"
    assert p1[0]["key"] is None and p1[0]["value"] == "plain" and p1[0]["timestamp"] == base, p1[0]
    assert p1[1]["value_base64"] == "/wAB" and "value" not in p1[1], p1[1]
    # Text form with -K, one partition.
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "0", "-e", "-K", "=")
    assert out.splitlines() == [f"k{i}=v:{i}" for i in range(10)], out
    # Offsets: [3, 6) of partition 0; the last 2; -n.
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "0", "--from", "3", "--to", "6", "--json")
    assert [r["offset"] for r in json_lines(out)] == [3, 4, 5], out
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "0", "--from", "-2", "-e")
    assert out.splitlines() == ["v:8", "v:9"], out
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "0", "-n", "4")
    assert out.splitlines() == [f"v:{i}" for i in range(4)], out
    # Times: from base+1000 (ms) to base+2000 (ISO) is exactly the middle record.
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "1", "--from", f"@{base + 1000}",
                   "--to", "@2023-11-14T22:13:22Z", "--json")
    assert [r["key"] for r in json_lines(out)] == ["bin"], out
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "1", "--from", "@2023-11-14T22:13:21.500Z", "-e")
    assert out.splitlines() == ["late"], out
    # --to end without -e stops at the end too.
    out, _ = skiff(t, b, "consume", "-t", topic, "-p", "1", "--to", "end")
    assert len(out.splitlines()) == 3
    # Batches librdkafka compressed, with every codec.
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        ct = t.topic("z" + codec)
        create_topic(b, ct, 1)
        produce_all(b, ct, [(0, f"k{i}".encode(), f"{codec}:{i}".encode(), None) for i in range(40)],
                    **{"compression.type": codec, "linger.ms": 50})
        out, _ = skiff(t, b, "consume", "-t", ct, "-e", "-K", "/")
        assert out.splitlines() == [f"k{i}/{codec}:{i}" for i in range(40)], (codec, out[:300])
    # Errors: unknown topic (1), bad position (2), no such partition (2).
    _, err = skiff(t, b, "consume", "-t", "no-such-topic", "-e", expect=1)
    assert "no-such-topic" in err, err
    _, err = skiff(t, b, "consume", "-t", topic, "--from", "yesterday", expect=2)
    assert "--from" in err, err
    skiff(t, b, "consume", "-t", topic, "-p", "7", "-e", expect=2)


def test_group_describe_and_reset(t):
    b = t.broker()
    topic = t.topic("grp")
    group = "g-" + topic
    create_topic(b, topic, 2)
    produce_all(b, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(20)])
    c = group_consumer(b, group)
    c.subscribe([topic])
    consume_n(c, 20)
    # Commit 7 of partition 0 and 4 of partition 1: lag 3 and 6.
    c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 4)], asynchronous=False)

    out, _ = skiff(t, b, "group", "list", "--json")
    assert {"group": group, "state": "Stable", "protocol_type": "consumer"} in json.loads(out), out
    out, _ = skiff(t, b, "group", "describe", group, "--json")
    d = json.loads(out)[0]
    assert d["state"] == "Stable" and d["protocol_type"] == "consumer" and len(d["members"]) == 1, d
    m = d["members"][0]
    assert m["client_id"] == "cli-test-client", m
    assert sorted((a["topic"], a["partition"]) for a in m["assignment"]) == [(topic, 0), (topic, 1)], m
    offs = {o["partition"]: o for o in d["offsets"]}
    assert (offs[0]["committed_offset"], offs[0]["log_end_offset"], offs[0]["lag"]) == (7, 10, 3), offs
    assert (offs[1]["committed_offset"], offs[1]["log_end_offset"], offs[1]["lag"]) == (4, 10, 6), offs
    assert offs[0]["member_id"] == m["member_id"]
    out, _ = skiff(t, b, "group", "describe", group)
    assert "LAG" in out and "cli-test-client" in out and f"{topic}:0,1" in out, out

    # A live member: --execute is refused (Kafka accepts an admin commit only from an Empty group),
    # and deleting the group too.
    _, err = skiff(t, b, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", expect=1)
    assert "not empty" in err, err
    _, err = skiff(t, b, "group", "delete", group, expect=1)
    assert "NON_EMPTY_GROUP" in err, err
    c.close()
    broker.wait_until(lambda: json.loads(skiff(t, b, "group", "describe", group, "--json")[0])[0]["state"] == "Empty",
                      20, "the group to become Empty")

    # Dry run: a plan, nothing committed.
    out, err = skiff(t, b, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--json")
    plan = json.loads(out)
    assert plan["executed"] is False and "dry run" in err
    assert sorted((p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]) == \
        [(0, 7, 0), (1, 4, 0)], plan
    d = json.loads(skiff(t, b, "group", "describe", group, "--json")[0])[0]
    assert sorted((o["partition"], o["committed_offset"]) for o in d["offsets"]) == [(0, 7), (1, 4)], d
    # Other plans: shift-by clamps; to-datetime past every record is the log end; one partition.
    plan = json.loads(skiff(t, b, "group", "reset-offsets", group, "--all-topics", "--shift-by", "-5", "--json")[0])
    assert sorted((p["partition"], p["new_offset"]) for p in plan["partitions"]) == [(0, 2), (1, 0)], plan
    plan = json.loads(skiff(t, b, "group", "reset-offsets", group, "--topic", f"{topic}:1", "--to-datetime",
                            "2999-01-01T00:00:00Z", "--json")[0])
    assert [(p["partition"], p["new_offset"]) for p in plan["partitions"]] == [(1, 10)], plan
    out, _ = skiff(t, b, "group", "reset-offsets", group, "--topic", topic, "--to-latest")
    assert "NEW-OFFSET" in out and "10" in out, out

    # --execute: partition 0 to 5, partition 1 to 2; the group resumes exactly there.
    skiff(t, b, "group", "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "5", "--execute")
    out, _ = skiff(t, b, "group", "reset-offsets", group, "--topic", f"{topic}:1", "--shift-by", "-2",
                   "--execute", "--json")
    assert json.loads(out)["executed"] is True, out
    c = group_consumer(b, group)
    c.subscribe([topic])
    rest = consume_n(c, (10 - 5) + (10 - 2))
    first = {}
    for msg in rest:
        first.setdefault(msg.partition(), msg.offset())
    assert first == {0: 5, 1: 2}, first
    assert sorted(msg.value().decode() for msg in rest if msg.partition() == 0) == \
        sorted(f"v{i}" for i in range(10, 20, 2))
    c.close()

    # Delete the now empty group; it is gone from the list; a second delete is GROUP_ID_NOT_FOUND.
    broker.wait_until(lambda: json.loads(skiff(t, b, "group", "describe", group, "--json")[0])[0]["state"] == "Empty",
                      20, "the group to become Empty")
    out, _ = skiff(t, b, "group", "delete", group)
    assert f"deleted group {group}" in out, out
    assert group not in [g["group"] for g in json.loads(skiff(t, b, "group", "list", "--json")[0])]
    _, err = skiff(t, b, "group", "delete", group, expect=1)
    assert "does not exist" in err or "GROUP_ID_NOT_FOUND" in err, err


def test_exit_codes(t):
    b = t.broker()
    topic = t.topic("err")
    create_topic(b, topic, 1)
    # 2: usage.
    skiff(t, b, "group", "reset-offsets", "g", "--topic", topic, expect=2)                 # no mode
    skiff(t, b, "group", "reset-offsets", "g", "--to-earliest", expect=2)                  # no topics
    skiff(t, b, "group", "reset-offsets", "g", "--topic", topic, "--to-earliest", "--to-latest", expect=2)
    skiff(t, b, "group", "reset-offsets", "g", "--topic", topic, "--to-datetime", "soon", expect=2)
    skiff(t, b, "produce", expect=2)                                                       # no topic
    skiff(t, b, "produce", "-t", topic, "-z", "brotli", expect=2)
    skiff(t, b, "produce", "-t", topic, "-H", "=v", "--value", "x", expect=2)
    _, err = skiff(t, b, "produce", "-t", topic, "-K", ":", stdin=b"a:1\nno separator\n", expect=2)
    assert "line 2" in err, err
    # 1: the broker said no.
    _, err = skiff(t, b, "group", "describe", "no-such-group", expect=1)
    assert "no-such-group" in err, err
    skiff(t, b, "group", "reset-offsets", "g", "--topic", "no-such-topic", "--to-earliest", expect=1)
    _, err = skiff(t, b, "group", "reset-offsets", "g-none", "--topic", topic, "--shift-by", "1", expect=2)
    assert "no committed offset" in err, err
    skiff(t, b, "produce", "-t", "nope-" + topic, "--no-create", "--value", "x", expect=1)
    # 3: nobody listens.
    port = broker.free_port()
    _, err = skiff(t, b, "group", "list", brokers=f"127.0.0.1:{port}", expect=3)
    assert str(port) in err, err
    skiff(t, b, "consume", "-t", topic, "-e", brokers=f"127.0.0.1:{port}", expect=3)
    # Every flag also as an environment variable.
    env = {"SKIFF_BROKERS": b.bootstrap, "SKIFF_TOPIC": topic, "SKIFF_KEY_SEPARATOR": "/",
           "SKIFF_HEADER": "e=1"}
    skiff(t, b, "produce", stdin=b"ek/ev\n", brokers="", env=env)
    env = {"SKIFF_BROKERS": b.bootstrap, "SKIFF_TOPIC": topic, "SKIFF_EXIT": "true", "SKIFF_JSON": "true",
           "SKIFF_FROM": "-1"}
    recs = json_lines(skiff(t, b, "consume", brokers="", env=env)[0])
    assert [(r["key"], r["value"], r["headers"]) for r in recs] == [("ek", "ev", [{"key": "e", "value": "1"}])], recs
    # Help exits 0 and names the exit codes.
    out, _ = skiff(t, b, "group", "reset-offsets", "--help")
    assert "--to-datetime" in out and "--execute" in out


if __name__ == "__main__":
    broker.main([test_produce_read_by_confluent, test_consume_written_by_confluent,
                 test_group_describe_and_reset, test_exit_codes], default_timeout=120)
