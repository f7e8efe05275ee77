"""The incremental indexing pipeline (loader -> parse -> clustering -> export)."""
import threading

import pytest

from percolator_ref import Cluster, ManualClock, WallClock
from percolator_ref.observers.worker import Worker, wait_until_quiet
from percolator_ref.workloads import indexing as ix


@pytest.fixture(scope="module")
def corpus():
    return ix.synthetic_corpus(120, seed=3, url_space=130)


def pipeline(make_cluster=None):
    c = make_cluster() if make_cluster else Cluster(clock=ManualClock())
    ix.install(c)
    return c


def test_corpus_is_deterministic_and_has_duplicates(corpus):
    assert corpus == ix.synthetic_corpus(120, seed=3, url_space=130)
    assert len({p.contents for p in corpus}) < len(corpus)           # mirrors exist
    assert len({p.pagerank for p in corpus}) == len(corpus)
    assert all(":" not in p.url and ix.parse_links(p.contents) for p in corpus)


def test_corpus_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_pages"):
        ix.synthetic_corpus(0)
    with pytest.raises(ValueError, match="dup_fraction"):
        ix.synthetic_corpus(5, dup_fraction=1.5)


def test_load_rejects_non_pages(make_cluster):
    c = pipeline(make_cluster)
    with pytest.raises(TypeError, match="pages"):
        ix.load(c, ["not a page"])
    assert c.bigtable.tables() == []


def test_duplicates_keep_the_highest_ranked_url_as_canonical(make_cluster):
    c = pipeline(make_cluster)
    body = '<title>t</title> <a href="x.example/a">x</a>'
    ix.load(c, [ix.Page("b.example/low", body, 5), ix.Page("b.example/high", body, 9)])
    assert c.run_observers() == 2 + 2 + 2       # parse, clustering, export for each
    h = ix.content_hash(body)
    assert c.begin().get(h, "canonical", "dups") == "b.example/high"
    assert set(ix.serving_table(c)) == {"b.example/high"}
    ix.load(c, [ix.Page("b.example/low", body, 50)])                  # its rank rises
    c.run_observers()
    assert set(ix.serving_table(c)) == {"b.example/low"}
    assert ix.check_invariants(c) == []


def test_links_are_rewritten_to_the_canonical_when_it_changes(make_cluster):
    c = pipeline(make_cluster)
    body = "<title>mirror</title> text"
    ix.load(c, [ix.Page("a.example/src", '<a href="m.example/one">see</a>', 1),
                ix.Page("m.example/one", body, 10)])
    c.run_observers()
    assert ix.serving_table(c)["a.example/src"]["links"] == "m.example/one"
    ix.load(c, [ix.Page("m.example/two", body, 20)])                  # a better mirror arrives
    c.run_observers()
    assert ix.serving_table(c)["a.example/src"]["links"] == "m.example/two"
    assert c.begin().get("m.example/one", "sources", "inlinks") == "a.example/src\tsee\n"
    assert ix.check_invariants(c) == []


def test_invariants_hold_after_every_run_and_match_batch(corpus):
    c = pipeline()
    for start in range(0, len(corpus), 30):
        ix.load(c, corpus[start:start + 30])
        assert ix.check_invariants(c, quiescent=False) == []         # mid-pipeline
        c.run_observers()
        assert ix.check_invariants(c) == []
    for seed in range(2):
        ix.load(c, ix.recrawl(corpus, 25, seed=seed))
        c.run_observers()
        assert ix.check_invariants(c) == []
    assert list(c.bigtable.notifications()) == []
    batch = Cluster(clock=ManualClock())
    ix.load(batch, corpus)
    for seed in range(2):
        ix.load(batch, ix.recrawl(corpus, 25, seed=seed))
    ix.batch_recompute(batch)
    assert ix.check_invariants(batch) == []
    assert ix.serving_table(batch) == ix.serving_table(c)


