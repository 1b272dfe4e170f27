"""Checks of the course's prose: cross-references between lessons, relative links, unused imports.

* Every "lesson NN" in the markdown of the lessons, exercises, solutions and READMEs names a lesson
  that exists, and a single reference names a lesson that teaches what its sentence talks about.
  Each lesson's topics are the words of its opening cell (title and objectives) and of its row in
  the README's lesson table; a reference whose sentence holds topic words of the course must share
  at least one with the lesson it names. A few topics taught in one lesson only (beam search, the
  attention maps of a trained model, ...) are listed explicitly: a sentence that mentions one of
  them and names another lesson, without naming the one that teaches it, is a stale reference.
* Every relative link in that markdown resolves to a file, from the notebook's own folder: what
  JupyterLab opens when it is started at the repository's root, as the README says.
* Display maths (``$$...$$``) stands in a paragraph of its own, in the notebooks and the markdown pages:
  inside a paragraph the website's MyST reads it as a dollar sign and inline maths (issue 40).
* No lesson and no solution imports a name it never uses (ruff's F401 on the notebooks). The exercises
  are left out: their stubs drop the code that uses the imports the learner is given.
* The exercises' numbers: the points that the headings ("## Task 2: ... (1 point)"), the opening task
  table of a solution and its exercise, and ``exercises/README.md`` give each task are the points it
  is graded with (its check cell's nbgrader metadata), and every "task N" in an exercise or a
  solution, prose or code, names a task of that notebook.
* The set-up commands of the README and of the site's set-up page install PyTorch's CPU build
  before the package (else, on Linux, pip fetches the CUDA build: gigabytes for a CPU course).
* Numbers of the README and of the package's messages that describe a stored lesson output or a
  committed benchmark record are the numbers of that output or record (they went stale before:
  training times and checkpoint counts of lessons 07 and 08, the laptop recipe's minutes). When a
  lesson is executed again or a record re-made, these tests name the sentence to update.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
NOTEBOOKS = LESSONS + EXERCISES + SOLUTIONS
MARKDOWN_FILES = [ROOT / "README.md", ROOT / "exercises" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _lesson_id(path: Path) -> str:
    """"08" for ``08_decoding_and_gpu``; "08b" for the second half of a lesson split in two (issue 44)."""
    return re.match(r"\d{2}b?", path.name).group(0)


LESSON_IDS = sorted(_lesson_id(p) for p in LESSONS)

# Words too common in this course to tell lessons apart, and English function words.
STOPWORDS = set("""
a about after again against all also an and any are as at be because been before being between both but by
can could did do does done each either every for from further had has have having here how if in into is it
its itself just may more most much must no nor not now of off on once one only or other our out over own same
say says see shown shows so some such than that the their them then there these they this those through to
too two three under until up very was we were what when where whether which while who whom why will with
within would yet you your able end by let use uses used using make makes made show build builds built draw
draws drawn compute computes computed computing explain check checks checked follow gets get give gives
lesson lessons model models transformer transformers paper section sections notebook notebooks minute
minutes second seconds cpu core cores laptop run runs running time measured jupyter nbconvert execute
minitransformer package torch pytorch course next first last new small tiny hand learner learners
""".split())

# Topics taught in one lesson only (or in a few), with the lessons that teach them. A sentence that names
# one of them and refers to another lesson, without referring to one of these, is a stale reference.
OWNED_TOPICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "beam search": (r"\bbeam\b", ("08", "08b")),
    "the attention maps of a trained model":
        (r"\bmaps?\b[^.;]*\btrained\b|\btrained\b[^.;]*\bmaps?\b|\bdraws? (?:them|the (?:attention )?maps)\b",
         ("08", "08b")),
    "the heads of a trained model": (r"\btrained\b[^.;]*\b(?:heads?|division of labour)\b"
                                     r"|\b(?:heads?|division of labour)\b[^.;]*\btrained\b|\btrained translation models?\b",
                                     ("08",)),
    "label smoothing and the warm-up": (r"\blabel smoothing\b|\bwarm-?up\b", ("07",)),
    "checkpoints": (r"\bcheckpoints?\b", ("07", "08", "08b")),
}

# What an opening leaves implicit, in the words other cells use for it.
EXTRA_TOPICS = {
    "04": "split the features into blocks, one per head, and cut them back together",
}

_REFERENCE = re.compile(r"\b[Ll]essons?\s+\d{2}b?\b(?:(?:\s*\([^)]*\))?\s*(?:,|and|or|to|-|–)\s*\d{2}b?\b)*")
_NUMBER = re.compile(r"\b\d{2}b?\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*`\"])|\n\s*\n|\n\s*[-*]\s|\n\s*\d+\.\s|\n#+\s")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _markdown_of(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]


def _stems(text: str) -> set[str]:
    """Crude stems: lower case, a plural or -ing/-ed ending removed, the first 5 letters kept."""
    stems = set()
    text = re.sub(r"\\[A-Za-z]+", " ", text)  # LaTeX commands: \text, \sqrt
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in STOPWORDS or len(word) < 3:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        stems.add(word[:5])
    return stems


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s and s.strip()]


@lru_cache(maxsize=1)
def _lesson_topics() -> dict[str, set[str]]:
    """Lesson number ("08", "08b") -> the stems of its opening cell and of its row in the README's lesson table."""
    topics: dict[str, set[str]] = {}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in LESSONS:
        number = _lesson_id(path)
        opening = _markdown_of(path)[0]
        # Sentences about other lessons ("Lesson 08 then translates ...") are not this lesson's topics.
        own = [s for s in _sentences(opening) if not any(n != number for ns, _, _ in _references(s) for n in ns)]
        row = re.search(rf"^\| `{re.escape(path.stem)}` \|([^|]*)\|", readme, flags=re.MULTILINE)
        text = " ".join([*own, path.stem.replace("_", " "), row.group(1) if row else "", EXTRA_TOPICS.get(number, "")])
        topics[number] = _stems(text)
    return topics


