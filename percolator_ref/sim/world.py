"""The simulated deployment: machines, tablet servers, the timestamp oracle, the lock service.

Each of ``machines`` simulated machines runs, as in the paper's deployment, a
Percolator worker (``worker_cores`` CPU units) and a Bigtable tablet server
(``tablet_server_cores`` units). Rows are partitioned over the tablet servers
by a stable hash of ``table/row``. One timestamp oracle and one lock service
serve everybody; or, with ``truetime_epsilon_us``, no oracle: each machine takes
its timestamps from its own TrueTime (Spanner, seed 004;
:mod:`percolator_ref.variants.truetime`), with commit wait and reads at a safe
time on simulated time. Every remote call pays the network's round trip
(``rpc_round_trip_s``, half each way), which occupies no server.

The data live in one real in-memory :class:`~percolator_ref.Cluster` whose
clock is the simulator's; :meth:`SimulatedCluster.attach` puts the hooks of
:mod:`percolator_ref.sim.attach` on it.
"""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Optional

from ..cluster import Cluster
from ..variants.truetime import SpannerTimestamps
from ..interceptors import attach
from .attach import RowTransactionAdmission, SimulatedLockService, SimulatedOracle
from .calibration import Calibration
from .engine import Resource, SimulatedClock, Simulator


class OracleService:
    """The timestamp oracle: one server; a request for ``n`` timestamps takes
    ``oracle_request_s + (n - 1) * oracle_timestamp_s``. Counts what it served
    inside the measurement window."""

    def __init__(self, world: "SimulatedCluster", oracle):
        self.world = world
        self.oracle = oracle                      # the cluster's real oracle
        self.resource = Resource(world.sim, "oracle")
        self.requests = 0
        self.timestamps = 0

    def request(self, batch: list, client: "OracleClient") -> None:
        cal = self.world.calibration
        service = cal.oracle_request_s + (len(batch) - 1) * cal.oracle_timestamp_s
        self.resource.use(service, self._served, batch, client)

    def _served(self, batch: list, client: "OracleClient") -> None:
        stamps = self.oracle.get_timestamps(len(batch))
        start, end = self.resource.window
        if start <= self.world.sim.now <= end:
            self.requests += 1
            self.timestamps += len(batch)
        self.world.sim.after(self.world.half_round_trip, client.deliver, batch, stamps)


class OracleClient:
    """A worker's oracle client. With batching (paper section 2.3) at most one request is
    in flight; the callers who arrive meanwhile wait and all go in the next request.
    Without, every caller sends its own request."""

    def __init__(self, world: "SimulatedCluster", batching: bool):
        self.world, self.batching = world, batching
        self.waiting: list = []
        self.in_flight = False

    def arrive(self, process) -> None:
        """``process`` wants a timestamp (an event at the worker)."""
        if not self.batching:
            self._send([process])
            return
        self.waiting.append(process)
        if not self.in_flight:
            self._send_waiting()

    def _send_waiting(self) -> None:
        batch, self.waiting = self.waiting, []
        self.in_flight = True
        self._send(batch)

    def _send(self, batch: list) -> None:
        self.world.sim.after(self.world.half_round_trip, self.world.oracle.request, batch, self)

    def deliver(self, batch: list, stamps) -> None:
        """The reply: each caller gets its timestamp; the next batch goes out."""
        for process, ts in zip(batch, stamps):
            self.world.sim.resume(process, ts)
        if self.batching:
            self.in_flight = False
            if self.waiting:
                self._send_waiting()


class Machine:
    """One simulated machine: a worker's CPU, its tablet server, its oracle client."""

    def __init__(self, world: "SimulatedCluster", index: int, worker_cores: int,
                 tablet_server_cores: int, batching: bool):
        self.index = index
        self.cpu = Resource(world.sim, f"worker-{index}", worker_cores)
        self.tablet_server = Resource(world.sim, f"tablet-server-{index}", tablet_server_cores)
        self.oracle_client = OracleClient(world, batching)
        self.feed_lock = threading.Lock()        # its market emulator: one Market-Feed at a time


@dataclass
class ClientState:
    """What a simulated client process carries: its machine and its random stream."""
    machine: Machine
    rng: object


class SimulatedCluster:
    """A real in-memory cluster on simulated time, with ``machines`` simulated machines."""

    def __init__(self, machines: int, calibration: Calibration, *, worker_cores: int = 1,
                 tablet_server_cores: int = 1, oracle_batching: bool = True,
                 window: tuple = (0.0, 0.0), carrier: Optional[str] = None,
                 truetime_epsilon_us: Optional[int] = None):
        self.calibration = calibration
        self.window = window
        self.half_round_trip = calibration.rpc_round_trip_s / 2
        self.sim = Simulator(SimulatedClock(), carrier)
        self.truetime = truetime_epsilon_us is not None
        variants = [SpannerTimestamps(truetime_epsilon_us, machines, placement=self.node_of_current)
                    ] if self.truetime else []
        self.cluster = Cluster(clock=self.sim.clock, record_history=False, variants=variants)
        self.machines = [Machine(self, i, worker_cores, tablet_server_cores, oracle_batching)
                         for i in range(machines)]
        self.oracle = OracleService(self, self.cluster.oracle)
        self.lock_service = Resource(self.sim, "lock-service")
        for resource in self.resources():
            resource.window = window
        self._admission = None

    def node_of_current(self) -> Optional[str]:
        """The TrueTime node of the running simulated process: its machine (None outside)."""
        process = self.sim.current
        if process is None or process.data is None:
            return None
        return f"n{process.data.machine.index}"

    def set_window(self, window: tuple) -> None:
        """Measure the resources over ``window`` (simulated seconds) instead."""
        self.window = window
        for resource in self.resources():
            resource.window = window

    def resources(self) -> list:
        """Every simulated resource."""
        return ([m.cpu for m in self.machines] + [m.tablet_server for m in self.machines]
                + [self.oracle.resource, self.lock_service])

    def tablet_server_for(self, table: str, row: str) -> Resource:
        """The tablet server holding ``table/row`` (a stable hash: the same on every run)."""
        index = zlib.crc32(f"{table}/{row}".encode()) % len(self.machines)
        return self.machines[index].tablet_server

    def attach(self) -> None:
        """Put the simulation's hooks on the cluster (after loading, which runs plainly)."""
        cluster = self.cluster
        if not self.truetime:             # TrueTime: each machine's own clock, no oracle
            cluster.oracle = SimulatedOracle(self, self.oracle.oracle)
        cluster.lockservice = SimulatedLockService(self, cluster.clock, cluster.lock_ttl)
        self._admission = attach(cluster.bigtable, RowTransactionAdmission(self))

    def detach(self) -> None:
        """Back to the plain cluster (for the drain and the invariant checks)."""
        if self._admission is not None:
            self._admission.detach()
            self._admission = None
        if not self.truetime:
            self.cluster.oracle = self.oracle.oracle
