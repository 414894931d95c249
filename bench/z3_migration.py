"""Benchmark: the z3 proofs of the migration's fencing against their time targets.

    python -m bench.z3_migration [--json] [--repeats N] [--depth D]

What ``bench.z3_fencing`` measures, for properties.proofs.migration (correct model, 2 KRaft
controllers): BMC to depth ``--depth`` (20) of every encoded property in the core's scopes
("dual-write", "migration") against the target of 60 s, and every induction obligation, for 2
controllers and for any number of them, against 10 s each (the slowest is printed).
"""

from __future__ import annotations

from bench.z3_fencing import main
from properties.proofs.migration import MIGRATION_CORE

if __name__ == "__main__":
    main(MIGRATION_CORE, __doc__)
