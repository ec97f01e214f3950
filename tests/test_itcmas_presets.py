"""The five presets of irollan-valley (``--preset base|ltrha|memory|driver|full``) are the paper's
five architectures: each sets the ablation of its name, and so the modules the documentation's
table says that variant has (docs/itcmas.md, "Ablations"); a swapped preset or table fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from socialsim.model.runner import RunConfig
from socialsim.model.society import SocietyModel

DOCS = Path(__file__).parents[1] / "docs" / "itcmas.md"
COLUMNS = ("ltrha", "memory", "driver")  # the table's columns after the value, in order


def documented_variants() -> dict[str, dict[str, bool]]:
    """The Ablations table: variant -> which of LTRHA, blending + compressed memory, driver it has."""
    section = DOCS.read_text().split("## Ablations", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := re.match(r"\|\s*`(\w+)`[^|]*\|(.*)\|\s*$", line):
            cells = [cell.strip() for cell in match[2].split("|")]
            assert len(cells) == len(COLUMNS), line
            rows[match[1]] = {col: cell.startswith("yes") for col, cell in zip(COLUMNS, cells, strict=True)}
    return rows


VARIANTS = documented_variants()


def test_the_documentation_lists_the_papers_five_variants():
    assert list(VARIANTS) == ["base", "ltrha", "memory", "driver", "full"]
    assert VARIANTS["base"] == dict.fromkeys(COLUMNS, False) and VARIANTS["full"] == dict.fromkeys(COLUMNS, True)


@pytest.mark.parametrize("preset", list(VARIANTS))
def test_each_preset_runs_the_documented_variant_for_75_steps(preset):
    config = RunConfig(scenario="irollan-valley", model="rules", preset=preset).resolved()
    assert config.steps == 75
    model = SocietyModel("irollan-valley", model="rules", rng=1, **config.arch_params)
    settings = model.society.config
    assert settings.ablation == preset
    documented = VARIANTS[preset]
    modules = settings.modules
    assert {col: modules[col] for col in COLUMNS} == documented
    # the rest follows its module: blending the memory's, habitus, filter and eq. 18 LTRHA's
    assert modules["blending"] == documented["memory"]
    assert modules["habitus"] == modules["filter"] == modules["success_rate"] == documented["ltrha"]
    assert all(a.emotion.use_driver_module == documented["driver"] for a in model.agents)
