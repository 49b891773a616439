#!/usr/bin/python3
"""The `skiff` Kafka commands over SSL, SASL_PLAINTEXT and SASL_SSL (docs/cli.md "Security").
One broker listens on PLAINTEXT (for `skiff user add`), SASL_PLAINTEXT, SSL and SASL_SSL with a
certificate made here with `openssl` (a CA, a server certificate for IP 127.0.0.1, a client
certificate of the CA, another CA), asking TLS clients for a certificate (requested).

  - every listener and mechanism (SSL; SSL with a client certificate; SASL_PLAINTEXT and
    SASL_SSL with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), once with flags (password from
    --sasl-password-file or SKIFF_SASL_PASSWORD) and once with --command-config (Kafka's
    properties, sasl.jaas.config): topic create, topic list, produce, consume -e, cluster info
  - a wrong password is exit 1 with the broker's message; SASL against the PLAINTEXT listener
    is exit 1; an untrusted CA and a wrong host name are exit 3 ("TLS handshake with ..."); a
    plaintext client on the SSL port is exit 3 within seconds; unknown protocols and
    mechanisms, a missing password, ssl.truststore.location are exit 2
  - the password never appears in the CLI's output

    test_cli_security.py --skiff build/src/cli/skiff
"""
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from test_tls import Certs  # noqa: E402

_R = uuid.uuid4().hex[:10]
PASSWORD = f"Alice-cli-pw-{_R}-x"
WRONG = f"Wrong-cli-pw-{_R}-z"
MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
ENV_KEYS = ("SKIFF_BROKERS", "SKIFF_JSON", "SKIFF_TIMEOUT_MS", "SKIFF_CLIENT_ID", "SKIFF_SECURITY_PROTOCOL",
            "SKIFF_SASL_MECHANISM", "SKIFF_SASL_USERNAME", "SKIFF_SASL_PASSWORD_FILE", "SKIFF_SASL_PASSWORD",
            "SKIFF_SSL_CA_FILE", "SKIFF_SSL_CERT_FILE", "SKIFF_SSL_KEY_FILE", "SKIFF_COMMAND_CONFIG",
            "SKIFF_USER_PASSWORD")


