"""Build the course website from the stored notebooks: ``python tools/build_site.py``.

Writes ``site/_build/html`` (ignored by git): an introduction, the lessons in order, the exercises
(student versions; the worked solutions only with ``--solutions``), the guides of ``docs/``, one
API page per package module (autodoc), and each lesson as a static Reveal.js slide deck under
``slides/``. No notebook is executed: the pages show the outputs stored in the notebooks.

MathJax and Reveal.js are served from the site itself, so it works in a classroom with no
internet. The first build fetches them from the npm registry (``npm pack``), checks them against
the integrity hashes pinned in ``site/conf.py`` and keeps the tarballs in
``~/.cache/minitransformer/site`` (``$XDG_CACHE_HOME`` moves it); later builds are offline. Offline
without that cache, ``--assets DIR`` names a folder holding the two ``.tgz`` files (copied from
a machine that has them), or ``--cdn`` builds a site that loads them from a CDN instead.

The translator page (``translator.html``) runs a trained model in the browser with ONNX Runtime Web
(vendored from npm like the two above): the checkpoint given with ``--translator DIR``, else
``runs/multi30k`` when it holds a trained translator, else ``runs/dates``, else a dates model trained
for the page (about a minute); it is exported once per checkpoint into ``site/_build/translator``.

Needs the ``site`` extra, and the ``export`` extra for the translator: ``pip install -e ".[site,export]"``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import pkgutil
import re
import runpy
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
BUILD = SITE / "_build"
SRC = BUILD / "src"            # the staged Sphinx source (generated, never edited by hand)
DOCTREES = BUILD / "doctrees"  # Sphinx's cache: kept between builds so a rebuild is quick
# Sphinx always writes here: myst-nb keeps the notebooks' images beside it (site/_build/jupyter_execute)
# and the cache refers to them there; --out elsewhere gets a copy.
HTML = BUILD / "html"
CONF = runpy.run_path(str(SITE / "conf.py"))
REPOSITORY_URL: str = CONF["REPOSITORY_URL"].rstrip("/")
REPOSITORY_BRANCH: str = CONF["REPOSITORY_BRANCH"]
VENDORED: dict[str, tuple[str, str]] = CONF["VENDORED"]
VENDOR_DIR: Path = CONF["VENDOR_DIR"]
CDN = {"mathjax": "https://cdn.jsdelivr.net/npm/mathjax@{version}/es5",
       "reveal.js": "https://cdn.jsdelivr.net/npm/reveal.js@{version}",
       "onnxruntime-web": "https://cdn.jsdelivr.net/npm/onnxruntime-web@{version}/dist"}
# The translator page: the exported model (python -m minitransformer export), made once per checkpoint here,
# and the run trained for it when there is no trained translator in runs/.
TRANSLATOR = BUILD / "translator"
TRANSLATOR_RUN = BUILD / "translator-run"
ORT_LOADER = "ort-wasm-simd-threaded.mjs"  # shipped as .mjs.js too: some static hosts serve .mjs with a wrong type
CONTINUED = re.compile(r"^#{1,6} [^\n]*\(continued\)[ \t]*$\n?", re.MULTILINE)


class SiteError(RuntimeError):
    """A build step that cannot go on; its message says what to do."""


# --------------------------------------------------------------------------------------------
# MathJax and Reveal.js: npm tarballs, checked, unpacked into site/_build/vendor
# --------------------------------------------------------------------------------------------

def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minitransformer" / "site"


def npm_integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch_tarball(name: str, version: str, integrity: str, assets: Path | None) -> Path:
    """The checked tarball of ``name@version``: from ``assets``, the cache, or ``npm pack``."""
    filename = f"{name}-{version}.tgz"
    folders = ([assets] if assets else []) + [cache_dir()]
    for folder in folders:
        path = folder / filename
        if path.is_file():
            if npm_integrity(path) != integrity:
                raise SiteError(f"{path} does not match the integrity hash pinned in site/conf.py for "
                                f"{name}@{version} (expected {integrity}): delete it and build again")
            return path
    if assets:
        raise SiteError(f"--assets {assets}: no {filename} there (expected the file that "
                        f"`npm pack {name}@{version}` writes)")
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    hint = (f"Either connect once (the tarball is then cached in {target}), or copy {filename} from a "
            f"machine that has it and pass --assets FOLDER, or build with --cdn (maths and slides then "
            f"need the internet to render).")
    if npm is None:
        raise SiteError(f"{filename} is not cached and npm (Node.js) is not installed to fetch it. {hint}")
    print(f"fetching {name}@{version} from the npm registry ...", flush=True)
    try:
        done = subprocess.run([npm, "pack", f"{name}@{version}", "--pack-destination", str(target),
                               "--loglevel=error"],
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        raise SiteError(f"`npm pack {name}@{version}` did not finish in 180 s (offline?). {hint}") from None
    path = target / filename
    if done.returncode != 0 or not path.is_file():
        lines = [line for line in done.stderr.splitlines() if line.strip() and "Unknown user config" not in line]
        said = "; ".join(lines[:2]) or f"exit {done.returncode}"
        raise SiteError(f"`npm pack {name}@{version}` failed ({said}). {hint}")
    if npm_integrity(path) != integrity:
        path.unlink()
        raise SiteError(f"{name}@{version} from the registry does not match the integrity hash pinned in "
                        f"site/conf.py (expected {integrity}); the download was deleted")
    return path


def unpack(tarball: Path, integrity: str, dest: Path, keep: tuple[str, ...], strip: str = "") -> None:
    """Extract the regular files of ``tarball`` under ``package/<one of keep>`` into ``dest``,
    without the leading ``package/<strip>/``; once per tarball and list."""
    stamp = dest / ".integrity"
    recipe = json.dumps([integrity, keep, strip])
    if stamp.is_file() and stamp.read_text() == recipe:
        return
    if dest.exists():
        shutil.rmtree(dest)
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if not member.isfile() or ".." in parts or parts[:1] != ("package",):
                continue
            inner = Path(*parts[1:]).as_posix()
            if not any(inner == k or inner.startswith(k + "/") for k in keep):
                continue
            out = dest / (inner[len(strip) + 1:] if strip and inner.startswith(strip + "/") else inner)
            out.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            out.write_bytes(source.read())
    stamp.write_text(recipe)


def vendor(assets: Path | None) -> None:
    """Unpack MathJax (the CommonHTML bundle and what it loads on demand) and Reveal.js (dist and
    the speaker-notes plugin) into VENDOR_DIR, which the site serves as ``_static/``."""
    version, integrity = VENDORED["mathjax"]
    unpack(fetch_tarball("mathjax", version, integrity, assets), integrity, VENDOR_DIR / "mathjax",
           ("LICENSE", "es5/tex-mml-chtml.js", "es5/input", "es5/output/chtml", "es5/ui", "es5/a11y", "es5/sre",
            "es5/adaptors"), strip="es5")
    version, integrity = VENDORED["reveal.js"]
    unpack(fetch_tarball("reveal.js", version, integrity, assets), integrity, VENDOR_DIR / "reveal.js",
           ("LICENSE", "dist", "plugin/notes"))
    # ONNX Runtime Web for the translator page: the WebAssembly build alone (the loader, its module, the binary).
    version, integrity = VENDORED["onnxruntime-web"]
    ort = VENDOR_DIR / "onnxruntime-web"
    unpack(fetch_tarball("onnxruntime-web", version, integrity, assets), integrity, ort,
           ("LICENSE", "dist/ort.wasm.min.js", f"dist/{ORT_LOADER}", "dist/ort-wasm-simd-threaded.wasm"), strip="dist")
    shutil.copyfile(ort / ORT_LOADER, ort / f"{ORT_LOADER}.js")


# --------------------------------------------------------------------------------------------
# The translator page: a trained checkpoint, exported to ONNX
# --------------------------------------------------------------------------------------------

def _has_checkpoint(folder: Path) -> bool:
    return (folder / "best.pt").is_file() or any(folder.glob("checkpoint-*.pt"))


def translator_checkpoint(given: Path | None) -> Path:
    """The checkpoint the page ships: ``given``, else runs/multi30k's translator, else the dates run of
    runs/dates, else a dates model trained here (about a minute on a laptop)."""
    if given is not None:
        if not given.exists():
            raise SiteError(f"--translator {given}: no such checkpoint file or run folder")
        return given
    for run in (ROOT / "runs" / "multi30k", ROOT / "runs" / "dates"):
        if _has_checkpoint(run):
            return run
    if not _has_checkpoint(TRANSLATOR_RUN):
        print("training a dates model for the translator page (about a minute) ...", flush=True)
        done = subprocess.run([sys.executable, "-m", "minitransformer", "train", "--out", str(TRANSLATOR_RUN),
                               "--overwrite"], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "TQDM_DISABLE": "1"})
        if done.returncode != 0:
            raise SiteError(f"training the translator page's dates model failed: {done.stderr[-1500:]}")
    return TRANSLATOR_RUN


def export_translator(given: Path | None) -> dict | None:
    """Export the page's checkpoint into TRANSLATOR (again only when the checkpoint or the exporter
    changed); its config, or None when the export extra is not installed (the page then says so)."""
    if any(importlib.util.find_spec(m) is None for m in ("onnx", "onnxscript", "onnxruntime")):
        print('note: no translator on the site: the export extra is missing (pip install -e ".[export]")',
              file=sys.stderr)
        return None
    from minitransformer.export import ExportError, export
    from minitransformer.training.checkpoint import BEST, latest_checkpoint

    place = translator_checkpoint(given)
    path = place / BEST if place.is_dir() and (place / BEST).is_file() else Path(latest_checkpoint(place))
    digest = hashlib.sha256(path.read_bytes() + (ROOT / "minitransformer" / "export.py").read_bytes()).hexdigest()
    stamp = TRANSLATOR / ".source"
    if not (stamp.is_file() and stamp.read_text() == digest):
        print(f"exporting {path} for the translator page ...", flush=True)
        if TRANSLATOR.exists():
            shutil.rmtree(TRANSLATOR)
        try:
            info = export(path, TRANSLATOR, int8=True)
        except ExportError as error:
            raise SiteError(f"the translator page's checkpoint cannot be exported: {error}") from None
        if path.resolve().is_relative_to(ROOT):  # the page names it as the repository does, not this machine
            info["checkpoint"] = path.resolve().relative_to(ROOT).as_posix()
            (TRANSLATOR / "config.json").write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n",
                                                    encoding="utf-8")
        stamp.write_text(digest)
    return json.loads((TRANSLATOR / "config.json").read_text(encoding="utf-8"))


TRANSLATOR_MISSING = """# The translator, live

