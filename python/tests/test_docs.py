"""Every Python snippet of docs/python.md runs as written (from the
repository root, as the docs' paths assume)."""
import os
import re

import pytest

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "python.md")


def snippets():
    text = open(DOC).read()
    return [(text[:m.start()].count("\n") + 2, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def test_the_doc_has_snippets():
    assert len(snippets()) >= 3


@pytest.mark.parametrize("line,code", snippets(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_the_snippet_runs_as_written(line, code, monkeypatch, capsys):
    for module in re.findall(r"^import (.*)$", code, re.M)[0].split(","):
        pytest.importorskip(module.strip().split(" as ")[0].split(".")[0])
    monkeypatch.chdir(ROOT)
    exec(compile(code, f"{DOC}:{line}", "exec"), {"__name__": "__doc_snippet__"})
    capsys.readouterr()
