"""The memory stream: retrieval by recency, importance and relevance (each weight matters), by
embeddings when given, never the current step's records; CRSEC's thoughts, conversations, plans
and norm identification get retrieved memories, the rules baseline is persuaded by the memories
that recall the matter at hand, and the switch turns it all off."""

import asyncio
from collections import defaultdict

import pytest

from socialsim.agents.crsec import operations as ops
from socialsim.agents.memory import MemoryStream, RetrievalWeights, lexical_similarity
from socialsim.model.society import SocietyModel


def stream(**weights):
    s = MemoryStream(RetrievalWeights(**weights))
    s.add(1, "observation", "Isabella is smoking in the dining room", 8)  # old, important, relevant
    s.add(5, "observation", "Tom is drinking a coffee at the counter", 2)  # recent, unimportant
    s.add(3, "thought", "the weather is lovely today", 5)
    return s


def texts(found):
    return [m.text.split()[0] for m in found]


def top(s, query="someone smoking in the dining room", now=6, **kw):
    return texts(asyncio.run(s.retrieve(query, now, 3, **kw)))


def test_each_weight_alone_orders_by_its_own_criterion():
    assert top(stream(recency=1, importance=0, relevance=0, decay=0.5)) == ["Tom", "the", "Isabella"]
    assert top(stream(recency=0, importance=1, relevance=0)) == ["Isabella", "the", "Tom"]
    assert top(stream(recency=0, importance=0, relevance=1), query="a coffee at the counter")[0] == "Tom"
    assert top(stream(recency=0, importance=0, relevance=1))[0] == "Isabella"  # the oldest, by its words alone


def test_the_score_puts_importance_on_the_zero_to_one_scale_of_recency():
    s = MemoryStream(RetrievalWeights(recency=1, importance=1, relevance=0, decay=0.5))
    s.add(9, "observation", "newer", 1)  # 0.5 + 0.10 = 0.60
    s.add(8, "observation", "older", 3.6)  # 0.25 + 0.36 = 0.61 (with importance / 11 it would lose)
    assert texts(asyncio.run(s.retrieve("q", 10, 2))) == ["older", "newer"]


def test_equal_scores_go_to_the_latest_record_and_k_bounds_the_answer():
    s = MemoryStream()
    for text in ("first note", "second note", "third note"):
        s.add(1, "thought", text, 5)
    assert texts(asyncio.run(s.retrieve("note", 2, 3))) == ["third", "second", "first"]
    assert texts(asyncio.run(s.retrieve("note", 2, 1))) == ["third"]
    assert asyncio.run(s.retrieve("note", 2, 0)) == [] and asyncio.run(s.retrieve("note", 1, 3)) == []


def test_embedding_relevance_works_without_a_cache_and_rejects_a_short_answer():
    s = stream(recency=0, importance=0, relevance=1)

    async def embed(batch):
        return [[1.0, 0.0] if "smoking" in t else [0.0, 1.0] for t in batch]

    assert texts(asyncio.run(s.retrieve("smoking", 6, 1, embed=embed))) == ["Isabella"]

    async def short(batch):
        return [[1.0, 0.0]]

    with pytest.raises(ValueError):
        asyncio.run(s.retrieve("smoking", 6, 1, embed=short))


def test_switching_a_weight_off_changes_the_ranking():
    both = stream(recency=1, importance=1, relevance=0, decay=0.5)
    no_importance = stream(recency=1, importance=0, relevance=0, decay=0.5)
    assert top(both)[0] == "Isabella" and top(no_importance)[0] == "Tom"


def test_the_current_steps_records_are_not_retrieved():
    s = stream()
    s.add(6, "thought", "someone smoking in the dining room again", 10)
    assert "someone" not in top(s, now=6) and top(s, now=7)[0] == "someone"


