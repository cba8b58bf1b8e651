"""Issue #58 item 3: a session at a terminal shows, besides the phase at hand, how many probes it has made of the
most it may make and the time that remains at its pace (an upper bound: searches and confirmations may stop
earlier). The sandbox's setup steps are not probes."""

from __future__ import annotations

from tuner.settings.policy import load_policy
from tuner.cli.progress_bar import SANDBOX_PHASE, TerminalProgress, most_probes


def test_the_most_probes_are_each_families_search_and_longest_confirmation() -> None:
    policy = load_policy("default")
    b = policy.budget
    assert most_probes(policy, ["readahead", "concurrency"], None) == 2 * (b.probes + 2 * b.confirm_max_pairs)
    assert most_probes(policy, ["concurrency"], 3) == 3 + 2 * b.confirm_max_pairs


def test_the_session_line_counts_probes_not_sandbox_steps_and_says_what_remains() -> None:
    progress = TerminalProgress(40)
    progress.phase(SANDBOX_PHASE, None)
    progress.advance("initdb")
    progress.phase("search", 14)
    for _ in range(3):
        progress.advance("eic 16: 2.1 ms")
    assert progress.session == (3, 40) and progress.shows_remaining
    assert TerminalProgress().session is None
