"""What the CRSEC agent records of its own steps: who speaks in a conversation and what the sender
says, the memories it leaves, the senders' decisions and the counts read from them, plan compliance
against adoption, the steps of norm changes, the prompts it builds, a synthesis's members, what a
thought persuades, one action per slot. Written for the survivors of a mutmut run on
``agents/crsec/agent.py`` (docs/testing.md): each test pins a record a removed or broken line of the
agent would change. Rules engine (scripted answers where a model's are needed), so the society is a
null model's."""

import pandas as pd
import pytest

from socialsim.model.society import SocietyModel

ENTREPRENEURS = {"Bob Johnson", "Abigail Chen", "Francisco Lopez"}
STEPS = 30


def society(steps=STEPS, rng=3, **kwargs):
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=rng, **kwargs)
    for _ in range(steps):
        model.step()
    return model


@pytest.fixture(scope="module")
def run():
    return society()


def table(model, name):
    return model.datacollector.get_table_dataframe(name)


def test_conversations_alternate_sender_and_receiver_and_open_with_the_norm_that_covers_the_act(run):
    chats = table(run, "conversations")
    changes = table(run, "norm_changes")
    assert len(chats) > 0
    for (step, sender, receiver, topic), lines in chats.groupby(["step", "sender", "receiver", "topic"]):
        lines = lines.sort_values("turn")
        expected = [sender if turn % 2 == 0 else receiver for turn in lines["turn"]]
        assert lines["speaker"].tolist() == expected, (step, sender)
        # the sender names a norm it holds that covers the act; its later turns repeat it, the receiver's never
        held = changes[(changes["agent"] == sender) & (changes["canonical"] == topic) & (changes["step"] <= step)]
        first = lines["text"].iloc[0]
        assert first.startswith(f"Excuse me, {receiver}:")
        said = [c for c in held["content"].unique() if c in first]
        assert said, (step, sender, topic, first)
        for _, line in lines.iloc[1:].iterrows():
            assert any(c in line["text"] for c in said) == (line["speaker"] == sender), line["text"]


def test_a_conversation_leaves_a_memory_with_each_side_of_who_talked_and_what_was_said(run):
    chats = table(run, "conversations")
    chats = chats[chats["heard"].astype(bool)]  # one over the receiver's conversations_heard has no effect
    for (step, sender, receiver), lines in chats.groupby(["step", "sender", "receiver"]):
        opening = lines.sort_values("turn")["text"].iloc[0]
        mine = [m for m in run.agent_named(sender).stream.records if m.step == step and m.kind == "conversation"]
        theirs = [m for m in run.agent_named(receiver).stream.records if m.step == step and m.kind == "conversation"]
        assert any(m.text.startswith(f"I talked to {receiver} about") and opening in m.text for m in mine)
        assert any(m.text.startswith(f"{sender} talked to me about") and opening in m.text for m in theirs)
        # the one told is told something that matters more to it than to the one telling
        assert max(m.importance for m in theirs) > min(m.importance for m in mine)


def test_sender_decisions_say_who_decided_and_the_conflicts_column_counts_them(run):
    decisions = table(run, "sender_decisions")
    assert set(decisions.loc[decisions["identity"] == "norm entrepreneur", "agent"]) == ENTREPRENEURS
    assert not set(decisions.loc[decisions["identity"] == "ordinary citizen", "agent"]) & ENTREPRENEURS
    asked = decisions[decisions["talk"].notna()]
    assert asked[asked["agent"].isin(ENTREPRENEURS)]["talk"].astype(bool).all()  # entrepreneurs always talk
    assert asked["conflict"].astype(bool).all()  # the talk decision follows a conflict only
    frame = run.datacollector.get_model_vars_dataframe().reset_index(drop=True)
    per_step = decisions[decisions["conflict"].astype(bool)].groupby("step").size()
    for step in range(1, STEPS + 1):
        assert frame.loc[step - 1, "conflicts"] == per_step.get(step, 0), step
    assert frame["conflicts"].sum() > 0


