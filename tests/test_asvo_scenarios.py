"""The eight ASVO scenarios from the CLI, SVO assignment, settings validation, judges, determinism."""

import random

import pandas as pd
import pytest
import yaml

from socialsim.agents.asvo.settings import ASVOScenario, ASVOSettings, assign_svo
from socialsim.agents.asvo.svo import SVO_TYPES
from socialsim.agents.desires import DESIRES
from socialsim.cli import main
from socialsim.model.society import SocietyModel
from socialsim.scenarios.loader import load_scenario, scenario_path

ASVO_SCENARIOS = ["school-micro", "school-meso", "school-macro", "workplace-micro", "workplace-meso",
                  "workplace-macro", "family-micro", "family-meso"]
SIZES = {"school-micro": 2, "school-meso": 4, "school-macro": 20, "workplace-micro": 2, "workplace-meso": 4,
         "workplace-macro": 10, "family-micro": 2, "family-meso": 4}


@pytest.mark.figures
@pytest.mark.parametrize("name", ASVO_SCENARIOS)
def test_each_scenario_runs_a_step_from_the_cli_on_the_rules_engine(name, tmp_path):
    out = tmp_path / name
    assert main(["run", name, "--model", "rules", "--steps", "1", "--out", str(out), "--no-progress"]) == 0
    agents = pd.read_parquet(out / "agents.parquet")
    assert len(agents) == SIZES[name]
    for desire in DESIRES:
        column = f"desire_{desire.replace(' ', '_')}"
        assert agents[column].between(0, 8).all()
    assert agents["action"].str.len().gt(0).all()
    assert set(agents["label"]) <= {"Cooperation", "QuasiCooperation", "Neutral", "QuasiCompetition", "Competition"}
    for table in ("asvo_actions", "asvo_predictions", "asvo_updates", "asvo_judgements"):
        assert len(pd.read_parquet(out / "tables" / f"{table}.parquet")) > 0, table
    report = (out / "report.md").read_text()
    assert "## ASVO" in report and "(paper)" in report and "rule-based baseline judge" in report
    assert (out / "figures" / "asvo_desires.png").is_file()


def test_scenario_context_is_the_papers_text():
    assert load_scenario("school-micro").context.startswith("The dormitory is a shared room in a middle school")
    assert "Alice, Bob, Charlie, and David" in load_scenario("workplace-meso").context
    assert "single tablet" in load_scenario("family-micro").context


def test_svo_assignment_cycle_mix_and_explicit():
    names = [f"P{i}" for i in range(10)]
    section = ASVOScenario.model_validate({"actions": [{"text": "wait", "self": 0.5, "others": 0.0}]})
    cycle = assign_svo(names, {}, ASVOSettings(), section, random.Random(0))
    assert [cycle[n] for n in names[:4]] == list(SVO_TYPES)
    mix = assign_svo(names, {}, ASVOSettings(svo_assignment="mix", svo_mix={"altruistic": 3, "competitive": 2}),
                     section, random.Random(0))
    assert sorted(mix.values()).count("altruistic") == 6 and list(mix.values()).count("competitive") == 4
    again = assign_svo(names, {}, ASVOSettings(svo_assignment="mix", svo_mix={"altruistic": 3, "competitive": 2}),
                       section, random.Random(0))
    assert mix == again
    explicit = assign_svo(["A", "B"], {"A": {"svo": "prosocial"}, "B": {"svo": "competitive"}},
                          ASVOSettings(svo_assignment="explicit"), section, random.Random(0))
    assert explicit == {"A": "prosocial", "B": "competitive"}
    override = assign_svo(["A", "B"], {}, ASVOSettings(svo_agents={"B": "altruistic"}), section, random.Random(0))
    assert override == {"A": "altruistic", "B": "altruistic"}
    with pytest.raises(ValueError, match="no SVO type for B"):
        assign_svo(["A", "B"], {"A": {"svo": "prosocial"}}, ASVOSettings(svo_assignment="explicit"), section,
                   random.Random(0))


