"""A Redis Cluster with one replica per master on loopback, for failure experiments.

>>> cluster = ReplicatedRedisCluster(masters=3)          # doctest: +SKIP
>>> victim = cluster.master_for_key("pc:{oracle}")       # doctest: +SKIP
>>> cluster.kill(victim); cluster.wait_failover(victim)  # doctest: +SKIP
>>> cluster.restart(victim)      # rejoins as a replica  # doctest: +SKIP
>>> cluster.stop()                                       # doctest: +SKIP

Every node is a :class:`~percolator_ref.harness.redis_server.LocalRedisServer`
on 127.0.0.1 (no persistence: a replica's copy is the only other copy).
``redis-cli --cluster create --cluster-replicas 1`` pairs each master with a
replica. When a master dies, its replica notices after ``node_timeout_ms``
and, with the other masters' votes, takes over its slots (the cluster
failover). A killed node restarted on its old files (``nodes.conf``) learns
that its slots moved and rejoins as a replica of its successor.

:meth:`cut_replication` opens, on purpose, the window that asynchronous
replication leaves: the replica is stopped (SIGSTOP, so it cannot reconnect)
and its master drops the replication link (``CLIENT KILL TYPE replica``), so
from then on the master acknowledges writes that no replica receives (a
stopped process alone would not do: the kernel keeps buffering the stream
for it). :meth:`resume` continues the replica (SIGCONT).
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time

from .redis_server import LocalRedisServer, free_cluster_port


def cluster_tools_available() -> bool:
    """Are ``redis-server`` and ``redis-cli`` (which creates the cluster) on PATH?"""
    return LocalRedisServer.available() and shutil.which("redis-cli") is not None


def node_client(server: LocalRedisServer):
    """A short-timeout redis-py client on one node (for the harness's own queries)."""
    import redis
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=1.0,
                       socket_connect_timeout=1.0, decode_responses=True)


def cluster_nodes(server: LocalRedisServer) -> list:
    """``CLUSTER NODES`` of one node as dicts: id, port, flags, master id, slots, link."""
    client = node_client(server)
    try:
        text = client.execute_command("CLUSTER", "NODES")
    finally:
        client.close()
    rows = []
    for line in (text if isinstance(text, str) else text.decode()).splitlines():
        parts = line.split()
        rows.append({"id": parts[0], "port": int(parts[1].split(":")[1].split("@")[0]),
                     "flags": set(parts[2].split(",")), "master": parts[3],
                     "link": parts[7], "slots": parts[8:]})
    return rows


STOP_SECONDS = 5.0     # stop(): how long the nodes have to exit on SIGTERM, together