This build of the site has no translator: it needs the `export` extra (`pip install -e ".[export]"`),
then `python tools/build_site.py` again. See [Shipping the translator](docs/shipping.md).
"""


# --------------------------------------------------------------------------------------------
# Staging: the Sphinx source folder, made from the stored notebooks and the package
# --------------------------------------------------------------------------------------------

class Stage:
    """Writes files under SRC, only when their content changed (Sphinx then re-reads only those),
    and removes whatever an earlier build left there that this one did not write."""

    def __init__(self) -> None:
        self.written: set[Path] = set()

    def write(self, relative: str, content: str | bytes) -> None:
        path = SRC / relative
        data = content.encode() if isinstance(content, str) else content
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        self.written.add(path)

    def prune(self) -> None:
        for path in sorted(SRC.rglob("*"), reverse=True):
            if path.is_file() and path not in self.written:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def public_modules() -> list[str]:
    """``minitransformer`` and every submodule whose name has no leading underscore."""
    package = importlib.import_module("minitransformer")
    names = ["minitransformer"]
    for info in pkgutil.walk_packages(package.__path__, "minitransformer."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


# ``from minitransformer.x import a, b`` on one line, or ``import (a,\n b)`` across lines in parentheses only.
IMPORT = re.compile(r"^\s*from\s+(minitransformer(?:\.[\w.]+)?)\s+import\s+(?:\(([^)#]*)\)|([^#\n]*))"
                    r"|^\s*import\s+(minitransformer(?:\.[\w.]+)?)", re.MULTILINE)


def modules_used(notebook: dict, modules: list[str]) -> list[str]:
    """The package modules whose objects a notebook imports (re-exports resolved to their home)."""
    found: set[str] = set()
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        for match in IMPORT.finditer("".join(cell["source"])):
            if match.group(4):
                found.add(match.group(4))
                continue
            module = importlib.import_module(match.group(1))
            for name in re.split(r"[\s,]+", match.group(2) or match.group(3)):
                name = name.split(" as ")[0].strip()
                if not name or not name.isidentifier():
                    continue
                obj = getattr(module, name, None)
                home = getattr(obj, "__name__", None) if isinstance(obj, type(module)) else getattr(obj, "__module__", None)
                found.add(home if home in modules else match.group(1))
    return sorted(m for m in found if m in modules)


def title_of(notebook: dict, fallback: str) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def exercise_of(lesson: Path) -> Path:
    """The exercise of a lesson: ``exercises/`` under the same name; the second half of a lesson split in two,
    ``NNb_name`` (issue 44), shares the exercise of its first half, ``NN_name``."""
    if re.match(r"\d{2}b_", lesson.name):
        first_half = sorted((ROOT / "notebooks").glob(f"{lesson.name[:2]}_*.ipynb"))
        if first_half:
            return ROOT / "exercises" / first_half[0].name
    return ROOT / "exercises" / lesson.name


def colab_url(relative: str) -> str:
    path = REPOSITORY_URL.split("github.com/", 1)[-1]
    return f"https://colab.research.google.com/github/{path}/blob/{REPOSITORY_BRANCH}/{relative}"


def links_cell(folder: str, name: str, slides: bool, modules: list[str]) -> dict:
    """The markdown cell put under a page's title: download, Colab, slides, package modules."""
    parts = [f"{{download}}`Download the notebook <../_downloads_src/{folder}/{name}.ipynb>`",
             f"<a href=\"{colab_url(f'{folder}/{name}.ipynb')}\">Open in Colab</a>"]
    if slides:
        parts.append(f"<a href=\"../slides/{name}.slides.html\">Slides</a>")
    text = ":::{container} lesson-links\n" + " · ".join(parts)
    if modules:
        text += "\n\nPackage modules used here: " + ", ".join(
            f"{{doc}}`{m} <../api/{m}>`" for m in modules)
    text += "\n:::\n"
    return {"cell_type": "markdown", "id": "site-links", "metadata": {}, "source": text}


