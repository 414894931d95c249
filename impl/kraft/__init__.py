"""The KRaft side of the implementation: the Raft quorum, the metadata image, the migration driver, RPCs.

``impl.kraft_controller.ControllerNode`` puts them together; ``impl.kraft_broker`` is a broker's
KRaft-facing client. Only the ``kip`` profile (``model.migration.Profile.KIP``) is implemented.
"""
