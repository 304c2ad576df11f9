"""Two gunicorn servers on one host each get a control socket of their own (gunicorn's default
is one path per user, so the second server took the first one's over)."""

from __future__ import annotations

import socket

from tests.gunicorn_server import GunicornServer


def test_two_servers_on_a_host_have_their_own_control_sockets(demo_db, tmp_path):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(runtime), "GUNICORN_REUSE_PORT": "0"}
    first = GunicornServer(demo_db, tmp_path / "a", workers=1, env=env, control_socket=True)
    second = GunicornServer(demo_db, tmp_path / "b", workers=1, env=env, control_socket=True)
    with first, second:
        paths = {
            server.port: runtime / f"roft-127.0.0.1-{server.port}.ctl" for server in (first, second)
        }
        for server in (first, second):
            assert str(paths[server.port]) in server.log_tail(200)
        for path in paths.values():
            assert path.is_socket(), sorted(p.name for p in runtime.iterdir())
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(path))  # each answers on its own path
        assert not (runtime / "gunicorn.ctl").exists()
