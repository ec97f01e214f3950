"""The CRSEC reproduction protocol: the paper's preset, and measures read from a run's files."""

import math

import pandas as pd

from socialsim.agents.crsec.reproduce import measure, protocol


def test_protocol_is_the_papers_preset_and_sets_the_judge_only_when_given():
    p = protocol(judge=None)
    assert [(r.scenario, r.preset, r.arch_params) for r in p.runs] == [("hobbs-cafe", "paper", {})]
    assert protocol(judge="openai/gpt-4o").runs[0].arch_params == {"judge": "openai/gpt-4o"}


def test_measure_reads_end_values_and_the_conflict_trend(tmp_path):
    frame = pd.DataFrame({"conflicts": [4, 4, 1, 1, 0, 2, 0, 0],
                          "adoption[no smoking indoors]": [0.3, 0.5, 0.7, 0.7, 0.8, 0.8, 0.8, 0.9],
                          "compliance[no smoking indoors]": [0.7] * 7 + [0.6]})
    frame.to_parquet(tmp_path / "model.parquet")
    got = measure(tmp_path)
    assert got["adoption[no smoking indoors] at end"] == 0.9 and got["compliance[no smoking indoors] at end"] == 0.6
    assert got["conflicts peak"] == 4 and got["conflicts last quarter / first quarter"] == 0 / 8
    assert math.isnan(got["adoption[tip after meals] at end"])  # a norm the run does not track
