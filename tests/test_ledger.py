"""The ledger on its own (``llm/ledger.py``): reservations against the budget, the failure count
and its log line, running totals, the fixed record order, and the per-operation usage table a
report prints. (The gateway and budget tests drive it through real calls.)"""

import logging

import pytest

from socialsim.llm.ledger import Budget, BudgetExhausted, Ledger, LedgerRow


def row(step=1, agent=0, op="Choose", status="ok", engine="llm", path=(0,), **kw):
    values = dict(module="plan", model="openai/m", calls=1, live_calls=1, prompt_tokens=10, completion_tokens=2,
                  latency_s=0.5, cost_usd=0.001)
    values.update(kw)
    return LedgerRow(step, agent, op, values.pop("module"), values.pop("model"), engine, status, path=path, **values)


def test_calls_in_flight_hold_their_place_in_the_budget_until_they_end():
    ledger = Ledger(Budget(max_calls=2))
    ledger.check_budget()
    ledger.check_budget()
    with pytest.raises(BudgetExhausted, match=r"^max_calls=2 reached \(0 live LLM calls answered, 2 in flight\)$"):
        ledger.check_budget()  # two in flight: a third would overshoot
    ledger.add_live(0.0)  # one answered: still two counted (one live, one in flight)
    with pytest.raises(BudgetExhausted, match=r"\(1 live LLM calls answered, 1 in flight\)$"):
        ledger.check_budget()
    ledger.release()  # the other failed: its place is free again
    ledger.check_budget()
    assert ledger.live_calls == 1


def test_each_call_that_ends_frees_exactly_its_own_place():
    ledger = Ledger(Budget(max_calls=3))
    for _ in range(3):
        ledger.check_budget()
    ledger.release()
    ledger.check_budget()  # one place free
    with pytest.raises(BudgetExhausted):
        ledger.check_budget()  # and only one


def test_a_call_ending_without_a_reserved_cost_frees_no_reserved_cost():
    ledger = Ledger(Budget(max_cost=1.0))
    ledger.check_budget(0.4)
    ledger.check_budget(0.4)
    ledger.release()  # a call reserved at no cost (an unpriced model) ended
    ledger.add_live(0.0)
    with pytest.raises(BudgetExhausted):
        ledger.check_budget(0.4)  # the 0.8 reserved above still stands


def test_a_call_of_unknown_cost_reserves_no_cost():
    ledger = Ledger(Budget(max_cost=0.5))
    ledger.check_budget()
    ledger.check_budget()


def test_releasing_more_than_was_reserved_never_frees_places_that_were_not_taken():
    ledger = Ledger(Budget(max_calls=1))
    ledger.release()
    ledger.add_live(0.0)  # an answer without a reservation (the tape's bookkeeping) frees nothing either
    with pytest.raises(BudgetExhausted):
        ledger.check_budget()  # one live call: the budget of one is spent


def test_a_cost_budget_counts_what_was_spent_and_what_calls_in_flight_may_cost():
    ledger = Ledger(Budget(max_cost=1.0))
    ledger.check_budget(0.4)
    ledger.check_budget(0.4)
    with pytest.raises(BudgetExhausted, match=r"\$0\.8000 reserved by calls in flight"):
        ledger.check_budget(0.4)
    ledger.add_live(0.1, reserved_usd=0.4)  # cheaper than feared
    ledger.check_budget(0.4)  # 0.1 spent + 0.4 + 0.4 in flight
    ledger.release(0.4)
    ledger.release(0.4)
    ledger.check_budget(0.9)  # only the 0.1 spent is left
    assert ledger.live_cost == pytest.approx(0.1)


@pytest.mark.parametrize("limit", [{"max_cost": float("nan")}, {"max_cost": float("inf")}, {"max_cost": -1.0},
                                   {"max_cost": "a dollar"}, {"max_calls": -1}, {"max_calls": 2.5}])
def test_a_budget_that_compares_with_nothing_is_refused_however_it_is_given(limit):
    """A NaN max_cost spent without a limit, and a text failed mid-step; SocietyModel's keywords
    reach the budget without RunConfig's check."""
    from pydantic import ValidationError

    from socialsim.model.society import SocietyModel

    with pytest.raises(ValidationError, match=next(iter(limit))):
        SocietyModel("hobbs-cafe", arch="generic", model="rules", rng=1, **limit)


