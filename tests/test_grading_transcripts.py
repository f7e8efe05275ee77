"""Recall (issue 27 item 7): a client is a function of what it heard, so the grader hands the
world a recorded answer instead of starting a process for a history it has seen; no
verdict may change, and a client that is not such a function is graded without recall."""
from __future__ import annotations

import os
import socket
import sys
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest

from percolator_ref.grading.channel import framed, routed
from percolator_ref.grading.framework import plain, without_addresses
from percolator_ref.grading.grade import grader
from percolator_ref.grading.sandbox.launcher import ClientPipes
from percolator_ref.grading.sandbox.processes import HANDOVER
from percolator_ref.grading.sandbox.transcripts import ENTRY_BYTES, Transcripts, after, recall_on
from percolator_ref.grading.judge.hub import Diverged
from grading_helpers import load_catalogue, solution_answer, student_notebook

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import recall_equivalence  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_history_key_is_the_chain_of_the_exact_messages():
    a, b = after(b"", b'{"op":"spawn"}'), after(b"", b'{"op":"spawn" }')
    assert a != b and len(a) == 16
    assert after(a, b"x") != after(b, b"x") and after(a, b"x") == after(a, b"x")
    assert after(after(b"", b"ab"), b"c") != after(after(b"", b"a"), b"bc")


def test_an_answer_heard_again_differently_stops_recall():
    t = Transcripts(on=True)
    t.record(b"k" * 16, b'{"op":"answer"}')
    assert t.recall(b"k" * 16) == b'{"op":"answer"}'
    t.check(b"k" * 16, b'{"op":"answer"}')          # the same again: fine
    with pytest.raises(Diverged):
        t.check(b"k" * 16, b'{"op":"answer","x":1}')
    assert not t.on and t.recall(b"k" * 16) is None and t.answers == {}


def test_the_switch_and_the_bytes_bound(monkeypatch):
    monkeypatch.setenv("PERCOLATOR_RECALL", "0")
    assert not recall_on() and not Transcripts().on
    monkeypatch.setenv("PERCOLATOR_RECALL", "1")
    t = Transcripts()
    assert t.on
    one = 50 + 16 + ENTRY_BYTES                      # an entry: its bytes and its objects
    with mock.patch("percolator_ref.grading.sandbox.transcripts.MAX_BYTES", one + one // 2):
        t.record(b"a" * 16, b"x" * 50)
        t.record(b"b" * 16, b"x" * 50)               # past the bound: not kept
    assert list(t.answers) == [b"a" * 16] and t.size == one


def test_the_bytes_bound_counts_what_the_entries_hold():
    """A client answering with the smallest frames makes the most entries: the memory the
    record really holds (its keys, its answers, its dict) stays within what it counts."""
    t = Transcripts(on=True)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20000):                       # each key and answer a fresh object
            t.record(after(b"", b"%d" % i), b'{"op":"ts"}' + b" " * (i % 2))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(t.answers) == 20000 and held <= t.size, (held, t.size)


def test_what_a_client_says_of_an_object_holds_no_memory_address():
    class Runner:
        pass
    assert "0x" in repr(Runner()) and without_addresses(repr(Runner())).endswith("at 0x..>")
    assert plain(Runner())["repr"] == plain(Runner())["repr"]


def test_recall_changes_no_result_and_starts_fewer_processes(tmp_path):
    """Exercise 2's solution and a wrong answer, graded with recall off and on under one
    secret: the same results check by check (the full catalogue: ``make recall-equivalence``)."""
    answers = [solution_answer(2), *list(load_catalogue(2).values())[:1]]
    for k, source in enumerate(answers):
        off, on, cost_off, cost_on = recall_equivalence.grade_both(
            2, source, tmp_path / f"{k}.ipynb")
        assert off == on
        assert cost_on["processes"] < cost_off["processes"]
        assert cost_off["recalled"] == 0 and cost_on["recalled"] > 0
        assert cost_on["schedules"] == cost_off["schedules"] > 0


