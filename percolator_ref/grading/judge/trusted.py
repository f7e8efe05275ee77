"""The trusted world: the grader's own cluster, serving clients that run elsewhere.

A :class:`TrustedWorld` holds every piece of state (the Bigtable, the oracle,
the lock service, the manual clock) and a record of what happened. Clients
(the student's code in the sandbox, and reference clients the world runs
itself) reach it only by the messages of :mod:`..channel`; the world executes
each one against its own store and logs it. Verdicts read only this record:
what was written, what each request returned, what each client answered.

One client runs at a time. A client's *scheduled* requests (a row
transaction, a timestamp) wait until the scheduler picks that client; its
other requests are answered at once. :meth:`TrustedWorld.run` starts a family
of clients and asks a chooser (:mod:`.schedules`) which pending request goes
next, or which client crashes there: a crashed client is never answered
again (its proxies raise :class:`~..channel.ClientGone`) and its liveness
token is marked crashed. A client that is merely not picked for a while is
a delayed client: the clock moves on under the others' waits.

The world talks to its clients through a :class:`~.hub.Hub`; its record of each
client is a :class:`~.participants.Client`; what every schedule must keep is
judged by :mod:`.invariants`.
"""
from __future__ import annotations

import queue
import time
from typing import Optional

from percolator_ref.checking.checker import TxnRecord
from percolator_ref.errors import StoreUnavailable
from percolator_ref.model import Cell, Lock, TxStatus, Write, check_name, lock_col, split_column
from percolator_ref.viz.printable import escape_text
from percolator_ref.transaction import Transaction

from ..battery import BudgetExceeded
from ..channel import SCHEDULED, check_client_message, encode, encode_row
from ..framework import Fail, require
from .hub import CheckTimeout, Hub, Violation, digest
from .invariants import no_dangling_write_records
from .journal import CRASH, STORE_FAILURE, TIMESTAMP, Journal, step_name
from .participants import Client, Participant, Scope
from .protocol_world import TABLE, World, kind_of

MAX_MESSAGES = 4000          # per run: more means an endless loop
MAX_WRITTEN = 256 << 10      # bytes the clients may write into one world's store
MAX_SLEEP = 3600.0
MAX_NESTING = 4


