"""A small deterministic discrete-event simulator whose processes run real code.

Events sit in a heap ordered by ``(time, sequence number)``; the simulated
clock (a :class:`~percolator_ref.services.clock.ManualClock`) is advanced to each
event's time before it fires. A :class:`Process` runs ordinary blocking
code (here: Percolator transactions) on a call stack of its own, a thread or
a greenlet (the *carrier*). When it must wait for simulated time (a tablet
server, the oracle, a backoff) it schedules its own resume and calls
:meth:`Simulator.block`; the event loop then fires events until some process
is resumed, and that one runs. Exactly one process runs at any moment,
always in the same order, so a run is deterministic and the same with either
carrier: the threads or greenlets are only a way to suspend real code in the
middle of a call stack.

:class:`Resource` is a FIFO server with ``capacity`` identical units (cores)
and a service time per request; it records its busy time inside a
measurement window.
"""
from __future__ import annotations

import heapq
import importlib.util
import threading
from typing import Callable, Optional

from ..services.clock import ManualClock
from ..harness.greenlets import gc_paused, switch_into
from ..viz.browser import IN_BROWSER

STALL_SECONDS = 120.0        # real seconds without a simulated event: something deadlocked


class SimulationAborted(BaseException):
    """Unwinds a process's thread when the simulation failed elsewhere (not an Exception,
    so that no ``except Exception`` in the code under simulation swallows it)."""


class SimulatedClock(ManualClock):
    """The cluster clock on simulated time: ``now()`` is the simulator's time.

    ``sleep(s)`` inside a simulated process waits ``s`` simulated seconds (the
    other processes run meanwhile); outside one it advances the clock, as
    :class:`ManualClock` does.
    """

    def __init__(self):
        super().__init__(0.0)
        self.simulator: Optional["Simulator"] = None

    def sleep(self, seconds: float) -> None:
        sim = self.simulator
        if sim is None or sim.current is None:
            super().sleep(seconds)
            return
        sim.wait(sim.current, seconds)


class Process:
    """A simulated client: ``target(process)`` runs on its own stack, one step at a time.

    ``carry`` is simulated time the process still owes before its next action
    (the reply of its last request, still on the wire). ``data`` is free for
    the model (e.g. the machine the process runs on).
    """

    def __init__(self, sim: "Simulator", name: str, target: Callable, data=None):
        self.sim, self.name, self.target, self.data = sim, name, target, data
        self.carry = 0.0
        self.value = None
        self.done = False
        self.stack = None                        # the carrier's thread or greenlet

    def take_carry(self) -> float:
        """The owed delay, now paid: the caller adds it before its next request."""
        carry, self.carry = self.carry, 0.0
        return carry

    def body(self) -> None:
        """Run the target; a failure stops the whole simulation."""
        if self.sim.failed:
            return
        try:
            self.target(self)
        except SimulationAborted:
            return
        except BaseException as e:               # noqa: BLE001 - re-raised by run()
            self.sim.fail(e)
            return
        self.done = True


