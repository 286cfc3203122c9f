"""Sphinx directives that render bnpmix's own tables at build time, so the docs never retype them.

``.. bnpmix-options::`` renders rows of the option table (``bnpmix.pipeline.config.options()``,
the table ``bnpmix fit --help`` and job files are built from); ``.. bnpmix-benchmark::`` renders
figures from a ``benchmarks/results/*.json`` file with the command that produced it (taken from
the script's docstring) and the date the file was committed; ``.. bnpmix-collapsed::`` folds its
content into a ``<details>`` element.

The estimator's API page is made to read as scikit-learn's: its signature shows the named
parameters and ``**options`` (not the option table's keyword parameters, all ``None``), a
parameter's default is the signature's, and the options are tables grouped as the engines
declare them (``estimator_groups``), inserted after the Parameters.
"""

from __future__ import annotations

import ast
import html
import inspect
import json
import re
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]


def table(header: list[str], rows: list[list[str]], widths: list[int] | None = None) -> nodes.table:
    """A docutils table of plain-text cells (no markup is interpreted in them)."""
    widths = widths or [1] * len(header)
    group = nodes.tgroup(cols=len(header))
    group += [nodes.colspec(colwidth=w) for w in widths]
    head, body = nodes.thead(), nodes.tbody()
    for cells, part in (([header], head), (rows, body)):
        for cells_row in cells:
            row = nodes.row()
            for text in cells_row:
                row += nodes.entry("", nodes.paragraph(text=str(text)))
            part += row
    group += [head, body]
    out = nodes.table(classes=["bnpmix-table"])
    out += group
    return out


# -- the option table ------------------------------------------------------------------------

def shown(value: Any) -> str:
    """An option's default as a job file would write it."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple | list):
        return ",".join(map(str, value)) or "''"
    if isinstance(value, dict):
        return json.dumps(value) if value else "{}"
    return str(value)


def allowed(row: Any) -> str:
    """The values an option takes: its choices, else its interval ("" when any)."""
    if row.choices:
        return " | ".join(row.choices)
    return row.within or ""


def option_entry(row: Any, one: Any) -> nodes.definition_list_item:
    """One option as a definition: flag and job key; default, values, engines; its help."""
    term = nodes.term()
    term += [nodes.literal(text=row.flag), nodes.Text("  ·  job key "),
             nodes.literal(text=row.name)]
    facts = nodes.paragraph()
    facts += [nodes.Text("default "), nodes.literal(text=shown(one.default))]
    if allowed(one):
        facts += [nodes.Text(" · values "), nodes.literal(text=allowed(one))]
    facts += nodes.Text(" · engines: " + (", ".join(row.engines) or "all"))
    body = nodes.definition()
    body += [facts, nodes.paragraph(text=one.help)]
    item = nodes.definition_list_item()
    item += [term, body]
    return item


class OptionsDirective(SphinxDirective):
    """Rows of the option table: ``:sections: run model`` and/or ``:engines: memo vb``."""

    option_spec: ClassVar = {"sections": directives.unchanged, "engines": directives.unchanged,
                   "names": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from bnpmix.pipeline.config import options

        sections = set(self.options.get("sections", "").split())
        engines = self.options.get("engines", "").split()
        names = set(self.options.get("names", "").split())
        out = nodes.definition_list(classes=["bnpmix-options"])
        for row in options():
            taken = [e for e in row.engines if e in engines]
            if row.name in names or row.section in sections or taken:
                one = row.for_engine(taken[0]) if len(engines) == 1 and taken else row
                out += option_entry(row, one)
        if not out.children:
            raise self.error(f"no option matches {self.options}")
        return [out]


# -- the estimator's page -------------------------------------------------------------------

# options whose unset default each engine fills in from a class attribute of its own
ENGINE_ATTRIBUTE_DEFAULTS = {"restarts": "default_restarts", "wave": "default_wave"}
OPTION_HEADER = ["option", "default", "values", "what it sets"]
OPTION_WIDTHS = [14, 10, 14, 50]


def engine_default(row: Any, engine: str) -> Any:
    """``row``'s default for ``engine``: its own row's (a variant), its entry among the
    differing defaults, or the engine class's attribute for the options it fills in itself."""
    from bnpmix.pipeline.runtime.engine import engine_class

    if row.name in ENGINE_ATTRIBUTE_DEFAULTS:
        return getattr(engine_class(engine), ENGINE_ATTRIBUTE_DEFAULTS[row.name])
    return dict(row.defaults).get(engine, row.for_engine(engine).default)


