"""``python -m normkit ...``: run the normkit command-line tool (lab, bench).

The C++ executable is installed inside the package (``normkit/bin/normkit``)
when the wheel is built with the tools; this module replaces the Python
process with it, so its arguments, output and exit status are the tool's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional


def cli_path() -> Path:
    """The path of the bundled ``normkit`` executable.

    Returns
    -------
    pathlib.Path
        ``<package>/bin/normkit``; it may be missing in a build without the
        tools (see :func:`main`).
    """
    return Path(__file__).resolve().parent / "bin" / "normkit"


def main(argv: Optional[List[str]] = None) -> int:
    """Run the normkit CLI with `argv` (default: ``sys.argv[1:]``).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name, e.g. ``["lab"]``.

    Returns
    -------
    int
        Only on failure to start the tool (2); on success the process
        becomes the tool and never returns.
    """
    args = sys.argv[1:] if argv is None else argv
    exe = cli_path()
    if not exe.is_file():
        sys.stderr.write(
            f"normkit: the command-line tool is not part of this installation ({exe} is missing);\n"
            "build it from the source tree with `cmake --preset release && cmake --build build/release`\n"
        )
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(str(exe), [str(exe), *args])
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
