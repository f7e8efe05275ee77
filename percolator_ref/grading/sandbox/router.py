"""The template's loop: it has the world's clients forked, hands them over, and ends them.

:class:`Router` reads the world's ``spawn``, ``gone`` and ``bye`` (:mod:`.processes`) and
never carries the clients' other messages: the grader talks to each client process
directly, over the pipes the router hands it.
"""
from __future__ import annotations

import gc
import os
import socket

from ..channel import FrameReader, ProtocolError, framed
from .processes import ENDS, HANDOVER, SPAWN, Forker, Template, end_client, kill_pidfd, write_all


class Router:
    """The template's loop: it starts and ends the world's clients; it never carries their
    messages.

    For each ``spawn`` of the world (a :func:`~.channel.routed` frame on the channel),
    the router hands the spawn to a spare client process, then passes that client's two
    pipe ends to the grader over the fd socket (``SCM_RIGHTS``, with the client's id) and
    closes its own copies: the grader and the client then talk directly, the grader
    knowing who speaks by the pipe it reads. ``gone`` and ``bye`` kill the client. A
    spare is asked of the :class:`Forker` ahead, at the top of the loop, so a spawn
    finds one whose answer cells have run already; a second spawn in the same read
    waits for the next spare.
    """

    def __init__(self, template: Template, fds, fd_socket: int):
        self.template, self.down = template, fds[0]
        self.world = FrameReader(fds[0], routed=True)
        self.socket = socket.socket(fileno=fd_socket)
        self.pids: dict = {}                     # the world's client id -> its pidfd
        self.spare = self.forker = None
        self.forked = 0                          # client processes started (a spare each)

    def run(self) -> None:
        gc.freeze()                     # the forks share the template's pages untouched
        self.forker = Forker(self.template, self.scrub)
        try:
            while True:
                if self.spare is None:
                    try:
                        self.spare = self.forker.fork()
                    except OSError:
                        return
                    self.forked += 1
                left = self.from_world(read=False)       # frames left by a spawn
                if left is False or left is None and self.from_world(read=True) is False:
                    return
        finally:
            for pidfd in list(self.pids.values()):
                kill_pidfd(pidfd)
            if self.spare is not None:
                end_client(self.spare)
            self.forker.close()

    def scrub(self) -> None:
        """In the forker's fork: drop the router's socket (it would close its descriptor
        number, another's there, when collected) and whatever it holds of the world."""
        self.world.buffer = bytearray()
        self.socket.detach()
        self.world = self.socket = None

    def from_world(self, read: bool):
        """Act on the world's whole frames (``read``: wait for one read first); False once
        the world closed the channel (or broke a frame), True if a spawn took the spare
        and frames may be left, None when none is."""
        try:
            if read and not self.world.read_some():
                return False
            while True:
                found = self.world.take()
                if found is None:
                    return None
                (_, cid), data = found
                if self.to_client(cid, data):
                    return True
        except ProtocolError:
            return False

    def to_client(self, cid: int, data: bytes) -> bool:
        """One message of the world for client ``cid``; True if it spawned it."""
        if data.startswith(SPAWN) and cid not in self.pids and self.spare is not None:
            c, self.spare = self.spare, None
            self.pids[cid] = c.pidfd
            try:
                write_all(c.down, framed(data))
                socket.send_fds(self.socket, [HANDOVER.pack(cid)], [c.down, c.up])
            except OSError:              # the grader is gone: so is the channel
                pass
            os.close(c.down)
            os.close(c.up)
            return True
        if data in ENDS and cid in self.pids:
            kill_pidfd(self.pids.pop(cid))
        return False
