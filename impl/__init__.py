"""kraftcheck's executable implementation of the control plane (sans-IO nodes and a simulator).

Not written yet: the issue "The implementation" builds it on top of the model.
"""
