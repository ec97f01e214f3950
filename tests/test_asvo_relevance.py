"""Every desire of the pool does something under the rules: an outcome on a channel the
documented relevance table (docs/asvo.md) says it is sensitive to moves it, both ways, and an
outcome on a channel it ignores leaves it alone. Written because zeroing the rows of spiritual
satisfaction, recognition or sense of achievement in ``svo.RELEVANCE`` passed every test."""

from pathlib import Path

import pytest

from socialsim.agents.asvo.svo import CHANNELS, RELEVANCE, UPDATE_GAIN, WEIGHTS, rule_update
from socialsim.agents.desires import DESIRES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "asvo.md"
# the SVO type that weighs each channel fully, so a one-channel outcome shows the relevance itself
FULL_WEIGHT = {"own": "individualistic", "others": "altruistic", "rank": "competitive", "equity": "prosocial"}


def documented() -> dict[str, dict[str, float]]:
    """The relevance table of docs/asvo.md: ``| desire | own | others | rank | equity |`` rows."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 1 + len(CHANNELS) and cells[0] in DESIRES:
            rows[cells[0]] = dict(zip(CHANNELS, map(float, cells[1:]), strict=True))
    return rows


def test_the_docs_give_every_desires_relevance_and_the_code_uses_it():
    assert set(documented()) == set(DESIRES)
    assert RELEVANCE == documented()
    assert all(WEIGHTS[svo][channel] == 1.0 for channel, svo in FULL_WEIGHT.items())


@pytest.mark.parametrize("desire", DESIRES)
def test_a_desire_moves_with_each_outcome_it_is_documented_to_feel_and_only_those(desire):
    relevance = documented()[desire]
    assert any(relevance.values()), f"{desire} feels nothing: it could be left out of the pool"
    for channel, r in relevance.items():
        svo = FULL_WEIGHT[channel]
        up, down = rule_update(desire, 5, {channel: 1.0}, svo), rule_update(desire, 5, {channel: -1.0}, svo)
        if r == 0:
            assert up == down == 5, (desire, channel)
        else:
            assert down < 5 < up, (desire, channel)
            assert (up, down) == (round(5 + UPDATE_GAIN * r), round(5 - UPDATE_GAIN * r)), (desire, channel)
