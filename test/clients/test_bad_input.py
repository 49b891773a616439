#!/usr/bin/python3
"""Bad input on raw sockets: the broker must answer or close each bad connection, and keep
serving normal clients (a real librdkafka producer and admin client, checked after each case).

  - a frame whose size is over the maximum (and a negative size): closed, without waiting
    for the body
  - a truncated frame, then close; a truncated frame left open while others are served
  - garbage bytes
  - an unknown API key, or a version of a served API that is not served: the connection is
    closed without an answer (as Kafka does), logged and counted
  - ApiVersions with an unsupported version: error 35 (UNSUPPORTED_VERSION) in a v0 body with
    the supported ApiVersions range (KIP-511)
  - Produce with a record batch whose CRC is wrong: CORRUPT_MESSAGE (2) for that partition,
    nothing of it stored; the same request with the right CRC is accepted

    test_bad_input.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, consume_partitions, create_topic, produce_all  # noqa: E402

API_PRODUCE, API_METADATA, API_VERSIONS = 0, 3, 18
UNSUPPORTED_VERSION, CORRUPT_MESSAGE = 35, 2


# --- wire helpers -----------------------------------------------------------------------------

def request(api_key, version, corr, body=b"", flexible=False, client_id=b"skiff-bad-input"):
    hdr = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", len(client_id)) + client_id
    if flexible:
        hdr += b"\x00"          # no tagged fields
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def connect(b):
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n, timeout):
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def recv_response(s, timeout=10):
    """A response frame's payload, or None if the broker closed the connection."""
    head = recv_exact(s, 4, timeout)
    if head is None:
        return None
    (n,) = struct.unpack(">i", head)
    if n < 4 or n > 64 << 20:
        raise AssertionError(f"response frame size {n}")
    body = recv_exact(s, n, timeout)
    if body is None:
        raise AssertionError("connection closed in the middle of a response")
    return body


def wait_closed(s, timeout, what):
    """Asserts the broker closes the connection within timeout (any bytes it sends first are
    returned)."""
    s.settimeout(0.5)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    raise AssertionError(f"{what}: connection still open after {timeout} s")


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        v = self.d[self.p:self.p + n]
        self.p += n
        return v.decode()

    def done(self):
        return self.p == len(self.d)


def api_versions(b):
    """{api_key: (min, max)} from ApiVersions v0 on a fresh connection."""
    with connect(b) as s:
        s.sendall(request(API_VERSIONS, 0, 4242))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("ApiVersions v0: connection closed")
    r = Reader(resp)
    corr, err, n = r.take(">i"), r.take(">h"), r.take(">i")
    if corr != 4242 or err != 0:
        raise AssertionError(f"ApiVersions v0: correlation id {corr}, error {err}")
    out = {}
    for _ in range(n):
        k, lo, hi = r.take(">hhh")
        out[k] = (lo, hi)
    return out


# --- record batches (magic 2) -------------------------------------------------------------------

def _crc32c_table():
    tbl = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tbl.append(c)
    return tbl


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = _CRC_TABLE[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def record(offset_delta, key, value):
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)           # no headers
    return varint(len(body)) + body


def record_batch(records, corrupt=False, producer_id=-1, epoch=-1, sequence=-1):
    ts = int(time.time() * 1000)
    recs = b"".join(record(i, k, v) for i, (k, v) in enumerate(records))
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, ts, ts, producer_id, epoch, sequence,
                            len(records)) + recs
    crc = crc32c(after_crc)
    if corrupt:   # the stored CRC no longer matches: flip a bit of the last value byte
        after_crc = after_crc[:-2] + bytes([after_crc[-2] ^ 0x01]) + after_crc[-1:]
    rest = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(rest)) + rest


def produce_request(version, corr, topic, partition, batch):
    body = struct.pack(">h", -1)                                  # transactional_id: null
    body += struct.pack(">hi", -1, 10000)                         # acks=-1, timeout
    t = topic.encode()
    body += struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
    body += struct.pack(">i", 1) + struct.pack(">i", partition)
    body += struct.pack(">i", len(batch)) + batch
    return request(API_PRODUCE, version, corr, body)


