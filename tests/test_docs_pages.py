"""The README and the pages of docs/: short, linked, on the website, and every measured figure from the data.

* Every generated block of README.md and docs/*.md (``<!-- generated: NAME -->`` ... and the ablation
  results of docs/ablations.md) is what ``python -m tools.write_docs`` writes from the committed records
  in benchmarks/results/ and the lessons' stored outputs; the check fails on a stale page, on a changed
  record and on broken markers (shown here on a copy of the pages and the data).
* Outside those blocks no measured figure is typed by hand: no time, share, ratio, size, speed, BLEU
  or perplexity in the prose of the README and of the pages this project writes about its measurements.
* The README is at most 200 lines, and every relative link of the README and of docs/ resolves, anchors
  included.
* Every page of docs/ is a page of the website (tools/build_site.py), with its links rewritten so that
  they resolve there too.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
# Pages whose figures are not measurements of this kind: what_is_safe.md states limits and the outcomes of
# the grader's hostile tests (grader/tests/test_grading_hostile.py checks them), AUTHORING.md the rules for a lesson.
NOT_SCANNED = {"what_is_safe.md", "AUTHORING.md"}


def write_docs() -> ModuleType:
    return importlib.import_module("tools.write_docs")


# --- Generated blocks: written from the data, and the check can fail ------------------------------------------


def test_every_page_is_up_to_date_with_its_data() -> None:
    stale, problems = write_docs().run(ROOT, check=True)
    assert not problems, "\n".join(problems)
    assert not stale, ("pages out of date with benchmarks/results/ or the stored lessons: " + "; ".join(stale)
                       + ". Run `python -m tools.write_docs` and commit the pages.")


def _copy(tmp_path: Path) -> Path:
    """The pages, the committed records and the stored lessons, copied under ``tmp_path``."""
    (tmp_path / "docs").mkdir()
    shutil.copy(README, tmp_path / "README.md")
    for page in DOCS:
        shutil.copy(page, tmp_path / "docs" / page.name)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    for record in (ROOT / "benchmarks" / "results").glob("*.json*"):  # .json and .jsonl
        shutil.copy(record, tmp_path / "benchmarks" / "results" / record.name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".*", "*.css"))
    return tmp_path


def test_the_check_catches_a_stale_page_and_changed_data(tmp_path: Path) -> None:
    tool = write_docs()
    root = _copy(tmp_path)
    tool.run(root)  # the copy as the data gives it (a lesson may have been executed since the last commit)
    assert tool.run(root, check=True) == ([], [])

    # A figure typed over inside a block.
    page = root / "docs" / "benchmarks.md"
    text = page.read_text(encoding="utf-8")
    block = re.search(r"<!-- generated: compare-torch .*?<!-- /generated: compare-torch -->", text, re.DOTALL)
    assert block and "**1.13x**" in block.group(0)
    page.write_text(text.replace("**1.13x**", "**1.31x**", 1), encoding="utf-8")
    stale, problems = tool.run(root, check=True)
    assert stale == ["docs/benchmarks.md (compare-torch)"] and not problems
    tool.run(root)
    assert page.read_text(encoding="utf-8") == text

    # A record re-made: the check fails until the pages are written again, which then give the new figure.
    path = root / "benchmarks" / "results" / "compare-cpu.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    first = record["records"][0]
    first["ours"] = first["torch"] * 1.4321
    first["ratio"] = 1.4321
    path.write_text(json.dumps(record), encoding="utf-8")
    stale, _ = tool.run(root, check=True)
    assert stale == ["docs/benchmarks.md (compare-torch)"], stale
    tool.run(root)
    assert "**1.43x**" in page.read_text(encoding="utf-8")

    # The translator's record feeds the README and two pages.
    path = root / "benchmarks" / "results" / "multi30k-cpu.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["summary"]["test_beam4"]["mean"] += 1.0
    path.write_text(json.dumps(record), encoding="utf-8")
    stale, _ = tool.run(root, check=True)
    assert sorted(stale) == ["README.md (setup-times)", "docs/benchmarks.md (translator)",
                             "docs/training.md (translator-headline)"], stale

    # The recipe search's trials, one JSON line each.
    tool.run(root)
    path = root / "benchmarks" / "results" / "multi30k-recipes.jsonl"
    trials = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    trials[0]["valid"]["greedy"] += 1.0
    path.write_text("".join(json.dumps(t) + "\n" for t in trials), encoding="utf-8")
    stale, _ = tool.run(root, check=True)
    assert stale == ["docs/benchmarks.md (recipe-search)"], stale

    # The ablation table, between the markers of tools/write_docs.py.
    tool.run(root)
    page = root / "docs" / "ablations.md"
    text = page.read_text(encoding="utf-8")
    table = text.index("| baseline")
    page.write_text(text[:table] + text[table:].replace(" ± ", " +- ", 1), encoding="utf-8")
    stale, _ = tool.run(root, check=True)
    assert stale == ["docs/ablations.md (ablation results)"], stale


def test_the_check_names_broken_markers(tmp_path: Path) -> None:
    tool = write_docs()
    root = _copy(tmp_path)
    page = root / "docs" / "training.md"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("<!-- /generated: dates-time -->", "", 1)
                    + "\n<!-- generated: no-such-block -->\n<!-- /generated: no-such-block -->\n", encoding="utf-8")
    _, problems = tool.run(root, check=True)
    assert any("'dates-time' has no closing line" in p for p in problems), problems
    assert any("unknown block 'no-such-block'" in p for p in problems), problems
    (root / "docs" / "benchmarks.md").unlink()
    _, problems = tool.run(root, check=True)
    assert any("docs/benchmarks.md is missing" in p for p in problems), problems


def test_the_ablation_page_option_keeps_its_old_name() -> None:
    """``python -m benchmarks.ablations --page docs/ablations.md`` writes the block; ``--readme`` still works."""
    tool = write_docs()
    text = (ROOT / "docs" / "ablations.md").read_text(encoding="utf-8")
    assert text.count(tool.PAGE_START) == 1 and text.count(tool.PAGE_END) == 1
    assert "--page docs/ablations.md" in tool.PAGE_START
    source = (ROOT / "benchmarks" / "ablations.py").read_text(encoding="utf-8")
    assert re.search(r'add_argument\("--page", "--readme", dest="page"', source), "--page, with --readme as its alias"


def test_update_page_rewrites_only_the_block(tmp_path: Path) -> None:
    from minitransformer.ablation_report import page_section

    tool = write_docs()
    page = tmp_path / "ablations.md"
    start, end = tool.PAGE_START, tool.PAGE_END
    page.write_text(f"# Title\n\nprose\n\n{start}\nold\n{end}\n\nmore prose\n", encoding="utf-8")
    report = tool.Data(ROOT).ablations
    assert tool.update_ablation_page(page, report)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nprose\n\n") and text.endswith(f"{end}\n\nmore prose\n")
    assert page_section(report) in text
    assert not tool.update_ablation_page(page, report)
    page.write_text("no markers")
    with pytest.raises(ValueError, match="no generated ablation section"):
        tool.update_ablation_page(page, report)


# --- No hand-typed measurement ---------------------------------------------------------------------------------

MEASURED = re.compile(r"""
    \b\d[\d,]*(?:\.\d+)?\s?(?:ms|s|seconds?|min|minutes?|h|hours?)\b(?!-)       # a time
  | \b\d[\d,]*(?:\.\d+)?\s?%                                                    # a share
  | \b\d+\.\d+\s?x\b                                                            # a ratio
  | \b\d[\d,]*(?:\.\d+)?\s?(?:[KMG]i?B)\b                                        # a size
  | \b\d[\d,]*(?:\.\d+)?\s(?:\w+\s){0,4}(?:per\ second|/s)\b                    # a speed
  | \bBLEU\s(?:of\s)?\d+\.\d | \b\d+\.\d\s(?:BLEU|with\ beam|greedy)\b          # a score
  | \bperplexity\s(?:of\s)?\d
