"""The course website, built and opened in a real browser (headless Chromium).

Builds the site with the command of docs/site.md (``tools/build_site.py``, into a temporary folder), serves
it on 127.0.0.1 and opens every page: no broken internal link or image, every image loaded, every
formula typeset by MathJax (no ``$...$``, ``\\(``, ``\\frac`` or ``_{`` left as text, no dollar sign
beside a formula), no error output, nothing loaded from another host, code that scrolls rather than
being cut, figures on white in the dark theme, a search that answers. Then every lesson's slide deck
at 1280x720 and 1920x1080: no slide running past the screen without scrolling, no test markers, no
editing bars. A screenshot of every page and of each deck's first and tallest slide goes to
``site/_build/screenshots`` (or ``$MINITRANSFORMER_SITE_SHOTS``) for a person to look at.

Skipped when Chromium or chromedriver (Debian: ``apt-get install chromium chromium-driver``) or the
``site`` extra (``pip install -e ".[site]"``) is missing.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
SHOTS = Path(os.environ.get("MINITRANSFORMER_SITE_SHOTS", ROOT / "site" / "_build" / "screenshots"))
SLIDE_SIZES = [(1280, 720), (1920, 1080)]

pytestmark = pytest.mark.extra("site")  # its Python packages, Chromium, ChromeDriver and npm (tests/conftest.py)

# Everything a page is checked for, measured in the page once MathJax has finished.
PAGE_JS = r"""
const done = arguments[arguments.length - 1];
(async () => {
  // On a busy machine the document was once found without a body here: wait for it.
  while (!(document.body && document.readyState === 'complete')) { await new Promise(r => setTimeout(r, 50)); }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const images = [...document.images];
  images.forEach(i => i.loading = 'eager');
  await Promise.all(images.map(i => i.decode().catch(() => null)));
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'MJX-CONTAINER', 'NOSCRIPT']);
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode(node) {
    for (let e = node.parentElement; e; e = e.parentElement) { if (skip.has(e.tagName)) return NodeFilter.FILTER_REJECT; }
    return NodeFilter.FILTER_ACCEPT; }});
  // TeX left as text: delimiters, commands (\frac, \max), sub- and superscripts; and a dollar sign beside a
  // formula, what is left of a $$ that MyST read inside a paragraph as a $ and inline maths (issue 40).
  const isMath = (e) => e && e.classList && e.classList.contains('math');
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    const m = t.match(/\$[^$\s][^$]*\$|\$\$|\\\(|\\\)|\\\[|\\begin\{|\\[A-Za-z]{2,}|[_^]\{/);
    const stray = (isMath(n.previousSibling) && /^\s*\$/.test(t)) || (isMath(n.nextSibling) && /\$\s*$/.test(t));
    if (m || stray) raw.push(t.trim().slice(0, 120));
  }
  const wide = [...document.querySelectorAll('pre')].filter(p => p.scrollWidth > p.clientWidth + 1).filter(p => {
    for (let e = p, k = 0; e && k < 4; e = e.parentElement, k++) {
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) return false; }
    return true; }).map(p => p.textContent.slice(0, 60));
  const resources = [...document.querySelectorAll('script[src], link[rel~="stylesheet"][href], img[src], iframe[src]')]
      .map(e => e.src || e.href);
  done({
    title: document.title,
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    images: images.map(i => ({src: i.currentSrc || i.src, width: i.naturalWidth, complete: i.complete})),
    resources: resources,
    maths: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('.math mjx-container, mjx-container.MathJax').length,
    untypeset: [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
    merrors: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent.slice(0, 80)),
    raw: raw,
    errors: document.querySelectorAll('.output.traceback, .output.error, .system-message, .problematic').length,
    wide: wide,
  });
})().catch(e => done({failure: String(e)}));
"""

# Every leaf slide shown in turn, all fragments visible, measured against the window.
SLIDES_JS = r"""
const done = arguments[arguments.length - 1];
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  Reveal.configure({transition: 'none', backgroundTransition: 'none'});
  Reveal.layout();
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'MJX-CONTAINER']);
  const rawIn = (root) => {
    const found = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {acceptNode(node) {
      for (let e = node.parentElement; e && e !== root; e = e.parentElement) { if (skip.has(e.tagName)) return NodeFilter.FILTER_REJECT; }
      return NodeFilter.FILTER_ACCEPT; }});
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (/\$[^$\s][^$]*\$|\\\(|\\\[|\\begin\{/.test(n.textContent)) found.push(n.textContent.trim().slice(0, 80));
    }
    return found;
  };
  const out = [];
  for (const s of Reveal.getSlides()) {
    const idx = Reveal.getIndices(s);
    Reveal.slide(idx.h, idx.v);
    s.querySelectorAll('.fragment').forEach(f => f.classList.add('visible'));
    const r = s.getBoundingClientRect();
    const style = getComputedStyle(s);
    const heading = s.querySelector('h1, h2, h3, h4');
    out.push({h: idx.h, v: idx.v, top: r.top, bottom: r.bottom, left: r.left, right: r.right,
              scrollHeight: s.scrollHeight, clientHeight: s.clientHeight,
              scrollWidth: s.scrollWidth, clientWidth: s.clientWidth, overflowY: style.overflowY,
              title: heading ? heading.textContent.trim().slice(0, 60) : '', text: s.innerText, raw: rawIn(s)});
  }
  Reveal.slide(0, 0);
  done({slides: out, innerWidth: innerWidth, innerHeight: innerHeight,
        merrors: document.querySelectorAll('mjx-merror').length,
        resources: [...document.querySelectorAll('script[src], link[rel~="stylesheet"][href], img[src]')].map(e => e.src || e.href)});
})().catch(e => done({failure: String(e)}));
"""

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    """The site built by docs/site.md's command into a temporary folder, served on 127.0.0.1."""
    out = tmp_path_factory.mktemp("site") / "html"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_site.py"), "--out", str(out), "--strict"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, f"the site did not build (or Sphinx warned, see site/_build/warnings.txt):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    print(f"site built in {seconds:.0f} s: {done.stdout.strip().splitlines()[-1]}")
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield out, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(flag)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    try:
        yield driver
    finally:
        driver.quit()


