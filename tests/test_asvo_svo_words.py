"""No metric reads back a label the code wrote: an LLM told "You have an altruistic social
personality" may write "As an altruistic person, I ..." in its action, and the separability of
action texts by SVO would then measure the echo. The SVO words are masked before embedding and
counted (report and ``asvo_separability.json``)."""

import json

import pandas as pd
import pytest

from socialsim.agents.asvo.metrics import action_separability, save_separability
from socialsim.agents.asvo.svo import SVO_TYPES, SVO_WORDS
from socialsim.metrics.separability import mask_words, separability

VERBS = ["help", "ask", "thank", "join", "quiz", "tease", "wait for", "call", "follow", "watch"]
THINGS = ["with the homework", "about the exam", "after class", "at lunch"]
TEXTS = [f"{v} Bob {t}" for v in VERBS for t in THINGS]  # 40 actions
LABELS = [SVO_TYPES[i % 4] for i in range(len(TEXTS))]  # unrelated to the texts


def article(word):
    return "an" if word[0] in "aeiou" else "a"


def echoed(labels):
    return [f"As {article(s)} {s} person, I {t}" for s, t in zip(labels, TEXTS, strict=True)]


def test_the_svo_words_and_phrases_the_prompts_use_are_masked_and_behaviour_words_kept():
    texts = ["As an altruistic person, I help Bob.", "Being prosocial, I share.", "As a Pro-social type I wait",
             "My individualistic side says: study alone", "I am competitive, so I race Amy", "an altruist helps",
             "Following my social value orientation, I help", "true to my social personality", "my SVO says go",
             "I organise a competition and compete with Amy", "I work on my individual part", "I help Bob"]
    masked, n = mask_words(texts, SVO_WORDS)
    assert n == 9
    assert masked[0] == "As person, I help Bob." and masked[4] == "I am, so I race Amy"
    assert masked[9:] == texts[9:]  # behaviour: competition, compete, individual work, help
    assert not any(SVO_WORDS.search(m) for m in masked)
    assert not any(s in m.lower() for s in SVO_TYPES for m in masked)


def test_texts_that_differ_only_by_an_echoed_svo_word_separate_as_without_it():
    leaked = separability(echoed(LABELS), LABELS)  # no mask: the echo alone separates the types
    assert leaked.silhouette > leaked.shuffled_silhouette + 0.2
    masked = separability(echoed(LABELS), LABELS, mask=SVO_WORDS)
    plain = separability([f"As person, I {t}" for t in TEXTS], LABELS, mask=SVO_WORDS)
    assert masked.silhouette == pytest.approx(plain.silhouette) and masked.ratio == pytest.approx(plain.ratio)
    assert masked.shuffled_silhouette == pytest.approx(plain.shuffled_silhouette)
    assert (masked.masked, plain.masked) == (len(TEXTS), 0)


def test_the_asvo_figures_mask_and_count_the_echoes(tmp_path):
    half = [e if i % 2 else t for i, (e, t) in enumerate(zip(echoed(LABELS), TEXTS, strict=True))]
    actions = pd.DataFrame({"action": half, "svo": LABELS})
    sep = action_separability(actions)
    assert sep.masked == len(TEXTS) // 2
    assert sep.silhouette == pytest.approx(action_separability(actions.assign(
        action=[SVO_WORDS.sub("", a).replace("  ", " ") for a in half])).silhouette)
    save_separability(sep, tmp_path)
    assert json.loads((tmp_path / "asvo_separability.json").read_text())["svo_words_masked"] == len(TEXTS) // 2


def test_a_runs_report_and_figures_say_how_many_actions_echoed_an_svo(scripted, tmp_path):
    from socialsim.agents.asvo.metrics import report_sections
    from socialsim.model.society import SocietyModel

    proposals = [{"text": f"As an altruistic person, I {t}", "stance": "Cooperation"} for t in TEXTS[:3]]
    scripted(default=json.dumps({"activities": proposals}))
    model = SocietyModel("school-meso", model="rules", rng=1, routes={"ProposeActions": "openai/scripted"})
    for _ in range(2):
        model.step()
    actions = model.datacollector.get_table_dataframe("asvo_actions")
    assert actions["action"].str.startswith("As an altruistic person").all()  # recorded as written
    n = len(actions)
    report = "\n".join(report_sections(model, tmp_path))
    assert f"SVO words masked: {n} of {n} action texts" in report
    assert json.loads((tmp_path / "asvo_separability.json").read_text())["svo_words_masked"] == n
