# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugin_utils/rollout/_door.py: knocks on a host's ssh port that never block the strategy's loop."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._door import Doors, door_of


@pytest.mark.parametrize("task_vars, connection, door", [
    ({}, None, ("n1", 22)),
    ({"ansible_host": "127.77.0.5", "ansible_port": "2222"}, "ssh", ("127.77.0.5", 2222)),
    ({"ansible_ssh_host": "10.0.0.1", "ansible_ssh_port": 2200}, "smart", ("10.0.0.1", 2200)),
    ({"ansible_connection": "ansible.builtin.paramiko_ssh"}, None, ("n1", 22)),
    ({"ansible_connection": "local"}, "ssh", None),
    ({}, "community.docker.docker", None),
    ({"ansible_host": "{{ lookup('env', 'ADDR') }}"}, None, None),
    ({"ansible_port": "{{ port }}"}, None, None),
    ({"ansible_port": "ssh"}, None, None),
    ({"ansible_port": 70000}, None, None),
    ({"ansible_ssh_common_args": "-o ProxyCommand='ip netns exec lab socat - TCP:%h:%p'"}, None, None),
    ({"ansible_ssh_extra_args": "-o proxyjump=bastion"}, None, None),
    ({"ansible_ssh_args": "-J core@bastion"}, None, None),
    ({"ansible_ssh_common_args": "-o ServerAliveInterval=5"}, None, ("n1", 22)),
])
def test_the_door_of_a_host_is_its_ssh_address_and_port_when_they_are_known(task_vars, connection, door):
    assert door_of(task_vars, "n1", connection) == door


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def listening():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server


def test_a_knock_on_a_listening_port_is_answered_and_one_on_a_closed_port_is_not():
    clock = Clock()
    doors = Doors(clock=clock)
    server = listening()
    port = server.getsockname()[1]
    try:
        assert doors.knock("up", ("127.0.0.1", port))
        doors.settle()
        assert doors.answer("up") is True and not doors.knocking()
    finally:
        server.close()
    # The same port, closed: refused. An answer counts from when its knock started.
    clock.now = 105.0
    assert doors.knock("up", ("127.0.0.1", port))
    doors.settle()
    assert doors.answer("up") is False
    assert doors.answer("up", since=105.0) is False and doors.answer("up", since=105.5) is None


def test_a_host_whose_address_does_not_resolve_is_not_knocked_on():
    def resolve(*args):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    doors = Doors(resolve=resolve)
    assert doors.knock("gone", ("nowhere.invalid", 22)) is False
    assert doors.answer("gone") is None and not doors.knocking()


def test_a_knock_without_an_answer_ends_as_closed_after_knock_seconds(tmp_path):
    # A unix socket whose backlog is full leaves a non-blocking connect under way (EAGAIN), as an unanswered SYN does.
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "s"))
    server.listen(0)
    held = []
    try:
        for dummy in range(4):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            held.append(client)
            if client.connect_ex(str(tmp_path / "s")) != 0:
                break
        clock = Clock()
        doors = Doors(clock=clock, knock_seconds=2.0,
                      resolve=lambda *args: [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", str(tmp_path / "s"))])
        assert doors.knock("slow", ("slow", 22))
        doors.settle()
        assert doors.knocking() and doors.answer("slow") is None
        # Another knock while one is under way starts none.
        assert doors.knock("slow", ("slow", 22)) and doors.knocking()
        clock.now += 2.0
        doors.settle()
        assert doors.answer("slow") is False and not doors.knocking()
    finally:
        for client in held:
            client.close()
        server.close()


def test_close_ends_the_knocks_under_way(tmp_path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "s"))
    server.listen(0)
    held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for dummy in range(3)]
    try:
        for client in held:
            client.setblocking(False)
            client.connect_ex(str(tmp_path / "s"))
        doors = Doors(resolve=lambda *args: [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", str(tmp_path / "s"))])
        doors.knock("slow", ("slow", 22))
        assert doors.knocking()
        doors.close()
        assert not doors.knocking() and doors.answer("slow") is None
    finally:
        for client in held:
            client.close()
        server.close()
