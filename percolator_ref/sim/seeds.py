"""Several seeds per point: the scaling sweep's mean and 95% interval per size.

:func:`sweep_seeds` runs :func:`~percolator_ref.sim.scaling.sweep` once per
seed (``seed``, ``seed + 1``, ...) and reports, for every size, the mean of
each figure over the seeds and a Student-t 95% interval of that mean, with
the per-seed points kept beside them. :func:`slower_oracle` scales the
oracle's service times, so that a sweep over few machines puts on the oracle
the load of a sweep over many (a deployment ``k`` times the size, against an
oracle ``k`` times as fast, offers the same load relative to its capacity).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, replace

from .calibration import Calibration
from .scaling import ScaleSettings, sweep

FIGURES = ("tpsE", "efficiency", "abort_rate", "trade_result_abort_rate", "oracle_utilization",
           "oracle_mean_batch", "tablet_server_utilization", "worker_cpu_utilization",
           "lock_service_utilization", "latency_ms_p50")
# Student's t, two-sided 95%, by degrees of freedom (1.96 beyond the table)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}


def interval95(values: list) -> list:
    """``[low, high]``: the Student-t 95% interval of the mean of ``values`` (two or more)."""
    n = len(values)
    if n < 2:
        raise ValueError(f"an interval needs two or more values, got {n}")
    t = T95.get(n - 1) or next((T95[k] for k in sorted(T95) if k >= n - 1), 1.96)
    m, half = statistics.fmean(values), t * statistics.stdev(values) / math.sqrt(n)
    return [round(m - half, 4), round(m + half, 4)]


def slower_oracle(calibration: Calibration, factor: float) -> Calibration:
    """``calibration`` with the oracle's time per request and per timestamp times ``factor``."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1:
        raise ValueError(f"factor must be a number >= 1, got {factor!r}")
    if factor == 1:
        return calibration                # the measured oracle, named as measured
    return replace(calibration, oracle_request_s=calibration.oracle_request_s * factor,
                   oracle_timestamp_s=calibration.oracle_timestamp_s * factor,
                   source=f"{calibration.source}; oracle {factor:g}x slower")


def pooled(n: int, per_seed: list) -> dict:
    """One size's mean figures over the seeds, each with its ``_ci95``."""
    point = {"machines": n, "seeds": len(per_seed),
             "invariants_ok": all(p["invariants_ok"] for p in per_seed)}
    for key in FIGURES:
        values = [p[key] for p in per_seed]
        point[key] = round(statistics.fmean(values), 4)
        point[f"{key}_ci95"] = interval95(values)
    return point


def sweep_seeds(sizes: list, settings: ScaleSettings, calibration: Calibration, seeds: int,
                progress: bool = False, carrier=None) -> dict:
    """The sweep under ``seeds`` seeds; per size the mean, its 95% interval, and each seed's point."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2:
        raise ValueError(f"seeds must be an int >= 2, got {seeds!r}")
    runs = [sweep(sizes, replace(settings, seed=settings.seed + s), calibration, progress, carrier)
            for s in range(seeds)]
    ordered = sorted(set(sizes))
    per_size = {n: [r["points"][i] for r in runs] for i, n in enumerate(ordered)}
    return {"points": [pooled(n, per_size[n]) for n in ordered],
            "per_seed": {str(n): per_size[n] for n in ordered},
            "settings": asdict(settings), "seeds": seeds,
            "wall_seconds": [sum(r["wall_seconds"][i] for r in runs) for i in range(len(ordered))]}


def merge_seed_runs(runs: list) -> dict:
    """One several-seeds result from single-seed sweeps run apart: exactly what
    :func:`sweep_seeds` (and ``percolator scale --seeds N``) gives for those seeds.

    ``runs``: the outputs of ``percolator scale --json --seed s`` for s = k, k + 1, ...,
    k + N - 1 (any order), with the same sizes, settings, oracle slowdown and calibration, so
    a sweep too long for one sitting can run one seed at a time. Raises ``ValueError`` naming
    what differs."""
    if len(runs) < 2:
        raise ValueError(f"runs: two or more single-seed runs are needed, got {len(runs)}")
    if any("per_seed" in r for r in runs):
        raise ValueError("runs: each must be a single-seed run (no per_seed)")
    runs = sorted(runs, key=lambda r: r["settings"]["seed"])
    first = runs[0]
    for s, r in enumerate(runs):
        seed = r["settings"]["seed"]
        if seed != first["settings"]["seed"] + s:
            raise ValueError(f"runs: the seeds must be consecutive; seed {seed} is where seed "
                             f"{first['settings']['seed'] + s} should be")
        other = sorted(k for k in r["settings"] if k != "seed"
                       and r["settings"][k] != first["settings"].get(k))
        if other:
            raise ValueError(f"runs: seed {seed} has other settings: {', '.join(other)}")
        for key in ("oracle_slowdown", "calibration"):
            if r[key] != first[key]:
                raise ValueError(f"runs: seed {seed} has another {key}")
        if [p["machines"] for p in r["points"]] != [p["machines"] for p in first["points"]]:
            raise ValueError(f"runs: seed {seed} has other sizes")
    sizes = [p["machines"] for p in first["points"]]
    per_size = {n: [r["points"][i] for r in runs] for i, n in enumerate(sizes)}
    points = [pooled(n, per_size[n]) for n in sizes]
    return {"points": points, "per_seed": {str(n): per_size[n] for n in sizes},
            "settings": first["settings"], "seeds": len(runs),
            "wall_seconds": [sum(r["wall_seconds"][i] for r in runs) for i in range(len(sizes))],
            "oracle_slowdown": first["oracle_slowdown"], "calibration": first["calibration"],
            "invariants_ok": all(p["invariants_ok"] for p in points)}
