"""The rule baseline's SVO arithmetic: effects -> channels -> felt change, and the rule judge's label."""

import pytest

from socialsim.agents.asvo.svo import (
    EQUITY_TOLERANCE,
    STANCES,
    channels_from_effects,
    equity,
    felt,
    label_from_effects,
    rule_update,
    weights_for,
)


def test_channels_from_effects_clip_rank_and_score_equity():
    assert channels_from_effects(0.5, 0.0) == {"own": 0.5, "others": 0.0, "rank": 0.5, "equity": 0.0}
    assert channels_from_effects(1.0, -1.0)["rank"] == 1.0 and channels_from_effects(-1.0, 1.0)["rank"] == -1.0
    assert equity(0.25, 0.25) == EQUITY_TOLERANCE and equity(1.0, -1.0) == EQUITY_TOLERANCE - 2.0


@pytest.mark.parametrize(("others", "label"), [(1.0, "Cooperation"), (0.75, "Cooperation"), (0.5, "QuasiCooperation"),
                                               (0.1, "QuasiCooperation"), (0.05, "Neutral"), (0.0, "Neutral"),
                                               (-0.05, "Neutral"), (-0.1, "QuasiCompetition"),
                                               (-0.5, "QuasiCompetition"), (-0.75, "Competition")])
def test_the_rule_judge_labels_by_the_effect_on_others_only(others, label):
    assert label_from_effects(others) == label


def test_each_svo_feels_the_channel_it_weights():
    helps = channels_from_effects(-0.5, 1.0)
    beats = channels_from_effects(0.0, -1.0)
    assert felt("joyfulness", helps, "altruistic") > 0 > felt("joyfulness", beats, "altruistic")
    assert felt("joyfulness", beats, "competitive") > 0 > felt("joyfulness", helps, "competitive")
    assert felt("sense of control", channels_from_effects(0.5, 0.0), "individualistic") > 0
    assert felt("joyfulness", channels_from_effects(0.25, 0.25), "prosocial") > \
        felt("joyfulness", channels_from_effects(1.0, -1.0), "prosocial")
    assert weights_for(None) != weights_for("altruistic")


def test_rule_update_moves_by_the_gain_and_stays_on_the_scale():
    up = channels_from_effects(0.0, 1.0)
    assert rule_update("joyfulness", 5, up, "altruistic") == 8  # 5 + 3 x 1.0 x 1.0
    assert rule_update("joyfulness", 10, up, "altruistic") == 10
    assert rule_update("joyfulness", 0, channels_from_effects(0.0, -1.0), "altruistic") == 0
    assert rule_update("sense of superiority", 5, up, "altruistic") == 5  # untouched: kept as is
    assert len(STANCES) == 5
