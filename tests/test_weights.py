"""The embedded model's weights: the package's Q4_1 file stored once as Q8_0 in the cache, the
package's file when asked for or when the cache cannot be written, a clear message for a bad choice."""

import logging
from pathlib import Path

import pytest

from socialsim.llm.engines import ModelUnavailable, weights
from socialsim.llm.engines.embedded import check_embedded, gguf_path

pytestmark = pytest.mark.embedded


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WEIGHTS", raising=False)
    return tmp_path / "socialsim" / "models"


def _file_type(path):
    """The weights' type as the file's header states it (general.file_type), read by llama.cpp."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    with suppress_stdout_stderr(disable=False):
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    try:
        buffer = llama_cpp.ctypes.create_string_buffer(32)
        assert llama_cpp.llama_model_meta_val_str(model, b"general.file_type", buffer, 32) > 0
        return {llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1: "Q4_1", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0: "Q8_0"}.get(
            int(buffer.value), buffer.value.decode())
    finally:
        llama_cpp.llama_model_free(model)


def test_the_package_s_q4_1_weights_are_stored_once_as_q8_0_in_the_cache(cache):
    source = gguf_path()
    path = weights.weights_for(source)
    assert path.parent == cache and path.is_file() and path != source
    assert _file_type(source) == "Q4_1" and _file_type(path) == "Q8_0"
    made = path.stat().st_mtime_ns
    assert weights.weights_for(source) == path and path.stat().st_mtime_ns == made  # made once
    assert [p.name for p in cache.iterdir()] == [path.name]  # no partial file left behind


def test_a_copy_made_from_another_version_of_the_package_is_removed(cache):
    source = gguf_path()
    cache.mkdir(parents=True)
    stale = cache / f"{source.name.removesuffix('.gguf')}-as-Q8_0.1234-abcdef.llama-cpp-0.0.1.gguf"
    stale.write_bytes(b"old")
    path = weights.weights_for(source)
    assert not stale.exists() and path.is_file()


def test_q4_1_loads_the_package_s_file_as_it_is(cache, monkeypatch):
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WEIGHTS", "Q4_1")
    assert weights.weights_for(gguf_path()) == gguf_path()
    assert not cache.exists()


def test_an_unwritable_cache_falls_back_to_the_package_s_file_with_a_logged_reason(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.delenv("SOCIALSIM_EMBEDDED_WEIGHTS", raising=False)
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        assert weights.weights_for(gguf_path()) == gguf_path()
    assert "cannot store its weights as Q8_0" in caplog.text


def test_an_unknown_layout_is_a_clear_message_before_any_call(monkeypatch):
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WEIGHTS", "q2_k")
    with pytest.raises(ModelUnavailable, match="SOCIALSIM_EMBEDDED_WEIGHTS='q2_k': choose one of q8_0, q4_1"):
        check_embedded("local/smollm2")


def test_a_damaged_copy_is_removed_and_the_package_s_file_loaded(cache, caplog):
    from llama_cpp import Llama

    source = gguf_path()
    copy = weights.weights_for(source)
    # where the copy cannot be made (a full disk: llama.cpp's quantizer fails), weights_for gives the
    # package's own file, which cutting short would damage for every later test and run
    assert copy != source, "no Q8_0 copy could be made (see the log above); not cutting the package's own file"
    copy.write_bytes(copy.read_bytes()[:4096])  # cut short after it was made
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        model = weights.load(lambda path: Llama(model_path=path, vocab_only=True, verbose=False), source)
    try:
        assert model.model_path == str(source)
    finally:
        model.close()
    assert not copy.exists() and "cannot load" in caplog.text
    assert weights.weights_for(source) == copy and _file_type(copy) == "Q8_0"  # made again next time


# With llama.cpp's quantizer stood in for: fast, and the package's own file never at risk.

@pytest.fixture
def fake_quantizer(cache, monkeypatch):
    """llama.cpp's quantizer writing ``b"q8"`` and returning ``result[0]`` (0 for success)."""
    import llama_cpp

    result = [0]

    def quantize(source, target, params):
        Path(target.decode()).write_bytes(b"q8")
        return result[0]

    monkeypatch.setattr(llama_cpp, "llama_model_quantize", quantize)
    return result


def _source(folder, data=b"q4" * 1000):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Model.Q4_1.gguf"
    path.write_bytes(data)
    return path


def test_the_layout_is_read_without_case_or_surrounding_spaces(monkeypatch):
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WEIGHTS", " Q4_1 ")
    assert weights.layout() == "q4_1"


def test_a_failing_quantizer_falls_back_to_the_package_s_file_and_leaves_no_partial_file(tmp_path, cache, fake_quantizer,
                                                                                          caplog):
    fake_quantizer[0] = 1
    source = _source(tmp_path / "package")
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        assert weights.weights_for(source) == source
    assert "llama.cpp's quantizer returned 1" in caplog.text
    assert list(cache.iterdir()) == []


def test_each_package_file_and_llama_cpp_version_gets_its_own_copy_and_other_models_stay(tmp_path, cache,
                                                                                         fake_quantizer, monkeypatch):
    import llama_cpp

    cache.mkdir(parents=True)
    (cache / "Another-Model.gguf").write_bytes(b"theirs")
    mb = b"q" * (1 << 20)
    first = weights.weights_for(_source(tmp_path / "a", mb + b"a"))
    assert first.read_bytes() == b"q8" and (cache / "Another-Model.gguf").exists()
    copies = {first,
              weights.weights_for(_source(tmp_path / "b", b"q" * 2000 + b"b" + mb[2001:] + b"a")),  # changed in its head
              weights.weights_for(_source(tmp_path / "c", mb + b"ac"))}  # the same head, longer
    monkeypatch.setattr(llama_cpp, "__version__", "99.0.0")
    copies.add(weights.weights_for(_source(tmp_path / "c", mb + b"ac")))
    assert len(copies) == 4 and all("-as-Q8_0." in p.name for p in copies)


def test_a_package_file_llama_cpp_cannot_load_is_an_error_and_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("SOCIALSIM_EMBEDDED_WEIGHTS", "q4_1")
    source = _source(tmp_path / "package")

    def make(path):
        raise ValueError(f"Failed to load model from file: {path}")

    with pytest.raises(ValueError, match="Failed to load model"):
        weights.load(make, source)
    assert source.exists()