# A live control (ipywidgets) needs a running kernel: a page shows, in its place, where to move it.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = {"output_type": "display_data", "metadata": {}, "data": {
    "text/html": '<p class="course-live-control"><em>A live control is here in the notebook: open the lesson '
                 "in JupyterLab (or download it) and move it. The pictures above show the view at a few "
                 "settings.</em></p>",
    "text/plain": "A live control is here in the notebook: open the lesson in JupyterLab and move it."}}


def web_notebook(notebook: dict, header: dict) -> dict:
    """The page version of a stored notebook: the links under the title, and without the
    "(continued)" headings that only the slides need (the text under them stays) and without
    the speaker notes (cells of slide type "notes": the slide decks keep them); a live control's
    output becomes a line that says where to move it (a static page has no kernel to redraw it)."""
    cells = []
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("slideshow", {}).get("slide_type") == "notes":
            continue
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            for name, bundle in cell.get("attachments", {}).items():
                # myst-nb reads no cell attachments: the page carries the image inline, as a notebook does.
                mime, data = next(iter(bundle.items()))
                source = source.replace(f"attachment:{name}", f"data:{mime};base64,{data}")
            stripped = CONTINUED.sub("", source)
            if stripped != "".join(cell["source"]):
                if not stripped.strip():
                    continue
                cell = {**{k: v for k, v in cell.items() if k != "attachments"}, "source": stripped.lstrip("\n")}
        if cell["cell_type"] == "code" and any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", [])):
            cell = {**cell, "outputs": [WIDGET_NOTE if WIDGET_VIEW in o.get("data", {}) else o
                                        for o in cell["outputs"]]}
        cells.append(cell)
    cells.insert(1, header)
    metadata = {k: v for k, v in notebook.get("metadata", {}).items() if k != "widgets"}
    return {**notebook, "metadata": metadata, "cells": cells}