def parse_produce_response(version, resp):
    r = Reader(resp)
    corr = r.take(">i")
    out = []
    for _ in range(r.take(">i")):
        name = r.string()
        for _ in range(r.take(">i")):
            idx, err, base = r.take(">i"), r.take(">h"), r.take(">q")
            if version >= 2:
                r.take(">q")
            if version >= 5:
                r.take(">q")
            msg = None
            if version >= 8:
                for _ in range(r.take(">i")):
                    r.take(">i")
                    r.string()
                msg = r.string()
            out.append((name, idx, err, base, msg))
    r.take(">i")   # throttle
    if not r.done():
        raise AssertionError(f"Produce v{version} response: {len(resp) - r.p} bytes left over")
    return corr, out


# --- checks ----------------------------------------------------------------------------------------

def assert_serves(t, b, what):
    """The broker process is alive, a raw ApiVersions works, and a real client produces with
    acks=all and lists topics."""
    if not b.running():
        raise AssertionError(f"after {what}: the broker exited with status {b.proc.returncode}")
    api_versions(b)
    topic = "health"
    acked = produce_all(b, topic, [(0, b"k", f"after {what}".encode(), None)], timeout=30)
    if not acked or acked[0] is None:
        raise AssertionError(f"after {what}: a normal produce was not acknowledged")
    if topic not in admin(b).list_topics(timeout=10).topics:
        raise AssertionError(f"after {what}: list_topics does not show {topic}")
    t.log(f"still serving after {what}")


def serving_broker(t):
    """A broker with the topic assert_serves() writes to (created up front, not auto-created)."""
    b = t.broker()
    create_topic(b, "health", 1)
    return b


def test_oversized_frame(t):
    b = serving_broker(t)
    for size in (0x7FFFFFFF, 256 << 20):
        with connect(b) as s:
            s.sendall(struct.pack(">i", size) + request(API_VERSIONS, 0, 1)[4:])
            got = wait_closed(s, 10, f"frame size {size}")
            if got:
                raise AssertionError(f"frame size {size}: broker sent {got[:40]!r} instead of closing")
        assert_serves(t, b, f"a frame of size {size}")
    with connect(b) as s:
        s.sendall(struct.pack(">i", -1) + b"\x00" * 16)
        wait_closed(s, 10, "negative frame size")
    assert_serves(t, b, "a negative frame size")
    with connect(b) as s:
        s.sendall(struct.pack(">i", 0))
        got = wait_closed(s, 10, "zero frame size")
    assert_serves(t, b, "a zero frame size")
    b.stop()


def test_truncated_frames(t):
    b = serving_broker(t)
    full = request(API_VERSIONS, 0, 7)
    for cut in (2, 4, 6, len(full) - 1):
        s = connect(b)
        s.sendall(full[:cut])
        s.close()
    # A frame announcing 1000 bytes, 30 sent, then close.
    with connect(b) as s:
        s.sendall(struct.pack(">i", 1000) + full[4:] + b"x" * 12)
    assert_serves(t, b, "truncated frames then close")
    # A truncated frame left open must not stall anyone else.
    hold = connect(b)
    hold.sendall(struct.pack(">i", 1000) + full[4:])
    assert_serves(t, b, "a truncated frame left open")
    hold.close()
    # Half of a real request, then the rest later on the same connection: answered.
    with connect(b) as s:
        s.sendall(full[:9])
        time.sleep(0.3)
        s.sendall(full[9:])
        resp = recv_response(s)
        if resp is None or struct.unpack(">i", resp[:4])[0] != 7:
            raise AssertionError(f"a request sent in two pieces: got {resp!r:.60}")
    b.stop()


