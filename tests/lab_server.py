"""A JupyterLab server and headless Chromium for the browser tests (test_browser.py,
test_saved_widgets.py): one way to start the server, wait for it and stop it."""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
               " const k = w && w.sessionContext && w.sessionContext.session"
               " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_env(data_dir: Optional[Path] = None) -> dict:
    """The environment of the server and its kernels: the kit importable from the checkout;
    ``data_dir``: JUPYTER_DATA_DIR (where notebook signatures, i.e. trust, live)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if data_dir is not None:
        env["JUPYTER_DATA_DIR"] = str(data_dir)
    return env


@contextmanager
def jupyterlab(root: Path, home: Path, overrides: bool = False,
               data_dir: Optional[Path] = None):
    """JupyterLab on 127.0.0.1 (a free port, token auth) over ``root``; yields ``(base, token)``.

    ``home`` holds its config, runtime and log (``lab.log``). ``overrides``: use
    jupyter/overrides.json as the app settings (ipywidgets' saveState on) and keep user
    settings and workspaces under ``home``. ``data_dir``: see :func:`lab_env`.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = dict(lab_env(data_dir), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    port, token = free_port(), secrets.token_hex(16)
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=", "--LabApp.extension_manager=readonly"]
    if overrides:
        settings = home / "app-settings"
        settings.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "jupyter" / "overrides.json", settings / "overrides.json")
        args.append(f"--LabApp.app_settings_dir={settings}")
        env.update(JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    if os.geteuid() == 0:
        args.append("--allow-root")
    with open(home / "lab.log", "a") as log:
        server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_up(server, base, token, home / "lab.log")
            yield base, token
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()


def _wait_until_up(server, base: str, token: str, log: Path, seconds: float = 40) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("JupyterLab did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.3)


@contextmanager
def make_lab(home: Path):
    """The server ``make lab`` starts (the Makefile's own command line, run by make), on a
    free port with a known token; yields ``(base, token)``. The venv is taken as built
    (``-o .venv/.installed``: make does not reinstall it); ``home`` holds the Jupyter
    config, data (the notebook signatures ``make lab`` writes), runtime dirs and the log."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    port, token = free_port(), secrets.token_hex(16)
    extra = (f"--no-browser --ServerApp.port={port} --IdentityProvider.token={token} "
             "--LabApp.news_url= --LabApp.extension_manager=readonly")
    args = ["make", "--no-print-directory", "-C", str(ROOT), "-o", ".venv/.installed",
            "lab", f"LAB_EXTRA={extra}"]
    with open(home / "lab.log", "a") as log:
        server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_up(server, base, token, home / "lab.log", seconds=90)
            yield base, token
        finally:
            os.killpg(server.pid, 15)      # make and the server it started
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, 9)
                server.wait()