def test_norm_chats_count_the_conversations_started_and_each_leaves_a_chat_event_per_line(run):
    """Counted, said in the world and recorded as interactions: the conversations their receivers heard;
    the others (over a receiver's conversations_heard) are counted apart, as unheard_chats."""
    everything = table(run, "conversations")
    chats = everything[everything["heard"].astype(bool)]
    started = chats.groupby("step")[["sender", "receiver"]].apply(lambda g: len(g.drop_duplicates()))
    unheard = everything[~everything["heard"].astype(bool)].groupby("step")[["sender", "receiver"]].apply(
        lambda g: len(g.drop_duplicates()))
    frame = run.datacollector.get_model_vars_dataframe().reset_index(drop=True)
    for step in range(1, STEPS + 1):
        assert frame.loc[step - 1, "norm_chats"] == started.get(step, 0), step
        assert frame.loc[step - 1, "unheard_chats"] == unheard.get(step, 0), step
    events = table(run, "events")
    said = events[events["verb"] == "chat with"]  # the world's record of each line: speaker, other party, line
    assert len(said) == len(chats)
    for _, line in chats.iterrows():
        partner = line["receiver"] if line["speaker"] == line["sender"] else line["sender"]
        match = said[(said["step"] == line["step"]) & (said["agent"] == line["speaker"])
                     & (said["content"] == line["text"])]
        assert (match["target"] == partner).any(), (line["step"], line["speaker"])
    interactions = table(run, "interactions")
    chats_first = chats[chats["turn"] == 0]
    recorded = interactions[interactions["kind"] == "norm chat"]
    assert sorted(recorded["content"]) == sorted(chats_first["text"])  # the opening line, not another one


def test_plan_compliance_never_exceeds_adoption(run):
    """A plan complies with a norm only if it was made with the norm held."""
    frame = run.datacollector.get_model_vars_dataframe()
    norms = [t.name for t in run.society.settings.tracked_norms]
    for norm in norms:
        assert (frame[f"plan_compliance[{norm}]"] <= frame[f"adoption[{norm}]"] + 1e-12).all(), norm
    assert sum(frame[f"plan_compliance[{n}]"].max() for n in norms) > 0


def test_every_norm_change_is_recorded_at_a_step_of_the_run(run):
    changes = table(run, "norm_changes")
    steps = pd.to_numeric(changes["step"], errors="coerce")
    assert steps.notna().all() and steps.between(0, STEPS).all()
    assert set(changes["event"]) >= {"created", "matched", "qualified"}
    assert steps[changes["event"] == "qualified"].max() > 1  # later steps qualify norms too


def test_the_models_line_is_what_the_conversation_records(scripted):
    """A conversation turn asked of a model records the model's line (not the rule's fallback)."""
    scripted(default="Hello there, let us talk about this.")
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=3, routes={"ConverseTurn": "openai/scripted"})
    for _ in range(2):
        model.step()
    chats = table(model, "conversations")
    assert len(chats) > 0 and chats["text"].str.contains("Hello there, let us talk about this.").all()


NAMED = {"ConverseTurn", "CreateNorm", "DecideToTalk", "GenerateNormativeActions", "GenerateNormativePlans",
         "GenerateThought", "IdentifyNormFromChat", "IdentifyNormFromThought", "JudgePlanCompliance"}
DESCRIBED = {"CreateNorm", "DecideToTalk", "GenerateNormativeActions", "GenerateNormativePlans", "GenerateThought"}


