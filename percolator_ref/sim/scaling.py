"""TPC-E scaling by simulation: the real workload on 1 to thousands of simulated machines.

For each number of machines, :func:`simulate` loads a TPC-E-style database
sized to the machines (``customers_per_machine`` and
``securities_per_machine``; a fixed number of ``brokers``, so each broker
serves more customers as the system grows), starts ``clients_per_machine``
emulator clients per machine, each a simulated process running the real
:class:`~percolator_ref.workloads.tpce.Tpce` transactions (each machine with
its own market emulator: one Market-Feed at a time per machine; on the broker
fix's side rows, with a periodic aggregator on machine 0, unless
``broker_fix=False``), and measures over a window of simulated time after
a warm-up (the pipeline of orders and results fills first):

- ``tpsE``: Trade-Results committed per simulated second;
- ``abort_rate``: aborted attempts / attempts (all transaction types);
- ``oracle_utilization``: the oracle's busy fraction;
- and, to explain them, the other resources' utilization, the oracle's mean
  batch and the transactions' latency.

After the window the clients finish the transaction they are in, the
pending trades are drained and the workload's invariants are checked
(:meth:`Tpce.check_invariants`). A size below ``reference_machines`` is
measured as several independent runs (other seeds) pooled, so that every
point counts about as many trades (:func:`run_size`). :func:`sweep` runs
several sizes and adds ``efficiency = tpsE(n) / (n * tpsE(1))`` (with the
smallest size in place of 1 when the sweep does not start there).

Everything runs on simulated time in one deterministic order, so the points
depend only on the settings (the seed included) and the calibration.
"""
from __future__ import annotations

import gc
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from ..workloads.tpce import Tpce, TpceConfig, percentile
from .calibration import Calibration
from .world import ClientState, SimulatedCluster

THREAD_STACK_BYTES = 1 << 20      # many client threads: a small stack each


@dataclass(frozen=True)
class ScaleSettings:
    """The simulated system and run; see the module docstring. Times in simulated seconds."""
    clients_per_machine: int = 16
    customers_per_machine: int = 20
    securities_per_machine: int = 10
    brokers: int = 10
    worker_cores: int = 1
    tablet_server_cores: int = 1
    warmup_s: float = 0.015
    measure_s: float = 0.005
    reference_machines: int = 100           # smaller sizes: several runs (see replicas)
    aggregate_period_s: float = 0.002
    broker_fix: bool = True
    oracle_batching: bool = True
    seed: int = 0
    truetime_epsilon_us: Optional[int] = None   # None: the oracle; else TrueTime with this ε

    def __post_init__(self):
        for name in ("clients_per_machine", "customers_per_machine", "securities_per_machine",
                     "brokers", "worker_cores", "tablet_server_cores", "reference_machines"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name in ("warmup_s", "measure_s", "aggregate_period_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        for name in ("broker_fix", "oracle_batching"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        eps = self.truetime_epsilon_us
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, int) or eps < 0):
            raise ValueError(f"truetime_epsilon_us must be None or an int >= 0, got {eps!r}")

    def tpce_config(self, machines: int, replica: int = 0) -> TpceConfig:
        """The database for ``machines`` machines (each replica its own seed)."""
        return TpceConfig(customers=machines * self.customers_per_machine,
                          securities=machines * self.securities_per_machine,
                          brokers=self.brokers, broker_fix=self.broker_fix,
                          aggregation="periodic", seed=self.seed * 1_000_003 + replica)