""", re.VERBOSE)


def _prose(text: str) -> str:
    """``text`` without its generated blocks, the ablation results, code, comments and link targets."""
    tool = write_docs()
    text = tool.BLOCK.sub("", text)
    text = re.sub(re.escape(tool.PAGE_START) + ".*?" + re.escape(tool.PAGE_END), "", text, flags=re.DOTALL)
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def _typed_figures(text: str) -> list[str]:
    return [" ".join(m.group(0).split()) for m in MEASURED.finditer(" ".join(_prose(text).split()))]


@pytest.mark.parametrize("path", [p for p in PAGES if p.name not in NOT_SCANNED], ids=lambda p: p.name)
def test_no_measured_figure_is_typed_outside_a_generated_block(path: Path) -> None:
    found = _typed_figures(path.read_text(encoding="utf-8"))
    assert not found, (f"{path.relative_to(ROOT)} types measured figures by hand: {found}. Write them from the data "
                       "in a block of tools/write_docs.py, or leave them out.")


@pytest.mark.parametrize("text", [
    "The default run takes about 30 seconds on 2 cores.", "It took 31 s.", "a download of 190 MB",
    "2.7 GB to download", "ours is 1.13x faster", "test BLEU 37.7 with beam 4", "scored 37.7 greedy",
    "about 900 source and target tokens per second", "96.3% accuracy", "41 minutes of wall time",
    "validation perplexity 12.94",
])
def test_the_typed_figure_check_can_fail(text: str) -> None:
    assert _typed_figures(text)


def test_the_typed_figure_check_leaves_settings_and_generated_blocks_alone() -> None:
    text = ("A 50-minute class; d_model 256, 3+3 layers, 4 heads, 10 epochs of 4,096 tokens, warm-up 400, "
            "factor 0.5, beam 4, 2 seeds, 7.6M parameters, Python 3.10, years 1900-2099, `--time-budget 540 s`.\n\n"
            "<!-- generated: dates-time (python -m tools.write_docs) -->\nIt took 31 s.\n"
            "<!-- /generated: dates-time -->\n\n```bash\nsleep 30s  # 50%\n```\n")
    assert _typed_figures(text) == []


# --- The README: short, and every link resolves ----------------------------------------------------------------


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; keep it at 200 or fewer and move the rest to docs/"
    text = "\n".join(lines)
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    order = ["Set up", "Open the course", "The lessons", "Exercises and grading", "Test"]
    assert [h for h in headings if h in order] == order, headings
    for page in DOCS:
        if page.name != "AUTHORING.md":
            assert f"(docs/{page.name})" in text, f"the README should link docs/{page.name}"
    assert "(what the lesson builds)" not in text, "a row of the lesson table has no 'what you build' yet"


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<img\s[^>]*\bsrc=\"([^\"]+)\"")


def _slug(heading: str) -> str:
    """The anchor GitHub (and MyST's heading anchors) give a heading."""
    heading = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.MULTILINE)}


