"""One process per client incarnation (issue 27, item 2).

The answers in ``wrong_answers/shared_memory.py`` add to a catalogue answer a
trick that passes state between clients through process memory (a module
global): the trick must gain nothing, graded through the sandbox. The probes there
(``INCARNATION_PROBE``, ``ROOM_PROBE``) print, from every client process, what it can
see of its incarnation and the room it finds under each shared limit: all the same in
each, or two incarnations could pass state (or a client tell which it is) without the
world.
"""
import json
import os

import pytest

from percolator_ref.grading.grade.grader import Limits, grade
from grading_helpers import solution_answer, student_notebook
from wrong_answers.shared_memory import ATTACKS


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_process_memory_shared_by_clients_gains_nothing(name, tmp_path):
    n, plain, trick = ATTACKS[name]
    alone = grade(student_notebook(tmp_path / "plain.ipynb", n, plain), limits=Limits())
    tricked = grade(student_notebook(tmp_path / "trick.ipynb", n, trick), limits=Limits())
    assert alone.problems == [] and tricked.problems == [], (alone.summary(), tricked.summary())
    assert 0 < alone.n_passed < alone.total
    assert [r.passed for r in tricked.checks] == [r.passed for r in alone.checks], \
        tricked.summary()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("n", [5, 8])
def test_a_solution_still_scores_full_marks_with_a_process_per_client(n, tmp_path):
    g = grade(student_notebook(tmp_path / "good.ipynb", n, solution_answer(n)), limits=Limits())
    assert g.problems == [] and g.passed and g.n_passed == g.total, g.summary()


@pytest.mark.timeout(900)
def test_a_client_cannot_read_or_change_another_process(tmp_path):
    """Exercise 5's solution whose oracle, once built, refuses to work if it finds a
    channel to another process (a niceness, an affinity, a process group, a file lock,
    the shared disk's free space): every check still passes, so none was open."""
    from wrong_answers.shared_memory import SIBLING_PROBE
    assert_refusing_oracle_passes(tmp_path, SIBLING_PROBE, "_sees_another_process()")


def assert_refusing_oracle_passes(tmp_path, prelude: str, found: str) -> None:
    """Grade exercise 5's solution after ``prelude``, its oracle raising if the expression
    ``found`` is true once it is built: every check must pass."""
    answer = solution_answer(5)
    trigger = "        self.state_path, self.range_size = state_path, range_size\n"
    assert trigger in answer
    probing = prelude + answer.replace(trigger, trigger + (
        f"        if {found}:\n"
        f"            raise RuntimeError(f'found {{{found}}}')\n"))
    g = grade(student_notebook(tmp_path / "probe.ipynb", 5, probing), limits=Limits())
    assert g.problems == [] and g.n_passed == g.total, g.summary()


STATUS_FLAG_PROBE = '''
import os

_FLAGGED = [fd for fd in (0, 1, 2) if not os.get_blocking(fd)]   # set by an earlier client?
for _fd in (0, 1, 2):
    os.set_blocking(_fd, False)          # O_NONBLOCK: a flag of the open file, not of the fd
'''


@pytest.mark.timeout(900)
def test_a_client_shares_no_open_file_with_another(tmp_path):
    """Exercise 5's solution whose answer cell sets O_NONBLOCK on its 0-2 and whose oracle
    refuses to work if it found the flag already set: a file status flag belongs to the open
    file, so an open file two client processes inherit is a register both can set and read
    (as its offset is, ``wrong_answers/shared_memory.py``): every check still passes."""
    assert_refusing_oracle_passes(tmp_path, STATUS_FLAG_PROBE, "_FLAGGED")