def test_every_prompt_an_agent_builds_is_filled_in(monkeypatch, watch_asks):
    """What a model would be sent, for every decision the agents make (the rules answer them): no
    field left empty as "None", and the prompts about the agent itself name it and describe it. A
    context field dropped or mixed up changes nothing the rules read, only what a model is told."""
    import re

    sent: dict[str, list[tuple[str, str, str]]] = {}
    agents = {}

    def prompt(op, ctx, agent_id, answer):
        agent = agents[agent_id]
        text = "\n".join(m["content"] for m in op.messages(ctx))
        sent.setdefault(op.name, []).append((agent.name, agent.description, text))

    watch_asks(monkeypatch, prompt)
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=3)
    agents.update({a.unique_id: a for a in model.agents})
    for _ in range(STEPS):
        model.step()
    assert set(sent) >= NAMED | {"DetectConflict", "CheckConflict", "CheckType", "CheckDuplication",
                                 "CheckConsistency", "ClassifySpecificNorms", "GenerateAbstractNorm", "MatchNorm"}
    for op, calls in sent.items():
        for name, description, text in calls:
            assert not re.search(r"\bNone\b", text), (op, text)
            if op in NAMED:
                assert name in text, (op, name)
            if op in DESCRIBED:
                assert description in text, (op, name)


def test_a_synthesis_joins_the_listed_norms_each_once_and_skips_a_category_of_one(scripted):
    """Categories as a model might list them: a lone norm (skipped, the next category still read),
    a pair, a pair reusing a taken norm (left with one: skipped), numbers off the list (ignored)."""
    import json

    categories = [{"theme": "alone", "members": [6]}, {"theme": "pair", "members": [1, 2]},
                  {"theme": "reuse", "members": [2, 3]}, {"theme": "late", "members": [0, 99, 4, 5]}]
    scripted(default=json.dumps({"categories": categories}))
    model = society(1, initial_norms=7, routes={"ClassifySpecificNorms": "openai/scripted"})
    bob = model.agent_named("Bob Johnson")
    created = [n for n in bob.norms.norms if n.origin == "created" and n.valid]  # numbered 1.. in the prompt
    assert len(created) >= 6
    abstract = [n for n in bob.norms.norms if n.origin == "synthesis"]
    assert [tuple(n.members) for n in abstract] == [(created[0].id, created[1].id), (created[3].id, created[4].id)]
    assert [n.theme for n in abstract] == ["pair", "late"]
    qualified = [n for n in abstract if n.qualified]
    assert bob.counts["syntheses"] == len(qualified) > 0
    for norm in qualified:  # its members leave the active database, with the step and the norm that replaced them
        assert all(not bob.norms.get(m).activated for m in norm.members)
    changes = table(model, "norm_changes")
    deactivated = changes[(changes["agent"] == "Bob Johnson") & changes["event"].str.startswith("deactivated")]
    assert sorted(zip(deactivated["norm_id"], deactivated["event"], strict=True)) == sorted(
        (m, f"deactivated (synthesized into norm {n.id})") for n in qualified for m in n.members)
    assert (deactivated["step"] == 1).all()


@pytest.mark.parametrize(("check", "reply"), [("CheckConsistency", "No"), ("CheckDuplication", "Yes"),
                                              ("CheckType", "2"), ("CheckConflict", "Yes")])
def test_an_abstract_norm_failing_a_check_leaves_its_members_active(scripted, check, reply):
    scripted(default=reply)
    model = society(1, initial_norms=7, routes={check: "openai/scripted"})
    bob = model.agent_named("Bob Johnson")
    abstract = [n for n in bob.norms.norms if n.origin == "synthesis"]
    assert abstract and not any(n.qualified for n in abstract)  # synthesized, then rejected
    assert all(bob.norms.get(m).activated for n in abstract for m in n.members)
    assert bob.counts["syntheses"] == 0


def _thought_norms(model):
    changes = table(model, "norm_changes")
    return changes[(changes["origin"] == "thought") & (changes["event"] == "qualified")]