def _viewport(driver, width: int, height: int) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def _local_file(out: Path, base: str, url: str) -> tuple[Path, str] | None:
    """The file under ``out`` that a same-site URL names, and its fragment; None for other hosts."""
    if not url.startswith(base + "/"):
        return None
    parts = urlsplit(url)
    path = unquote(parts.path).lstrip("/")
    target = out / path
    if path == "" or path.endswith("/"):
        target = target / "index.html"
    return target, unquote(parts.fragment)


def test_every_page_in_chromium(site, browser) -> None:
    out, base = site
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html") if not p.relative_to(out).parts[0] in
                   ("slides", "_static", "_sources"))
    assert any(p.startswith("notebooks/") for p in pages) and "index.html" in pages
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [p for p in pages if p.startswith("notebooks/")] == [f"notebooks/{n[:-6]}.html" for n in lessons]
    assert not (out / "solutions").exists(), "solutions are left out unless --solutions is given"

    _viewport(browser, 1280, 900)
    problems: list[str] = []
    ids: dict[Path, set[str]] = {}
    links: dict[str, set[str]] = {}
    for page in pages:
        for _ in range(2):  # a page whose checks could not run (not one that failed them) is loaded again
            browser.get(f"{base}/{page}")
            found = browser.execute_async_script(PAGE_JS)
            if "failure" not in found:
                break
        if "failure" in found:
            problems.append(f"{page}: the page's checks failed to run: {found['failure']}")
            continue
        if not page.startswith("_modules/"):  # the highlighted source pages are many and alike
            browser.save_screenshot(str(SHOTS / (page.replace("/", "__")[:-5] + ".png")))
        for image in found["images"]:
            if not image["complete"] or image["width"] == 0:
                problems.append(f"{page}: image not loaded: {image['src'][:100]}")
        for url in found["resources"]:
            if urlsplit(url).scheme in ("http", "https") and not url.startswith(base + "/"):
                problems.append(f"{page}: loads {url} from another host (the site must work offline)")
        if found["maths"] and found["typeset"] == 0:
            problems.append(f"{page}: {found['maths']} formulas but MathJax typeset none")
        problems += [f"{page}: formula not typeset: {t!r}" for t in found["untypeset"][:3]]
        problems += [f"{page}: MathJax error in {t!r}" for t in found["merrors"][:3]]
        problems += [f"{page}: raw TeX left in the text: {t!r}" for t in found["raw"][:3]]
        problems += [f"{page}: code cut off instead of scrolling: {t!r}" for t in found["wide"][:3]]
        if found["errors"]:
            problems.append(f"{page}: {found['errors']} error outputs or Sphinx error messages")
        for url in found["links"] + found["resources"]:
            links.setdefault(url, set()).add(page)

    for url, where in sorted(links.items()):
        local = _local_file(out, base, url)
        if local is None:
            continue
        target, fragment = local
        if not target.is_file():
            problems.append(f"broken link {url[len(base):]} on {sorted(where)[:3]}")
            continue
        if fragment and target.suffix == ".html":
            if target not in ids:
                ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
            if fragment not in ids[target]:
                problems.append(f"link to a missing anchor {url[len(base):]} on {sorted(where)[:3]}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])

    # Each lesson page: its own notebook to download (byte for byte), Colab and slide links.
    conf = runpy.run_path(str(ROOT / "site" / "conf.py"))
    repo = conf["REPOSITORY_URL"].split("github.com/", 1)[1].rstrip("/")
    for name in lessons:
        browser.get(f"{base}/notebooks/{name[:-6]}.html")
        hrefs = {a.text.strip(): a.get_attribute("href")
                 for a in browser.find_elements("css selector", ".lesson-links a")}
        target, _ = _local_file(out, base, hrefs["Download the notebook"])
        assert target.read_bytes() == (ROOT / "notebooks" / name).read_bytes(), name
        assert hrefs["Open in Colab"] == (f"https://colab.research.google.com/github/{repo}/blob/"
                                          f"{conf['REPOSITORY_BRANCH']}/notebooks/{name}")
        assert hrefs["Slides"] == f"{base}/slides/{name[:-6]}.slides.html"

    # The navigation lists the lessons in their order.
    browser.get(f"{base}/index.html")
    nav = browser.execute_script("return [...document.querySelectorAll('.bd-sidebar-primary nav a')].map(a => a.href)")
    in_nav = [urlsplit(h).path for h in nav if "/notebooks/" in h]
    assert in_nav == [f"/notebooks/{n[:-6]}.html" for n in lessons], in_nav

    # The dark theme keeps figures on white.
    with_figure = next(n for n in lessons if "image/png" in (ROOT / "notebooks" / n).read_text(encoding="utf-8"))
    browser.get(f"{base}/notebooks/{with_figure[:-6]}.html")
    browser.execute_script("document.documentElement.dataset.theme = 'dark';"
                           "document.querySelector('.cell_output img').scrollIntoView();")
    colours = browser.execute_script(
        "return [getComputedStyle(document.body).backgroundColor,"
        " getComputedStyle(document.querySelector('.cell_output img')).backgroundColor];")
    browser.save_screenshot(str(SHOTS / f"dark__{with_figure[:-6]}.png"))
    assert colours[1] == "rgb(255, 255, 255)", colours
    assert colours[0] != "rgb(255, 255, 255)", f"the dark theme did not apply: {colours}"


def test_search_answers(site, browser) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    _, base = site
    _viewport(browser, 1280, 900)
    browser.get(f"{base}/search.html?q=attention")
    # Sphinx adds the results one by one, then says how many it found.
    WebDriverWait(browser, 60).until(
        lambda d: "found" in d.execute_script(
            "const s = document.querySelector('#search-results .search-summary'); return s ? s.textContent : '';"))
    results = browser.execute_script("return [...document.querySelectorAll('#search-results li a')].map(a => a.href)")
    browser.save_screenshot(str(SHOTS / "search__attention.png"))
    # The lesson on the query's subject first (site/_static/search.js: lessons, then exercises, then the API).
    assert "/notebooks/03_self_attention.html" in results[0], results[:10]
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "return document.querySelectorAll('#search-results p.context').length >= 3"))
    snippets = browser.execute_script(
        "return [...document.querySelectorAll('#search-results p.context')].map(p => p.textContent)")
    assert not [s for s in snippets if re.search(r"\bLight\s+Dark\b", s)], snippets[:3]  # the colour-mode menu


