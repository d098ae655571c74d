"""``python -m engramdb.cli``: the same as the ``engramdb`` command."""

import sys

from engramdb.cli import main

sys.exit(main())
