"""Harness for the client tests: starts and stops `skiff serve`, runs test functions.

Standard library only, so it works with any python3; the tests that use confluent_kafka need
Debian's /usr/bin/python3 (python3-confluent-kafka), which is what their shebang names.

A test file does

    import broker
    def test_something(t):            # t: broker.TestContext
        b = t.broker()                # started, Kafka port accepting connections
        ... b.bootstrap ...           # "127.0.0.1:PORT"
        b.stop()                      # SIGTERM, asserts exit status 0
        b.start()                     # same store, same ports
    broker.main([test_something])

and is run as  test_x.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
With --store s3 the S3 settings come from with-s3.sh (S3_ENDPOINT, S3_BUCKET, AWS_*); every
broker gets its own --namespace, so tests never see each other's data. Each test has a time
limit; a failure prints the test's broker logs. Brokers are stopped when a test ends, however
it ends (and the kernel kills them if this process dies: PR_SET_PDEATHSIG).
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
import uuid

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


_handed_out = set()


def free_port():
    """A port nothing listens on now and that this process has not handed out before: the
    kernel may give the same free port to two binds in a row (CI once started a broker with
    --kafka-addr and --http-addr on one port)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port that was not handed out already")


def wait_until(pred, timeout, what, interval=0.1, describe=None):
    """Polls pred() until it returns a truthy value (returned); raises AssertionError on timeout,
    with describe() (the state that kept it waiting) in the message when given."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            state = ""
            if describe is not None:
                try:
                    state = f"; last state: {describe()}"
                except Exception as e:  # noqa: BLE001 - the timeout is the failure to report
                    state = f"; describing the state failed: {e}"
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{state}")
        time.sleep(interval)


def start_fault_proxy(t, delay_ms):
    """Starts ../shared/tools/s3-fault-proxy in front of the S3 test server (S3_ENDPOINT, set by
    with-s3.sh) holding every answer for delay_ms; stopped with the test. Returns its URL."""
    pf = os.path.join(t.workdir, f"proxy-{time.monotonic_ns()}.port")
    shared = os.environ.get("SKIFF_SHARED_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
    p = subprocess.Popen([os.path.join(shared, "tools/s3-fault-proxy"), "--listen", "127.0.0.1:0",
                          "--port-file", pf, "--upstream", os.environ["S3_ENDPOINT"].split("//")[1],
                          "--delay-ms", str(delay_ms)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.cleanups.append(lambda: (p.kill(), p.wait()))
    wait_until(lambda: os.path.exists(pf) and open(pf).read().strip(), 10, "the fault proxy")
    return "http://127.0.0.1:" + open(pf).read().strip()


def metric_counter(b, name, **labels):
    """The sum of the series of counter `name` on broker b's /metrics whose labels include
    `labels` (0 when the family is absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10) as r:
        doc = json.load(r)
    fam = doc.get("counters", {}).get(name)
    if not fam:
        return 0
    return sum(s["value"] for s in fam["series"] if all(s["labels"].get(k) == v for k, v in labels.items()))


