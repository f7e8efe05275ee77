"""The trusted world's journal (issue 27, item 5): one record, the store's tracer's events.

The world logs each step a client took as the tracer reported it (step, client, row,
cells changed); counterexamples, ``percolator replay`` and the replay widget are built
from those events, never from a sentence, and a variant's step keeps its name even
where the grader never imported the variant (the sandbox's child did).
"""
import time
from unittest import mock

import pytest

from percolator_ref.grading.judge import ex01_snapshot_read
from percolator_ref.grading.framework import Fail
from percolator_ref.grading.judge.interactive import Counterexample, Trial
from percolator_ref.grading.judge.journal import from_json, step_name, to_json
from percolator_ref.grading.judge.protocol_world import TABLE
from percolator_ref.grading.judge.replay import Replay, save
from percolator_ref.grading.judge.trusted import Hub, Participant, TrustedWorld
from percolator_ref.model import data_col, lock_col
from percolator_ref.stores import steps as declared
from percolator_ref.transaction import Transaction

T0 = 100
VARIANT_STEPS = ("one-pc", "acquire-pessimistic-lock")


def writer(Answer, cluster, values):
    """A reference writer (exercise 1's role)."""
    return ex01_snapshot_read.exercise.roles["writer"](Answer, cluster, values)


def variant_steps(Answer, cluster, start):
    """What a variant's client sends: row transactions named by the variant's steps
    (one-phase commit's, a pessimistic lock's), each writing a lock and data."""
    from percolator_ref.model import Cell, Lock, WriteKind
    for step, row in zip(VARIANT_STEPS, ("Bob", "Joe")):
        with cluster.bigtable.row_transaction(TABLE, row, client="V", step=step) as rt:
            rt.write(data_col("bal"), start, 1)
            rt.write(lock_col("bal"), start, Lock(start, Cell(TABLE, "Bob", "bal"), row == "Bob",
                                                  "V", WriteKind.PUT))
    return True


ROLES = dict(ex01_snapshot_read.exercise.roles, variant=variant_steps)


def world() -> TrustedWorld:
    hub = Hub(None, ROLES)
    return TrustedWorld(hub, T0, time.monotonic() + 60)


def test_the_journal_holds_every_event_the_tracer_reported_in_order():
    """Setup, each client's row transactions and the settling reader: the journal's events
    are the tracer's, the same objects in the same order; each client step's event is its
    own, with the step's name, client and row."""
    w = world()
    with w.cluster.tracer.record() as reported:
        w.committed({("Bob", "bal"): 5, ("Joe", "bal"): 7}, T0 + 1, T0 + 2)
        w.run([Participant("W", "writer", ([["Bob", "bal", 6], ["Joe", "bal", 8]],), "trusted"),
               Participant("R", "reader", ([["Bob", "bal"], ["Joe", "bal"]],), "trusted")],
              FirstReady())
        w.settle()
    events = w.journal.events()
    assert len(events) == len(reported) > 4
    assert all(a is b for a, b in zip(events, reported))
    steps = [(e.client, e.step, e.row) for e in w.log if e.event is not None]
    assert ("W", "prewrite-primary", "Bob") in steps and ("R", "get", "Joe") in steps
    assert all(e.event.client == e.client and e.event.step == e.step for e in w.log if e.event)
    assert [e.client for e in w.log[0].before] == ["world", "world"]      # the setup
    assert w.journal.loose and {e.client for e in w.journal.loose} == {"settle"}


def test_the_replays_cells_are_the_stores_after_each_step():
    """The replay applies the recorded changes in order: after each step its cells equal the
    store's at that step (read from the store while the run went)."""
    w = world()
    dumps, add = [], w.journal.add

    def add_and_dump(*args, **kwargs):
        entry = add(*args, **kwargs)
        dumps.append(w.cluster.bigtable.dump())
        return entry
    w.journal.add = add_and_dump
    w.committed({("Bob", "bal"): 5, ("Joe", "bal"): 7}, T0 + 1, T0 + 2)
    w.run([Participant("W", "writer", ([["Bob", "bal", 6], ["Joe", "bal", None]],), "trusted")],
          FirstReady())
    shown = Replay({"check": "c", "failure": "f", "steps": to_json(w.log)})
    assert len(shown.frames) == len(dumps) > 3
    assert [f.dump for f in shown.frames] == dumps
    erased = [f for f in shown.frames if any(c.erased for e in f.events for c in e.changes)]
    assert erased and "~" in repr(erased[0].table)          # the commit erased the locks


class FirstReady:
    """A chooser: the first waiting client moves (one schedule)."""

    def choose(self, ready, world):
        return "go", ready[0]


def failing_variant_run() -> dict:
    """A family whose only client runs variant steps, judged to fail: the counterexample."""
    trial = Trial(Hub(None, ROLES), time.monotonic() + 60, {"t0": T0})

    def judge(w, clients):
        raise Fail("the variant left its locks behind")
    with pytest.raises(Counterexample) as failed:
        trial.explore(lambda w: [Participant("V", "variant", (T0 + 1,), "trusted")], judge)
    return {"check": "a variant", "failure": str(failed.value), "steps": to_json(failed.value.steps)}