def test_garbage(t):
    b = serving_broker(t)
    rnd = random.Random(11)
    for i in range(8):
        junk = bytes(rnd.randrange(256) for _ in range(rnd.choice([3, 64, 4096])))
        if i % 2:   # a plausible frame size with a garbage header and body
            junk = struct.pack(">i", len(junk)) + junk
        with connect(b) as s:
            s.sendall(junk)
            s.settimeout(5)
            try:
                s.shutdown(socket.SHUT_WR)
                wait_closed(s, 10, f"garbage #{i}")
            except OSError:
                pass
    # Plain text (an HTTP request on the Kafka port).
    with connect(b) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_closed(s, 10, "an HTTP request")
    assert_serves(t, b, "garbage bytes")
    b.stop()


def test_unknown_api_key(t):
    """As Kafka (SocketServer.parseRequestHeader; Kafka 4 for the versions KIP-896 removed): a
    request for an API or a version that is not served closes the connection without an answer
    (none could be decoded: a response's layout depends on the version), with a warning naming
    the API, the version and the client id, counted in skiff_kafka_unserved_requests_total."""
    b = serving_broker(t)
    API_FETCH = 1

    def closed_without_answer(payload, what):
        with connect(b) as s:
            s.sendall(payload)
            resp = recv_response(s)
            if resp is not None:
                raise AssertionError(f"{what}: answered ({len(resp)} bytes) instead of closing the connection")

    def unserved(reason):
        return broker.metric_counter(b, "skiff_kafka_unserved_requests_total", reason=reason)

    before_api, before_version = unserved("unknown_api"), unserved("unsupported_version")
    for key in (32000, 9999, -5):
        closed_without_answer(request(key, 0, 0x1234ABCD, b"\x00" * 8, client_id=b"old-tool"),
                              f"unknown API key {key}")
        assert_serves(t, b, f"unknown API key {key}")
    # Known keys at versions the broker does not serve: Metadata v999 (too new), Fetch v3 (too
    # old: before magic-2 record batches).
    closed_without_answer(request(API_METADATA, 999, 77, b"\x00" * 4, flexible=True), "Metadata v999")
    assert_serves(t, b, "Metadata v999")
    closed_without_answer(request(API_FETCH, 3, 78, b"\x00" * 16), "Fetch v3")
    assert_serves(t, b, "Fetch v3")
    got = (unserved("unknown_api") - before_api, unserved("unsupported_version") - before_version)
    if got != (3, 2):
        raise AssertionError(f"skiff_kafka_unserved_requests_total grew by {got} (unknown_api, "
                             "unsupported_version), expected (3, 2)")
    with open(b.log_path, "rb") as f:
        log = f.read().decode("utf-8", "replace")
    for line in ("unknown API (key 9999) v0 is not served, from client id 'old-tool'",
                 "Metadata (key 3) v999 is not served (versions 0-12 are)",
                 "Fetch (key 1) v3 is not served (versions 4-12 are)"):
        if line not in log:
            raise AssertionError(f"the broker's log has no line with {line!r}")
    b.stop()