def metric_gauge(b, name, **labels):
    """The sum of the series of gauge `name` on broker b's /metrics whose labels include
    `labels` (None when the family is absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10) as r:
        doc = json.load(r)
    fam = doc.get("gauges", {}).get(name)
    if not fam:
        return None
    return sum(s["value"] for s in fam["series"] if all(s["labels"].get(k) == v for k, v in labels.items()))


class BrokerError(AssertionError):
    pass


class Broker:
    """One `skiff serve` process; start() may be called again after stop()/kill() and reuses
    the ports and the store (the same data dir, or the same S3 namespace)."""

    def __init__(self, skiff, workdir, name, store, extra_args=(), env=None, cores=None,
                 s3_endpoint=None):
        self.skiff = skiff
        self.name = name
        self.store = store
        self.workdir = workdir
        self.port = free_port()
        self.http_port = free_port()
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.data_dir = os.path.join(workdir, f"{name}-data")
        self.namespace = f"t{uuid.uuid4().hex[:12]}-{name}"
        self.extra_args = list(extra_args)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.cores = cores if cores is not None else int(os.environ.get("SKIFF_TEST_CORES", "2"))
        self.s3_endpoint = s3_endpoint or os.environ.get("S3_ENDPOINT")
        self.proc = None
        self.starts = 0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def args(self):
        a = [self.skiff, "serve",
             "--kafka-addr", self.bootstrap,
             "--http-addr", f"127.0.0.1:{self.http_port}",
             "--cores", str(self.cores),
             "--group-initial-rebalance-delay-ms", "0"]
        if self.store == "s3":
            for var in ("S3_ENDPOINT", "S3_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                if not os.environ.get(var):
                    raise BrokerError(f"--store s3 needs {var}: run the test through "
                                      "test/integration/with-s3.sh")
            a += ["--s3-bucket", os.environ["S3_BUCKET"],
                  "--s3-endpoint", self.s3_endpoint,
                  "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1"),
                  "--namespace", self.namespace]
        else:
            a += ["--data-dir", self.data_dir]
        return a + self.extra_args

    def start(self, timeout=30, wait=True):
        """Starts the process (from this thread: the broker gets SIGKILL when the thread that
        started it ends) and, with wait, waits until it accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerError(f"broker {self.name} already running")
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts}: {' '.join(self.args())}\n".encode())
        log.flush()

        def child():
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir, env=self.env,
                                     preexec_fn=child)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise BrokerError(f"broker {self.name} exited with status {rc} during startup")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    # A connect to a port nobody listens on can connect to itself (TCP
                    # simultaneous open when the kernel picks the same source port): not ready.
                    if s.getsockname() != s.getpeername():
                        return
                    print(f"    (wait_ready: self-connection on port {self.port}; still waiting)", flush=True)
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"broker {self.name}: port {self.port} not accepting "
                                  f"connections after {timeout} s")
            time.sleep(0.05)

    def wait_restored(self, timeout=60):
        """Waits for /ready to answer 200: the broker listens before its partitions are restored
        (requests for those answer LEADER_NOT_AVAILABLE meanwhile; real clients retry)."""
        def ok():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/ready", timeout=5) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_until(ok, timeout, f"broker {self.name}: /ready after the restore")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30, expect_rc=0):
        """Sends sig, waits for the exit and checks its status (None: any status)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BrokerError(f"broker {self.name} did not exit within {timeout} s of "
                              f"{signal.Signals(sig).name}; killed")
        self._wait_port_released()
        if expect_rc is not None and rc != expect_rc:
            raise BrokerError(f"broker {self.name} exited with status {rc} after "
                              f"{signal.Signals(sig).name}, expected {expect_rc}")
        return rc

    def _wait_port_released(self, timeout=10):
        # io_uring releases the files its ring holds (the listening sockets with accepts in
        # flight) in a kernel worker after the process is reaped: for a moment the dead broker's
        # port still accepts connections, then resets them. A restart must not count those.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                return
            time.sleep(0.02)

    def kill(self):
        return self.stop(signal.SIGKILL, timeout=10, expect_rc=-signal.SIGKILL)

    def restart(self, sig=signal.SIGTERM):
        self.stop(sig, expect_rc=0 if sig == signal.SIGTERM else None)
        return self.start()

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines=80):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(data[-lines:])


class TestTimeout(Exception):
    pass


class TestContext:
    def __init__(self, opts, name, workdir):
        self.opts = opts
        self.name = name
        self.workdir = workdir
        self.brokers = []
        self.store = opts.store
        self.skiff = opts.skiff
        self._n = 0
        self.cleanups = []   # callables run when the test ends, however it ends (other peers)

    def broker(self, extra_args=(), env=None, start=True, cores=None, s3_endpoint=None):
        self._n += 1
        b = Broker(self.skiff, self.workdir, f"{self.name}-{self._n}", self.store,
                   extra_args=extra_args, env=env, cores=cores, s3_endpoint=s3_endpoint)
        self.brokers.append(b)
        if start:
            b.start()
        return b

    def log(self, msg):
        print(f"    {msg}", flush=True)

    def topic(self, base="t"):
        return f"{base}-{uuid.uuid4().hex[:8]}"


def _on_alarm(signum, frame):
    raise TestTimeout("test time limit reached")


def _on_term(signum, frame):
    raise SystemExit(f"terminated by signal {signum}")


def main(tests, default_timeout=240):
    """tests: functions f(t), or (f, timeout_s), or (f, timeout_s, stores): a test that needs
    the S3 peer names {"s3"} and is part of the --store s3 run only. Exits 1 if any test fails
    or none ran."""
    p = argparse.ArgumentParser()
    p.add_argument("--skiff", required=True, help="path to the skiff binary")
    p.add_argument("--store", choices=["local", "s3"], default="local")
    p.add_argument("-k", dest="only", action="append", help="run only tests whose name contains this")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    opts = p.parse_args()
    opts.skiff = os.path.abspath(opts.skiff)
    if not os.access(opts.skiff, os.X_OK):
        print(f"FAIL: {opts.skiff} is not an executable", flush=True)
        sys.exit(1)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGALRM, _on_alarm)

    root = tempfile.mkdtemp(prefix="skiff-clients-")
    passed, failed = [], []
    reasons = []  # (name, message, context): repeated at the end, where CI's excerpt shows it
    t_all = time.monotonic()
    try:
        for entry in tests:
            entry = entry if isinstance(entry, tuple) else (entry,)
            fn = entry[0]
            limit = entry[1] if len(entry) > 1 else default_timeout
            stores = entry[2] if len(entry) > 2 else None
            name = fn.__name__.removeprefix("test_")
            if opts.only and not any(o in name for o in opts.only):
                continue
            if stores is not None and opts.store not in stores:
                print(f"--- {name}: part of the {'/'.join(sorted(stores))} run only", flush=True)
                continue
            workdir = os.path.join(root, name)
            os.makedirs(workdir)
            t = TestContext(opts, name, workdir)
            print(f"--- {name} [{opts.store}]", flush=True)
            t0 = time.monotonic()
            signal.alarm(limit)
            try:
                fn(t)
                signal.alarm(0)
                passed.append(name)
                print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
            except BaseException as e:  # noqa: BLE001 - a test's SystemExit is a failure too
                signal.alarm(0)
                failed.append(name)
                reason = f"{type(e).__name__}: {e}"
                reasons.append((name, reason[:800], t))
                print(f"FAIL {name} ({time.monotonic() - t0:.1f} s): {reason}", flush=True)
                traceback.print_exc(file=sys.stdout)
                for b in t.brokers:
                    rc = b.proc.poll() if b.proc is not None else None
                    if rc is not None and b.proc.returncode < 0:
                        state = f"exited on signal {signal.Signals(-rc).name}"
                    else:
                        state = "running" if rc is None and b.proc else f"exited with status {rc}"
                    print(f"    --- broker {b.name}: {state}; its log (last lines, {b.log_path}):")
                    print("    " + b.log_tail().replace("\n", "\n    "), flush=True)
                if isinstance(e, (SystemExit, KeyboardInterrupt)):
                    raise
            finally:
                for b in t.brokers:
                    b.cleanup()
                for fn in t.cleanups:
                    try:
                        fn()
                    except Exception as e:  # noqa: BLE001 - cleanup must not hide the result
                        print(f"    cleanup failed: {e}", flush=True)
    finally:
        signal.alarm(0)
        # A CI log excerpt shows only the end of the output: say again why each test failed,
        # with the last lines of its brokers' (and etcd's) logs.
        for name, reason, t in reasons:
            print(f"=== {name} failed: {reason}", flush=True)
            for b in t.brokers:
                print(f"    broker {b.name}, last lines:\n      " + b.log_tail(3).replace("\n", "\n      "),
                      flush=True)
            e = getattr(t, "etcd", None)
            if e is not None:
                print("    etcd log, last lines:\n    " + e.log_tail(6).replace("\n", "\n    "), flush=True)
        print(f"{len(passed)} passed, {len(failed)} failed"
              f"{': ' + ', '.join(failed) if failed else ''} "
              f"({time.monotonic() - t_all:.1f} s, store {opts.store})", flush=True)
        if opts.keep or failed:
            print(f"work directory (broker logs): {root}", flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if failed or not passed:
        sys.exit(1)


def run_threads_checked(threads):
    """Joins threads; re-raises the first exception any of them recorded in .error."""
    for th in threads:
        th.join()
    for th in threads:
        if getattr(th, "error", None) is not None:
            raise th.error


class CheckedThread(threading.Thread):
    """A daemon thread that keeps its exception in .error for the test to re-raise."""

    def __init__(self, target, *args, name=None):
        super().__init__(daemon=True, name=name)
        self._target_fn = target
        self._args = args
        self.error = None

    def run(self):
        try:
            self._target_fn(*self._args)
        except BaseException as e:  # noqa: BLE001
            self.error = e
