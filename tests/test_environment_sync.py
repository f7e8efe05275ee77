"""requirements.txt and environment.yml pin the same packages at the same versions.

requirements.txt is the source of truth for pip and CI; environment.yml's
``pip:`` section is what a conda user installs. If the two drift apart, a
classroom on conda runs different code from CI. Names are compared after PEP 503
normalisation (``Foo_Bar`` == ``foo-bar``).
"""

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
ENVIRONMENT = ROOT / "environment.yml"
PYPROJECT = ROOT / "pyproject.toml"


def normalise(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def exact_pins(lines, source):
    """Map normalised name -> version for requirement lines; pip options
    (``-e .``, ``-r file``, ``--index-url``) are skipped. Anything that is not
    an exact ``name==version`` pin is an error naming the line."""
    pins, errors = {}, []
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            errors.append(f"{source}: cannot parse {raw!r}: {exc}")
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            errors.append(f"{source}: {raw!r} is not an exact '==' pin")
            continue
        name = normalise(req.name)
        if name in pins:
            errors.append(f"{source}: {req.name} is listed twice")
        pins[name] = specs[0].version
    assert not errors, "\n".join(errors)
    return pins


def requirements_pins():
    return exact_pins(REQUIREMENTS.read_text().splitlines(), REQUIREMENTS.name)


def environment():
    return yaml.safe_load(ENVIRONMENT.read_text())


def environment_pip_lines():
    pip_sections = [d["pip"] for d in environment()["dependencies"]
                    if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, (
        f"{ENVIRONMENT.name} needs exactly one 'pip:' section under dependencies, "
        f"found {len(pip_sections)}")
    return [str(item) for item in pip_sections[0]]


def test_requirements_and_environment_pin_the_same_versions():
    req = requirements_pins()
    env = exact_pins(environment_pip_lines(), ENVIRONMENT.name)
    differences = (
        [f"only in requirements.txt: {n}=={req[n]}" for n in sorted(req.keys() - env.keys())]
        + [f"only in environment.yml: {n}=={env[n]}" for n in sorted(env.keys() - req.keys())]
        + [f"{n}: requirements.txt pins {req[n]}, environment.yml pins {env[n]}"
           for n in sorted(req.keys() & env.keys()) if Version(req[n]) != Version(env[n])]
    )
    assert not differences, (
        "requirements.txt and environment.yml disagree:\n  " + "\n  ".join(differences))


def test_environment_installs_the_project_and_python_311():
    env = environment()
    assert env["name"] == "percolator-kit"
    conda_deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda_deps, f"python=3.11 missing from {conda_deps}"
    assert "pip" in conda_deps, f"pip missing from {conda_deps}"
    assert "-e ." in environment_pip_lines(), "environment.yml's pip section must install the project: '-e .'"


def test_pins_satisfy_the_packages_own_dependencies():
    """Every runtime dependency in pyproject.toml is pinned, at a version its
    range allows."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    pins = requirements_pins()
    problems = []
    for spec in project["dependencies"]:
        dep = Requirement(spec)
        pinned = pins.get(normalise(dep.name))
        if pinned is None:
            problems.append(f"{dep.name} is a dependency in pyproject.toml but not pinned in requirements.txt")
        elif not dep.specifier.contains(pinned, prereleases=True):
            problems.append(f"requirements.txt pins {dep.name}=={pinned}, outside pyproject.toml's {spec!r}")
    assert not problems, "\n".join(problems)
