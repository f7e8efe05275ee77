"""Start a throwaway local ``redis-server`` (or a small Redis Cluster) for tests, notebooks, benchmarks.

>>> server = LocalRedisServer(persistent=True)     # doctest: +SKIP
>>> cluster = Cluster(backend=server.url)           # doctest: +SKIP
>>> server.restart(); server.stop()                 # doctest: +SKIP

``LocalRedisServer.available()`` says whether the binary is on ``PATH``; the
server binds 127.0.0.1 on a free port and keeps its files in a temporary
directory that ``stop()`` removes. With ``persistent=True`` it runs with
``appendonly yes`` and ``appendfsync always``: every acknowledged write is on
disk before the reply, so a restart (even after SIGKILL) loses nothing
committed.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Optional


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port() -> int:
    """A free port p below 55536 whose cluster bus port p + 10000 is free too."""
    import random
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class LocalRedisServer:
    """One ``redis-server`` process on 127.0.0.1 (a free port), files in a temp dir."""

    BINARY = "redis-server"

    def __init__(self, persistent: bool = False, port: Optional[int] = None,
                 extra_args: tuple = (), start: bool = True):
        self.persistent = persistent
        self.port = port or free_port()
        self.extra_args = tuple(extra_args)
        self.dir = tempfile.mkdtemp(prefix="percolator-redis-")
        self.process: Optional[subprocess.Popen] = None
        if start:
            self.start()

    @classmethod
    def available(cls) -> bool:
        return shutil.which(cls.BINARY) is not None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list:
        persistence = (["--appendonly", "yes", "--appendfsync", "always"] if self.persistent
                       else ["--appendonly", "no"])
        return [self.BINARY, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--protected-mode", "no",
                *persistence, *self.extra_args]

    def start(self, timeout: float = 10.0) -> "LocalRedisServer":
        """Start (or restart) the process and wait until it answers PING."""
        if not self.available():
            raise FileNotFoundError(f"{self.BINARY} is not on PATH (apt-get install redis-server)")
        self.process = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while not _ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        """SIGKILL the server (a crash: only what is on disk survives)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, remove: bool = True, wait: float = 5.0) -> None:
        """Terminate the server, SIGKILL it if it has not exited within ``wait`` s;
        ``remove`` deletes its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                self.kill()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, crash: bool = True) -> None:
        """Kill (``crash``) or stop the process, then start it again on the same port and files."""
        self.kill() if crash else self.stop(remove=False)
        self.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class LocalRedisCluster:
    """A Redis Cluster of ``nodes`` masters (no replicas) on 127.0.0.1, for tests."""

    def __init__(self, nodes: int = 3):
        self.servers = [LocalRedisServer(port=free_cluster_port(), extra_args=(
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000")) for _ in range(nodes)]
        try:
            addrs = [f"127.0.0.1:{s.port}" for s in self.servers]
            subprocess.run(["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", "0",
                            "--cluster-yes"], check=True, capture_output=True, timeout=30)
            self._wait_ok()
        except BaseException:
            self.stop()
            raise

    def _wait_ok(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        for s in self.servers:
            while True:
                out = subprocess.run(["redis-cli", "-p", str(s.port), "cluster", "info"],
                                     capture_output=True, text=True).stdout
                if "cluster_state:ok" in out:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.servers[0].port}"

    def stop(self) -> None:
        for s in self.servers:
            s.stop()
