#!/usr/bin/python3
"""kcat (librdkafka) against skiff: 10,000 messages with keys and headers per compression codec
(none, gzip, snappy, lz4, zstd), produced with acks=all and, after a broker restart (SIGTERM),
read back with -o beginning -e;
every key, value and header must come back byte for byte, each message exactly once, in
produce order within its partition. Some keys and values are binary, some NULL (kcat -Z turns
an empty key or value into NULL), some values empty-after-key.

    test_kcat.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

N = int(os.environ.get("SKIFF_KCAT_MESSAGES", "10000"))
PARTITIONS = 3
# Multi-byte delimiters (kcat -D / -K) that the data never contains; no NUL (argv).
MSG_DELIM = b"\xfe<<MSG>>\xfd\x01"
KEY_DELIM = b"\xfc<<KEY>>\xfb\x02"
# kcat -H sets the same headers on every message of one run: four runs, four header sets.
HEADER_SETS = [
    [],
    [("trace-id", "4bf92f3577b34da6"), ("empty", "")],
    [("dup", "first"), ("dup", "second"), ("x", "1")],
    [("utf8", "h\u00e9llo w\u00f6rld"), ("sp", "a b c")],
]


def make_messages(seed):
    rnd = random.Random(seed)
    msgs = []  # (key or None, value or None, headers)
    for i in range(N):
        kind = rnd.random()
        if kind < 0.01:
            key, value = f"null-value-{i}".encode(), None          # NULL value
        elif kind < 0.03:
            key = None                                            # NULL key
            value = i.to_bytes(4, "big") + b"no key " * rnd.randrange(1, 20)
        elif kind < 0.30:
            key = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 24)))  # binary key
            value = i.to_bytes(4, "big") + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 600)))
        else:
            key = f"key-{i % 997}-{i}".encode()
            words = [b"alpha", b"beta", b"gamma", b"\x00\x01\x02", b"\xff\xfe", b"skiff"]
            value = i.to_bytes(4, "big") + b" ".join(rnd.choice(words) for _ in range(rnd.randrange(0, 300)))
        for m in (key, value):
            if m is not None and (MSG_DELIM in m or KEY_DELIM in m):
                raise AssertionError("generated data contains a delimiter; change the seed")
        hdrs = HEADER_SETS[i * len(HEADER_SETS) // N]
        msgs.append((key, value, hdrs))
    return msgs


def run_produce(b, topic, codec, msgs, headers):
    data = b"".join((k or b"") + KEY_DELIM + (v or b"") + MSG_DELIM for k, v, _ in msgs)
    args = [b"kcat", b"-P", b"-b", b.bootstrap.encode(), b"-t", topic.encode(), b"-z", codec.encode(),
            b"-Z", b"-K", KEY_DELIM, b"-D", MSG_DELIM, b"-q",
            b"-X", b"acks=all", b"-X", b"linger.ms=5", b"-X", b"message.timeout.ms=60000"]
    for n, v in headers:
        args += [b"-H", f"{n}={v}".encode()]
    p = subprocess.run(args, input=data, capture_output=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        raise AssertionError(f"kcat -P ({codec}) exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')[-2000:]}")



def parse_kcat_output(out):
    """Parses records written with -f 'P%p O%o K%K:%k S%S:%s H%h\\n'."""
    recs = []
    pos = 0

    def take_int(prefix, end):
        nonlocal pos
        if out[pos:pos + len(prefix)] != prefix:
            raise AssertionError(f"kcat output: expected {prefix!r} at {pos}: {out[pos:pos + 60]!r}")
        pos += len(prefix)
        j = out.index(end, pos)
        v = int(out[pos:j])
        pos = j + len(end)
        return v

    while pos < len(out):
        p = take_int(b"P", b" ")
        o = take_int(b"O", b" ")
        klen = take_int(b"K", b":")
        key = out[pos:pos + max(klen, 0)] if klen >= 0 else None
        pos += max(klen, 0)
        vlen = take_int(b" S", b":")
        value = out[pos:pos + max(vlen, 0)] if vlen >= 0 else None
        pos += max(vlen, 0)
        if out[pos:pos + 2] != b" H":
            raise AssertionError(f"kcat output: expected ' H' at {pos}: {out[pos:pos + 60]!r}")
        j = out.index(b"\n", pos)
        htext = out[pos + 2:j].decode("utf-8")
        pos = j + 1
        headers = []
        if htext:
            for h in htext.split(","):
                n, _, v = h.partition("=")
                headers.append((n, v))
        recs.append((p, o, key, value, headers))
    return recs


def check_codec(t, b, codec, seed):
    topic = t.topic(f"kcat-{codec}")
    msgs = make_messages(seed)
    for hs in range(len(HEADER_SETS)):
        part = [m for i, m in enumerate(msgs) if i * len(HEADER_SETS) // N == hs]
        run_produce(b, topic, codec, part, HEADER_SETS[hs])
    # Read back from the store, not from what the broker kept in memory.
    b.restart()

    fmt = "P%p O%o K%K:%k S%S:%s H%h\\n"
    p = subprocess.run(["kcat", "-C", "-b", b.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                        "-X", "check.crcs=true", "-f", fmt],
                       capture_output=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        raise AssertionError(f"kcat -C ({codec}) exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')[-2000:]}")
    recs = parse_kcat_output(p.stdout)

    # Every message is unique by (key, value); map it to its produce index.
    index = {}
    for i, (k, v, h) in enumerate(msgs):
        assert (k, v) not in index
        index[(k, v)] = i
    seen = {}
    last_in_partition = {}
    last_offset = {}
    errors = []
    for (part, off, k, v, h) in recs:
        if part in last_offset and off <= last_offset[part]:
            errors.append(f"partition {part}: offset {off} after {last_offset[part]}")
        last_offset[part] = off
        i = index.get((k, v))
        if i is None:
            errors.append(f"unexpected record p{part}@{off}: key={k!r:.60} value={v!r:.80}")
            continue
        if i in seen:
            errors.append(f"message #{i} twice: p{seen[i][0]}@{seen[i][1]} and p{part}@{off}")
            continue
        seen[i] = (part, off)
        if h != msgs[i][2]:
            errors.append(f"message #{i} p{part}@{off}: headers {h!r}, expected {msgs[i][2]!r}")
        if part in last_in_partition and i < last_in_partition[part]:
            errors.append(f"partition {part}: message #{i} at offset {off} after #{last_in_partition[part]}")
        last_in_partition[part] = max(i, last_in_partition.get(part, -1))
    missing = [i for i in range(N) if i not in seen]
    if missing:
        errors.append(f"{len(missing)} of {N} messages missing, e.g. #{missing[:5]}")
    if errors:
        raise AssertionError(f"codec {codec}: {len(errors)} problems:\n      " + "\n      ".join(errors[:20]))
    used = sorted(last_offset)
    t.log(f"{codec}: {N} messages over partitions {used}, byte-exact")
    if len(used) < 2:
        raise AssertionError(f"codec {codec}: all messages landed in partitions {used}; "
                             f"expected the keys to spread over {PARTITIONS}")


def codec_test(codec, seed):
    def fn(t):
        b = t.broker(extra_args=["--auto-create-topics", "true", "--default-partitions", str(PARTITIONS)])
        check_codec(t, b, codec, seed)
        b.stop()
    fn.__name__ = f"test_{codec}"
    return (fn, 180)


if __name__ == "__main__":
    broker.main([codec_test(c, s) for s, c in enumerate(["none", "gzip", "snappy", "lz4", "zstd"])])
