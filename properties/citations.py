"""Which code carries which section of the seeds: the KIP sections page (docs/kip-sections.md).

Rules (docs/design.md §13):
- The seeds' sections are ``properties/kip_sections.json``, read from the seed texts by
  ``read_seed_sections`` (``kraftcheck docs --seeds DIR`` rewrites it): the docs build needs no
  seed on disk, and a test reads the seeds again, where they are, and compares. A seed is plain
  text without markup, so a heading is a short line standing alone between blank lines.
- A citation is ``KIP-nnn §Section`` in a docstring or a comment. A bare ``§Section`` belongs to
  the last KIP named before it in the same docstring or comment block (``KIP-866 §Broker
  Migration, §Rollback to ZK``), or, with none named, to the one seed that has such a section.
  A ``§`` before a digit cites the project's own pages (``docs/design.md §13``); a KIP without a
  seed here (KIP-595) is not checked.
- A citation names the longest section whose words begin it, so prose may follow the name
  (``§Rollback to ZK: the operator deletes /controller_epoch``); failing that, the one section
  whose name begins with the cited words up to the first of ``:;,().``, "and", "or" (KIP-380
  §Rejected, for §Rejected Alternatives). Words are compared lower-cased without punctuation, a
  leading "The" optional. A citation that names no section, or more than one, is an error
  (``bad_citations``).
- Who carries a citation: the innermost function or class around it (a comment alone above a
  ``def`` or ``class`` belongs to it; one above a module-level assignment, to the name bound),
  else the module. Modules are found by walking the packages' directories
  (``pkgutil.iter_modules``) and read with ``ast`` and ``tokenize``, never imported: the page
  follows code that moves between modules.
- The properties are the registry's (``model.PROPERTIES``), by their ``source``.
"""

from __future__ import annotations

import ast
import io
import json
import pkgutil
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from properties.catalogue import GENERATED, ROOT

SECTIONS_FILE = Path(__file__).with_name("kip_sections.json")

# The seed text each KIP's sections are read from (/work/shared/seeds/README.md), in the order the project
# names the KIPs. 000_69237ff74aaab4a5.txt, a revision diff of KIP-866, is not read: the accepted text (001)
# and its wording win where they overlap.
SEED_FILES: dict[str, tuple[str, str]] = {
    "KIP-500": ("002_18ba7d8f887e50fd.txt", "Replace ZooKeeper with a Self-Managed Metadata Quorum"),
    "KIP-866": ("001_f3d6db5237b3b13b.txt", "ZooKeeper to KRaft Migration"),
    "KIP-584": ("003_64130a47214303e2.txt", "Versioning scheme for features"),
    "KIP-380": ("004_57b5ff19cbd761a7.txt",
                "Detect outdated control requests and bounced brokers using broker generation"),
}
DEFAULT_SEEDS = Path("/work/shared/seeds")

# The packages whose code the page maps, with the column each fills.
CARRIERS = {"model": "Model", "impl": "Implementation"}


# ---- the seeds' sections -------------------------------------------------------------------------

# Lines that stand alone but are the wiki's furniture or a table's cells, never a section.
_NOT_HEADINGS = re.compile(
    r"^(Versions Compared|Key|Table of Contents|Code Block|Image (Removed|Added)|Image RemovedImage Added|Jira|"
    r"Child pages|Skip to end of metadata|Go to start of metadata|The|KIP-\d+ .*|Unable to render .*)$"
)


