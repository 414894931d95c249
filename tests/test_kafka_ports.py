"""Ports for a real Kafka run's listeners (properties.kafka.cluster.free_port): out of the kernel's ephemeral range,
so that no outgoing connection takes a killed process's port before it restarts, and never handed out twice while a
run holds them, in this process or another."""

from __future__ import annotations

import fcntl
import os
import socket

import pytest

from properties.kafka import cluster
from properties.kafka.cluster import LISTEN_PORTS, PORT_LOCKS, ClusterError, free_port, release_ports


def test_listening_ports_are_not_ephemeral_ones():
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert not set(LISTEN_PORTS) & set(range(low, high + 1))
    taken: set[int] = set()
    try:
        ports = [free_port(taken) for _ in range(20)]
        assert len(set(ports)) == 20 and set(ports) == taken
        assert all(p in LISTEN_PORTS for p in ports)
    finally:
        release_ports(taken)


def test_a_port_another_run_holds_or_something_listens_on_is_not_handed_out(monkeypatch):
    """Three ports: one another run holds (a lock on the port's file through another open file description, as
    another process has), one something listens on, one free. Only the free one is handed out, once, until it is
    released."""
    picked: set[int] = set()
    held_elsewhere, listening, free = (free_port(picked) for _ in range(3))
    release_ports(picked)
    lock = os.open(PORT_LOCKS / str(held_elsewhere), os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    listener = socket.socket()
    listener.bind(("127.0.0.1", listening))
    listener.listen()
    monkeypatch.setattr(cluster, "LISTEN_PORTS", [held_elsewhere, listening, free])
    run_a: set[int] = set()
    try:
        assert free_port(run_a) == free
        with pytest.raises(ClusterError, match="no free port"):
            free_port(set())  # another run at once: nothing left
        release_ports(run_a)
        assert free_port(set()) == free
    finally:
        release_ports({free})
        listener.close()
        os.close(lock)
