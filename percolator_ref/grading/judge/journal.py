"""The trusted world's journal: what each client did, as the store's tracer reported it.

A :class:`~.trusted.TrustedWorld` listens to its store's
:class:`~percolator_ref.trace.Tracer`: every row transaction arrives as the
core's :class:`~percolator_ref.trace.RowTransactionEvent` (client, table,
row, step, the cells it changed). The journal keeps one :class:`Entry` per
step a client took: a row transaction (its event, the step's name as the
client declared it: a variant's steps keep theirs), a timestamp taken, a
crash, a store failure, or a step of a world's own (exercise 5's disk). The
events the world ran itself (its setup, a check's hook) are kept with the
next entry, so every event the tracer reported is in the journal, once, in
order (:meth:`Journal.events`).

Counterexamples carry the entries as JSON (:func:`to_json`); ``percolator
replay`` and the replay widget read them back (:func:`from_json`) and build
each frame's cells by applying the changes (:func:`apply`): what a step did
is read from its fields, never from a sentence. Only cells changed are kept,
never a copy of the store: a world's journal is bounded by what its clients
may write (``MAX_WRITTEN``: each version written is kept once, and once more
if erased), by its row-transaction budget (each event names a table and a row
of at most the channel's ``MAX_TEXT`` characters) and by its message budget
(one entry per step).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from percolator_ref.step import Step
from percolator_ref.trace import Change, RowTransactionEvent

from ..channel import ProtocolError, decode, encode
from .protocol_world import TABLE

TIMESTAMP, CRASH, STORE_FAILURE = "timestamp", "crash", "store-failure"
"""The steps that are not row transactions (a world may add its own, e.g. ``"disk"``)."""

STEP_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_:.][a-z0-9]+)*\Z")
MAX_STEP_NAME = 64


def step_name(step) -> str:
    """A row transaction's step as the journal keeps it: ``step`` if it is a step name (a
    paper's step, or a variant's such as ``"one-pc"``, declared or not in this process:
    lower-case words joined by ``-``, ``_``, ``:`` or ``.``), else ``"row-transaction"``.
    A client names its steps; a name that is no step name (an escape, a huge string) is
    not kept."""
    if isinstance(step, str) and len(step) <= MAX_STEP_NAME and STEP_NAME.match(step):
        return step
    return Step.ROW_TRANSACTION.value


@dataclass(frozen=True)
class Entry:
    """One step of one client.

    ``events``: what the step changed: a row transaction's one event, the
    tracer's; a world's own step's (exercise 5's disk call), as the world reports
    them. ``value``: the timestamp taken (``"timestamp"``), what a store failure
    said (``"store-failure"``), or what a world's own step did. ``failure``: a row
    transaction applied whose reply was lost to an injected store failure.
    ``before``: the tracer's events the world ran itself since the previous entry.
    ``clock``: the world's clock after the step.
    """
    client: str
    step: str
    clock: float = 0.0
    events: tuple = ()
    value: Any = None
    failure: Optional[str] = None
    before: tuple = ()

    @property
    def event(self) -> Optional[RowTransactionEvent]:
        """A row transaction's event (None for a step without one)."""
        return self.events[0] if self.events else None

    @property
    def table(self) -> Optional[str]:
        return self.event.table if self.event is not None else None

    @property
    def row(self) -> Optional[str]:
        return self.event.row if self.event is not None else None

    @property
    def changes(self) -> tuple:
        return tuple(c for e in self.events for c in e.changes)

    def where(self) -> str:
        """The row of a row transaction: ``Bob``, or ``table/row`` off the default table."""
        return self.row if self.table == TABLE else f"{self.table}/{self.row}"

    def said(self) -> str:
        """What the client did, in words (for the replay's titles and the feedback)."""
        if self.step == TIMESTAMP:
            return f"took timestamp {self.value!r} from the oracle"
        if self.step == CRASH:
            return "crashed (never answered again)"
        if self.step == STORE_FAILURE:
            return f"met a store failure ({self.value})"
        if self.value is not None:                  # a world's own step says what it did
            return f"{self.step} {self.value}"
        if self.event is not None:
            lost = f", then met a store failure ({self.failure})" if self.failure else ""
            return f"{self.step} {self.where()}{lost}"
        return self.step