NOT_A_FUNCTION = solution_answer(2).replace(
    "    def prewrite(self, m, primary):\n",
    "    def prewrite(self, m, primary):\n"
    "        import os\n"
    "        self.session.is_alive('nobody-' + os.urandom(4).hex())   # not from the world\n")


def test_a_client_that_is_not_a_function_of_what_it_heard_is_graded_without_recall(tmp_path):
    assert NOT_A_FUNCTION != solution_answer(2)
    off, on, cost_off, cost_on = recall_equivalence.grade_both(
        2, NOT_A_FUNCTION, tmp_path / "x.ipynb")
    assert cost_on["stopped"] == 1 and cost_off["stopped"] == 0
    assert [r[:2] for r in on] == [r[:2] for r in off]
    assert all(passed for _, passed, _ in on), on      # it prewrites right: full marks


DIVERGES_THEN_BREAKS = solution_answer(2).replace(
    "    def prewrite(self, m, primary):\n",
    "    def prewrite(self, m, primary):\n"
    "        import os\n"
    "        if self.client == 'worker':      # the one-worker family: its process exits\n"
    "            os._exit(0)\n"
    "        self.session.is_alive('nobody-' + os.urandom(4).hex())   # not from the world\n")


def test_a_notebook_runs_at_most_one_check_twice(tmp_path):
    """Found not a function of what it heard in one family (that check runs again), the
    client then breaks its child in the next: the fresh child serving the last family must
    not recall again, else a second check runs twice, past what each child's watchdog and
    the run's stall watchdog (:func:`grader.longest_notebook`) allow a notebook."""
    assert DIVERGES_THEN_BREAKS != solution_answer(2)
    off, on, cost_off, cost_on = recall_equivalence.grade_both(
        2, DIVERGES_THEN_BREAKS, tmp_path / "x.ipynb")
    assert cost_on["stopped"] == 1 and cost_off["stopped"] == 0
    assert on == off
    broke = [name for name, passed, _ in on if not passed]
    assert len(broke) == 1 and "one worker" in broke[0], on


def test_frames_a_replayed_client_sent_ahead_reach_the_world():
    """A client that sends two requests before it hears a reply (two threads, say) may have
    both read while its history is told again: the second, the answer to its last message,
    is already out of its pipe, and must still reach the world (else the world waits for
    it until the check's time limit)."""
    spawn, reply, ts, peek = (b'{"op":"spawn","role":"txn","args":[],"ttl":10.0}',
                              b'{"op":"reply","value":5}', b'{"op":"ts"}', b'{"op":"peek"}')
    channel, routed_up, (sock, router) = os.pipe(), os.pipe(), socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET)
    to_client, from_client = os.pipe(), os.pipe()
    pipes = ClientPipes(channel[1], routed_up[0], sock.detach(), recall=True)
    try:
        assert pipes.transcripts.on
        pipes.transcripts.record(after(b"", spawn), ts)       # an earlier client's answer
        deadline = time.monotonic() + 5
        pipes.write(routed(7, spawn), deadline)                # virtual: its answer recalled
        assert pipes.receive(1) == {"op": "ts", "cid": 7}
        os.write(from_client[1], framed(ts) + framed(peek))    # the process, once forked
        socket.send_fds(router, [HANDOVER.pack(7)], [to_client[1], from_client[0]])
        pipes.write(routed(7, reply), deadline)                # a history never recorded
        assert pipes.transcripts.heard_again == 1 and 7 in pipes.clients
        assert pipes.receive(1) == {"op": "peek", "cid": 7}
        assert pipes.transcripts.answers[after(after(b"", spawn), reply)] == peek
    finally:
        pipes.close()
        for fd in (*channel, *routed_up, to_client[0], from_client[1]):
            os.close(fd)
        router.close()