class Window:
    """What one simulated run measured inside its window (raw counts, to be pooled)."""

    def __init__(self, w: Tpce, start: float, end: float):
        self.w, self.start, self.end = w, start, end
        self.marks: dict = {}
        self.latencies: list = []
        self.resources: dict = {}
        self.violations: list = []

    def mark(self, name: str) -> None:
        s = self.w.stats
        self.marks[name] = (s.trade_results, s.committed.copy(), s.aborted.copy())

    def counts(self) -> dict:
        """Trade-Results, commits and aborts (all, and Trade-Result's) inside the window."""
        (t0, c0, a0), (t1, c1, a1) = self.marks["start"], self.marks["end"]
        return {"trade_results": t1 - t0, "commits": sum((c1 - c0).values()),
                "aborts": sum((a1 - a0).values()),
                "tr_commits": c1["trade_result"] - c0["trade_result"],
                "tr_aborts": a1["trade_result"] - a0["trade_result"]}

    def record_resources(self, world: SimulatedCluster) -> None:
        oracle = world.oracle
        self.resources = {
            "oracle": oracle.resource.utilization(), "oracle_requests": oracle.requests,
            "oracle_timestamps": oracle.timestamps,
            "lock_service": world.lock_service.utilization(),
            "tablet_server": mean(m.tablet_server.utilization() for m in world.machines),
            "worker_cpu": mean(m.cpu.utilization() for m in world.machines)}


def start_processes(world: SimulatedCluster, w: Tpce, settings: ScaleSettings,
                    window: Window, replica: int) -> None:
    """The emulator clients (and the broker fix's aggregator) as simulated processes."""
    sim, clock = world.sim, world.sim.clock
    start, end = window.start, window.end

    def client(process) -> None:
        rng, feed_lock = process.data.rng, process.data.machine.feed_lock
        while sim.now < end:
            began = sim.now
            w.emulate_one(rng, clock.sleep, feed_lock, give_up=lambda: sim.now >= end)
            if start <= began and sim.now <= end:
                window.latencies.append(sim.now - began)

    def aggregator(process) -> None:
        while sim.now < end:
            w.aggregate(sleep=clock.sleep)
            clock.sleep(settings.aggregate_period_s)

    for m, machine in enumerate(world.machines):
        for c in range(settings.clients_per_machine):
            rng = random.Random(f"{settings.seed}/{replica}/{m}/{c}")
            sim.spawn(f"client-{m}-{c}", client, ClientState(machine, rng))
    if settings.broker_fix:
        sim.spawn("aggregator", aggregator, ClientState(world.machines[0], None))
    sim.at(start, window.mark, "start")
    sim.at(end, window.mark, "end")


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


@contextmanager
def gc_paused():
    """No cyclic garbage collection inside (it would walk the whole database again and
    again); collect once after. Changes the speed only, never the results."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.collect()


def simulate(machines: int, settings: ScaleSettings, calibration: Calibration,
             replica: int = 0, on_progress: Optional[Callable[[float], None]] = None,
             carrier: Optional[str] = None) -> Window:
    """One simulated run of ``machines`` machines; its :class:`Window`, violations included.
    ``on_progress(fraction of the simulated time done)`` is called now and then;
    ``carrier`` is the engine's (threads or greenlets: the same results)."""
    window = Window(None, settings.warmup_s, settings.warmup_s + settings.measure_s)
    world = SimulatedCluster(machines, calibration, worker_cores=settings.worker_cores,
                             tablet_server_cores=settings.tablet_server_cores,
                             oracle_batching=settings.oracle_batching,
                             window=(window.start, window.end), carrier=carrier,
                             truetime_epsilon_us=settings.truetime_epsilon_us)
    w = window.w = Tpce(world.cluster, settings.tpce_config(machines, replica))
    loaded_at = world.sim.now             # TrueTime's waits move the clock while loading
    window.start, window.end = window.start + loaded_at, window.end + loaded_at
    world.set_window((window.start, window.end))
    if on_progress is not None:
        world.sim.on_event = lambda sim: on_progress(min(sim.now / window.end, 1.0))
    world.attach()
    previous = threading.stack_size(THREAD_STACK_BYTES)
    try:
        start_processes(world, w, settings, window, replica)
    finally:
        threading.stack_size(previous)
    world.sim.run()
    world.detach()
    window.record_resources(world)
    w.drain()
    window.violations = w.check_invariants()
    return window


