#!/usr/bin/python3
"""kafkajs (node) against skiff: starts a broker and runs node/kafkajs_test.js (topics, produce,
consumer group) and node/kafkajs_admin_test.js (DeleteRecords, AlterConfigs, reassignments) against it.
kafkajs is installed from node/package-lock.json by tools/install-deps.sh --all.

    test_kafkajs.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")


def run_script(t, script, timeout):
    node = shutil.which("node")
    if node is None:
        raise AssertionError("node not found: run tools/install-deps.sh --all")
    if not os.path.isfile(os.path.join(NODE_DIR, "node_modules", "kafkajs", "package.json")):
        raise AssertionError(f"kafkajs not installed in {NODE_DIR}/node_modules: "
                             "run tools/install-deps.sh --all")
    b = t.broker(extra_args=["--auto-create-topics", "false"])
    env = dict(os.environ, SKIFF_BOOTSTRAP=b.bootstrap, KAFKAJS_NO_PARTITIONER_WARNING="1")
    p = subprocess.run([node, os.path.join(NODE_DIR, script)], cwd=NODE_DIR, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    print(out.rstrip(), flush=True)
    if p.returncode != 0:
        raise AssertionError(f"{script} exited with status {p.returncode}")
    b.stop()


def test_kafkajs(t):
    run_script(t, "kafkajs_test.js", 170)


def test_kafkajs_admin(t):
    run_script(t, "kafkajs_admin_test.js", 140)


if __name__ == "__main__":
    broker.main([(test_kafkajs, 200), (test_kafkajs_admin, 170)])