def _key_words(topics: dict[str, set[str]]) -> set[str]:
    """Stems that tell lessons apart: taught in one to three lessons, not in most of them."""
    counts: dict[str, int] = {}
    for stems in topics.values():
        for stem in stems:
            counts[stem] = counts.get(stem, 0) + 1
    return {stem for stem, n in counts.items() if n <= 3}


def _references(text: str) -> list[tuple[list[str], bool, str]]:
    """(lesson numbers, is a single reference, its sentence) for every "lesson NN" in ``text``."""
    found = []
    for sentence in _sentences(text):
        for match in _REFERENCE.finditer(sentence):
            reference = re.sub(r"\([^)]*\)", " ", match.group(0))  # "lessons 01 (embeddings) and 02"
            numbers = _NUMBER.findall(reference)
            if re.search(r"\d{2}b?\s*(?:to|-|–)\s*\d{2}", reference):  # a range: every lesson in it
                low, high = numbers[0], numbers[-1]
                numbers = [f"{n:02d}" for n in range(int(low[:2]), int(high[:2]) + 1)] + [
                    n for n in LESSON_IDS if n.endswith("b") and low <= n <= high]  # "00 to 09": 00b and 08b too
            found.append((numbers, len(numbers) == 1, sentence))
    return found


def _reference_problems(text: str, where: str, own: str | None = None) -> list[str]:
    """What is wrong with the lesson references of ``text``; ``own`` is the number of the lesson it belongs to."""
    topics = _lesson_topics()
    key_words = _key_words(topics)
    problems = []
    for numbers, single, sentence in _references(text):
        short = " ".join(sentence.split())[:200]
        missing = [n for n in numbers if n not in topics]
        if missing:
            problems.append(f"{where}: lesson {', '.join(missing)} does not exist: {short!r}")
            continue
        named = {n for other, _, s in _references(sentence) for n in other}
        for topic, (pattern, owners) in OWNED_TOPICS.items():
            # "this lesson" needs no number: a lesson's own topics are fine in its own prose.
            if re.search(pattern, sentence, flags=re.IGNORECASE) and not (named | {own}) & set(owners):
                problems.append(f"{where}: {short!r} names lesson {', '.join(sorted(named))}, but {topic} "
                                f"is taught in lesson {' or '.join(owners)}")
        if not single:
            continue
        # A sentence that talks about topics of the course must share a word with the lesson it names.
        words = _stems(_REFERENCE.sub(" ", sentence))
        if words & key_words and not words & topics[numbers[0]]:
            problems.append(f"{where}: {short!r} names lesson {numbers[0]}, whose opening mentions none of "
                            f"{sorted(words)}")
    return problems


