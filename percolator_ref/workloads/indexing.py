"""The paper's application, small but real: an incremental indexing pipeline.

A crawler *loads* documents; observers do the rest, each in its own
transaction (paper sections 1 and 2.4)::

    loader ──► document/contents ──parse──► document/parsed ──clustering──►
           dups/<hash> + document/hash ──(weak notify)──► document/export ──export──► serving

- ``parse`` (observes ``document/contents``): extracts links and anchor text;
  writes ``links`` and the content checksum ``parsed``; keeps the reverse
  links (with anchor text) in the ``inlinks`` table, one cell per target.
- ``clustering`` (observes ``document/parsed``): Figure 2's
  ``UpdateDocument`` generalised. The ``dups`` table maps a content hash to
  its ``members`` (``url=pagerank`` lines) and ``canonical`` URL, the
  highest-PageRank member (ties: smallest URL): the invariant of the paper's
  section 1, where Figure 2 keeps the first URL written. The document's
  ``hash`` and its dups row change in ONE transaction, so they agree in every
  snapshot.
  It sends weak notifications (``export``) to every document whose serving
  row may have changed, and rewrites the ``inlinks`` cells it read so that a
  concurrent ``parse`` adding a link conflicts with it instead of being missed.
- ``export`` (observes the notify-only column ``document/export``): writes
  the canonical documents to the ``serving`` table with their links pointing
  at canonical URLs, and removes documents that are no longer canonical.

:func:`batch_recompute` is the MapReduce way: recompute every derived table
from the whole repository. :func:`check_invariants` states what must hold.
:func:`change_rate_experiment` sets the two side by side as the share of the
repository changed per round grows (the kit's experiment in the shape of
§3.1's finding: incremental wins on small updates, batch on large ones).
"""
from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import dataclass
from typing import Iterable, Optional

DOCS, DUPS, INLINKS, SERVING = "document", "dups", "inlinks", "serving"
LINK = re.compile(r'<a href="([^"]+)">([^<]*)</a>')
WORDS = ("percolator bigtable snapshot isolation lock primary commit timestamp oracle "
         "observer notify crawl index link anchor page rank cluster duplicate search "
         "incremental batch latency throughput tablet chubby worker scanner").split()


@dataclass(frozen=True)
class Page:
    """A crawled page: ``url`` (no ``:``), HTML-ish ``contents``, a given ``pagerank``."""
    url: str
    contents: str
    pagerank: int


# -- the synthetic corpus ----------------------------------------------------------

def synthetic_corpus(n_pages: int = 300, seed: int = 0, dup_fraction: float = 0.2,
                     links_per_page: int = 4, url_space: Optional[int] = None) -> list:
    """``n_pages`` pages from ``seed``: links between them, ~``dup_fraction`` exact duplicates.

    URLs are ``siteNN.example/pageNNNN``; a duplicate copies another page's
    contents under its own URL (mirrors, as in the paper's Figure 2).
    PageRanks are distinct integers. ``url_space`` (default ``n_pages``)
    lets links point at pages not (yet) crawled.
    """
    if isinstance(n_pages, bool) or not isinstance(n_pages, int) or n_pages < 1:
        raise ValueError(f"n_pages must be an int >= 1, got {n_pages!r}")
    if not 0 <= dup_fraction < 1:
        raise ValueError(f"dup_fraction must be in [0, 1), got {dup_fraction!r}")
    rng = random.Random(seed)
    space = max(url_space or n_pages, n_pages)
    urls = [url_of(i) for i in range(space)]
    ranks = rng.sample(range(1, 100 * space + 1), n_pages)
    pages = []
    for i in range(n_pages):
        if pages and rng.random() < dup_fraction:
            contents = rng.choice(pages).contents        # a mirror: same bytes
        else:
            title = " ".join(rng.choice(WORDS) for _ in range(3))
            links = "".join(f'<a href="{rng.choice(urls)}">{rng.choice(WORDS)}</a> '
                            for _ in range(rng.randint(1, links_per_page)))
            contents = f"<title>{title}</title> page {i}: {links}"
        pages.append(Page(urls[i], contents, ranks[i]))
    return pages


