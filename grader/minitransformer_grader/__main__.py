"""``python -m minitransformer_grader [grade] FOLDER_OR_NOTEBOOK ...`` or ``... make-exercises``: see :func:`.classroom.main`."""

import sys

from .classroom import main

if __name__ == "__main__":
    sys.exit(main())
