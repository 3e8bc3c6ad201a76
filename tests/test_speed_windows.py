"""The adaptive window budget: windows read in rounds, a settled claim stops early."""
import numpy as np
import pytest

from workers.windows import QUIET, quiet, read_in_rounds

pytestmark = pytest.mark.unit


def scorer(table):
    calls = []

    def score(pairs):
        calls.append(list(pairs))
        return np.array([table[i][j] for i, j in pairs]).reshape(len(pairs), 3)

    return score, calls


NEUTRAL, SUPPORT = [0.05, 0.9, 0.05], [0.8, 0.1, 0.1]


def test_first_zero_reads_every_window_in_one_call():
    table = {0: [NEUTRAL] * 5, 1: [SUPPORT] * 3}
    score, calls = scorer(table)
    probs = read_in_rounds([5, 3], score, lambda i, p: True, first=0, chunk=8)
    assert len(calls) == 1 and [len(p) for p in probs] == [5, 3]
    assert np.allclose(probs[1], SUPPORT)


def test_settled_claims_stop_and_the_rest_read_on_in_chunks():
    table = {0: [NEUTRAL] * 24, 1: [NEUTRAL] * 10 + [SUPPORT] * 14, 2: [], 3: [SUPPORT] * 3}
    score, calls = scorer(table)
    probs = read_in_rounds([24, 24, 0, 3], score, lambda i, p: i == 0 and quiet(p), first=8, chunk=8)
    assert [len(p) for p in probs] == [8, 24, 0, 3]
    assert len(calls) == 3  # one call per round for the whole batch
    assert {i for i, _ in calls[1]} == {1}  # claim 0 settled, claim 3 had all its windows
    assert [j for _, j in calls[1]] == list(range(8, 16))
    assert np.allclose(probs[1][10], SUPPORT)  # rows stay in window order


def test_quiet_is_far_from_both_thresholds():
    assert quiet(np.array([[QUIET - 0.01, 0.98, 0.01]]))
    assert not quiet(np.array([[0.01, 0.7, QUIET + 0.01]]))
    assert not quiet(np.zeros((0, 3)))