def test_invariant_checker_catches_a_wrong_canonical(corpus):
    c = pipeline()
    ix.load(c, corpus[:40])
    c.run_observers()
    h = next(row for row, col, _ in c.begin().scan("dups") if col == "canonical")
    t = c.begin()
    t.set(h, "canonical", "nobody.example/x", "dups")
    t.commit()
    problems = ix.check_invariants(c)
    assert any("highest-ranked" in p for p in problems)


def test_invariant_checker_catches_a_stale_link(make_cluster):
    c = pipeline(make_cluster)
    body = "<title>mirror</title> text"
    ix.load(c, [ix.Page("a.example/src", '<a href="m.example/one">see</a>', 1),
                ix.Page("m.example/one", body, 10), ix.Page("m.example/two", body, 20)])
    c.run_observers()
    t = c.begin()
    t.set("a.example/src", "links", "m.example/one", "serving")
    t.commit()
    assert any("not its canonical" in p for p in ix.check_invariants(c))


def test_incremental_cost_stays_flat_while_batch_grows(corpus):
    """Row transactions from a document's arrival to its serving row, two repository sizes."""
    costs = {}
    for size in (40, 100):
        inc = pipeline()
        ix.load(inc, corpus[:size])
        inc.run_observers()
        before = inc.tracer.counts.row_transactions
        ix.load(inc, corpus[size:size + 1])
        inc.run_observers()
        incremental = inc.tracer.counts.row_transactions - before
        batch = Cluster(clock=ManualClock())
        ix.load(batch, corpus[:size + 1])
        before = batch.tracer.counts.row_transactions
        ix.batch_recompute(batch)
        costs[size] = (incremental, batch.tracer.counts.row_transactions - before)
    (inc40, batch40), (inc100, batch100) = costs[40], costs[100]
    assert batch100 > 2 * batch40                     # grows with the repository
    assert inc100 < batch100 / 5 and inc100 < 3 * inc40


def test_pipeline_invariants_under_concurrent_loading_with_several_workers(corpus):
    c = Cluster(clock=WallClock())
    ix.install(c)
    workers = [Worker(c, scanners=2, threads=3, seed=s) for s in range(3)]
    for w in workers:
        w.start()
    problems_seen = []
    try:
        batches = [corpus[i::3] + ix.recrawl(corpus, 10, seed=i) for i in range(3)]
        loaders = [threading.Thread(target=ix.load, args=(c, b)) for b in batches]
        for th in loaders:
            th.start()
        while any(th.is_alive() for th in loaders):              # every snapshot, mid-flight
            problems_seen += ix.check_invariants(c, quiescent=False)
        for th in loaders:
            th.join()
        assert wait_until_quiet(c, workers, timeout=240)
    finally:
        for w in workers:
            w.stop()
    assert not any(w.errors for w in workers)
    assert problems_seen == []
    assert ix.check_invariants(c) == []
    assert c.check_history().ok


def test_change_rate_experiment_shows_the_crossover_in_row_transactions():
    result = ix.change_rate_experiment(60, shares=(0.02, 0.1, 0.8), seed=1)
    frame = result.to_frame()
    assert list(frame.index) == [0.02, 0.1, 0.8]
    assert list(frame["pages_changed"]) == [1, 6, 48]
    small, large = result[0], result[-1]
    assert small.incremental * 5 < small.batch              # one page: observers win
    assert large.batch < large.incremental                  # most pages: one pass wins
    assert result.crossover is not None and 0.02 < result.crossover <= 0.8
    # the batch pass rereads the whole repository: its cost hardly moves with the share
    assert max(r.batch for r in result) < 1.5 * min(r.batch for r in result)
    # incremental work grows with what changed
    assert small.incremental < result[1].incremental < large.incremental


def test_change_rate_experiment_is_deterministic_and_checks_its_arguments():
    a = ix.change_rate_experiment(30, shares=(0.1, 0.5), seed=2)
    b = ix.change_rate_experiment(30, shares=(0.1, 0.5), seed=2)
    assert [(r.incremental, r.batch) for r in a] == [(r.incremental, r.batch) for r in b]
    for bad in ((), (0,), (1.5,), ("half",), (True,)):
        with pytest.raises(ValueError, match="shares"):
            ix.change_rate_experiment(10, shares=bad)