def option_row(row: Any, engine: str | None = None) -> list[str]:
    """One table row: the keyword, its default (``engine``'s), its values and its help."""
    one = row if engine is None else row.for_engine(engine)
    default = row.default if engine is None else engine_default(row, engine)
    return [row.name, shown(default), allowed(one), one.help]


def estimator_groups() -> list[tuple[str, str, list[list[str]]]]:
    """The estimator's ``**options`` as (name, title, rows): first those every engine takes, then
    each registered engine's own, the default engine first (an option several engines share
    in each, with that engine's default), so that every default shown is the one a fit
    gets."""
    from bnpmix.pipeline.config import options
    from bnpmix.pipeline.engines import DEFAULT_ENGINE
    from bnpmix.pipeline.estimator import OPTIONS
    from bnpmix.pipeline.runtime.engine import engine_class, engine_names

    rows = [r for r in options() if r.name in OPTIONS]
    common = [option_row(r) for r in rows
              if not r.engines and r.name not in ENGINE_ATTRIBUTE_DEFAULTS]
    groups = [("every engine", "Options every engine takes", common)]
    for name in sorted(engine_names(), key=lambda name: name != DEFAULT_ENGINE):
        own = [option_row(r, name) for r in rows
               if name in r.engines or r.name in ENGINE_ATTRIBUTE_DEFAULTS]
        groups.append((name, f'algorithm="{name}": {engine_class(name).summary}', own))
    return groups


class EstimatorOptionsDirective(SphinxDirective):
    """The estimator's grouped option tables (``estimator_groups``), one per group."""

    def run(self) -> list[nodes.Node]:
        groups = estimator_groups()
        ids = [f"options-{i}" for i in range(len(groups))]
        jump = nodes.paragraph(text="Options of ")
        for i, (name, _, _) in enumerate(groups):
            jump += [nodes.Text(" · " if i else ""), nodes.reference(text=name, refid=ids[i])]
        out: list[nodes.Node] = [
            nodes.rubric(text="Options (**options), by engine"),
            nodes.paragraph(text="Keyword parameters under their job-file names, as job files "
                            "and bnpmix fit --help name them; each default is the one a fit "
                            "with that engine gets ((unset): its help says what is used), "
                            "generated from the engines' configurations."), jump]
        for key, (_, title, rows) in zip(ids, groups, strict=True):
            out += [nodes.rubric(text=title, ids=[key], classes=["bnpmix-option-group"]),
                    table(OPTION_HEADER, rows, OPTION_WIDTHS)]
        return out


def is_estimator(obj: Any) -> bool:
    """Whether ``obj`` is bnpmix's estimator class (imported only once autodoc asks)."""
    from bnpmix.pipeline.estimator import BayesianMixture

    return obj is BayesianMixture


def short_signature(app: Any, what: str, name: str, obj: Any, options: Any, signature: Any,
                    return_annotation: Any) -> tuple[str, str] | None:
    """The estimator's signature as its user writes it: the named parameters and
    ``**options``, without the option table's keyword-only parameters (its real signature
    lists them for scikit-learn's get_params, each ``None``: the engine's default)."""
    if what != "class" or not is_estimator(obj):
        return None
    params = [p.replace(annotation=inspect.Parameter.empty)
              for p in inspect.signature(obj).parameters.values()
              if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    options_param = inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD)
    return str(inspect.Signature([*params, options_param])), ""


PARAM_LINE = re.compile(r"^(\w+) : ([^,]+)$")