def _link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of a markdown page that name no file, leave the repository, or name a missing heading."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    problems = []
    for match in _LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # a URL
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path.resolve()
        where = path.relative_to(root)
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where}: {target} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where}: {target} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            problems.append(f"{where}: {target}: {resolved.name} has no heading with the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    problems = _link_problems(path)
    assert not problems, "\n".join(problems)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## How long `train` takes\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [ok](docs/a.md#how-long-train-takes) [gone](docs/b.md) [anchor](docs/a.md#nothing) "
        "[out](../../etc/passwd) ![picture](docs/x.png) <img src=\"docs/y.svg\"> [web](https://example.org/z)\n"
        "```\n[in code](nowhere.md)\n```\n")
    problems = _link_problems(tmp_path / "README.md", root=tmp_path)
    assert len(problems) == 5, problems
    for word in ("docs/b.md does not exist", "#nothing", "leaves the repository", "docs/x.png", "docs/y.svg"):
        assert any(word in p for p in problems), (word, problems)


# --- The pages of docs/ on the website -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_site() -> ModuleType:
    return importlib.import_module("tools.build_site")


def test_every_docs_page_is_a_page_of_the_site(build_site: ModuleType) -> None:
    assert sorted(build_site.DOCS + build_site.DOCS_LEFT_OUT) == sorted(p.stem for p in DOCS), (
        "tools/build_site.py should list every page of docs/ in DOCS (or, with a reason, DOCS_LEFT_OUT)")
    index = (ROOT / "site" / "pages" / "index.md").read_text(encoding="utf-8")
    assert "{{ guides }}" in index and "{{ guides_toctree }}" in index
    for name in build_site.DOCS:
        first = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# "), f"docs/{name}.md should open with its title ('# ...'): the site's page title"