def test_agents_own_svos_are_used_when_the_scenario_says_nothing_and_an_unused_one_is_named(caplog):
    """A scenario giving every agent traits.svo, without svo_assignment, was silently cycled instead."""
    section = ASVOScenario.model_validate({"actions": [{"text": "wait", "self": 0.5, "others": 0.0}]})
    traits = {"A": {"svo": "competitive"}, "B": {"svo": "competitive"}}
    assert assign_svo(["A", "B"], traits, ASVOSettings(), section, random.Random(0)) == \
        {"A": "competitive", "B": "competitive"}
    with caplog.at_level("WARNING", logger="socialsim"):
        partly = assign_svo(["A", "B", "C"], {"A": {"svo": "competitive"}}, ASVOSettings(), section, random.Random(0))
    assert partly == {"A": "altruistic", "B": "prosocial", "C": "individualistic"}  # not all given: cycled ...
    assert "the SVO in traits.svo of A is not used: SVOs are assigned by 'cycle'" in caplog.text  # ... and said
    caplog.clear()
    with caplog.at_level("WARNING", logger="socialsim"):
        assign_svo(["A", "B"], traits, ASVOSettings(svo_agents={"A": "altruistic", "B": "altruistic"},
                                                    svo_assignment="cycle"), section, random.Random(0))
    assert "not used" not in caplog.text  # every traits.svo overridden by name: nothing ignored unsaid


def test_scenario_svo_traits_are_used_and_the_ablation_hides_them():
    model = SocietyModel("school-micro", model="rules", rng=1)
    assert {a.name: a.svo for a in model.agents} == {"Alice": "altruistic", "Amy": "competitive"}
    ablated = SocietyModel("school-micro", model="rules", rng=1, use_svo=False)
    assert all(a.svo and a.active_svo is None for a in ablated.agents)


def test_bad_settings_and_sections_get_clear_messages(tmp_path):
    with pytest.raises(ValueError, match="n_candidates"):
        SocietyModel("school-micro", model="rules", n_candidates=0)
    with pytest.raises(ValueError, match="unknown SVO type 'greedy'"):
        SocietyModel("school-micro", model="rules", svo_agents={"Alice": "greedy"})
    with pytest.raises(ValueError, match="extra_knob"):
        SocietyModel("school-micro", model="rules", extra_knob=1)
    with pytest.raises(ValueError, match="needs a scenario with a 'network:'"):
        SocietyModel("hobbs-cafe", arch="asvo", model="rules")
    data = yaml.safe_load(scenario_path("school-micro").read_text())
    data["asvo"]["degrees"]["comfort"] = "hugely"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"asvo\.degrees.*unknown degree 'hugely'"):
        SocietyModel(str(path), model="rules")
    assert main(["run", str(path), "--model", "rules", "--steps", "1", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 2
    data["asvo"]["degrees"]["comfort"] = "moderately"
    data["asvo"]["actions"] = []  # the catalogue is the rules' actions and every fallback's
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"asvo\.actions: List should have at least 1 item"):
        SocietyModel(str(path), model="rules")
    data["asvo"]["actions"] = [{"text": "help {friend}", "self": 0, "others": 1}]  # filled in: {other} only
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"asvo\.actions\.0\.text: unknown placeholder \{friend\} \(only \{other\}"):
        SocietyModel(str(path), model="rules")
    data["asvo"]["actions"] = [{"text": "help {other}", "self": 0, "others": 1}]
    data["agents"][1]["traits"]["sov"] = data["agents"][1]["traits"].pop("svo")  # it read as no SVO given
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError) as refused:
        SocietyModel(str(path), model="rules")
    assert str(refused.value) == f"{path}: agents[1] (Amy).traits.sov: not a trait asvo reads (did you mean 'svo'?)"
    del data["agents"][1]["traits"]["sov"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError) as refused:  # it named neither the file nor where to set it
        SocietyModel(str(path), model="rules")
    assert str(refused.value) == (f"{path}: explicit SVO assignment: no SVO type for Amy "
                                  "(set traits.svo in the scenario or svo_agents=...)")
    data["agents"][1]["traits"]["svo"] = "competetive"  # named with the file and the field, as the section's are
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError) as refused:
        SocietyModel(str(path), model="rules")
    assert str(refused.value) == (f"{path}: agents[1] (Amy).traits.svo: unknown SVO type 'competetive' "
                                  "(types: altruistic, prosocial, individualistic, competitive)")
    del data["asvo"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="has no 'asvo:' section"):
        SocietyModel(str(path), model="rules")


