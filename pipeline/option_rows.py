"""The option table's rows: ``Option`` (a job-file key, a ``--flag`` and a field of a config
dataclass) and how a config dataclass's fields become rows (``rows_of``: field metadata from
``options.opt``; nested dataclasses flattened with a name prefix), one row for an option that
several engines share (``shared_row``). ``config.options()`` assembles the whole table."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .options import PARSERS


@dataclass(frozen=True)
class Option:
    """One row of the table: a job-file key, a ``--flag`` and a field of a config dataclass."""

    name: str
    section: str  # job (the algorithm) | run | model | engine
    path: tuple[str, ...]  # field path inside the section's dataclass
    parse: Callable[[Any], Any]
    default: Any
    help: str
    choices: tuple[str, ...] | None
    within: str | None = None  # the interval a value must lie in
    engines: tuple[str, ...] = ()  # engine options: the engines that take it
    variants: tuple[tuple[str, Option], ...] = ()  # engines whose same-named options differ
    defaults: tuple[tuple[str, Any], ...] = ()  # each engine's default, when they differ
    own: tuple[tuple[str, Option], ...] = ()  # each engine's own row, when parsed alike

    def for_engine(self, engine: str) -> Option:
        """The row as ``engine`` defines it (its own parser, choices, range and help)."""
        return dict(self.variants or self.own).get(engine, self)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def field_default(f: dataclasses.Field) -> Any:
    """A dataclass field's default: its value, its factory's, else None."""
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def rows_of(cls: type, section: str, prefix: tuple[str, ...] = ()) -> list[Option]:
    """Table rows of a config dataclass, nested dataclasses flattened with a name prefix."""
    rows = []
    for f in dataclasses.fields(cls):
        default = field_default(f)
        if dataclasses.is_dataclass(default):
            rows += rows_of(type(default), section, (*prefix, f.name))
            continue
        meta = f.metadata
        choices = meta.get("choices")
        choices = tuple(choices()) if callable(choices) else choices
        parse = meta.get("parse") or PARSERS.get(type(default))
        if parse is None:
            raise TypeError(f"{cls.__name__}.{f.name}: give the field a parser (opt(parse=...))")
        rows.append(Option("_".join((*prefix, f.name)), section, (*prefix, f.name), parse,
                           default, meta.get("help", ""), choices, meta.get("range")))
    return rows


def shared_row(seen: Option, row: Option, engine: str) -> Option:
    """One row for an option that ``engine`` shares with ``seen.engines``: the first engine's
    row if they parse it alike (with each engine's help and range when those differ: vb's K is
    a truncation, memo's a start), else a row whose value each engine parses its own way (at
    resolve)."""
    engines = (*seen.engines, engine)
    alike = ("parse", "choices")  # ranges are checked per engine (check_ranges)
    if not seen.variants and all(getattr(seen, k) == getattr(row, k) for k in alike):
        defaults = (*(seen.defaults or ((seen.engines[0], seen.default),)), (engine, row.default))
        differ = len({repr(d) for _, d in defaults}) > 1
        own = (*(seen.own or ((seen.engines[0], seen),)), (engine, row))
        texts = {(r.help, r.within) for _, r in own}
        described = {} if len(texts) == 1 else {"help": _per_engine(own), "within": None}
        return dataclasses.replace(seen, engines=engines, defaults=defaults if differ else (),
                                   own=own, **described)
    variants = (*(seen.variants or ((seen.engines[0], seen),)), (engine, row))
    return dataclasses.replace(
        seen, parse=lambda value: value, default=None, choices=None,
        within=None, help="; ".join(f"{e}: {r.help}{_shown(r)}" for e, r in variants),
        engines=engines, variants=variants)


def _per_engine(own: tuple[tuple[str, Option], ...]) -> str:
    """The help of an option whose engines describe it differently: each text once, after the
    engines that give it, with their range."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for engine, r in own:
        groups.setdefault((r.help, r.within), []).append(engine)
    return "; ".join(f"{', '.join(e)}: {text}" + (f" (in {within})" if within else "")
                     for (text, within), e in groups.items())


def _shown(row: Option) -> str:
    return "" if row.default is None else f" (default {row.default})"
