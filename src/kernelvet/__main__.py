"""`python -m kernelvet ...`, the same as the `kernelvet` command."""

import sys

from .cli import main

sys.exit(main())
