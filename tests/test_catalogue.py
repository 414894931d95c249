"""docs/invariants.md is generated from the registry and must not go stale."""

from model import PROPERTIES, SEEDED_BUGS
from properties import catalogue


def test_catalogue_is_up_to_date():
    """Run `kraftcheck docs` after changing an invariant, a seeded bug, a scope or a `# Differs:` mark."""
    assert not catalogue.is_stale(), "docs/invariants.md is stale: run `kraftcheck docs`"


def test_catalogue_lists_every_property_seeded_bug_and_difference():
    page = catalogue.render()
    for p in PROPERTIES:
        assert f"### {p.name}" in page and p.source in page
    for b in SEEDED_BUGS:
        assert f"`{b.name}`" in page
    diffs = catalogue.differences()
    assert diffs, "the model marks its differences from the seeds and Kafka with `# Differs:`"
    for _, _, text in diffs:
        assert text in page


def test_catalogue_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "invariants.md"
    catalogue.write(target)
    assert target.read_text() == catalogue.render()
    assert list(tmp_path.iterdir()) == [target]
