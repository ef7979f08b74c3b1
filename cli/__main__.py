"""`python -m cli` is `ackorder`."""

import sys

from cli.launch import main

sys.exit(main())
