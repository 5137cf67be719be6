"""The page behind nginx under a sub-path, as docs/nginx/steno.conf serves it: the page at
/captions/ must find its stream at /captions/v1/stream (next to itself), through the proxy.
nginx listens on plain HTTP on 127.0.0.1 here (a secure context for the microphone, as
localhost is); the TLS lines of the documented file are the only ones taken out."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, SPEECH_WAV, free_port
from test_page import caption_session, check_session, open_page

NGINX = Path("/usr/sbin/nginx")
DOCUMENTED = REPO / "docs" / "nginx" / "steno.conf"


@pytest.fixture
def nginx(server, tmp_path):
    if not NGINX.is_file():
        pytest.fail("nginx is not installed (scripts/bootstrap.sh test installs Debian's nginx-light)")
    port = free_port()
    site = DOCUMENTED.read_text()
    site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{port};")
    site = "\n".join(line for line in site.splitlines() if not line.strip().startswith("ssl_certificate"))
    site = site.replace("http://127.0.0.1:8080/", f"http://127.0.0.1:{server.port}/")
    (tmp_path / "steno.conf").write_text(site)
    temp = tmp_path / "temp"
    temp.mkdir()
    (tmp_path / "nginx.conf").write_text(f"""
daemon off;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {tmp_path}/steno.conf;
}}
""")
    process = subprocess.Popen([str(NGINX), "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                                "-e", str(tmp_path / "error.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30  # a hang guard
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"nginx did not start: {(tmp_path / 'error.log').read_text(errors='replace')}")
            time.sleep(0.05)
    yield SimpleNamespace(http=f"http://127.0.0.1:{port}/captions", port=port)
    process.send_signal(signal.SIGQUIT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def test_page_under_a_sub_path_behind_nginx(nginx, reference, launch_browser, artifacts):
    browser = launch_browser(SPEECH_WAV)
    page, problems = open_page(browser, nginx, "", {"width": 1280, "height": 860})
    page.click("#start")
    result = caption_session(page, artifacts, "page-subpath-nginx")
    check_session(result, reference, problems)
    urls = result["probe"]["urls"]
    assert urls and all(url.startswith(f"ws://127.0.0.1:{nginx.port}/captions/v1/stream") for url in urls), urls
