#!/usr/bin/python3
"""`skiff topic ...` and `skiff cluster info` (issue 16) against a running `skiff serve`, with
their tables, --json and exit codes checked, and cross-checked with confluent-kafka's
AdminClient (librdkafka: another implementation of the same protocol):

  - topic lifecycle: `topic create -p 3 -c retention.ms=...` is seen by confluent-kafka with 3
    partitions and the config; `topic list`/`describe` (table and --json) show it, its
    partitions' leader and epoch and the config's source; creating it again is exit 1 with
    "topic 'x' already exists (TOPIC_ALREADY_EXISTS)" (0 with --if-not-exists); add-partitions
    --total 5 is seen by confluent-kafka, --total 2 is INVALID_PARTITIONS; alter-config --set
    and --delete are seen by confluent-kafka's describe_configs, an unknown key is
    INVALID_CONFIG; a topic created by confluent-kafka is listed; delete removes it for
    confluent-kafka too, and deleting it again says it does not exist.
  - cluster info: the cluster id, the controller (--node-id 3), the broker's host:port and the
    topic count, as a table and as JSON.
  - flags and exit codes: SKIFF_BROKERS instead of --brokers; a closed port is exit 3 with
    "cannot connect to ...: connection refused"; a server that never answers is exit 3 within
    the --timeout-ms budget; one that answers with HTTP is exit 4; a missing argument is exit 2;
    --help names the exit codes and the environment variables.

    test_cli.py --skiff build/src/cli/skiff [--store local] [-k NAME]
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402


def skiff(t, b, *args, env=None, brokers=True, timeout=30):
    """Runs `skiff ARGS --brokers b` and returns (exit status, stdout, stderr)."""
    cmd = [t.skiff, *args]
    if brokers and b is not None:
        cmd += ["--brokers", b.bootstrap]
    e = dict(os.environ)
    for k in ("SKIFF_BROKERS", "SKIFF_JSON", "SKIFF_TIMEOUT_MS", "SKIFF_CLIENT_ID"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    t.log(f"$ skiff {' '.join(args)} -> {p.returncode}")
    return p.returncode, p.stdout, p.stderr


def ok(t, b, *args, **kw):
    rc, out, err = skiff(t, b, *args, **kw)
    if rc != 0:
        raise AssertionError(f"skiff {' '.join(args)}: exit {rc}, stderr: {err.strip()}")
    return out


def fails(t, b, code, *args, **kw):
    rc, out, err = skiff(t, b, *args, **kw)
    if rc != code:
        raise AssertionError(f"skiff {' '.join(args)}: exit {rc}, expected {code}; stdout {out!r} stderr {err!r}")
    lines = err.strip().splitlines()
    if code != 2 and len(lines) != 1:
        raise AssertionError(f"skiff {' '.join(args)}: expected one sentence on stderr, got {err!r}")
    return err.strip()


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def partitions_seen(a, topic):
    # Every topic: asking for one by name would auto-create it (librdkafka allows that).
    md = a.list_topics(timeout=10)
    tm = md.topics.get(topic)
    if tm is None or tm.error is not None:
        return None
    return len(tm.partitions)


def configs_seen(a, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in a.describe_configs([res])[res].result(30).items()}


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def test_topic_lifecycle(t):
    b = t.broker()
    a = admin(b)
    topic = t.topic("cli")

    # The name after repeated -c: each -c takes one value, not the name too.
    out = ok(t, b, "topic", "create", "-c", "retention.ms=3600000", "-c", "cleanup.policy=compact", topic, "-p", "3")
    expect(out.strip() == f"created topic '{topic}' (3 partitions)", f"create printed {out!r}")
    expect(partitions_seen(a, topic) == 3, "confluent-kafka does not see 3 partitions")
    cfg = configs_seen(a, topic)
    expect(cfg.get("retention.ms") == "3600000" and cfg.get("cleanup.policy") == "compact",
           f"confluent-kafka sees configs {cfg}")

    err = fails(t, b, 1, "topic", "create", topic)
    expect(err == f"skiff topic create: topic '{topic}' already exists (TOPIC_ALREADY_EXISTS)", err)
    out = ok(t, b, "topic", "create", topic, "--if-not-exists", "--json")
    expect(json.loads(out) == {"name": topic, "created": False, "dry_run": False}, out)
    err = fails(t, b, 1, "topic", "create", t.topic("bad"), "-c", "no.such.config=1")
    expect("INVALID_CONFIG" in err, err)

    # A topic made by confluent-kafka shows up in skiff's list.
    other = t.topic("ck")
    a.create_topics([NewTopic(other, num_partitions=2, replication_factor=1)])[other].result(30)

    out = ok(t, b, "topic", "list")
    lines = out.splitlines()
    expect(lines[0].split() == ["TOPIC", "PARTITIONS", "REPLICAS"], f"list header {lines[0]!r}")
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    expect(rows.get(topic) == ["3", "1"] and rows.get(other) == ["2", "1"], f"list rows {rows}")
    listed = {e["name"]: e for e in json.loads(ok(t, b, "topic", "list", "--json"))}
    expect(listed[topic]["partitions"] == 3 and listed[other]["partitions"] == 2, f"list --json {listed}")

    d = json.loads(ok(t, b, "topic", "describe", topic, "--json"))
    expect([p["partition"] for p in d["partitions"]] == [0, 1, 2], f"describe partitions {d['partitions']}")
    expect(all(p["leader"] == 0 and p["leader_epoch"] >= 0 and p["replicas"] == [0] for p in d["partitions"]),
           f"describe partitions {d['partitions']}")
    cfgs = {c["name"]: c for c in d["configs"]}
    expect(cfgs["retention.ms"]["value"] == "3600000" and cfgs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG",
           f"retention.ms {cfgs.get('retention.ms')}")
    expect(cfgs["segment.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG", f"segment.bytes {cfgs.get('segment.bytes')}")
    table = ok(t, b, "topic", "describe", topic)
    expect("PARTITION  LEADER  EPOCH" in table, table)
    expect(any(ln.split()[:3] == ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"] for ln in table.splitlines()),
           table)

    out = ok(t, b, "topic", "add-partitions", topic, "--total", "5")
    expect(out.strip() == f"topic '{topic}' now has 5 partitions", out)
    broker.wait_until(lambda: partitions_seen(a, topic) == 5, 10, "confluent-kafka to see 5 partitions")
    err = fails(t, b, 1, "topic", "add-partitions", topic, "--total", "2")
    expect("INVALID_PARTITIONS" in err and err.startswith(f"skiff topic add-partitions: topic '{topic}': "), err)

    ok(t, b, "topic", "alter-config", topic, "--set", "retention.ms=1000", "--delete", "cleanup.policy")
    cfg = configs_seen(a, topic)
    expect(cfg.get("retention.ms") == "1000" and cfg.get("cleanup.policy") == "delete",
           f"after alter-config confluent-kafka sees {cfg}")
    err = fails(t, b, 1, "topic", "alter-config", topic, "--set", "no.such.config=1")
    expect("INVALID_CONFIG" in err, err)

    out = ok(t, b, "topic", "delete", topic, other)
    expect(sorted(out.splitlines()) == sorted([f"deleted topic '{topic}'", f"deleted topic '{other}'"]), out)
    broker.wait_until(lambda: partitions_seen(a, topic) is None, 10, "confluent-kafka to miss the topic")
    err = fails(t, b, 1, "topic", "delete", topic)
    expect(err == f"skiff topic delete: topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)", err)
    err = fails(t, b, 1, "topic", "describe", topic)
    expect(err == f"skiff topic describe: topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)", err)


def test_cluster_info(t):
    b = t.broker(extra_args=["--node-id", "3"])
    for i in range(2):
        ok(t, b, "topic", "create", t.topic(f"c{i}"))
    info = json.loads(ok(t, b, "cluster", "info", "--json"))
    expect(info["controller_id"] == 3 and info["topics"] == 2 and info["cluster_id"], f"cluster info {info}")
    expect(info["brokers"] == [{"id": 3, "host": "127.0.0.1", "port": b.port, "rack": None, "controller": True}],
           f"brokers {info['brokers']}")
    table = ok(t, b, "cluster", "info").splitlines()
    expect(table[0].split() == ["CLUSTER", "CONTROLLER", "BROKERS", "TOPICS"], table)
    expect(table[1].split() == [info["cluster_id"], "3", "1", "2"], table)
    expect(table[4].split() == ["3", f"127.0.0.1:{b.port}", "-", "yes"], table)


def serve_once(answer):
    """A TCP server on a free port that reads a request and answers `answer` (None: never),
    until its client goes; returns the port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def run():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                try:
                    c.recv(65536)
                    if answer is not None:
                        c.sendall(answer)
                    while c.recv(65536):
                        pass
                except OSError:
                    pass

    threading.Thread(target=run, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_flags_and_exit_codes(t):
    b = t.broker()
    topic = t.topic("env")
    ok(t, None, "topic", "create", topic, env={"SKIFF_BROKERS": b.bootstrap})
    listed = json.loads(ok(t, None, "topic", "list", env={"SKIFF_BROKERS": b.bootstrap, "SKIFF_JSON": "1"}))
    expect(any(e["name"] == topic for e in listed), f"SKIFF_JSON list {listed}")

    closed = broker.free_port()
    err = fails(t, None, 3, "topic", "list", "--brokers", f"127.0.0.1:{closed}")
    expect(err == f"skiff topic list: cannot connect to 127.0.0.1:{closed}: connection refused", err)

    srv, silent = serve_once(None)
    t0 = time.monotonic()
    err = fails(t, None, 3, "cluster", "info", "--brokers", f"127.0.0.1:{silent}", "--timeout-ms", "500")
    took = time.monotonic() - t0
    srv.close()
    expect("did not answer ApiVersions within 500 ms" in err, err)
    expect(took < 5, f"a silent broker took {took:.1f} s to give up on")

    srv, http = serve_once(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    err = fails(t, None, 4, "topic", "list", "--brokers", f"127.0.0.1:{http}")
    srv.close()
    expect("is it a Kafka port?" in err, err)

    fails(t, b, 2, "topic", "create")                       # no name
    fails(t, b, 2, "topic", "frobnicate")                   # no such subcommand
    fails(t, b, 2, "topic", "add-partitions", topic)        # --total missing
    help_text = ok(t, None, "topic", "create", "--help")
    for word in ("Exit status", "SKIFF_BROKERS", "SKIFF_TIMEOUT_MS", "--partitions", "--config"):
        expect(word in help_text, f"`skiff topic create --help` lacks {word!r}:\n{help_text}")


if __name__ == "__main__":
    broker.main([(test_topic_lifecycle, 60), (test_cluster_info, 60), (test_flags_and_exit_codes, 60)])
