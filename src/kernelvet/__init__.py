"""kernelvet: tell a GPU kernel from a prop.

    from kernelvet import vet
    report = vet("candidate.py", "matmul", device="cuda")
    report.verdict, report.failed, report.timing.median_ms

Names load lazily, so the launcher and worker (which import this package) stay light.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "vet": "judge", "Settings": "judge",
    "Problem": "problem", "load_problem": "problem",
    "Report": "report", "Finding": "report", "Status": "report", "Timing": "report", "Verdict": "report",
    "CheckId": "ids", "UsageError": "errors", "HarnessError": "errors",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        import importlib
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'kernelvet' has no attribute {name!r}")
