"""The whole test suite checks every stage's contract: each stage the pipeline runs (in this process
or in a worker it starts) sees checked claim states, and fails on a field its @component does not
declare (workers/state.py, setting stages.check_contracts)."""
import os

os.environ.setdefault("DIALCHECK_CHECK_CONTRACTS", "1")