class Journal:
    """The entries of one world, and the tracer's events not yet in one (``loose``)."""

    def __init__(self):
        self.entries: list = []
        self.loose: list = []

    def heard(self, event: RowTransactionEvent) -> None:
        """The tracer's subscriber: keep ``event`` until the next entry."""
        self.loose.append(event)

    def event_of(self, rt, heard: int) -> tuple:
        """The tracer's event of the row transaction ``rt``, among the loose events after
        the first ``heard``, in a tuple: () if it applied nothing."""
        return tuple(e for e in self.loose[heard:] if e.client == rt.client
                     and e.table == rt.table and e.row == rt.row)[:1]

    def add(self, client: str, step: str, clock: float, events=(), **fields) -> Entry:
        """Log one step of ``client``; ``events``: what it changed (a row transaction's
        event, one of ``loose``). The loose events before them go with it (``before``)."""
        own = [id(e) for e in events]
        at = next((i for i, e in enumerate(self.loose) if id(e) in own), len(self.loose))
        entry = Entry(client, step, clock, tuple(events), before=tuple(self.loose[:at]),
                      **fields)
        self.loose = [e for e in self.loose[at:] if id(e) not in own]
        self.entries.append(entry)
        return entry

    def events(self) -> list:
        """Every event in the journal, in order: what the tracer reported since the journal
        began (and a world's own steps' events)."""
        found = []
        for entry in self.entries:
            found += list(entry.before) + list(entry.events)
        return found + self.loose


# -- the counterexample's steps: JSON, and back ---------------------------------------------

def to_json(entries) -> list:
    """The entries as JSON data (a counterexample's ``steps``): per step its ``client``,
    ``step``, ``clock`` and ``events`` (``table``, ``row``, ``changes``: ``[column, ts, old,
    new]``, values encoded as the channel encodes them, ``new`` None: erased; a row
    transaction has one); ``value``, ``failure`` and ``before`` (the events the world ran
    itself, each with its ``client`` and ``step`` too) where there are any."""
    steps = []
    for entry in entries:
        step = {"client": entry.client, "step": entry.step, "clock": entry.clock,
                "events": [_event_json(e) for e in entry.events]}
        if entry.value is not None:
            step["value"] = encode(entry.value)
        if entry.failure is not None:
            step["failure"] = entry.failure
        if entry.before:
            step["before"] = [dict(_event_json(e), client=str(e.client), step=str(e.step))
                              for e in entry.before]
        steps.append(step)
    return steps


def _event_json(event: RowTransactionEvent) -> dict:
    return {"table": event.table, "row": event.row,
            "changes": [[c.column, c.ts, encode(c.old), encode(c.new)] for c in event.changes]}


def from_json(i: int, step) -> Entry:
    """Step ``i`` of a counterexample (:func:`to_json`'s) as an Entry; ValueError naming the
    step if a field is missing or malformed (a file may hold anything)."""
    try:
        client, name = _text(step["client"]), _text(step["step"])
        events = tuple(_event(client, name, e) for e in _list(step["events"]))
        before = tuple(_event(_text(e["client"]), _text(e["step"]), e)
                       for e in _list(step.get("before", [])))
        failure = step.get("failure")
        return Entry(client, name, float(step.get("clock") or 0.0), events,
                     decode(step["value"]) if "value" in step else None,
                     None if failure is None else _text(failure), before)
    except (KeyError, TypeError, ValueError, ProtocolError) as exc:
        raise ValueError(f"step {i + 1} is malformed ({type(exc).__name__}: {exc})"[:300]) from None


def _event(client: str, step: str, data) -> RowTransactionEvent:
    changes = tuple(Change(_text(column), _ts(ts), decode(old), decode(new))
                    for column, ts, old, new in _list(data["changes"]))
    return RowTransactionEvent(0, client, _text(data["table"]), _text(data["row"]), step, (),
                               changes)


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    return value


def _ts(value) -> int:
    if type(value) is not int:
        raise TypeError(f"a timestamp must be an int, got {type(value).__name__}")
    return value


def _list(value) -> list:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def apply(dump: dict, event: RowTransactionEvent) -> dict:
    """The store's dump (``{table: {row: {column: [(ts, value), ...]}}}``, newest first)
    after ``event``'s changes, as a new dict (``dump`` is left as it was)."""
    if not event.changes:
        return dump
    rows = dict(dump.get(event.table, {}))
    columns = dict(rows.get(event.row, {}))
    for change in event.changes:
        versions = dict(columns.get(change.column, []))
        if change.erased:
            versions.pop(change.ts, None)
        else:
            versions[change.ts] = change.new
        if versions:
            columns[change.column] = sorted(versions.items(), key=lambda v: v[0], reverse=True)
        else:
            columns.pop(change.column, None)
    if columns:
        rows[event.row] = columns
        rows = dict(sorted(rows.items()))          # the store's rows are sorted
    else:
        rows.pop(event.row, None)
    found = dict(dump)
    if rows:
        found[event.table] = rows
    else:
        found.pop(event.table, None)
    return found
