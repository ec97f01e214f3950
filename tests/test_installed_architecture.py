"""An architecture in the user's own package, declared under the ``socialsim.architectures`` entry
points: the command line runs, replays and resumes it, sweeps and routes know it, and a package
cannot take over one of socialsim's own names."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from socialsim import agents
from socialsim.agents import architectures, installed_architectures
from socialsim.agents.generic import GenerativeAgent
from socialsim.agents.phases import Phase

AGENT = '''
from pydantic import BaseModel, ConfigDict, Field

from socialsim.agents.generic import GenerativeAgent


class TidySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tidiness: float = Field(default=0.5, ge=0, le=1, description="how often an agent tidies")


class TidyAgent(GenerativeAgent):
    """The generic agent, counting how many steps it was asked to tidy."""

    settings_model = TidySettings

    @classmethod
    def model_reporters(cls):
        return {"tidy_steps": lambda m: sum(a.tidied for a in m.agents)}

    def perceive(self):
        super().perceive()
        self.tidied = getattr(self, "tidied", 0) + (self.phase_rng.random() < self.model.arch_params.get("tidiness", 0.5))
'''
OPERATIONS = '''
from socialsim.llm.operation import Operation
from socialsim.llm.questions import YesNo, YesNoQuestion


class Greet(Operation):
    name = "Greet"
    module = "tidying"
    max_tokens = 4
    fallback_doc = "no"

    def question(self, ctx):
        return YesNoQuestion()

    def prompt(self, ctx):
        return "Do you greet?"

    def rule(self, ctx, rng):
        return YesNo(yes=True)

    def fallback(self, ctx):
        return YesNo(yes=False)


GREET = Greet()
'''


@pytest.fixture
def tidy_package(tmp_path, monkeypatch):
    """A package ``tidyagent`` installed the way pip leaves it: a dist-info naming its entry point."""
    site = tmp_path / "site"
    (site / "tidyagent").mkdir(parents=True)
    (site / "tidyagent" / "__init__.py").write_text("")
    (site / "tidyagent" / "agent.py").write_text(textwrap.dedent(AGENT))
    (site / "tidyagent" / "operations.py").write_text(textwrap.dedent(OPERATIONS))
    info = site / "tidyagent-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tidyagent\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[socialsim.architectures]\ntidy = tidyagent.agent:TidyAgent\n"
                                           "crsec = tidyagent.agent:TidyAgent\n")
    monkeypatch.syspath_prepend(str(site))
    installed_architectures.cache_clear()
    yield site
    installed_architectures.cache_clear()
    for name in [m for m in sys.modules if m.startswith("tidyagent")]:
        del sys.modules[name]


def cli(site, *args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "socialsim.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def test_an_installed_architecture_is_known_and_cannot_replace_the_package_own(tidy_package, caplog):
    assert architectures()["tidy"] == "tidyagent.agent:TidyAgent"
    assert architectures()["crsec"] == "socialsim.agents.crsec.agent:CRSECAgent"  # not the package's
    assert list(architectures()) == ["generic", "crsec", "asvo", "itcmas", "tidy"]  # socialsim's first
    assert "socialsim has its own of that name" in caplog.text
    assert agents.agent_class("tidy").__name__ == "TidyAgent"
    from socialsim.agents.crsec.agent import CRSECAgent

    assert agents.agent_class("crsec") is CRSECAgent


def test_socialsim_models_lists_it_with_its_operation(tidy_package, capsys):
    from socialsim.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "  tidy         installed: tidyagent.agent.TidyAgent" in out and "  crsec        socialsim." in out
    assert "  tidying      Greet" in out
    assert main(["models", "--params", "tidy"]) == 0
    assert "tidiness" in capsys.readouterr().out


def test_its_operations_are_routable_and_its_sweeps_valid(tidy_package):
    from socialsim.batch.sweepfile import validate_sweep
    from socialsim.llm.routing import check_route_names

    check_route_names({"Greet": "rules", "tidying": "rules"})  # no "route to no operation"
    spec = validate_sweep({"parameters": {"arch": "tidy", "model": "rules", "tidiness": [0.1, 0.9]}})
    assert spec.grid()["arch"] == ["tidy"]


def test_its_parameters_are_checked_wherever_they_are_given_not_only_by_set(tidy_package):
    """SocietyModel(**params), a sweep's grid and a preset check a plug-in's parameters as --set does."""
    from socialsim.agents.params import ParamError
    from socialsim.batch.sweepfile import SweepFileError, validate_sweep
    from socialsim.batch.sweeps import check_grid, plan
    from socialsim.model.society import SocietyModel

    with pytest.raises(ParamError, match=r"unknown tidy parameter\(s\) \['tidyness'\]; did you mean tidiness\?"):
        SocietyModel("hobbs-cafe", arch="tidy", model="rules", tidyness=0.1)
    with pytest.raises(ParamError, match=r"invalid tidy parameters\n  tidy.tidiness: Input should be less than or equal to 1 \(got 5\)"):
        SocietyModel("hobbs-cafe", arch="tidy", model="rules", tidiness=5)
    assert SocietyModel("hobbs-cafe", arch="tidy", model="rules", tidiness="0.25").arch_params == {"tidiness": 0.25}
    spec = validate_sweep({"parameters": {"arch": "tidy", "model": "rules", "tidiness": [0.1, 5]}})
    with pytest.raises(SweepFileError, match=r"the run with arch=tidy, model=rules, tidiness=5 cannot be built: invalid tidy parameters\n  tidy.tidiness: Input"):
        check_grid(plan(spec), spec)


def test_the_command_line_runs_replays_and_resumes_it(tidy_package, tmp_path):
    run_dir = tmp_path / "run"
    done = cli(tidy_package, "run", "hobbs-cafe", "--arch", "tidy", "--model", "rules", "--steps", "3",
               "--set", "tidy.tidiness=1", "--out", str(run_dir), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["config"]["arch"], config["config"]["arch_params"], config["status"]) == (
        "tidy", {"tidiness": 1.0}, "completed")
    import pandas as pd

    people = pd.read_parquet(run_dir / "agents.parquet").reset_index()["AgentID"].nunique()
    assert pd.read_parquet(run_dir / "model.parquet")["tidy_steps"].iloc[-1] == 3 * people == 30  # all, every step
    replayed = cli(tidy_package, "replay", str(run_dir), "--no-progress", cwd=tmp_path)
    assert replayed.returncode == 0 and "frames identical to the recording: yes" in replayed.stdout, replayed.stderr
    more = cli(tidy_package, "run", "--resume", str(run_dir), "--steps", "4", "--no-progress", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert json.loads((run_dir / "config.json").read_text())["steps_done"] == 4
    refused = cli(tidy_package, "run", "hobbs-cafe", "--arch", "tidy", "--model", "rules", "--set",
                  "tidy.tidiness=2", "--out", str(tmp_path / "bad"), cwd=tmp_path)
    assert refused.returncode != 0 and "tidiness" in refused.stderr


def test_a_declared_architecture_that_cannot_be_imported_is_named(tidy_package):
    (tidy_package / "tidyagent-0.1.dist-info" / "entry_points.txt").write_text(
        "[socialsim.architectures]\nbroken = tidyagent.missing:Agent\n")
    installed_architectures.cache_clear()
    with pytest.raises(ValueError, match=r"architecture 'broken' \(tidyagent.missing:Agent, declared by an "
                                         r"installed package under 'socialsim.architectures'\) cannot be loaded"):
        agents.agent_class("broken")


def _package(site, name, files, entry_points):
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    for filename, text in files.items():
        (site / name / filename).write_text(textwrap.dedent(text))
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[socialsim.architectures]\n" + "".join(
        f"{arch} = {target}\n" for arch, target in entry_points.items()))


@pytest.fixture
def broken_packages(tmp_path, monkeypatch):
    """One package whose operations raise on import, one whose class is no agent, and a second
    site later on sys.path declaring a name the first site's package declares too."""
    first, later = tmp_path / "first", tmp_path / "later"
    _package(first, "raisingops", {"agent.py": AGENT.replace("TidySettings", "S").replace("TidyAgent", "Raising"),
                                   "operations.py": "raise RuntimeError('config file missing')\n"},
             {"raising": "raisingops.agent:Raising"})
    _package(first, "notagent", {"agent.py": "class Thing:\n    pass\n"}, {"notagent": "notagent.agent:Thing"})
    _package(first, "typo", {"agent.py": "Agnet = GenerativeAgent\n"}, {"typo": "typo.agent:Agnet"})  # NameError
    _package(first, "notclass", {"agent.py": "def make():\n    pass\n"}, {"notclass": "notclass.agent:make"})
    _package(first, "dupone", {"agent.py": AGENT}, {"dup": "dupone.agent:TidyAgent"})
    _package(later, "duptwo", {"agent.py": AGENT}, {"dup": "duptwo.agent:TidyAgent"})
    monkeypatch.syspath_prepend(str(later))
    monkeypatch.syspath_prepend(str(first))
    installed_architectures.cache_clear()
    yield
    installed_architectures.cache_clear()
    for name in [m for m in sys.modules if m.split(".")[0] in ("raisingops", "notagent", "typo", "notclass", "dupone", "duptwo")]:
        del sys.modules[name]