def test_a_budget_of_nothing_is_a_budget_and_no_budget_no_limit():
    """0 (free calls only: the rules model, a replay) is a budget users give; none limits nothing."""
    free = Ledger(Budget(max_cost=0))
    free.check_budget(0.0)
    with pytest.raises(BudgetExhausted, match=r"max_cost=\$0 reached"):
        free.check_budget(0.01)
    with pytest.raises(BudgetExhausted, match="max_calls=0 reached"):
        Ledger(Budget(max_calls=0)).check_budget()
    unlimited = Ledger()
    for _ in range(3):
        unlimited.check_budget(1e6)


def test_a_failure_is_counted_and_logged_with_its_step_agent_and_operation(caplog, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop1234")
    ledger = Ledger()
    with caplog.at_level(logging.WARNING, logger="socialsim.llm"):
        ledger.failure("Choose", "bad key sk-test-abcdefghijklmnop1234", 3, 7)
    ledger.failure("Choose", "again", 3, 7)
    assert ledger.failures == {"Choose": 2} and ledger.totals()["llm_failures"] == 2
    record = caplog.records[0]
    assert record.getMessage() == "step 7 agent 3 Choose: bad key [REDACTED]"
    assert record.operation == "Choose"  # what the console's brief failure lines group by


def test_rows_are_counted_by_engine_and_status():
    ledger = Ledger()
    ledger.record(row(status="ok"))
    ledger.record(row(status="fallback", op="Talk"))
    ledger.record(row(status="fallback", op="Talk"))
    ledger.record(row(status="repaired", op="Choose"))
    for _ in range(2):
        ledger.record(row(status="rules", engine="rules", calls=0, live_calls=0, prompt_tokens=0, completion_tokens=0))
    totals = ledger.totals()
    assert (totals["llm_calls"], totals["rule_decisions"], totals["fallbacks"]) == (4, 2, 2)
    assert (totals["prompt_tokens"], totals["completion_tokens"]) == (40, 8)
    assert ledger.with_status("fallback") == {"Talk": 2} and ledger.with_status("repaired") == {"Choose": 1}


def test_seconds_and_dollars_are_floats_and_counts_integers_even_with_no_model_asked():
    """A rules run's frames held ``cost_usd`` and ``llm_latency_s`` as int64, a model's run as float64."""
    ledger = Ledger()
    ledger.record(row(status="rules", engine="rules", calls=0, live_calls=0, prompt_tokens=0, completion_tokens=0))
    totals = ledger.totals()
    assert {name: type(value) for name, value in totals.items()} == {
        **dict.fromkeys(totals, int), "llm_latency_s": float, "cost_usd": float}


def test_totals_are_rounded_where_sums_of_floats_drift():
    ledger = Ledger()
    for _ in range(3):
        ledger.record(row(latency_s=0.1000001, cost_usd=0.1000000004))
    totals = ledger.totals()
    assert totals["llm_latency_s"] == 0.3 and totals["cost_usd"] == 0.3  # 6 and 8 decimals


def test_rows_are_ordered_by_step_then_model_level_first_then_agent_and_numbered_within_each():
    ledger = Ledger()
    ledger.record(row(step=2, agent=1, path=(1,), op="late"))
    ledger.record(row(step=2, agent=1, path=(0,), op="early"))
    ledger.record(row(step=2, agent=None, path=(0,), op="judge"))
    ledger.record(row(step=2, agent=0, path=(3,), op="a0"))
    ledger.record(row(step=1, agent=1, path=(5, 1), op="first"))
    ledger.record(row(step=1, agent=1, path=(5, 0), op="zeroth"))
    order = [(r.step, r.agent, r.op, r.call) for r in ledger.ordered_rows()]
    assert order == [(1, 1, "zeroth", 0), (1, 1, "first", 1), (2, None, "judge", 0), (2, 0, "a0", 0),
                     (2, 1, "early", 0), (2, 1, "late", 1)]


class WatchedRow(LedgerRow):
    """A row that counts how often its place (``path``) is read: the work of ordering it."""

    reads = 0

    def __getattribute__(self, name):
        if name == "path":
            type(self).reads += 1
        return super().__getattribute__(name)


def test_ordering_after_a_step_reads_only_that_steps_rows():
    """Every row of the run was sorted again after each step (~6% of a 200-step rules run's CPU)."""
    ledger = Ledger()
    for step in range(1, 51):
        for agent in range(10):
            ledger.record(WatchedRow(step, agent, "Choose", "plan", "rules", "rules", "rules", 0, 0, 0, 0, 0.0, 0.0,
                                     path=(0,)))
        ledger.frame(start=(step - 1) * 10)
    WatchedRow.reads = 0
    for agent in range(10):
        ledger.record(WatchedRow(51, agent, "Choose", "plan", "rules", "rules", "rules", 0, 0, 0, 0, 0.0, 0.0,
                                 path=(0,)))
    assert len(ledger.frame(start=500)) == 10 and [r.call for r in ledger.ordered_rows()[-10:]] == [0] * 10
    assert WatchedRow.reads <= 2 * 10 + 2  # the new rows', and the last ordered row's; not the 500 before


def test_rows_ordered_step_by_step_are_ordered_and_numbered_as_all_at_once():
    """Rows recorded out of order, a step's rows across several calls, and rows of earlier steps
    after later ones (a resumed run's, a judge's) all end where one stable sort of every row puts them."""
    import random

    rng = random.Random(7)
    places = [(step, agent, (p,)) for step in range(1, 6) for agent in (None, 0, 1, 2) for p in range(3)]
    rows = [row(step=s, agent=a, path=p, op=f"op{i}") for i, (s, a, p) in enumerate(places * 2)]
    for _ in range(30):
        rng.shuffle(rows)
        ledger = Ledger()
        for r in rows:
            ledger.record(r)
            if rng.random() < 0.2:
                ledger.ordered_rows()
        seen = [(x.step, x.agent, x.op, x.call) for x in ledger.ordered_rows()]
        at_once = Ledger()
        for r in rows:
            at_once.record(LedgerRow(**{**vars(r), "call": -1}))
        assert seen == [(x.step, x.agent, x.op, x.call) for x in at_once.ordered_rows()]
        assert ledger.frame().equals(at_once.frame())


def test_the_frame_has_every_field_but_the_path_even_when_empty():
    columns = ["step", "agent", "op", "module", "model", "engine", "status", "calls", "live_calls", "prompt_tokens",
               "completion_tokens", "latency_s", "cost_usd", "error", "truncated", "call"]
    assert list(Ledger().frame().columns) == columns
    ledger = Ledger()
    ledger.record(row())
    assert list(ledger.frame().columns) == columns and ledger.frame().loc[0, "op"] == "Choose"


def test_the_agent_column_is_a_nullable_integer_with_or_without_a_model_level_row():
    """An ITCMA-S run's end-of-run judge rows have no agent: pandas made that run's agents floats
    (0.0, 1.0), while ASVO's and CRSEC's were integers, and a concatenation of both was float."""
    ledger = Ledger()
    ledger.record(row(agent=1))
    assert ledger.frame()["agent"].dtype == "Int64"
    ledger.record(row(step=2, agent=None, op="judge"))
    agents = ledger.frame()["agent"]
    assert agents.dtype == "Int64" and agents[0] == 1 and agents.isna().tolist() == [False, True]
    assert Ledger().frame()["agent"].dtype == "Int64"


def test_the_usage_table_sums_each_operation_and_counts_its_fallbacks_and_repairs():
    ledger = Ledger()
    ledger.record(row(op="Choose", status="ok", latency_s=0.25))
    ledger.record(row(op="Choose", status="repaired", calls=2, latency_s=0.5, truncated=1))
    ledger.record(row(op="Talk", status="fallback", module="talk", cost_usd=0.5))
    table = ledger.by_operation().set_index("op")
    assert table.loc["Choose", ["decisions", "calls", "fallbacks", "repaired", "truncated"]].tolist() == [2, 3, 0, 1, 1]
    assert table.loc["Choose", "latency_s"] == 0.75 and table.loc["Talk", "cost_usd"] == 0.5
    assert table.loc["Talk", ["module", "fallbacks", "repaired"]].tolist() == ["talk", 1, 0]
    assert table["fallbacks"].dtype.kind == table["repaired"].dtype.kind == "i"  # counts, printed as counts
    only_talk = ledger.frame().query("op == 'Talk'")
    assert list(ledger.by_operation(only_talk)["op"]) == ["Talk"]  # the caller's frame, not the whole ledger
    assert Ledger().by_operation().empty


def test_the_ordered_rows_handed_out_are_the_callers_to_change():
    """``ordered_rows`` keeps its order between calls (only new rows are merged in): the list it hands
    out is a copy, or a caller's filtering or sorting of it would be the run's llm_calls table's too."""
    ledger = Ledger()
    for agent in (2, 0, 1):
        ledger.record(row(agent=agent))
    mine = ledger.ordered_rows()
    mine.sort(key=lambda r: -r.agent)
    del mine[0]
    assert [r.agent for r in ledger.ordered_rows()] == [0, 1, 2] and list(ledger.frame()["agent"]) == [0, 1, 2]
