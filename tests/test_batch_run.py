"""Mesa's batch_run sweeps SocietyModel directly, and socialsim.batch.batch_run returns its rows as
a DataFrame with the usage columns; an ablation switch swept this way changes what it should."""

import mesa
import numpy as np
import pandas as pd
import pytest

from socialsim.batch import batch_run
from socialsim.model.society import SocietyModel

PARAMS = {"scenario": "makerspace", "arch": "crsec", "model": "rules", "enable_chat": [True, False]}


def test_mesa_batch_run_takes_society_model_and_our_wrapper_returns_its_rows():
    direct = pd.DataFrame(mesa.batch_run(SocietyModel, parameters=PARAMS, rng=[1, 2], max_steps=4,
                                         data_collection_period=-1, number_processes=1, display_progress=False))
    ours = batch_run(PARAMS, rng=[1, 2], max_steps=4)
    pd.testing.assert_frame_equal(ours, direct)
    assert {"RunId", "rng", "enable_chat", "Step", "AgentID"} <= set(ours.columns)
    assert {"llm_calls", "rule_decisions", "prompt_tokens", "completion_tokens", "cost_usd", "fallbacks"} <= set(ours.columns)
    runs = ours.drop_duplicates("RunId")
    assert len(runs) == 4 and (runs["rule_decisions"] > 0).all() and (runs["Step"] == 4).all()


def test_a_swept_switch_acts_in_the_rows():
    rows = batch_run(PARAMS, rng=[1, 2, 3], max_steps=12, data_collection_period=1)
    steps = rows.drop_duplicates(["RunId", "Step"])  # model reporters: one value per run and step
    chats = steps.groupby("enable_chat")["norm_chats"].sum()  # conversations delivered in each step
    assert chats[False] == 0 and chats[True] > 0


def test_by_default_one_seed_in_this_process_and_nothing_printed(capsys):
    rows = batch_run({"scenario": "makerspace", "arch": "generic", "model": "rules"})
    assert (rows["rng"].unique().tolist(), rows["Step"].unique().tolist()) == ([1], [1])
    assert capsys.readouterr().err == ""  # no progress bar unless asked
    batch_run({"scenario": "makerspace", "arch": "generic", "model": "rules"}, display_progress=True)
    assert "100%" in capsys.readouterr().err


def test_every_setting_reaches_mesas_batch_run(monkeypatch):
    import mesa.batchrunner

    given = {}
    monkeypatch.setattr(mesa.batchrunner, "batch_run", lambda model_cls, **settings: given.update(
        settings, model_cls=model_cls) or [{"RunId": 0}])
    rows = batch_run(PARAMS, rng=[3, 4], max_steps=2, data_collection_period=1, number_processes=2,
                     display_progress=True)
    assert rows.equals(pd.DataFrame([{"RunId": 0}]))
    assert given == {"model_cls": SocietyModel, "parameters": PARAMS, "rng": [3, 4], "max_steps": 2,
                     "data_collection_period": 1, "number_processes": 2, "display_progress": True}


def test_numpys_seeds_reach_mesa_as_ints_and_no_seed_is_refused_by_name(monkeypatch):
    """Mesa seeds a random.Random, which refuses numpy's integers: np.arange(3) failed inside Mesa."""
    import mesa.batchrunner

    given = {}
    monkeypatch.setattr(mesa.batchrunner, "batch_run", lambda model_cls, **settings: given.update(settings) or [])
    for seeds, expected in ((np.arange(3), [0, 1, 2]), (np.int64(7), [7]), ((4, 5), [4, 5])):
        batch_run(PARAMS, rng=seeds)
        assert given["rng"] == expected and all(type(seed) is int for seed in given["rng"])
    for wrong in (None, [], 1.5, [1, None]):
        with pytest.raises(TypeError, match="rng expects a seed or a list of seeds, whole numbers, got"):
            batch_run(PARAMS, rng=wrong)


def test_the_figure_helpers_take_a_batch_run_frame_one_final_row_per_run():
    """Mesa's rows are per run, step and agent: counted as they are, 2 seeds read as 36 replicates
    (6 agents, 3 steps) of a mean over every step."""
    from matplotlib.collections import PathCollection

    from socialsim.batch.figures import outcome_summary, plot_outcome

    rows = batch_run(PARAMS, rng=[1, 2], max_steps=3, data_collection_period=1)
    final = rows[rows["Step"] == 3].drop_duplicates("RunId")
    stats = outcome_summary(rows, "rule_decisions", "enable_chat")
    assert stats["count"].tolist() == [2, 2]
    assert stats["mean"].tolist() == final.groupby("enable_chat")["rule_decisions"].mean().tolist()
    fig = plot_outcome(rows, "rule_decisions", "enable_chat")
    assert "mean ± sd of 2 replicates" in fig.axes[0].get_title()
    dots = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in dots) == 4  # a dot per run
