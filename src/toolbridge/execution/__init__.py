"""Running prepared calls: the executor and everything one batch of calls passes through.

`executor` runs a batch (`scheduling` decides what runs together, `approval` and
`loop_guard` what may run at all), `outcomes` and `progress` are what it reports,
`result_store` keeps results too long for the model, `tracing` spans, `isolation`
runs a function in a subprocess, and `process` / `supervisor` / `exec_sessions`
run commands so that nothing they start outlives the call.
Import the submodules directly (or the names from `toolbridge`); nothing loads here.
"""
