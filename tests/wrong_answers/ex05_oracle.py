"""Exercise 5 (timestamp oracle): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.
"""

WRONG = {
    "forgets to read the mark at a restart (starts again at first_timestamp)": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path = state_path
        self.range_size = range_size
        self.next = first_timestamp
        self.limit = first_timestamp

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path:
                with open(self.state_path, "w") as f:
                    f.write(str(self.limit))
        ts = self.next
        self.next += 1
        return ts
''',
    "persists the range end only once the range is used up": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.path = state_path
        self.size = range_size
        start = first_timestamp
        if state_path and os.path.exists(state_path):
            start = max(start, int(open(state_path).read()))
        self.next = start
        self.end = start + range_size          # my first range

    def get_timestamp(self):
        ts = self.next
        self.next += 1
        if self.next == self.end:              # range finished: save it and take the next one
            if self.path:
                with open(self.path, "w") as f:
                    f.write(str(self.end))
            self.end += self.size
        return ts
''',
    "writes the mark on every call (no ranges)": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path = state_path
        self.next = first_timestamp
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                self.next = max(first_timestamp, int(f.read()))

    def get_timestamp(self):
        ts = self.next
        self.next += 1
        if self.state_path is not None:
            with open(self.state_path, "w") as f:
                f.write(str(self.next))        # safe: never reissued
        return ts
''',
    "saves the start of the range instead of its end": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        saved = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                saved = int(f.read())
        self.next = max(first_timestamp, saved)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            if self.state_path is not None:
                with open(self.state_path, "w") as f:
                    f.write(str(self.next))     # where this range begins
            self.limit = self.next + self.range_size
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "saves the last timestamp of the range (inclusive) and restarts on it": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        highest = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                highest = int(f.read())
        self.next = max(first_timestamp, highest)
        self.highest = self.next - 1

    def get_timestamp(self):
        if self.next > self.highest:
            self.highest = self.next + self.range_size - 1      # highest allocated timestamp
            if self.state_path is not None:
                with open(self.state_path, "w") as f:
                    f.write(str(self.highest))
        ts = self.next
        self.next += 1
        return ts
''',
    "prefers the mark over first_timestamp whenever a mark exists": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                self.next = int(f.read())          # restarting: continue from the mark
        else:
            self.next = first_timestamp
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                with open(self.state_path, "w") as f:
                    f.write(str(self.limit))
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "assumes there is always a state file": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if os.path.exists(str(state_path)):
            mark = int(open(state_path).read())
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            with open(self.state_path, "w") as f:
                f.write(str(self.limit))
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "keeps using the persisted range after a restart": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        self.next = first_timestamp
        self.limit = first_timestamp
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                self.limit = int(f.read())          # that range is already allocated: use it

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                with open(self.state_path, "w") as f:
                    f.write(str(self.limit))
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "appends each new mark to the state file": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                with open(self.state_path, "a") as f:      # keep a log of the marks
                    f.write(f"{self.limit}\\n")
        ts, self.next = self.next, self.next + 1
        return ts
''',
}


# Misconceptions about a crash or a restart. Grading keeps the state file on the grader's own
# disk and crashes the oracle at each of its disk calls: a background writer the oracle starts
# is refused there (only the oracle's own calls reach its disk), so that entry is caught by the
# single-run checks too.
WRONG.update({
    "overwrites the mark in place (a crash between emptying the file and writing it loses the mark)": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                text = f.read().strip()
            mark = int(text) if text else 0          # an empty file: no mark yet
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                with open(self.state_path, "w") as f:     # replace the old mark
                    f.write(str(self.limit))
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "persists the mark in a background thread (the caller need not wait for the disk)": '''
import os
import threading


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def _save(self, mark):
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(mark))
        os.replace(tmp, self.state_path)

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:      # the disk is slow: save in the background
                threading.Thread(target=self._save, args=(self.limit,)).start()
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "allocates its first range at start from first_timestamp, not from the mark": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
        self.next = max(first_timestamp, mark)
        self.limit = first_timestamp + range_size    # allocate the first range right away
        self._save(self.limit)

    def _save(self, mark):
        if self.state_path is not None:
            tmp = self.state_path + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(mark))
            os.replace(tmp, self.state_path)

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            self._save(self.limit)
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "moves the old state file aside as a backup before writing the new mark": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                if os.path.exists(self.state_path):     # keep the previous mark, just in case
                    os.replace(self.state_path, self.state_path + ".bak")
                with open(self.state_path, "w") as f:
                    f.write(str(self.limit))
        ts, self.next = self.next, self.next + 1
        return ts
''',
    "reads the mark, then removes the state file so a stale mark cannot linger": '''
