#!/usr/bin/python3
"""`skiff serve` configuration (issue 16): the --config file, precedence, --print-config,
refusals at start and --check, against the real binary.

  - A config file with every key: --print-config reports each as coming from the file, and
    reads back as the same settings; a flag wins over SKIFF_*, which wins over the file. A
    broker started from a file listens where the file says and auto-creates topics with the
    file's partition count (seen by confluent-kafka).
  - The config file's errors: an unknown key ("unknown key 'foo' in FILE (line 3)"), a value
    of the wrong type, exit 2, one line.
  - --print-config masks a password in an etcd URL and never shows the AWS secret.
  - Refusals, each one line on stderr, a non-zero exit within seconds and no "serving" logged:
    a data directory that cannot be created, one that is not writable, one another running
    broker holds (its pid named), the Kafka or the HTTP port in use, contradictory flags; with
    S3 (the --store s3 run): a bucket that does not exist, a wrong secret, an unknown access key,
    an endpoint nobody listens on.
  - --check: "ok" lines and exit 0 on good settings (leaving no port bound and no lock held),
    the refusal's sentence and exit 1 otherwise.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

REFUSE_WITHIN_S = 10  # "within seconds": the S3 check's own deadline is 15 s, moto answers in ms


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIFF_")}
    env.update(extra or {})
    return env


def serve(t, *args, env=None, timeout=60, user=None):
    """Runs `skiff serve ARGS` to its end; returns (rc, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    kw = {"user": user} if user is not None else {}
    p = subprocess.run([t.skiff, "serve", *args], capture_output=True, text=True, timeout=timeout,
                       env=clean_env(env), cwd=t.workdir, stdin=subprocess.DEVNULL, **kw)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def local_args(t, data_dir=None):
    return ["--kafka-addr", f"127.0.0.1:{broker.free_port()}", "--http-addr", f"127.0.0.1:{broker.free_port()}",
            "--data-dir", data_dir or os.path.join(t.workdir, "data"), "--cores", "1"]


def expect_refusal(what, result, rc, sentence):
    """One line on stderr, equal to "skiff serve: " + sentence (or starting with it when
    sentence ends with "..."), exit status rc, within seconds, nothing served."""
    got_rc, out, err, secs = result
    lines = err.splitlines()
    prefix = sentence[:-3] if sentence.endswith("...") else None
    ok_text = (len(lines) == 1 and
               (lines[0].startswith("skiff serve: " + prefix) if prefix is not None
                else lines[0] == "skiff serve: " + sentence))
    if got_rc != rc or not ok_text:
        raise AssertionError(f"{what}: expected exit {rc} and 'skiff serve: {sentence}', got exit {got_rc}, "
                             f"stderr {err!r}, stdout {out[-300:]!r}")
    if secs > REFUSE_WITHIN_S:
        raise AssertionError(f"{what}: refused after {secs:.1f} s")
    if "serving" in out + err:
        raise AssertionError(f"{what}: the broker logged 'serving' before refusing: {out + err!r}")


# Every key with a valid, non-default value; S3's keys apart (they contradict data-dir).
EVERY_KEY = {
    "kafka-addr": '"127.0.0.1:19092"', "advertised-addr": '"broker.example:19092"',
    "http-addr": '"127.0.0.1:19644"', "data-dir": '"/var/lib/skiff"', "namespace": '"prod"',
    "upload-mode": '"sequential"', "flush-linger-ms": "5", "flush-interval-ms": "250",
    "segment-bytes": "1048576", "max-inflight-flushes": "3", "max-puts-per-second": "400",
    "hedge-after-ms": '"off"', "put-price-per-1000": "0.0045", "max-buffered-bytes": "268435456",
    "max-partition-buffered-bytes": "8388608", "max-cache-bytes": "134217728",
    "quota-produce-bytes-per-second": "1000000", "quota-fetch-bytes-per-second": "2000000",
    "client-quotas": '"app:produce=1M,fetch=2M"', "auto-create-topics": "false",
    "default-partitions": "6", "etcd": '"http://127.0.0.1:2379"', "node-id": "3", "broker-id": "3",
    "lease-ttl-s": "5", "rack": '"eu-west-1a"', "cores": "2", "max-frame-bytes": "33554432",
    "message-max-bytes": "2097152", "retention-ms": "86400000", "retention-bytes": "1073741824",
    "file-delete-delay-ms": "30000", "manifest-every-segments": "16", "time-index": "false", "merge-target-bytes": "16777216",
    "merge-age-ms": "300000", "compaction-interval-ms": "5000", "compaction-map-bytes": "1048576",
    "group-initial-rebalance-delay-ms": "100", "transaction-max-timeout-ms": "600000", "transactional-id-expiration-ms": "86400000", "log-level": '"warn"',
    "iceberg-topics": '"orders,clicks"', "iceberg-warehouse": '"lake/prod"', "iceberg-location-base": '"s3a://bucket"',
    "iceberg-partition-by": '"partition"', "iceberg-project": '"amount:double:$.amount;who:string:$.user.name"',
    "iceberg-commit-interval-ms": "5000",
    "sasl-mechanisms": '"SCRAM-SHA-512"', "max-reauth-ms": "60000", "failed-auth-delay-ms": "50",
    "authorizer": '"acl"', "super-users": '"User:admin"', "allow-everyone-if-no-acl-found": "true",
    "http-tls": "false", "tls-cert-file": '"/etc/skiff/cert.pem"', "tls-key-file": '"/etc/skiff/key.pem"',
    "tls-ca-file": '"/etc/skiff/ca.pem"', "tls-client-auth": '"requested"', "tls-min-version": '"TLSv1.3"',
}
# --listeners replaces --kafka-addr and --advertised-addr: they get a file of their own.
LISTENER_KEYS = {"listeners": '"PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19093"',
                 "advertised-listeners": '"SASL_PLAINTEXT://broker.example:19093"'}
S3_KEYS = {"s3-bucket": '"bucket/prefix"', "s3-endpoint": '"http://127.0.0.1:9"', "s3-region": '"eu-west-1"',
           "s3-path-style": "true"}


def settings_lines(text):
    """{key: (value, source)} of --print-config's non-comment lines."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, rest = line.split("=", 1)
        value, _, source = rest.partition("  # ")
        out[key.strip()] = (value.strip(), source.strip())
    return out


def test_config_file_with_every_key(t):
    # The flags --help lists are exactly the keys: a new flag needs a line above.
    h = subprocess.run([t.skiff, "serve", "--help"], capture_output=True, text=True, timeout=30, env=clean_env())
    flags = {line.split()[0][2:] for line in h.stdout.split("\nflags:\n", 1)[1].splitlines() if line.startswith("  --")}
    covered = set(EVERY_KEY) | set(S3_KEYS) | set(LISTENER_KEYS)
    if flags != covered:
        raise AssertionError(f"keys not covered: {sorted(flags ^ covered)}")
    path = os.path.join(t.workdir, "every.toml")
    with open(path, "w") as f:
        f.write("# every key of skiff serve\n")
        f.writelines(f"{k} = {v}\n" for k, v in EVERY_KEY.items())
    rc, out, err, _ = serve(t, "--config", path, "--print-config")
    if rc != 0:
        raise AssertionError(f"--print-config of a file with every key: exit {rc}: {err!r}")
    got = settings_lines(out)
    for k, v in EVERY_KEY.items():
        # Text settings print as strings, also those the file gave as numbers.
        want_value = f'"{v}"' if k in ("put-price-per-1000", "flush-linger-ms") else v
        if k not in got or not got[k][1].startswith(f"file {path} line "):
            raise AssertionError(f"{k}: not reported as from the file: {got.get(k)}")
        if got[k][0] != want_value:
            raise AssertionError(f"{k}: printed {got[k][0]}, the file says {v}")
    # What --print-config prints is a config file giving the same settings.
    again = os.path.join(t.workdir, "printed.toml")
    with open(again, "w") as f:
        f.write(out)
    rc, out2, err, _ = serve(t, "--config", again, "--print-config")
    if rc != 0 or {k: v for k, (v, _) in settings_lines(out2).items()} != {k: v for k, (v, _) in got.items()}:
        raise AssertionError(f"--print-config's output read back: exit {rc}, {err!r}")
    # The listener keys, with the same round trip.
    lp = os.path.join(t.workdir, "listeners.toml")
    with open(lp, "w") as f:
        f.writelines(f"{k} = {v}\n" for k, v in LISTENER_KEYS.items())
    rc, out, err, _ = serve(t, "--config", lp, "--print-config")
    got = settings_lines(out)
    if rc != 0 or any(got.get(k, ("", ""))[0] != v for k, v in LISTENER_KEYS.items()):
        raise AssertionError(f"listener keys from the file: exit {rc}, {err!r}, {got}")
    # S3's keys (no request is made by --print-config).
    s3 = os.path.join(t.workdir, "s3.toml")
    with open(s3, "w") as f:
        f.writelines(f"{k} = {v}\n" for k, v in S3_KEYS.items())
    rc, out, err, _ = serve(t, "--config", s3, "--print-config",
                            env={"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY000001", "AWS_SECRET_ACCESS_KEY": "s3cr3t"})
    got = settings_lines(out)
    if rc != 0 or any(got.get(k, ("", ""))[0] != v for k, v in S3_KEYS.items()):
        raise AssertionError(f"S3 keys from the file: exit {rc}, {err!r}, {got}")


def test_precedence_flag_env_file_default(t):
    path = os.path.join(t.workdir, "p.toml")
    with open(path, "w") as f:
        f.write("segment-bytes = 2048\ndefault-partitions = 4\nmax-inflight-flushes = 5\n")
    rc, out, err, _ = serve(t, "--config", path, "--print-config", "--max-inflight-flushes", "7",
                            env={"SKIFF_DEFAULT_PARTITIONS": "9", "SKIFF_MAX_INFLIGHT_FLUSHES": "8"})
    got = settings_lines(out)
    want = {"segment-bytes": ("2048", f"file {path} line 1"),
            "default-partitions": ("9", "env SKIFF_DEFAULT_PARTITIONS"),
            "max-inflight-flushes": ("7", "flag"),
            "upload-mode": ('"parallel"', "default")}
    if rc != 0 or any(got.get(k) != v for k, v in want.items()):
        raise AssertionError(f"precedence: exit {rc}, {err!r}, got {[(k, got.get(k)) for k in want]}")
    # SKIFF_CONFIG names the file too.
    rc, out, err, _ = serve(t, "--print-config", env={"SKIFF_CONFIG": path})
    if rc != 0 or settings_lines(out).get("segment-bytes") != ("2048", f"file {path} line 1"):
        raise AssertionError(f"SKIFF_CONFIG: exit {rc}, {err!r}")


def test_broker_runs_from_a_config_file(t):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    port, http_port = broker.free_port(), broker.free_port()
    path = os.path.join(t.workdir, "skiff.toml")
    with open(path, "w") as f:
        f.write(f'kafka-addr = "127.0.0.1:{port}"\nhttp-addr = "127.0.0.1:{http_port}"\n'
                f'data-dir = "{os.path.join(t.workdir, "from-file")}"\ndefault-partitions = 3\ncores = 1\n'
                'group-initial-rebalance-delay-ms = 0\n')
    b = t.broker(start=False, extra_args=["--config", path])
    b.args = lambda: [t.skiff, "serve", "--config", path]
    b.port, b.http_port = port, http_port
    b.env = clean_env()
    b.start()
    topic = t.topic()
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(topic, b"v")
    if p.flush(30) != 0:
        raise AssertionError("the produce to an auto-created topic was not acknowledged")
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(topic=topic, timeout=10)
    n = len(md.topics[topic].partitions)
    if n != 3:
        raise AssertionError(f"default-partitions = 3 in the file: the topic has {n} partitions")
    if not os.path.isdir(os.path.join(t.workdir, "from-file", "default")):
        raise AssertionError("data-dir from the file was not used")
    b.stop()


def test_config_file_errors(t):
    path = os.path.join(t.workdir, "skiff.toml")
    with open(path, "w") as f:
        f.write("# a typo on line 3\nsegment-bytes = 2048\nfoo = 1\n")
    expect_refusal("unknown key", serve(t, "--config", path, *local_args(t)), 2,
                   f"unknown key 'foo' in {path} (line 3)")
    with open(path, "w") as f:
        f.write("segment-bytes = \"big\"\n")
    expect_refusal("wrong type", serve(t, "--config", path, *local_args(t)), 2,
                   f"key 'segment-bytes' in {path} (line 1) must be an integer, not a string")
    with open(path, "w") as f:
        f.write("segment-bytes = 10\n")
    expect_refusal("out of range", serve(t, "--config", path, *local_args(t)), 2,
                   f"--segment-bytes must be an integer from 1024 to 1073741824, not '10' (from {path} line 1)")
    expect_refusal("missing file", serve(t, "--config", path + ".missing", *local_args(t)), 2,
                   f"cannot read the config file '{path}.missing': No such file or directory")


def test_print_config_masks_secrets(t):
    rc, out, err, _ = serve(t, "--print-config", "--s3-bucket", "b", "--s3-endpoint", "http://127.0.0.1:9",
                            env={"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY000001",
                                 "AWS_SECRET_ACCESS_KEY": "very-secret-value-123",
                                 "AWS_SESSION_TOKEN": "session-token-value-456",
                                 "SKIFF_ETCD": "http://root:etcd-pass-789@127.0.0.1:2379",
                                 "SKIFF_ADVERTISED_ADDR": "127.0.0.1:9092"})
    if rc != 0:
        raise AssertionError(f"--print-config: exit {rc}: {err!r}")
    for secret in ("very-secret-value-123", "session-token-value-456", "etcd-pass-789", "EXAMPLEKEY0000"):
        if secret in out + err:
            raise AssertionError(f"--print-config shows {secret!r}: {out}")
    got = [line for line in out.splitlines() if line.startswith("etcd ")]
    if not got or '"http://root:****@127.0.0.1:2379"' not in got[0] or "password masked" not in got[0]:
        raise AssertionError(f"etcd's password is not masked as expected: {got}")
    if "# S3 credentials: " not in out:
        raise AssertionError(f"--print-config does not describe the S3 credentials: {out}")


def test_data_dir_cannot_be_created(t):
    blocker = os.path.join(t.workdir, "a-file")
    with open(blocker, "w") as f:
        f.write("x")
    d = os.path.join(blocker, "data")
    expect_refusal("data dir under a file", serve(t, *local_args(t, d)), 1,
                   f"cannot create the data directory {d}: Not a directory")


def test_data_dir_not_writable(t):
    # Root writes anywhere: run the broker as nobody then (the binary is world-executable).
    base = tempfile.mkdtemp(prefix="skiff-ro-")
    t.cleanups.append(lambda: (os.chmod(d, 0o755), __import__("shutil").rmtree(base)))
    os.chmod(base, 0o755)
    d = os.path.join(base, "data")
    os.mkdir(d)
    os.chmod(d, 0o555)
    user = 65534 if os.geteuid() == 0 else None
    expect_refusal("read-only data dir", serve(t, *local_args(t, d), user=user), 1,
                   f"the data directory {d} is not writable: Permission denied")


def test_data_dir_locked_by_a_running_broker(t):
    b = t.broker()
    args = local_args(t, b.data_dir)
    expect_refusal("second broker on one directory", serve(t, *args), 1,
                   f"the data directory {os.path.abspath(b.data_dir)} is in use by another skiff broker "
                   f"(pid {b.proc.pid}); stop it or give another --data-dir")
    expect_refusal("--check on a locked directory", serve(t, "--check", *args), 1,
                   f"the data directory {os.path.abspath(b.data_dir)} is in use by another skiff broker...")
    # Gone with its broker: the second one starts now.
    b.stop()
    second = t.broker(start=False)
    second.data_dir = b.data_dir
    second.start()
    second.stop()


def test_ports_in_use(t):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        busy = s.getsockname()[1]
        args = local_args(t)
        args[1] = f"127.0.0.1:{busy}"
        expect_refusal("Kafka port in use", serve(t, *args), 1,
                       f"cannot listen on 127.0.0.1:{busy} (--kafka-addr): the port is in use by another process")
        args = local_args(t)
        args[3] = f"127.0.0.1:{busy}"
        expect_refusal("HTTP port in use", serve(t, *args), 1,
                       f"cannot listen on 127.0.0.1:{busy} (--http-addr): the port is in use by another process")
        expect_refusal("--check with the HTTP port in use", serve(t, "--check", *args), 1,
                       f"cannot listen on 127.0.0.1:{busy} (--http-addr): the port is in use by another process")


def test_contradictory_flags(t):
    expect_refusal("data dir and bucket", serve(t, *local_args(t), "--s3-bucket", "b"), 2,
                   "--data-dir and --s3-bucket both choose where the log is kept; give one of them")
    expect_refusal("node id and broker id", serve(t, *local_args(t), "--node-id", "1", "--broker-id", "2"), 2,
                   "--node-id 1 and --broker-id 2 name one id differently; give one of them")
    args = local_args(t)
    args[3] = args[1].replace("127.0.0.1", "0.0.0.0")
    expect_refusal("one port for Kafka and HTTP", serve(t, *args), 2,
                   f"--kafka-addr ({args[1]}) and --http-addr ({args[3]}) are the same port; give them different ports")
    expect_refusal("rack without etcd", serve(t, *local_args(t), "--rack", "r1"), 2,
                   "--rack is a cluster mode setting and needs --etcd")
    path = os.path.join(t.workdir, "c.toml")
    with open(path, "w") as f:
        f.write('data-dir = "/tmp/x"\ns3-bucket = "b"\n')
    expect_refusal("data dir and bucket, both from the file", serve(t, "--config", path, "--kafka-addr", "127.0.0.1:0"),
                   2, f"--data-dir (from {path} line 1) and --s3-bucket (from {path} line 2) both choose where the log "
                   "is kept; give one of them")


def test_check_passes_and_releases(t):
    args = local_args(t)
    for attempt in (1, 2):  # the second run finds the ports free and the directory unlocked again
        rc, out, err, secs = serve(t, "--check", *args)
        lines = out.splitlines()
        heads = [line.split()[1] for line in lines if line.startswith("ok ")]
        if rc != 0 or heads != ["settings", "kafka-addr", "http-addr", "data-dir", "all"] or err:
            raise AssertionError(f"--check #{attempt}: exit {rc}, stdout {out!r}, stderr {err!r}")
        if "serving" in out + err or secs > REFUSE_WITHIN_S:
            raise AssertionError(f"--check #{attempt} served or took {secs:.1f} s")
    b = t.broker(start=False)
    b.data_dir = args[5]
    b.port = int(args[1].rsplit(":", 1)[1])
    b.http_port = int(args[3].rsplit(":", 1)[1])
    b.start()
    b.stop()


def s3_args(t, bucket=None):
    return ["--kafka-addr", "127.0.0.1:0", "--http-addr", "off", "--s3-bucket", bucket or os.environ["S3_BUCKET"],
            "--s3-endpoint", os.environ["S3_ENDPOINT"], "--s3-path-style", "--namespace", f"cfg-{os.getpid()}"]


def test_s3_refusals(t):
    expect_refusal("missing bucket", serve(t, *s3_args(t, "no-such-bucket-here")), 1,
                   "cannot read the store s3://no-such-bucket-here: no such bucket 'no-such-bucket-here'...")
    r = serve(t, *s3_args(t), env={"AWS_SECRET_ACCESS_KEY": "wrong-secret-xyz"})
    expect_refusal("wrong secret", r, 1, f"cannot read the store s3://{os.environ['S3_BUCKET']}: signature rejected "
                   "by S3 (SignatureDoesNotMatch): check the secret access key...")
    if "wrong-secret-xyz" in r[1] + r[2]:
        raise AssertionError("the secret appears in the output")
    expect_refusal("unknown access key", serve(t, *s3_args(t), env={"AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}),
                   1, f"cannot read the store s3://{os.environ['S3_BUCKET']}: access denied (InvalidAccessKeyId)...")
    args = s3_args(t)
    args[args.index("--s3-endpoint") + 1] = "http://127.0.0.1:1"
    expect_refusal("unreachable endpoint", serve(t, *args), 1,
                   f"cannot read the store s3://{os.environ['S3_BUCKET']}: cannot connect to 127.0.0.1:1...")
    expect_refusal("--check, missing bucket", serve(t, "--check", *s3_args(t, "no-such-bucket-here")), 1,
                   "cannot read the store s3://no-such-bucket-here: no such bucket 'no-such-bucket-here'...")
    rc, out, err, _ = serve(t, "--check", *s3_args(t))
    heads = [line.split()[1] for line in out.splitlines() if line.startswith("ok ")]
    if rc != 0 or heads != ["settings", "kafka-addr", "s3-bucket", "all"]:
        raise AssertionError(f"--check on the bucket: exit {rc}, stdout {out!r}, stderr {err!r}")


LOCAL = {"local"}
if __name__ == "__main__":
    broker.main([
        (test_config_file_with_every_key, 60, LOCAL),
        (test_precedence_flag_env_file_default, 60, LOCAL),
        (test_broker_runs_from_a_config_file, 90, LOCAL),
        (test_config_file_errors, 60, LOCAL),
        (test_print_config_masks_secrets, 60, LOCAL),
        (test_data_dir_cannot_be_created, 60, LOCAL),
        (test_data_dir_not_writable, 60, LOCAL),
        (test_data_dir_locked_by_a_running_broker, 90, LOCAL),
        (test_ports_in_use, 60, LOCAL),
        (test_contradictory_flags, 60, LOCAL),
        (test_check_passes_and_releases, 60, LOCAL),
        (test_s3_refusals, 90, {"s3"}),
    ])
