"""``python -m ovrnn``. Python puts the working directory first on sys.path for ``-m``, so a
``numpy.py`` there would be imported instead of numpy: drop it before anything else is imported
(only ``ovrnn`` itself, which has no third-party imports, has been loaded by now)."""

import os
import sys

if not sys.flags.safe_path and sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.curdir):
    del sys.path[0]

from .cli import main

sys.exit(main())
