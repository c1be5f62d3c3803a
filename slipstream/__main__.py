"""``python -m slipstream``: the command line."""

import sys

from slipstream.cli import main

sys.exit(main())