def test_what_a_thought_persuades_depends_on_the_stance_and_the_contrary_rate():
    """Observation alone (no talk): an agent against a norm takes it from a thought only as often as
    ``accept_against`` lets it, and forms contrary norms only as often as ``contrary_rate`` does."""
    tracked = None
    contrary = {}
    for rate in (1.0, 0.0):
        model = society(40, enable_chat=False, contrary_rate=rate)
        contrary[rate] = int((_thought_norms(model)["opposes"] != "").sum())
    assert contrary[1.0] > 0 and contrary[0.0] == 0
    for accept in (1.0, 0.0):
        model = society(40, enable_chat=False, contrary_rate=0.0, accept_against=accept)
        tracked = [t.name for t in model.society.settings.tracked_norms]
        taken = _thought_norms(model)
        against = [(a.name, n) for a in model.agents for n in tracked if a.stance(n) == "against"]
        held_against = [(agent, norm) for agent, norm in against
                        if ((taken["agent"] == agent) & (taken["canonical"] == norm)).any()]
        if accept == 1.0:
            assert held_against  # persuaded although against
        else:
            assert not held_against and len(taken) > 0  # the others still take norms from thoughts


def test_every_agent_acts_once_per_action_slot_in_every_step(run):
    """Actions are planned in ``action_minutes`` slots and each is carried out in the step whose
    minutes hold it: a slot timed wrong is silently never done, so count them."""
    events = table(run, "events")
    done = events[events["verb"] != "chat with"].groupby(["step", "agent"]).size()
    slots = run.scenario_spec.step_minutes / run.society.settings.action_minutes
    assert slots >= 2
    for step in range(1, STEPS + 1):
        for agent in run.agents:
            assert done.get((step, agent.name), 0) == slots, (step, agent.name)


def test_the_second_days_plan_is_made_with_the_agents_memories(monkeypatch, watch_asks):
    """Day 1's plans come before anything happened; day 2's prompt lists what the agent remembers
    of day 1, recalled for its goal (an empty recall would silently print nothing)."""
    asked = []

    def plan(op, ctx, agent_id, answer):
        if op.name == "GenerateNormativePlans":
            asked.append((ctx.day, ctx.name, "\n".join(m["content"] for m in op.messages(ctx))))

    watch_asks(monkeypatch, plan)
    model = society(86)
    second = [(name, text) for day, name, text in asked if day == 2]
    assert len(second) == len(model.agents)
    for name, text in second:
        remembered = [m.text for m in model.agent_named(name).stream.records if m.step < 85]
        assert "RELEVANT MEMORIES" in text and any(m in text for m in remembered), name


def test_an_entrepreneur_creates_norms_once_and_only_holders_look_for_conflicts():
    model = society(3)
    ledger = model.llm.ledger.frame()
    names = {a.unique_id: a.name for a in model.agents}
    created = ledger[ledger["op"] == "CreateNorm"]["agent"].map(names).value_counts()
    assert created.to_dict() == dict.fromkeys(ENTREPRENEURS, 1)  # asked once, not each step
    decisions, changes = table(model, "sender_decisions"), table(model, "norm_changes")
    holding_since = changes[changes["state"] == "qualified"].groupby("agent")["step"].min()
    assert len(decisions) > 0  # only an agent holding a norm looks for conflicts with it
    assert all(agent in holding_since and holding_since[agent] <= step
               for agent, step in zip(decisions["agent"], decisions["step"], strict=True))


def test_each_side_of_a_conversation_speaks_by_its_role_and_the_receiver_by_its_stance(run):
    chats = table(run, "conversations")
    for (_step, sender, receiver, topic), lines in chats.groupby(["step", "sender", "receiver", "topic"]):
        lines = lines.sort_values("turn")
        mine = lines[lines["speaker"] == sender]["text"].tolist()
        theirs = lines[lines["speaker"] == receiver]["text"].tolist()
        assert all(t.startswith("I understand, but please remember") for t in mine[1:]), mine
        against = run.agent_named(receiver).stance(topic) == "against"
        assert all(("habit" in t) == against for t in theirs), (receiver, topic, theirs)