class TrustedWorld(World):
    """A :class:`~.protocol_world.World` that serves remote clients and logs every step:
    ``log`` is its :class:`~.journal.Journal`'s entries, one per step a client took, made of
    the events its store's tracer reported (``variants``: the cluster's, as
    :class:`~percolator_ref.cluster.Cluster` takes them)."""

    def __init__(self, hub: Hub, first_timestamp: int, deadline: float, ttl: float = 10.0,
                 variants=()):
        super().__init__(first_timestamp, ttl, variants)
        self.hub, self.deadline, self.ttl = hub, deadline, ttl
        self.clients: dict = {}
        self.journal = Journal()
        self.log: list = self.journal.entries
        self.cluster.tracer.subscribe(self.journal.heard)
        self.doomed: set = set()
        self.messages = 0
        self.written = 0                   # bytes the clients wrote into the store
        hub.trusted.history = self.cluster.history
        self.guards = tuple(self.cluster.bigtable.interceptors)    # the row-transaction budget
        self.footprint: Optional[set] = None    # what the transition being run touched
        self.scope = Scope()               # what student clients may write (set by the exercise)

    def committed(self, values: dict, start: int, commit: int) -> None:
        """As :meth:`World.committed`, and recorded in the history the checker reads."""
        super().committed(values, start, commit)
        record = TxnRecord(f"world@{start}", start, commit, TxStatus.COMMITTED)
        record.writes = [(Cell(TABLE, row, column), kind_of(value).name, value)
                         for (row, column), value in values.items()]
        self.cluster.history.records.append(record)

    # -- clients -----------------------------------------------------------------
    def spawn(self, p: Participant) -> Client:
        """Start a client; it runs until its first scheduled request (or its answer)."""
        c = Client(next(self.hub.cids), p.label, p.host, p.crashable)
        self.clients[c.cid] = c
        self.tell(c, {"op": "spawn", "role": p.role, "args": encode(list(p.args)),
                      "ttl": self.ttl})
        self.drive(c)
        return c

    def client(self, role: str, *args, label: str = "you") -> Client:
        """A student client built by ``role``, served alone until it answers."""
        c = Client(next(self.hub.cids), label, "student")
        self.clients[c.cid] = c
        self.tell(c, {"op": "spawn", "role": role, "args": encode(list(args)), "ttl": self.ttl})
        self.drive(c, alone=True)
        return c

    def client_at(self, ts: int, role: str = "txn", *args) -> Client:
        """A student client built by ``role`` that begins at exactly ``ts``: it must have
        taken one timestamp from the oracle, ``ts`` (else the check fails)."""
        self.reach(ts)
        c = self.client(role, *args)
        require(c.timestamps == [ts], f"your transaction took the timestamps {c.timestamps} to "
                                      f"begin; it must take one: {ts}")
        return c

    def call(self, c: Client, method: str, *args, **kwargs) -> dict:
        """Run ``method`` on client ``c``, serving all its requests; its outcome."""
        c.done = False
        self.tell(c, {"op": "call", "method": method, "args": encode(list(args)),
                      "kwargs": encode(kwargs)})
        self.drive(c, alone=True)
        return c.answer

    def drive(self, c: Client, alone: bool = False) -> None:
        """Serve ``c`` until it waits at a scheduled request (``alone``: serve those too)."""
        while not c.done and not c.crashed:
            msg = self.next_message(c)
            if msg["op"] == "answer":
                c.answers.append(msg["outcome"])
                c.done = True
            elif msg["op"] in SCHEDULED and not alone:
                c.pending = msg
                return
            else:
                self.handle(c, msg)

    def next_message(self, c: Client) -> dict:
        """The next message of ``c``; messages of crashed or finished clients are dropped."""
        while True:
            left = self.deadline - time.monotonic()
            try:
                host, raw = self.hub.receive(max(left, 0))
            except queue.Empty:
                self.hub.broken = "timeout"
                raise CheckTimeout(f"{c.label} sent no message for too long") from None
            if raw is None:
                self.hub.broken = "exited"
                raise Violation("the grading process of your code exited")
            try:
                msg = raw if host == "trusted" else check_client_message(raw)
            except Exception as exc:     # noqa: BLE001 - ProtocolError, or a value the codec refused
                self.hub.broken = "protocol"
                raise Violation(f"a malformed message reached the store "
                                f"({_short(exc)})") from None
            sender = self.clients.get(msg["cid"])
            if sender is c and host == c.host:
                self.count()
                return msg
            if sender is None or sender.crashed or sender.done:
                continue
            self.hub.broken = "protocol"
            raise Violation(f"client {sender.label} sent a request out of turn")

    def count(self) -> None:
        self.messages += 1
        if self.messages > MAX_MESSAGES:
            raise Violation(f"more than {MAX_MESSAGES} requests (an endless retry loop?)")

    # -- serving one request ---------------------------------------------------------
    def handle(self, c: Client, msg: dict) -> None:
        """:meth:`serve` ``msg``; any error while serving it (a reply too large to frame,
        a value nested too deeply to encode, ...) is ``c``'s violation of the protocol:
        the check fails, and the student's side is not used again (a fresh one serves
        the next check). A verdict (:class:`~..framework.Fail`), a time limit or a budget
        raised meanwhile stays what it is."""
        try:
            self.serve(c, msg)
        except JUDGED:
            raise
        except Exception as exc:         # noqa: BLE001 - the client's doing, never the grade's end
            if c.host == "student":
                self.hub.broken = "protocol"
            raise Violation(f"a request ({msg.get('op')}) from {c.label} broke the channel's "
                            f"rules: {_short(exc)}") from None

    def tell(self, c: Client, msg: dict) -> None:
        """Send ``msg`` to client ``c``, and remember it: a client is a function of what it
        heard, so its history (a digest per message) stands for its state in
        :meth:`fingerprint`."""
        c.heard.append(self.hub.send(c.host, msg, c.cid, self.deadline))

    def reply(self, c: Client, value, encoder=encode) -> None:
        """Answer ``c``'s request; a trusted client (in this process) gets ``value`` as it is."""
        self.tell(c, {"op": "reply", "value": value if c.host == "trusted" else encoder(value)})

    def touch(self, what: tuple, mode: str) -> None:
        """Record that the transition being run reads (``"r"``) or writes (``"w"``) ``what``:
        ``("row", table, row)``, ``("table", table)`` (every row of it), ``("oracle",)``,
        ``("clock",)``, ``("ls", name)`` (one token of the lock service), ``("history",)``, ``("observers",)``,
        ``("client", label)`` or ``("*",)`` (everything). :mod:`.schedules` reads these
        footprints to tell independent transitions apart."""
        if self.footprint is not None:
            self.footprint.add((what, mode))

    TOUCHES = {"peek": (("oracle",), "r"), "now": (("clock",), "r"), "sleep": (("clock",), "w"),
               "observed": (("observers",), "r"), "disk": (("*",), "w")}

    def serve(self, c: Client, msg: dict) -> None:
        op = msg["op"]
        if op in self.TOUCHES:
            self.touch(*self.TOUCHES[op])
        if op == "row":
            return self.serve_row(c, msg)
        if op == "ts":
            self.touch(("oracle",), "w")
            ts = self.oracle.get_timestamp()
            c.timestamps.append(ts)
            self.note(c, TIMESTAMP, value=ts)
            return self.reply(c, ts)
        if op == "end":
            raise Violation(f"{c.label} ended a row transaction it never began")
        self.reply(c, self.service(c, msg))

    def service(self, c: Client, msg: dict):
        """The answer to an unscheduled request (oracle peek, lock service, clock, rows)."""
        op = msg["op"]
        if op == "peek":
            return self.oracle.peek()
        if op == "now":
            return self.cluster.clock.now()
        if op == "sleep":
            seconds = msg["seconds"]
            if not 0 <= seconds <= MAX_SLEEP:
                raise Violation(f"{c.label} asked to sleep {seconds!r} s")
            self.cluster.clock.advance(seconds)
            return None
        if op == "rows":
            return self.listing(c, msg)
        if op == "observed":
            return self.cluster.observers.watches(msg["table"], msg["column"])
        if op == "disk":
            return self.disk_call(c, msg)
        return self.lock_service(c, msg["fn"], msg["client"])

    def disk_call(self, c: Client, msg: dict):
        """A call on the world's disk; this world has none (exercise 5's world does)."""
        raise Violation(f"{c.label} called a disk, and this world has none")

    def listing(self, c: Client, msg: dict) -> list:
        try:
            for name in ("table", "start", "end"):
                if msg[name] is not None:
                    check_name(msg[name], name)
        except (TypeError, ValueError) as exc:
            raise Violation(f"{c.label} listed rows with a bad name ({exc})") from None
        self.touch(("table", msg["table"]), "r")
        return self.cluster.bigtable.rows(msg["table"], msg["start"], msg["end"])

    def lock_service(self, c: Client, fn: str, name):
        if not isinstance(name, str) or not name or len(name) > 200:
            raise Violation(f"{c.label} called the lock service with a bad client name {name!r}")
        if fn in ("register", "heartbeat"):
            c.names.add(name)
        self.touch(("ls", name), "r" if fn in ("is_alive", "status") else "w")   # one token
        self.touch(("clock",), "r")               # liveness is judged against the clock
        result = getattr(self.cluster.lockservice, fn)(name)
        return result if fn in ("is_alive", "status") else None

    def serve_row(self, c: Client, msg: dict) -> None:
        """One row transaction: hand out the row, serve until ``end``, apply it atomically.
        Its step keeps the name the client gave it (a variant's too), if it is a step name
        (:func:`~.journal.step_name`)."""
        try:
            check_name(msg["table"], "table")
            check_name(msg["row"], "row")
        except (TypeError, ValueError) as exc:
            raise Violation(f"{c.label} opened a row transaction with a bad name ({exc})") from None
        rt = self.cluster.bigtable.row_transaction(msg["table"], msg["row"], client=c.label,
                                                   step=step_name(msg["step"]))
        self.touch(("row", msg["table"], msg["row"]), "r")
        try:
            rt.__enter__()
        except StoreUnavailable as exc:          # an injected store failure: nothing happened
            return self.fail(c, exc)
        try:
            self.hand_out(c, rt)
            end = self.row_end(c)
        except BaseException as exc:
            rt.__exit__(type(exc), exc, None)
            raise
        self.apply(c, rt, end)

    def fail(self, c: Client, exc: Exception, applied=()) -> None:
        """Answer ``c``'s request with a store failure (its proxy raises StoreUnavailable);
        ``applied``: the event of the row transaction that applied before it failed, if any."""
        text = str(exc)[:300]
        if not applied:
            self.note(c, STORE_FAILURE, value=text)
        else:
            self.note(c, applied[0].step, applied, failure=text)
        self.tell(c, {"op": "fail", "text": text})

    def doom(self, c: Client) -> None:
        """``c`` crashes right after the row transaction being applied (an interceptor's use)."""
        self.doomed.add(c.cid)

    def hand_out(self, c: Client, rt) -> None:
        row = _row_value(rt)
        c.seen.extend(v for versions in row.values() for _, v in versions)
        self.reply(c, row, encode_row)

    def row_end(self, c: Client) -> dict:
        """Serve ``c`` inside its open row transaction until it ends it (a row transaction
        nested in it, as the in-memory store allows, is served whole)."""
        self.depth = getattr(self, "depth", 0) + 1
        try:
            while True:
                msg = self.next_message(c)
                if msg["op"] == "end":
                    return msg
                if msg["op"] == "answer" or self.depth > MAX_NESTING:
                    raise Violation(f"{c.label} left a row transaction open")
                self.handle(c, msg)
        finally:
            self.depth -= 1

    def apply(self, c: Client, rt, end: dict) -> None:
        if end["commit"] and end["mutations"] and c.host == "student" and \
                self.scope.refuses(rt.table, rt.row):
            rt.__exit__(Violation, None, None)
            raise Violation(f"{c.label} wrote the row {escape_text(rt.table[:80])}/"
                            f"{escape_text(rt.row[:80])}, outside what this exercise gives your "
                            f"code ({self.scope.describe()})")
        error = self.within_budget(rt, end) if end["commit"] else None
        commit_points = _commit_points(rt, end["mutations"]) if end["commit"] else []
        try:
            for column, ts, value in end["mutations"] if end["commit"] and not error else ():
                rt.write(column, ts, value) if value is not None else rt.erase(column, ts)
        except (TypeError, ValueError) as exc:
            error = exc
        ok = end["commit"] and error is None
        heard = len(self.journal.loose)
        try:
            rt.__exit__(None if ok else Violation, None, None)
        except StoreUnavailable as exc:          # applied, and the reply was lost
            return self.fail(c, exc, self.journal.event_of(rt, heard))
        if error is not None:
            raise Violation(f"{c.label} wrote a bad mutation ({error})")
        if ok and rt.mutations:
            self.touch(("row", rt.table, rt.row), "w")
        if ok:
            c.commits += [(rt.table, rt.row, column, write) for column, write in commit_points]
            c.locked += [(rt.table, rt.row, split_column(col)[0], value)
                         for col, _, value in end["mutations"] if isinstance(value, Lock)]
            self.note(c, rt.step, self.journal.event_of(rt, heard))
        if c.cid in self.doomed:
            return self.crash_client(c)
        self.reply(c, None)

    def within_budget(self, rt, end: dict):
        """None, or a ValueError once the clients have written more than
        :data:`MAX_WRITTEN` bytes into this world's store (its journal keeps every version
        written and erased, and a fingerprint digests the whole store at every decision)."""
        self.written += len(rt.table) + len(rt.row) + sum(
            len(column) + _size(value) for column, _, value in end["mutations"])
        if self.written > MAX_WRITTEN:
            return ValueError(f"more than {MAX_WRITTEN >> 10} KiB written into the store, "
                              f"more than any answer needs")
        return None

    def note(self, c: Client, step: str, events=(), **fields) -> None:
        """Log one step of ``c`` in the journal: ``step`` (a row transaction's, with its
        tracer event), the clock after it, ``fields`` (:class:`~.journal.Entry`'s)."""
        self.journal.add(c.label, str(step), self.cluster.clock.now(), events, **fields)

    # -- families ------------------------------------------------------------------------
    def run(self, participants, chooser) -> list:
        """Run a family of clients, letting ``chooser`` pick each scheduled step."""
        clients = [self.spawn(p) for p in participants]
        executed = getattr(chooser, "executed", None)
        while True:
            ready = [c for c in clients if c.pending is not None]
            if not ready:
                return clients
            action, c = chooser.choose(ready, self)
            self.footprint = {(("client", c.label), "w")}
            records = len(self.cluster.history.records)
            if action == "crash":
                self.crash_client(c)
            else:
                msg, c.pending = c.pending, None
                self.handle(c, msg)
                self.drive(c)
            if len(self.cluster.history.records) != records:
                self.touch(("history",), "w")     # a reference client began a transaction
            if not self.plain():
                self.touch(("*",), "w")           # state this method does not know of
            footprint, self.footprint = frozenset(self.footprint), None
            if executed is not None:
                executed(footprint, c.pending is not None)

    def plain(self) -> bool:
        """Is every piece of this world's state one :meth:`fingerprint` and :meth:`touch`
        know of? Not in a subclass (state of its own) or with interceptors besides the
        row-transaction budget (a check's hook has hidden state)."""
        return (type(self) is TrustedWorld
                and tuple(self.cluster.bigtable.interceptors) == self.guards)

    def fingerprint(self):
        """Everything the rest of a run depends on, hashable; None where unknown.

        Two decision points with equal fingerprints have the same futures: the
        cells, the clock, the oracle, the lock service's tokens (the channel
        reaches no other lock-service state) and the history are equal,
        and each client heard the same messages (a client is a function of what
        it heard; a crashed or finished one never runs again). The history is
        kept as which transactions began, in order: what a record holds follows
        from what its client heard (a crashed trusted client has closed its
        record before :meth:`crash_client` returns). A world with
        interceptors of its own (a check's hook has hidden state) or a subclass
        with state of its own gives None: such a run is never merged with another.
        """
        if not self.plain():
            return None
        cells = self.cluster.bigtable.dump()
        rows = sorted((t, r, sorted(cols.items())) for t, by_row in cells.items()
                      for r, cols in by_row.items())
        begun = tuple((r.client, r.start_ts, r.began_at) for r in self.cluster.history.records)
        return (digest(repr(rows).encode()), self.cluster.clock.now(), self.oracle.peek(),
                tuple(self.cluster.lockservice.tokens().items()), begun,
                tuple((c.label, c.crashed, c.done, tuple(c.heard)) for c in self.clients.values()))

    def close(self) -> None:
        """End every client that is still waiting for calls (its thread or greenlet)."""
        try:
            for c in self.clients.values():
                if not c.crashed:
                    self.tell(c, {"op": "bye"})
        except CheckTimeout:             # it stopped reading: the hub is broken, a fresh
            pass                         # child serves the next check
        self.clients.clear()

    def crash_client(self, c: Client) -> None:
        """``c`` dies at its pending request: never answered again; its tokens crash."""
        c.crashed, c.pending = True, None
        for name in sorted(c.names):
            self.touch(("ls", name), "w")
            self.touch(("clock",), "r")
            self.cluster.lockservice.crash(name)
        self.tell(c, {"op": "gone"})       # a trusted client (a greenlet) has unwound on return
        self.note(c, CRASH)

    def settle(self) -> Transaction:
        """After the family: time passes (every silent client is dead), a reference reader
        reads every cell of the table, cleaning up what was left."""
        self.cluster.clock.advance(3 * self.ttl)
        no_dangling_write_records(self)
        reader = Transaction(self.cluster, "settle")
        reader.scan(TABLE)
        reader.abandon()
        return reader


