"""A nemesis for the soak: SIGKILL, SIGSTOP and restart the nodes of a replicated Redis Cluster.

In the manner of Jepsen (its Redis analyses found that Redis Cluster's
asynchronous replication loses acknowledged writes across a failover, and
that ``WAIT`` alone does not make a store linearizable), :func:`run_nemesis`
runs the soak (:mod:`percolator_ref.workloads.soak`: bank transfers with
client crashes, observers, snapshot readers) on a
:class:`~percolator_ref.harness.redis_cluster.ReplicatedRedisCluster` (three
masters, one replica each, every node on 127.0.0.1), while a
:class:`Nemesis` thread, after ``interval`` seconds of calm each time, does
one of (in turn, on a seeded random victim):

- ``kill-master``: SIGKILL a master; its replica takes over its slots (the
  cluster failover); the node is restarted and rejoins as a replica;
- ``kill-replica``: SIGKILL a replica, restart it a moment later;
- ``pause-master``: SIGSTOP a master past ``cluster-node-timeout`` until its
  replica has taken over, then SIGCONT it. The old master wakes up still
  believing it serves its slots and answers what clients had queued before
  it learns otherwise: the classic split-brain window. It then rejoins as a
  replica and throws away what it accepted alone;
- ``lag-kill-master``: cut a master's replication link (its replica stopped,
  the link dropped: :meth:`ReplicatedRedisCluster.cut_replication`) for
  ``LAG`` seconds, as a partition between the two would, then SIGKILL the
  master; the replica, behind by those writes, takes over.

Every other time (alternating per round) the victim is the master serving the
timestamp oracle's key.
After the run the nemesis heals every node (resume, restart) and waits for the
cluster to be healthy; then the soak settles and audits: the bank total, the
snapshot-isolation checker over the whole history, lost commits, stuck locks,
unobserved notifications and reissued timestamps.

``wait=1`` (the store's ``?wait=1``) makes every write a commit depends on
wait for the replica (``WAIT 1``) before the client hears of it; ``wait=0``
is plain asynchronous replication. docs/redis.md states the store guarantee the
protocol relies on and what each setting gives.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

ORACLE_KEY = "nm:{oracle}"
HEAL_TIMEOUT = 60.0
PAUSE_TIMEOUT = 10.0        # seconds a paused master waits for its replica to take over
LAG = 0.5                   # seconds a master runs with its replication link cut


@dataclass(frozen=True)
class NemesisSettings:
    """One nemesis soak's settings (checked where they enter: ``percolator soak``)."""
    seconds: float = 60.0
    wait: int = 1
    interval: float = 2.0
    threads: int = 3
    seed: int = 0
    node_timeout_ms: int = 1000
    lock_ttl: float = 2.0