def _all_markdown() -> list[tuple[str, str, str | None]]:
    """(where, markdown text, the number of the lesson it belongs to) for every markdown cell and file."""
    return [(f"{path.relative_to(ROOT)}, markdown {i}", text, _lesson_id(path) if path.suffix == ".ipynb" else None)
            for path in NOTEBOOKS + MARKDOWN_FILES for i, text in enumerate(_markdown_of(path))]


def test_there_is_prose_to_check():
    references = [r for _, text, _ in _all_markdown() for r in _references(text)]
    assert len(LESSONS) >= 10 and len(references) > 100, (len(LESSONS), len(references))
    assert all(len(_lesson_topics()[_lesson_id(p)]) > 10 for p in LESSONS)


def test_every_lesson_reference_names_a_lesson_that_teaches_it():
    problems = [p for where, text, own in _all_markdown() for p in _reference_problems(text, where, own)]
    assert not problems, "stale lesson references:\n" + "\n".join(problems)


@pytest.mark.parametrize("text", [
    # The references that went stale when lesson 07 was split in two (issue 18).
    "The pattern therefore says nothing about English. Lesson 07 draws the maps of a trained model.",
    "Near the ends the lines fade. Trained translation models show the same kind of division of labour, "
    "less tidily (lesson 07).",
    "For real translation the same maps are mostly diagonal, with local detours where the word order differs "
    "between the languages (lesson 07 draws them).",
    "(Real implementations keep the keys. The paper uses beam search instead of greedy choice, section 6.1; "
    "lesson 07.)",
    "Next, lesson 07 trains the full model on real data, with label smoothing, the warm-up schedule and beam search.",
    # A lesson that does not exist, and a topic from another lesson.
    "Lesson 12 trains a model on images.",
    "Without the division by the square root of d_k the softmax saturates (lesson 01).",
])
def test_the_reference_check_can_fail(text: str):
    assert _reference_problems(text, "example")


@pytest.mark.parametrize("text", [
    "Lesson 08 draws the maps of a trained model.",
    "The paper uses beam search instead of greedy choice, section 6.1; lesson 08 builds beam search.",
    "In a trained model each token vector is its embedding (lesson 01) plus its positional encoding (lesson 02).",
    "Lessons 01 to 06 build each box; lesson 07 trains the whole model.",
])
def test_the_reference_check_accepts_right_references(text: str):
    assert not _reference_problems(text, "example")


def _link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``path``'s markdown that name no file, or a file outside ``root``."""
    problems = []
    for i, text in enumerate(_markdown_of(path)):
        text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code blocks hold no links
        for target in _LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:|#|mailto:", target):  # a URL, an anchor
                continue
            file = target.split("#")[0]
            if not (path.parent / file).exists():
                problems.append(f"{path.relative_to(root)}, markdown {i}: {target} does not exist "
                                f"(from {path.parent.relative_to(root)}/)")
            elif not (path.parent / file).resolve().is_relative_to(root.resolve()):
                problems.append(f"{path.relative_to(root)}: {target} leaves the repository")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS + MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path):
    problems = _link_problems(path)
    assert not problems, "\n".join(problems)


