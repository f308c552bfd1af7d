"""The exec sandbox: find bubblewrap, check that it works here, and build its command line.

Inside the sandbox the workspace is the only writable place that outlives the call,
except toolbridge's own folder in it (``.toolbridge/``), which is mounted read-only.
The rest of the file system is bound read-only, and the places where secrets and
live services usually are (``/home``, ``/root``, ``/run`` with its sockets, ``/tmp``)
are replaced by empty private directories. The command gets fresh PID, IPC, UTS,
user, cgroup and (unless network is allowed) network namespaces, a /proc that shows
only its own processes, no capabilities; when its first process exits, the kernel
kills everything else in the namespace.

One sandbox serves one context session (`server_argv`): its first process is the exec
supervisor server (``toolbridge/execution/supervisor.py``), which starts every command of that
session inside it and ends, taking the namespace with it, as soon as toolbridge closes
its socket or exits, however it exits.
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolbridge.core.errors import ToolConfigError
from toolbridge.security.control import control_folder

__all__ = [
    "HIDDEN_PATHS",
    "SANDBOX_HOME",
    "BubblewrapSandbox",
    "SandboxMode",
    "SandboxUnavailable",
    "find_sandbox",
    "interpreter_files",
]

logger = logging.getLogger(__name__)

SandboxMode = Literal["auto", "bwrap", "none"]

HIDDEN_PATHS = ("/home", "/root", "/run", "/tmp", "/var/tmp")
"""Replaced by empty, private, writable directories (tmpfs) inside the sandbox."""

SANDBOX_HOME = "/tmp/toolbridge-home"
"""HOME inside the sandbox: on its private /tmp, gone when the call ends."""

# Kept visible when the network is allowed: name resolution through systemd-resolved.
_NETWORK_PATHS = ("/run/systemd/resolve",)
_PROBE_SECONDS = 10.0


class SandboxUnavailable(ToolConfigError):
    """``sandbox = "bwrap"`` was asked for, but bubblewrap is missing or cannot run here."""


@dataclass(frozen=True, slots=True)
class BubblewrapSandbox:
    """A working bubblewrap and the policy of one tool: network, and extra readable paths."""

    executable: str
    network: bool = False
    read_paths: tuple[Path, ...] = ()

    def argv(
        self,
        command: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        control: bool = True,
        die_with_parent: bool = True,
        extra_read: Sequence[Path] = (),
    ) -> list[str]:
        """The bubblewrap command line that runs `command` in `cwd` with `workspace` writable.

        Order matters: later mounts go on top of earlier ones, so the workspace (and
        the readable extras) stay visible even when they lie under a hidden path.
        `control=False` (the probe's) leaves toolbridge's folder alone: it is made only
        when a real command is about to run.
        """
        hidden = [p for p in HIDDEN_PATHS if os.path.isdir(p) and not os.path.islink(p)]
        shown = [
            *(_NETWORK_PATHS if self.network else ()),
            *map(str, self.read_paths),
            *map(str, extra_read),
        ]
        root = str(workspace)
        # toolbridge's own folder is made (checked: a real directory, not a link) before
        # the command starts and mounted read-only over the writable workspace: the
        # command can neither change it nor, when it was missing, create it or a link
        # in its place. A mount point cannot be removed or renamed either.
        protect = ["--ro-bind", *[str(control_folder(workspace))] * 2] if control else []
        return [
            self.executable,
            *(["--die-with-parent"] if die_with_parent else []),
            "--new-session", "--unshare-all",
            *(["--share-net"] if self.network else []),
            "--cap-drop", "ALL",
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            *(arg for path in hidden for arg in ("--tmpfs", path)),
            *(arg for path in shown for arg in ("--ro-bind-try", path, path)),
            "--dir", SANDBOX_HOME,
            "--bind", root, root,
            *protect,
            "--chdir", str(cwd),
            "--",
            *command,
        ]  # fmt: skip

    def server_argv(self, workspace: Path, server: Path) -> list[str]:
        """The command line of a session's sandbox: the supervisor server `server` its init.

        The server runs with this Python: its files (`interpreter_files`) are shown
        read-only when they lie under a hidden path (a pyenv in a home directory), and
        nothing else of that path: a Python installed with ``--prefix=$HOME`` would
        otherwise show the whole home directory, ``~/.ssh`` included. Not ``--die-with-parent``:
        that follows the thread that started bubblewrap, not the process; the server ends
        at end-of-file on its socket instead, which this process's exit closes too.
        """
        python = Path(os.path.realpath(sys.executable))
        source = server.read_text()
        argv = self.argv(
            [str(python), "-I", "-S", "-c", source],
            workspace=workspace,
            cwd=workspace,
            die_with_parent=False,
            extra_read=_hidden(interpreter_files()),
        )
        # The server is the namespace's init: no signal from a command inside reaches it
        # (the kernel drops those init has no handler for), and when it ends, all end.
        argv.insert(1, "--as-pid-1")
        return argv

    def probe(self, shell: str, workspace: Path) -> str | None:
        """Run an empty command in the sandbox; None if it works, else bubblewrap's complaint."""
        argv = self.argv([shell, "-c", ":"], workspace=workspace, cwd=workspace, control=False)
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        if done.returncode == 0:
            return None
        detail = done.stderr.decode(errors="replace").strip()
        return detail or f"it exited with code {done.returncode}"


def interpreter_files() -> list[Path]:
    """What this Python needs to run the supervisor server (``-I -S``, standard library
    only): its executable, its shared library if it has one, its standard library and
    the folder of its compiled modules; real paths."""
    files = [sys.executable, os.path.dirname(os.__file__), os.path.dirname(select.__file__)]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        library = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
        libdir = sysconfig.get_config_var("LIBDIR")
        if library and libdir:
            files.append(os.path.join(libdir, library))
    return sorted({Path(os.path.realpath(f)) for f in files})


def _hidden(paths: Sequence[Path]) -> list[Path]:
    """Those of `paths` that the sandbox would hide."""
    return [p for p in paths if any(p.is_relative_to(h) for h in HIDDEN_PATHS)]


def find_sandbox(
    mode: SandboxMode,
    workspace: Path,
    *,
    shell: str = "/bin/sh",
    network: bool = False,
    read_paths: Sequence[str] = (),
) -> BubblewrapSandbox | None:
    """The sandbox `mode` asks for: bubblewrap when it is installed and works, else None.

    "Works" is checked by running an empty command in it over `workspace`, once.
    ``"none"`` is always None; ``"auto"`` is None (with a warning in the log) when
    bubblewrap is missing or cannot create its namespaces here; ``"bwrap"`` raises
    `SandboxUnavailable` in those cases, saying why and what to do.
    """
    if mode == "none":
        return None
    executable = shutil.which("bwrap")
    if executable is None:
        if mode == "bwrap":
            raise SandboxUnavailable(
                "exec is configured with sandbox = 'bwrap' but bubblewrap is not installed; "
                "install it (e.g. apt-get install bubblewrap) or set sandbox = 'auto' or 'none'"
            )
        logger.info("bubblewrap is not installed: exec runs without a sandbox")
        return None
    sandbox = BubblewrapSandbox(
        executable,
        network=network,
        read_paths=tuple(Path(os.path.expanduser(p)).resolve() for p in read_paths),
    )
    problem = sandbox.probe(shell, workspace)
    if problem is None:
        return sandbox
    if mode == "bwrap":
        raise SandboxUnavailable(
            f"exec is configured with sandbox = 'bwrap' but bubblewrap cannot run here: "
            f"{problem}. Allow unprivileged user namespaces (or run bwrap setuid), or set "
            "sandbox = 'auto' or 'none'"
        )
    logger.warning("bubblewrap cannot run here, exec runs without a sandbox: %s", problem)
    return None