def recrawl(pages: list, n: int, seed: int = 0) -> list:
    """``n`` re-crawled versions of ``pages``: new contents, a mirror's contents, or a new rank."""
    rng = random.Random(seed)
    out = []
    for page in rng.sample(pages, min(n, len(pages))):
        roll = rng.random()
        if roll < 0.4:
            contents = rng.choice(pages).contents             # now mirrors another page
        elif roll < 0.7:
            contents = page.contents + f" (updated {rng.randint(0, 9)})"
        else:
            contents = page.contents
        out.append(Page(page.url, contents, rng.randint(1, 100 * len(pages))))
    return out


def url_of(i: int) -> str:
    return f"site{i % 17:02d}.example/page{i:04d}"


def content_hash(contents: str) -> str:
    return hashlib.sha1(contents.encode()).hexdigest()[:12]


def parse_links(contents: str) -> list:
    """``[(target_url, anchor_text), ...]`` in document order."""
    return LINK.findall(contents)


# -- the loader ----------------------------------------------------------------------

def load(cluster, pages: Iterable[Page], client: Optional[str] = None) -> int:
    """The crawler: one transaction per page (contents first: the primary); retried on conflict."""
    loaded = 0
    for page in pages:
        if not isinstance(page, Page):
            raise TypeError(f"pages must hold Page objects, got {type(page).__name__}")
        while True:
            t = cluster.begin(client=client)
            t.set(page.url, "contents", page.contents, DOCS)
            t.set(page.url, "pagerank", page.pagerank, DOCS)
            if t.commit():
                break
        loaded += 1
    return loaded


# -- the observers -----------------------------------------------------------------

def _lines(value) -> list:
    return [line for line in (value or "").split("\n") if line]


def _inlinks(txn, target: str) -> dict:
    """``{source: anchor}`` linking to ``target``."""
    return dict(line.split("\t", 1) for line in _lines(txn.get(target, "sources", INLINKS)))


def _write_inlinks(txn, target: str, sources: dict) -> None:
    txn.set(target, "sources", "".join(f"{s}\t{a}\n" for s, a in sorted(sources.items())), INLINKS)


def parse(txn, url: str, column: str) -> None:
    """Extract links and anchor text; keep reverse links; write the checksum ``parsed``."""
    contents = txn.get(url, "contents", DOCS)
    if contents is None:
        return
    links = dict(parse_links(contents))                  # target -> anchor (last wins)
    old = {line.split("\t", 1)[0] for line in _lines(txn.get(url, "links", DOCS))}
    for target in sorted(old | set(links)):
        sources = _inlinks(txn, target)
        if target in links:
            sources[url] = links[target]
        else:
            sources.pop(url, None)                       # the page no longer links there
        _write_inlinks(txn, target, sources)
    txn.set(url, "links", "".join(f"{t}\t{a}\n" for t, a in sorted(links.items())), DOCS)
    txn.set(url, "parsed", content_hash(contents), DOCS)


def _members(txn, h: str) -> dict:
    return {u: int(r) for u, r in (line.split("=") for line in _lines(txn.get(h, "members", DUPS)))}


def _canonical(members: dict) -> Optional[str]:
    """The highest-PageRank member (ties: the smallest URL)."""
    return min(members, key=lambda u: (-members[u], u)) if members else None


def _write_cluster(txn, h: str, members: dict) -> None:
    if members:
        txn.set(h, "members", "".join(f"{u}={r}\n" for u, r in sorted(members.items())), DUPS)
        txn.set(h, "canonical", _canonical(members), DUPS)
    else:
        txn.delete(h, "members", DUPS)
        txn.delete(h, "canonical", DUPS)


