"""An adversarial model for the fake server: answers that fit the requested format yet sit at its
edges (bounds, the longest and shortest texts, the first and last option, instructions and
control characters inside strings), mixed with answers that do not fit it. The same prompt always
gets the same answer, so a run replays.

The record schema is read from the prompt itself (every record prompt shows it), so the answers
reach the architectures' code, not only the gateway's checks."""

from __future__ import annotations

import json
import random
import re
import zlib

from socialsim.llm.fake_server import INSTRUCTIONS

NASTY_TEXTS = (
    INSTRUCTIONS,
    "x" * 3,
    "line one\nline two\twith a tab",
    "Ünïcödé — 漢字 — 🙂",
    '{"nested": "json inside a string"}',
    "None",
    "",
)


def _text(rng: random.Random, schema: dict) -> str:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    low, high = schema.get("minLength", 0), schema.get("maxLength", 400)
    text = rng.choice(NASTY_TEXTS + ("é" * high,))
    text = text[:high]
    return text + "y" * max(0, low - len(text))


def _number(rng: random.Random, schema: dict, whole: bool):
    low = schema.get("minimum", schema.get("exclusiveMinimum", -1))
    high = schema.get("maximum", schema.get("exclusiveMaximum", 10**6))
    value = rng.choice([low, high, (low + high) / 2])
    return int(value) if whole else float(value)


def instance(rng: random.Random, schema: dict, defs: dict):
    """A value of ``schema`` at the edges of what it allows."""
    if "$ref" in schema:
        return instance(rng, defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance(rng, rng.choice(schema[key]), defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object" or "properties" in schema:
        return {name: instance(rng, sub, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 4)
        return [instance(rng, schema.get("items", {}), defs) for _ in range(rng.choice([low, high]))]
    if kind == "integer":
        return _number(rng, schema, whole=True)
    if kind == "number":
        return _number(rng, schema, whole=False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _text(rng, schema)


def _schema_in(text: str) -> dict | None:
    start = text.find("{", text.find("schema and nothing else"))
    if "schema and nothing else" not in text or start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except json.JSONDecodeError:
        return None


def answer(messages: list[dict]) -> str:
    """The fake server's policy: an edge answer in the requested format, or one that breaks it."""
    text = messages[-1]["content"]
    rng = random.Random(zlib.crc32(text.encode()))
    if rng.random() < 0.15:  # out of format: prose, a bare number, an empty object
        return rng.choice(["I would rather not say.", "42", "{}", "[]", INSTRUCTIONS])
    schema = _schema_in(text)
    if schema is not None:
        return json.dumps(instance(rng, schema, schema.get("$defs", {})), ensure_ascii=rng.random() < 0.5)
    options = re.findall(r"^(\d+)\. ", text, re.M)
    if options:
        return rng.choice([options[0], options[-1]])
    letters = re.findall(r"^\((\w)\) ", text, re.M)
    if letters:
        return f"({rng.choice([letters[0], letters[-1]])})"
    number = re.search(r"whole number from (-?\d+) to (-?\d+)", text)
    if number:
        return rng.choice(number.groups())
    if "one word: Yes or No" in text:
        return rng.choice(["Yes", "No"])
    line = re.search(r"at most (\d+) characters", text)
    return rng.choice(NASTY_TEXTS[:-1])[: int(line.group(1)) if line else None]
