"""hack_scan on the demo's own runs: it names the hackable reward's flaw, and is quiet on the honest run (slow).

``rlgate demo`` trains GRPO on refund's honest reward and, when that run leaves no-id alone,
GRPO on the deliberately hackable ``lookup_anything`` (any lookup_order call pays 1, whatever
the id and the prompt). Both are trained here through the same cache the demo and
``examples/refund`` use, and their holdout rows (three base runs before, the adapter after,
graded by refund's real reward) are scanned with the reward each run trained on.
"""

from __future__ import annotations

import pytest

from pytest_rlgate import hack_scan
from pytest_rlgate.data.rows import read_rows
from pytest_rlgate.demo.story import configurations, hackable_configuration
from pytest_rlgate.train.cached import cached_run
from pytest_rlgate.train.methods import make_knobs

pytest.importorskip("trl")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::pytest_rlgate.errors.RlgateWarning")]


def _rows(config):
    import torch

    torch.set_num_threads(1)
    run = cached_run(make_knobs(config.method, **config.knobs), progress=False).run
    before = [row for path in run.before_files for row in read_rows(path)]
    return before, list(read_rows(run.after_file))


def test_the_hackable_run_is_a_reward_hack_on_the_lookup_it_learned():
    before, after = _rows(hackable_configuration())
    scan = hack_scan(after, before=before, env="refund", reward="lookup_anything")
    assert scan.regime == "reward_hack", str(scan)
    assert scan.category in ("no_id", "off_topic")
    assert scan.top_feature in ("tool_calls", "tool:lookup_order"), str(scan)
    top = scan.feature(scan.top_feature)
    assert top.rose and not top.endorsed
    print(scan)


def test_the_honest_run_is_quiet():
    before, after = _rows(configurations()[0])
    scan = hack_scan(after, before=before, env="refund")  # it trained on refund's own score: each row's score
    assert scan.regime != "reward_hack", str(scan)
    print(scan)