class ReplicatedRedisCluster:
    """``masters`` masters, each with one replica, on 127.0.0.1 (start at construction)."""

    def __init__(self, masters: int = 3, node_timeout_ms: int = 1500):
        if isinstance(masters, bool) or not isinstance(masters, int) or masters < 3:
            raise ValueError(f"masters must be an int >= 3 (a failover needs a majority of "
                             f"masters to vote), got {masters!r}")
        self.node_timeout_ms = node_timeout_ms
        self.stopped = False
        self.lifecycle = threading.Lock()      # restart() vs stop(): no node outlives stop()
        self.servers = [LocalRedisServer(port=free_cluster_port(), extra_args=(
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--repl-diskless-sync-delay", "0"))
            for _ in range(2 * masters)]
        try:
            addrs = [f"127.0.0.1:{s.port}" for s in self.servers]
            subprocess.run(["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas",
                            "1", "--cluster-yes"], check=True, capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL (several nodes are entry points: any live one works)."""
        return f"redis+cluster://127.0.0.1:{self.servers[0].port}"

    def alive(self) -> list:
        return [s for s in self.servers if s.process is not None and s.process.poll() is None]

    def by_port(self, port: int) -> LocalRedisServer:
        return next(s for s in self.servers if s.port == port)

    def view(self) -> list:
        """``CLUSTER NODES`` as seen by the first live node that answers."""
        for server in self.alive():
            try:
                return cluster_nodes(server)
            except Exception:       # noqa: BLE001 - a paused or dying node: ask another
                continue
        raise RuntimeError("no node of the Redis Cluster answers")

    def masters(self) -> list:
        """The servers that are masters now (serving slots, not failed)."""
        return [self.by_port(n["port"]) for n in self.view()
                if "master" in n["flags"] and n["slots"] and "fail" not in n["flags"]]

    def replica_of(self, master: LocalRedisServer) -> LocalRedisServer:
        """The server replicating ``master``."""
        nodes = self.view()
        master_id = next(n["id"] for n in nodes if n["port"] == master.port)
        return self.by_port(next(n["port"] for n in nodes if n["master"] == master_id))

    def master_for_key(self, key: str) -> LocalRedisServer:
        """The master serving ``key``'s hash slot now."""
        client = node_client(self.alive()[0])
        try:
            slot = client.execute_command("CLUSTER", "KEYSLOT", key)
        finally:
            client.close()
        for node in self.view():
            if "master" in node["flags"] and "fail" not in node["flags"]:
                for span in node["slots"]:
                    lo, _, hi = span.partition("-")
                    if span[0] != "[" and int(lo) <= int(slot) <= int(hi or lo):
                        return self.by_port(node["port"])
        raise RuntimeError(f"no live master serves slot {slot} of {key!r}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every live node says ``cluster_state:ok`` and every replica's link is up."""
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become healthy in time")
            time.sleep(0.1)

    def healthy(self) -> bool:
        for server in self.alive():
            client = node_client(server)
            try:
                if client.cluster("info").get("cluster_state") != "ok":
                    return False
                info = client.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
            except Exception:       # noqa: BLE001 - not ready yet
                return False
            finally:
                client.close()
        return True

    def kill(self, server: LocalRedisServer) -> None:
        """SIGKILL one node (its memory is gone; its ``nodes.conf`` stays)."""
        server.kill()

    def pause(self, server: LocalRedisServer) -> None:
        """SIGSTOP one node: it stops replicating (and answering) until :meth:`resume`."""
        server.process.send_signal(signal.SIGSTOP)

    def cut_replication(self, master: LocalRedisServer, replica: LocalRedisServer) -> None:
        """Stop ``replica`` and make ``master`` drop its replication link (see the module doc)."""
        self.pause(replica)
        client = node_client(master)
        try:
            client.execute_command("CLIENT", "KILL", "TYPE", "replica")
        finally:
            client.close()

    def resume(self, server: LocalRedisServer) -> None:
        server.process.send_signal(signal.SIGCONT)

    def wait_failover(self, dead: LocalRedisServer, timeout: float = 30.0) -> float:
        """Until no slot is served by ``dead`` and the cluster is ok; the seconds waited."""
        t0 = time.monotonic()
        while True:
            try:
                nodes = self.view()
                served = any(n["port"] == dead.port and n["slots"] and "fail" not in n["flags"]
                             for n in nodes)
                if not served and self.cluster_ok():
                    return time.monotonic() - t0
            except RuntimeError:
                pass
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"no replica took over from port {dead.port} in {timeout} s")
            time.sleep(0.05)

    def cluster_ok(self) -> bool:
        for server in self.alive():
            client = node_client(server)
            try:
                return client.cluster("info").get("cluster_state") == "ok"
            except Exception:       # noqa: BLE001 - ask the next node
                continue
            finally:
                client.close()
        return False

    def restart(self, server: LocalRedisServer) -> None:
        """Start a killed node again on its files: it rejoins as a replica of its successor.

        Refused (RuntimeError) once :meth:`stop` began, so no node outlives it."""
        with self.lifecycle:
            if self.stopped:
                raise RuntimeError("the Redis Cluster was stopped: no node is restarted")
            server.start()

    def stop(self) -> None:
        """Stop every node (a paused one too); later restarts are refused."""
        with self.lifecycle:
            self.stopped = True
        for server in self.servers:               # every node hears SIGTERM at once
            if server.process is not None and server.process.poll() is None:
                try:
                    server.process.send_signal(signal.SIGCONT)    # a paused node must hear SIGTERM
                    server.process.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_SECONDS  # then one shared grace period, then SIGKILL
        for server in self.servers:
            server.stop(wait=max(deadline - time.monotonic(), 0.0))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