def test_api_versions_unsupported_version(t):
    b = serving_broker(t)
    supported = api_versions(b)
    if API_VERSIONS not in supported or supported[API_VERSIONS][0] != 0 or supported[API_VERSIONS][1] < 3:
        raise AssertionError(f"ApiVersions range {supported.get(API_VERSIONS)}, expected 0..>=3")
    for v in (127, supported[API_VERSIONS][1] + 1):
        # As a newer client would send it: header v2, body with compact strings and tags.
        body = b"\x05skiff" + b"\x040.1" + b"\x00"
        with connect(b) as s:
            s.sendall(request(API_VERSIONS, v, 31337, body, flexible=True))
            resp = recv_response(s)
            if resp is None:
                raise AssertionError(f"ApiVersions v{v}: connection closed instead of UNSUPPORTED_VERSION")
            r = Reader(resp)
            corr, err = r.take(">i"), r.take(">h")
            if corr != 31337:
                raise AssertionError(f"ApiVersions v{v}: correlation id {corr}, expected 31337")
            if err != UNSUPPORTED_VERSION:
                raise AssertionError(f"ApiVersions v{v}: error {err}, expected 35 (UNSUPPORTED_VERSION)")
            n = r.take(">i")   # v0 body: int32 array length
            if not 1 <= n <= 100:
                raise AssertionError(f"ApiVersions v{v} error response: {n} api keys (not a v0 body?): {resp!r:.80}")
            keys = dict((k, (lo, hi)) for k, lo, hi in (r.take(">hhh") for _ in range(n)))
            if keys.get(API_VERSIONS) != supported[API_VERSIONS]:
                raise AssertionError(f"ApiVersions v{v} error response lists ApiVersions as "
                                     f"{keys.get(API_VERSIONS)}, expected {supported[API_VERSIONS]}")
            # Then the client retries at v0 on the same connection, as librdkafka does.
            s.sendall(request(API_VERSIONS, 0, 31338))
            resp = recv_response(s)
            if resp is None or struct.unpack(">ih", resp[:6]) != (31338, 0):
                raise AssertionError(f"ApiVersions v0 after v{v} on the same connection: {resp!r:.60}")
        assert_serves(t, b, f"ApiVersions v{v}")
    b.stop()


def test_produce_corrupt_crc(t):
    b = serving_broker(t)
    topic = t.topic("crc")
    create_topic(b, topic, 2)
    lo, hi = api_versions(b)[API_PRODUCE]
    versions = [v for v in range(3, 9) if lo <= v <= hi]
    if not versions:
        raise AssertionError(f"Produce versions {lo}..{hi}: none of 3..8 (the test speaks those)")
    v = max(versions)
    with connect(b) as s:
        def send(corr, batch):
            s.sendall(produce_request(v, corr, topic, 1, batch))
            resp = recv_response(s)
            if resp is None:
                raise AssertionError(f"Produce v{v} #{corr}: connection closed")
            c, parts = parse_produce_response(v, resp)
            if c != corr or len(parts) != 1 or parts[0][:2] != (topic, 1):
                raise AssertionError(f"Produce v{v} #{corr}: response {c} {parts}")
            return parts[0]

        good1 = send(1, record_batch([(b"k1", b"good-1")]))
        if good1[2] != 0 or good1[3] != 0:
            raise AssertionError(f"a valid batch: error {good1[2]}, base offset {good1[3]} (expected 0, 0)")
        bad = send(2, record_batch([(b"k2", b"corrupt-2"), (b"k3", b"corrupt-3")], corrupt=True))
        if bad[2] != CORRUPT_MESSAGE:
            raise AssertionError(f"a batch with a wrong CRC: error {bad[2]} (message {bad[4]!r}), "
                                 f"expected 2 (CORRUPT_MESSAGE)")
        good2 = send(3, record_batch([(b"k4", b"good-4")]))
        if good2[2] != 0 or good2[3] != 1:
            raise AssertionError(f"a valid batch after the corrupt one: error {good2[2]}, base offset "
                                 f"{good2[3]} (expected 0, 1)")
    out, highs = consume_partitions(b, topic, 2)
    vals = [(m.offset(), m.value()) for m in out[1]]
    if vals != [(0, b"good-1"), (1, b"good-4")] or highs[0] != 0:
        raise AssertionError(f"partition 1 holds {vals} (expected the two good messages only), "
                             f"partition 0 high watermark {highs[0]}")
    assert_serves(t, b, "a Produce with a corrupt CRC")
    b.stop()