def test_the_link_check_can_fail(tmp_path: Path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "00.ipynb").write_text("{}")
    lesson = folder / "00.ipynb"
    cells = [{"cell_type": "markdown", "source": ["[ok](../exercises/00.ipynb) [dead](../exercises/01.ipynb)"]}]
    lesson.write_text(json.dumps({"cells": cells}))
    problems = _link_problems(lesson, root=tmp_path)
    assert len(problems) == 1 and "../exercises/01.ipynb does not exist" in problems[0], problems
    (tmp_path / "README.md").write_text("[outside](../../etc/passwd) [fine](notebooks/00.ipynb)")
    problems = _link_problems(tmp_path / "README.md", root=tmp_path)
    assert len(problems) == 1 and "outside" not in problems[0] and "passwd" in problems[0], problems


SITE_PAGES = sorted((ROOT / "site" / "pages").rglob("*.md"))


def _display_maths_problems(text: str) -> list[str]:
    """The paragraphs of ``text`` that hold display maths (``$$...$$``) and text besides. The site's
    MyST reads such a ``$$`` as a dollar sign and inline maths; JupyterLab and the slides render it."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.MULTILINE | re.DOTALL)  # code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n[ \t]*\n", text)
                  if "$$" in p and re.sub(r"\$\$.*?\$\$", "", p, flags=re.DOTALL).strip()]
    return [p[max(0, p.index("$$") - 80):p.index("$$") + 80] for p in paragraphs]


@pytest.mark.parametrize("path", NOTEBOOKS + MARKDOWN_FILES + SITE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_display_maths_stands_in_its_own_paragraph(path: Path):
    problems = [f"markdown {i}: {p!r}" for i, text in enumerate(_markdown_of(path)) for p in _display_maths_problems(text)]
    assert not problems, ("display maths must have a blank line before and after it (docs/AUTHORING.md):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("text", [
    # Lesson 03 and solution 10 before the fix (issue 40): the site showed raw TeX.
    "so for any constant $m$\n$$\\operatorname{softmax}(s)_i = \\frac{e^{s_i - m}}{\\sum_j e^{s_j - m}}.$$\nWith $m$ ...",
    "* run **P** then a decay as $1/\\sqrt{\\text{step}}$:\n  $$\\text{lrate} = d^{-0.5};$$\n* run **C** ...",
    "summed over the corpus:\n\n$$p_n = \\frac{a}{b}$$\n2. Their **geometric mean**",
    "The rate is $$x^2$$ here.",
])
def test_the_display_maths_check_can_fail(text: str):
    assert _display_maths_problems(text)


def test_the_display_maths_check_accepts_paragraphs_of_maths():
    text = ("so for any constant $m$\n\n$$a = b$$\n$$c = d,\nf = g$$\n\nWith `$$` in code, and\n\n"
            "```latex\ntext $$x$$ text\n```\n* a list item:\n\n  $$x$$\n\n* $y$ and $z$")
    assert not _display_maths_problems(text), _display_maths_problems(text)
    assert not _display_maths_problems("$$x$$\n\ntext") and not _display_maths_problems("text\n\n$$x$$")


def test_readme_opens_jupyterlab_at_the_root():
    # Started inside notebooks/, JupyterLab cannot open ../exercises/: the links above would be dead there.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^jupyter lab\b.*$", readme, flags=re.MULTILINE)
    assert commands, "the README should say how to start JupyterLab"
    for command in commands:
        assert not re.search(r"\bnotebooks/?\s*$", command.split("#")[0].strip()) and "--notebook-dir" not in command, (
            f"{command!r} starts JupyterLab inside a folder; start it at the repository's root")


CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def _install_problems(text: str) -> list[str]:
    """What is wrong with the first set-up commands of a page (the first code block that runs
    ``pip install -e``): the CPU build of PyTorch must come before it, or ``pip install -e`` pulls
    in PyTorch's CUDA build (gigabytes) on a Linux machine without a GPU; and the text must still
    say what a machine with an NVIDIA GPU does."""
    blocks = re.findall(r"^```(?:bash|sh)?\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    setup = next((b for b in blocks if "pip install -e" in b), None)
    if setup is None:
        return ["no code block with `pip install -e`"]
    lines = [line.split("#")[0].strip() for line in setup.splitlines()]
    cpu = next((k for k, line in enumerate(lines) if CPU_TORCH in line), None)
    editable = next(k for k, line in enumerate(lines) if "pip install -e" in line)
    problems = []
    same_line_after = cpu == editable and lines[cpu].index(CPU_TORCH) > lines[cpu].index("pip install -e")
    if cpu is None or cpu > editable or same_line_after:
        problems.append(f"the set-up commands should run `{CPU_TORCH}` before `pip install -e`")
    if "NVIDIA GPU" not in text or "GB" not in text:
        problems.append("the text should say what the CUDA build costs (GB) and that it is the way with an NVIDIA GPU")
    return problems


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "site" / "pages" / "setup.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_setup_installs_the_cpu_build_of_torch_first(path: Path):
    problems = _install_problems(path.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text", [
    "```bash\npython -m venv .venv && pip install -e '.[dev]'\n```\nOn a machine without an NVIDIA GPU: 2.7 GB\n",
    f"```bash\npip install -e '.[dev]'\n{CPU_TORCH}\n```\nNVIDIA GPU, 2.7 GB\n",
    f"```bash\npip install -e '.[dev]' && {CPU_TORCH}\n```\nNVIDIA GPU, 2.7 GB\n",
    f"```bash\n{CPU_TORCH}\npip install -e '.[dev]'\n```\nno word about the other build\n",
])
def test_the_install_check_can_fail(text: str):
    assert _install_problems(text)
    assert not _install_problems(f"```bash\n{CPU_TORCH}\npip install -e '.[dev]'\n```\nNVIDIA GPU: 2.7 GB\n")


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F401",
                           "--output-format", "concise", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("path", LESSONS + SOLUTIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_lessons_and_solutions_import_only_what_they_use(path: Path):
    # An exercise imports what its solution uses: the stubs leave those names unused on purpose.
    result = _ruff(str(path.relative_to(ROOT)))
    assert "No module named ruff" not in result.stderr, "ruff is missing: pip install -e '.[dev]'"
    assert result.returncode == 0, f"{path.name} imports names it never uses:\n{result.stdout}{result.stderr}"


def test_the_unused_import_check_can_fail(tmp_path: Path):
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": ["import math\nimport os\n"]},
             {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["math.pi"]}]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "lesson.ipynb").write_text(json.dumps(notebook))
    result = _ruff(str(tmp_path / "lesson.ipynb"))
    assert result.returncode == 1 and "`os` imported but unused" in result.stdout, result.stdout + result.stderr
    assert "math" not in result.stdout


# --- Numbers that describe stored outputs and committed records -------------------------------------------


def _outputs(path: Path) -> list[str]:
    """The text of each code cell's outputs (streams and text/plain), one string per code cell."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    texts = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        parts = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                 for o in cell.get("outputs", [])]
        texts.append("".join(parts))
    return texts


