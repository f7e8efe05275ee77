"""Scenarios whose full row-transaction trace is pinned by tests/data/protocol_traces.json.

The redesign of issue 12 had to keep the protocol's behaviour: the same cells,
the same trace sentences, the same Figure 4 frames. ``capture()`` runs each
scenario on a fresh deterministic cluster and returns every trace event as
plain JSON; the test compares it with the file recorded before the redesign.
Run ``python tests/trace_golden.py`` to print the capture (never to overwrite
the file silently: the comparison is the point).
"""
from __future__ import annotations

import json

from percolator_ref import ClientCrash, Cluster, ManualClock


def _figure4(cluster):
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    assert t.commit()
    t = cluster.begin()
    bob, joe = t.get("Bob", "bal"), t.get("Joe", "bal")
    t.set("Bob", "bal", bob - 7)
    t.set("Joe", "bal", joe + 7)
    assert t.commit()


def _crash_then_read(point):
    def scenario(cluster):
        t = cluster.begin()
        t.set("Bob", "bal", 10)
        t.set("Joe", "bal", 2)
        t.set("Ann", "bal", 1)
        try:
            t.commit(crash_after=point)
        except ClientCrash:
            pass
        r = cluster.begin()
        r.get("Joe", "bal")
        r.get("Bob", "bal")
        r.scan()
        r.commit()
    return scenario


def _conflicts(cluster):
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    assert t.commit()
    a, b = cluster.begin(), cluster.begin()
    a.set("Bob", "bal", 1)
    b.set("Joe", "bal", 5)
    b.set("Bob", "bal", 2)
    assert a.commit()
    assert not b.commit()          # write record after its start: conflict
    c, d = cluster.begin(), cluster.begin()
    c.set("Ann", "bal", 1)
    c.set("Bob", "bal", 3)
    try:
        c.commit(crash_after="prewrite")
    except ClientCrash:
        pass
    d.set("Bob", "bal", 4)
    assert not d.commit()          # a lock (of a dead client): cleaned up, still aborts
    e = cluster.begin()
    e.delete("Bob", "bal")
    assert e.commit()
    f = cluster.begin()
    assert f.get("Bob", "bal") is None


SCENARIOS = {
    "figure4": _figure4,
    "crash-prewrite-primary": _crash_then_read("prewrite-primary"),
    "crash-prewrite": _crash_then_read("prewrite"),
    "crash-commit-primary": _crash_then_read("commit-primary"),
    "crash-after-2": _crash_then_read(2),
    "conflicts": _conflicts,
}


def _plain(value):
    return value if isinstance(value, (int, str, float, bool, type(None))) else str(value)


def capture(backend=None) -> dict:
    """``{scenario: [event, ...]}`` with every event as plain JSON.

    ``backend``: None (in memory, as recorded) or a store URL; each scenario
    then runs under a key prefix of its own (the URL's prefix + ``-g<i>``).
    """
    out = {}
    for i, (name, scenario) in enumerate(SCENARIOS.items()):
        cluster = Cluster(first_timestamp=5, clock=ManualClock(), backend=_scenario_url(backend, i))
        with cluster.tracer.record() as events:
            scenario(cluster)
        out[name] = [{
            "client": e.client, "table": e.table, "row": e.row, "step": str(e.step),
            "reads": list(e.reads),
            "changes": [[c.column, c.ts, _plain(c.old), _plain(c.new)] for c in e.changes],
            "note": e.note} for e in events]
    return out


def _scenario_url(backend, index: int):
    if backend is None:
        return None
    from urllib.parse import parse_qs, urlparse
    from percolator_ref.stores import url_with
    prefix = parse_qs(urlparse(backend).query).get("prefix", ["pc"])[-1]
    return url_with(backend, prefix=f"{prefix}-g{index}")


if __name__ == "__main__":
    print(json.dumps(capture(), indent=1))