def test_the_first_adoption_and_first_compliant_act_are_the_steps_they_happened(run):
    """What the adoption-before-compliance count reads: the step each agent first held each norm
    (as its recorded rows show it) and first acted in keeping with it."""
    agents = run.datacollector.get_agent_vars_dataframe().reset_index()
    tracked = {t.name for t in run.society.settings.tracked_norms}
    for agent in run.agents:
        rows = agents[agents["name"] == agent.name]
        for norm in tracked:
            held = rows[rows["holds"].str.contains(norm, regex=False)]["Step"]
            assert agent.first_adopted.get(norm) == (int(held.min()) if len(held) else None), (agent.name, norm)
        assert set(agent.first_compliant_act) <= tracked
        assert all(isinstance(s, int) and 1 <= s <= STEPS for s in agent.first_compliant_act.values())
    assert sum(len(a.first_compliant_act) for a in run.agents) > 0 and sum(len(a.first_adopted) for a in run.agents) > 0


def test_the_plans_table_holds_each_agents_plan_with_its_follow_ups(run):
    plans = table(run, "plans")
    assert run.society.settings.clock_of_step(STEPS, run.scenario_spec.step_minutes)[0] == 1  # one day's plans
    for agent in run.agents:
        rows = plans[plans["agent"] == agent.name]
        assert rows[["time", "activity", "place", "then"]].values.tolist() == [
            [i["time"], i["activity"], i["place"], i.get("then") or ""] for i in agent.plan], agent.name
    assert (plans["then"] != "").any() and (plans["then"] == "").any()


def test_an_agent_asks_for_its_actions_again_as_soon_as_the_norms_it_holds_change(run):
    """Actions are asked per plan item; a norm taken up (or given up) in the middle of an item
    makes the agent ask again at its next step, so the rest of the item is done as it now holds."""
    agents = run.datacollector.get_agent_vars_dataframe().reset_index()
    ledger = run.llm.ledger.frame()
    names = {a.unique_id: a.name for a in run.agents}
    asked = set(zip(ledger.loc[ledger["op"] == "GenerateNormativeActions", "agent"].map(names),
                    ledger.loc[ledger["op"] == "GenerateNormativeActions", "step"], strict=True))
    changed = 0
    for name, rows in agents.groupby("name"):
        holds = dict(zip(rows["Step"], rows["holds"], strict=True))
        for step in range(3, STEPS + 1):
            if holds.get(step - 1) != holds.get(step - 2):
                changed += 1
                assert (name, step) in asked, (name, step)
    assert changed > 0


def test_a_thought_that_names_a_norm_is_recorded_counted_and_remembered_as_mattering_more(run):
    thoughts = table(run, "thoughts")
    changes = table(run, "norm_changes")
    drawn = changes[(changes["origin"] == "thought") & (changes["event"] == "identified")]
    named = thoughts[thoughts["normative_info"] != ""]
    assert 0 < len(named) < len(thoughts)
    assert sorted(zip(named["step"], named["agent"], named["normative_info"], strict=True)) == sorted(
        zip(drawn["step"], drawn["agent"], drawn["content"], strict=True))
    frame = run.datacollector.get_model_vars_dataframe().reset_index(drop=True)
    per_step = named.groupby("step").size()
    for step in range(1, STEPS + 1):
        assert frame.loc[step - 1, "norm_thoughts"] == per_step.get(step, 0), step
    importance = {}
    for _, row in thoughts.iterrows():
        memory = [m for m in run.agent_named(row["agent"]).stream.records
                  if m.kind == "thought" and m.step == row["step"] and m.text == row["thought"]]
        assert len(memory) == 1, (row["agent"], row["step"])
        importance.setdefault(row["normative_info"] != "", set()).add(memory[0].importance)
    assert min(importance[True]) > max(importance[False])
