"""docs/invariants.md is generated from the registry and the checks' own data, and must not go stale."""

import ast
import re
from pathlib import Path

from impl.bugs import IMPL_SEEDED_BUGS
from model import PROPERTIES, SCOPES, SEEDED_BUGS, Kind
from model.invariants import BY_NAME
from properties import catalogue


def test_catalogue_is_up_to_date():
    """Run `kraftcheck docs` after changing an invariant, a seeded bug, a scope or a z3 core."""
    assert not catalogue.is_stale(), "docs/invariants.md is stale: run `kraftcheck docs`"


def test_catalogue_lists_every_property_and_seeded_bug_of_both_layers():
    page = catalogue.render()
    for p in PROPERTIES:
        assert f"### {p.name}" in page and p.source in page and p.meaning in page
    for b in [*SEEDED_BUGS, *IMPL_SEEDED_BUGS]:
        assert f"`{b.name}`" in page


def test_catalogue_computes_the_checks_that_cover_a_property():
    """The epoch-fencing property is named by the fencing core's obligations and checked by campaigns;
    a KRaft property is listed only in scopes with KRaft controllers (docs/design.md §13)."""
    fencing = "\n".join(catalogue.property_section(BY_NAME["AtMostOneControllerPerEpoch"]))
    assert "ElectController/AtMostOneControllerPerEpoch" in fencing and "Init/AtMostOneControllerPerEpoch" in fencing
    assert "kraftcheck campaign" in fencing
    kraft = BY_NAME["AtMostOneKRaftLeaderPerEpoch"]
    listed = set(re.findall(r"\(manifest\.md#([\w-]+)\)", "\n".join(catalogue.coverage_lines(kraft))))
    assert listed and all(SCOPES[name].controllers for name in listed)
    assert "fencing" not in catalogue.exercising_scopes(kraft)
    # A transition property has no Init obligation: it is about steps, not the start.
    step_property = [o for o in catalogue.z3_obligations(BY_NAME["ControllerEpochNeverDecreases"])]
    assert step_property and not any(n.startswith("Init/") for o in step_property for n in o.induction)


def test_catalogue_lists_eventually_properties_under_liveness_of_complete_scopes():
    for p in PROPERTIES:
        if p.kind is Kind.EVENTUALLY:
            text = "\n".join(catalogue.coverage_lines(p))
            assert "kraftcheck liveness" in text and "kraftcheck explore" not in text


def test_catalogue_reads_every_differs_mark_whole_and_no_docstring():
    """Each `# Differs:` comment of model/ is read once, its continuation lines joined; a docstring that
    mentions the mark is not a mark."""
    marks = sum(
        len(re.findall(r"^\s*#\s*Differs:", path.read_text(), re.MULTILINE))
        for path in (catalogue.ROOT / "model").glob("*.py")
    )
    diffs = catalogue.differences("model")
    assert len(diffs) == marks > 0
    joined = [d for d in diffs if d.where == "_register_with_kraft" and d.text.startswith("Kafka answers")]
    assert joined and joined[0].text.endswith("and the broker registers again).")
    assert any(d.by_profile for d in diffs) and not all(d.by_profile for d in diffs)


def test_catalogue_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "invariants.md"
    catalogue.write(target)
    assert target.read_text() == catalogue.render()
    assert list(tmp_path.iterdir()) == [target]


def test_catalogue_machine_scopes_are_those_the_machine_tests_run():
    """The catalogue lists under "Hypothesis" the scopes ``properties.machines.CLEAN_RUN_SCOPES`` names; those
    must be the scopes tests/test_machines.py runs the correct model's machine in (``run_clean("scope", ...)``)."""
    tree = ast.parse((Path(__file__).parent / "test_machines.py").read_text())
    run = {node.args[0].value for node in ast.walk(tree)
           if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run_clean"
           and node.args and isinstance(node.args[0], ast.Constant)}
    assert run == set(catalogue.machine_scopes())
