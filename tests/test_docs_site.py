"""The documentation site: generated pages stay fresh, diagrams follow the model's tables, and the
site builds with `mkdocs build --strict` (docs/design.md §13)."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from model.migration import MigrationDriverState as D
from properties import site

ROOT = site.ROOT


def test_docs_generated_pages_are_up_to_date():
    """Run `kraftcheck docs` after changing the model, a scope, a seeded bug, a z3 core or the manifest."""
    stale = [str(path.relative_to(ROOT)) for path in site.stale_pages()]
    assert not stale, f"stale generated pages: {', '.join(stale)}: run `kraftcheck docs`"


def test_docs_check_command_names_a_stale_page(monkeypatch, capsys):
    """`kraftcheck docs --check` exits 0 when every page is fresh, 1 naming the page that is not."""
    from properties.cli import main

    assert main(["docs", "--check"]) == 0
    monkeypatch.setitem(site.PAGES, "diagrams.md", lambda: "# State diagrams\n")
    assert main(["docs", "--check"]) == 1
    assert "diagrams.md is stale" in capsys.readouterr().err


def test_docs_driver_diagram_is_drawn_from_the_transition_table(monkeypatch):
    """A change to VALID_TRANSITIONS changes the page, so the staleness test catches a diagram drawn by hand."""
    before = site.driver_diagram()
    assert "    WAIT_FOR_BROKERS --> BECOME_CONTROLLER" in before
    changed = dict(site.VALID_TRANSITIONS)
    changed[D.WAIT_FOR_CONTROLLER_QUORUM] = changed[D.WAIT_FOR_CONTROLLER_QUORUM] | {D.DUAL_WRITE}
    monkeypatch.setattr(site, "VALID_TRANSITIONS", changed)
    assert "    WAIT_FOR_CONTROLLER_QUORUM --> DUAL_WRITE" in site.driver_diagram()


def test_docs_broker_lifecycle_is_what_step_does():
    """The lifecycle diagram comes from exploring the model: a KRaft broker is unfenced by a heartbeat and
    enters Stopping only through a controlled shutdown (KIP-500 §Broker States)."""
    moves = site.lifecycle_moves()
    by_name = {(a.value, b.value): kinds for (a, b), kinds in moves.items()}
    assert "BrokerHeartbeat" in by_name[("Fenced", "Online")]
    assert {to for (_, to) in by_name} >= {"Fenced", "Online", "Stopping", "Offline"}
    assert [frm for (frm, to) in by_name if to == "Stopping"] == ["Online"]


def test_docs_section_citations_name_existing_sections():
    """Code cites the numbered sections of the design and implementation pages (`docs/design.md §6`):
    renumbering a page must update its citations."""
    import re

    sources = [p for d in ("model", "impl", "properties", "tests", "bench", "scripts") for p in (ROOT / d).rglob("*")
               if p.suffix in (".py", ".sh")] + [ROOT / "mkdocs.yml"]
    for page in ("design.md", "implementation.md"):
        sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / page).read_text(), re.MULTILINE))
        cited = {(str(p.relative_to(ROOT)), n) for p in sources
                 for n in re.findall(rf"docs/{re.escape(page)} §(\d+)", p.read_text())}
        assert not {c for c in cited if c[1] not in sections}, f"citations of missing sections of {page}"
        if page == "design.md":
            assert len(cited) >= 5


def test_docs_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    missing = [p for p in pages if f": {p}\n" not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


MKDOCS = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs-material is not installed (the `docs` extra: pip install -e '.[docs]')",
)


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """`mkdocs build --strict` into a temporary directory, once for the module: (the run, the site)."""
    site_dir = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site_dir)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    return done, site_dir


@MKDOCS
def test_docs_site_builds_strict(built_site):
    """A broken link or anchor, or a page left out of the navigation, is a warning; --strict makes it fail."""
    done, site_dir = built_site
    assert done.returncode == 0, done.stderr[-4000:]
    assert (site_dir / "invariants" / "index.html").exists()


# Headless Chromium as this machine runs it (scripts/setup.sh installs Debian's chromium), with every host name
# unresolvable: a diagram that needs a CDN stays Mermaid source.
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=20000", "--dump-dom"]


@MKDOCS
def test_docs_site_draws_its_state_diagrams_without_a_network(built_site, tmp_path):
    """The state diagrams page, opened in a real browser that can reach no host, draws every diagram: the site
    serves Mermaid itself (mkdocs.yml's extra_javascript, fetched by scripts/setup.sh). Material for MkDocs
    replaces each ``<pre class="mermaid">`` of Mermaid source with a ``<div class="mermaid">`` holding the drawn
    SVG (in a closed shadow root) once Mermaid has rendered it; without Mermaid the source stays."""
    chromium = shutil.which("chromium")
    if chromium is None:  # scripts/setup.sh installs it; a machine set up without it must not pass silently
        pytest.fail("chromium is not installed: run `bash scripts/setup.sh`")
    done, site_dir = built_site
    assert done.returncode == 0, done.stderr[-4000:]
    page = site_dir / "diagrams" / "index.html"
    assert "mermaid.min.js" in page.read_text() and (site_dir / "assets" / "javascripts" / "mermaid.min.js").is_file()
    sources = page.read_text().count('<pre class="mermaid">')
    assert sources == (ROOT / "docs" / "diagrams.md").read_text().count("``` mermaid") >= 3
    dom = subprocess.run([*CHROMIUM, f"--user-data-dir={tmp_path / 'profile'}", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert '<pre class="mermaid">' not in dom, "a diagram is still Mermaid source: Mermaid did not draw it"
    assert dom.count('<div class="mermaid">') == sources