class Nemesis:
    """Kill, pause and restart ``nodes`` (a started ReplicatedRedisCluster); see the module doc."""

    def __init__(self, nodes, seed: int = 0, interval: float = 2.0):
        self.nodes, self.rng, self.interval = nodes, random.Random(seed), interval
        self.t0 = time.monotonic()
        self.events: list = []
        self.errors: list = []

    def run(self, stop) -> None:
        """Until ``stop`` is set: calm for ``interval`` seconds, then the next operation."""
        operations = [self.kill_master, self.kill_replica, self.pause_master,
                      self.lag_kill_master]
        turn = 0
        while not stop.wait(self.interval):
            operation = operations[turn % len(operations)]
            try:
                operation(prefer_oracle=(turn + turn // len(operations)) % 2 == 0)
            except Exception as e:      # noqa: BLE001 - reported; the cluster is healed
                self.errors.append(f"{operation.__name__}: {type(e).__name__}: {e}")
                self.heal()
            turn += 1

    def victim(self, prefer_oracle: bool):
        """A master now serving slots: the oracle's, or one drawn at random."""
        if prefer_oracle:
            return self.nodes.master_for_key(ORACLE_KEY)
        return self.rng.choice(sorted(self.nodes.masters(), key=lambda s: s.port))

    def record(self, operation: str, server, started: float, **extra) -> None:
        self.events.append({"op": operation, "port": server.port,
                            "at_s": round(started - self.t0, 2),
                            "took_s": round(time.monotonic() - started, 2), **extra})

    def kill_master(self, prefer_oracle: bool = False) -> None:
        victim, started = self.victim(prefer_oracle), time.monotonic()
        self.nodes.kill(victim)
        failover_s = self.nodes.wait_failover(victim, timeout=HEAL_TIMEOUT)
        self.nodes.restart(victim)                      # rejoins as a replica
        self.nodes.wait_healthy(HEAL_TIMEOUT)
        self.record("kill-master", victim, started, failover_s=round(failover_s, 2))

    def kill_replica(self, prefer_oracle: bool = False) -> None:
        replica = self.nodes.replica_of(self.victim(prefer_oracle))
        started = time.monotonic()
        self.nodes.kill(replica)
        time.sleep(min(self.interval, 1.0))
        self.nodes.restart(replica)
        self.nodes.wait_healthy(HEAL_TIMEOUT)
        self.record("kill-replica", replica, started)

    def pause_master(self, prefer_oracle: bool = False) -> None:
        victim, started = self.victim(prefer_oracle), time.monotonic()
        self.nodes.pause(victim)
        try:
            failover_s = self.nodes.wait_failover(victim, timeout=PAUSE_TIMEOUT)
        except RuntimeError:                            # no takeover: just a long pause
            failover_s = None
        finally:
            self.nodes.resume(victim)                   # wakes up a master: split brain
        self.nodes.wait_healthy(HEAL_TIMEOUT)
        extra = {} if failover_s is None else {"failover_s": round(failover_s, 2)}
        self.record("pause-master", victim, started, **extra)

    def lag_kill_master(self, prefer_oracle: bool = False) -> None:
        victim = self.victim(prefer_oracle)
        replica, started = self.nodes.replica_of(victim), time.monotonic()
        self.nodes.cut_replication(victim, replica)
        time.sleep(LAG)                                 # the master acknowledges alone
        self.nodes.kill(victim)
        self.nodes.resume(replica)
        failover_s = self.nodes.wait_failover(victim, timeout=HEAL_TIMEOUT)
        self.nodes.restart(victim)
        self.nodes.wait_healthy(HEAL_TIMEOUT)
        self.record("lag-kill-master", victim, started, failover_s=round(failover_s, 2))

    def heal(self) -> None:
        """Every node running again (resumed or restarted) and the cluster healthy."""
        for server in self.nodes.servers:
            if server.process is not None and server.process.poll() is None:
                self.nodes.resume(server)
            else:
                self.nodes.restart(server)
        self.nodes.wait_healthy(HEAL_TIMEOUT)

    def summary(self) -> dict:
        counts = {op: sum(1 for e in self.events if e["op"] == op)
                  for op in ("kill-master", "kill-replica", "pause-master", "lag-kill-master")}
        return {"operations": counts, "failovers": sum(1 for e in self.events if "failover_s" in e),
                "events": self.events, "errors": self.errors}


def run_nemesis(settings: NemesisSettings, progress: bool = False) -> dict:
    """Start the replicated cluster, soak it under the nemesis, stop every node; the JSON dict."""
    from ..cluster import Cluster
    from ..harness.redis_cluster import ReplicatedRedisCluster
    from .soak import run_soak
    s = settings
    with ReplicatedRedisCluster(masters=3, node_timeout_ms=s.node_timeout_ms) as nodes:
        url = f"{nodes.url}?prefix=nm&wait={s.wait}&timeout=5&wait_timeout=1000"
        cluster = Cluster(backend=url, lock_ttl=s.lock_ttl)
        nemesis = Nemesis(nodes, seed=s.seed, interval=s.interval)
        report = run_soak(cluster, s.seconds, seed=s.seed, threads=s.threads,
                          nemesis=nemesis, progress=progress)
    out = report.to_json()
    out.update(backend="a replicated Redis Cluster (3 masters, 1 replica each, loopback)",
               wait=s.wait, nemesis=nemesis.summary())
    out["ok"] = report.ok and not nemesis.errors and out["nemesis"]["failovers"] > 0
    return out
