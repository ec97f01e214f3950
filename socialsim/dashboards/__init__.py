"""socialsim.dashboards: the Solara dashboard (``socialsim dashboard [SCENARIO | RUN_DIR]``).

- ``panels``: the data every panel draws, as pure functions of ``Frames`` (DataCollector frames,
  tables, the LLM ledger, the map layout), built from a live model or from a run directory.
- ``figures``: those data drawn with matplotlib as PNG (no JavaScript plotting assets needed).
- ``session``: a live society stepped on a worker thread, or a finished run replayed.
- ``app``: the Solara page; ``server``: starts Solara offline on 127.0.0.1.

What an architecture gets shown, with no dashboard code of its own: model-reporter columns named
``adoption[NORM]`` / ``compliance[NORM]``, ``conflicts``, ``cooperation_rate``, ``topics`` (a dict
area -> value) ...; agent-reporter columns ``desire_*``, ``P``/``A``/``D``, ``driver``,
``resources``, ``svo``, ``qualified_norms``, ``thought``; tables ``events``, ``interactions``,
``thoughts``, ``conversations``, ``norm_changes``, ``breaches``, ``filtered_actions``; and, live,
the agent attributes ``svo``, ``state.values`` (desires), ``emotion``, ``resources``, ``memory``, ``last_thought``, ``last_action``, ``last_outcome``. Whatever is
absent is simply not drawn.
"""
