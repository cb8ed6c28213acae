"""What the command line says on stderr besides its results: notes, and the one error line."""

from __future__ import annotations

import sys

from .. import progress


def notes(lines) -> None:
    """One ``note:`` line each, unless --quiet."""
    if progress.quiet():
        return
    for n in lines:
        print(f"note: {n}", file=sys.stderr)


def error(message: str) -> None:
    """The one ``error:`` line of a failed command, on one line whatever the message holds."""
    try:
        print("error: " + " ".join(message.split()), file=sys.stderr)
    except OSError:  # stderr closed too: nothing to tell
        pass
