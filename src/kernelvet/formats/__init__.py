"""Loaders for the file formats kernelvet reads. The judge uses them on trusted problem files
and, statically (AST only, never executed), on candidate files."""
