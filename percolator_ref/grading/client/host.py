"""The client side of the channel: proxies for the cluster, and the host that runs clients.

In the grading sandbox the student's code holds no state of its own: a
:class:`ProxyCluster` has the attributes a
:class:`~percolator_ref.Transaction` uses (``bigtable``, ``oracle``,
``lockservice``, ``clock``), and every call on them is one message to the
trusted world (:mod:`..judge.trusted`), which executes it against its own store and
records it. A :class:`ClientHost` runs each client of the world in a thread (or,
where threads cannot start, as under Pyodide, in a greenlet); in the grading
sandbox each client has a process of its own (:mod:`.processes`), which holds
one host serving that one client:
``spawn`` builds it with a *role* of the exercise (a function of the answer and
the proxy cluster), ``call`` runs one of its methods; each ends with an
``answer`` message. What a client answers is only ever compared with the
world's own record.
"""
from __future__ import annotations

import collections
import queue
import threading
from typing import Callable, Optional

import greenlet
from sortedcontainers import SortedDict

from percolator_ref.bigtable import RowTransaction
from percolator_ref.cleanup import Cleanup
from percolator_ref.errors import StoreUnavailable
from percolator_ref.model import check_name
from percolator_ref.stores.raw import RawCellOperations
from percolator_ref.step import Step
from percolator_ref.trace import Tracer
from percolator_ref.transaction import Transaction
from percolator_ref.harness.greenlets import switch_into

from ..channel import ClientGone, ProtocolError, decode, encode
from ..framework import describe_exception, plain

THREAD_STACK = 512 * 1024


class ProxyStore(RawCellOperations):
    """The Bigtable as a client sees it: each row transaction is begun and ended by message.

    Figure 8's raw operations (``read``, ``write``, ``erase``) and ``versions``
    are one-cell row transactions, so they are messages too.
    """

    def __init__(self, request: Callable, codec: bool = True):
        self.request, self.codec = request, codec
        self.interceptors: list = []

    def row_transaction(self, table: str, row: str, *, client: Optional[str] = None,
                        step: str = Step.ROW_TRANSACTION, interceptors=()) -> RowTransaction:
        check_name(table, "table")
        check_name(row, "row")
        return RowTransaction(self, table, row, client, step, interceptors)

    def begin(self, rt: RowTransaction) -> None:
        found = self.request({"op": "row", "table": rt.table, "row": rt.row, "step": str(rt.step)})
        rt.row_data = {column: SortedDict({ts: value for ts, value in versions})
                       for column, versions in found.items()}

    def fetch_row(self, rt: RowTransaction) -> dict:
        return rt.row_data

    def end(self, rt: RowTransaction, commit: bool) -> None:
        mutations = [[c, ts, encode(v) if self.codec and v is not None else v]
                     for c, ts, v in rt.mutations]
        self.request({"op": "end", "commit": commit, "mutations": mutations})

    def versions(self, table: str, row: str, bigtable_column: str) -> list:
        """``[(ts, value), ...]`` newest first: one read-only row transaction."""
        with self.row_transaction(table, row, step=Step.BIGTABLE_READ) as rt:
            return rt.versions(bigtable_column)

    def rows(self, table: str, start_row: Optional[str] = None, end_row: Optional[str] = None):
        return self.request({"op": "rows", "table": table, "start": start_row, "end": end_row})


class ProxyOracle:
    def __init__(self, request: Callable):
        self.request = request

    def get_timestamp(self) -> int:
        return self.request({"op": "ts"})

    def peek(self) -> int:
        return self.request({"op": "peek"})


class ProxyLockService:
    def __init__(self, request: Callable, ttl: float):
        self.request, self.ttl = request, ttl

    def _call(self, fn: str, client):
        return self.request({"op": "ls", "fn": fn, "client": client})

    def register(self, client): self._call("register", client)
    def heartbeat(self, client): self._call("heartbeat", client)
    def crash(self, client): self._call("crash", client)
    def release(self, client): self._call("release", client)
    def is_alive(self, client) -> bool: return self._call("is_alive", client)
    def status(self, client) -> str: return self._call("status", client)


class ProxyClock:
    def __init__(self, request: Callable):
        self.request = request

    def now(self) -> float:
        return self.request({"op": "now"})

    def sleep(self, seconds: float) -> None:
        self.request({"op": "sleep", "seconds": seconds})

    advance = sleep


class ProxyObservers:
    """Which columns the world's observers watch (a write there sets a notification)."""

    def __init__(self, request: Callable):
        self.request = request

    def watches(self, table: str, column: str) -> bool:
        return self.request({"op": "observed", "table": table, "column": column})


