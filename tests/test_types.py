"""The model passes mypy in strict mode (pyproject.toml's [tool.mypy]), as a test so that a change that
breaks a type fails the run."""

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent


def test_types_model_passes_mypy_strict(tmp_path):
    """mypy with the project's configuration (strict on model/) reports nothing; a cold run takes seconds."""
    stdout, stderr, status = api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "mypy"), str(ROOT / "model")]
    )
    assert status == 0, stdout + stderr
