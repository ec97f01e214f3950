"""`socialsim replay --check-order`: replaying with the concurrent calls finishing in other orders
catches an architecture whose async phase writes shared state, and passes the shipped ones."""

import pytest

from socialsim.agents import ARCHITECTURES
from socialsim.agents.generic import GenerativeAgent
from socialsim.cli import main
from socialsim.metrics.report import without_figures
from socialsim.model.runner import RunConfig, check_order, run


class FirstToFinish:
    def __init__(self, model):
        self.first = ""


class SharedWriter(GenerativeAgent):
    """A faulty architecture: during the concurrent phase, whoever finishes first writes the model."""

    society_class = FirstToFinish

    @classmethod
    def model_reporters(cls):
        return {"first": lambda m: m.society.first}

    def perceive(self):
        super().perceive()
        self.model.society.first = ""

    async def decide(self):
        await super().decide()
        if not self.model.society.first:
            self.model.society.first = self.name  # a write to shared state inside an async phase


@pytest.fixture
def shared_writer(monkeypatch):
    monkeypatch.setitem(ARCHITECTURES, "shared-writer", f"{__name__}:SharedWriter")


def recorded(tmp_path, arch, scenario="hobbs-cafe", steps=4):
    run(RunConfig(scenario=scenario, arch=arch, model="rules", steps=steps, rng=3), tmp_path / "run", progress=False)
    return tmp_path / "run"


def test_a_phase_that_writes_shared_state_is_caught(tmp_path, shared_writer, capsys):
    run_dir = recorded(tmp_path, "shared-writer")
    difference = check_order(run_dir)
    assert difference is not None and "model.parquet" in difference and "first" in difference
    assert main(["replay", str(run_dir), "--check-order", "--no-progress"]) == 1
    assert "ORDER-DEPENDENT" in capsys.readouterr().err


@pytest.mark.parametrize("arch,scenario", [("generic", "hobbs-cafe"), ("crsec", "makerspace"),
                                           ("asvo", "school-meso"), ("itcmas", "irollan-valley")])
def test_the_shipped_architectures_do_not_depend_on_the_order(tmp_path, arch, scenario, capsys):
    run_dir = recorded(tmp_path, arch, scenario)
    with without_figures():  # the three replays' frames are compared; their reports need no figures
        assert main(["replay", str(run_dir), "--check-order", "--no-progress"]) == 0
    assert "check-order: the same frames" in capsys.readouterr().out
    # each probe in a folder of its own: the plain replay the command wrote first is kept
    assert sorted(p.name for p in run_dir.iterdir() if p.is_dir() and (p / "config.json").is_file()) == [
        "check-order-1", "check-order-2", "replay"]
