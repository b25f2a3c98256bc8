"""The LoCoMo benchmark reads its data from outside the repository: it says so when it is absent,
and reads the dialog ids and speakers the way its protocol says."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
BENCH = ROOT / "bench" / "recall"


@pytest.fixture
def locomo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("locomo")


def test_the_default_data_directory_is_beside_the_repository(locomo: ModuleType):
    assert locomo.DEFAULT_DATA.resolve() == (ROOT.parent / "shared" / "data" / "locomo-dev")


async def test_absent_data_is_reported_and_nothing_runs(
    locomo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # exit status 2 before anything starts: no database, no model, no server
    assert await locomo.main(["--data", str(tmp_path / "nowhere")]) == 2
    said = capsys.readouterr()
    assert "LoCoMo is not here" in said.err and str(tmp_path / "nowhere") in said.err
    assert said.out == ""


def test_dialog_ids_are_read_however_they_are_written(locomo: ModuleType):
    assert locomo.dialog_ids(["D1:3", "D12:40"]) == {"D1:3", "D12:40"}
    assert locomo.dialog_ids("D8:6; D9:17") == {"D8:6", "D9:17"}
    assert locomo.dialog_ids(["D:11:26"]) == {"D11:26"}
    assert locomo.dialog_ids(["D"]) == set()


def test_a_question_recalls_as_the_speaker_it_names_else_as_both(locomo: ModuleType):
    sample = {
        "sample_id": "s1",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo"},
        "qa": [
            {"question": "Where did Ann go?", "evidence": ["D1:1"], "category": 4},
            {"question": "What do Ann and Bo share?", "evidence": ["D1:2"], "category": 1},
            {"question": "Who went first?", "evidence": ["D1:3"], "category": 2},
            {"question": "Did Bobby win?", "evidence": ["D1:4"], "category": 4},
            {"question": "A trap about Ann?", "evidence": ["D1:5"], "category": 5},
            {"question": "What did Bo say?", "evidence": [], "category": 4},
        ],
    }
    asked = locomo.questions(sample)
    assert [q.users for q in asked] == [
        ("s1:Ann",),
        ("s1:Ann", "s1:Bo"),
        ("s1:Ann", "s1:Bo"),
        ("s1:Ann", "s1:Bo"),  # "Bobby" is not "Bo"
    ]


def test_observations_are_episodic_memories_of_their_speaker(locomo: ModuleType):
    sample = {
        "sample_id": "s1",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
                         "session_1_date_time": "1:56 pm on 8 May, 2023"},
        "observation": {"session_1_observation": {"Ann": [["Ann likes tea.", "D1:1"]],
                                                  "Bo": [["Bo ran.", ["D1:2", "D1:3"]]]}},
    }  # fmt: skip
    assert locomo.memories(sample, dates=False) == {
        "s1:Ann": [{"content": "Ann likes tea.", "kind": "EPISODIC", "sourceThreadIds": ["D1:1"]}],
        "s1:Bo": [{"content": "Bo ran.", "kind": "EPISODIC", "sourceThreadIds": ["D1:2", "D1:3"]}],
    }
    [dated] = locomo.memories(sample, dates=True)["s1:Ann"]
    assert dated["occurredAt"] == "2023-05-08T13:56:00Z"