class ThreadCarrier:
    """Processes as threads passing a baton: the thread that blocks runs the event loop
    itself and hands the baton straight to the next process (one switch, or none when
    it resumes itself). Needs nothing but the standard library."""

    name = "threads"

    def __init__(self, sim: "Simulator"):
        self.sim = sim
        self.main = threading.Lock()
        self.main.acquire()

    def start(self, process: Process) -> None:
        process.wake = threading.Lock()
        process.wake.acquire()
        process.stack = threading.Thread(target=self._thread, args=(process,),
                                         name=process.name, daemon=True)
        process.stack.start()

    def _thread(self, process: Process) -> None:
        process.wake.acquire()                   # the first grant
        process.body()
        if process.done:
            self._pass_baton(self.sim.next_resume())

    def _pass_baton(self, found) -> Optional[Process]:
        """Give the baton to the process ``found`` resumes, or back to ``run()``."""
        if found is None:
            self.sim.current = None
            if not self.sim.failed:              # (a failure already woke run())
                self.main.release()
            return None
        process, process.value = found
        self.sim.current = process
        process.wake.release()
        return process

    def block(self, process: Process):
        found = self.sim.next_resume()
        if found is not None and found[0] is process:
            self.sim.current, process.value = process, found[1]
        else:
            self._pass_baton(found)
            process.wake.acquire()
        if self.sim.failed:
            raise SimulationAborted()
        return process.value

    def failed(self) -> None:
        self.main.release()

    def run(self) -> None:
        if self._pass_baton(self.sim.next_resume()) is None:
            self.main.acquire()
            return
        seen = -1
        while not self.main.acquire(timeout=STALL_SECONDS):
            if self.sim.events == seen:          # no event for a long while: a real lock?
                name = self.sim.current.name if self.sim.current else None
                self.sim.failed, self.sim.error = True, RuntimeError(
                    f"simulation stalled for {STALL_SECONDS:.0f} s at t={self.sim.now:.6f}: "
                    f"process {name} blocked on something that is not simulated (a real lock?)")
                return
            seen = self.sim.events

    def abort(self, processes: list) -> None:
        """Unwind every waiting process's thread (they raise SimulationAborted)."""
        for p in processes:
            p.wake.release()
        for p in processes:
            p.stack.join(timeout=5)


class GreenletCarrier:
    """Processes as greenlets (if the ``greenlet`` package is installed): the event loop
    runs in the caller of ``run()`` and switches to each process in turn. The same
    order as with threads, so the same results; far cheaper with thousands of clients."""

    name = "greenlets"

    def __init__(self, sim: "Simulator"):
        import greenlet
        self.sim = sim
        self.greenlet = greenlet.greenlet
        self.loop = None

    def start(self, process: Process) -> None:
        process.stack = self.greenlet(process.body)

    def block(self, process: Process):
        value = self.loop.switch()
        if self.sim.failed:
            raise SimulationAborted()
        return value

    def failed(self) -> None:
        pass

    def run(self) -> None:
        with gc_paused(IN_BROWSER):              # Pyodide: see greenlets.gc_paused
            self.loop_until_done()

    def loop_until_done(self) -> None:
        self.loop = self.greenlet.getcurrent()
        sim = self.sim
        while (found := sim.next_resume()) is not None:
            process, value = found
            sim.current = process
            if process.stack:                    # suspended in block(): resume with value
                switch_into(process.stack, value)
            else:                                # not started yet
                switch_into(process.stack)
            sim.current = None

    def abort(self, processes: list) -> None:
        for p in processes:
            if p.stack:                          # started and suspended: unwind it
                try:
                    p.stack.throw(SimulationAborted())
                except SimulationAborted:
                    pass


def default_carrier() -> str:
    """``"greenlets"`` when the greenlet package is installed, else ``"threads"``."""
    return "greenlets" if importlib.util.find_spec("greenlet") is not None else "threads"