#: The pages of docs/ that the site shows, in the order of its navigation ("Guides"). docs/AUTHORING.md,
#: the checklist for writing a lesson, stays in the repository with the notebooks it is about.
DOCS = ["training", "benchmarks", "ablations", "grading", "what_is_safe", "site", "shipping"]
DOCS_LEFT_OUT = ["AUTHORING"]
_MD_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
_IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")


def repository_url(path: str, folder: bool = False) -> str:
    """The address of a file (or folder) of the repository in the public repository."""
    return f"{REPOSITORY_URL}/{'tree' if folder else 'blob'}/{REPOSITORY_BRANCH}/{path}"


def site_doc(text: str, solutions: bool = False) -> tuple[str, list[str]]:
    """A page of docs/ as the site shows it, and the repository's images it needs staged beside it.

    Its relative links are written for the repository (GitHub shows docs/ as it is). On the site a
    link to another page of :data:`DOCS`, to a lesson or to an exercise stays as it is (the site holds
    them at the same relative place), an image is staged at its own path, and a link to any other file
    of the repository goes to that file in the public repository. Code blocks are left alone.
    """
    images: list[str] = []

    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # a URL, an anchor of the page itself
            return match.group(0)
        file, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join("docs", file)).replace(os.sep, "/")
        on_site = (path.startswith("docs/") and path.endswith(".md") and path[5:-3] in DOCS) or bool(
            re.fullmatch(r"(notebooks|exercises" + ("|solutions" if solutions else "") + r")/[^/]+\.ipynb", path))
        if on_site:
            return match.group(0)
        if path.lower().endswith(_IMAGE_SUFFIXES) and (ROOT / path).is_file():
            images.append(path)
            return match.group(0)
        url = repository_url(path, folder=(ROOT / path).is_dir()) + (f"#{anchor}" if anchor else "")
        return f"{match.group(1)}{url}{match.group(3)}"

    parts = re.split(r"(^```.*?^```[^\n]*$)", text, flags=re.MULTILINE | re.DOTALL)
    return "".join(part if part.startswith("```") else _MD_LINK.sub(fix, part) for part in parts), images


