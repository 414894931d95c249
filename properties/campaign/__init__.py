"""Fuzzing campaigns: many seeded simulations of the implementation, each checked against the model.

    kraftcheck campaign --seeds 64 --master local[2] --out campaign-out
    spark-submit properties/campaign/__main__.py --seeds 64 --out campaign-out     # the same options

How it works: a campaign is a *plan* (``DIR/campaign.json``: every option that changes its
results) cut into *partitions* of consecutive seeds. ``run_partition(plan, p)`` runs partition
p's seeds, each a ``Simulation`` of the implementation stepped in the model after every event
(``properties.runs.run_seed``: the two must agree and the model's invariants must hold), and
returns rows. The driver submits each partition as its own small Spark job (one task) from a
pool of threads as wide as the cluster, writes each finished partition's rows, and at the end
consolidates the tables, shrinks one violation per signature group (``properties.shrink``, one
Spark task per group), and writes ``summary.json`` and ``report.html`` (``report``).

Rules:
- ``run_partition`` is a pure function of (plan, partition): the same rows on any machine and
  in any mode (Spark, ``processes[N]``, ``serial``), apart from the timing columns
  (``duration_s``, ``finished_s``; a row's ``ended_at``, the wall clock when its run ended, is
  what the driver turns into ``finished_s``). Rows travel back to the driver, which alone
  writes files, so a retried task can never add rows twice.
- Partition p holds seeds ``[p*S, (p+1)*S)`` (S: ``--partition-size``; the last one is cut at
  ``--seeds``); with ``--minutes`` partitions are started in order until the deadline and those
  started finish. Every fourth seed of the ``mixed`` runbook rolls back (``bench.sim``).
- Files are written whole or not at all: each to a temporary name starting with "." in its
  directory, then ``os.replace``. Readers only read ``part-NNNNN.parquet``. A partition's
  ``_parts/runs`` file is written after its violations and coverage parts and is its commit
  mark: ``--resume`` skips exactly the partitions that have one.
- Bad input (an option, scope, fault mix, seeded bug, master, or a DIR that holds another
  campaign) is one line on stderr and exit 2, before anything is written.
- Coverage is gathered from the model's side (``properties.runs``). A run's ``new_coverage`` counts the keys no
  run of a lower seed reached; it is computed when the tables are consolidated, so it is the
  same however the partitions were scheduled.
- A violation is deduplicated by (invariant, signature) (``properties.shrink.signature_of``);
  each group's lowest seed is run again in its own task and shrunk, and the shrunk trace is saved
  under ``DIR/counterexamples/``; every row of the group names it.

The modules: ``options`` (the options, checked, as a ``properties.plan.Plan``; partitions),
``tasks`` (what a Spark task runs: a partition, a group's shrink), ``tables`` (Parquet parts and
tables, the plan and summary files), ``runners`` (Spark, a process pool, serial), ``spark`` (the
session), ``driver`` (``run_campaign``, the summary), ``hypothesis`` (the Hypothesis engine's
bridge), ``report`` (``report.html``); ``kraftcheck campaign`` parses its options in
``properties.cli``. Each name is imported from the module that defines it; this package
re-exports nothing.
"""