def test_the_judge_must_differ_from_the_actors_model():
    with pytest.raises(ValueError, match="judge must differ from the actors' model"):
        SocietyModel("school-micro", model="openai/gpt-4o-mini", judges=["openai/gpt-4o-mini"])
    with pytest.raises(ValueError, match="judge must differ"):
        SocietyModel("school-micro", model="rules", routes={"plan": "openai/gpt-4o-mini"},
                     judges=["rules", "openai/gpt-4o-mini"])
    model = SocietyModel("school-micro", model="openai/gpt-4o-mini", judges=["rules", "anthropic/claude-3-5-haiku"])
    assert [j for j, _ in model.society.judges] == ["rules", "anthropic/claude-3-5-haiku"]
    assert model.society.judges[1][1].ledger is model.llm.ledger  # judges' calls are accounted with the run's


def test_several_judges_are_recorded_and_averaged():
    model = SocietyModel("family-meso", model="rules", rng=4, judges=["rules", "rules"])
    model.step()
    judgements = model.datacollector.get_table_dataframe("asvo_judgements")
    assert len(judgements) == 2 * 4
    frame = model.datacollector.get_agent_vars_dataframe()
    assert frame["naturalness"].between(1, 5).all() and frame["human_likeness"].between(1, 5).all()


def test_same_seed_same_frames_on_rules():
    frames = []
    for _ in range(2):
        model = SocietyModel("workplace-meso", model="rules", rng=11)
        for _ in range(3):
            model.step()
        frames.append(model.datacollector.get_agent_vars_dataframe())
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_a_misspelt_judge_model_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="unknown judge model 'gpt-5-typo'"):
        SocietyModel("school-micro", model="rules", judges=["gpt-5-typo"])


def test_a_scenario_with_both_a_map_and_a_network_runs(tmp_path):
    data = yaml.safe_load(scenario_path("school-micro").read_text())
    data["name"] = "school-map"
    data["map"] = {"areas": [{"name": "dorm", "x": 0, "y": 0, "width": 6, "height": 4}]}
    path = tmp_path / "school-map.yaml"
    path.write_text(yaml.safe_dump(data))
    model = SocietyModel(str(path), model="rules", rng=1)
    model.step()
    model.step()
    assert len(model.datacollector.get_table_dataframe("asvo_predictions")) > 0
    assert {a.name for a in model.agents} == set(model.social.agents)


def test_judge_gateways_inherit_the_runs_route_options():
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.ledger import Ledger
    from socialsim.llm.routing import RouteTable

    run_gateway = Gateway(RouteTable("rules"), ledger=Ledger(), api_base="http://127.0.0.1:9/v1", rpm=30,
                          timeout_s=7.0, num_retries=0)
    model = SocietyModel("school-micro", gateway=run_gateway, rng=1, judges=["openai/judge-model"])
    (name, judge), = model.society.judges
    assert name == "openai/judge-model"
    assert (judge.api_base, judge.rpm, judge.timeout_s, judge.num_retries) == ("http://127.0.0.1:9/v1", 30, 7.0, 0)
    assert judge.tape is run_gateway.tape and judge.ledger is run_gateway.ledger


# --- assign_svo and the settings' messages, case by case ------------------------------------------------------
WAIT = ASVOScenario.model_validate({"actions": [{"text": "wait", "self": 0.5, "others": 0.0}]})


@pytest.mark.parametrize("mix, expected", [
    # 7 agents at 6:4 -> quotas 4.2 and 2.8: the larger remainder (competitive's .8) gets the 7th agent,
    # not the larger quota, nor the first type by name or by order
    ({"altruistic": 6, "competitive": 4}, {"altruistic": 4, "competitive": 3}),
    ({"altruistic": 4, "competitive": 6}, {"altruistic": 3, "competitive": 4}),
    # equal remainders (7/4 = 1.75 each): the types' own order breaks the tie
    ({"competitive": 1, "individualistic": 1, "prosocial": 1, "altruistic": 1},
     {"altruistic": 2, "prosocial": 2, "individualistic": 2, "competitive": 1}),
])
def test_a_mix_is_split_by_largest_remainders(mix, expected):
    names = [f"P{i}" for i in range(7)]
    drawn = assign_svo(names, {}, ASVOSettings(svo_assignment="mix", svo_mix=mix), WAIT, random.Random(0))
    assert list(drawn) == names
    assert {t: list(drawn.values()).count(t) for t in expected} == expected


