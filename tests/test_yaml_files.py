"""The project's YAML reader: a key given twice in one mapping is refused, naming it and both lines;
a merge key's values may still be overridden, as YAML means them to be."""

import pytest
import yaml

from socialsim.yaml_files import DuplicateKeyError, load_yaml


def test_a_key_given_twice_is_named_with_both_lines_at_any_depth():
    with pytest.raises(DuplicateKeyError) as caught:
        load_yaml("agents:\n  - name: Ann\n    traits: {a: 1}\n    traits: {b: 2}\n")
    assert caught.value.problem == "duplicate key traits (first at line 3): a key is given once"
    assert caught.value.problem_mark.line + 1 == 4
    # what a scenario's or sweep file's refusal shows: where the mapping starts, then the key and its line
    assert str(caught.value).startswith('while reading a mapping\n  in "<unicode string>", line 2, column 5\n'
                                        "duplicate key traits")
    assert load_yaml("a: {b: 1}\nc: {b: 2}\n") == {"a": {"b": 1}, "c": {"b": 2}}  # the same key in two mappings


def test_a_merge_keys_values_may_be_overridden_and_an_odd_key_is_not_quoted():
    assert load_yaml("d: &d {x: 1, y: 2}\nuse: {<<: *d, x: 3}\n") == {"d": {"x": 1, "y": 2}, "use": {"x": 3, "y": 2}}
    # a mapping with a merge of its own, merged into another and then used again: its value was rewritten
    # by the outer merge to hold the keys it merged in, which are not written twice
    nested = "a: &a {x: 1}\nc: {<<: &b {<<: *a, x: 2}}\nd: *b\n"
    assert load_yaml(nested) == yaml.safe_load(nested)  # as PyYAML reads it (its own merge order), no error
    with pytest.raises(DuplicateKeyError, match="duplicate key x "):  # written twice inside the merged one
        load_yaml("a: &a {x: 1}\nc: {<<: &b {<<: *a, x: 2, x: 3}}\n")
    with pytest.raises(DuplicateKeyError, match="duplicate key y "):  # in a mapping only ever merged
        load_yaml("c: {<<: {y: 2, y: 3}}\n")
    with pytest.raises(DuplicateKeyError, match="duplicate key a key "):  # a key that is not a plain name
        load_yaml("'sk-abc/def:ghi': 1\n'sk-abc/def:ghi': 2\n")
    with pytest.raises(DuplicateKeyError, match="duplicate key 3 "):
        load_yaml("3: a\n3: b\n")


def test_a_mapping_holding_itself_is_read_as_pyyaml_reads_it():
    """An alias to the mapping it is in: its values are built after the mapping itself exists."""
    loaded = load_yaml("a: &x {b: *x, c: 1}\n")
    assert loaded["a"]["b"] is loaded["a"] and loaded["a"]["c"] == 1


def test_a_file_not_saved_as_utf8_is_named_with_the_line_of_its_first_such_byte(tmp_path):
    from socialsim.yaml_files import NotUtf8Error, read_utf8

    path = tmp_path / "s.yaml"
    path.write_bytes(b"\nname: x\ncaf\xe9: 1\nsome: \xe8\n")  # a first line that is empty counts too
    with pytest.raises(NotUtf8Error) as raised:
        read_utf8(path)
    assert str(raised.value) == f"{path}: not UTF-8 text (line 3 has the byte 0xe9); save it as UTF-8"
