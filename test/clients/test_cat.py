#!/usr/bin/python3
"""`skiff cat` against what a broker wrote: kcat produces keyed messages with headers (some
binary, some NULL) in every compression codec; after the broker stops (SIGTERM flushes), `skiff
cat --json` reads the bucket without a broker and must return every message exactly once, byte
for byte, in offset order per partition. Then the bounds (--partition, --from/--to-offset,
--from/--to-time, --max-records), usage errors (exit 2) and a corrupt segment (exit 1).

    test_cat.py --skiff build/src/cli/skiff [--store local|s3]
"""
import base64
import glob
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

N = 400  # per codec
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MSG_DELIM = b"\xfe<<MSG>>\xfd\x01"
KEY_DELIM = b"\xfc<<KEY>>\xfb\x02"
HEADERS = [("trace", "4bf92f35"), ("utf8", "h\u00e9llo")]


def make_messages(seed):
    rnd = random.Random(seed)
    msgs = []
    for i in range(N):
        kind = rnd.random()
        if kind < 0.05:
            key, value = f"null-value-{seed}-{i}".encode(), None
        elif kind < 0.30:
            key = bytes([0xff, 0x00]) + i.to_bytes(4, "big") + bytes([seed])
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
        else:
            key = f"key-{seed}-{i}".encode()
            value = f"value {i} ".encode() * rnd.randrange(1, 30)
        for m in (key, value):
            if m is not None and (MSG_DELIM in m or KEY_DELIM in m):
                raise AssertionError("generated data contains a delimiter; change the seed")
        msgs.append((key, value))
    return msgs


def produce(b, topic, codec, msgs):
    data = b"".join((k or b"") + KEY_DELIM + (v or b"") + MSG_DELIM for k, v in msgs)
    args = [b"kcat", b"-P", b"-b", b.bootstrap.encode(), b"-t", topic.encode(), b"-z", codec.encode(),
            b"-Z", b"-K", KEY_DELIM, b"-D", MSG_DELIM, b"-q",
            b"-X", b"acks=all", b"-X", b"linger.ms=5", b"-X", b"message.timeout.ms=60000"]
    for n, v in HEADERS:
        args += [b"-H", f"{n}={v}".encode()]
    p = subprocess.run(args, input=data, capture_output=True, timeout=60)
    if p.returncode != 0 or p.stderr.strip():
        raise AssertionError(f"kcat -P ({codec}) exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")


def cat_target(b, topic):
    if b.store == "s3":
        return [f"s3://{os.environ['S3_BUCKET']}/{b.namespace}/{topic}", "--s3-endpoint", b.s3_endpoint,
                "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1")]
    return [os.path.join(b.data_dir, "default", topic)]


def cat(t, b, topic, *extra, expect_rc=0):
    p = subprocess.run([t.skiff, "cat"] + cat_target(b, topic) + list(extra), capture_output=True, timeout=60)
    if p.returncode != expect_rc:
        raise AssertionError(f"skiff cat {' '.join(extra)} exited {p.returncode}, expected {expect_rc}: "
                             f"{p.stderr.decode(errors='replace')[-2000:]}")
    return p


def field(obj, name):
    if name + "_base64" in obj:
        return base64.b64decode(obj[name + "_base64"])
    v = obj.get(name)
    return None if v is None else v.encode()


def records(p):
    out = []
    for line in p.stdout.decode().splitlines():
        o = json.loads(line)
        hdrs = [(h["key"], h.get("value")) for h in o.get("headers", [])]
        out.append((o["partition"], o["offset"], o["timestamp"], field(o, "key"), field(o, "value"), hdrs, o["topic"]))
    return out


def test_cat_every_codec(t):
    b = t.broker(extra_args=["--auto-create-topics", "true", "--default-partitions", str(PARTITIONS)])
    topics = {}
    for seed, codec in enumerate(CODECS):
        topic = t.topic(f"cat-{codec}")
        msgs = make_messages(seed)
        produce(b, topic, codec, msgs)
        topics[codec] = (topic, msgs)
    b.stop()  # SIGTERM: everything flushed to the store

    for codec, (topic, msgs) in topics.items():
        recs = records(cat(t, b, topic, "--json", "--parallel", "4"))
        expected = {(k, v): i for i, (k, v) in enumerate(msgs)}
        seen = set()
        last = {}
        for (part, off, ts, k, v, h, tp) in recs:
            assert tp == topic, (tp, topic)
            assert (k, v) in expected, f"{codec}: unexpected record p{part}@{off} key={k!r:.40}"
            assert (k, v) not in seen, f"{codec}: record p{part}@{off} twice"
            seen.add((k, v))
            assert h == HEADERS, f"{codec}: p{part}@{off} headers {h!r}"
            assert off > last.get(part, -1), f"{codec}: p{part} offset {off} after {last.get(part)}"
            assert ts > 1600000000000, ts
            last[part] = off
        assert len(seen) == N, f"{codec}: {len(seen)} of {N} records"
        assert len(last) >= 2, f"{codec}: only partitions {sorted(last)}"
        t.log(f"{codec}: {N} records over partitions {sorted(last)}, byte-exact")

    # Bounds, on the zstd topic.
    topic, _ = topics["zstd"]
    allrecs = records(cat(t, b, topic, "--json"))
    p0 = [r for r in allrecs if r[0] == 0]
    assert len(p0) >= 10, len(p0)
    only0 = records(cat(t, b, topic, "--json", "--partition", "0"))
    assert only0 == p0
    lo, hi = p0[3][1], p0[8][1]
    ranged = records(cat(t, b, topic, "--json", "--partition", "0", "--from-offset", str(lo), "--to-offset", str(hi)))
    assert ranged == p0[3:9], (len(ranged), lo, hi)
    assert len(records(cat(t, b, topic, "--json", "--max-records", "7"))) == 7
    ts_sorted = sorted(r[2] for r in allrecs)
    mid = ts_sorted[len(ts_sorted) // 2]
    late = records(cat(t, b, topic, "--json", "--from-time", str(mid)))
    assert late and all(r[2] >= mid for r in late)
    assert len(late) == sum(1 for r in allrecs if r[2] >= mid)
    early = records(cat(t, b, topic, "--json", "--to-time", str(mid - 1)))
    assert len(early) + len(late) == len(allrecs)
    st = cat(t, b, topic, "--stats")
    assert b"records=" in st.stderr and b"gets=" in st.stderr, st.stderr
    text = cat(t, b, topic, "--partition", "0").stdout.decode(errors="replace").splitlines()
    assert len(text) == len(p0) and text[0].startswith(f"0\t{p0[0][1]}\t")

    # Usage errors exit 2; a topic that is not there exits 1.
    cat(t, b, topic, "--from-time", "not-a-time", expect_rc=2)
    cat(t, b, topic, "--bogus", expect_rc=2)
    cat(t, b, topic + "-missing", expect_rc=1)

    # A corrupt segment: exit 1 with its key, never a misread.
    if b.store == "local":
        segs = sorted(glob.glob(os.path.join(b.data_dir, "default", topic, "0", "*.kfs")))
        assert segs
        with open(segs[0], "r+b") as f:
            f.seek(os.path.getsize(segs[0]) - 40)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0x55]))
        p = cat(t, b, topic, "--json", "--partition", "0", expect_rc=1)
        assert os.path.basename(segs[0]).encode() in p.stderr, p.stderr
        t.log("corrupt segment: exit 1, " + p.stderr.decode(errors="replace").strip()[:160])


if __name__ == "__main__":
    broker.main([(test_cat_every_codec, 120)])
