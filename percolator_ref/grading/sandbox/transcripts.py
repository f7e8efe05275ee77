"""A client is a function of what it heard: the grader remembers what each history made it say.

Exploring a family runs every schedule from scratch, and every run starts a fresh
process for each client (:mod:`.processes`). Most of those processes hear exactly
what a client of an earlier run heard, message for message, and so say exactly
what it said: in a schedule that only moves another client's step, a client's own
history is unchanged. :class:`Transcripts` keeps, for every history a client of
this notebook has had (a digest of the chain of messages it heard, from its
``spawn`` on), the message it sent next. :class:`~.launcher.ClientPipes` then
starts a client as a *virtual* one: while each message it hears extends a history
already recorded, the recorded answer is handed to the world and no process runs.
At the first message that leaves the recorded histories the client becomes real:
a process is forked and hears its whole history again (:meth:`ClientPipes.materialize`),
and each of its answers must be the recorded one, byte for byte.

What this keeps exact:

- the key of a history is the chain of the exact bytes the world sent (without the
  client id, which differs between runs), so two clients share an entry only if the
  world told them the same things in the same order;
- what is recorded is the exact frame the process sent, read back by the same parser;
- a client that answers a replayed history differently from the recorded answer (it
  read the time, a random source, anything but the world) raises :class:`Diverged`:
  the check is run again from the start with nothing recalled (see
  :func:`~..judge.interactive.run_trusted`), so its verdict is the verdict without
  recall, and no later child of the notebook recalls; a client that sends a message
  nobody asked for (when it speaks depends on more than what it heard) stops recall
  for the rest of the notebook, and the world reads that message as it would without
  recall (what was recalled before it is what such a client said then);
- the entries live in the grader and are only ever written from a real process's
  frames; a student cannot write one for a history it has not been given. Their
  bytes are bounded (:data:`MAX_BYTES`, each entry's objects counted: :data:`ENTRY_BYTES`):
  past it, nothing new is recorded and clients simply run.

The switch ``PERCOLATOR_RECALL=0`` turns it off: every client runs, as before. What
it may change is how many processes run and how long a check takes, never the verdict
on a client that is a function of what it heard (the equivalence test grades
catalogue answers both ways). What it cannot keep exact, as the reduction of
schedules cannot (:mod:`~..judge.schedules`): a check's time limit is the grader's
clock, so a client slow enough to run past it only without recall (a fifth of a
second per answer) passes with it; and a client that reads a count of the grader's
work (its pid, its work folder's number, the clock) and says something else past some
count is caught only if it changes an answer it is made to repeat (a replay repeats the
answers before a history never recorded, never a client's last one), and with recall
the grader does less work, so the count may never be reached.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from ..judge.hub import Diverged

MAX_BYTES = 64 << 20          # the recorded answers' bytes, per notebook
ENTRY_BYTES = 256             # what an entry costs besides its answer's bytes: its key's and
                              # answer's objects, its slot in the dict (tiny answers are many)


def recall_on() -> bool:
    """The switch: on unless the environment sets ``PERCOLATOR_RECALL=0``."""
    return os.environ.get("PERCOLATOR_RECALL", "1") != "0"


def after(key: bytes, body: bytes) -> bytes:
    """The key of a history ``key`` extended by one message ``body`` (16 bytes)."""
    return hashlib.blake2b(key + body, digest_size=16).digest()


@dataclass
class Transcripts:
    """What each history made this notebook's clients say next: ``{key: frame body}``."""
    on: bool = field(default_factory=recall_on)
    answers: dict = field(default_factory=dict)
    size: int = 0
    recalled: int = 0             # messages handed to the world from the record
    heard_again: int = 0          # messages a materialized process heard a second time
    processes: int = 0            # client processes started
    virtual: int = 0              # clients that ended with no process
    stopped: int = 0              # 1 once a client was found not a function of what it heard

    def recall(self, key: bytes):
        """The recorded answer to history ``key``, or None."""
        found = self.answers.get(key) if self.on else None
        self.recalled += found is not None
        return found

    def record(self, key: bytes, body: bytes) -> None:
        """A real client with history ``key`` said ``body`` (kept while within the bytes)."""
        cost = len(body) + len(key) + ENTRY_BYTES
        if self.on and key not in self.answers and self.size + cost <= MAX_BYTES:
            self.answers[key] = body
            self.size += cost

    def check(self, key: bytes, body: bytes) -> None:
        """A materialized client, told history ``key`` again, said ``body``: it must be
        what was recorded (else :class:`Diverged`)."""
        self.heard_again += 1
        if self.answers.get(key) != body:
            self.stop()
            raise Diverged("a client answered the same messages differently")

    def stop(self) -> None:
        """Recall nothing more for this notebook (a client that is not a function of what
        it heard)."""
        self.stopped += self.on
        self.on = False
        self.answers.clear()
        self.size = 0

    def figures(self) -> dict:
        return {"processes": self.processes, "virtual": self.virtual,
                "recalled": self.recalled, "heard_again": self.heard_again,
                "entries": len(self.answers), "bytes": self.size, "stopped": self.stopped}
