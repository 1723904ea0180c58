"""`kernelvet batch`: many candidates against a problem set, one JSONL record per verdict.

jobs.py names the work (a manifest, or problem and candidate folders paired by name), engine.py
vets it (one warm judge per device, one shared reference per problem), results.py keeps the
verdicts (appended whole, resumable), runner.py ties them together, view.py shows them.
"""

from .engine import Engine, LocalEngine, VetOptions, vet_job
from .jobs import Job, ProblemGroup, from_dirs, from_manifest, group_by_problem
from .results import RECORD_VERSION, Record, ResultsFile, read_records

__all__ = ["Engine", "Job", "LocalEngine", "ProblemGroup", "RECORD_VERSION", "Record", "ResultsFile",
           "VetOptions", "from_dirs", "from_manifest", "group_by_problem", "read_records", "vet_job"]
