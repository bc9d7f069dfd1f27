"""Basics of the integration suite: where its state lives, this run's id,
running a command, polling until a condition holds, a free TCP port."""
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_DIR = Path(os.environ.get("KWATCH_TEST_DIR") or REPO / ".test").resolve()
KEEP = os.environ.get("KWATCH_KEEP") == "1"
# The session runs snapshots of the helper scripts (taken at its start):
# bash reads a script while running it, and these files may be edited
# while a long session runs.
SCRIPTS = TEST_DIR / "scripts"
# test/ on the path for the fake API server and fault proxy (fakeapi),
# examples/ for the README's example client (events_client.py)
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "examples"))

# a short random id, so that names from an earlier run on a kept cluster
# (KWATCH_KEEP=1) never collide with this run's
RUN_ID = secrets.token_hex(2)


def run(cmd, *, input=None, env=None, timeout=180, check=True):
    """Runs cmd; on failure raises with its output (nothing is printed otherwise)."""
    p = subprocess.run([str(c) for c in cmd], input=input, env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s\n--- stdout:\n%s\n--- stderr:\n%s"
                           % (p.returncode, " ".join(map(str, cmd)), p.stdout[-4000:],
                              p.stderr[-4000:]))
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout=20, msg="condition", interval=0.1):
    """Polls fn() every interval seconds until it returns a truthy value (returned);
    fails the test after `timeout` seconds showing fn's last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail("timed out after %ss waiting for %s; last value: %r"
                        % (timeout, msg, value), pytrace=False)
        time.sleep(interval)
