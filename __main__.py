"""`python -m luminal`: the `luminal` command (for a venv whose scripts are not on PATH)."""

from luminal.cli.app import main

main()
