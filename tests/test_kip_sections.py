"""The KIP sections page (docs/kip-sections.md): each seed section with the properties, model code and
implementation code that cite it; citations of sections the seeds do not have are found and reported."""

import os
import subprocess
import sys

import pytest

from properties import citations
from properties.catalogue import ROOT

# Every package whose docstrings and comments may cite the seeds.
CITING = ("model", "impl", "properties", "tests", "bench", "scripts")

# Citations in model/ and impl/ (and the registry's sources) of sections the seeds do not have, to be fixed
# where they are made: KIP-584's seed is a revision diff without these headings; KIP-500's has no section on
# broker registration (its text on it is under §The Broker State Machine). Keyed by what is cited, so that code
# moving between modules keeps its entry; the list may only shrink.
KNOWN_BAD = {
    ("KIP-584", "Broker protections"),
    ("KIP-584", "Broker protections against race conditions"),
    ("KIP-500", "Broker Registration"),
}

MODULE = '''"""A module (KIP-380 §Controller Detects Bounced Broker)."""


def fence(state):
    """Reject a stale request (KIP-380 §Broker Rejects Control Requests: epochs smaller than the broker's)."""


# KIP-866 §Rollback to ZK: the operator deletes /controller_epoch
def rollback(state):
    return state


class Driver:
    def claim(self):
        # KIP-866 §Controller
        # Leadership, §Dual Metadata Writes (a list, wrapped)
        return None

    def tell(self):
        """Only §Incompatible Brokers are told (a bare section: the one seed that has it)."""

    def misquote(self):
        """KIP-866 §Controller Leedership, and docs/design.md §13 is the project's own page."""
'''


@pytest.fixture
def package(tmp_path):
    """A `model` package one level deeper than any hard-coded name would look."""
    (tmp_path / "model" / "domain").mkdir(parents=True)
    (tmp_path / "model" / "__init__.py").write_text("")
    (tmp_path / "model" / "domain" / "__init__.py").write_text("")
    (tmp_path / "model" / "domain" / "fencing.py").write_text(MODULE)
    return tmp_path


def test_kip_sections_citations_are_carried_by_the_code_around_them(package):
    """Docstrings, a comment above a def, a comment block wrapped over two lines with a list of sections, a
    bare section: each carried by the innermost function, method or class, as module.qualname."""
    found = {(c.carrier, c.kip, c.section) for c in citations.citations(("model",), root=package)}
    mod = "model.domain.fencing"
    assert found == {
        (mod, "KIP-380", "Controller Detects Bounced Broker"),
        (f"{mod}.fence", "KIP-380", "Broker Rejects Control Requests Applied to Former Generations"),
        (f"{mod}.rollback", "KIP-866", "Rollback to ZK"),
        (f"{mod}.Driver.claim", "KIP-866", "Controller Leadership"),
        (f"{mod}.Driver.claim", "KIP-866", "Dual Metadata Writes"),
        (f"{mod}.Driver.tell", "KIP-866", "Incompatible Brokers"),
        (f"{mod}.Driver.misquote", "KIP-866", None),
    }


def test_kip_sections_citation_of_an_unknown_section_is_reported(package):
    """A section the seed does not have is named with its file and line; nothing else in the module is."""
    bad = [c for c in citations.citations(("model",), root=package) if c.section is None]
    assert [c.problem() for c in bad] == [
        f"{package}/model/domain/fencing.py:23: KIP-866 §Controller Leedership: no such section in the seed"]


def test_kip_sections_page_lists_a_known_function_under_its_section():
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations: the model's and the
    implementation's decide_controlled_shutdown carry it, and the property StaleControlledShutdownMovesNothing."""
    page = citations.render()
    start = page.index("### KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations\n")
    section = page[start:page.index("\n### ", start + 1)]
    lines = {line.split(":**")[0]: line for line in section.splitlines() if line.startswith("- **")}
    assert "[StaleControlledShutdownMovesNothing](invariants.md#stalecontrolledshutdownmovesnothing)" \
        in lines["- **Properties"]
    model = [n.strip("` ") for n in lines["- **Model"].split(":**")[1].split(",")]
    impl = [n.strip("` ") for n in lines["- **Implementation"].split(":**")[1].split(",")]
    assert any(n.startswith("model.") and n.endswith(".decide_controlled_shutdown") for n in model)
    assert any(n.startswith("impl.") and n.endswith(".decide_controlled_shutdown") for n in impl)
    assert "### KIP-866 §Test Plan\n\nNothing in the registry, `model/` or `impl/` cites this section." in page


def test_kip_sections_page_is_deterministic():
    """The same code gives the same bytes, whatever the hash seed of the process that writes it (this one's is
    random, the other's fixed)."""
    page = citations.render()
    for seed in ("1",):
        done = subprocess.run([sys.executable, "-c", "from properties import citations; print(citations.render())"],
                              capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout == page + "\n"


def test_kip_sections_every_citation_names_a_section_of_its_seed():
    """A citation of a section the seed does not have fails here, in any package; the known ones in model/
    and impl/ (KNOWN_BAD) are listed on the page until they are fixed where they are made."""
    bad = citations.bad_citations(CITING)
    unknown = [c.problem() for c in bad if (c.kip, c.name) not in KNOWN_BAD
               or not c.carrier.startswith(("model", "impl")) and not c.file.startswith("property ")]
    assert not unknown, "\n".join(unknown)
    still = {(c.kip, c.name) for c in bad}
    assert not KNOWN_BAD - still, f"fixed, take them out of KNOWN_BAD: {sorted(KNOWN_BAD - still)}"


@pytest.mark.skipif(not citations.DEFAULT_SEEDS.is_dir(), reason=f"no seeds in {citations.DEFAULT_SEEDS}")
def test_kip_sections_table_is_what_the_seeds_say():
    """properties/kip_sections.json is the seeds' headings as `kraftcheck docs --seeds DIR` reads them."""
    assert citations.read_seed_sections(citations.DEFAULT_SEEDS) == citations.seed_sections(), (
        f"run `kraftcheck docs --seeds {citations.DEFAULT_SEEDS}`")
