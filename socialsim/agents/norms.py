"""The personal norm database: quintuples ⟨content, utility, type, activated, valid⟩ per agent.

A shared component (CRSEC uses it; any architecture may). A norm is *qualified* when it is both
activated and valid. Normative information identified from a chat or a thought enters
deactivated and invalid and becomes qualified only after the immediate evaluation; members of a
synthesized abstract norm are deactivated but stay valid. Every change is kept as a row so the
agent can write it to the run's ``norm_changes`` table in a sync phase.

Two readings of which measured ("tracked") norm a held norm is about are kept apart: the agent's
own (``canonical``, ``opposes``, ``covers``: what its rules act on - ``holds``, ``covered``) and
the measuring judge's (``judged_*``: what adoption is measured by - ``adopted``,
``adopted_norms``). The judge is a passive instrument: nothing an agent does reads its labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NormType = Literal["descriptive", "injunctive"]
NORM_TYPES: tuple[str, ...] = ("descriptive", "injunctive")


@dataclass
class Norm:
    """One personal norm and where it came from."""

    id: int
    content: str
    utility: int  # 1-100: how important the agent finds it
    type: NormType
    activated: bool
    valid: bool
    origin: str  # created | conversation | thought | synthesis
    step: int
    source: str = ""  # the conversation or thought it was identified from (q)
    canonical: str | None = None  # the tracked canonical norm it expresses (decided by MatchNorm)
    opposes: str | None = None  # the tracked canonical norm it contradicts, if any
    theme: str | None = None  # a theme the synthesis can group it under
    members: tuple[int, ...] = ()  # for an abstract norm: the ids it synthesizes
    covers: frozenset[str] = frozenset()  # tracked canonical norms it expresses or (abstract) covers
    # the measuring judge's reading of the same (MatchNorm on the judge's route): read by the metrics only
    judged_canonical: str | None = None
    judged_opposes: str | None = None
    judged_covers: frozenset[str] = frozenset()
    failed_check: str | None = None  # the first sanity check it failed

    @property
    def qualified(self) -> bool:
        return self.activated and self.valid

    @property
    def state(self) -> str:
        if self.qualified:
            return "qualified"
        if self.valid:
            return "deactivated"
        return "rejected" if self.failed_check else "pending"


def norm_key(text: str) -> str:
    """Content normalised for an exact-duplicate comparison."""
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


@dataclass
class NormDatabase:
    """An agent's personal norms, with a change log."""

    owner: str
    norms: list[Norm] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)

    # --- reading ----------------------------------------------------------------------------
    def qualified(self) -> list[Norm]:
        return [n for n in self.norms if n.qualified]

    def get(self, norm_id: int) -> Norm:
        return self.norms[norm_id]

    def utility_sum(self) -> int:
        return sum(n.utility for n in self.qualified())

    def holds(self, canonical: str) -> bool:
        """Whether a qualified norm expresses (or, if abstract, covers) a tracked norm."""
        return any(canonical in n.covers for n in self.qualified())

    def covered(self) -> frozenset[str]:
        return frozenset().union(*(n.covers for n in self.qualified())) if self.norms else frozenset()

    def adopted(self, canonical: str) -> bool:
        """Measurement: whether, by the judge's labels, a qualified norm expresses (or, if abstract,
        covers) a tracked norm - adoption. The agent's own rules read ``holds``, never this."""
        return any(canonical in n.judged_covers for n in self.qualified())

    def adopted_norms(self) -> frozenset[str]:
        """Measurement: the tracked norms adopted, by the judge's labels (see ``adopted``)."""
        return frozenset().union(*(n.judged_covers for n in self.qualified())) if self.norms else frozenset()

    def holds_content(self, content: str) -> bool:
        key = norm_key(content)
        return any(norm_key(n.content) == key for n in self.norms if n.valid)

    # --- writing ----------------------------------------------------------------------------
    def add(self, content: str, utility: int, type: NormType, *, qualified: bool, origin: str, step: int,
            source: str = "", theme: str | None = None, members: tuple[int, ...] = ()) -> Norm:
        norm = Norm(len(self.norms), content.strip(), max(1, min(100, int(utility))), type, qualified, qualified,
                    origin, step, source=source, theme=theme, members=members)
        self.norms.append(norm)
        self._log(norm, step, "created" if qualified else "identified")
        return norm

    def set_match(self, norm: Norm, canonical: str | None, opposes: str | None, step: int) -> None:
        norm.canonical, norm.opposes = canonical, opposes
        member_cover = frozenset().union(*(self.norms[m].covers for m in norm.members)) if norm.members else frozenset()
        norm.covers = member_cover | ({canonical} if canonical else frozenset())
        self._log(norm, step, "matched")

    def set_judged(self, norm: Norm, canonical: str | None, opposes: str | None) -> None:
        """The judge's label for a norm (measurement only; logged in the run's ``norm_matches``)."""
        norm.judged_canonical, norm.judged_opposes = canonical, opposes
        members = frozenset().union(*(self.norms[m].judged_covers for m in norm.members)) if norm.members \
            else frozenset()
        norm.judged_covers = members | ({canonical} if canonical else frozenset())

    def qualify(self, norm: Norm, step: int) -> None:
        norm.activated = norm.valid = True
        norm.failed_check = None
        self._log(norm, step, "qualified")

    def reject(self, norm: Norm, check: str, step: int) -> None:
        norm.activated = norm.valid = False
        norm.failed_check = check
        self._log(norm, step, f"failed {check}")

    def retype(self, norm: Norm, type: NormType, step: int) -> None:
        norm.type = type
        self._log(norm, step, "type corrected")

    def deactivate(self, ids: tuple[int, ...], step: int, by: int) -> None:
        """Members of a synthesized abstract norm: deactivated, still valid."""
        for i in ids:
            norm = self.norms[i]
            norm.activated, norm.valid = False, True
            self._log(norm, step, f"deactivated (synthesized into norm {by})")

    def drain_changes(self) -> list[dict]:
        rows, self.changes = self.changes, []
        return rows

    def _log(self, norm: Norm, step: int, event: str) -> None:
        self.changes.append({
            "step": step, "agent": self.owner, "norm_id": norm.id, "content": norm.content, "event": event,
            "state": norm.state, "activated": norm.activated, "valid": norm.valid, "utility": norm.utility,
            "type": norm.type, "origin": norm.origin, "canonical": norm.canonical or "",
            "opposes": norm.opposes or "", "members": ",".join(map(str, norm.members)), "source": norm.source,
        })

    def as_rows(self) -> list[dict]:
        """The database now, one dict per norm (for the dashboard's inspector and reports)."""
        return [{"id": n.id, "content": n.content, "utility": n.utility, "type": n.type, "activated": n.activated,
                 "valid": n.valid, "state": n.state, "origin": n.origin, "canonical": n.canonical,
                 "covers": sorted(n.covers), "judged": sorted(n.judged_covers)} for n in self.norms]
