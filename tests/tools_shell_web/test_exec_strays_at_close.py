"""A tool closed just after a call whose supervisor was killed leaves no process behind.

When a command kills its call supervisor (``kill -9 $PPID``), its descendants come back
to the supervisor server one level at a time (each lands there as its parent dies, and
the server kills it). Closing the tool ends the server; the server used to exit at the
end of its input at once, so the levels not yet back lived on (reparented to init),
though the call had ended: on a loaded machine `test_exec_containment`'s orphan
survived that way. Here the command stops the server (SIGSTOP) before it kills its
supervisor, and the test lets the server go on only once the tool is closing, so the
server sees the end of its input and its strays at the same moment, every run.
Real processes: a chain of setsid'd shells under an unsandboxed exec.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

from toolbridge import ToolContext, ToolRegistry
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
LEVELS = 3

# Level n writes its pid, starts level n-1 in a session of its own, and waits for it;
# level 0 sleeps. Each level reaches the server only once the level above it has died.
CHAIN = """\
n=$1
echo $$ > level$n.tmp && mv level$n.tmp level$n.pid
if [ "$n" -eq 0 ]; then exec sleep 300; fi
setsid sh ./chain.sh $((n - 1)) &
wait
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def dies(pid: int) -> bool:
    for _ in range(6000):  # at least 60 s: only a real hang reaches it
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_closing_the_tool_right_after_its_call_supervisor_was_killed_kills_every_level(
    workspace: Path,
) -> None:
    (workspace / "chain.sh").write_text(CHAIN)
    tool = ExecTool(
        workspace,
        ExecConfig.model_validate({"sandbox": "none", "unsandboxed": "allow"}),
        environ=BASE_ENV,
    )
    tools = ToolRegistry([tool], context=ToolContext(workspace=workspace))
    command = (
        f"sh ./chain.sh {LEVELS} > /dev/null 2>&1 & "
        "while [ ! -s level0.pid ]; do :; done; "
        "server=$(cut -d ' ' -f 4 /proc/$PPID/stat); echo $server > server.pid; "
        "kill -STOP $server; kill -9 $PPID; sleep 300"
    )
    result = await tools.execute("exec", {"command": command, "timeout": 60})
    assert result.metadata["exit_code"] == -9
    server = int((workspace / "server.pid").read_text())
    closing = threading.Thread(target=tool.supervisor.close)  # waits for the server to end
    closing.start()
    os.kill(server, signal.SIGCONT)  # its input has ended and its strays wait, together
    await asyncio.to_thread(closing.join)
    pids = [int((workspace / f"level{n}.pid").read_text()) for n in range(LEVELS + 1)]
    ended = await asyncio.gather(*(dies(pid) for pid in pids))
    assert [pid for pid, gone in zip(pids, ended, strict=True) if not gone] == []