def signature_defaults(app: Any, what: str, name: str, obj: Any, options: Any,
                       lines: list[str]) -> None:
    """Before numpydoc reads the estimator's docstring: a parameter line without a default
    gets the signature's, so that no default is retyped in the docstring."""
    if what != "class" or not is_estimator(obj):
        return
    params = inspect.signature(obj).parameters
    for i, line in enumerate(lines):
        match = PARAM_LINE.match(line)
        if match and match.group(1) in params:
            default = params[match.group(1)].default
            if default is not inspect.Parameter.empty:
                lines[i] = f"{line}, default {default!r}"


def option_tables(app: Any, what: str, name: str, obj: Any, options: Any,
                  lines: list[str]) -> None:
    """After numpydoc: the estimator's option tables inserted before its Attributes."""
    if what != "class" or not is_estimator(obj):
        return
    at = next((i for i, line in enumerate(lines) if line.startswith(":Attributes:")),
              len(lines))
    lines[at:at] = [".. bnpmix-estimator-options::", ""]


# -- collapsed content ------------------------------------------------------------------------

class details(nodes.General, nodes.Element):
    """A ``<details>`` element: its title shown, its content folded until opened."""


def visit_details(self: Any, node: details) -> None:
    self.body.append(f'<details class="bnpmix-details"><summary>{node["summary"]}</summary>')


def depart_details(self: Any, node: details) -> None:
    self.body.append("</details>")


class CollapsedDirective(SphinxDirective):
    """Its content folded under the one-line title given as its argument."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self) -> list[nodes.Node]:
        node = details(summary=html.escape(self.arguments[0]))
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


# -- Dask settings --------------------------------------------------------------------------

def settings_rows(text: str) -> list[list[str]]:
    """(key, default, the comment above it) for each key of the shipped bnpmix.yaml."""
    rows, comment = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not line.startswith("  "):
            comment = []
        elif stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
        elif ":" in stripped:
            key, value = (p.strip() for p in stripped.split(":", 1))
            rows.append([f"bnpmix.{key}", value, " ".join(comment)])
            comment = []
    return rows


class SettingsDirective(SphinxDirective):
    """bnpmix's keys in Dask's configuration, from the package's bnpmix.yaml."""

    def run(self) -> list[nodes.Node]:
        import importlib.resources

        text = (importlib.resources.files("bnpmix.pipeline") / "bnpmix.yaml").read_text()
        return [table(["key", "default", "what it sets"], settings_rows(text), [16, 8, 60])]


# -- benchmark results -------------------------------------------------------------------------

BENCHMARKS = ROOT / "benchmarks"


def benchmark_script(name: str) -> Path:
    """The script ``benchmarks/<kind>/<name>.py`` (the kinds are folders: reproductions,
    acceptance, speed, stress, history), so a page names a script without its kind."""
    found = sorted(BENCHMARKS.glob(f"*/{name}.py"))
    return found[0] if len(found) == 1 else BENCHMARKS / f"{name}.py"


