"""A real etcd (Debian's etcd-server) for the cluster tests: one member on 127.0.0.1 with free
ports and its own data directory. Standard library only.

    e = EtcdServer(workdir).start()   # waits until it answers
    e.url                             # "http://127.0.0.1:PORT" for --etcd
    e.pause() / e.resume()            # SIGSTOP / SIGCONT: etcd unreachable but alive
    e.stop(); e.start()               # same data directory and ports: state survives
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker import free_port as _free_port  # noqa: E402 - never the same port twice (client and peer)


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class EtcdServer:
    def __init__(self, workdir, name="etcd", ctx=None):
        self.binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not os.access(self.binary, os.X_OK):
            raise AssertionError("etcd is not installed (Debian package etcd-server; tools/install-deps.sh --all)")
        self.workdir = workdir
        # On tmpfs when there is one: etcd fsyncs every write, and on a CI machine whose disk
        # is busy with other tests an fsync can stall past the brokers' 3 s lease, so leases
        # expire and partitions move for reasons the test did not cause.
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            self.data_dir = tempfile.mkdtemp(prefix=f"skiff-{name}-", dir="/dev/shm")
            self._tmpfs_dir = self.data_dir
        else:
            self.data_dir = os.path.join(workdir, f"{name}-data")
            self._tmpfs_dir = None
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.port = _free_port()
        self.peer_port = _free_port()
        self.proc = None
        if ctx is not None:
            ctx.cleanups.append(self.stop)
            ctx.cleanups.append(self.remove_data)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=30):
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [self.binary, "--name", "skiff-test", "--data-dir", self.data_dir,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"skiff-test={peer}", "--log-level", "warn"]
        log = open(self.log_path, "ab")
        env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.environ.get("ETCD_UNSUPPORTED_ARCH", ""))
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"etcd exited with status {self.proc.returncode} at start; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if json.loads(r.read()).get("health") in ("true", True):
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"etcd not healthy after {timeout} s; see {self.log_path}")
            time.sleep(0.1)

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def remove_data(self):
        """Deletes a tmpfs data directory (after stop; the work directory is kept on failure,
        but /dev/shm is memory)."""
        if self._tmpfs_dir:
            shutil.rmtree(self._tmpfs_dir, ignore_errors=True)

    def log_tail(self, n=12):
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace").rstrip()
        except OSError:
            return "(no log)"

    def keys(self, prefix):
        """{key: value} under prefix, through the v3 JSON gateway."""
        import base64
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(end.encode()).decode()}).encode()
        req = urllib.request.Request(self.url + "/v3/kv/range", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            out = json.loads(r.read())
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
                for kv in out.get("kvs", [])}
