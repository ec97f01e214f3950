"""The ASVO paper's protocol for ``socialsim reproduce asvo``: the eight scenarios of the three
contexts (school, workplace, family at the micro/meso/macro levels the paper uses), each in both
arms (ASVO, and the ablation w/o ASVO), on the paper preset (Table 1).

Measured per run: silhouette and separation ratio of the action texts by SVO type (offline
embedding unless ``embedding_model`` is set; t-SNE; appendix D.3), the silhouette with the SVO
labels shuffled (chance level), and the cooperation rate per SVO type from the first judge's
five-way labels (appendix D.2). Table 2 of the paper (from the digest) stands beside the
silhouette and separation rows of each context; the paper gives no per-scenario split, so each
scenario of a context is set beside that context's figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from socialsim.agents.asvo.metrics import SEPARABILITY_FILE, action_separability, cooperation_table, setting_of
from socialsim.agents.asvo.svo import SVO_TYPES
from socialsim.metrics.separability import PAPER_TABLE_2
from socialsim.model.reproduce import Finding, Protocol, ProtocolRun, compare

SCENARIOS = ("school-micro", "school-meso", "school-macro", "workplace-micro", "workplace-meso",
             "workplace-macro", "family-micro", "family-meso")
ARMS = {"ASVO": True, "w/o ASVO": False}


def label(scenario: str, arm: str) -> str:
    return f"{scenario} / {arm}"


def measure(run_dir: Path) -> dict[str, float]:
    """Separability, its chance level and the cooperation rate per SVO type; NaN = not measurable."""
    actions = pd.read_parquet(Path(run_dir) / "tables" / "asvo_actions.parquet")
    written = Path(run_dir) / SEPARABILITY_FILE  # the run's own figures, with the run's embedding
    if written.is_file():
        figures = json.loads(written.read_text())
        out = {k: float(figures[k]) for k in ("silhouette", "separation_ratio", "silhouette_shuffled")}
        out["svo_words_masked"] = float(figures.get("svo_words_masked", float("nan")))
    else:
        sep = action_separability(actions)
        out = {"silhouette": sep.silhouette, "separation_ratio": sep.ratio,
               "silhouette_shuffled": sep.shuffled_silhouette, "svo_words_masked": float(sep.masked)}
    rates = cooperation_table(actions, "svo").set_index("svo")["cooperation_rate"] if not actions.empty else {}
    for svo in SVO_TYPES:
        out[f"cooperation_rate_{svo}"] = float(rates[svo]) if svo in rates else float("nan")
    return out


def paper_table() -> pd.DataFrame:
    rows = []
    for scenario in SCENARIOS:
        for arm, use_svo in ARMS.items():
            silhouette, ratio = PAPER_TABLE_2[(setting_of(scenario), use_svo)]
            rows += [{"label": label(scenario, arm), "metric": "silhouette", "paper": silhouette},
                     {"label": label(scenario, arm), "metric": "separation_ratio", "paper": ratio}]
    return pd.DataFrame(rows)


def findings() -> list[Finding]:
    """Table 2's findings per scenario: actions separate by SVO type better with ASVO than without
    (silhouette and separation ratio), and with ASVO better than the same actions with shuffled
    SVO labels (the paper's positive silhouettes; chance is the honest zero)."""
    out = []
    for s in SCENARIOS:
        with_svo, without = label(s, "ASVO"), label(s, "w/o ASVO")
        out += [compare(f"{s}: actions separate by SVO type more with ASVO than without (silhouette)",
                        (with_svo, "silhouette"), ">", (without, "silhouette")),
                compare(f"{s}: ... and by the separation ratio",
                        (with_svo, "separation_ratio"), ">", (without, "separation_ratio")),
                compare(f"{s}: with ASVO, above the shuffled-label chance level (silhouette)",
                        (with_svo, "silhouette"), ">", (with_svo, "silhouette_shuffled"))]
    return out


def protocol(judge: str | None) -> Protocol:
    params = {"judges": [judge]} if judge else {}
    runs = [ProtocolRun(label(s, arm), s, preset="paper", arch_params={**params, "use_svo": use_svo})
            for s in SCENARIOS for arm, use_svo in ARMS.items()]
    return Protocol(
        arch="asvo", runs=runs, measure=measure, paper=paper_table(),
        description=("ASVO (AAMAS 2026) Table 2: silhouette and separation ratio of actions by SVO type, "
                     "eight scenarios x {ASVO, w/o ASVO}, paper preset; plus the shuffled-label silhouette "
                     "(chance) and the cooperation rate per SVO type. Judge: "
                     f"{judge or 'rules (the baseline: labels read from simulated effects)'}."),
        findings=findings())