def test_pipelined_large_and_small_produces(t):
    """Large requests are handed to their handler in the connection's read buffer (not copied);
    pipelined large and small produces in one write, and large ones split over many writes, are
    all answered in order with the right offsets, and the data reads back intact."""
    b = serving_broker(t)
    topic = t.topic("pipe")
    create_topic(b, topic, 1)
    lo, hi = api_versions(b)[API_PRODUCE]
    v = max(x for x in range(3, 9) if lo <= x <= hi)
    values = []
    frames = []
    for i in range(12):
        size = [200_000, 50, 70_000, 65_536 - 100, 10][i % 5]
        val = (f"v{i:03d}-".encode() * (size // 5 + 1))[:size]
        values.append(val)
        frames.append(produce_request(v, 100 + i, topic, 0, record_batch([(b"k", val)])))
    with connect(b) as s:
        blob = b"".join(frames)
        # First half in one write; the second in odd-sized pieces that split frame headers too.
        half = len(b"".join(frames[:6]))
        s.sendall(blob[:half])
        rest = blob[half:]
        for at in range(0, len(rest), 7777):
            s.sendall(rest[at:at + 7777])
        for i in range(len(frames)):
            resp = recv_response(s, timeout=30)
            if resp is None:
                raise AssertionError(f"pipelined produce #{i}: connection closed")
            corr, parts = parse_produce_response(v, resp)
            if corr != 100 + i or parts[0][2] != 0 or parts[0][3] != i:
                raise AssertionError(f"pipelined produce #{i}: correlation {corr}, answer {parts[0]} "
                                     f"(expected correlation {100 + i}, no error, base offset {i})")
    out, _ = consume_partitions(b, topic, 1)
    got = [m.value() for m in out[0]]
    if got != values:
        raise AssertionError(f"read back {len(got)} records; they differ from the {len(values)} produced")
    assert_serves(t, b, "pipelined large and small produces")
    b.stop()


def test_api_versions_and_describe_cluster(t):
    """ApiVersions lists what is served (the transaction APIs, and WriteTxnMarkers, which brokers
    of a cluster send each other); DescribeCluster v0 (what Java's AdminClient.describeCluster() sends) names
    this broker, at the address connected to."""
    b = serving_broker(t)
    apis = api_versions(b)
    for key, want in {0: (0, 9), 1: (4, 12), 3: (0, 12), 18: (0, 3), 22: (0, 4), 60: (0, 1),
                      24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 65: (0, 0), 66: (0, 0)}.items():
        if apis.get(key) != want:
            raise AssertionError(f"ApiVersions: API {key} listed as {apis.get(key)}, expected {want}")
    with connect(b) as s:
        s.sendall(request(60, 0, 77, body=b"\x00\x00", flexible=True))
        resp = recv_response(s)
    if resp is None:
        raise AssertionError("DescribeCluster v0: connection closed")
    r = Reader(resp)
    corr, tags, _throttle, err = r.take(">i"), r.take(">B"), r.take(">i"), r.take(">h")
    if corr != 77 or tags != 0 or err != 0:
        raise AssertionError(f"DescribeCluster v0: correlation {corr}, tags {tags}, error {err}")
    if r.take(">B") != 0:   # error_message: null
        raise AssertionError("DescribeCluster v0: error message set")
    n = r.take(">B") - 1
    cluster = r.d[r.p:r.p + n].decode()
    r.p += n
    controller, brokers = r.take(">i"), r.take(">B") - 1
    broker_id = r.take(">i")
    n = r.take(">B") - 1
    host = r.d[r.p:r.p + n].decode()
    r.p += n
    port = r.take(">i")
    if not cluster or controller != 0 or brokers != 1 or broker_id != 0 or (host, port) != ("127.0.0.1", b.port):
        raise AssertionError(f"DescribeCluster v0: cluster {cluster!r}, controller {controller}, {brokers} brokers, "
                             f"first {broker_id} at {host}:{port}")
    b.stop()


if __name__ == "__main__":
    broker.main([(test_oversized_frame, 120), (test_truncated_frames, 120), (test_garbage, 120),
                 (test_unknown_api_key, 120), (test_api_versions_unsupported_version, 120),
                 (test_produce_corrupt_crc, 120), (test_pipelined_large_and_small_produces, 120),
                 (test_api_versions_and_describe_cluster, 120)])