def clustering(txn, url: str, column: str) -> None:
    """Figure 2's UpdateDocument generalised: move ``url`` into its hash's cluster."""
    new_hash, rank = txn.get(url, "parsed", DOCS), txn.get(url, "pagerank", DOCS)
    old_hash = txn.get(url, "hash", DOCS)
    stale = {url}                                        # documents to re-export
    changed = []                                         # clusters whose canonical moved
    for h in {old_hash, new_hash} - {None}:
        members = _members(txn, h)
        before = _canonical(members)
        members.pop(url, None)
        if h == new_hash:
            members[url] = rank
        _write_cluster(txn, h, members)
        after = _canonical(members)
        stale |= {u for u in (before, after) if u}
        if before != after:
            changed.append(members)
    txn.set(url, "hash", new_hash, DOCS)
    affected = {url} | {m for members in changed for m in members}
    for target in sorted(affected):                      # links to these may now resolve elsewhere
        sources = _inlinks(txn, target)
        _write_inlinks(txn, target, sources)             # rewrite: a concurrent parse conflicts
        stale |= set(sources)
    for doc in sorted(stale):
        txn.notify(doc, "export", DOCS)


def canonical_of(txn, url: str) -> str:
    """Where a link to ``url`` should point: its cluster's canonical, or itself if not clustered."""
    h = txn.get(url, "hash", DOCS)
    return (txn.get(h, "canonical", DUPS) if h else None) or url


def export(txn, url: str, column: str) -> None:
    """Serve ``url`` if it is canonical (links resolved to canonical URLs), else unserve it."""
    h = txn.get(url, "hash", DOCS)
    if h is not None and txn.get(h, "canonical", DUPS) == url:
        targets = [line.split("\t", 1)[0] for line in _lines(txn.get(url, "links", DOCS))]
        txn.set(url, "links", "\n".join(sorted({canonical_of(txn, t) for t in targets})), SERVING)
        txn.set(url, "contents", txn.get(url, "contents", DOCS), SERVING)
        txn.set(url, "pagerank", txn.get(url, "pagerank", DOCS), SERVING)
    elif txn.get(url, "contents", SERVING) is not None:
        for col in ("links", "contents", "pagerank"):
            txn.delete(url, col, SERVING)


def install(cluster) -> None:
    """Register the pipeline's three observers on ``cluster``."""
    cluster.observe(DOCS, "contents", name="parse")(parse)
    cluster.observe(DOCS, "parsed", name="clustering")(clustering)
    cluster.observe(DOCS, "export", name="export")(export)


# -- the batch alternative ----------------------------------------------------------

def batch_recompute(cluster, chunk: int = 50) -> None:
    """MapReduce-style: read the whole repository, recompute every derived table.

    Reads every document (one scan), computes clusters, canonicals and the
    serving rows in memory, and writes them back in transactions of ``chunk``
    rows. Its cost grows with the repository, whatever changed.
    """
    t = cluster.begin()
    docs: dict = {}
    for url, col, value in t.scan(DOCS):
        docs.setdefault(url, {})[col] = value
    old_serving = {row for row, _, _ in t.scan(SERVING)}
    old_dups = {row for row, _, _ in t.scan(DUPS)}
    t.commit()
    clusters: dict = {}
    for url, d in docs.items():
        if "contents" in d:
            clusters.setdefault(content_hash(d["contents"]), {})[url] = d["pagerank"]
    canonical = {h: _canonical(m) for h, m in clusters.items()}
    hash_of = {u: h for h, m in clusters.items() for u in m}
    resolve = {u: canonical[h] for u, h in hash_of.items()}
    writes = []
    for h, members in clusters.items():
        writes.append((DUPS, h, "members", "".join(f"{u}={r}\n" for u, r in sorted(members.items()))))
        writes.append((DUPS, h, "canonical", canonical[h]))
    for url, h in hash_of.items():
        writes.append((DOCS, url, "hash", h))
        if canonical[h] != url:
            continue
        links = {resolve.get(target, target) for target, _ in parse_links(docs[url]["contents"])}
        writes += [(SERVING, url, "links", "\n".join(sorted(links))),
                   (SERVING, url, "contents", docs[url]["contents"]),
                   (SERVING, url, "pagerank", docs[url]["pagerank"])]
    deletes = [(SERVING, u, c) for u in old_serving - set(canonical.values())
               for c in ("links", "contents", "pagerank")]
    deletes += [(DUPS, h, c) for h in old_dups - set(clusters) for c in ("members", "canonical")]
    _write_in_chunks(cluster, writes, deletes, chunk)


