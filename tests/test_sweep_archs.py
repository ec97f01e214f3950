"""One small rules-engine sweep per paper architecture, over one of its ablations / parameters:
the grid reaches the architecture (its parameters change its outcome) and every run completes."""

from __future__ import annotations

from socialsim.batch.sweeps import sweep


def run_grid(tmp_path, scenario, arch, steps, **grid):
    spec = {"name": arch, "seeds": [1], "parameters": {"scenario": scenario, "arch": arch, "model": "rules",
                                                       "steps": steps, **grid}}
    result = sweep(spec, tmp_path / arch, progress=False)
    assert (result.runs["status"] == "completed").all() and len(result.runs) == 2
    return result.runs


def test_crsec_sweep_over_the_chat_ablation(tmp_path):
    runs = run_grid(tmp_path, "hobbs-cafe", "crsec", 4, enable_chat=[True, False])
    chats = runs.set_index("enable_chat")["norm_chats"]
    assert chats[False] == 0 and chats[True] > 0


def test_asvo_sweep_over_the_svo_ablation(tmp_path):
    runs = run_grid(tmp_path, "school-micro", "asvo", 2, use_svo=[True, False])
    assert {"cooperation_rate", "use_svo"} <= set(runs.columns)
    assert runs["rule_decisions"].gt(0).all()


def test_itcmas_sweep_over_the_architecture_ablation(tmp_path):
    runs = run_grid(tmp_path, "irollan-valley", "itcmas", 2, ablation=["base", "full"])
    calls = runs.set_index("ablation")["rule_decisions"]
    assert calls["full"] > calls["base"]  # the full architecture runs more modules
