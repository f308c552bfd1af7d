"""A Ctrl-C that lands where Python ignores exceptions (a garbage-collector callback, a
``__del__``, a weak reference's callback: "Exception ignored in ...") was lost: the
command went on and ended with exit 0. It ends the command with exit 130, as any Ctrl-C.

The signal is real: sent from a garbage-collector callback, which Python runs during the
command's own imports, so its `KeyboardInterrupt` is raised where it is ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_behaves import default_ctrl_c

REPO = Path(__file__).resolve().parents[2]

HARNESS = """
import gc, signal, sys
import toolbridge.cli

def once(phase, info):
    if phase == "start" and once in gc.callbacks:
        gc.callbacks.remove(once)
        signal.raise_signal(signal.SIGINT)  # its KeyboardInterrupt is raised in here

gc.callbacks.append(once)
sys.argv = ["toolbridge", "tools", "--json"]
toolbridge.cli.main()
"""


def test_a_ctrl_c_raised_where_python_ignores_it_still_ends_the_command_with_130(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", HARNESS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        preexec_fn=default_ctrl_c,  # a suite run in the background inherits it ignored
    )
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