def _readme() -> str:
    """The README and docs/training.md (where the long material went), every run of white space made one space."""
    return " ".join(" ".join((ROOT / name).read_text(encoding="utf-8")
                             for name in ("README.md", "docs/training.md")).split())


def _stored(lesson: str, pattern: str) -> re.Match:
    text = "\n".join(_outputs(ROOT / "notebooks" / f"{lesson}.ipynb"))
    match = re.search(pattern, text, flags=re.MULTILINE)
    assert match, f"notebooks/{lesson}.ipynb has no stored output matching {pattern!r}"
    return match


ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth"}


def test_the_readme_gives_the_training_times_the_stored_lessons_print():
    said = re.search(r"prints its time \(as stored, lesson 07's cell printed (\d+) s and lesson 08's (\d+) s\)", _readme())
    assert said, "README, 'The lessons': the sentence on the dates model's training time in lessons 07 and 08"
    stored = (_stored("07_training", r"wall-clock time of train\(\)\s+(\d+) s").group(1),
              _stored("08_decoding_and_gpu", r"trained in (\d+) s on this machine").group(1))
    assert said.groups() == stored, (f"README says {said.group(1)} s (lesson 07) and {said.group(2)} s (lesson 08); "
                                     f"the stored lessons print {stored[0]} s and {stored[1]} s")


