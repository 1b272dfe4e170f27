"""Root pytest configuration, for the tests, the lessons and the solutions.

Being at the root, this file also puts the repository's root on ``sys.path`` (pytest's default
``prepend`` import mode), so that tests import ``benchmarks.*`` and ``tools.*`` as packages.

The exercise notebooks hold stubs that raise NotImplementedError by design: learners fill
them in, the grader runs them. Their worked versions in ``solutions/`` are what nbval executes.

The library finds data only through an argument, an environment variable or the user cache. The
course's development layout keeps reference data beside the checkout (``../shared/data``, never
committed): where it exists, it is named through the two variables (unless they are set already),
for the tests and for the lessons that nbval runs.
"""

import os
from pathlib import Path

collect_ignore_glob = ["exercises/*"]

SHARED_DATA = Path(__file__).resolve().parent.parent / "shared" / "data"
if (SHARED_DATA / "multi30k").is_dir():
    os.environ.setdefault("MINITRANSFORMER_MULTI30K_DIR", str(SHARED_DATA / "multi30k"))
if (SHARED_DATA / "tinyshakespeare").is_dir():
    os.environ.setdefault("MINITRANSFORMER_DATA_DIR", str(SHARED_DATA))
