"""`RayBackend`: run prepared calls on a Ray cluster, with the executor's semantics intact.

Only prepared, approved calls travel: the name, the validated arguments, the call id
and the context they run in. Each worker is a Ray actor that builds the tools once, from
an importable `ToolSource`, and runs each call through the same `run_prepared` a local
run uses, so the model reads the same texts; the caller's executor caps, spills and
reports results as it always does. Ray does the placement, transport, resource
accounting and restarts.

The calls that reach the backend together (one scheduling group of one or many
executors) go to each worker in one request; the worker streams back chunks of what
finished, and the progress its calls reported, as it happens.

A journaled call (the executor passes a gated `on_start`) waits on its worker, once it
has a slot there (and, for a sync tool, once one of the worker's threads starts it), for
the caller's go: the journal records it running first, so a call queued on a busy worker
is still queued in the journal, one whose worker died before it
started goes to the next worker, and one whose run stopped before its go was sent is let
go of (queued again). A go that does not come within `go_timeout` (a caller that is
gone) frees the slot: the call is dropped without starting. The executor hears when
each call starts (its `call_started`).
A worker keeps the registries of the contexts it used last (`contexts_per_worker`), not
of every session it ever served.

A call's time limit starts when it reaches the backend, so waiting for a worker counts,
but not the journal's time to record its start (its clock stops meanwhile; a sync
tool's call excepted, as locally: its thread asks once its limit runs); the worker stops
the call at the limit. A call that runs blocking code, stopped or past its limit, or
whose worker does not answer within `grace` seconds after the limit, has its worker
killed and restarted; a sync tool's call that no thread of its worker had started is
dropped there instead (every such call passes a gate of its worker's), and its worker
spared. A call whose worker died is
answered with a ``worker_lost`` error, after retries on a fresh worker when its tool is
read-only or idempotent.

The package, one job per module: `backend` (`RayBackend`: pools by resource shape, a
call's entry, starting and closing), `dispatch` (the caller's side on one event loop:
requests, answers, time limits, cancellation, retries, progress), `calls` (a call's state
on the caller's side), `pool` (the actors of one resource shape, and whether they are
up), `worker` (the actor that builds tools and runs calls), `source` (`ToolSource`),
`wire` (what travels between the two sides) and `errors` (the texts only a cluster has).
"""

from __future__ import annotations

from toolbridge.backends.ray.backend import RayBackend
from toolbridge.backends.ray.source import ToolSource
from toolbridge.backends.ray.wire import RemoteToolException

__all__ = ["RayBackend", "RemoteToolException", "ToolSource"]