def test_a_variants_steps_keep_their_names_in_the_replay(tmp_path, capsys):
    """The grader never imported the variants (their steps are undeclared here, as in the
    grader's process when only the sandbox's child imported them): the counterexample, the
    widget's frames and ``percolator replay`` still name one-pc and the pessimistic lock."""
    from percolator_ref.commands import main
    with mock.patch.dict(declared._DECLARED):
        for name in VARIANT_STEPS:
            declared._DECLARED.pop(name, None)
        assert not any(declared.is_step(name) for name in VARIANT_STEPS)
        example = failing_variant_run()
    named = [(s["client"], s["step"], [e["row"] for e in s["events"]]) for s in example["steps"]]
    assert ("V", "one-pc", ["Bob"]) in named and ("V", "acquire-pessimistic-lock", ["Joe"]) in named
    titles = [f.title for f in Replay(example).frames]
    assert any(t.endswith("V one-pc Bob") for t in titles), titles
    assert any(t.endswith("V acquire-pessimistic-lock Joe") for t in titles), titles
    assert main(["replay", str(save(example, tmp_path / "cx.json"))]) == 0
    printed = capsys.readouterr().out
    assert "V one-pc Bob" in printed and "V acquire-pessimistic-lock Joe" in printed
    assert "row-transaction" not in printed


@pytest.mark.parametrize("sent, kept", [
    ("one-pc", "one-pc"), ("acquire-pessimistic-lock", "acquire-pessimistic-lock"),
    ("prewrite-primary", "prewrite-primary"), ("check_txn", "check_txn"),
    ("one-pc\x1b]0;pwned\x07", "row-transaction"), ("x" * 65, "row-transaction"),
    ("Prewrite", "row-transaction"), ("", "row-transaction"), (7, "row-transaction"),
    ("get\nR took timestamp 1", "row-transaction")])
def test_a_client_names_its_steps_only_with_step_names(sent, kept):
    assert step_name(sent) == kept


def test_a_malformed_step_in_a_file_is_named():
    with pytest.raises(ValueError, match="step 3 is malformed"):
        from_json(2, {"client": "A", "step": "get", "events": [{"table": "t", "row": "r",
                                                                "changes": [["c", "1", 0, 1]]}]})
    with pytest.raises(ValueError, match="step 1 is malformed"):
        from_json(0, {"client": "A", "step": "get"})


def test_what_the_world_runs_itself_waits_for_the_next_step():
    """A transaction the world runs on its own cluster (a check's hook, the settling
    reader) is in the journal as the tracer reported it, kept for the next client step."""
    w = world()
    with w.cluster.tracer.record() as reported:
        t = Transaction(w.cluster, "T")
        t.set("Bob", "bal", 1)
        assert t.commit()
    assert reported and w.journal.loose == reported


def test_a_row_named_with_spaces_and_slashes_replays_at_its_row():
    """The row is the event's, not the last word of a sentence (``rsplit``/``rpartition``
    read "prewrite-primary Ann Lee/x" as row "x" of table "Lee")."""
    w = world()
    w.run([Participant("W", "writer", ([["Ann Lee/x", "bal", 6], ["Joe", "bal", 8]],), "trusted")],
          FirstReady())
    frames = Replay({"check": "c", "failure": "f", "steps": to_json(w.log)}).frames
    prewrite = next(f for f in frames if "prewrite-primary" in f.title)
    assert prewrite.title.endswith("W prewrite-primary Ann Lee/x")
    assert [(e.table, e.row) for e in prewrite.events] == [(TABLE, "Ann Lee/x")]
    assert "*" in repr(prewrite.table)



def test_escapes_a_client_wrote_reach_the_replay_escaped():
    """A value and a row name carrying terminal escapes, journaled as written: the file
    keeps them as they are, the transcript prints them escaped."""
    w = world()
    evil = "\x1b]0;pwned\x07\x9b31m\rPASS"
    w.run([Participant("W", "writer", ([[f"Bob{evil}", "bal", evil], ["Joe", "bal", 1]],),
                       "trusted")], FirstReady())
    example = {"check": "c", "failure": "f", "steps": to_json(w.log)}
    assert any(c[3] == evil for s in example["steps"] for e in s["events"] for c in e["changes"])
    text = Replay(example).transcript()
    assert [c for c in text if c != "\n" and (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0)] == []
    assert "\\x1b]0;pwned\\x07" in text and f"prewrite-primary Bob\\x1b]0;pwned" in text


def step_flood(Answer, cluster, steps):
    """Fill the store with 1,600 cells (16 rows of 100), then take ``steps`` timestamps: a
    step each."""
    for k in range(16):
        with cluster.bigtable.row_transaction("t", f"r{k}", client="F") as rt:
            for column in range(100):
                rt.write(f"c{column}", 1, "v")
    return [cluster.oracle.get_timestamp() for _ in range(steps)][-1]


def flooded(steps: int):
    """``(world, bytes allocated and still held)`` after :func:`step_flood` of ``steps``."""
    import tracemalloc
    w = TrustedWorld(Hub(None, dict(ROLES, flood=step_flood)), T0, time.monotonic() + 120)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        c = w.spawn(Participant("F", "flood", (steps,), "trusted"))
        w.handle(c, c.pending)                      # its first step, then every other
        w.drive(c, alone=True)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert c.answer == {"value": T0 + steps - 1} and len(w.log) == 16 + steps
    return w, held


def test_a_flood_of_steps_over_a_full_store_keeps_the_journal_small():
    """1,000 steps after 1,600 cells were written: the journal keeps what each step changed,
    not the store after it. The 1,000 steps hold well under 1 KiB each (a copy of the
    store's cells per step held about 700 kB each, measured the same way)."""
    _, few = flooded(1)
    _, many = flooded(1001)
    per_step = (many - few) / 1000
    print(f"{per_step:.0f} bytes held per step")
    assert per_step < 1024, f"{per_step:.0f} bytes held per step"