def stage(staged: Stage, solutions: bool, translator: dict | None = None, cdn: bool = False) -> dict[str, list[str]]:
    """Stage every page; returns the lesson names with the modules each uses."""
    modules = public_modules()
    lessons: dict[str, list[str]] = {}
    used_in: dict[str, list[tuple[str, str]]] = {m: [] for m in modules}
    rows = []
    folders = [("notebooks", True), ("exercises", False)] + ([("solutions", False)] if solutions else [])
    for folder, is_lesson in folders:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            raw = path.read_text(encoding="utf-8")
            notebook = json.loads(raw)
            used = modules_used(notebook, modules)
            staged.write(f"_downloads_src/{folder}/{path.name}", raw)
            page = web_notebook(notebook, links_cell(folder, path.stem, is_lesson, used))
            staged.write(f"{folder}/{path.name}", json.dumps(page, indent=1, ensure_ascii=False))
            if is_lesson:
                lessons[path.stem] = used
                title = title_of(notebook, path.stem)
                for m in used:
                    used_in[m].append((path.stem, title))
                exercise = exercise_of(path)
                rows.append(f"| [{title}](notebooks/{path.stem}.ipynb) "
                            f"| {f'[exercise](exercises/{exercise.stem}.ipynb)' if exercise.is_file() else ''} "
                            f"| <a href=\"slides/{path.stem}.slides.html\">slides</a> |")
    if not lessons:
        raise SiteError(f"no lesson notebooks in {ROOT / 'notebooks'} (expected notebooks/*.ipynb)")

    guides = []
    for name in DOCS:
        text, images = site_doc((ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8"), solutions)
        staged.write(f"docs/{name}.md", text)
        for image in images:
            staged.write(image, (ROOT / image).read_bytes())
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), name)
        guides.append(f"[{title}](docs/{name}.md)")

    for page in ("index.md", "setup.md", "exercises/index.md", "solutions/index.md", "api/index.md"):
        if page.startswith("solutions/") and not solutions:
            continue
        text = (SITE / "pages" / page).read_text(encoding="utf-8")
        text = text.replace("{{ lesson_map }}", "| lesson | practice | slides |\n| --- | --- | --- |\n" + "\n".join(rows))
        text = text.replace("{{ guides }}", " · ".join(guides))
        text = text.replace("{{ guides_toctree }}", "\n".join(f"docs/{name}" for name in DOCS))
        text = text.replace("{{ repository_url }}", REPOSITORY_URL)
        if page == "index.md" and solutions:
            text += "\n```{toctree}\n:caption: For instructors\n:hidden:\n\nsolutions/index\n```\n"
        staged.write(page, text)
    if translator is None:
        staged.write("translator.md", TRANSLATOR_MISSING)
    else:
        ort = CDN["onnxruntime-web"].format(version=VENDORED["onnxruntime-web"][0]) + "/" if cdn \
            else "_static/onnxruntime-web/"
        text = (SITE / "pages" / "translator.md").read_text(encoding="utf-8")
        for key, value in (("model_base", "_static/translator/model/"), ("ort_base", ort),
                           ("ort_loader", ORT_LOADER if cdn else f"{ORT_LOADER}.js")):
            text = text.replace("{{ " + key + " }}", value)
        staged.write("translator.md", text)
    for figure in sorted((SITE / "pages" / "images").glob("*")):
        staged.write(f"images/{figure.name}", figure.read_bytes())

    for module in modules:
        lines = [f"# {module}", ""]
        if used_in[module]:
            lines += ["Used in " + ", ".join(f"{{doc}}`{title} <../notebooks/{name}>`"
                                             for name, title in used_in[module]) + ".", ""]
        package = importlib.util.find_spec(module).submodule_search_locations is not None
        # A package's page shows its docstring and lists its submodules; its re-exported names
        # are documented once, on the page of the module that defines them.
        options = ":no-members:" if package else ""
        lines += ["```{eval-rst}", f".. automodule:: {module}", f"   {options}".rstrip(), "```", ""]
        if package:
            children = [m for m in modules if m.rsplit(".", 1)[0] == module]
            if children:
                lines += ["Modules: " + ", ".join(f"{{doc}}`{m} <{m}>`" for m in children) + ".", ""]
        staged.write(f"api/{module}.md", "\n".join(lines))
    return lessons


