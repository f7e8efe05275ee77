"""The instructor's workflow: submissions, one notebook per exercise, names, safe feedback text.

``percolator grade`` reads a path as *submissions*:

- a notebook, or a ``.zip`` of notebooks, is one submission;
- a folder is a set of submissions, one per top-level entry: a sub-folder (all
  notebooks below it), a ``.zip``, or a single notebook. This is how a class's
  download is laid out (one folder or archive per student).

Rules, each visible in the CSV (columns ``submission``, ``counted``, ``flags``),
the terminal report and Gradescope's ``results.json``:

- **One notebook per exercise.** In one submission only one notebook per
  exercise counts: the one whose file name is the exercise's own
  (``05_timestamp_oracle.ipynb``), else the first by path. The others are not
  run; their row says which notebook counts instead, and they carry no points.
  Two copies of a 6/8 notebook score 6 of 8, never 12.
- **One assignment** (``--exercise N``). A notebook for another exercise is not
  run and scores 0 of exercise N's checks, with the reason; a submission with no
  notebook for N gets a row saying so.
- **Duplicate names.** A student name (``metadata.percolator.student``, else the
  path) found in more than one submission is flagged on every row that has it:
  a notebook naming another student never silently gives them a second row.
- **Links are refused.** A symbolic link in a submission (a notebook, a folder, a
  zip, or the entry itself), or anything whose real path is outside the
  submission's entry, is not read: it gets a row saying so and scores nothing
  (a link to a classmate's notebook or to ``solutions/`` earns nothing).
- **One broken submission is one row.** Any error reading a submission (a zip
  with a bad CRC, an encrypted member, an unknown compression method, a member
  that is also a folder, an unreadable folder) becomes that submission's row;
  the other students are graded as usual.
- **Escaped text.** Everything a notebook can influence (its error messages,
  names, file names) goes through :func:`escape_text` before it is printed or
  written: control characters, terminal escapes and bidirectional overrides
  become visible ``\\x1b``-style escapes, so no forged line can look like a
  ``PASS``.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import exercise as exercise_module
from ..battery import Result
from .feedback import escape_text

MB = 1 << 20
MAX_ZIP_MB = 200            # uncompressed notebooks in one archive
MAX_ZIP_NOTEBOOKS = 200


# -- finding submissions ------------------------------------------------------------

@dataclass(frozen=True)
class Submission:
    """One student's submission: its name as the class download has it, and its notebooks."""
    name: str
    notebooks: tuple
    shown: tuple = ()        # how each notebook is named in reports (a zip member: "a.zip!/x")
    error: str = ""          # why it could not be read (a broken zip)
    refused: tuple = ()      # ``(shown, reason)`` of each entry not read (a symbolic link)


def notebooks_under(folder: Path) -> list:
    """The notebooks below ``folder`` (real files inside it; see :func:`scan`)."""
    return scan(folder)[0]


def scan(folder: Path) -> tuple:
    """``(notebooks, zips, refused)`` below ``folder``: real files whose real path is
    inside ``folder``, and ``[(path, reason)]`` of every symbolic link met (never followed)."""
    root = Path(folder)
    real_root = root.resolve()
    notebooks, zips, refused = [], [], []
    for p in sorted(root.rglob("*")):
        if ".ipynb_checkpoints" in p.relative_to(root).parts:
            continue
        if p.is_symlink():
            refused.append((p, LINK))
        elif p.suffix in (".ipynb", ".zip") and p.is_file():
            if not inside(p, real_root):
                refused.append((p, OUTSIDE))
            else:
                (notebooks if p.suffix == ".ipynb" else zips).append(p)
    return notebooks, zips, refused


LINK = "refused: a symbolic link (submit the notebook itself); not read, it scores nothing"
OUTSIDE = "refused: its real path is outside the submission; not read, it scores nothing"


def inside(path: Path, real_root: Path) -> bool:
    """Is ``path``'s real path inside ``real_root`` (no link on the way out)?"""
    try:
        path.resolve(strict=True).relative_to(real_root)
    except (OSError, ValueError, RuntimeError):
        return False
    return True


