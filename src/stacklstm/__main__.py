"""``python -m stacklstm``: the command line (see ``python -m stacklstm --help``)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
