"""What an ITCMA-S act leaves behind on each of its paths - filtered by LTRHA, failed for want of
resources (eq. 18), refused by the world, done - in the agent, the society and both tables: the
inspector reads the live outcome and the recorded row alike, so the two must agree. Written for
the survivors of mutmut's run on ``ITCMASAgent.act`` and ``judge_intent`` (docs/testing.md). Rules
engine."""

import asyncio

from socialsim.agents.itcmas import agent as itcmas_agent
from socialsim.agents.itcmas.ltrha import FILTERED_PREFIX
from socialsim.model.society import SocietyModel
from socialsim.spaces.actions import Action, Outcome


def stepped(**params):
    """A society one step in, and its first agent by name."""
    model = SocietyModel("irollan-valley", model="rules", rng=3, **params)
    model.step()
    return model, sorted(model.agents, key=lambda a: a.name)[0]


def table(model, name):
    return model.datacollector.get_table_dataframe(name)


def act(agent, action, verdict=False):
    agent.intent, agent.filter_verdict = action, verdict
    agent.act()
    return table(agent.model, "itcmas_actions").iloc[-1]


def test_a_filtered_act_is_counted_logged_in_its_own_table_and_remembered_as_filtered():
    model, agent = stepped()
    area, total = agent.area, model.society.filtered_total
    rows = len(table(model, "filtered_actions"))
    for text in ("use a bed", "use a lamp"):
        row = act(agent, Action("use", text.removeprefix("use ")), verdict=True)
        assert (row["status"], row["action"], row["reason"]) == ("filtered", FILTERED_PREFIX + text, "")
        assert agent.last_outcome.ok is False  # recorded as action_ok: the inspector says nothing of None
        assert agent.filtered_lately[-1] == text  # the next choice is told it was filtered
    assert model.society.filtered_total == total + 2
    logged = table(model, "filtered_actions").iloc[rows:]
    assert logged.to_dict("records") == [{"step": model.steps, "agent": agent.name, "area": area, "action": text}
                                         for text in ("use a bed", "use a lamp")]
    assert model.datacollector.model_reporters["filtered_actions"](model) == total + 2


def test_a_failed_attempt_is_the_recorded_reason_live_too_and_a_done_act_has_no_reason(monkeypatch):
    model, agent = stepped()
    door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
    monkeypatch.setattr(itcmas_agent, "success_rate", lambda resources: 0.0)  # eq. 18 at its floor
    row = act(agent, door)
    assert row["status"] == "failed" and row["reason"]
    assert agent.last_outcome == Outcome(ok=False, reason=row["reason"])  # what the live inspector shows
    monkeypatch.setattr(itcmas_agent, "success_rate", lambda resources: 1.0)
    row = act(agent, door)
    assert (row["status"], row["reason"]) == ("done", "") and agent.last_outcome.ok is True


def test_without_the_success_rate_an_attempt_never_fails_for_want_of_resources(monkeypatch):
    asked = []
    monkeypatch.setattr(itcmas_agent, "success_rate", lambda resources: asked.append(resources) or 0.0)
    for on in (False, True):
        model, agent = stepped(success_rate=on)
        door = next(a for a in agent.world.action_space(agent) if a.verb == "go to")
        asked.clear()
        row = act(agent, door)
        assert row["status"] == ("failed" if on else "done"), on
        assert asked == ([agent.resources] if on else []), on  # eq. 18 on the agent's own resources


def test_an_act_row_shows_resources_only_with_ltrha():
    for ltrha in (False, True):
        model, agent = stepped(ltrha=ltrha)
        rows = table(model, "itcmas_actions")
        assert len(rows) == len(model.agents)
        if ltrha:
            assert rows["resources"].tolist() == [model.agent_named(n).resources for n in rows["agent"]]
        else:
            assert rows["resources"].isna().all()


def test_without_the_social_filter_an_earlier_verdict_is_not_kept():
    model, agent = stepped(social_filter=False)
    agent.intent, agent.filter_verdict = Action("use", "a bed"), True
    asyncio.run(agent.judge_intent())
    assert not agent.filter_verdict
    row = act(agent, Action("go to", "nowhere at all"), verdict=agent.filter_verdict)
    assert row["status"] == "refused"


def test_an_agent_without_an_intent_keeps_no_earlier_verdict():
    model, agent = stepped()
    agent.intent, agent.filter_verdict = None, True
    asyncio.run(agent.judge_intent())
    assert not agent.filter_verdict