def test_relevance_by_embeddings_uses_the_vectors_and_caches_them():
    calls = []
    space = {"fire": [1.0, 0.0], "Isabella is smoking in the dining room": [0.9, 0.1],
             "Tom is drinking a coffee at the counter": [0.0, 1.0], "the weather is lovely today": [0.1, 0.9]}

    async def embed(batch):
        calls.append(list(batch))
        return [space[t] for t in batch]

    cache = {}
    s = stream(recency=0, importance=0, relevance=1)
    assert top(s, query="fire", embed=embed, vectors=cache)[0] == "Isabella"  # no shared word: vectors decide
    assert lexical_similarity("fire", "Isabella is smoking in the dining room") == 0
    top(s, query="fire", embed=embed, vectors=cache)
    assert len(calls) == 1 and sorted(calls[0]) == sorted(space)  # one batched call, then the cache


def run_seeing_memories(monkeypatch, steps, **params):
    """A makerspace run under rules that records the memories each prompt context carried."""
    seen = defaultdict(list)
    for cls in (ops.GenerateThought, ops.ConverseTurn, ops.GenerateNormativePlans, ops.IdentifyNormativeInformation,
                ops.DecideToTalk):
        def rule(self, ctx, rng, original=cls.rule):
            seen[self.name].append(ctx)
            return original(self, ctx, rng)
        monkeypatch.setattr(cls, "rule", rule)
    model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1, **params)
    for _ in range(steps):
        model.step()
    return model, seen


@pytest.mark.parametrize("enabled", [True, False])
def test_thoughts_conversations_and_plans_get_retrieved_memories(monkeypatch, enabled):
    model, seen = run_seeing_memories(monkeypatch, 56, enable_memory=enabled)  # day 2 starts at step 55
    op_names = ("GenerateThought", "ConverseTurn", "GenerateNormativePlans", "DecideToTalk")
    assert all(seen[name] for name in op_names)  # each operation ran
    with_memories = {name: [c for c in seen[name] if c.memories] for name in op_names}
    sizes = model.datacollector.get_agent_vars_dataframe()["memories"]
    if not enabled:
        assert not any(with_memories.values()) and sizes.max() == 0
        return
    assert all(with_memories.values()) and sizes.max() > 20
    for name, op in (("GenerateThought", ops.GENERATE_THOUGHT), ("ConverseTurn", ops.CONVERSE_TURN),
                     ("GenerateNormativePlans", ops.GENERATE_NORMATIVE_PLANS), ("DecideToTalk", ops.DECIDE_TO_TALK)):
        ctx = with_memories[name][-1]
        text = op.messages(ctx)[-1]["content"]  # the memories may follow the answer format
        assert "RELEVANT MEMORIES" in text and ctx.memories[0] in text
    assert len(with_memories["GenerateThought"][-1].memories) <= model.society.settings.memory_k


