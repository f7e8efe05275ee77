"""Where the trusted world's messages go and come from: the hub between the world and its hosts.

The world (:mod:`.trusted`) talks to two hosts through one :class:`Hub`: the
student's (the sandboxed child's pipe in the grader, threads of the notebook's
process in the self-check) and its own reference clients, run in greenlets of
the grader's thread. What it keeps of a message it sent is a :func:`digest`.
"""
from __future__ import annotations

import collections
import hashlib
import itertools
import math
import pickle
import queue
from typing import Optional

from percolator_ref.transaction import Transaction

from ..channel import addressed
from ..client.host import ClientHost

PICKLE_PROTOCOL = 5


class CheckTimeout(Exception):
    """The check ran past its time limit: a client never sent its next message."""


class Violation(Exception):
    """A client broke the channel's protocol; the check fails with this sentence."""


class Diverged(BaseException):
    """A client answered a history it was told again differently from the first time (or
    ended instead), so what the grader recalled for it (:mod:`~..sandbox.transcripts`)
    may not stand for it. A BaseException: the world turns a client's errors into its
    violation, and this one is the grader's: the check runs again with nothing recalled
    (:func:`~.interactive.run_trusted`)."""


class Hub:
    """Where the world's messages go and come from: the student's host and the trusted host.

    ``student_send(msg)`` carries a message to the student's clients (or, with
    ``student_write(frame, deadline)``, its frame: :func:`~..channel.addressed`; a
    write not taken by ``deadline`` raises TimeoutError). Their
    messages come from ``student_receive(timeout)`` (the sandbox's pipe: a
    message, None once it closed, TimeoutError), or else arrive through
    :meth:`arrive` (an in-process host, from its threads). Reference clients
    run in ``self.trusted``, each in a greenlet of this thread that runs until
    it waits: its messages are queued when :meth:`send` returns, and a crashed
    one has unwound.
    ``broken`` is set when the student's side can no longer be used (a time
    limit hit, the child died): the grader then starts a fresh one.
    """

    def __init__(self, student_send, roles: dict, student_receive=None, student_write=None):
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.local: collections.deque = collections.deque()     # the greenlets' messages
        self.student_send, self.student_receive = student_send, student_receive
        self.student_write = student_write
        self.trusted = ClientHost(lambda m: self.local.append(("trusted", m)), roles, Transaction,
                                  ttl=0.0, greenlets=True, codec=False)
        self.cids = itertools.count(1)
        self.broken: Optional[str] = None
        self.transcripts = None          # the sandbox's recall of its clients' answers, if any

    def arrive(self, host: str, msg) -> None:
        self.inbox.put((host, msg))

    def receive(self, timeout: float) -> tuple:
        """``(host, message)``: the next message from either host (``queue.Empty`` after
        ``timeout`` s; the message is None once the student's side has gone)."""
        if self.local:
            return self.local.popleft()
        if self.student_receive is None or not self.inbox.empty():
            return self.inbox.get(timeout=timeout)
        try:
            return "student", self.student_receive(timeout)
        except TimeoutError:
            raise queue.Empty from None

    def send(self, host: str, msg: dict, cid: int, deadline: float = math.inf) -> bytes:
        """Carry ``msg`` (without its ``cid``) to client ``cid`` on ``host``; returns a
        digest of the message, equal for equal messages (:meth:`TrustedWorld.tell`).

        CheckTimeout if the student's side has not taken the message by ``deadline``
        (a child that stops reading); ProtocolError if it is too large to frame. Nothing
        is written to a student's side that is broken.
        """
        if host == "trusted":
            key = pickle.dumps(msg, PICKLE_PROTOCOL)    # the values as they are, never loaded
            msg["cid"] = cid
            self.trusted.deliver(msg)
            return digest(key)
        text, data = addressed(msg, cid)
        if self.student_write is not None and not self.broken:
            try:
                self.student_write(data, deadline)
            except TimeoutError:
                self.broken = "timeout"
                raise CheckTimeout("the grading process of your code stopped reading") from None
        elif self.student_write is None:
            msg["cid"] = cid
            self.student_send(msg)
        return digest(text.encode())


def digest(data: bytes) -> bytes:
    """What the world keeps of a message it sent: 16 bytes, not the message."""
    return hashlib.blake2b(data, digest_size=16).digest()