class Simulator:
    """The event loop; see the module docstring. ``run()`` returns once no event is left.

    ``carrier``: how processes keep their call stacks, ``"threads"`` or
    ``"greenlets"`` (default: greenlets when installed). Results do not depend on it.
    """

    def __init__(self, clock: Optional[SimulatedClock] = None, carrier: Optional[str] = None):
        self.clock = clock if clock is not None else SimulatedClock()
        self.clock.simulator = self
        carrier = carrier or default_carrier()
        if carrier not in ("threads", "greenlets"):
            raise ValueError(f"carrier must be 'threads' or 'greenlets', got {carrier!r}")
        self.carrier = ThreadCarrier(self) if carrier == "threads" else GreenletCarrier(self)
        self.current: Optional[Process] = None     # the process now running
        self.failed = False
        self.error: Optional[BaseException] = None
        self.events = 0
        self.on_event: Optional[Callable] = None   # called every 4096 events (progress)
        self._heap: list = []
        self._seq = 0
        self._processes: list = []

    @property
    def now(self) -> float:
        return self.clock.now()

    # -- scheduling --------------------------------------------------------
    def at(self, time: float, fn: Optional[Callable], *args) -> None:
        """Fire ``fn(*args)`` at simulated ``time`` (``fn`` None: resume ``args``)."""
        heapq.heappush(self._heap, (time, self._seq, fn, args))
        self._seq += 1

    def after(self, delay: float, fn: Optional[Callable], *args) -> None:
        self.at(self.clock.now() + delay, fn, *args)

    def resume(self, process: Process, value=None, delay: float = 0.0) -> None:
        """Let ``process`` go on after ``delay``; its :meth:`block` returns ``value``."""
        self.at(self.clock.now() + delay, None, process, value)

    def spawn(self, name: str, target: Callable, data=None, delay: float = 0.0) -> Process:
        """A process that starts ``target(process)`` after ``delay`` simulated seconds."""
        process = Process(self, name, target, data)
        self._processes.append(process)
        self.carrier.start(process)
        self.resume(process, None, delay)
        return process

    def next_resume(self):
        """Fire events until one resumes a process: ``(process, value)``; None when none left."""
        heap, clock = self._heap, self.clock
        while heap and not self.failed:
            time, _seq, fn, args = heapq.heappop(heap)
            if time > clock.now():
                clock.advance(time - clock.now())
            self.events += 1
            if self.on_event is not None and self.events % 4096 == 0:
                self.on_event(self)
            if fn is None:
                return args
            fn(*args)
        return None

    # -- processes ----------------------------------------------------------
    def block(self, process: Process):
        """Called by the running ``process`` once it has scheduled its own resume; returns
        the value it is resumed with, when its turn comes."""
        return self.carrier.block(process)

    def wait(self, process: Process, seconds: float):
        """Block ``process`` for ``seconds`` of simulated time (plus what it owes)."""
        self.resume(process, None, process.take_carry() + seconds)
        return self.block(process)

    def fail(self, error: BaseException) -> None:
        """A process raised: stop, and let ``run()`` re-raise ``error``."""
        if self.failed:
            return
        self.failed, self.error = True, error
        self.current = None
        self.carrier.failed()

    def run(self) -> None:
        """Run every event (the processes in turn) until none is left; re-raise a failure."""
        self.carrier.run()
        stuck = [p for p in self._processes if not p.done]
        if stuck and not self.failed:
            self.failed, self.error = True, RuntimeError(
                f"simulation stalled: {len(stuck)} processes wait for an event that never "
                f"comes (e.g. {[p.name for p in stuck[:3]]})")
        if self.failed:
            self.carrier.abort(stuck)
            raise self.error


class Resource:
    """A FIFO server with ``capacity`` units (cores) and a service time per request.

    ``use(service, fn, *args)`` calls ``fn(*args)`` once the request has been
    served (``fn`` None: resume the process in ``args``); ``use_then`` also
    waits ``delay`` after (a reply on the wire). Requests are served in the
    order they arrive, so a request's start is known when it arrives: the
    resource needs no event of its own. Busy time is summed inside
    ``window`` (``(start, end)`` in simulated seconds).
    """

    def __init__(self, sim: Simulator, name: str, capacity: int = 1):
        self.sim, self.name, self.capacity = sim, name, capacity
        self.free_at = [0.0] * capacity         # a heap: when each unit is next free
        self.window = (0.0, 0.0)
        self.busy_time = 0.0              # inside the window
        self.served = 0

    def use(self, service: float, fn: Optional[Callable], *args) -> None:
        self.use_then(service, 0.0, fn, *args)

    def use_then(self, service: float, delay: float, fn: Optional[Callable], *args) -> None:
        now = self.sim.now
        begin = max(now, heapq.heappop(self.free_at))
        end = begin + service
        heapq.heappush(self.free_at, end)
        self.served += 1
        start, stop = self.window
        self.busy_time += max(0.0, min(end, stop) - max(begin, start))
        self.sim.at(end + delay, fn, *args)

    def utilization(self) -> float:
        """Busy fraction of the window (all units together)."""
        start, end = self.window
        return self.busy_time / (self.capacity * (end - start)) if end > start else 0.0