def test_slides_fit_or_scroll(site, browser) -> None:
    out, base = site
    decks = sorted((out / "slides").glob("*.slides.html"))
    assert [d.name.split(".")[0] for d in decks] == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    problems: list[str] = []
    for deck in decks:
        name = deck.name.split(".")[0]
        _viewport(browser, *SLIDE_SIZES[0])
        browser.get(f"{base}/slides/{deck.name}")
        for width, height in SLIDE_SIZES:
            _viewport(browser, width, height)
            found = browser.execute_async_script(SLIDES_JS)
            if "failure" in found:
                problems.append(f"{name}: the checks failed to run: {found['failure']}")
                break
            slides = found["slides"]
            assert len(slides) > 3, f"{name}: only {len(slides)} slides"
            assert (found["innerWidth"], found["innerHeight"]) == (width, height)
            if found["merrors"]:
                problems.append(f"{name}: {found['merrors']} MathJax errors")
            for url in found["resources"]:
                if urlsplit(url).scheme in ("http", "https") and not url.startswith(base + "/"):
                    problems.append(f"{name}: loads {url} from another host")
                elif (local := _local_file(out, base, url)) and not local[0].is_file():
                    problems.append(f"{name}: missing {url[len(base):]}")
            for s in slides:
                where = f"{name} slide {s['h']}.{s['v']} {s['title']!r} at {width}x{height}"
                if s["bottom"] > height + 1 or s["top"] < -1 or s["right"] > width + 1:
                    problems.append(f"{where}: placed past the screen ({s['top']:.0f}..{s['bottom']:.0f} px)")
                if s["scrollHeight"] > s["clientHeight"] + 1 and s["overflowY"] not in ("auto", "scroll"):
                    problems.append(f"{where}: {s['scrollHeight']} px of content, {s['clientHeight']} px shown, "
                                    "no scrolling")
                if s["scrollWidth"] > s["clientWidth"] + 1:
                    problems.append(f"{where}: content {s['scrollWidth']} px wide, {s['clientWidth']} px shown")
                problems += [f"{where}: raw TeX {t!r}" for t in s["raw"][:2]]
                for marker in ("nbval", "NBVAL", "Click to add a cell", "Traceback (most recent call last)"):
                    if marker in s["text"]:
                        problems.append(f"{where}: shows {marker!r}")
            tallest = max(slides, key=lambda s: s["scrollHeight"])
            for label, s in (("first", slides[0]), ("tallest", tallest)):
                browser.execute_script(f"Reveal.slide({s['h']}, {s['v']}, 999);")  # all fragments shown
                browser.save_screenshot(str(SHOTS / f"slides__{name}__{width}x{height}__{label}.png"))
            print(f"{name} at {width}x{height}: {len(slides)} slides, tallest {tallest['scrollHeight']} px "
                  f"({sum(s['scrollHeight'] > s['clientHeight'] + 1 for s in slides)} scroll)")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:60])