def test_the_readme_gives_the_checkpoints_of_the_stored_dates_runs():
    said = re.search(r"(\d+) in the run stored in lesson 08, which stops during its (\w+) epoch, "
                     r"(?:as the run stored in lesson 07 does|while the run stored in lesson 07 stops during its "
                     r"(\w+))", _readme())
    assert said, "docs/training.md, 'Stopping, resuming, averaging': the sentence on the checkpoints of the dates run"
    listing = next(text for text in _outputs(ROOT / "notebooks" / "08_decoding_and_gpu.ipynb")
                   if re.search(r"^\s*checkpoint-\d{8}\.pt\s", text, flags=re.MULTILINE))
    kept = re.findall(r"^\s*checkpoint-\d{8}\.pt\s", listing, flags=re.MULTILINE)
    assert int(said.group(1)) == len(kept), f"README says {said.group(1)} checkpoints; lesson 08 lists {len(kept)}"
    for lesson, ordinal in (("08_decoding_and_gpu", said.group(2)), ("07_training", said.group(3) or said.group(2))):
        epoch = float(_stored(lesson, r"epoch\s+(\d+\.\d+)\s+step\s+\d+\b.*\(target reached").group(1))
        assert ORDINALS[int(epoch) + 1] == ordinal, (
            f"docs/training.md says lesson {lesson[:2]}'s run stops during its {ordinal} epoch; it stops at epoch {epoch}")


def test_the_readme_describes_the_base_model_on_a_cpu_from_the_committed_data():
    import torch

    from minitransformer import Transformer, TransformerConfig
    from minitransformer.training.cpu import estimate_cpu_run
    from minitransformer.training.options import RECIPES

    readme = _readme()
    record = json.loads((ROOT / "benchmarks" / "results" / "compare-cpu.json").read_text())
    rate = next(r["ours"] for r in record["records"] if r["size"] == "base" and r["task"] == "train" and r["threads"] == 2)
    said = re.search(r"about ([\d,]+) source and target tokens per second with two threads", readme)
    assert said and int(said.group(1).replace(",", "")) == round(rate, -2), (said, rate)
    gpu_recipe = RECIPES["multi30k"]
    step = 2 * gpu_recipe["batch_tokens"] / rate  # a batch of batch_tokens on each side
    assert f"the GPU recipe's {gpu_recipe['batch_tokens']:,}-token batches takes about {step:.0f} s" in readme
    assert f"its {gpu_recipe['epochs']} epochs about half a day" in readme
    hours = [gpu_recipe["epochs"] * steps * step / 3600 for steps in (115, 120)]  # ~115-120 steps an epoch on Multi30k
    assert all(9 < h < 15 for h in hours), hours
    with torch.device("meta"):  # sizes only, no weights
        parameters = Transformer(TransformerConfig.base(gpu_recipe["vocab_size"])).num_parameters()
    checkpoint = estimate_cpu_run(parameters, 1, 1, 1, None, keep=1, flops=1.0).checkpoint_bytes
    assert f"holds {checkpoint / 1e6:.0f} MB" in readme and f"{parameters / 1e6:.1f}M parameters of the base model" in readme
    assert f"with an {gpu_recipe['vocab_size']:,}-token vocabulary" in readme