def _write_in_chunks(cluster, writes: list, deletes: list, chunk: int) -> None:
    ops = [("set", w) for w in writes] + [("delete", d) for d in deletes]
    for i in range(0, len(ops), chunk):
        t = cluster.begin()
        for kind, op in ops[i:i + chunk]:
            if kind == "set":
                table, row, col, value = op
                t.set(row, col, value, table)
            else:
                table, row, col = op
                t.delete(row, col, table)
        if not t.commit():
            raise RuntimeError("batch_recompute conflicted with a concurrent writer")


# -- invariants ------------------------------------------------------------------------

def snapshot(cluster) -> dict:
    """``{table: {row: {column: value}}}`` of the pipeline's tables at one snapshot."""
    t = cluster.begin()
    view = {}
    for table in (DOCS, DUPS, SERVING):
        for row, col, value in t.scan(table):
            view.setdefault(table, {}).setdefault(row, {})[col] = value
    t.commit()
    return view


def check_invariants(cluster, quiescent: bool = True) -> list:
    """Problems found (empty: all hold), read at one snapshot.

    Always (every snapshot, even mid-pipeline): each document's ``hash``
    agrees with the dups table, and each cluster's canonical is its
    highest-ranked member. Once quiescent (no notification pending): every
    document is clustered under the hash of its contents, the serving table
    holds exactly the canonical documents, and their links point to
    canonical documents.
    """
    view = snapshot(cluster)
    docs, dups, serving = (view.get(t, {}) for t in (DOCS, DUPS, SERVING))
    members = {h: {u: int(r) for u, r in (l.split("=") for l in _lines(d.get("members")))}
               for h, d in dups.items()}
    problems = []
    for url, d in docs.items():
        h = d.get("hash")
        if h is not None and url not in members.get(h, {}):
            problems.append(f"{url}: hash {h} but not a member of dups/{h}")
    for h, m in members.items():
        for url in m:
            if docs.get(url, {}).get("hash") != h:
                problems.append(f"dups/{h} lists {url} whose hash is {docs.get(url, {}).get('hash')}")
        if dups[h].get("canonical") != _canonical(m):
            problems.append(f"dups/{h}: canonical {dups[h].get('canonical')} is not the "
                            f"highest-ranked member {_canonical(m)}")
    if quiescent:
        problems += _quiescent_problems(docs, dups, serving, members)
    return problems


def _quiescent_problems(docs, dups, serving, members) -> list:
    problems = []
    resolve = {}
    for url, d in docs.items():
        if d.get("hash") != content_hash(d["contents"]):
            problems.append(f"{url}: hash {d.get('hash')} is not the hash of its contents")
        elif members.get(d["hash"], {}).get(url) != d["pagerank"]:
            problems.append(f"{url}: dups records a stale pagerank")
        resolve[url] = dups.get(d.get("hash"), {}).get("canonical", url)
    canonicals = {d.get("canonical") for d in dups.values()}
    if set(serving) != canonicals:
        problems.append(f"serving rows {sorted(set(serving) ^ canonicals)[:5]} differ from "
                        f"the canonical documents")
    for url, row in serving.items():
        for target in _lines(row.get("links")):
            if resolve.get(target, target) != target:
                problems.append(f"serving/{url} links to {target}, not its canonical "
                                f"{resolve[target]}")
        expected = {resolve.get(t, t) for t, _ in parse_links(docs.get(url, {}).get("contents", ""))}
        if set(_lines(row.get("links"))) != expected:
            problems.append(f"serving/{url}: links are not those of its contents")
    return problems