def test_sidebar_names_break_at_dots_not_inside_words(site, browser) -> None:
    _, base = site
    _viewport(browser, 1600, 900)
    browser.get(f"{base}/api/minitransformer.training.trainer.html")
    found = browser.execute_script("""
        const links = [...document.querySelectorAll('.bd-sidebar-primary a, .bd-sidebar-secondary a')]
            .filter(a => /^[\\w.()]+$/.test(a.textContent.trim()) && a.textContent.includes('.'));
        const wordBreaking = links.filter(a => getComputedStyle(a).overflowWrap !== 'normal'
                                              || getComputedStyle(a).wordBreak !== 'normal');
        // A line can end only where course.js put a <wbr>: every line of a link starts a piece of its name.
        const badLines = [];
        for (const a of links) {
            const pieces = a.textContent.trim().split(/(?<=[._])/);
            const lines = new Set();  // the line boxes of the name's letters (its text nodes, not the code box)
            const walker = document.createTreeWalker(a, NodeFilter.SHOW_TEXT);
            while (walker.nextNode()) {
                const range = document.createRange();
                range.selectNodeContents(walker.currentNode);
                for (const r of range.getClientRects()) if (r.width > 0) lines.add(Math.round(r.top / 4));
            }
            if (lines.size > pieces.length) badLines.push(a.textContent.trim());
        }
        return {count: links.length, wordBreaking: wordBreaking.map(a => a.textContent.trim()), badLines,
                overflowing: links.filter(a => a.scrollWidth > a.clientWidth + 1).map(a => a.textContent.trim())};
    """)
    assert found["count"] > 20, found
    assert not found["wordBreaking"] and not found["badLines"] and not found["overflowing"], found


# The translator page: every sentence translated in the page, greedy and with beam 4, with what it showed.
TRANSLATOR_JS = r"""
const done = arguments[arguments.length - 1];
const [sentences, beams] = [arguments[0], arguments[1]];
(async () => {
  await window.miniTranslator.ready;
  const T = window.miniTranslator;
  const out = {readyMs: T.readyMs, alphaField: document.getElementById('alpha').value, runs: []};
  for (const beam of beams) {
    for (const s of sentences) {
      const r = await T.translate(s, beam);  // the model's own length penalty, as the CLI's default
      const sums = [];
      for (let layer = 0; layer < r.shape.L; layer++) {
        for (let head = -1; head < r.shape.H; head++) sums.push(...T.attentionMap(r, layer, head).map(row => row.reduce((a, b) => a + b, 0)));
      }
      out.runs.push({beam, text: r.text, ids: r.kept, ms: r.ms, sums, rows: r.attention.length, finished: r.finished.length});
    }
  }
  done(out);
})().catch(e => done({failure: String(e) + ' ' + e.stack}));
"""
FIFTEEN_WORDS = "Friday , March 3 , 2023 and then Monday , May 1 , 2000 , again"  # 15 words, unlike any date