import os


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.state_path, self.range_size = state_path, range_size
        mark = 0
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
            os.remove(state_path)                # used up: the next range writes a fresh one
        self.next = max(first_timestamp, mark)
        self.limit = self.next

    def get_timestamp(self):
        if self.next >= self.limit:
            self.limit = self.next + self.range_size
            if self.state_path is not None:
                tmp = self.state_path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(self.limit))
                os.replace(tmp, self.state_path)
        ts, self.next = self.next, self.next + 1
        return ts
''',
})

INTERLEAVING = {
    # misconceptions that only a crash (or a restart) shows: every single-run check passes them
    "overwrites the mark in place (a crash between emptying the file and writing it loses the mark)",
    "allocates its first range at start from first_timestamp, not from the mark",
    "moves the old state file aside as a backup before writing the new mark",
    "reads the mark, then removes the state file so a stale mark cannot linger",
}


# A crash half-way through a write (a torn write: the file holds the first half of the
# characters written). Every other crash point leaves a file whole or empty: only the torn
# crash points of the last check show these (issue 30). Each is another entry with its
# reading of the state file changed.
IN_PLACE = "overwrites the mark in place (a crash between emptying the file and writing it loses the mark)"
REMOVES = "reads the mark, then removes the state file so a stale mark cannot linger"
WRONG.update({
    "overwrites the mark in place and jumps a thousand ranges ahead on an empty file":
        WRONG[IN_PLACE].replace(
            "            mark = int(text) if text else 0          # an empty file: no mark yet\n",
            "            # an empty file: we crashed while writing the mark, so skip far ahead\n"
            "            mark = int(text) if text else first_timestamp + 1000 * range_size\n"),
    "prefers the temporary file a crash left behind (it holds the newer mark)":
        WRONG[REMOVES].replace('''\
        if state_path is not None and os.path.exists(state_path):
            with open(state_path) as f:
                mark = int(f.read())
            os.remove(state_path)                # used up: the next range writes a fresh one
''', '''\
        for path in (state_path + ".tmp", state_path) if state_path is not None else ():
            if os.path.exists(path):             # a leftover .tmp holds the newest mark
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    mark = int(text)
                    break
'''),
})
assert all(WRONG[name] not in (WRONG[IN_PLACE], WRONG[REMOVES]) for name in list(WRONG)[-2:])
INTERLEAVING |= {"overwrites the mark in place and jumps a thousand ranges ahead on an empty file",
                 "prefers the temporary file a crash left behind (it holds the newer mark)"}


# A restart with first_timestamp above the mark whose range is allocated from the old mark (the
# timestamp served lies above the mark then on disk), and a torn write that keeps only a short
# prefix (a fixed-width record keeps its whole mark in the first half of what it wrote): only the
# first_timestamp check's persistence rule and the crash check's one-character torn write show
# these.
S8, S12, S16, S20 = (" " * n for n in (8, 12, 16, 20))       # the cells' indents
APPENDS = "appends each new mark to the state file"
WRONG.update({
    "allocates each range right after the last, even when first_timestamp jumped past them":
        WRONG[REMOVES]
        .replace(S12 + "os.remove(state_path)                # used up: the next range writes a "
                 "fresh one\n", "")
        .replace(S8 + "self.limit = self.next\n",
                 S8 + "self.limit = mark if mark else self.next     # the allocated ranges end at "
                 "the mark\n")
        .replace(S8 + "if self.next >= self.limit:\n" + S12 + "self.limit = self.next + "
                 "self.range_size\n",
                 S8 + "if self.next >= self.limit:                  # allocate the next range, "
                 "right after the last\n" + S12 + "self.limit += self.range_size\n")
        .replace(S20 + "f.write(str(self.limit))\n",
                 S20 + "f.write(str(self.limit))\n" + S20 + "f.flush()\n"
                 + S20 + "os.fsync(f.fileno())\n"),
    "overwrites a fixed-width record in place (never emptied, so never lost)":
        WRONG[APPENDS]
        .replace("import os\n", "import os\n\nWIDTH = 20                      # a fixed-width "
                 "record: rewriting it never leaves stale digits\n", 1)
        .replace(S16 + "mark = int(f.read())\n",
                 S16 + "text = f.read().strip()\n"
                 + S12 + "mark = int(text) if text else 0      # empty: created, nothing served "
                 "yet\n")
        .replace(S8 + "self.limit = self.next\n", S8 + """self.limit = self.next

    def _save(self, mark):
        # overwrite the record in place: one write, and the file is never emptied first
        mode = "r+" if os.path.exists(self.state_path) else "w"
        with open(self.state_path, mode) as f:
            f.seek(0)
            f.write(str(mark).ljust(WIDTH))
            f.flush()
            os.fsync(f.fileno())
""")
        .replace(S16 + 'with open(self.state_path, "a") as f:      # keep a log of the marks\n'
                 + S20 + 'f.write(f"{self.limit}\\n")\n', S16 + "self._save(self.limit)\n"),
})
INTERLEAVING |= {"overwrites a fixed-width record in place (never emptied, so never lost)"}