def grade_keeping_output(tmp_path, monkeypatch, n: int, answer: str):
    """``(grade, what the child's processes printed)``: the output is read as the child
    is ended (the clients' lines, written as each started, were copied long before)."""
    from percolator_ref.grading.sandbox import launcher
    printed, exit_ = [], launcher.InteractiveChild.__exit__

    def keeping(self, *exc):
        try:
            printed.append((self.io / "output").read_text(errors="replace"))
        except OSError:
            pass
        return exit_(self, *exc)
    monkeypatch.setattr(launcher.InteractiveChild, "__exit__", keeping)
    g = grade(student_notebook(tmp_path / "probe.ipynb", n, answer), limits=Limits())
    return g, "".join(printed)


def lines_after(tag: str, text: str) -> list:
    return [line[len(tag) + 1:] for line in text.splitlines() if line.startswith(tag + " ")]


@pytest.mark.timeout(900)
def test_a_client_cannot_tell_its_incarnation(tmp_path, monkeypatch):
    """Every client process of exercise 5's solution prints, as its answer cells start (it
    has heard nothing yet), what it can see of itself: its folder, pid, parent's pid,
    thread id, folder's inode, its parent folder's links, a new file's inode number,
    /proc/self, what the router holds, its interpreter's heap and garbage collector (a
    client forked from the router itself found one more object per client started before
    it). All the same in each. (The first line is the probe's, which runs the answer cells
    once before any client and serves none: it is forked from the template, not from the
    clients' forker, so its interpreter, stack and pid differ; the rest must not. Each
    client is the init of a PID namespace of its own: pid 1, its parent 0.)"""
    from wrong_answers.shared_memory import INCARNATION_PROBE
    g, text = grade_keeping_output(tmp_path, monkeypatch, 5, INCARNATION_PROBE + solution_answer(5))
    assert g.problems == [] and g.n_passed == g.total, g.summary()
    probe, *seen = lines_after("OBSERVED", text)
    assert len(seen) >= 10, text[-2000:]
    assert len(set(seen)) == 1, sorted(set(seen))[:4]
    mine, theirs = json.loads(probe), json.loads(seen[0])
    for field in ("router", "interpreter", "pid", "parent", "thread"):
        mine.pop(field), theirs.pop(field)
    assert [json.loads(seen[0])[k] for k in ("pid", "parent", "thread")] == [1, 0, 1]
    assert mine == theirs


@pytest.mark.timeout(900)
def test_no_shared_limit_is_a_register_between_clients(tmp_path, monkeypatch):
    """Every client process of exercise 5's solution measures, as its answer cells start,
    the room on its disk (a megabyte at a time, then a file at a time, until "No space
    left") and for threads (until one cannot start), then leaves a megabyte, 20 files and 4
    running threads behind: each must find the same room, so none can learn what another
    holds (the shared disk's free space and inodes were registers, and the private uid's
    RLIMIT_NPROC)."""
    from wrong_answers.shared_memory import ROOM_PROBE
    g, text = grade_keeping_output(tmp_path, monkeypatch, 5, ROOM_PROBE + solution_answer(5))
    room = lines_after("ROOM", text)
    assert len(room) >= 10, text[-2000:]
    assert len(set(room)) == 1, sorted(set(room))[:4]
    assert g.problems == [] and g.n_passed == g.total, g.summary()


def test_without_user_namespaces_a_client_folder_is_named_by_chance(tmp_path, monkeypatch):
    """Where the kernel refuses a client its own namespaces (here: unshare given flags it
    rejects), the layer line says so and each client process gets a new folder on the
    shared disk whose name is random, not a serial number."""
    from percolator_ref.grading.sandbox import space
    monkeypatch.setattr(space, "CLONE_NEWUSER", -1)
    shared = space.ClientSpace(str(tmp_path))
    assert not shared.own and shared.layer.startswith("clients share the sandbox's disk ("), \
        shared.layer
    folders = [shared.enter() for _ in range(3)]
    assert len(set(folders)) == 3 and all(os.path.dirname(f) == shared.room for f in folders)
    assert all(os.path.isdir(f) and os.listdir(f) == [] for f in folders)