def replicas(machines: int, settings: ScaleSettings) -> int:
    """How many independent runs measure this size: enough to total ``reference_machines``."""
    return -(-settings.reference_machines // machines)


def point(machines: int, runs: list) -> dict:
    """The size's figures, pooled over its runs (counts summed, utilizations averaged)."""
    n = {k: sum(r.counts()[k] for r in runs) for k in runs[0].counts()}
    res = {k: mean(r.resources[k] for r in runs) for k in runs[0].resources}
    attempts, tr_attempts = n["commits"] + n["aborts"], n["tr_commits"] + n["tr_aborts"]
    latencies_ms = [x * 1000 for r in runs for x in r.latencies]
    violations = [v for r in runs for v in r.violations]
    return {
        "machines": machines, "runs": len(runs),
        "tpsE": round(n["trade_results"] / sum(r.end - r.start for r in runs), 1),
        "abort_rate": round(n["aborts"] / attempts, 4) if attempts else 0.0,
        "trade_result_abort_rate": round(n["tr_aborts"] / tr_attempts, 4) if tr_attempts else 0.0,
        "oracle_utilization": round(res["oracle"], 4),
        "oracle_mean_batch": (round(res["oracle_timestamps"] / res["oracle_requests"], 2)
                              if res["oracle_requests"] else 0.0),
        "lock_service_utilization": round(res["lock_service"], 4),
        "tablet_server_utilization": round(res["tablet_server"], 4),
        "worker_cpu_utilization": round(res["worker_cpu"], 4),
        "latency_ms_p50": round(percentile(latencies_ms, 50), 3),
        "latency_ms_p99": round(percentile(latencies_ms, 99), 3),
        "transactions": n["commits"], "trade_results": n["trade_results"],
        "invariants_ok": not violations, "violations": violations[:5]}


def run_size(machines: int, settings: ScaleSettings, calibration: Calibration,
             on_progress: Optional[Callable[[float], None]] = None,
             carrier: Optional[str] = None) -> dict:
    """The point for ``machines`` machines (see :func:`replicas` and :func:`point`)."""
    if isinstance(machines, bool) or not isinstance(machines, int) or machines < 1:
        raise ValueError(f"machines must be an int >= 1, got {machines!r}")
    count = replicas(machines, settings)
    runs = []
    with gc_paused():
        for r in range(count):
            report = None if on_progress is None else (lambda f, r=r: on_progress((r + f) / count))
            runs.append(simulate(machines, settings, calibration, r, report, carrier))
    return point(machines, runs)


def efficiencies(points: list) -> None:
    """Add ``efficiency`` to each point, relative to the smallest size's tpsE per machine."""
    base = min(points, key=lambda p: p["machines"])
    per_machine = base["tpsE"] / base["machines"]
    for p in points:
        p["efficiency"] = round(p["tpsE"] / (p["machines"] * per_machine), 4) if per_machine else 0.0


class NoBar:
    """The progress bar :func:`sweep` updates when ``progress`` is off. Not a disabled tqdm:
    building one starts tqdm's monitor thread, and where threads cannot start (Pyodide, the
    browser site) it warns on stderr under the notebook's cell."""
    n = 0.0

    def update(self, amount: float) -> None:
        self.n += amount

    def set_postfix_str(self, text: str) -> None:
        pass

    def __enter__(self) -> "NoBar":
        return self

    def __exit__(self, *exc) -> None:
        return None


def sweep(sizes: list, settings: ScaleSettings, calibration: Calibration,
          progress: bool = False, carrier: Optional[str] = None) -> dict:
    """Run every size; ``{"points": [...], "settings": ..., "wall_seconds": [...]}``."""
    from tqdm.auto import tqdm
    sizes = sorted(set(sizes))
    cost = {n: max(n, settings.reference_machines) for n in sizes}
    points, wall = [], []
    with (tqdm(total=sum(cost.values()), desc="simulated machines", leave=False,
               bar_format="{l_bar}{bar}| {n:.0f}/{total} machine-units "
               "[{elapsed}<{remaining}{postfix}]") if progress else NoBar()) as bar:
        for n in sizes:
            done = bar.n
            bar.set_postfix_str(f"{n} machines")
            t0 = time.perf_counter()
            report = (lambda f, done=done, n=n: bar.update(done + cost[n] * f - bar.n))
            points.append(run_size(n, settings, calibration, report, carrier))
            wall.append(round(time.perf_counter() - t0, 2))
            bar.update(done + cost[n] - bar.n)
    efficiencies(points)
    return {"points": points, "settings": asdict(settings), "wall_seconds": wall}
