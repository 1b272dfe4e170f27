"""Sphinx configuration of the course website (built by ``python tools/build_site.py``).

The build script stages the stored notebooks, the exercise pages and one API page per package
module into ``site/_build/src`` and runs Sphinx on that folder with this file; nothing here
executes a notebook.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # autodoc imports the package from this checkout

# The public repository: the one place its address is written (the "Open in Colab" links,
# the repository button). The build script reads it from here.
REPOSITORY_URL = os.environ.get("MINITRANSFORMER_REPOSITORY_URL",
                                "https://github.com/minitransformer/minitransformer")
REPOSITORY_BRANCH = os.environ.get("MINITRANSFORMER_REPOSITORY_BRANCH", "main")

# Versions of the JavaScript served from the site itself (no CDN): fetched from the npm registry
# by the build script, checked against these integrity hashes (npm's sha512, base64).
VENDORED = {
    "mathjax": ("3.2.2", "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="),
    "reveal.js": ("4.6.1", "sha512-1CW0auaXNPmwmvQ7TwpszwVxMi2Xr5cTS3J3EBC/HHgbPF32Dn7aiu/LKWDOGjMbaDwKQiGmfqcoGQ74HUHCMw=="),
    # the translator page (translator.md): its WebAssembly build only
    "onnxruntime-web": ("1.30.0", "sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ=="),
}
VENDOR_DIR = HERE / "_build" / "vendor"  # unpacked here by the build script, served as _static/<name>/

project = "minitransformer"
author = "the minitransformer authors"
copyright = "2026, the minitransformer authors"
html_title = "minitransformer: build the Transformer"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.linkcode",
    "sphinx.ext.mathjax",
    "sphinx.ext.githubpages",  # writes .nojekyll, so a Pages branch serves _static/ too
]

# Notebooks are shown as stored: their outputs were committed executed.
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "html_image"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # lessons' slides start at ### under a ## section on purpose

exclude_patterns = ["_build", "_downloads_src", "**.ipynb_checkpoints"]

# Docstrings use Google style with an extra "Shape" section (STYLE.md).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = [("Shape", "notes_style")]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
if VENDOR_DIR.is_dir():
    html_static_path.append(str(VENDOR_DIR))
html_css_files = ["course.css"]
html_js_files = ["course.js"]  # search: lessons first, snippets without the buttons; names break at dots
html_theme_options = {
    "repository_url": REPOSITORY_URL,
    "repository_branch": REPOSITORY_BRANCH,
    "use_repository_button": True,
    "use_download_button": False,  # each lesson has its own link to the original notebook
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_last_updated_fmt = None
html_copy_source = True  # the search results' summaries are read from _sources

# MathJax 3 from this site (the build script unpacks it into VENDOR_DIR/mathjax); --cdn overrides it.
mathjax_path = "mathjax/tex-mml-chtml.js"
mathjax3_config = {
    "tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]]},
    "options": {"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area"},
}


def linkcode_resolve(domain: str, info: dict) -> str | None:
    """The [source] link of an object: its lines in the public repository."""
    if domain != "py" or not info.get("module"):
        return None
    import importlib
    import inspect

    try:
        obj = importlib.import_module(info["module"])
    except ImportError:  # a module that cannot be imported here: no source link
        return None
    for part in info["fullname"].split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    obj = inspect.unwrap(obj)
    try:
        path = Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT)
        lines, first = inspect.getsourcelines(obj)
    except (TypeError, OSError, ValueError):
        return None
    return f"{REPOSITORY_URL}/blob/{REPOSITORY_BRANCH}/{path.as_posix()}#L{first}-L{first + len(lines) - 1}"


# Docstrings are written to be read in a terminal as much as here: a few plain-text habits would
# be read by reStructuredText as markup. Escape them for the page (the docstrings stay as they are).
_LITERAL = re.compile(r"``[^`]+``")  # whole literals, found left to right (never the text between two)
_END_OK = re.compile(r"[\s.,;:!?)\]'\"/-]|$")  # what may follow a literal's end-string
_BARS = re.compile(r"\|(\w+)\|")  # |Y| (a length) is not a substitution


def _unglue(line: str) -> str:
    """``<pad>``=0 becomes ``<pad>``\\ =0: reStructuredText needs a break after a literal's end-string."""
    return _LITERAL.sub(lambda m: m.group(0) + ("" if _END_OK.match(line, m.end()) else "\\ "), line)


def _escape_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        lines[i] = _BARS.sub(r"\\|\1\\|", _unglue(line))


def setup(app) -> None:
    # The build script passes a hash of this file and itself: when either changes, every page is
    # read again (Sphinx alone only notices changed config values and changed sources).
    app.add_config_value("site_build_hash", "", "env")
    app.connect("autodoc-process-docstring", _escape_docstring)