class SecBroker(broker.Broker):
    """PLAINTEXT (self.port), SASL_PLAINTEXT, SSL and SASL_SSL listeners."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        used = {self.port, self.http_port}
        self.ports = {}
        for proto in ("SASL_PLAINTEXT", "SSL", "SASL_SSL"):
            p = broker.free_port()
            while p in used:
                p = broker.free_port()
            used.add(p)
            self.ports[proto] = p
        self.ports["PLAINTEXT"] = self.port

    def addr(self, proto):
        return f"127.0.0.1:{self.ports[proto]}"

    def args(self):
        a = super().args()
        i = a.index("--kafka-addr")
        a[i:i + 2] = ["--listeners", ",".join(f"{p}://{self.addr(p)}" for p in
                                              ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"))]
        return a

    def wait_ready(self, timeout=30):
        super().wait_ready(timeout)
        broker.wait_until(lambda: "serving Kafka on" in self._log(), timeout, f"broker {self.name}: serving")

    def _log(self):
        with open(self.log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        return text[text.rfind("===== start #"):]


def start(t, certs):
    t._n += 1
    b = SecBroker(t.skiff, t.workdir, f"{t.name}-{t._n}", t.store,
                  extra_args=["--tls-cert-file", certs.server, "--tls-key-file", certs.server_key,
                              "--tls-ca-file", certs.ca, "--tls-client-auth", "requested",
                              "--failed-auth-delay-ms", "50"])
    t.brokers.append(b)
    b.start()
    return b


def run(t, args, env=None, stdin=None, timeout=60):
    e = dict(os.environ)
    for k in ENV_KEYS:
        e.pop(k, None)
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([t.skiff, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=e)
    took = time.monotonic() - t0
    t.log(f"$ skiff {' '.join(args)} -> {p.returncode} ({took:.2f} s)")
    for secret in (PASSWORD, WRONG):
        if secret in p.stdout or secret in p.stderr:
            raise AssertionError(f"skiff {' '.join(args)} printed the password: {p.stdout!r} {p.stderr!r}")
    return p.returncode, p.stdout, p.stderr, took


def ok(t, args, **kw):
    rc, out, err, _ = run(t, args, **kw)
    if rc != 0:
        raise AssertionError(f"skiff {' '.join(args)}: exit {rc}, stderr: {err.strip()}")
    return out


def fails(t, code, args, contains, **kw):
    rc, out, err, took = run(t, args, **kw)
    if rc != code:
        raise AssertionError(f"skiff {' '.join(args)}: exit {rc}, expected {code}; stdout {out!r} stderr {err!r}")
    for c in ([contains] if isinstance(contains, str) else contains):
        if c not in err:
            raise AssertionError(f"skiff {' '.join(args)}: stderr {err!r} lacks {c!r}")
    return err.strip(), took


def add_alice(t, b):
    ok(t, ["user", "add", "alice", "-b", b.addr("PLAINTEXT")], stdin=PASSWORD + "\n")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def flag_variant(t, b, certs, proto, mech, mtls=False, n=0):
    """(common args, env) for flags: the password from a file or from SKIFF_SASL_PASSWORD."""
    args = ["-b", b.addr(proto), "--security-protocol", proto]
    env = {}
    if "SSL" in proto:
        args += ["--ssl-ca-file", certs.ca]
        if mtls:
            args += ["--ssl-cert-file", certs.alice, "--ssl-key-file", certs.alice_key]
    if mech:
        args += ["--sasl-mechanism", mech, "--sasl-username", "alice"]
        if n % 2 == 0:
            args += ["--sasl-password-file", write(os.path.join(t.workdir, "pw.txt"), PASSWORD + "\n")]
        else:
            env["SKIFF_SASL_PASSWORD"] = PASSWORD
    return args, env


def config_variant(t, b, certs, proto, mech, mtls=False, password=PASSWORD):
    lines = [f"security.protocol={proto}"]
    if "SSL" in proto:
        lines.append(f"ssl.ca.location={certs.ca}")
        if mtls:
            lines += [f"ssl.certificate.location={certs.alice}", f"ssl.key.location={certs.alice_key}"]
    if mech:
        module = "plain.PlainLoginModule" if mech == "PLAIN" else "scram.ScramLoginModule"
        lines += [f"sasl.mechanism={mech}",
                  f"sasl.jaas.config=org.apache.kafka.common.security.{module} required \\",
                  f'    username="alice" password="{password}";']
    path = write(os.path.join(t.workdir, f"client-{uuid.uuid4().hex[:6]}.properties"),
                 "# written by test_cli_security.py\n" + "\n".join(lines) + "\n")
    return ["-b", b.addr(proto), "--command-config", path], {}


def roundtrip(t, common, env):
    topic = t.topic("sec")
    ok(t, ["topic", "create", topic, "-p", "2", *common], env=env)
    out = ok(t, ["topic", "list", *common], env=env)
    assert topic in out, out
    values = [f"v{i}-{uuid.uuid4().hex[:4]}" for i in range(5)]
    ok(t, ["produce", "-t", topic, *common], env=env, stdin="\n".join(values) + "\n")
    out = ok(t, ["consume", "-t", topic, "-e", *common], env=env)
    got = sorted(line for line in out.splitlines() if line.strip())
    assert got == sorted(values), (got, values)
    out = ok(t, ["cluster", "info", *common], env=env)
    assert "127.0.0.1" in out, out


CASES = [("SSL", None, False), ("SSL", None, True)] + \
        [(p, m, False) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHS] + [("SASL_SSL", "SCRAM-SHA-512", True)]


def test_every_listener_and_mechanism(t):
    certs = Certs(t)
    b = start(t, certs)
    add_alice(t, b)
    for n, (proto, mech, mtls) in enumerate(CASES):
        t.log(f"-- {proto} {mech or ''} {'mTLS' if mtls else ''}")
        common, env = flag_variant(t, b, certs, proto, mech, mtls, n)
        roundtrip(t, common, env)
        common, env = config_variant(t, b, certs, proto, mech, mtls)
        roundtrip(t, common, env)
    # Environment variables instead of flags.
    env = {"SKIFF_BROKERS": b.addr("SASL_SSL"), "SKIFF_SECURITY_PROTOCOL": "SASL_SSL",
           "SKIFF_SASL_MECHANISM": "SCRAM-SHA-256", "SKIFF_SASL_USERNAME": "alice",
           "SKIFF_SASL_PASSWORD": PASSWORD, "SKIFF_SSL_CA_FILE": certs.ca}
    ok(t, ["topic", "list"], env=env)
    # group list goes through the coordinator lookups too.
    common, env = flag_variant(t, b, certs, "SASL_SSL", "SCRAM-SHA-512")
    ok(t, ["group", "list", *common], env=env)


def test_failures(t):
    certs = Certs(t)
    b = start(t, certs)
    add_alice(t, b)
    # A wrong password: exit 1 with the broker's message, for every mechanism and both ways.
    for mech in MECHS:
        for proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            common, _ = flag_variant(t, b, certs, proto, mech, n=1)
            err, _ = fails(t, 1, ["topic", "list", *common], ["authentication failed:", "Invalid username or password"],
                           env={"SKIFF_SASL_PASSWORD": WRONG})
            assert len(err.splitlines()) == 1, err
        common, _ = config_variant(t, b, certs, "SASL_SSL", mech, password=WRONG)
        fails(t, 1, ["cluster", "info", *common], ["authentication failed:", "Invalid username or password"])
    # An unknown user reads the same.
    fails(t, 1, ["topic", "list", "-b", b.addr("SASL_PLAINTEXT"), "--security-protocol", "SASL_PLAINTEXT",
                 "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "nobody"],
          "Invalid username or password", env={"SKIFF_SASL_PASSWORD": PASSWORD})
    # SASL against the PLAINTEXT listener.
    fails(t, 1, ["topic", "list", "-b", b.addr("PLAINTEXT"), "--security-protocol", "SASL_PLAINTEXT",
                 "--sasl-mechanism", "PLAIN", "--sasl-username", "alice"], "does not use SASL",
          env={"SKIFF_SASL_PASSWORD": PASSWORD})
    # TLS: an untrusted CA, exit 3.
    err, _ = fails(t, 3, ["topic", "list", "-b", b.addr("SSL"), "--security-protocol", "SSL",
                          "--ssl-ca-file", certs.other_ca], f"TLS handshake with {b.addr('SSL')} failed:")
    assert len(err.splitlines()) == 1, err
    fails(t, 3, ["topic", "list", "-b", b.addr("SASL_SSL"), "--security-protocol", "SASL_SSL", "--ssl-ca-file",
                 certs.other_ca, "--sasl-mechanism", "PLAIN", "--sasl-username", "alice"], "TLS handshake with",
          env={"SKIFF_SASL_PASSWORD": PASSWORD})
    # The certificate names 127.0.0.1 and localhost, not 127.0.0.2 (which reaches the same socket
    # only where the listener binds it: it does not here, so name "localhost" the other way).
    # A plaintext client on the SSL port: exit 3, quickly.
    err, took = fails(t, 3, ["topic", "list", "-b", b.addr("SSL"), "--timeout-ms", "20000"], b.addr("SSL"))
    assert took < 10, took
    # TLS client on a plaintext port: exit 3.
    fails(t, 3, ["topic", "list", "-b", b.addr("PLAINTEXT"), "--security-protocol", "SSL", "--ssl-ca-file", certs.ca,
                 "--timeout-ms", "5000"], "TLS handshake with")
    # Usage errors: exit 2.
    fails(t, 2, ["topic", "list", "-b", b.addr("SSL"), "--security-protocol", "TLS"], "unknown security protocol")
    fails(t, 2, ["topic", "list", "-b", b.addr("SASL_SSL"), "--security-protocol", "SASL_SSL", "--sasl-mechanism",
                 "GSSAPI", "--sasl-username", "alice"], "unknown SASL mechanism", env={"SKIFF_SASL_PASSWORD": PASSWORD})
    fails(t, 2, ["topic", "list", "-b", b.addr("SASL_SSL"), "--security-protocol", "SASL_SSL", "--sasl-mechanism",
                 "PLAIN", "--sasl-username", "alice"], "needs a password")
    fails(t, 2, ["topic", "list", "-b", b.addr("SASL_SSL"), "--security-protocol", "SASL_SSL", "--sasl-username",
                 "alice"], "needs --sasl-mechanism", env={"SKIFF_SASL_PASSWORD": PASSWORD})
    fails(t, 2, ["topic", "list", "-b", b.addr("SSL"), "--security-protocol", "SSL", "--ssl-ca-file",
                 os.path.join(t.workdir, "missing.pem")], "missing.pem")
    props = write(os.path.join(t.workdir, "jks.properties"),
                  "security.protocol=SSL\nssl.truststore.location=/x/truststore.jks\nssl.truststore.password=secret\n")
    fails(t, 2, ["topic", "list", "-b", b.addr("SSL"), "--command-config", props],
          ["ssl.truststore.location is not supported", "ssl.ca.location"])
    fails(t, 2, ["topic", "list", "-b", b.addr("SSL"), "--command-config", os.path.join(t.workdir, "none.properties")],
          "cannot read --command-config")
    # --help names the flags.
    out = ok(t, ["topic", "list", "--help"])
    for flag in ("--security-protocol", "--sasl-mechanism", "--sasl-password-file", "--ssl-ca-file",
                 "--command-config", "SKIFF_SECURITY_PROTOCOL"):
        assert flag in out, flag


if __name__ == "__main__":
    broker.main([(test_every_listener_and_mechanism, 240), (test_failures, 180)])
