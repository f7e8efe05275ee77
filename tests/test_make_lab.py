"""``make lab`` opens the whole kit (issue 28, item 1): JupyterLab over the repository root,
landing on START_HERE.md, with the kit's own notebooks trusted."""
from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from lab_server import ROOT, make_lab

pytestmark = pytest.mark.skipif(shutil.which("make") is None or
                                not (ROOT / ".venv" / "bin" / "jupyter").exists(),
                                reason="needs make and the kit's .venv (make venv)")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url: str, token: str):
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_make_lab_serves_the_exercises_the_notebooks_and_the_landing_page(tmp_path):
    home = tmp_path / "home"
    with make_lab(home) as (base, token):
        for path in ["exercises/01_snapshot_read.ipynb", "notebooks/02_transfer_example.ipynb",
                     "solutions/01_snapshot_read.ipynb", "exercises/README.md", "START_HERE.md"]:
            status, _, _ = get(f"{base}/api/contents/{path}?content=0", token)
            assert status == 200, path
        status, headers, _ = get(f"{base}/", token)
        assert status in (301, 302) and headers["Location"].split("?")[0].endswith("/lab/tree/START_HERE.md")
    # the notebooks were trusted in the data dir the server used
    notary = NotebookNotary(data_dir=str(home / "data"))
    for path in [ROOT / "exercises" / "01_snapshot_read.ipynb",
                 ROOT / "notebooks" / "02_transfer_example.ipynb"]:
        assert notary.check_signature(nbformat.read(path, as_version=4)), path.name


def test_every_link_of_the_landing_page_is_a_file_of_the_kit():
    text = (ROOT / "START_HERE.md").read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert len(links) >= 22
    assert [link for link in links if not (ROOT / link).exists()] == []
    for folder in ("notebooks", "exercises"):
        listed = {link for link in links if link.startswith(folder + "/")
                  and link.endswith(".ipynb")}
        shipped = {f"{folder}/{p.name}" for p in (ROOT / folder).glob("[0-9][0-9]_*.ipynb")}
        assert listed == shipped, folder