def test_the_slow_run_message_gives_the_committed_laptop_record():
    import inspect

    import torch

    from minitransformer.training import cpu

    record = json.loads((ROOT / "benchmarks" / "results" / "multi30k-cpu.json").read_text())
    minutes = record["summary"]["wall_minutes"]
    assert cpu.CPU_SIZED_MINUTES == (round(minutes["min"]), round(minutes["max"])), (cpu.CPU_SIZED_MINUTES, minutes)
    estimate = cpu.CpuEstimate(step_seconds=40.0, steps=1000, run_seconds=40000.0, checkpoint_bytes=1, disk_bytes=2)
    message = cpu.slow_run_message(estimate, 63_000_000, 120, torch.device("cpu"))
    span = "-".join(map(str, dict.fromkeys((round(minutes["min"]), round(minutes["max"])))))  # "30", or "32-50"
    assert f"recipe's: {span} minutes on 2 cores for Multi30k" in message
    parameters = {run["parameters"] for run in record["runs"]}
    assert len(parameters) == 1
    assert f"{parameters.pop() / 1e6:.1f}M parameters" in inspect.getsource(cpu)


# --- The exercises' numbers: points and task references -------------------------------------------------------


def _graded_points(path: Path) -> dict[str, float]:
    """Task number -> its points, from the nbgrader metadata of the notebook's check cells."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    points = {}
    for cell in notebook["cells"]:
        info = cell.get("metadata", {}).get("nbgrader", {})
        if info.get("grade"):
            points[re.sub(r"^task-", "", str(info["grade_id"]))] = info["points"]
    return points


_HEADING = re.compile(r"^#+\s+Tasks?\s+(\d+)((?:\s*(?:,|and)\s*\d+)*)\b[^\n]*\((\d+(?:\.\d+)?) points?( each)?\)\s*$",
                      flags=re.MULTILINE)
_TASK_TABLE = re.compile(r"^\|\s*task\s*\|[^\n]*\|\s*points\s*\|\s*\n\|[- |]+\|\s*\n((?:\|[^\n]*\|\s*(?:\n|$))+)",
                         flags=re.MULTILINE | re.IGNORECASE)
_TASK_REFERENCE = re.compile(r"\b[Tt]asks?\s+(\d+)((?:\s*(?:,|and|or|to)\s*\d+)*)\b(?!\s+of\s+\d{2}\b)")


def _points_problems(text: str, points: dict[str, float], where: str) -> list[str]:
    """Points stated in ``text`` (task headings, the opening table of tasks) that differ from ``points``."""
    problems = []
    for match in _HEADING.finditer(text):
        tasks = [match.group(1), *re.findall(r"\d+", match.group(2))]
        said = float(match.group(3))
        graded = [points.get(t) for t in tasks]
        if None in graded:
            problems.append(f"{where}: the heading {match.group(0).strip()!r} names a task that is not graded")
        elif (all(g == said for g in graded) if match.group(4) else sum(graded) == said) is False:
            problems.append(f"{where}: the heading {match.group(0).strip()!r} says {said:g}, but the task is graded "
                            f"with {' + '.join(f'{g:g}' for g in graded)}")
    for table in _TASK_TABLE.finditer(text):
        listed = {}
        for row in table.group(1).strip().splitlines():
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            listed[cells[0]] = cells[-1]
        for task, said in listed.items():
            if task not in points:
                problems.append(f"{where}: the table of tasks lists task {task}, which is not graded")
            elif float(said) != points[task]:
                problems.append(f"{where}: the table of tasks gives task {task} {said} points; it is graded with "
                                f"{points[task]:g}")
        missing = sorted(set(points) - set(listed), key=int)
        if missing:
            problems.append(f"{where}: the table of tasks leaves out task {', '.join(missing)}")
    return problems


@pytest.mark.parametrize("path", SOLUTIONS + EXERCISES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_points_in_the_prose_are_the_graded_points(path: Path):
    points = _graded_points(path)
    assert points, f"{path.name} has no graded task"
    problems = [p for i, text in enumerate(_markdown_of(path))
                for p in _points_problems(text, points, f"{path.relative_to(ROOT)}, markdown {i}")]
    headed = {t for text in _markdown_of(path) for m in _HEADING.finditer(text)
              for t in [m.group(1), *re.findall(r"\d+", m.group(2))]}
    assert headed == set(points), f"{path.name}: tasks {sorted(set(points) - headed)} have no heading with their points"
    assert not problems, "\n".join(problems)


def _readme_points() -> dict[str, dict[str, float]]:
    """exercises/README.md's table: notebook -> task number -> the points it gives the task."""
    table = {}
    readme = (ROOT / "exercises" / "README.md").read_text(encoding="utf-8")
    for name, tasks, total in re.findall(r"^\| `(\d{2}_\w+)\.ipynb` \| (.*) \| (\d+(?:\.\d+)?) \|\s*$", readme,
                                         flags=re.MULTILINE):
        table[name] = {number: float(said) for number, said in
                       (re.match(r"(\d+) .*\((\d+(?:\.\d+)?)\b[^()]*\)\s*$", item).groups()
                        for item in re.split(r", (?=\d+ )", tasks))}
        assert sum(table[name].values()) == float(total), f"exercises/README.md: {name}'s total is not its tasks' sum"
    return table