def test_a_mix_is_shuffled_with_the_models_rng():
    """The split is fixed; who gets which type is the model's RNG's shuffle of the pool in type order."""
    names = [f"P{i}" for i in range(6)]
    settings = ASVOSettings(svo_assignment="mix", svo_mix={"competitive": 1, "altruistic": 2})
    pool = ["altruistic"] * 4 + ["competitive"] * 2
    random.Random(5).shuffle(pool)
    assert assign_svo(names, {}, settings, WAIT, random.Random(5)) == dict(zip(names, pool, strict=True))


def test_svo_assignment_refusals_say_what_is_missing():
    with pytest.raises(ValueError) as caught:
        assign_svo(["A", "B", "C"], {"A": {"svo": "prosocial"}}, ASVOSettings(svo_assignment="explicit"), WAIT,
                   random.Random(0))
    assert str(caught.value) == ("explicit SVO assignment: no SVO type for B, C "
                                 "(set traits.svo in the scenario or svo_agents=...)")
    with pytest.raises(ValueError) as caught:
        assign_svo(["A"], {}, ASVOSettings(svo_assignment="mix"), WAIT, random.Random(0))
    assert str(caught.value) == "SVO assignment 'mix' needs svo_mix, e.g. {altruistic: 1, competitive: 1}"
    with pytest.raises(ValueError) as caught:
        assign_svo(["A"], {}, ASVOSettings(svo_agents={"Zed": "prosocial"}), WAIT, random.Random(0))
    assert str(caught.value) == "svo_agents names 'Zed', who is not an agent of this scenario"
    with pytest.raises(ValueError) as caught:  # a scenario's traits.svo is checked here, not by the settings
        assign_svo(["A"], {"A": {"svo": "greedy"}}, ASVOSettings(), WAIT, random.Random(0))
    assert str(caught.value) == "A: unknown SVO type 'greedy' (types: altruistic, prosocial, individualistic, competitive)"


def test_unused_traits_svos_are_named_in_one_warning_and_explicit_use_warns_of_nothing(caplog):
    traits = {"A": {"svo": "competitive"}, "B": {"svo": "prosocial"}}
    with caplog.at_level("WARNING", logger="socialsim"):
        assign_svo(["A", "B", "C"], traits, ASVOSettings(svo_assignment="cycle"), WAIT, random.Random(0))
    assert [r.getMessage() for r in caplog.records] == [
        "the SVO in traits.svo of A, B is not used: SVOs are assigned by 'cycle' (svo_assignment: explicit uses them)"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="socialsim"):
        assert assign_svo(["A", "B"], traits, ASVOSettings(svo_assignment="explicit"), WAIT, random.Random(0)) == \
            {"A": "competitive", "B": "prosocial"}
    assert caplog.records == []


def test_invalid_settings_and_sections_name_every_problem_in_one_message():
    with pytest.raises(ValueError) as caught:
        ASVOSettings.from_params({"n_candidates": 0, "max_retries": 9})
    assert str(caught.value) == ("asvo architecture parameters: n_candidates: Input should be greater than or "
                                 "equal to 1 (got 0); max_retries: Input should be less than or equal to 5 (got 9)")
    spec = load_scenario("school-micro")
    bad = spec.model_copy(update={"asvo": {**spec.asvo, "degrees": {"comfort": "hugely"}, "actions": []}})
    with pytest.raises(ValueError) as caught:
        ASVOScenario.from_scenario(bad)
    assert str(caught.value).startswith(f"{spec.where}: invalid asvo section: asvo.degrees.comfort: unknown "
                                        "degree 'hugely'")
    assert "; asvo.actions: List should have at least 1 item" in str(caught.value)
    agents = [a.model_copy(deep=True) for a in spec.agents]
    agents[1].traits.update({"degrees": {"comfort": "hugely"}, "initial": {"joyfulnes": 9}})
    with pytest.raises(ValueError) as caught:
        ASVOScenario.from_scenario(spec.model_copy(update={"agents": agents}))
    assert str(caught.value).startswith(f"{spec.where}: agent {agents[1].name!r}: invalid traits: traits.degrees.comfort: "
                                        "unknown degree 'hugely'")
    assert "; traits.initial: unknown desire 'joyfulnes'" in str(caught.value)


