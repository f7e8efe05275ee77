"""The protocol's trace on Redis equals the recorded one (tests/data/protocol_traces.json).

The same scenarios as tests/test_trace_golden.py (Figure 4, every crash
point, conflicts and lazy cleanup), run on a real Redis server in both
round-trip modes: ``conditional=0`` (reads, then buffered writes) and
``conditional=1`` (prewrite and commit-primary as one script). Every event
(client, row, step, columns read in order, changes with old and new values,
the sentence) must equal the in-memory recording: round trips differ inside
the store, never what the protocol does.
"""
import json
from pathlib import Path

import pytest

from percolator_ref.stores import url_with
from trace_golden import SCENARIOS, capture

pytestmark = pytest.mark.redis

GOLDEN = json.loads((Path(__file__).parent / "data" / "protocol_traces.json").read_text())


@pytest.fixture(scope="module", params=[0, 1], ids=["conditional=0", "conditional=1"])
def captured_on_redis(request, redis_server):
    url = url_with(f"{redis_server.url}?prefix=golden{request.param}", conditional=request.param)
    return capture(url)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_redis_trace_is_identical_to_the_recorded_one(captured_on_redis, scenario):
    assert captured_on_redis[scenario] == GOLDEN[scenario]


def test_the_redis_capture_ran_on_redis(redis_server):
    """The capture really used the server: its keys are there under the scenarios' prefixes."""
    import redis
    url = url_with(f"{redis_server.url}?prefix=goldencheck", conditional=1)
    capture(url)
    keys = redis.Redis(port=redis_server.port).keys("goldencheck-g0:*")
    assert keys, "no key under the first scenario's prefix"
