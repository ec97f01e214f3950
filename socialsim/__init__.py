"""socialsim: LLM-driven agent-based social simulation on Mesa.

litellm is told to use its bundled price table before anything can import it, so importing
socialsim never reaches the network.
"""

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

__version__ = "0.1.0"
