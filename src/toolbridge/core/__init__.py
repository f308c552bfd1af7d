"""The contract and the call's first stages: tools, schemas, the registry, calls, errors.

`tool` and `function_tool` say what a tool is; `schema` compiles its parameters;
`calls` holds what the model sent; `registry` finds the tool and prepares a call
(decode, cast, validate) and runs it; `loader` builds the built-in and plugin tools;
`errors` names every way a call can fail. Nothing here imports a later stage.
Import the submodules directly (or the names from `toolbridge`); nothing loads here.
"""