def _commit_points(rt, mutations) -> list:
    """``[(column, Write)]`` of the commit points in one row transaction's mutations: a
    write record pointing at ``start_ts`` written with the erasure of a lock at ``start_ts``
    on the same column, which the row held before (read from the store, not the client)."""
    try:
        erased = {(col, ts) for col, ts, value in mutations if value is None}
        row = rt.loaded_row()
        found = []
        for col, _, value in mutations:
            column, kind = split_column(col) if isinstance(col, str) else (None, None)
            if kind != "write" or not isinstance(value, Write):
                continue
            lock = lock_col(column)
            if (lock, value.start_ts) in erased and isinstance(
                    dict(row.get(lock, {})).get(value.start_ts), Lock):
                found.append((column, value))
        return found
    except (TypeError, ValueError):
        return []                                  # a malformed mutation: apply refuses it


JUDGED = (Fail, Violation, CheckTimeout, BudgetExceeded)
"""What a check's run may raise on purpose: a verdict, a broken rule, a time limit, a budget."""


def _size(value) -> int:
    """About how many bytes ``value`` takes in the store's dump."""
    if value is None or isinstance(value, (bool, int, float, Lock, Write)):
        return 16
    return len(value) if isinstance(value, (str, bytes)) else len(repr(value))


def _short(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def _row_value(rt) -> dict:
    return {column: list(versions.items())[::-1] for column, versions in rt.loaded_row().items()}
