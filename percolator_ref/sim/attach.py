"""How the simulation reaches into a real cluster, from outside the protocol.

- :class:`RowTransactionAdmission` is an interceptor (attached to the store
  with :func:`percolator_ref.interceptors.attach`): a simulated
  client's row transaction waits for its worker's CPU, the network and its
  tablet server on simulated time before it runs.
- :class:`SimulatedOracle` stands in for ``cluster.oracle``: a timestamp
  request goes through the client's machine's oracle client (batching).
- :class:`SimulatedLockService` is the cluster's lock service whose liveness
  checks cost a round trip to the simulated lock service.

Called outside a simulated process (loading, the final drain and checks)
each of them does exactly what the plain cluster does.
"""
from __future__ import annotations

from typing import Optional

from ..services.lockservice import LockService


class RowTransactionAdmission:
    """The interceptor: admit a simulated client's row transaction at simulated time.

    The client first waits for what it owes (the reply of its last request),
    then uses its worker's CPU (``worker_cpu_s``), sends the request (half a
    round trip), queues at the row's tablet server (``row_transaction_s``),
    and runs the real row transaction when served; the reply's half round
    trip is owed before its next action.
    """

    def __init__(self, world):
        self.world = world

    def before(self, rt) -> None:
        sim = self.world.sim
        process = sim.current
        if process is None:
            return
        cal, half = self.world.calibration, self.world.half_round_trip
        server = self.world.tablet_server_for(rt.table, rt.row)
        cpu = process.data.machine.cpu
        stages = (cal.worker_cpu_s, half, server.use, cal.row_transaction_s, None, process, None)
        carry = process.take_carry()
        if carry:
            sim.after(carry, cpu.use_then, *stages)
        else:
            cpu.use_then(*stages)
        sim.block(process)
        process.carry = half


class SimulatedOracle:
    """``cluster.oracle`` on simulated time. ``get_timestamp()`` in a simulated process
    waits for its machine's oracle client; elsewhere it is the real oracle's."""

    def __init__(self, world, oracle):
        self.world = world
        self.oracle = oracle

    def get_timestamp(self) -> int:
        sim = self.world.sim
        process = sim.current
        if process is None:
            return self.oracle.get_timestamp()
        sim.after(process.take_carry(), process.data.machine.oracle_client.arrive, process)
        return sim.block(process)

    def get_timestamps(self, n: int) -> range:
        """Not simulated (no protocol path asks for several)."""
        return self.oracle.get_timestamps(n)

    def peek(self) -> int:
        return self.oracle.peek()

    @property
    def calls(self) -> int:
        return self.oracle.calls


class SimulatedLockService(LockService):
    """The lock service; in a simulated process each liveness check is a round trip to the
    simulated lock service (``lock_service_s`` of its time). Tokens are the worker's own
    (registering and heartbeats cost nothing, as a worker's periodic heartbeat)."""

    def __init__(self, world, clock, ttl: float):
        super().__init__(clock, ttl)
        self.world = world

    def is_alive(self, client: Optional[str]) -> bool:
        sim = self.world.sim
        process = sim.current
        if process is not None:
            half = self.world.half_round_trip
            sim.after(process.take_carry() + half, self.world.lock_service.use_then,
                      self.world.calibration.lock_service_s, half, None, process, None)
            sim.block(process)
        return super().is_alive(client)
