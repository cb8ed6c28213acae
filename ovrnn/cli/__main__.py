"""``python -m ovrnn.cli``, the same as ``ovrnn`` and ``python -m ovrnn``."""

import sys

from . import main

sys.exit(main())
