"""The norm database's change log (the `norm_changes` table): the questionnaire, the dashboard's
norm view and the reports rebuild every agent's norms from it, so each event must carry its step,
its name, the norm's source and its state (mutation testing of agents/norms.py showed these could
change unseen)."""

from socialsim.agents.norms import NormDatabase


def test_every_change_is_logged_with_its_step_event_source_and_state():
    db = NormDatabase("Ada")
    heard = db.add("No phones inside.", 80, "injunctive", qualified=False, origin="conversation", step=3,
                   source="Bo: please take calls outside")
    db.set_match(heard, "no phones indoors", None, 4)
    db.retype(heard, "descriptive", 5)
    db.reject(heard, "type", 5)
    kept = db.add("Sweep the bench.", 70, "descriptive", qualified=False, origin="thought", step=6,
                  source='"the bench is dusty"')
    db.set_match(kept, "sweep after sawing", None, 6)
    db.qualify(kept, 6)
    made = db.add("Keep the shop tidy.", 90, "injunctive", qualified=True, origin="created", step=7)
    abstract = db.add("Respect the shared space.", 85, "injunctive", qualified=False, origin="synthesis", step=8,
                      source="- Sweep the bench.\n- Keep the shop tidy.", members=(kept.id, made.id))
    db.set_match(abstract, None, None, 8)
    db.qualify(abstract, 8)
    db.deactivate((kept.id, made.id), 8, abstract.id)
    log = db.drain_changes()
    assert [(r["step"], r["norm_id"], r["event"], r["state"]) for r in log] == [
        (3, 0, "identified", "pending"), (4, 0, "matched", "pending"), (5, 0, "type corrected", "pending"),
        (5, 0, "failed type", "rejected"),
        (6, 1, "identified", "pending"), (6, 1, "matched", "pending"), (6, 1, "qualified", "qualified"),
        (7, 2, "created", "qualified"),
        (8, 3, "identified", "pending"), (8, 3, "matched", "pending"), (8, 3, "qualified", "qualified"),
        (8, 1, "deactivated (synthesized into norm 3)", "deactivated"),
        (8, 2, "deactivated (synthesized into norm 3)", "deactivated"),
    ]
    assert log[0]["source"] == "Bo: please take calls outside" and log[7]["source"] == ""
    assert log[2]["type"] == "descriptive" and log[3]["activated"] is False and log[3]["valid"] is False
    assert log[1]["canonical"] == "no phones indoors" and log[0]["canonical"] == "" and log[0]["opposes"] == ""
    assert log[8]["members"] == "1,2" and log[0]["members"] == ""
    # the abstract norm covers what its members cover
    assert abstract.covers == {"sweep after sawing"} and db.covered() == frozenset({"sweep after sawing"})
    assert kept.failed_check is None and heard.failed_check == "type"
    assert db.drain_changes() == []


def test_the_database_as_rows_for_the_inspector():
    db = NormDatabase("Ada")
    norm = db.add("No sawing after 17:00.", 88, "injunctive", qualified=True, origin="created", step=1)
    db.set_match(norm, "no sawing late", None, 1)
    db.set_judged(norm, None, "no sawing late")  # the judge reads it otherwise: shown beside the agent's own
    assert db.as_rows() == [{"id": 0, "content": "No sawing after 17:00.", "utility": 88, "type": "injunctive",
                             "activated": True, "valid": True, "state": "qualified", "origin": "created",
                             "canonical": "no sawing late", "covers": ["no sawing late"], "judged": []}]
    assert db.holds("no sawing late") and not db.adopted("no sawing late") and db.adopted_norms() == frozenset()
    assert NormDatabase("empty").covered() == frozenset()
