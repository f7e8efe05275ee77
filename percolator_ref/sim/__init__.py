"""Deterministic simulation of a Percolator deployment running the real protocol code.

The TPC-E-style transactions of :mod:`percolator_ref.workloads.tpce` run on a
real in-memory :class:`~percolator_ref.Cluster`; every row transaction,
timestamp request, liveness check and backoff of a simulated client waits on
simulated time for the resource that would serve it (its worker's CPU, the
row's tablet server, the timestamp oracle, the lock service, the network).
Service times are measured on this machine (:mod:`.calibration`).

==================  ============================================================
``engine``          the event loop; processes are threads that run one at a time
``calibration``     service times measured on this machine, or read from a file
``attach``          the hooks on the cluster (one adapter for row transactions)
``world``           machines, tablet servers, the oracle (batching), lock service
``scaling``         the TPC-E scaling experiment behind ``percolator scale``
==================  ============================================================
"""
from .calibration import Calibration, load as load_calibration, measure as measure_calibration
from .engine import Resource, SimulatedClock, Simulator
from .scaling import ScaleSettings, run_size, sweep
from .world import SimulatedCluster

__all__ = ["Calibration", "Resource", "ScaleSettings", "SimulatedClock", "SimulatedCluster",
           "Simulator", "load_calibration", "measure_calibration", "run_size", "sweep"]
