"""Answers that try to pass state from one client to another through process memory.

Each is a catalogue answer (``tests/wrong_answers/exNN_*.py``) with a trick
added: while every client of a family ran as a thread of one sandboxed
interpreter, the trick raised its score (a crashed oracle remembered its
marks, two concurrent withdrawals saw each other); with one process per client
incarnation it must score exactly what the plain answer scores.
"""
from wrong_answers.ex05_oracle import WRONG as EX05
from wrong_answers.ex08_write_skew import WRONG as EX08

IN_PLACE = "overwrites the mark in place (a crash between emptying the file and writing it loses the mark)"
SKEW = "checks the total but writes only its own account (write skew)"

REMEMBERS_MARKS = EX05[IN_PLACE].replace('''            mark = int(text) if text else 0          # an empty file: no mark yet
''', '''            mark = int(text) if text else MARKS.get(state_path, 0)   # emptied by a crash
''').replace('''                    f.write(str(self.limit))
''', '''                    f.write(str(self.limit))
                MARKS[self.state_path] = self.limit
''').replace('''        ts, self.next = self.next, self.next + 1
        return ts
''', '''        ts, self.next = self.next, self.next + 1
        MARKS[self.state_path] = max(MARKS.get(self.state_path, 0), ts + 1)   # all served
        return ts
''').replace("import os\n", "import os\n\nMARKS = {}   # state file -> last mark written, in process memory\n", 1)

SEES_THE_OTHER = '''
import gc
import threading

IN_FLIGHT = {}    # customer -> [[client id, amount, commit_ts or None], ...]


def _client_id():
    """The id of the client running this: its thread's (a thread per client), else the host's."""
    args = getattr(threading.current_thread(), "_args", ())
    if args:
        return args[0]
    return max(next(o for o in gc.get_objects() if type(o).__name__ == "ClientHost").inboxes)


def _live_clients():
    """The ids of the clients this process serves now."""
    hosts = [o for o in gc.get_objects() if type(o).__name__ == "ClientHost"]
    return {cid for host in hosts for cid in host.inboxes}


def withdraw(txn, customer, account, amount):
    me = _client_id()
    checking = txn.get(customer, "checking") or 0
    savings = txn.get(customer, "savings") or 0
    unseen = sum(e[1] for e in IN_FLIGHT.get(customer, [])   # my partner's, unseen by my snapshot
                 if abs(e[0] - me) == 1 and e[0] in _live_clients()
                 and (e[2] is None or e[2] > txn.start_ts))
    if checking + savings - unseen < amount:
        return False
    entry = [me, amount, None]
    IN_FLIGHT.setdefault(customer, []).append(entry)
    commit = txn.commit

    def committed(*args, **kwargs):
        ok = commit(*args, **kwargs)
        entry[2] = txn.commit_ts if ok else -1
        return ok
    txn.commit = committed
    balance = checking if account == "checking" else savings
    txn.set(customer, account, balance - amount)
    return True
'''
assert REMEMBERS_MARKS.count("MARKS") == 5

MARKS_IN_STDOUT = REMEMBERS_MARKS.replace(
    "MARKS = {}   # state file -> last mark written, in process memory\n", '''
class _Register:
    """The marks kept in the offset of stdout (an open file every client process would
    inherit from the sandbox: one offset for all of them); below BASE read as "none"."""
    BASE = 1 << 40

    def get(self, key, default=0):
        try:
            offset = os.lseek(1, 0, os.SEEK_CUR)
        except OSError:                  # not a file: no register
            return default
        return offset - self.BASE if offset >= self.BASE else default

    def __setitem__(self, key, value):
        try:
            os.lseek(1, self.BASE + value, os.SEEK_SET)
        except OSError:
            pass


MARKS = _Register()
''')
assert "_Register()" in MARKS_IN_STDOUT

ATTACKS = {    # name: (exercise, plain answer, the answer with the trick)
    "a crashed oracle's marks kept in a module global": (5, EX05[IN_PLACE], REMEMBERS_MARKS),
    "two withdrawals that see each other in process memory": (8, EX08[SKEW], SEES_THE_OTHER),
    "a crashed oracle's marks kept in the offset of an inherited stdout": (
        5, EX05[IN_PLACE], MARKS_IN_STDOUT),
}

