"""Default model resolution, route files, and the social-network world."""

import random
import re

import pytest

from socialsim.llm.routing import EMBEDDED, RouteTable, default_model, parse_route
from socialsim.scenarios.schema import NetworkSpec
from socialsim.spaces.social_network import SocialNetworkWorld


def test_default_model_prefers_the_flag_then_the_environment_then_the_embedded_engine(monkeypatch):
    monkeypatch.delenv("SOCIALSIM_MODEL", raising=False)
    assert default_model(None) == EMBEDDED
    monkeypatch.setenv("SOCIALSIM_MODEL", "ollama/llama3.1")
    assert default_model(None) == "ollama/llama3.1"
    assert default_model("rules") == "rules"


def test_route_file_and_command_line_routes(tmp_path):
    path = tmp_path / "routes.yaml"
    path.write_text("default: openai/gpt-4o\nroutes:\n  elimination: openai/gpt-4o-mini\n")
    table = RouteTable.from_file(path)
    assert table.model_for("Elim", "elimination") == "openai/gpt-4o-mini"
    assert table.model_for("ChooseAction", "action") == "openai/gpt-4o"
    assert parse_route(" Elim = rules ") == ("Elim", "rules")
    path.write_text("- just a list\n")
    with pytest.raises(ValueError, match="expected a mapping"):
        RouteTable.from_file(path)


@pytest.mark.parametrize("text", ["Elim", "Elim=", "=rules", " = ", ""])
def test_a_command_line_route_needs_an_operation_and_a_model(text):
    with pytest.raises(ValueError, match=re.escape(f"--route expects OPERATION=MODEL (e.g. Elim=rules), got {text!r}")):
        parse_route(text)


def test_a_route_splits_at_its_first_equals_sign_and_a_route_file_may_name_only_a_default(tmp_path):
    assert parse_route("Elim=hosted_vllm/m=q4") == ("Elim", "hosted_vllm/m=q4")
    path = tmp_path / "routes.yaml"
    path.write_text("default: openai/gpt-4o\n")
    assert RouteTable.from_file(path) == RouteTable("openai/gpt-4o", {})
    assert RouteTable.from_file(path, default="rules").default == "rules"  # --model wins over the file
    path.write_text("")
    assert RouteTable.from_file(path) == RouteTable(EMBEDDED, {})


def test_a_route_file_without_a_default_takes_the_default_model_and_a_broken_one_is_named(tmp_path, monkeypatch):
    """It used to ignore $SOCIALSIM_MODEL (the embedded model ran instead), a misspelt ``route:``
    routed nothing, broken YAML gave a traceback and a number as a model a pydantic report."""
    path = tmp_path / "routes.yaml"
    monkeypatch.setenv("SOCIALSIM_MODEL", "rules")
    path.write_text("routes:\n  elimination: openai/gpt-4o-mini\n")
    assert RouteTable.from_file(path) == RouteTable("rules", {"elimination": "openai/gpt-4o-mini"})
    path.write_text("")
    assert RouteTable.from_file(path).default == "rules"
    for text, message in [
        ("route:\n  Elim: rules\n", "'route': not a route file's field (expected 'default' and 'routes')"),
        ("{{{", "not valid YAML: while parsing a flow node"),
        ("routes:\n  Elim: rules\n  Elim: openai/gpt-4o\n", "not valid YAML: while reading a mapping"),
        ("default: 5\n", "default: expected a model string, got 5"),
        ("routes:\n  Elim:\n", "routes.Elim: expected a model string, got None"),
        ("routes: [Elim]\n", "routes: expected a mapping OPERATION_OR_MODULE: MODEL, got ['Elim']"),
    ]:
        path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(f"{path}: ") + "(.*; )?" + re.escape(message)):
            RouteTable.from_file(path)
    with pytest.raises(ValueError, match=re.escape(f"--routes {tmp_path / 'nope.yaml'}: cannot read it (No such file")):
        RouteTable.from_file(tmp_path / "nope.yaml")


class Person:
    def __init__(self, name):
        self.name = name
        self.cell = None


def test_network_world_observation_follows_edges():
    names = ["Ann", "Bob", "Cid"]
    world = SocialNetworkWorld(NetworkSpec(edges=[("Ann", "Bob")], directed=True), names, random.Random(0))
    people = {n: Person(n) for n in names}
    for p in people.values():
        world.place(p)
    assert [p.name for p in world.observed_by(people["Ann"])] == ["Bob"]
    assert world.observed_by(people["Bob"]) == []  # directed: Bob does not see Ann
    complete = SocialNetworkWorld(NetworkSpec(complete=True), names, random.Random(0))
    for p in people.values():
        complete.place(p)
    assert [p.name for p in complete.observed_by(people["Cid"])] == ["Ann", "Bob"]
    assert people["Cid"].cell.coordinate == 2