class ProxyCluster:
    """What a client may use: the cluster's services, each reached by message.

    The protocol's classes are the paper's (``Transaction``, ``Cleanup``): the
    world runs no protocol variant.
    """

    history = None
    Transaction = Transaction
    Cleanup = Cleanup
    variants = ()

    def __init__(self, request: Callable, ttl: float, codec: bool = True):
        self.bigtable = ProxyStore(request, codec)
        self.oracle = ProxyOracle(request)
        self.lockservice = ProxyLockService(request, ttl)
        self.clock = ProxyClock(request)
        self.tracer = Tracer()               # the client's own: a session reports its waits there
        self.observers = ProxyObservers(request)

    @property
    def lock_ttl(self) -> float:
        return self.lockservice.ttl

    def begin(self, client: Optional[str] = None) -> Transaction:
        return Transaction(self, client)


def threads_available() -> bool:
    """Can this interpreter start a thread? (Not under Pyodide.)"""
    try:
        probe = threading.Thread(target=lambda: None, daemon=True)
        probe.start()
    except RuntimeError:
        return False
    probe.join()
    return True


class ClientHost:
    """Runs the world's clients and routes the world's messages to them.

    ``send(msg)`` carries a message to the world; the world's messages come in
    through :meth:`deliver`. ``roles`` maps a role name to
    ``fn(answer, cluster, *args)``; ``answer`` is what the roles build on (the
    student's class or function, or the reference's for trusted clients).
    Each client runs in a thread, or with ``greenlets=True`` in a greenlet that
    :meth:`deliver` runs until the client waits for its next message (the
    world's own reference clients, and the student's where threads cannot start).
    ``codec=False`` (the world's own clients, in its process): values cross as
    they are; replies, mutations and answers are not encoded as JSON data.
    """

    def __init__(self, send: Callable, roles: dict, answer, ttl: float, greenlets: bool = False,
                 codec: bool = True):
        self.send, self.roles, self.answer, self.ttl = send, roles, answer, ttl
        self.greenlets, self.codec = greenlets, codec
        self.inboxes: dict = {}
        self.stacks: dict = {}           # greenlets=True: each client's greenlet
        self.threads: dict = {}          # otherwise: each client's thread
        self.history = None              # the trusted host records its transactions there

    def deliver(self, msg) -> None:
        cid = msg.get("cid") if isinstance(msg, dict) else None
        if msg.get("op") == "spawn" and cid not in self.inboxes:
            self.inboxes[cid] = collections.deque() if self.greenlets else queue.SimpleQueue()
            self.start(cid, msg)
        elif cid in self.stacks:
            self.inboxes[cid].append(msg)
            switch_into(self.stacks[cid])          # run the client until it waits again
        elif cid in self.inboxes:
            self.inboxes[cid].put(msg)

    def start(self, cid: int, spawn: dict) -> None:
        """Start client ``cid``: in a thread, or in a greenlet run until it first waits."""
        if not self.greenlets:
            threading.stack_size(THREAD_STACK)
            self.threads[cid] = threading.Thread(target=self.client, args=(cid, spawn),
                                                 daemon=True)
            self.threads[cid].start()
            return
        self.stacks[cid] = greenlet.greenlet(lambda: self.client(cid, spawn))
        switch_into(self.stacks[cid])

    def next_message(self, cid: int) -> dict:
        """The world's next message to client ``cid`` (a greenlet yields until it comes)."""
        inbox = self.inboxes[cid]
        if self.greenlets:
            while not inbox:
                greenlet.getcurrent().parent.switch()
            return inbox.popleft()
        return inbox.get()

    def request(self, cid: int, msg: dict):
        self.send(dict(msg, cid=cid))
        reply = self.next_message(cid)
        if reply.get("op") == "fail":
            raise StoreUnavailable(str(reply.get("text"))[:300])
        if reply.get("op") != "reply":
            raise ClientGone(f"client {cid} crashed")
        return decode(reply.get("value")) if self.codec else reply.get("value")

    def client(self, cid: int, spawn: dict) -> None:
        cluster = ProxyCluster(lambda msg: self.request(cid, msg), spawn.get("ttl", self.ttl),
                               self.codec)
        cluster.history = self.history
        obj = None

        def build():
            return self.roles[spawn["role"]](self.answer, cluster, *decode(spawn.get("args", [])))
        try:
            obj = self.answer_with(cid, build)
            while True:
                msg = self.next_message(cid)
                if msg.get("op") != "call":
                    return
                method, args = msg.get("method"), decode(msg.get("args", []))
                kwargs = decode(msg.get("kwargs", {"$": "D", "v": []}))
                self.answer_with(cid, lambda: getattr(obj, method)(*args, **kwargs))
        except ClientGone:
            return
        finally:
            self.inboxes.pop(cid, None)
            self.stacks.pop(cid, None)
            self.threads.pop(cid, None)

    def answer_with(self, cid: int, fn: Callable):
        """Run ``fn`` and send its outcome as this client's answer; return its value."""
        try:
            value = fn()
            outcome = {"value": _encodable(value) if self.codec else value}
        except ClientGone:
            raise
        except Exception as exc:          # noqa: BLE001 - the student's exception is an answer
            value, outcome = None, {"raised": describe_exception(exc)}
        self.send({"cid": cid, "op": "answer", "outcome": outcome})
        return value


def _encodable(value):
    try:
        return encode(value)
    except ProtocolError:
        return encode(plain(value))
