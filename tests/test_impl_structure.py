"""The implementation is independent of the model's behaviour: it may share values, never logic.

Differential testing compares two implementations of one design; if ``impl/`` called
``model.step`` (or ``replay``, ``decide_*``, an invariant), a bug in the shared code would
agree with itself and nothing would catch it. So ``impl/`` imports from ``model/`` only
classes (records, enums, actions, messages) and constants, never functions.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
import typing
from pathlib import Path

IMPL = Path(__file__).resolve().parent.parent / "impl"
# The runner builds a cluster from a scope's cold start: that is test harness, not a node.
HARNESS_FUNCTIONS = {("impl/cluster.py", "model.scopes", "cold_state")}
# The decorator that declares records, and the znode layout's path builders (ZkData's paths: data, not behaviour).
ALLOWED_FUNCTIONS = {
    ("model.record", "record"),
    ("model.state", "broker_path"),
    ("model.state", "partition_state_path"),
    ("model.migration", "topic_path"),
    ("model.migration", "pending_deletion_path"),
}


def _model_imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "model" or alias.name.startswith("model."):
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.module and (
            node.module == "model" or node.module.startswith("model.")
        ):
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def test_impl_imports_only_values_from_the_model():
    """impl/ takes ids, enums, records and tables from model/, never a function (STYLE.md: two implementations)."""
    offences = []
    files = sorted(IMPL.rglob("*.py"))
    assert files, "no impl modules found"
    for path in files:
        rel = path.relative_to(IMPL.parent).as_posix()
        for line, module, name in _model_imports(path):
            if name is None:
                offences.append(f"{rel}:{line}: import {module} (import names, not the module)")
                continue
            obj = getattr(importlib.import_module(module), name)
            if inspect.isclass(obj) or isinstance(obj, typing.NewType | types.GenericAlias) or not callable(obj):
                continue
            if (module, name) in ALLOWED_FUNCTIONS or (rel, module, name) in HARNESS_FUNCTIONS:
                continue
            offences.append(f"{rel}:{line}: from {module} import {name} (a function: model behaviour)")
    assert offences == [], "\n".join(offences)


def test_impl_import_check_can_fire(tmp_path):
    """The check itself: a module importing model.step's function is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from model.step import step\nimport model.kraft\n")
    found = list(_model_imports(bad))
    assert (1, "model.step", "step") in found and (2, "model.kraft", None) in found
    assert inspect.isfunction(getattr(importlib.import_module("model.step"), "step"))


def test_impl_imports_nothing_of_the_checks():
    """The layers run one way: the checks (``properties/``) drive the implementation; the simulator is handed
    its checker (``impl.sim.check.Checker``) and no module of ``impl/`` imports ``properties``."""
    offences = []
    for path in sorted(IMPL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offences += [f"{path.relative_to(IMPL.parent).as_posix()}:{node.lineno}: {name}"
                         for name in names if name == "properties" or name.startswith("properties.")]
    assert offences == []


def _controller_uses(tree: ast.AST) -> set[str]:
    """The attributes read of ``self.controller`` or a local ``controller`` in a module."""
    used = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id == "controller":
            used.add(node.attr)
        elif isinstance(owner, ast.Attribute) and owner.attr == "controller" and \
                isinstance(owner.value, ast.Name) and owner.value.id == "self":
            used.add(node.attr)
    return used


def test_migration_driver_sees_its_controller_only_through_migration_controller():
    """Kafka's KRaftMigrationDriver reaches QuorumController only through narrow interfaces (the published
    image, the leader it hears of, ZkRecordConsumer, QuorumFeatures), never the whole controller; so does
    impl's driver: every use of its controller names a member of ``MigrationController``, and the driver's
    module does not import the controller's (issue 20)."""
    from impl.kraft.driver import MigrationController

    path = IMPL / "kraft" / "driver.py"
    source = path.read_text()
    members = {name for name in vars(MigrationController) if not name.startswith("_")}
    members |= set(MigrationController.__annotations__)
    used = _controller_uses(ast.parse(source))
    assert used and used <= members, f"the driver uses {sorted(used - members)} outside MigrationController"
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert "impl.kraft_controller" not in imported
    assert len(members) <= 10, "MigrationController is meant to stay narrow"


def test_controller_use_check_can_fire():
    """The check itself: a driver reaching into the controller's Raft state is seen."""
    tree = ast.parse("def f(self, controller):\n    self.controller.raft.log\n    controller.bugs\n")
    assert _controller_uses(tree) == {"raft", "bugs"}