def test_an_undirected_tie_is_seen_from_both_ends_and_every_node_carries_its_agents_name():
    names = ["Ann", "Bob", "Cid"]
    world = SocialNetworkWorld(NetworkSpec(edges=[("Ann", "Bob")]), names, random.Random(0))
    people = {n: Person(n) for n in names}
    for p in people.values():
        world.place(p)
    assert [p.name for p in world.observed_by(people["Ann"])] == ["Bob"]
    assert [p.name for p in world.observed_by(people["Bob"])] == ["Ann"]  # undirected: Bob sees Ann too
    assert world.observed_by(people["Cid"]) == []
    # the dashboard labels the ties it draws by these names
    assert [world.graph.nodes[i]["name"] for i in range(3)] == names


def test_a_route_must_name_an_operation_or_a_module_of_any_architecture():
    from socialsim.llm.routing import check_route_names

    check_route_names({"Elim": "rules", "spreading": "rules", "ChooseAction": "rules", "judge": "rules"})
    with pytest.raises(ValueError) as refused:
        check_route_names({"elimination": "rules", "Spreading": "rules", "xyz": "rules"})
    assert str(refused.value) == ("route to no operation or module: 'Spreading' (did you mean 'spreading'?); 'xyz'; "
                                  "`socialsim models` lists them")


def test_a_society_asks_the_model_and_routes_it_is_given_within_its_budget():
    from socialsim.llm.ledger import Budget
    from socialsim.model.society import SocietyModel

    model = SocietyModel("hobbs-cafe", arch="generic", model="rules", routes={"ChooseAction": "ollama/llama3.1"},
                         max_cost=0.5, max_calls=7, rng=1)
    assert model.llm.routes == RouteTable("rules", {"ChooseAction": "ollama/llama3.1"})
    assert model.llm.ledger.budget == Budget(max_cost=0.5, max_calls=7)
    assert SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1).llm.routes == RouteTable("rules", {})
    with pytest.raises(ValueError, match=re.escape("route to no operation or module: 'ChoseAction'")):
        SocietyModel("hobbs-cafe", arch="generic", model="rules", routes={"ChoseAction": "rules"}, rng=1)


def _map_and_network():
    from socialsim.scenarios.schema import Scenario

    return Scenario.model_validate({
        "name": "flat",
        "agents": [{"name": "Ann", "description": "A cook.", "start_area": "kitchen"},
                   {"name": "Bob", "description": "A lodger."}, {"name": "Cid", "description": "A guest."}],
        "map": {"areas": [{"name": "hall", "x": 0, "y": 0, "width": 2, "height": 2},
                          {"name": "kitchen", "x": 2, "y": 0, "width": 2, "height": 2}],
                "doors": [["hall", "kitchen"]]},
        "network": {"edges": [["Ann", "Bob"]], "directed": True},
    })


@pytest.mark.parametrize("arch", ["generic", "itcmas"])
def test_a_scenario_with_a_map_and_a_network_places_everyone_on_both_and_runs(arch):
    """The network's placement used to take the agent's cell after the map's: a map architecture
    then read an area from a network node and crashed in step 1 (KeyError)."""
    from socialsim.model.society import SocietyModel

    scenario = _map_and_network()
    model = SocietyModel(scenario, arch=arch, model="rules", rng=1)
    assert model.scenario_spec is scenario  # as given, not looked up by name
    ann, bob, cid = (model.agent_named(n) for n in ("Ann", "Bob", "Cid"))
    # one's start area, else the map's first
    assert [model.world.area_of(a) for a in (ann, bob, cid)] == ["kitchen", "hall", "hall"]
    assert sorted(model.world.agents) == sorted(model.social.agents) == ["Ann", "Bob", "Cid"]
    assert model.social.observed_by(ann) == [bob] and model.social.observed_by(bob) == []
    assert list(model.interactions.nodes) == ["Ann", "Bob", "Cid"] and model.interactions.number_of_edges() == 0
    for _ in range(2):
        model.step()
    assert model.steps == 2 and all(model.world.area_of(a) in ("hall", "kitchen") for a in (ann, bob, cid))


def test_the_rules_note_of_a_run_with_an_operation_routed_to_a_model_does_not_say_no_model_was_involved():
    """`--model rules --route ChooseAction=M`: its report and log said "No language model is involved"."""
    from socialsim.llm.engines import engine_note

    note = engine_note("rules")
    assert "sent to it is answered by a transparent numeric or logical rule" in note
    assert "no language model is involved" not in note.lower()


def test_a_route_to_asvos_judge_is_refused_naming_the_setting_that_chooses_it():
    """``--route judge=M`` on ASVO sent nothing to M: its judge gateways route by asvo.judges alone."""
    from socialsim.model.society import SocietyModel

    for routes in ({"judge": "openai/j"}, {"JudgeAction": "openai/j"}, {"ClassifyBehaviour": "rules"}):
        with pytest.raises(ValueError, match=re.escape(
                f"route to {next(iter(routes))!r} is never taken: it is asked only of the judge, "
                "chosen by --set 'asvo.judges=[\"MODEL\"]'")):
            SocietyModel("family-micro", model="rules", routes=routes, rng=1)
    SocietyModel("family-micro", model="rules", routes={"tom": "rules"}, rng=1)  # the actors' own: taken