def serving_table(cluster) -> dict:
    """``{url: {column: value}}`` of the serving table (one snapshot)."""
    return snapshot(cluster).get(SERVING, {})


# -- incremental vs batch as the rate of change grows (§3.1's finding) ------------------

@dataclass(frozen=True)
class RoundCost:
    """One crawl round of :func:`change_rate_experiment`.

    ``share``: the share of the repository changed in this round (one unit of
    time); ``incremental`` / ``batch``: row transactions from the round's
    arrival (its pages committed by the loader) until the serving table
    reflects all of it, by observers / by one :func:`batch_recompute` pass;
    ``*_seconds``: the same, in wall time on this machine.
    """
    share: float
    pages_changed: int
    incremental: int
    batch: int
    incremental_seconds: float
    batch_seconds: float


class ChangeRateResult(list):
    """The :class:`RoundCost` of each round (a list), and where batch starts to win."""

    def __init__(self, rounds, n_pages: int):
        super().__init__(rounds)
        self.n_pages = n_pages

    @property
    def crossover(self) -> Optional[float]:
        """The smallest share at which the batch pass did less work, None if it never did."""
        return next((r.share for r in self if r.batch < r.incremental), None)

    def to_frame(self):
        """A pandas DataFrame, one row per round (pandas imported here, not by the module)."""
        import pandas as pd
        return pd.DataFrame([r.__dict__ for r in self]).set_index("share")


def timed_cost(cluster, work) -> tuple:
    """``(row transactions, seconds)`` that ``work()`` spends on ``cluster``."""
    before, start = cluster.tracer.counts.row_transactions, time.perf_counter()
    work()
    return cluster.tracer.counts.row_transactions - before, time.perf_counter() - start


def change_rate_experiment(n_pages: int = 200, shares=(0.01, 0.05, 0.2, 0.8), seed: int = 0,
                           progress: bool = False) -> ChangeRateResult:
    """Latency from arrival to serving as the share of the repository changed per round grows.

    Two clusters hold the same ``n_pages`` pages (:func:`synthetic_corpus`),
    one with the observers installed (incremental), one without (batch). Each
    round re-crawls ``share * n_pages`` pages (:func:`recrawl`, at least one),
    loads them into both, then brings each serving table up to date: the
    observers (``run_observers``) or one :func:`batch_recompute` pass. Cost is
    counted in row transactions (deterministic; one worker executing them one
    after another takes time in proportion). Both serving tables must agree
    after every round (``RuntimeError`` otherwise). ``progress``: a tqdm bar (none when off:
    even a disabled one starts a monitor thread, which warns where threads cannot start).
    """
    from tqdm.auto import tqdm
    from ..cluster import Cluster
    from ..services.clock import ManualClock
    if not shares or any(isinstance(s, bool) or not isinstance(s, (int, float))
                         or not 0 < s <= 1 for s in shares):
        raise ValueError(f"shares must be numbers in (0, 1], got {shares!r}")
    pages = {p.url: p for p in synthetic_corpus(n_pages, seed=seed)}
    inc, batch = Cluster(clock=ManualClock()), Cluster(clock=ManualClock())
    install(inc)
    load(inc, pages.values())
    load(batch, pages.values())
    inc.run_observers()
    batch_recompute(batch)
    rounds = []
    for i, share in enumerate(tqdm(shares, desc="rounds", leave=False) if progress else shares):
        changed = recrawl(list(pages.values()), max(1, round(share * n_pages)), seed=seed + i)
        pages.update((p.url, p) for p in changed)
        load(inc, changed)
        load(batch, changed)
        inc_cost = timed_cost(inc, inc.run_observers)
        batch_cost = timed_cost(batch, lambda: batch_recompute(batch))
        if serving_table(inc) != serving_table(batch):
            raise RuntimeError(f"round {i}: incremental and batch serving tables differ")
        rounds.append(RoundCost(share, len(changed), inc_cost[0], batch_cost[0],
                                inc_cost[1], batch_cost[1]))
    return ChangeRateResult(rounds, n_pages)
