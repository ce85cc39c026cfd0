"""``python -m heterarchy sweep ...``: the package's commands (``heterarchy sweep`` runs this)."""

import sys

from .sweep import main

if __name__ == "__main__":
    if sys.argv[1:2] != ["sweep"]:
        print("usage: python -m heterarchy sweep SPEC.toml [--scheduler ADDRESS] [-o OUTPUT]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:]))
