"""The absorption guards: similarity alone would merge different facts."""

from __future__ import annotations

import pytest

from memql.rules.dedup import contradicts, may_absorb

THRESHOLD = 0.95


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Prefers concise status updates.", "prefers concise status updates"),
        ("Prefers  concise status updates!", "Prefers concise status updates."),
    ],
)
def test_the_same_text_up_to_case_spacing_and_final_punctuation_is_absorbed(a, b):
    assert may_absorb(a, b, similarity=0.5, threshold=THRESHOLD)


def test_a_paraphrase_above_the_threshold_is_absorbed():
    assert may_absorb("Has a dog named Biscuit.", "Has a dog called Biscuit.", 0.98, THRESHOLD)


def test_a_paraphrase_below_the_threshold_is_not():
    assert not may_absorb("Prefers concise updates.", "Likes short updates.", 0.81, THRESHOLD)


@pytest.mark.parametrize(
    ("a", "b", "similarity"),
    [
        ("Meeting with Anna on 2026-03-02.", "Meeting with Anna on 2026-03-09.", 0.9965),
        ("Deployed version 2.3 on Monday.", "Deployed version 2.4 on Monday.", 0.96),
        ("Ticket ACME-42 is blocked.", "Ticket ACME-43 is blocked.", 0.99),
    ],
)
def test_different_numbers_dates_or_codes_are_never_absorbed(a, b, similarity):
    assert not may_absorb(a, b, similarity, THRESHOLD)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Likes tea.", "No longer likes tea."),
        ("Drinks coffee.", "Doesn't drink coffee."),
        ("Wants email reminders.", "Never wants email reminders."),
    ],
)
def test_a_contradiction_is_never_absorbed_however_similar(a, b):
    assert not may_absorb(a, b, similarity=0.99, threshold=THRESHOLD)


@pytest.mark.parametrize(
    ("a", "b", "similarity"),
    [
        ("Prefers email over phone calls.", "Prefers phone calls over email.", 0.981),
        (
            "Deploys happen on Tuesdays and Thursdays.",
            "Deploys happen on Mondays and Wednesdays.",
            0.956,
        ),
        ("Wants the weekly report on Fridays.", "Wants the monthly report on Fridays.", 0.97),
        (
            "Takes the train to Amsterdam twice a week.",
            "Takes the train to Amsterdam three times a week.",
            0.96,
        ),
    ],
)
def test_swapped_comparisons_weekdays_opposites_and_number_words_are_never_absorbed(
    a, b, similarity
):
    assert not may_absorb(a, b, similarity, THRESHOLD)


def test_two_negations_of_one_fact_agree_with_each_other():
    assert may_absorb("Doesn't like tea any more.", "No longer likes tea.", 0.97, THRESHOLD)


@pytest.mark.parametrize(
    ("a", "b", "similarity", "expected"),
    [
        ("Likes tea.", "No longer likes tea.", 0.78, True),
        ("Drinks coffee.", "Doesn't drink coffee.", 0.71, True),
        ("Likes tea.", "No longer likes tea.", 0.40, False),
        ("Likes tea.", "Likes green tea.", 0.90, False),
    ],
)
def test_a_save_of_opposite_polarity_is_a_contradiction_from_the_floor_up(
    a, b, similarity, expected
):
    assert contradicts(a, b, similarity) is expected
