"""Small problems in the KernelBench file format, one per op family of its level 1 and a few level-2
fusions with weights: data for tests/test_library_policy.py."""
