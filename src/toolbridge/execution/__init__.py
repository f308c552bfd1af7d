"""Running prepared calls: the executor and everything one batch of calls passes through.

`executor` runs a batch: `scheduling` decides what runs together, in order or alone;
`call_path` takes one call from its arguments to its outcome (`approval` and
`loop_guard` say what may run at all, `hooks` steer it, `journaling` claims and records
it, `result_shaping` cuts a long result and `result_store` keeps it); `outcomes` and
`progress` are what it reports, `tracing` spans, `isolation` runs a function in a
subprocess, and `process` / `supervisor` / `exec_sessions` run commands so that
nothing they start outlives the call.
Import the submodules directly (or the names from `toolbridge`); nothing loads here.
"""
