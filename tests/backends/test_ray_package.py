"""The shape of `toolbridge.backends.ray`: a package whose face holds only the public names,
and that imports Ray only when a backend is used (Ray is an optional extra)."""

from __future__ import annotations

import subprocess
import sys

import toolbridge.backends.ray as face
from toolbridge.backends.ray.backend import RayBackend
from toolbridge.backends.ray.source import ToolSource
from toolbridge.backends.ray.wire import RemoteToolException


def test_the_face_exports_the_public_names_from_their_modules() -> None:
    assert face.__all__ == ["RayBackend", "RemoteToolException", "ToolSource"]
    assert face.RayBackend is RayBackend
    assert face.ToolSource is ToolSource
    assert face.RemoteToolException is RemoteToolException


def test_importing_the_package_and_every_module_imports_no_ray() -> None:
    # a fresh interpreter: this one has Ray loaded by the other tests of the folder
    program = (
        "import sys, pkgutil, importlib\n"
        "import toolbridge.backends.ray as face\n"
        "names = [m.name for m in pkgutil.iter_modules(face.__path__, face.__name__ + '.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "assert len(names) >= 8, names\n"
        "loaded = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