def test_the_translator_page_writes_the_tokens_of_the_cli(site, browser) -> None:
    """The page's tokens are translate's, greedy and beam 4, on 40 held-out sentences; attention rows sum to 1."""
    import json

    from selenium.webdriver.support.ui import WebDriverWait

    from minitransformer.export import decode_ids
    from minitransformer.training import load_model

    out, base = site
    config = json.loads((out / "_static" / "translator" / "model" / "config.json").read_text(encoding="utf-8"))
    sentences = config["examples"][:40]
    assert len(sentences) == 40
    cli = {}
    for beam in (1, 4):
        done = subprocess.run([sys.executable, "-m", "minitransformer", "translate", "--checkpoint", config["checkpoint"],
                               "--beam", str(beam), *sentences], capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        cli[beam] = done.stdout.splitlines()
    model, tokenizer, _ = load_model(ROOT / config["checkpoint"] if not Path(config["checkpoint"]).is_absolute()
                                     else config["checkpoint"])
    # the length penalty the model's training chose, as `translate` and the page use it
    ids = {beam: decode_ids(model, tokenizer, sentences, beam, alpha=config["decoding"]["alpha"]) for beam in (1, 4)}

    _viewport(browser, 1280, 900)
    browser.get(f"{base}/translator.html")  # a fresh load: the page ready from its first byte
    found = browser.execute_async_script(TRANSLATOR_JS, sentences, [1, 4])
    assert "failure" not in found, found.get("failure")
    assert float(found["alphaField"]) == config["decoding"]["alpha"]  # the field starts at the model's penalty
    runs = {(r["beam"], k % 40): r for k, r in enumerate(found["runs"])}
    for beam in (1, 4):
        for k, sentence in enumerate(sentences):
            run = runs[(beam, k)]
            assert run["text"] == cli[beam][k], (beam, sentence)
            assert run["ids"] == ids[beam][k], (beam, sentence)
            assert run["rows"] == len(run["ids"]) and max(abs(s - 1) for s in run["sums"]) < 1e-4, (beam, sentence)
    beam4 = [r["ms"] for r in found["runs"] if r["beam"] == 4]

    # The controls a learner uses: a 15-word sentence, beam 4, the button.
    browser.find_element("id", "source").clear()
    browser.find_element("id", "source").send_keys(FIFTEEN_WORDS)
    browser.execute_script("document.getElementById('beam').value = '4';")
    browser.find_element("id", "translate").click()
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "return window.miniTranslator.last && window.miniTranslator.last.source === arguments[0]", FIFTEEN_WORDS))
    shown = browser.execute_script("""const r = window.miniTranslator.last; return {text: document.getElementById('translation').textContent,
        ms: r.ms, beam: r.beam, hypotheses: document.querySelectorAll('#hypotheses tr').length,
        cells: document.querySelectorAll('#attention td').length, rows: r.map.length, columns: r.srcIds.length,
        sums: r.map.map(row => row.reduce((a, b) => a + b, 0)), info: document.getElementById('model-info').textContent};""")
    browser.save_screenshot(str(SHOTS / "translator.png"))
    done = subprocess.run([sys.executable, "-m", "minitransformer", "translate", "--checkpoint", config["checkpoint"],
                           "--beam", "4", FIFTEEN_WORDS], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert shown["text"] == done.stdout.strip() and shown["beam"] == 4
    assert shown["hypotheses"] >= 1 and shown["cells"] == shown["rows"] * shown["columns"]
    assert max(abs(s - 1) for s in shown["sums"]) < 1e-4
    assert config["title"] in shown["info"] and config["checkpoint"] in shown["info"]
    print(f"translator page ({config['title']}): ready {found['readyMs']:.0f} ms after load; beam 4 median "
          f"{sorted(beam4)[len(beam4) // 2]:.0f} ms a sentence; the 15-word sentence with beam 4 {shown['ms']:.0f} ms")
    # Targets: ready in 3 s, 15 words with beam 4 in 1 s; the bounds here leave room for a busy machine.
    assert found["readyMs"] < 3 * 3000 and shown["ms"] < 3 * 1000, (found["readyMs"], shown["ms"])
