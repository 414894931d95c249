"""kraftcheck against a real Kafka: install released jars, run real clusters, fault them, observe, check.

Rules:
- Kafka is used as released (jars from Maven Central) or as the user built it (a folder of jars):
  nothing is patched or instrumented. What kraftcheck knows of a run is what Kafka exposes:
  znodes with their stats, the decoded ``__cluster_metadata`` log, and the processes' log lines.
- Every process runs on 127.0.0.1, on ports chosen at run time, with its data under the run's
  folder; a run stops everything it started, also when it is interrupted or killed.
- The same seed gives the same schedule of operator steps and faults; Kafka's own timing still
  varies from run to run, so a run is kept whole (every channel's raw files) and can be checked
  again offline (``kraftcheck kafka check DIR``).

Modules: ``install`` (jars into a cache), ``cluster`` (processes), ``runbook`` (the operator's
KIP-866 steps and the faults), ``observe`` (the three channels into one timeline), ``checks`` (the
model's invariants evaluated on the timeline, and progress), ``run`` (one run end to end),
``cli`` (``kraftcheck kafka ...``).
"""