def command(script: Path) -> str:
    """The usage lines of a benchmark script's docstring: each line that starts
    ``python benchmarks/<kind>/<script>`` (with the line before it when that ends in a
    backslash, as an environment or ``nice`` prefix does) and its indented continuation lines;
    the plain invocation when there are none."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    lines = doc.splitlines()
    blocks = []
    invocation = f"python {script.relative_to(ROOT).as_posix()}"
    for i, line in enumerate(lines):
        if not line.strip().startswith(invocation):
            continue
        first = i - 1 if i and lines[i - 1].rstrip().endswith("\\") else i
        indent = len(lines[first]) - len(lines[first].lstrip())
        block = [lines[first].strip(), *("    " + line.strip() for _ in range(i - first))]
        for more in lines[i + 1:]:
            if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                break
            block.append("    " + more.strip())
        blocks.append("\n".join(block))
    return "\n".join(blocks) or invocation


def committed(path: Path) -> str:
    """The date the file was last committed (git), or why there is none."""
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%cs", "--", str(path)], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or "not committed"


def at(data: Any, path: str) -> Any:
    """``data`` at a dotted path (``tdpm.gvi``; list indices as numbers)."""
    for key in filter(None, path.split(".")):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def maybe(row: dict[str, Any], path: str) -> Any:
    """``row`` at ``path``, or None where the row has no such entry (a blank cell)."""
    try:
        return at(row, path)
    except (KeyError, IndexError):
        return None


def cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value[:12]) + (" ..." if len(value) > 12 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k}: {cell(v)}" for k, v in value.items())
    return str(value)


def rows_of(data: Any, path: str) -> list[dict[str, Any]]:
    """The rows at ``path``: a list of objects, or an object of objects (its keys as ``key``).
    ``a.*`` or ``a.*.b`` walks every entry of the object ``a`` (``b`` of each), keyed by the
    entry's name: a list gives a row per element, an object one row."""
    parts = path.split(".")
    if "*" in parts:
        star = parts.index("*")
        head, tail = ".".join(parts[:star]), ".".join(parts[star + 1:])
        out: list[dict[str, Any]] = []
        for key, value in at(data, head).items():
            found = at(value, tail)
            out += ([{"key": key, **r} for r in found] if isinstance(found, list)
                    else [{"key": key, **found}])
        return out
    found = at(data, path)
    if isinstance(found, dict):
        return [{"key": k, **(v if isinstance(v, dict) else {"value": v})}
                for k, v in found.items()]
    return list(found)


