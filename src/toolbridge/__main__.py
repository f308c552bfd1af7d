"""``python -m toolbridge``: the command line."""

from toolbridge.cli import main

main()