@pytest.mark.parametrize("params, message", [
    ({"svo_mix": {"altruistic": -1, "competitive": 2}}, "svo_mix: weight of altruistic is negative"),
    ({"svo_mix": {"altruistic": 0, "competitive": 0}}, "svo_mix: the mix needs a positive total weight"),
    ({"svo_mix": {"saint": 1}}, "svo_mix: unknown SVO type 'saint' (types: altruistic, prosocial, individualistic, "
                                "competitive)"),
    ({"judges": []}, "judges: give at least one judge model (or 'rules' for the baseline judge)"),
])
def test_a_mix_needs_known_types_and_weights_and_a_run_a_judge(params, message):
    with pytest.raises(ValueError) as caught:
        ASVOSettings.from_params(params)
    assert str(caught.value) == f"asvo architecture parameters: {message}"
    assert ASVOSettings.from_params({"svo_mix": {"altruistic": 0, "competitive": 1}}).svo_mix["altruistic"] == 0


def test_a_degree_of_an_unknown_desire_is_refused():
    with pytest.raises(ValueError, match=r"unknown desire 'comfrot' \(desires: comfort, joyfulness, "):
        ASVOScenario.model_validate({"actions": [{"text": "wait", "self": 0, "others": 0}],
                                     "degrees": {"comfrot": "slightly"}})


def test_a_network_without_ties_is_warned_of_and_said_in_the_report(tmp_path, caplog):
    """An ASVO scenario whose network had nodes but no ties ran without a word, though no agent could
    observe anyone. It still runs (a fair no-audience control), with a warning naming the file, and
    the report says so; a directed network names only the agents who observe no one."""
    data = yaml.safe_load(scenario_path("school-meso").read_text())
    data["network"] = {"edges": []}
    path = tmp_path / "alone.yaml"
    path.write_text(yaml.safe_dump(data))
    with caplog.at_level("WARNING", logger="socialsim"):
        main(["run", str(path), "--model", "rules", "--steps", "1", "--out", str(tmp_path / "run")])
    said = "the social network has no ties: no agent observes anyone"
    assert f"{path}: {said}" in caplog.text
    assert "**The social network has no ties: no agent observes anyone" in (tmp_path / "run" / "report.md").read_text()
    names = [a["name"] for a in data["agents"]]
    data["network"] = {"edges": [[names[0], names[1]], [names[1], names[2]]], "directed": True}
    path.write_text(yaml.safe_dump(data))
    caplog.clear()
    with caplog.at_level("WARNING", logger="socialsim"):
        SocietyModel(str(path), model="rules", rng=1)
    assert f"{names[2]}, {names[3]} observe no one on the social network: they see no one act" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="socialsim"):
        SocietyModel("school-meso", model="rules", rng=1)
    assert "observe" not in caplog.text  # the shipped network: everyone observes someone


def test_the_agents_who_observe_no_one_are_named_one_or_several_and_a_network_without_ties_says_what_to_give():
    from socialsim.agents.asvo.agent import unobserving_note

    assert unobserving_note([], 4) == ""
    assert unobserving_note(["Ann"], 4) == ("Ann observes no one on the social network: it sees no one act and its "
                                            "actions reach no one")
    assert unobserving_note(["Ann", "Bo"], 4) == ("Ann, Bo observe no one on the social network: they see no one "
                                                  "act and their actions reach no one")
    no_ties = ("the social network has no ties: no agent observes anyone, so no one is seen acting and no action "
               "reaches another agent (others' gains are 0, theory of mind only guesses); give network.edges, or "
               "network.complete: true for everyone to observe everyone")
    assert unobserving_note(["Ann", "Bo"], 2) == no_ties
    assert unobserving_note(["Ann"], 1) == no_ties  # one agent alone: no ties either
