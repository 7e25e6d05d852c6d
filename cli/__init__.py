"""The `luminal` command line (typer).  Entry point: `luminal.cli.app:main`."""