def headings(text: str) -> list[str]:
    """A seed's section headings, in order, each once: short lines, alone between blank lines, outside code."""
    lines = text.splitlines()
    out: list[str] = []
    fenced = False
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```"):
            fenced = not fenced
            continue
        alone = (i == 0 or not lines[i - 1].strip()) and (i + 1 == len(lines) or not lines[i + 1].strip())
        if (fenced or not s or line != line.lstrip() or not alone or len(s) > 80 or len(s.split()) > 12
                or not s[0].isupper() or s[-1] in ".:,;" or re.search(r"[\t{}=<>|\"]", s)
                or s.startswith(("Current state", "Discussion thread", "Vote thread", "Pull Request", "JIRA"))
                or _NOT_HEADINGS.match(s)):
            continue
        if s not in out:
            out.append(s)
    return out


def read_seed_sections(seeds: Path) -> dict[str, dict]:
    """KIP -> its seed file, title and section headings, read from the seed texts in ``seeds``."""
    return {kip: {"seed": name, "title": title, "sections": headings((seeds / name).read_text())}
            for kip, (name, title) in SEED_FILES.items()}


def write_seed_sections(sections: dict[str, dict], path: Path = SECTIONS_FILE) -> Path:
    from properties.catalogue import write_page

    write_page(path, json.dumps(sections, indent=2) + "\n")
    return path


def seed_sections() -> dict[str, dict]:
    return json.loads(SECTIONS_FILE.read_text())


# ---- citations -----------------------------------------------------------------------------------

def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


def _forms(heading: str) -> list[tuple[str, ...]]:
    words = _words(heading)
    return [words, words[1:]] if words[:1] == ("the",) and len(words) > 1 else [words]


def resolve(cited: str, sections: list[str]) -> list[str]:
    """The sections ``cited`` (the text after the ``§``) can name: one when it names one."""
    words = _words(cited)
    whole = [(len(f), h) for h in sections for f in _forms(h) if words[:len(f)] == f]
    if whole:
        longest = max(n for n, _ in whole)
        return sorted({h for n, h in whole if n == longest}, key=sections.index)
    short = _words(re.split(r"[:;,().]| and\b| or\b", cited, maxsplit=1)[0])
    return [h for h in sections if short and any(f[:len(short)] == short for f in _forms(h))]


@dataclass(frozen=True)
class Citation:
    file: str  # relative to the repository
    line: int
    carrier: str  # module.qualname (the module alone for module-level text)
    kip: str | None  # None: a bare § with no KIP named before it
    cited: str  # the text after the §, up to the next § or KIP, whitespace collapsed
    sections: tuple[str, ...]  # what it can name: exactly one when the citation is good

    @property
    def name(self) -> str:
        """The cited words alone, without the prose that follows them."""
        return re.split(r"[:;,()]| -", self.cited, maxsplit=1)[0].strip(" .")[:80]

    @property
    def section(self) -> str | None:
        return self.sections[0] if len(self.sections) == 1 else None

    def problem(self) -> str:
        what = f"{self.kip or 'no KIP named'} §{self.name}"
        if len(self.sections) > 1:
            return f"{self.file}:{self.line}: {what}: names more than one section ({', '.join(self.sections)})"
        return f"{self.file}:{self.line}: {what}: no such section in the seed"


_MARK = re.compile(r"KIP-(\w+)|§")


def cites(text: str) -> Iterator[tuple[int, str | None, str]]:
    """(offset, KIP, cited text) of each seed citation in one docstring or comment block."""
    kip = None
    for m in _MARK.finditer(text):
        if m.group(1) is not None:
            kip = f"KIP-{m.group(1)}"
            continue
        following = text[m.end():]
        if not following[:1].isalpha():
            continue  # §13: a section of the project's own pages
        end = _MARK.search(following)
        cited = " ".join(following[: end.start() if end else 160].split())[:160]
        yield m.start(), kip, cited


def _citations(file: str, line: int, carrier: str, text: str, table: dict[str, dict]) -> list[Citation]:
    out = []
    for offset, kip, cited in cites(text):
        if kip is None:
            hits = {k: resolve(cited, v["sections"]) for k, v in table.items()}
            named = [k for k, h in hits.items() if h]
            kip_found = named[0] if len(named) == 1 else None
            sections = tuple(hits[kip_found]) if kip_found else tuple(h for k in named for h in hits[k])
            out.append(Citation(file, line + text.count("\n", 0, offset), carrier, kip_found, cited, sections))
        elif kip in table:
            out.append(Citation(file, line + text.count("\n", 0, offset), carrier, kip, cited,
                                tuple(resolve(cited, table[kip]["sections"]))))
    return out


def _comment_blocks(source: str) -> list[tuple[int, int, str, bool]]:
    """(first line, last line, text, alone on its line) of each comment block: consecutive comments alone on
    their lines in one column join up; a comment after code stands by itself."""
    blocks: list[list] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line, col = tok.start
        alone = not tok.line[:col].strip()
        text = tok.string.lstrip("#").strip()
        last = blocks[-1] if blocks else None
        if last and alone and last[3] and last[1] == line - 1 and last[4] == col:
            last[1], last[2] = line, last[2] + "\n" + text
        else:
            blocks.append([line, line, text, alone, col])
    return [(b[0], b[1], b[2], b[3]) for b in blocks]


def _defs(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """Every function and class with its qualified name (``Class.method``, ``outer.<locals>.inner``)."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                out.append((child, name))
                visit(child, name + (".<locals>." if not isinstance(child, ast.ClassDef) else "."))
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _binds(stmt: ast.stmt) -> str | None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return names[0] if names else None


def citations_in(path: Path, module: str, table: dict[str, dict]) -> list[Citation]:
    """Every seed citation in one module's docstrings and comments, with who carries it."""
    source = path.read_text()
    if "§" not in source:
        return []
    file = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    tree = ast.parse(source)
    defs = _defs(tree)
    out = []
    for node, name in [(tree, ""), *defs]:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            carrier = f"{module}.{name}" if name else module
            out += _citations(file, body[0].lineno, carrier, body[0].value.value, table)
    for first, last, text, alone in _comment_blocks(source):
        around = [(n, q) for n, q in defs if n.lineno <= first <= n.end_lineno]
        node, name = max(around, key=lambda d: d[0].lineno) if around else (tree, "")
        if alone:
            later = [s for s in getattr(node, "body", []) if s.lineno > last]
            following = later[0] if later else None
            if isinstance(following, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = next(q for n, q in defs if n is following)
            elif following is not None and node is tree and _binds(following):
                name = _binds(following)
        out += _citations(file, first, f"{module}.{name}" if name else module, text, table)
    return out


def modules(package: str, root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """(dotted name, file) of every module of a top-level package, walked without importing anything."""
    def walk(directory: Path, prefix: str) -> Iterator[tuple[str, Path]]:
        for info in sorted(pkgutil.iter_modules([str(directory)]), key=lambda m: m.name):
            name = f"{prefix}.{info.name}"
            if info.ispkg:
                if (directory / info.name / "__init__.py").exists():
                    yield name, directory / info.name / "__init__.py"
                yield from walk(directory / info.name, name)
            else:
                yield name, directory / f"{info.name}.py"

    if (root / package / "__init__.py").exists():
        yield package, root / package / "__init__.py"
    yield from walk(root / package, package)


def citations(packages: tuple[str, ...] = tuple(CARRIERS), table: dict[str, dict] | None = None,
              root: Path = ROOT) -> list[Citation]:
    """Every seed citation in the docstrings and comments of the packages' modules."""
    table = seed_sections() if table is None else table
    return [c for package in packages for name, path in modules(package, root)
            for c in citations_in(path, name, table)]


def property_citations(table: dict[str, dict] | None = None) -> list[Citation]:
    """The registry's properties by their ``source``, each carried by the property's name."""
    from model import PROPERTIES

    table = seed_sections() if table is None else table
    return [c for p in PROPERTIES for c in _citations(f"property {p.name}", 1, p.name, p.source, table)]


def bad_citations(packages: tuple[str, ...] = tuple(CARRIERS)) -> list[Citation]:
    """Citations that name no section of their seed, or more than one (the registry's included)."""
    return [c for c in [*citations(packages), *property_citations()] if c.section is None]


# ---- the page --------------------------------------------------------------------------------------

def render() -> str:
    table = seed_sections()
    code = citations(table=table)
    props = property_citations(table)
    carried = {(c.kip, c.section) for c in [*code, *props] if c.section is not None}
    total = sum(len(seed["sections"]) for seed in table.values())
    out = [
        "# KIP sections in the code",
        "",
        GENERATED,
        "",
        "Each section of each seed, in the seed's order, with what carries it: the properties whose source "
        "cites it, and the functions and classes of `model/` and `impl/` whose docstrings or comments cite it "
        "(`KIP-866 §Controller Leadership`), as `module.qualname` (a module alone: its own docstring, or "
        "comments outside any function). The sections are the headings of the seed texts, kept in "
        "`properties/kip_sections.json`; a section nothing cites is listed as such.",
        "",
        f"{len(carried)} of {total} sections are cited.",
        "",
        "| KIP | sections | cited | not cited |",
        "|---|---|---|---|",
    ]
    for kip, seed in table.items():
        n = sum((kip, s) in carried for s in seed["sections"])
        out.append(f"| [{kip}](#{kip.lower()}) {seed['title']} | {len(seed['sections'])} | {n} "
                   f"| {len(seed['sections']) - n} |")
    out.append("")
    for kip, seed in table.items():
        out += [f"## {kip}", "", f"{seed['title']} (seed `{seed['seed']}`).", ""]
        for section in seed["sections"]:
            out += [f"### {kip} §{section}", ""]
            if (kip, section) not in carried:
                out += ["Nothing in the registry, `model/` or `impl/` cites this section.", ""]
                continue
            names = sorted({c.carrier for c in props if (c.kip, c.section) == (kip, section)})
            if names:
                out.append("- **Properties:** " + ", ".join(f"[{n}](invariants.md#{n.lower()})" for n in names))
            for package, label in CARRIERS.items():
                carriers = sorted({c.carrier for c in code if (c.kip, c.section) == (kip, section)
                                   and (c.carrier == package or c.carrier.startswith(package + "."))})
                if carriers:
                    out.append(f"- **{label}:** " + ", ".join(f"`{n}`" for n in carriers))
            out.append("")
    bad = sorted((c for c in [*props, *code] if c.section is None), key=lambda c: (c.carrier, c.kip or "", c.cited))
    if bad:
        out += ["## Citations of no section of the seed", "",
                "A test keeps this list from growing (tests/test_docs_site.py).", "",
                "| where | KIP | cited | sections it could name |", "|---|---|---|---|"]
        out += [f"| `{c.carrier}` | {c.kip or 'none named'} | {c.name.replace('|', '&#124;')} | "
                f"{', '.join(c.sections) or 'none'} |" for c in bad]
        out.append("")
    return "\n".join(out)
