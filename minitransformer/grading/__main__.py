"""``python -m minitransformer.grading NOTEBOOK_OR_FOLDER ... [--json out.json]``: see :func:`main`."""

import sys

from .notebooks import main

if __name__ == "__main__":
    sys.exit(main())
