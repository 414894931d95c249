"""z3 proofs (``kraftcheck prove``): one engine (``engine``) and the cores written against it.

- ``engine``: the machinery every core shares: actor domains, per-step copies, choices, one named
  obligation per (action, invariant), BMC with replay through the model, induction for N actors
  and for any number of them.
- ``fencing``: the ZooKeeper controller's epoch fencing, with KIP-380's broker epochs.
- ``migration``: the migration's fencing (KIP-866): the claim, the /migration compare-and-set,
  the driver's transition table, KRaft epochs.
- ``heartbeats``: KRaft brokers on one active controller: registrations, broker epochs, fencing,
  and heartbeats held in the network and delivered late.
"""
