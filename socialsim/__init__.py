"""socialsim: LLM-driven agent-based social simulation on Mesa.

litellm is told to use its bundled price table before anything can import it, so importing
socialsim never reaches the network.
"""

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

__version__ = "0.1.0"


def __getattr__(name: str):
    """``socialsim.export`` and ``socialsim.sweep``, imported on first use so that importing
    socialsim stays light (no pandas, Mesa or litellm until they are needed)."""
    if name == "export":
        from socialsim.batch.exports import export

        return export
    if name == "sweep":
        from socialsim.batch.sweeps import sweep

        return sweep
    raise AttributeError(f"module 'socialsim' has no attribute {name!r}")
