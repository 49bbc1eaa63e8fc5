"""The package's version is luaptx's one version (VERSION at the root)."""
import os

import luaptx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_version_is_the_tree_version():
    with open(os.path.join(ROOT, "VERSION"), encoding="ascii") as f:
        assert luaptx.__version__ == f.read().strip()