SIBLING_PROBE = '''
import fcntl, os, shutil


def _sees_another_process():
    """What a client could share with a sibling without the world: which of these works?"""
    found, other = [], os.getppid() or 2   # 0: its parent is outside its PID namespace
    for name, call in [
            ("its niceness", lambda: os.getpriority(os.PRIO_PROCESS, other)),
            ("its process group's niceness", lambda: os.setpriority(os.PRIO_PGRP, 0, 19)),
            ("its affinity", lambda: os.sched_getaffinity(other)),
            ("its process group", lambda: os.getpgid(other)),
            ("a lock on a file both read", lambda: fcntl.flock(open(os.__file__), fcntl.LOCK_SH)),
            ("the shared disk's free space", lambda: shutil.disk_usage(".")),
            ("a pidfd", lambda: os.pidfd_open(other)),
            ("a signal", lambda: os.kill(other, 0)),
            ("a fork", lambda: os.fork() or 1),
            ("another client's folder", lambda: os.listdir("..")),
            ("POSIX shared memory", lambda: __import__("_posixshmem").shm_open(
                "/percolator-sibling", os.O_CREAT | os.O_RDWR, 0o600))]:
        try:
            call()
            found.append(name)
        except (OSError, ImportError):        # PermissionError (the guard), EPERM (seccomp)
            pass
    return found
'''
"""Run by a client: the channels to another process of the sandbox it finds open. Any one
of them lets two clients (or two incarnations of one) pass state the world never sees.
(Exercise 5's files, /dev/shm's too, are the world's virtual disk: not a channel.)"""

INCARNATION_PROBE = '''
import gc, json, os, sys, threading


def _routers():
    """What the router that forked this process holds (found up the call stack)."""
    frame, found = sys._getframe(), []
    while frame is not None:
        router = frame.f_locals.get("self")
        if type(router).__name__ == "Router":
            found.append((router.forked, len(router.template.drain.fds)))
        frame = frame.f_back
    return found


def _observe():
    """What this client process can tell of its incarnation before it has heard anything."""
    seen = {"folder": os.getcwd(), "pid": os.getpid(), "parent": os.getppid(),
            "thread": threading.get_native_id(), "folder inode": os.stat(".").st_ino,
            "parent links": os.stat("..").st_nlink, "router": _routers(),
            "interpreter": {"heap blocks": sys.getallocatedblocks(), "gc": gc.get_count(),
                            "collections": [g["collections"] for g in gc.get_stats()],
                            "an address": id(object())}}
    with open("new-file", "w") as f:           # a new inode's number counts the disk's files
        seen["new file inode"] = os.fstat(f.fileno()).st_ino
    try:
        seen["/proc/self"] = os.readlink("/proc/self")
    except OSError as exc:
        seen["/proc/self"] = type(exc).__name__
    return seen


print("OBSERVED " + json.dumps(_observe(), sort_keys=True), flush=True)
'''
"""Run by every client process as its answer cells start, having heard nothing: what it
prints must be the same in each, or a client could tell (and act on) its incarnation."""

ROOM_PROBE = '''
import errno, json, os, threading


def _room(most: int, make):
    """How many of ``make(i)`` this process can add (then removed): a limit that another
    process's files or threads bring nearer is a register it sets and this reads."""
    made = []
    try:
        while len(made) < most:
            made.append(make(len(made)))
    except (OSError, RuntimeError) as exc:      # PermissionError: the guard's own limit
        if isinstance(exc, OSError) and exc.errno not in (errno.ENOSPC, errno.EFBIG, errno.EACCES):
            raise
    for thing in made:
        thing.set() if isinstance(thing, threading.Event) else os.remove(thing)
    return len(made)


def _megabyte(i):
    name = f"fill-{i}"
    with open(name, "wb") as f:
        try:
            f.write(bytes(1 << 20))
        except OSError:
            f.close()
            os.remove(name)
            raise
    return name


def _file(i):
    open(f"empty-{i}", "w").close()
    return f"empty-{i}"


def _thread(i):
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
    return stop


threading.stack_size(1 << 16)                   # small stacks: the address space is no limit
room = {"megabytes": _room(96, _megabyte), "files": _room(6000, _file),
        "threads": _room(300, _thread)}
try:                                            # what this process leaves for the next
    with open("ballast", "wb") as f:
        f.write(bytes(1 << 20))
    for i in range(20):
        open(f"kept-{i}", "w").close()
except OSError:                                 # the disk is full
    pass
try:
    for i in range(4):
        _thread(i)                              # and threads that never end
except RuntimeError:                            # those above not quite gone yet
    pass
print("ROOM " + json.dumps(room, sort_keys=True), flush=True)
'''
"""Run by every client process as its answer cells start: the room it finds on its disk
(megabytes, then files) and for threads (all then removed), before it leaves a megabyte,
20 files and 4 threads behind. The same in each, or the limit is a register between
incarnations (the disk's size and inodes; the private uid's RLIMIT_NPROC)."""