def find_submissions(path, unpack_dir) -> list:
    """The submissions at ``path`` (see the module docstring); zips are unpacked in ``unpack_dir``.

    Raises FileNotFoundError when ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path {str(path)!r} does not exist")
    if path.is_file():
        return [_one(path, Path(unpack_dir))]
    subs = []
    for entry in entries(path):
        try:
            sub = _entry(entry, Path(unpack_dir))
        except Exception as exc:     # noqa: BLE001 - one unreadable submission is its own row
            sub = Submission(entry.stem, (), (), f"could not read this submission "
                                                 f"({type(exc).__name__})")
        if sub is not None:
            subs.append(sub)
    return subs


def entries(folder: Path) -> list:
    """The top-level entries of a class folder that may be submissions (folders, links,
    notebooks, zips), without reading them."""
    return [e for e in sorted(Path(folder).iterdir()) if e.name != ".ipynb_checkpoints"
            and (e.is_symlink() or e.is_dir() or e.suffix in (".ipynb", ".zip"))]


def _entry(entry: Path, unpack_dir: Path):
    """One top-level entry of a class folder as a submission, or None (nothing to grade)."""
    if entry.is_symlink():
        return Submission(entry.stem, (), (), LINK) if entry.suffix in (".ipynb", ".zip") \
            or entry.is_dir() else None
    if entry.is_dir():
        found, zips, refused = scan(entry)
        if not (found or zips or refused):
            return None
        return _gather(entry.name, entry, found, zips, refused, unpack_dir)
    if entry.is_file() and entry.suffix in (".ipynb", ".zip"):
        return _one(entry, unpack_dir)
    return None


def whole_submission(folder, unpack_dir, name: str = "submission") -> Submission:
    """Everything under ``folder`` as one submission (Gradescope's): notebooks and zipped ones."""
    found, zips, refused = scan(Path(folder))
    return _gather(name, Path(folder), found, zips, refused, Path(unpack_dir))


def _gather(name: str, folder: Path, found, zips, refused, unpack_dir: Path) -> Submission:
    """A folder's notebooks, its zips' notebooks and its refused entries (links, broken
    zips) as one submission."""
    notebooks, shown = list(found), [str(p.relative_to(folder)) for p in found]
    refused = [(str(p.relative_to(folder)), why) for p, why in refused]
    for z in zips:
        inner = _one(z, unpack_dir)
        notebooks += inner.notebooks
        shown += [f"{z.relative_to(folder)}!/{s.split('!/', 1)[1]}" for s in inner.shown]
        refused += [(str(z.relative_to(folder)), inner.error)] if inner.error else []
    return Submission(name, tuple(notebooks), tuple(shown), refused=tuple(refused))


def _one(path: Path, unpack_dir: Path) -> Submission:
    """A notebook or a zip as one submission; any error reading it is the submission's error."""
    if path.suffix == ".zip":
        into = Path(tempfile.mkdtemp(prefix="zip-", dir=unpack_dir))
        try:
            members = unpack_zip(path, into)
        except Exception as exc:     # noqa: BLE001 - any broken zip is its own row
            shutil.rmtree(into, ignore_errors=True)          # nothing half-written is graded
            why = str(exc) if isinstance(exc, ValueError) else \
                f"{path.name} could not be unpacked ({_zip_error(exc)})"
            return Submission(path.stem, (), (), why)
        return Submission(path.stem, tuple(into / m for m in members),
                          tuple(f"{path}!/{m}" for m in members))
    return Submission(path.stem, (path,), (str(path),))


def _zip_error(exc: BaseException) -> str:
    """What went wrong unpacking a zip, in words that quote nothing from it."""
    if isinstance(exc, zipfile.BadZipFile):
        return "a damaged member (bad CRC or header)"
    if isinstance(exc, NotImplementedError):
        return "a member with an unsupported compression method"
    if isinstance(exc, RuntimeError):
        return "an encrypted member"
    if isinstance(exc, OSError):
        return "a member that cannot be written (a file and a folder of the same name?)"
    return type(exc).__name__


def unpack_zip(path: Path, into: Path) -> list:
    """Extract only the ``*.ipynb`` members of ``path`` into ``into``; their relative names.

    A member with an absolute or climbing name, a symbolic link, too many
    notebooks or too many bytes is refused (ValueError); nothing else is written.
    A damaged archive raises what :mod:`zipfile` raises (``zipfile.BadZipFile``,
    ``NotImplementedError``, ``RuntimeError``, ``OSError``).
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path.name} is not a readable zip: {exc}") from None
    with archive:
        members = [i for i in archive.infolist() if not i.is_dir() and i.filename.endswith(".ipynb")
                   and "__MACOSX" not in i.filename and ".ipynb_checkpoints" not in i.filename]
        if len(members) > MAX_ZIP_NOTEBOOKS or sum(i.file_size for i in members) > MAX_ZIP_MB * MB:
            raise ValueError(f"{path.name} holds more than {MAX_ZIP_NOTEBOOKS} notebooks "
                             f"or {MAX_ZIP_MB} MB")
        names = []
        for info in members:
            parts = Path(info.filename).parts
            if info.filename.startswith("/") or ".." in parts or (info.external_attr >> 28) == 0xA:
                raise ValueError(f"{path.name}: refused member {escape_text(info.filename)!r}")
            target = into.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "xb") as dst:
                shutil.copyfileobj(src, dst)
            names.append("/".join(parts))
    return sorted(names)


def notebook_exercise(path: Path):
    """``metadata.percolator.exercise`` read as plain JSON (no validation), or None."""
    try:
        if path.stat().st_size > 20 * MB:
            return None
        n = json.loads(path.read_text(errors="replace"))["metadata"]["percolator"]["exercise"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


# -- which notebook counts ----------------------------------------------------------

def choose(sub: Submission, exercises_dir, only=None) -> tuple:
    """``(counted, skipped)``: the notebooks to run, and ``(index, exercise, reason)`` of the rest.

    One notebook per exercise counts (the exercise's own file name, else the
    first by path); with ``only=N``, only exercise N's notebook runs and the
    others are skipped with why. A notebook whose exercise is unknown is run (its
    grade says what is wrong).
    """
    counted, skipped, chosen = [], [], {}
    exercises = [notebook_exercise(p) for p in sub.notebooks]
    for n in sorted({e for e in exercises if e is not None}):
        mine = [i for i, e in enumerate(exercises) if e == n]
        own = [i for i in mine if _own_name(sub.notebooks[i], n, exercises_dir)]
        chosen[n] = (own or mine)[0]
    for i, n in enumerate(exercises):
        if only is not None and n is not None and n != only:
            skipped.append((i, n, f"this notebook is exercise {n}; this run grades exercise "
                                  f"{only} (--exercise {only}): it scores 0"))
        elif n is not None and chosen[n] != i:
            first = sub.shown[chosen[n]] if sub.shown else str(sub.notebooks[chosen[n]])
            skipped.append((i, n, f"not counted: only one notebook per exercise counts in a "
                                  f"submission, and for exercise {n} it is {first}"))
        else:
            counted.append(i)
    return counted, skipped


def _own_name(path: Path, n: int, exercises_dir) -> bool:
    return any(p.name == path.name for p in Path(exercises_dir).glob(f"{n:02d}_*.ipynb"))


def zero_grade(grade_type, path: str, student: str, n: int, reason: str, counted: bool):
    """A grade for a notebook that was not run: 0 of exercise ``n``'s checks, or no points at all."""
    g = grade_type(path, student, exercise=n, problems=[reason])
    try:
        spec = exercise_module(n).exercise
    except (TypeError, ValueError):
        return g
    g.title = spec.title
    if counted:
        g.total = len(spec)
        g.checks = [Result(c.name, False, reason[:300]) for c in spec.checks]
    return g


# -- duplicate names ----------------------------------------------------------------

def flag_duplicate_names(grades) -> None:
    """Add a flag to every grade whose student name appears in another submission."""
    where = {}
    for g in grades:
        where.setdefault(g.student, set()).add(g.submission)
    for g in grades:
        others = sorted(where[g.student] - {g.submission})
        if others:
            g.flags.append(f"duplicate student name {g.student!r}: also in submission(s) "
                           + ", ".join(others))


# -- the whole run ------------------------------------------------------------------

def grade_submissions(path, exercises_dir, limits, jobs: int = 1, only=None, progress=None,
                      whole: bool = False) -> list:
    """Grade every submission at ``path``: one row per notebook, rules as the module says.

    ``only``: the assignment's exercise number (``--exercise``), or None.
    ``progress``: a tqdm bar (its total is set here) or None.
    ``whole``: the folder ``path`` is one submission (Gradescope's), not one per entry.
    """
    from .grader import grade_all
    if only is not None:
        exercise_module(only)             # a clear error for a wrong number, before any work
    unpack = Path(tempfile.mkdtemp(prefix="percolator-unpack-"))
    try:
        subs = [whole_submission(path, unpack)] if whole else find_submissions(path, unpack)
        runs = [(s, choose(s, exercises_dir, only)) for s in subs]
        paths = [s.notebooks[i] for s, (counted, _) in runs for i in counted]
        if progress is not None:
            progress.total = len(paths)
            progress.refresh()
        folder = Path(path) if Path(path).is_dir() else None
        graded = iter(grade_all(paths, exercises_dir, limits, jobs=jobs, folder=folder,
                                progress=progress))
        grades = [g for s, (counted, skipped) in runs
                  for g in _rows(s, counted, skipped, graded, folder, only)]
    finally:
        shutil.rmtree(unpack, ignore_errors=True)
    flag_duplicate_names(grades)
    return grades


def _rows(sub: Submission, counted, skipped, graded, folder, only) -> list:
    """The rows of one submission, in its notebooks' order, each named as the download names it."""
    from .grader import Grade, student_name
    if sub.error:                   # nothing read: with --exercise N, 0 of N's checks
        g = zero_grade(Grade, sub.name, sub.name, only, sub.error, True) if only is not None \
            else Grade(sub.name, sub.name, problems=[sub.error])
        return [_named(g, sub, None)]
    rows = {}
    for i in counted:
        g = next(graded)
        if g.student == student_name(None, sub.notebooks[i], folder):
            g.student = sub.name                  # no name in the metadata: the download's
        rows[i] = _named(g, sub, i)
    has_own = only is None or any(g.exercise == only and g.total for g in rows.values())
    for i, n, reason in skipped:
        stands_in = not has_own and n != only     # the assignment's row: 0 of its checks
        g = zero_grade(Grade, sub.shown[i], sub.name, only if stands_in else n, reason, stands_in)
        rows[i] = _named(g, sub, i, counted=stands_in)
        has_own = has_own or stands_in
    out = [rows[i] for i in sorted(rows)]
    stands_in = not any(g.counted for g in out) and (only is None or not has_own)
    for k, (shown, why) in enumerate(sub.refused):     # links, broken zips: not read
        first = stands_in and k == 0                  # the submission's row when nothing else is
        g = zero_grade(Grade, shown, sub.name, only, why, True) if first and only is not None \
            else Grade(shown, sub.name, problems=[why])
        out.append(_named(g, sub, None, counted=first))
        has_own = has_own or first
    if not has_own:
        out.append(_named(zero_grade(Grade, sub.name, sub.name, only, f"no notebook for exercise "
                                     f"{only} in this submission: it scores 0", True), sub, None))
    return out


def _named(g, sub: Submission, index, counted: bool = True):
    g.submission = sub.name
    g.counted = counted
    if index is not None:
        g.path = sub.shown[index]
    return g
