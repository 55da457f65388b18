"""`python -m coil ARGS`: the coil command-line tool (`coil check|compile|run ...`).

The CLI is a native program installed beside the Python package: in the environment's bin/
folder by `pip install`, or in a build tree's tools/ folder ($COIL_BIN names it explicitly)."""
import os
import shutil
import sys
from pathlib import Path


def _find_cli():
    candidates = [os.environ.get("COIL_BIN"), str(Path(sys.executable).parent / "coil"), shutil.which("coil")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def main():
    cli = _find_cli()
    if cli is None:
        sys.exit("coil: the command-line tool is not installed beside this Python package (looked in $COIL_BIN, "
                 f"{Path(sys.executable).parent} and the PATH); reinstall coil with `pip install`")
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
