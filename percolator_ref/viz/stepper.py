"""Step through transactions one single-row Bigtable transaction at a time.

A :class:`Stepper` runs each transaction script as a greenlet (a
coroutine with its own stack, no thread) and installs a scheduler as a
:class:`~percolator_ref.interceptors.Gate` on the Bigtable: a script parks
at the gate before every row transaction by switching back to the stepper,
and the stepper resumes exactly one of them at a time, so the interleaving
is whatever the student (or a notebook) chooses, the same on every run.
Nothing starts a thread, so the same code runs in CPython (the ``greenlet``
package) and in a browser under Pyodide (``greenlet-pyodide``, the same API
on the browser's stack switching). Each move is one row transaction; the
tracer's event for it, the store's ``dump()`` after it and the event's
``note`` make one :class:`Frame`; if the clock moved during the move, the
note says so, and why, from the waits the tracer reported (``Tracer.waited``:
a backoff on a lock, a commit wait), never by guessing.

- ``step(who)`` moves transaction ``who`` (a script name or its current
  client, e.g. ``"T7"``; default: the first runnable one that is not
  waiting on a lock);
- ``back()`` / ``goto(i)`` show a stored frame again (nothing re-runs);
- stepping another transaction or crashing one from an earlier frame forks
  the history: the recorded choices up to that frame are replayed on a fresh
  cluster (deterministic), then the new choice is made; the frames of the
  branch left behind are kept in :attr:`Stepper.abandoned`;
- ``crash(who)`` kills that transaction's client right after the row
  transaction it last completed (the one meaning of a crash point, see
  :mod:`percolator_ref.step`), so its next one never runs: its script stops with :class:`~percolator_ref.ClientCrash`,
  the lock service counts the client dead, and a ``cleaner`` script (by
  default a transaction that scans every table) is started to meet the
  locks left behind and clean them up, visibly, frame by frame.

In a browser (Pyodide) no script stays parked between two calls (:attr:`Stepper.replay_each_move`):
a parked script there is a stack suspended by the browser's stack switching, and a garbage
collection that starts while the running stack is deep and such a stack is suspended kills the
interpreter ("memory access out of bounds"; notebook 05 died so in Run All, at its first deep
import after the observer-race stepper). So each call unwinds the parked scripts before it
returns (they write nothing while unwinding), and the next move replays the recorded choices
on a fresh cluster first (deterministic: the frames come out the same), with the collector
paused until nothing is parked.

Nothing here knows the protocol: the frames are what the tracer reported.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Optional

import greenlet

from ..services.clock import ManualClock
from ..errors import ClientCrash
from ..interceptors import Gate, attach
from ..harness.greenlets import gc_paused, switch_into
from .browser import IN_BROWSER
from .tables import CellTable


def scan_everything(cluster) -> bool:
    """The default cleaner: one transaction that scans every table (meeting every lock)."""
    t = cluster.begin()
    for table in cluster.bigtable.tables():
        t.scan(table)
    return t.commit()


@dataclass(frozen=True)
class Frame:
    """One step: who moved, what the tracer reported, the store after it."""
    index: int
    actor: Optional[str]          # client that moved ("T7"), None for the initial frame
    events: tuple                 # RowTransactionEvents of this move (usually one)
    dump: dict                    # cluster.bigtable.dump() after the move
    note: str                     # what the protocol did and why
    status: str                   # one line per script: where it is
    clock: float                  # cluster clock after the move
    runnable: tuple = ()          # who can move next (clients, e.g. ("T7", "T8"))
    action: str = "step"          # "initial", "step" or "crash"

    @property
    def table(self) -> CellTable:
        return CellTable(self.dump, self.events, title=self.title)

    @property
    def title(self) -> str:
        if self.actor is None:
            return f"frame {self.index}: initial state"
        if self.action == "crash":
            return f"frame {self.index}: {self.actor} crashes"
        steps = ", ".join(f"{e.step} {e.row}" for e in self.events)
        return f"frame {self.index}: {self.actor} {steps}".rstrip()

    def __repr__(self):
        return f"{self.title}\n{self.note}\n{CellTable(self.dump, self.events)!r}"

    def _repr_html_(self):
        import html
        return (f"<div><p style='font-family:sans-serif'>{html.escape(self.note)}</p>"
                f"{self.table._repr_html_()}</div>")


@dataclass(eq=False)
class _Runner:
    name: str
    fn: Callable
    index: int
    stack: Optional[greenlet.greenlet] = None    # the script's own stack
    state: str = "new"            # new / parked / running / done / crashed / failed
    pending: Optional[tuple] = None   # (client, table, row, step) waiting at the gate
    last: Optional[tuple] = None      # the last row transaction it completed
    client: Optional[str] = None
    crash_requested: bool = False
    unwinding: bool = False       # its stack is being unwound (replay_each_move): no more moves
    result: object = None
    error: Optional[BaseException] = None
    waited: float = 0.0           # clock seconds spent in the last move (any wait)

    @property
    def runnable(self) -> bool:
        return self.state == "parked"


class FrameCursor:
    """Moving over stored frames: ``frames`` and ``cursor`` are the subclass's; nothing re-runs."""

    @property
    def frame(self) -> Frame:
        """The frame shown now (``frames[cursor]``)."""
        return self.frames[self.cursor]

    def back(self) -> Frame:
        """Show the previous frame."""
        self.cursor = max(0, self.cursor - 1)
        return self.frame

    def goto(self, index: int) -> Frame:
        """Show frame ``index`` (an int in ``[0, len(frames) - 1]``)."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"index must be an int, got {index!r}")
        if not 0 <= index < len(self.frames):
            raise ValueError(f"index must be in [0, {len(self.frames) - 1}], got {index}")
        self.cursor = index
        return self.frame

    @property
    def table(self) -> CellTable:
        """The cell table of the frame shown now."""
        return self.frame.table

    def transcript(self) -> str:
        """Every frame as text, for a terminal."""
        return "\n\n".join(repr(f) for f in self.frames)

    def widget(self):
        """The ipywidgets front end over these frames (Step, Back, Reset, Crash client, a
        frame slider; a recorded run cannot step past its end or crash a client)."""
        from .widget import StepperWidget
        return StepperWidget(self)


class Stepper(FrameCursor):
    """Deterministic stepping of one or more transaction scripts.

    ``scripts``: ``{name: fn(cluster)}`` (or a list of functions), run in that
    order. ``make_cluster``: a function returning a fresh cluster (default:
    ``Cluster(first_timestamp=5, clock=ManualClock())``, the paper's Figure 4
    timestamps). ``setup(cluster)``: runs before the scripts, not stepped
    (e.g. the initial balances). ``cleaner``: the script started after a
    crash (None: none).

    ``replay_each_move`` (class attribute; on in a browser, see the module's docstring): no
    script stays parked between calls; the next move replays the choices on a fresh cluster,
    so :attr:`cluster` is a new object after each move (the same state).
    """

    replay_each_move: bool = IN_BROWSER

    def __init__(self, scripts, setup: Optional[Callable] = None,
                 make_cluster: Optional[Callable] = None,
                 cleaner: Optional[Callable] = scan_everything):
        if callable(scripts):
            scripts = [scripts]
        if isinstance(scripts, dict):
            items = list(scripts.items())
        else:
            items = [(getattr(fn, "__name__", f"script{i}"), fn) for i, fn in enumerate(scripts)]
        if not items:
            raise ValueError("scripts must name at least one transaction script")
        for name, fn in items:
            if not callable(fn):
                raise TypeError(f"scripts[{name!r}] must be callable fn(cluster), got {fn!r}")
        if len({n for n, _ in items}) != len(items):
            raise ValueError("scripts must have distinct names")
        self._scripts = items
        self._setup = setup
        self._make_cluster = make_cluster or _figure4_cluster
        self._cleaner = cleaner
        self._home: Optional[greenlet.greenlet] = None   # where a parked script returns
        self.decisions: list = []        # ("step", runner index) / ("crash", runner index)
        self.abandoned: list = []        # (frame index forked at, frames of the old branch)
        self._calls = 0                  # public calls under way (replay_each_move)
        self._unwound = False            # the parked scripts were unwound after the last call
        self._replaying = False          # rebuilding the runners: the frames are kept
        with self._call():
            self._start()

    # -- life cycle ----------------------------------------------------------
    def _start(self) -> None:
        self._thread = _thread_root()            # the scripts' stacks live on this thread
        self._unwound = False                    # fresh runners, parked below
        self.cluster = self._make_cluster()
        if self._setup is not None:
            self._setup(self.cluster)
        self.runners: list[_Runner] = []
        self._recording = self.cluster.tracer.subscribe(self._on_event)
        self._events: list = []
        self._waits: list = []
        self.cluster.tracer.wait_subscribers.append(self._on_wait)
        self._scheduling = attach(self.cluster.bigtable, Gate(self._gate))
        self.frames: list[Frame] = []
        self.cursor = 0
        for name, fn in self._scripts:
            self._launch(name, fn)
        self._events.clear()
        self._add_frame(None, "Initial state. " + self._pending_sentence(), (), "initial")

    def reset(self) -> None:
        """Back to the initial frame on a fresh cluster; forget the choices made."""
        with self._call():
            self._unwound = False
            self._restart()
            self.abandoned = []

    def _restart(self) -> None:
        self._shutdown()
        self.decisions = []
        self._start()

    def close(self) -> None:
        """Stop the parked scripts (their clients crash; this just tidies up)."""
        with self._call():
            self._shutdown()

    @contextmanager
    def _call(self):
        """One public call. With ``replay_each_move``: the collector paused throughout, and
        the outermost call unwinds every parked script before it returns."""
        if not self.replay_each_move:
            yield
            return
        with gc_paused():                # collects once nothing is parked
            self._calls += 1
            try:
                yield
            finally:
                self._calls -= 1
                if self._calls == 0:
                    self._unwind()

    def _unwind(self) -> None:
        """End every parked script's stack without a move: GreenletExit at its gate (a row
        transaction it tries while unwinding gets one too, so the store is untouched). The
        runners keep their state and labels for the frames; the next move replays."""
        for runner in self.runners:
            if runner.state == "parked" and runner.stack and not runner.stack.dead:
                runner.unwinding = True
                runner.stack.parent = greenlet.getcurrent()
                runner.stack.throw(greenlet.GreenletExit)
                self._unwound = True

    def _revive(self) -> None:
        """Before a move: after an unwind, the scripts parked at their gates again on a
        fresh cluster, the recorded choices replayed (the frames and cursor are kept)."""
        if not self._unwound:
            return
        frames, cursor, decisions = self.frames, self.cursor, list(self.decisions)
        self._unwound, self._replaying = False, True
        try:
            self._restart()
            self._replay(decisions)
        finally:
            self._replaying = False
        self.frames, self.cursor = frames, cursor

    def _shutdown(self) -> None:
        same_thread = self._thread is _thread_root()
        for runner in self.runners:
            # another thread cannot switch in: its stacks are just dropped (and an unwound
            # stack has nothing left to stop)
            if runner.state == "parked" and same_thread and not runner.stack.dead:
                runner.crash_requested = True
                self._grant(runner)
        self._recording()
        if self._on_wait in self.cluster.tracer.wait_subscribers:
            self.cluster.tracer.wait_subscribers.remove(self._on_wait)
        self._scheduling.detach()

    def _follow_thread(self) -> None:
        """Move the run to the calling thread if its stacks live on another one.

        A greenlet can only be switched to from the thread that created it, and
        JupyterLab's kernel may deliver one widget click on the thread that ran the
        cell and the next on another ("parent cannot be on a different thread"). The
        run is rebuilt here: a fresh cluster and the recorded choices replayed, which
        is deterministic (the frames come out the same), the cursor kept."""
        if self._thread is _thread_root():
            return
        decisions, cursor = list(self.decisions), self.cursor
        self._restart()
        self._replay(decisions)
        self.cursor = cursor

    def _replay(self, decisions) -> None:
        for kind, index in decisions:
            self.decisions.append((kind, index))
            (self._move if kind == "step" else self._crash)(self.runners[index])

    def _launch(self, name: str, fn: Callable) -> _Runner:
        runner = _Runner(name, fn, len(self.runners))
        runner.stack = greenlet.greenlet(lambda: self._run_script(runner))
        self.runners.append(runner)
        self._grant(runner)          # runs until its first row transaction (or the end)
        return runner

    # -- the scheduler ---------------------------------------------------------
    def _current(self) -> Optional[_Runner]:
        """The runner whose stack is running now (None: the notebook itself)."""
        here = greenlet.getcurrent()
        return next((r for r in self.runners if r.stack is here), None)

    def _gate(self, client, table, row, step) -> None:
        runner = self._current()
        if runner is None:
            return                   # not one of ours (e.g. the notebook inspecting)
        if runner.unwinding:             # no row transaction while its stack unwinds
            raise greenlet.GreenletExit
        runner.last, runner.pending = runner.pending, (client, table, row, step)
        runner.client = client
        runner.state = "parked"
        self._home.switch()          # back to _grant; resumed by the next _grant
        runner.state = "running"
        if runner.crash_requested:
            raise ClientCrash(runner.last[3] if runner.last else "begin", 0)

    def _run_script(self, runner: _Runner) -> None:
        runner.state = "running"
        state = "done"
        try:
            runner.result = runner.fn(self.cluster)
        except ClientCrash:
            state = "crashed"
            if runner.client is not None:
                self.cluster.lockservice.crash(runner.client)
        except greenlet.GreenletExit:
            raise                              # the stepper itself was dropped
        except BaseException as exc:          # shown in the status line, re-raised by step()
            state, runner.error = "failed", exc
        runner.state, runner.pending = state, None

    def _grant(self, runner: _Runner) -> None:
        """Let ``runner`` run its next row transaction; return when it parks again or ends."""
        before = self.cluster.clock.now()
        self._home = greenlet.getcurrent()
        runner.stack.parent = self._home   # a finished script returns here too
        switch_into(runner.stack)
        runner.waited = self.cluster.clock.now() - before
        if runner.state == "failed":
            raise RuntimeError(f"script {runner.name} raised {runner.error!r}") from runner.error

    def _on_event(self, event) -> None:
        if self._current() is not None:
            self._events.append(event)     # only the scripts' row transactions

    def _on_wait(self, client, seconds: float, verb: str, purpose: str) -> None:
        if self._current() is not None:
            self._waits.append((seconds, verb, purpose))     # only the scripts' waits

    # -- choosing ---------------------------------------------------------------
    @property
    def runnable(self) -> list:
        """Labels (current client, e.g. ``"T7"``) of the transactions that can move."""
        return [self._label(r) for r in self.runners if r.runnable]

    @property
    def finished(self) -> bool:
        return not any(r.runnable for r in self.runners)

    def _label(self, runner: _Runner) -> str:
        return runner.client or runner.name

    def _find(self, who) -> _Runner:
        if who is None:
            ready = [r for r in self.runners if r.runnable]
            if not ready:
                raise ValueError("nothing can move: every script has finished")
            calm = [r for r in ready if not r.waited]
            return (calm or ready)[0]     # a transaction backing off on a lock yields
        if not isinstance(who, str):
            raise TypeError(f"who must be a script name or client like 'T7', got {who!r}")
        for r in self.runners:
            if who in (r.name, r.client):
                if not r.runnable:
                    raise ValueError(f"who={who!r} cannot move now (it is {r.state})")
                return r
        raise ValueError(f"who={who!r} is not one of {[self._label(r) for r in self.runners]}")

    def _check_can_move(self, who) -> None:
        """Before forking at an earlier frame: ``who`` must be able to move there."""
        if who is None or who in self.frame.runnable:
            return
        if not isinstance(who, str):
            raise TypeError(f"who must be a script name or client like 'T7', got {who!r}")
        named = [r for r in self.runners if r.name == who]
        if not (named and named[0].client in self.frame.runnable):
            raise ValueError(f"who={who!r} cannot move at frame {self.cursor}: "
                             f"only {list(self.frame.runnable)} can")

    # -- moving -------------------------------------------------------------------
    def step(self, who: Optional[str] = None) -> Frame:
        """Move ``who`` by one row transaction and return the new frame.

        From an earlier frame (after ``back()``), the same choice as before
        just shows the stored next frame; another choice replays and branches.
        """
        with self._call():
            self._follow_thread()
            if self.cursor < len(self.frames) - 1:
                kind, index = self.decisions[self.cursor]
                following = self.frames[self.cursor + 1]
                if kind == "step" and (who is None or who in (self.runners[index].name,
                                                              following.actor)):
                    self.cursor += 1
                    return self.frame
                self._check_can_move(who)
                self._branch()
            self._move(self._decide("step", who))
            return self.frame

    def crash(self, who: Optional[str] = None) -> Frame:
        """Crash ``who``'s client right after its last row transaction (its next never runs)."""
        with self._call():
            self._follow_thread()
            if self.cursor < len(self.frames) - 1:
                self._check_can_move(who)
                self._branch()
            self._crash(self._decide("crash", who))
            return self.frame

    def _decide(self, kind: str, who) -> _Runner:
        """Record the choice ``(kind, who)`` and return its runner, parked and ready."""
        self._revive()
        runner = self._find(who)
        self.decisions.append((kind, runner.index))
        return runner

    def run(self, max_frames: int = 500) -> Frame:
        """Step with the default choice until every script has finished."""
        with self._call():
            for _ in range(max_frames):
                if self.finished:
                    return self.frame
                self.step()
        raise RuntimeError(f"still running after max_frames={max_frames} steps")

    def _branch(self) -> None:
        """Fork at the cursor: replay the choices up to it on a fresh cluster (deterministic)."""
        at, keep = self.cursor, self.decisions[: self.cursor]
        self.abandoned.append((at, tuple(self.frames[at + 1:])))
        self._restart()
        self._replay(keep)

    def _move(self, runner: _Runner) -> None:
        actor = self._label(runner)
        self._events.clear()
        self._waits.clear()
        self._grant(runner)
        events = tuple(self._events)
        notes = [e.note or str(e) for e in events] + self._wait_notes(runner)
        if runner.state in ("done", "crashed"):
            notes.append(f"{runner.name} finished: {self._outcome(runner)}.")
        text = " ".join(n if n.endswith(".") else n + "." for n in notes)
        self._add_frame(actor, text or f"{actor} moved.", events)

    def _wait_notes(self, runner: _Runner) -> list:
        """Why the clock moved during ``runner``'s move: the waits it reported, then any
        advance that no wait explains."""
        actor, now = self._label(runner), self.cluster.clock.now()
        notes = [f"{actor} {verb} {seconds:g} s on the clock (now {now:g} s) {purpose}."
                 for seconds, verb, purpose in self._waits]
        unexplained = runner.waited - sum(seconds for seconds, _, _ in self._waits)
        if unexplained > 1e-9:
            notes.append(f"The clock advanced {unexplained:g} s during {actor}'s move "
                         f"(now {now:g} s).")
        return notes

    def _crash(self, runner: _Runner) -> None:
        actor, pending = self._label(runner), runner.pending
        runner.crash_requested = True
        self._events.clear()
        self._grant(runner)
        done = (f"right after its {runner.last[3]} of {runner.last[2]}" if runner.last
                else "before its first row transaction")
        # the same row transaction again: a retry (after backing off on a lock)
        again = runner.last is not None and runner.last[2:] == pending[2:]
        never = (f"its retry of that {pending[3]} never runs" if again
                 else f"its {pending[3]} of {pending[2]} never runs")
        note = (f"{actor}'s client crashed {done} ({never}): whatever it wrote stays in Bigtable, and the lock service now "
                f"counts {actor} as dead.")
        if self._cleaner is not None and not any(r.name == "cleaner" for r in self.runners):
            cleaner = self._launch("cleaner", self._cleaner)
            note += (f" A new transaction {self._label(cleaner)} will read the rows and "
                     f"clean up what {actor} left behind.")
        self._add_frame(actor, note, tuple(self._events), "crash")

    def _outcome(self, runner: _Runner) -> str:
        records = self.cluster.history.records if self.cluster.history is not None else []
        status = next((r.status for r in reversed(records) if r.client == runner.client), None)
        if runner.state == "crashed":
            return "client crashed"
        return status or f"returned {runner.result!r}"

    # -- frames -------------------------------------------------------------------
    def _pending_sentence(self) -> str:
        waiting = [f"{self._label(r)} is about to {r.pending[3]} {r.pending[2]}"
                   for r in self.runners if r.runnable]
        return ("; ".join(waiting) + ".") if waiting else ""

    def _status(self) -> str:
        lines = []
        for r in self.runners:
            label = self._label(r)
            if r.runnable:
                client, table, row, step = r.pending
                lines.append(f"{label}: next {step} {row}")
            else:
                lines.append(f"{label}: {self._outcome(r)}")
        return " | ".join(lines)

    def _add_frame(self, actor, note: str, events: tuple = (), action: str = "step") -> None:
        if self._replaying:
            return                   # rebuilding the runners: these frames are stored already
        frame = Frame(len(self.frames), actor, events, self.cluster.bigtable.dump(), note,
                      self._status(), self.cluster.clock.now(), tuple(self.runnable), action)
        self.frames.append(frame)
        self.cursor = frame.index

    def __repr__(self):
        return (f"<Stepper frame {self.cursor}/{len(self.frames) - 1}: "
                f"{self.frame.status}>")


def _thread_root() -> greenlet.greenlet:
    """The calling thread's main greenlet: one per thread, never shared by two threads
    (a thread id can be reused once its thread has ended; this object cannot)."""
    here = greenlet.getcurrent()
    while here.parent is not None:
        here = here.parent
    return here


def _figure4_cluster():
    from ..cluster import Cluster
    return Cluster(first_timestamp=5, clock=ManualClock())
