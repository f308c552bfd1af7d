#!/bin/sh
# `make run`: what toolbridge does with a model's tool calls, one step at a time, over
# this directory as the workspace. No API key: the model responses are the hand-written
# files in examples/ (see examples/README.md).
set -u
toolbridge=${1:-toolbridge}

step() { printf '\n== %s\n' "$*"; }

step "1. The built-in tools, loaded over this directory (the workspace)"
"$toolbridge" tools || exit 1

step '2. One call as a model sent it: read_file with "limit": "5" (a string).' \
     'The schema says integer, so "5" is cast to 5 (the "repaired" line below).'
"$toolbridge" call read_file '{"path": "README.md", "limit": "5"}' || exit 1

step "3. A whole OpenAI response (examples/openai_chat_response.json, hand-written) with four calls:" \
     "a cast (limit \"5\" -> 5), a listing, an invented tool name 'functions.grep_files'" \
     "(answered with: did you mean 'grep'?) and a path outside the workspace (refused)." \
     "One line per call on stderr, then the tool messages in OpenAI's format on stdout."
"$toolbridge" exec examples/openai_chat_response.json
status=$?
if [ "$status" -ne 1 ]; then
    echo "expected exit code 1 (two of the calls fail on purpose), got $status" >&2
    exit 1
fi

step "4. Two calls as Anthropic would send them (examples/anthropic_response.json," \
     "hand-written), answered in Anthropic's format: one user message of tool_result blocks."
"$toolbridge" exec examples/anthropic_response.json || exit 1

step "Done. Exit code 1 in step 3 is expected: 'exec' exits 1 when any call failed."