def test_the_site_rewrites_the_links_of_docs_pages(build_site: ModuleType) -> None:
    url = build_site.REPOSITORY_URL
    for name in build_site.DOCS:
        text, images = build_site.site_doc((ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8"))
        text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        for match in _LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if target.startswith(url):  # a file of the repository, shown in the public repository
                path = target[len(url):].split("/", 3)[-1].split("#")[0]
                assert (ROOT / path).exists(), (name, target)
                continue
            if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
                continue
            # What stays relative must be on the site, at the place the staged page's folder (docs/) finds it.
            path = os.path.normpath(os.path.join("docs", target.split("#")[0])).replace(os.sep, "/")
            on_site = (path.startswith("docs/") and path[5:-3] in build_site.DOCS) or path in images or (
                re.fullmatch(r"(notebooks|exercises)/[^/]+\.ipynb", path) and (ROOT / path).is_file())
            assert on_site, (name, target)
    text, images = build_site.site_doc(
        "[a](training.md#threads) [b](../notebooks/07_training.ipynb) [c](../exercises/README.md#for-instructors) "
        "![d](../benchmarks/results/multi30k-cpu.png) [e](../benchmarks/ablations.py) [f](../solutions/x.ipynb) "
        "[g](https://example.org) [h](#here) [i](../minitransformer)\n```\n[j](../README.md)\n```\n")
    assert "[a](training.md#threads)" in text and "[b](../notebooks/07_training.ipynb)" in text
    assert f"[c]({url}/blob/{build_site.REPOSITORY_BRANCH}/exercises/README.md#for-instructors)" in text
    assert images == ["benchmarks/results/multi30k-cpu.png"] and "![d](../benchmarks/results/multi30k-cpu.png)" in text
    assert f"[e]({url}/blob/" in text and f"[f]({url}/blob/" in text and f"[i]({url}/tree/" in text
    assert "[g](https://example.org)" in text and "[h](#here)" in text and "[j](../README.md)" in text


def test_the_site_links_each_exercise_to_the_module_of_its_checks(build_site: ModuleType) -> None:
    # An import in parentheses spans lines; one without stops at its line (the next import is not its names).
    modules = build_site.public_modules()
    exercise = json.loads((ROOT / "exercises" / "03_self_attention.ipynb").read_text(encoding="utf-8"))
    used = build_site.modules_used(exercise, modules)
    assert {"minitransformer.checks.lesson03", "minitransformer.checks.questions", "minitransformer.utils"} <= set(used)
    assert not any(m.startswith("minitransformer_grader") for m in modules), "the site documents the learner's package"


def test_the_docs_tool_lists_its_blocks() -> None:
    done = subprocess.run([sys.executable, "-m", "tools.write_docs", "--list"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    for name, block in write_docs().BLOCKS.items():
        assert re.search(rf"^{re.escape(name)}\s+{re.escape(block.page)}\s+\S", done.stdout, flags=re.MULTILINE), name
