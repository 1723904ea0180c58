"""python -m kernelvet.worker FD: serve the judge on socket FD (used only when no launcher is available)."""

import sys

from .serve import main

main(int(sys.argv[1]))