def test_the_exercises_readme_gives_the_graded_points():
    table = _readme_points()
    assert sorted(table) == [p.stem for p in EXERCISES], "exercises/README.md should list every exercise"
    for path in EXERCISES:
        graded = _graded_points(path)
        assert table[path.stem] == {t: float(p) for t, p in graded.items()}, (
            f"exercises/README.md gives {path.stem} the tasks (points) {table[path.stem]}; it is graded with {graded}")


def _task_reference_problems(texts: list[str], tasks: set[str], where: str) -> list[str]:
    problems = []
    for i, text in enumerate(texts):
        for match in _TASK_REFERENCE.finditer(text):
            named = [match.group(1), *re.findall(r"\d+", match.group(2))]
            if re.search(r"\bto\b", match.group(2)):
                named = [str(n) for n in range(int(named[0]), int(named[-1]) + 1)]
            unknown = [n for n in named if n not in tasks]
            if unknown:
                problems.append(f"{where}, cell {i}: {match.group(0)!r} names task {', '.join(unknown)}, but the "
                                f"notebook's tasks are {', '.join(sorted(tasks, key=int))}")
    return problems


@pytest.mark.parametrize("path", SOLUTIONS + EXERCISES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_task_reference_names_a_task_of_the_notebook(path: Path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    texts = ["".join(cell["source"]) for cell in notebook["cells"]]
    problems = _task_reference_problems(texts, set(_graded_points(path)), str(path.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_the_points_and_task_checks_can_fail():
    points = {"1": 3, "2": 1, "3": 1, "4": 2}
    right = ("| task | you write | points |\n| --- | --- | --- |\n| 1 | attention | 3 |\n| 2 | mask | 1 |\n"
             "| 3 | question | 1 |\n| 4 | softmax | 2 |\n\n## Task 4: a softmax (2 points)\n\n"
             "## Tasks 2 and 3: (1 point each)")
    assert _points_problems(right, points, "x") == []
    wrong = [
        (right.replace("| 4 | softmax | 2 |", "| 4 | softmax | 3 |"), "gives task 4 3 points"),
        (right.replace("| 4 | softmax | 2 |\n", ""), "leaves out task 4"),
        (right.replace("| 4 | softmax | 2 |", "| 4 | softmax | 2 |\n| 5 | more | 1 |"), "lists task 5"),
        (right.replace("(2 points)", "(3 points)"), "says 3, but the task is graded with 2"),
        (right.replace("Tasks 2 and 3", "Tasks 2 and 4"), "graded with 1 + 2"),
        (right.replace("Task 4:", "Task 5:"), "names a task that is not graded"),
    ]
    for text, message in wrong:
        problems = _points_problems(text, points, "x")
        assert any(message in p for p in problems), (message, problems)
    assert not _task_reference_problems(["as in task 3", "tasks 1 and 2", "check task 4", "task 1 of 02"],
                                        set(points), "x")
    assert _task_reference_problems(["a query with no key, as in task 5"], set(points), "x")
    assert _task_reference_problems(["tasks 3 to 6 build on it"], set(points), "x")
