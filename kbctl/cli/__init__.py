"""The command-line interface: a thin layer over the library API (the only place importing typer and rich)."""