# --------------------------------------------------------------------------------------------
# Sphinx, then the slide decks
# --------------------------------------------------------------------------------------------

def run_sphinx(out: Path, cdn: bool, jobs: str) -> list[str]:
    from sphinx.cmd.build import build_main

    warnings = BUILD / "warnings.txt"
    recipe = hashlib.sha256((SITE / "conf.py").read_bytes() + Path(__file__).read_bytes()).hexdigest()[:16]
    args = ["-b", "html", "-c", str(SITE), "-d", str(DOCTREES), "-q", "-w", str(warnings), "-j", jobs,
            "-D", f"site_build_hash={recipe}"]
    if cdn:
        args += ["-D", f"mathjax_path={CDN['mathjax'].format(version=VENDORED['mathjax'][0])}/tex-mml-chtml.js"]
    code = build_main(args + [str(SRC), str(out)])
    found = [line for line in warnings.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if warnings.is_file() else []
    if code != 0:
        raise SiteError(f"sphinx-build failed (exit {code}); its messages are above and in {warnings}")
    return found


def build_slides(out: Path, names: list[str], cdn: bool) -> None:
    import nbformat
    from nbconvert import SlidesExporter

    exporter = SlidesExporter(template_name="course_slides", extra_template_basedirs=[str(SITE / "slides")])
    if cdn:
        exporter.reveal_url_prefix = CDN["reveal.js"].format(version=VENDORED["reveal.js"][0])
        exporter.mathjax_url = CDN["mathjax"].format(version=VENDORED["mathjax"][0]) + "/tex-mml-chtml.js"
    else:
        exporter.reveal_url_prefix = "../_static/reveal.js"
        exporter.mathjax_url = "../_static/mathjax/tex-mml-chtml.js"
    exporter.log.setLevel(logging.ERROR)  # not its notice about images without alternative text
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    (out / "slides").mkdir(parents=True, exist_ok=True)
    for name in names:
        notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": name}})
        (out / "slides" / f"{name}.slides.html").write_text(body, encoding="utf-8")


def build(out: Path, solutions: bool = False, cdn: bool = False, assets: Path | None = None,
          jobs: str = "1", translator: Path | None = None) -> list[str]:
    """Build the whole site into ``out``; returns Sphinx's warnings (the build fails on errors)."""
    out = out.resolve()
    if out != HTML and out.exists() and any(out.iterdir()) and not (out / "searchindex.js").is_file():
        raise SiteError(f"--out {out}: the folder exists and does not hold a built site; name a new or empty "
                        "folder (it is replaced at every build)")
    if not cdn:
        vendor(assets)
    elif VENDOR_DIR.exists():
        shutil.rmtree(VENDOR_DIR)  # conf.py serves the vendor folder when it exists
    model = export_translator(translator)
    staged = Stage()
    lessons = stage(staged, solutions, model, cdn)
    staged.prune()
    if HTML.exists():
        shutil.rmtree(HTML)  # nothing stale survives (e.g. solutions from an earlier --solutions build)
    warnings = run_sphinx(HTML, cdn, jobs)
    build_slides(HTML, list(lessons), cdn)
    if model is not None:
        shutil.copytree(TRANSLATOR, HTML / "_static" / "translator" / "model", ignore=shutil.ignore_patterns(".*"))
    if out != HTML:
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(HTML, out)
    return warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Details: docs/site.md.")
    parser.add_argument("--out", type=Path, default=HTML,
                        help="output folder (default: site/_build/html; another folder gets a copy)")
    parser.add_argument("--solutions", action="store_true",
                        help="include the worked solutions (left out by default: instructors grade with them)")
    parser.add_argument("--assets", type=Path, default=None,
                        help="folder holding mathjax-X.tgz and reveal.js-Y.tgz (npm pack's files), for a build offline")
    parser.add_argument("--cdn", action="store_true",
                        help="load MathJax and Reveal.js from a CDN (the site then needs the internet)")
    parser.add_argument("--translator", type=Path, default=None,
                        help="checkpoint or run folder the translator page ships (default: runs/multi30k if it holds "
                             "a trained translator, else runs/dates, else a dates model trained for the page)")
    parser.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    parser.add_argument("-j", "--jobs", default="1", help="Sphinx's parallel jobs (default 1; 'auto' for all cores)")
    args = parser.parse_args(argv)
    if args.assets is not None and not args.assets.is_dir():
        parser.error(f"--assets {args.assets}: not a folder")
    start = time.perf_counter()
    try:
        warnings = build(args.out.resolve(), args.solutions, args.cdn, args.assets, args.jobs, args.translator)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    listed = f", listed in {BUILD / 'warnings.txt'}" if warnings else ""
    cdn = "; MathJax and Reveal.js from a CDN" if args.cdn else ""
    print(f"site written to {args.out} in {time.perf_counter() - start:.0f} s ({len(warnings)} Sphinx warnings{listed}){cdn}")
    return 1 if args.strict and warnings else 0


if __name__ == "__main__":
    sys.exit(main())