class BenchmarkDirective(SphinxDirective):
    """Figures of ``benchmarks/results/<json>``: the command that wrote them (``:command:``,
    where the script's usage lines are not it), the date, and a table of ``:columns:`` over
    the rows at ``:rows:`` and/or the values at ``:values:``."""

    required_arguments = 1  # the script's name, without .py
    option_spec: ClassVar = {"json": directives.unchanged, "rows": directives.unchanged,
                   "columns": directives.unchanged, "values": directives.unchanged,
                   "caption": directives.unchanged, "no-command": directives.flag,
                   "command": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        script = benchmark_script(self.arguments[0])
        result = BENCHMARKS / "results" / self.options.get("json", f"{self.arguments[0]}.json")
        for path in (script, result):
            if not path.exists():
                raise self.error(f"{path.relative_to(ROOT)} does not exist")
            self.env.note_dependency(str(path))
        data = json.loads(result.read_text())
        out: list[nodes.Node] = []
        if "no-command" not in self.options:  # the exact command, or the script's usage
            text = self.options.get("command") or command(script)
            out.append(nodes.literal_block(text=text, language="bash"))
        caption = self.options.get("caption", "")
        source = f"benchmarks/results/{result.name}, committed {committed(result)}"
        out.append(nodes.paragraph(text=f"{caption}{' — ' if caption else ''}from {source}:"))
        try:
            if "rows" in self.options:
                columns = [c.strip() for c in self.options["columns"].split(",")]
                rows = rows_of(data, self.options["rows"])
                out.append(table(columns, [[cell(maybe(r, c)) for c in columns] for r in rows]))
            if "values" in self.options:
                keys = [c.strip() for c in self.options["values"].split(",")]
                out.append(table(["figure", "value"], [[k, cell(at(data, k))] for k in keys],
                                 [1, 2]))
        except (KeyError, IndexError, TypeError) as exc:
            raise self.error(f"{result.name}: no {exc} in the JSON") from None
        return out


def history_table(records: list[dict[str, Any]], group: str) -> nodes.table:
    """The history's records as a table, oldest first: a row per record (commit, the commit's
    date, machine), a column per figure of ``group`` (``time`` or ``track``) with its unit."""
    names = list(dict.fromkeys(n for r in records for n in r[group]))
    units = {n: r["units"][n] for r in records for n in r[group]}
    header = ["commit", "date", "machine",
              *(f"{n.split('_', 1)[1]} ({units[n]})" for n in names)]
    rows = [[r["commit"][:10] + (" +" if r["dirty"] else ""), r["date"][:16].replace("T", " "),
             r["machine"]["name"], *(cell(r[group].get(n)) for n in names)] for r in records]
    return table(header, rows)


def history_series(records: list[dict[str, Any]], group: str) -> dict[str, list[float]]:
    """The lines of the history's plot, record by record (NaN where a record lacks the figure):
    every ``time`` figure, or of the ``track`` figures the adjusted Rand indices (the others'
    scales differ too much to share an axis; the table has them)."""
    names = [n for n in dict.fromkeys(n for r in records for n in r[group])
             if group == "time" or n.endswith("_ari")]
    return {n: [float(r[group].get(n, float("nan"))) for r in records] for n in names}


def history_figure(records: list[dict[str, Any]], group: str, path: Path) -> Path:
    """The history's trend as a PNG at ``path``: history_series across the records, oldest left,
    each labelled by its commit; seconds on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
    x = range(len(records))
    for name, values in history_series(records, group).items():
        ax.plot(x, values, marker="o", ms=3, label=name.split("_", 1)[1].removesuffix("_ari"))
    if group == "time":
        ax.set_yscale("log")
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(FormatStrFormatter("%g"))  # 0.5, 2, 4: not 4 x 10^0
    ax.set_ylabel("seconds per fit" if group == "time" else "adjusted Rand index")
    ax.set_xticks(list(x), [r["commit"][:7] for r in records], rotation=45, fontsize=7)
    ax.legend(fontsize=7, ncols=2, loc="best", frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class HistoryDirective(SphinxDirective):
    """The trend of benchmarks/results/history.json (benchmarks/history/run.py appends a record
    per commit and machine): the last ``:last:`` records (10), as a plot (see history_figure)
    and a table of the ``:group:`` figures (``time``, the default, or ``track``)."""

    option_spec: ClassVar = {"last": directives.positive_int, "group": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        path = BENCHMARKS / "results" / "history.json"
        if not path.exists():
            raise self.error(f"{path.relative_to(ROOT)} does not exist")
        self.env.note_dependency(str(path))
        records = json.loads(path.read_text())["records"][-self.options.get("last", 10):]
        group = self.options.get("group", "time")
        if group not in ("time", "track"):
            raise self.error(f":group: is time or track, not {group}")
        figure = history_figure(records, group,
                                Path(self.env.srcdir) / "generated" / f"history-{group}.png")
        image = nodes.image(uri="/" + figure.relative_to(self.env.srcdir).as_posix(),
                            alt=f"the history's {group} figures, commit by commit")
        return [image, history_table(records, group)]


class ScriptsDirective(SphinxDirective):
    """Every runnable script in benchmarks/'s kind folders, kind by kind: its command and its
    docstring's first sentence."""

    def run(self) -> list[nodes.Node]:
        items = nodes.bullet_list()
        for script in sorted(BENCHMARKS.glob("*/*.py")):
            text = script.read_text()
            if script.name.startswith("_") or "__main__" not in text:
                continue  # helpers and data generators
            self.env.note_dependency(str(script))
            doc = (ast.get_docstring(ast.parse(text)) or "").split("\n\n")[0]
            entry = nodes.list_item()
            entry += nodes.literal_block(text=command(script), language="bash")
            entry += nodes.paragraph(text=" ".join(doc.split()))
            items += entry
        return [items]


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-signature", short_signature, priority=400)
    app.connect("autodoc-process-docstring", signature_defaults, priority=90)
    app.connect("autodoc-process-docstring", option_tables, priority=600)  # after numpydoc
    app.add_node(details, html=(visit_details, depart_details))
    app.add_directive("bnpmix-collapsed", CollapsedDirective)
    app.add_directive("bnpmix-estimator-options", EstimatorOptionsDirective)
    app.add_directive("bnpmix-options", OptionsDirective)
    app.add_directive("bnpmix-benchmark", BenchmarkDirective)
    app.add_directive("bnpmix-dask-settings", SettingsDirective)
    app.add_directive("bnpmix-benchmark-scripts", ScriptsDirective)
    app.add_directive("bnpmix-benchmark-history", HistoryDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
