"""``socialsim.batch.batch_run``: Mesa's own ``batch_run`` over SocietyModel, its DataFrame returned.

``SocietyModel`` takes every run option as a keyword (``scenario``, ``arch``, ``model``, ``routes``,
``max_cost``, ``max_calls``, ``price`` and any architecture parameter or switch), so ``mesa.batch_run``
sweeps it directly (a ``price`` is a pair, given in a list, ``"price": [(0.15, 0.6)]``: Mesa sweeps a bare
pair's two numbers); this wrapper only fixes the model class, turns Mesa's list of dicts into a DataFrame and
documents the columns. Every row carries the run's usage as model reporters: ``llm_calls``,
``rule_decisions``, ``prompt_tokens``, ``completion_tokens``, ``llm_latency_s``, ``cost_usd``,
``llm_failures`` and ``fallbacks`` (running totals at that step). For resumable sweeps with their own
run directories and a shared tape, use ``socialsim.batch.sweep``.
"""

from __future__ import annotations

import operator
from numbers import Integral
from typing import Any

import pandas as pd


def batch_run(parameters: dict[str, Any], *, rng: list[int] | int = 1, max_steps: int = 1,
              data_collection_period: int = -1, number_processes: int | None = 1,
              display_progress: bool = False) -> pd.DataFrame:
    """``mesa.batch_run(SocietyModel, parameters, ...)`` as a DataFrame (one row per run, step and
    agent, as Mesa gives it). Lists in ``parameters`` are swept; ``rng`` gives the seeds."""
    from mesa.batchrunner import batch_run as mesa_batch_run

    from socialsim.model.society import SocietyModel

    try:  # numpy's integers (np.arange(5)) as Python's: Mesa seeds a random.Random, which takes no other
        seeds = [operator.index(rng)] if isinstance(rng, Integral) else [operator.index(seed) for seed in rng]
    except TypeError:
        seeds = []
    if not seeds:
        raise TypeError(f"rng expects a seed or a list of seeds, whole numbers, got {rng!r}")
    rows = mesa_batch_run(SocietyModel, parameters=parameters, rng=seeds, max_steps=max_steps,
                          data_collection_period=data_collection_period, number_processes=number_processes,
                          display_progress=display_progress)
    return pd.DataFrame(rows)
