"""`memql.service.memories`: the recall weights a service uses when the settings name none."""

from __future__ import annotations

import pytest

from memql.service import DEFAULT_WEIGHTS


def test_the_default_weights_keep_the_score_in_unit_range_and_meaning_first():
    w = DEFAULT_WEIGHTS
    assert w.vector + w.lexical + w.recency + w.pinned == pytest.approx(1.0)
    assert w.vector > w.lexical > max(w.recency, w.pinned)