def test_a_broken_installed_package_stops_none_of_socialsims_own_runs(broken_packages, caplog, capsys, tmp_path):
    from socialsim.cli import main
    from socialsim.llm.routing import check_route_names
    from socialsim.model.society import SocietyModel

    SocietyModel("hobbs-cafe", arch="crsec", model="rules", routes={"CreateNorm": "rules"}).step()
    assert "operations of an installed architecture's module raisingops.operations cannot be listed: " \
           "RuntimeError: config file missing" in caplog.text
    check_route_names({"ChooseAction": "rules"})
    assert main(["models"]) == 0 and "raising" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"architecture 'notagent' \(notagent.agent:Thing, declared by an installed "
                                         r"package under 'socialsim.architectures'\) is not an agent class"):
        agents.agent_class("notagent")
    with pytest.raises(ValueError, match=r"architecture 'typo' .* cannot be loaded: NameError: name 'GenerativeAgent'"):
        agents.agent_class("typo")
    assert main(["run", "hobbs-cafe", "--arch", "notagent", "--model", "rules", "--steps", "1", "--out",
                 str(tmp_path / "no")]) == 2 and not (tmp_path / "no").exists()
    assert "is not an agent class" in capsys.readouterr().err


def test_two_packages_declaring_one_name_the_first_on_sys_path_is_used_and_the_other_named(broken_packages, caplog):
    assert architectures()["dup"] == "dupone.agent:TidyAgent"
    assert "two installed packages declare the architecture 'dup': dupone.agent:TidyAgent is used, " \
           "duptwo.agent:TidyAgent ignored" in caplog.text


