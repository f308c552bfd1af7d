"""``python -m toolbridge.cli``."""

from toolbridge.cli import main

main()
