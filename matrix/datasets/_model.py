"""The ``Dataset`` record: a named, ordered tuple of cases and the helpers to pick from it.

A dataset is plain data. Loaders (``_mini``, ``_jsonl``, ``_bfcl``) build the
cases; ``Dataset`` only indexes them, so selecting, filtering and looking a
case up behave the same whichever loader made them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from promptgrid.errors import DatasetError, closest
from promptgrid.records import Case

__all__ = ["Dataset", "spread"]

T = TypeVar("T")

# How many unknown names an error lists before it says "and N more".
_MAX_LISTED = 10


def _unknown(kind: str, wanted: list[str], known: Iterable[str], dataset: str) -> None:
    """Raise one DatasetError naming every value of ``wanted`` not in ``known``."""
    known_list = list(dict.fromkeys(known))
    known_set = set(known_list)
    missing = [w for w in dict.fromkeys(wanted) if w not in known_set]
    if not missing:
        return
    shown = []
    for m in missing[:_MAX_LISTED]:
        near = difflib.get_close_matches(m, known_list, n=1, cutoff=0.5)  # same rule as closest()
        shown.append(f"{m!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    more = f" and {len(missing) - _MAX_LISTED} more" if len(missing) > _MAX_LISTED else ""
    listing = f" It has: {', '.join(known_list)}." if len(known_list) <= 20 else ""
    raise DatasetError(f"dataset {dataset!r} has no {kind} " + ", ".join(shown) + more + "." + listing)


def _as_list(values: Iterable[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


@dataclass(frozen=True)
class Dataset:
    """A named, ordered collection of cases (ids unique).

    ``name`` is the spec it was loaded from (``mini:de,ja``, ``jsonl:cases.jsonl``);
    ``description`` is a one-line summary for listings and reports.
    """

    name: str
    cases: tuple[Case, ...]
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise DatasetError(f"dataset {self.name!r} has two cases with id {case.id!r}; case ids must be unique.")
            seen.add(case.id)

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    @cached_property
    def _by_id(self) -> dict[str, Case]:
        return {case.id: case for case in self.cases}

    def case(self, case_id: str) -> Case:
        """The case with this id; a DatasetError with the closest id otherwise."""
        try:
            return self._by_id[case_id]
        except KeyError:
            raise DatasetError(
                f"dataset {self.name!r} has no case {case_id!r}.{closest(case_id, self._by_id)}"
            ) from None

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages of the queries, in order of first appearance."""
        return tuple(dict.fromkeys(case.language for case in self.cases))

    @property
    def categories(self) -> tuple[str, ...]:
        """Categories present, in order of first appearance."""
        return tuple(dict.fromkeys(case.category for case in self.cases))

    @property
    def groups(self) -> tuple[str, ...]:
        """Groups (a case and its translations share one), in order of first appearance."""
        return tuple(dict.fromkeys(case.group or case.id for case in self.cases))

    def select(
        self,
        case_ids: Iterable[str] | None = None,
        *,
        groups: Iterable[str] | None = None,
        languages: Iterable[str] | None = None,
        categories: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> Dataset:
        """A sub-dataset, in this dataset's order.

        Every filter given must match (``case_ids`` and ``groups`` are lists of
        accepted values). Unknown ids, groups, languages or categories raise a
        DatasetError listing all of them, so a typo never silently selects
        nothing. ``limit`` keeps N cases after filtering: the first N when the
        cases are in one language; when they are in several, N cases of
        distinct source questions (groups) while there are enough, the
        language rotating from question to question (see ``_spread``). The
        name stays the spec it was loaded from, so it can be loaded again.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise DatasetError(f"limit must be a whole number >= 0, got {limit!r}.")
        filters: list[tuple[str, Iterable[str] | None, tuple[str, ...], Callable[[Case], str]]] = [
            ("case", case_ids, tuple(self._by_id), lambda c: c.id),
            ("group", groups, self.groups, lambda c: c.group or c.id),
            ("language", languages, self.languages, lambda c: c.language),
            ("category", categories, self.categories, lambda c: c.category),
        ]
        cases = self.cases
        for kind, given, known, key in filters:
            if given is None:
                continue
            values = _as_list(given)
            _unknown(kind, values, known, self.name)
            wanted = set(values)
            cases = tuple(c for c in cases if key(c) in wanted)
        if limit is not None:
            cases = _spread(cases, limit) if len({c.language for c in cases}) > 1 else cases[:limit]
        return Dataset(name=self.name, cases=cases, description=self.description)


def _spread(cases: tuple[Case, ...], limit: int) -> tuple[Case, ...]:
    """``limit`` multilingual cases, as many distinct source questions as possible, in dataset order.

    Taking the first N of ``mini`` (ordered by question, then language) would
    ask one question in N languages. Instead cases are taken round by round:
    round r takes the r-th case of every group, each group's languages in an
    order rotated by the group's position, so the first round asks every
    question once and the languages take turns (``--limit 2`` on ``mini``:
    the first question in en, the second in de).
    """
    return tuple(spread(cases, limit, language=lambda c: c.language, group=lambda c: c.group or c.id))


def spread(items: Sequence[T], limit: int, *, language: Callable[[T], str], group: Callable[[T], str]) -> list[T]:
    """``limit`` of ``items`` by ``_spread``'s rule, for any record with a language and a group (a question and
    its translations; a conversation template and its languages: ``mini-mt``'s ``--limit``), in ``items``' order."""
    rank = {lang: i for i, lang in enumerate(dict.fromkeys(language(item) for item in items))}
    by_group: dict[str, list[int]] = {}
    for pos, item in enumerate(items):
        by_group.setdefault(group(item), []).append(pos)
    order = []
    for g, positions in enumerate(by_group.values()):
        positions.sort(key=lambda pos: (rank[language(items[pos])] - g) % len(rank))  # stable: ties keep order
        order += [(r, g, pos) for r, pos in enumerate(positions)]
    return [items[pos] for pos in sorted(pos for _r, _g, pos in sorted(order)[:limit])]