def test_a_top_level_agent_module_has_no_operations_looked_for_beside_it(tmp_path, monkeypatch):
    """An agent in a top-level module ("solo:Agent") has no package: "operations" beside it would be
    any top-level module of that name on sys.path, someone else's."""
    from socialsim.llm.operations import installed_modules

    monkeypatch.setattr(agents, "installed_architectures", lambda: {"solo": "solo:Agent", "pkg": "a.b.agent:Agent"})
    assert installed_modules() == ["solo", "a.b.agent", "a.b.operations"]


def test_an_unknown_or_classless_architecture_is_refused_naming_every_known_one(broken_packages):
    assert list(architectures()) == ["generic", "crsec", "asvo", "itcmas",  # then the installed, by name
                                     "dup", "notagent", "notclass", "raising", "typo"]
    with pytest.raises(ValueError) as raised:
        agents.agent_class("wizard")
    assert str(raised.value) == ("unknown architecture 'wizard'; known: asvo, crsec, dup, generic, itcmas, notagent, "
                                 "notclass, raising, typo")
    with pytest.raises(ValueError, match=r"architecture 'notclass' \(notclass.agent:make, .*\) is not an agent class"):
        agents.agent_class("notclass")  # a function, not a class


def test_installed_operations_are_listed_and_only_a_module_that_fails_is_warned_of(broken_packages, tidy_package,
                                                                                     caplog):
    """A package with no ``operations`` module beside its agent is no error; one whose module raises
    is said on socialsim's own logger (the run log's), and socialsim's operations are all still there."""
    import logging

    from socialsim.llm.operations import all_operations

    with caplog.at_level(logging.WARNING, logger="socialsim"):
        listed = all_operations()
    warned = sorted((r.name, r.getMessage()) for r in caplog.records if "cannot be listed" in r.getMessage())
    assert warned == [
        ("socialsim", "operations of an installed architecture's module raisingops.operations cannot be listed: "
                      "RuntimeError: config file missing"),
        ("socialsim", "operations of an installed architecture's module typo.agent cannot be listed: NameError: "
                      "name 'GenerativeAgent' is not defined")]
    order = [(op.module, op.name) for op in listed]
    assert order == sorted(order) and ("tidying", "Greet") in order and ("action", "ChooseAction") in order


class _Phased(GenerativeAgent):
    """An agent whose one own phase each case below declares wrongly."""

    async def feel(self):
        pass

    def record(self):
        pass

    @classmethod
    def announce(cls, model):
        pass


@pytest.mark.parametrize(("phase", "problem"), [
    (Phase("feel"), "_Phased.feel is a coroutine (async def), which only a phase with is_async=True awaits"),
    (Phase("record", is_async=True), "_Phased.record is no coroutine (async def), which a phase with is_async=True "
                                     "needs"),
    (Phase("announce"), "_Phased.announce is a classmethod, which a phase with scope='model' calls once per step "
                        "with the model"),
    (Phase("record", scope="model"), "_Phased.record is a method of each agent, which a phase with scope='agents' "
                                     "(the default) calls"),
    (Phase("recrod"), "names no method of _Phased (did you mean 'record'?)"),
], ids=["async-in-sync", "sync-in-async", "classmethod-on-agents", "method-on-model", "misspelt"])
def test_a_phase_its_method_cannot_run_as_declared_is_refused_before_step_1(phase, problem, monkeypatch):
    """An async method in a sync phase was called and never awaited: the run "completed" without it."""
    from socialsim.model import society

    monkeypatch.setattr(_Phased, "phases", (Phase("perceive"), phase, Phase("act")))
    monkeypatch.setattr(society, "agent_class", lambda name: _Phased)
    with pytest.raises(ValueError) as refused:
        society.SocietyModel("hobbs-cafe", arch="generic", model="rules")
    assert str(refused.value).startswith(f"_Phased's {phase!r}") and str(refused.value).endswith(problem)
