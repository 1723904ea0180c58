"""`python -m kernelvet ...`, the same as the `kernelvet` command."""

from .cli import entry

entry()