def test_crsec_relevance_by_an_embedding_model_goes_through_the_gateway_in_a_fixed_order(monkeypatch):
    import hashlib
    from types import SimpleNamespace

    from socialsim.llm.gateway import Gateway

    async def fake(self, model, batch):
        await asyncio.sleep(0.001 * (hash(batch[0]) % 5))  # finishing order varies
        vectors = [[b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in batch]
        return SimpleNamespace(data=[{"embedding": v} for v in vectors], usage=SimpleNamespace(prompt_tokens=len(batch)))

    monkeypatch.setattr(Gateway, "_aembedding", fake)

    def ledger():
        model = SocietyModel("makerspace", arch="crsec", model="rules", rng=1,
                             memory_embedding_model="openai/text-embedding-3-small")
        for _ in range(6):
            model.step()
        return model.llm.ledger.frame()

    first, second = ledger(), ledger()
    embeds = first[first["op"] == "EmbedMemories"]
    assert len(embeds) > 0 and embeds["agent"].notna().all() and (embeds["status"] == "ok").all()
    # two agents may ask for the very same texts at once: which of them the tape answers depends on
    # timing, so live_calls (and latency) are the only columns allowed to differ, as in a replay
    varying = ["latency_s", "live_calls"]
    assert first.drop(columns=varying).equals(second.drop(columns=varying))


def test_the_similarities_are_cosines():
    from socialsim.agents.memory import cosine

    assert lexical_similarity("red apple pie", "the red apple") == pytest.approx(2 / 3)  # "the" is a word too
    assert lexical_similarity("", "red apple") == 0.0
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_importance_is_clamped_and_kinds_kept():
    s = MemoryStream()
    low, high = s.add(1, "thought", "a", 0), s.add(1, "plan", "b", 15)
    assert (low.importance, high.importance, low.kind, high.kind) == (1.0, 10.0, "thought", "plan")
    assert asyncio.run(s.retrieve("a", 5, 0)) == [] and asyncio.run(MemoryStream().retrieve("a", 5, 3)) == []


def test_recency_and_importance_trade_off_on_the_papers_scales():
    s = MemoryStream(RetrievalWeights(recency=1, importance=1, relevance=0, decay=0.5))
    s.add(1, "observation", "older but more important", 3)  # 0.25 + 0.3
    s.add(2, "observation", "newer", 1)  # 0.5 + 0.1
    assert texts(asyncio.run(s.retrieve("x", 3, 2))) == ["newer", "older"]


def test_ties_go_to_the_newest_memory():
    s = MemoryStream(RetrievalWeights(recency=0, importance=1, relevance=0))
    s.add(1, "observation", "first", 5)
    s.add(2, "observation", "second", 5)
    assert texts(asyncio.run(s.retrieve("x", 3, 2))) == ["second", "first"]


@pytest.mark.parametrize("enabled", [True, False])
def test_norm_identification_reads_memories_that_recall_the_matter(monkeypatch, enabled):
    _, seen = run_seeing_memories(monkeypatch, 40, enable_memory=enabled)
    contexts = seen["IdentifyNormFromThought"] + seen["IdentifyNormFromChat"]
    assert seen["IdentifyNormFromThought"] and seen["IdentifyNormFromChat"]
    recalled = [c for c in contexts if any(ops.recalls(m, c.matter, c.recall_overlap) for m in c.memories)]
    if not enabled:
        assert not any(c.memories for c in contexts)
        return
    assert recalled and len(recalled) < len(contexts)  # some earlier exposures recalled, not always
    assert all(c.matter and c.matter not in ("", c.source) for c in contexts)


def test_what_an_agent_recalls_changes_who_adopts_under_the_rules():
    def adoption(enabled):
        model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=1, enable_memory=enabled)
        for _ in range(84):
            model.step()
        frame = model.datacollector.get_model_vars_dataframe()
        return frame[[c for c in frame.columns if c.startswith("adoption[")]]

    with_memory, without = adoption(True), adoption(False)
    assert not with_memory.equals(without)  # removing memory from the rules changes the adoption series


def test_a_memory_of_an_observation_or_a_conversation_recalls_its_own_matter(monkeypatch):
    from socialsim.agents.crsec import agent as crsec_agent
    from socialsim.agents.crsec import metrics

    facts = []

    def observed(*args, original=metrics.observed_facts):
        found = original(*args)
        facts.extend(found)
        return found

    monkeypatch.setattr(crsec_agent.metrics, "observed_facts", observed)
    model = SocietyModel("hobbs-cafe", arch="crsec", model="rules", rng=2)
    for _ in range(30):
        model.step()
    kinds = {"act" if f.behaviour in model.world.behaviours else "breach of a follow-up" for f in facts}
    assert kinds == {"act", "breach of a follow-up"}  # both shapes of observation occurred
    for fact in facts:  # as the observer and the receiver of a conversation about it write them
        assert ops.recalls(f"(step 1, observation) {fact.text}", fact.doing, 1.0), fact
        assert ops.recalls(f"(step 1, conversation) Ann talked to me about {fact.act}: ...", fact.doing, 1.0)
