"""Binder (repo2docker) configuration in binder/: it builds, with the same pins as CI.

repo2docker prefers binder/ over the top-level files. binder/environment.yml
is environment.yml without ``-e .`` (repo2docker builds the environment
before the repository is copied in, so ``-e .`` fails there); binder/postBuild
installs the kit afterwards; binder/apt.txt brings redis-server. What cannot
be run here (repo2docker itself, conda) is replaced by the closest check:
the same pins as requirements.txt, and postBuild run in a fresh venv made
from those pins.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_environment_sync import exact_pins, requirements_pins

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"


def binder_environment():
    return yaml.safe_load((BINDER / "environment.yml").read_text())


def binder_pip_lines():
    sections = [d["pip"] for d in binder_environment()["dependencies"] if isinstance(d, dict)]
    assert len(sections) == 1, f"binder/environment.yml needs one 'pip:' section, found {len(sections)}"
    return [str(item) for item in sections[0]]


def test_binder_environment_pins_exactly_what_requirements_txt_pins():
    assert exact_pins(binder_pip_lines(), "binder/environment.yml") == requirements_pins()
    conda = [d for d in binder_environment()["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda and "pip" in conda


def test_binder_environment_does_not_install_the_repository_itself():
    lines = binder_pip_lines()
    assert not [line for line in lines if line.startswith("-")], (
        f"binder/environment.yml must not install the repository (repo2docker has not copied "
        f"it yet when it builds the environment): {lines}")


def test_binder_apt_brings_redis_and_postbuild_is_an_executable_script():
    packages = (BINDER / "apt.txt").read_text().split()
    assert packages == ["redis-server"]
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    assert post.read_text().startswith("#!/usr/bin/env bash\n")


def run_postbuild(tmp_path, install_pins):
    """Copy the repository, make a venv, give it the pinned packages with
    ``install_pins(python, venv, repo, env)``, run binder/postBuild; check what it installed."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".venv", "build", ".git", "artifacts", "__pycache__", "*.egg-info", ".pytest_cache"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_PROGRESS_BAR="off",
               PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.pop("PYTHONPATH", None)
    install_pins(python, venv, repo, env)
    done = subprocess.run([repo / "binder" / "postBuild"], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "percolator_ref 0.1.0 installed" in done.stdout
    where = subprocess.run(
        [python, "-c", "import percolator_ref, greenlet; print(percolator_ref.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert where.stdout.strip() == str(repo / "percolator_ref" / "__init__.py")
    overrides = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert overrides.read_text() == (ROOT / "jupyter" / "overrides.json").read_text()
    cli = subprocess.run([venv / "bin" / "percolator", "--help"], env=env,
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr


def test_postbuild_installs_the_kit_on_top_of_the_pinned_packages(tmp_path):
    """postBuild's own work, in seconds: a fresh venv sees this run's pinned packages (a
    path line in a .pth file: their directory, without running its .pth files, so the kit
    installed there is not importable) and postBuild installs the kit into it."""
    import sysconfig

    def borrow_pins(python, venv, repo, env):
        purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        (Path(purelib) / "pinned.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        kit = subprocess.run([python, "-c", "import percolator_ref"], env=env, cwd=tmp_path,
                             capture_output=True, text=True)
        assert kit.returncode != 0, "the kit is importable before postBuild installed it"

    run_postbuild(tmp_path, borrow_pins)


@pytest.mark.long
@pytest.mark.timeout(900)
def test_postbuild_installs_the_kit_in_a_fresh_venv_from_the_pins(tmp_path):
    """A fresh venv with requirements.txt (what binder/environment.yml pins), then postBuild."""
    def install_pins(python, venv, repo, env):
        # --no-compile: no .pyc for the ~150 packages (about a third of the install's CPU)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-compile", "-r",
                        repo / "requirements.txt"], check=True, env=env)

    run_postbuild(tmp_path, install_pins)
