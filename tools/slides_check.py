"""Measure the RISE slides of the lessons in a real browser (a tool for authors, not a test).

Starts JupyterLab (with jupyterlab-rise) on a free port, opens each lesson at ``/rise/<path>``
(what *View > Render as Reveal Slideshow* shows) in headless Chromium, and measures the height of
every slide's content against the window. Optionally saves a screenshot of the first slide and of
each slide taller than the window, shown alone from its top edge: what falls below the window's
bottom edge is what a room would not see.

Needs: ``jupyter lab`` with jupyterlab-rise in the current environment, Chromium and chromedriver
(e.g. ``apt-get install chromium chromium-driver``), and ``selenium`` importable by the Python that
runs this script (a separate virtual environment is fine: pass ``--jupyter`` to name the other one's
``jupyter``).

    python tools/slides_check.py notebooks/00_introduction.ipynb --size 1920x1080 --size 1280x720 --shots /tmp/shots
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[1]

# The leaf slides (sections without nested sections), in the order Reveal shows them.
LEAVES_JS = "const leaves = [...document.querySelectorAll('.reveal .slides section')].filter(s => !s.querySelector('section'));"

# Every leaf slide (a <section> without nested sections) is shown on its own, with all its
# fragments visible, and its content height is measured; then the slide is hidden again.
MEASURE_JS = LEAVES_JS + """
const out = [];
for (const [i, s] of leaves.entries()) {
  const parent = s.parentElement.closest('section');
  const oldParent = parent ? parent.style.display : null;
  if (parent) parent.style.display = 'block';
  const old = [s.style.display, s.style.position, s.style.top, s.style.overflow, s.style.height];
  s.style.display = 'block'; s.style.position = 'absolute'; s.style.top = '0px'; s.style.height = 'auto';
  s.querySelectorAll('.fragment').forEach(f => f.classList.add('visible'));
  const h = s.scrollHeight;
  const heading = s.querySelector('h1, h2, h3, h4');
  const first = s.querySelector('.jp-Cell');
  // What fills the slide: M (markdown) or C (code), then input/output heights in px.
  const parts = [...s.querySelectorAll('.jp-Cell')].map(c => (c.classList.contains('jp-CodeCell') ? 'C' : 'M') + ':' +
    (c.querySelector('.jp-InputArea') ? c.querySelector('.jp-InputArea').offsetHeight : 0) + '/' +
    (c.querySelector('.jp-OutputArea') ? c.querySelector('.jp-OutputArea').offsetHeight : 0));
  out.push({index: i, height: h, parts: parts.join(' '), title: heading ? heading.textContent.trim().slice(0, 60) : '',
            starts_with_code: first ? first.classList.contains('jp-CodeCell') : false});
  [s.style.display, s.style.position, s.style.top, s.style.overflow, s.style.height] = old;
  if (parent) parent.style.display = oldParent;
}
return out;
"""


# Show leaf slide ``i`` alone at the top of the window, every fragment visible (for a screenshot of a tall
# slide); nothing is restored, since the next lesson is loaded afresh.
SHOW_JS = LEAVES_JS + """
const i = arguments[0];
const s = leaves[i];
const chain = [s];
for (let up = s.parentElement.closest('section'); up; up = up.parentElement.closest('section')) chain.push(up);
document.querySelectorAll('.reveal .slides section').forEach(x => {
  if (!chain.includes(x)) x.style.display = 'none';
});
for (const x of chain) {
  x.classList.remove('past', 'future', 'stack');
  x.classList.add('present');
  Object.assign(x.style, {display: 'block', opacity: '1', visibility: 'visible', transform: 'none'});
}
Object.assign(s.style, {position: 'absolute', top: '0px', height: 'auto'});
s.querySelectorAll('.fragment').forEach(f => f.classList.add('visible'));
s.style.top = (-s.getBoundingClientRect().top) + 'px';  // its top edge at the window's
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", help="lesson files, relative to the repository root")
    parser.add_argument("--size", action="append", default=None, help="window size WxH (repeatable)")
    parser.add_argument("--jupyter", default="jupyter", help="the jupyter executable that has jupyterlab-rise")
    parser.add_argument("--shots", default=None, help="folder for screenshots of slides taller than the window")
    parser.add_argument("--every-slide", action="store_true", help="with --shots: a screenshot of every slide, not only the tall ones")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the browser binary")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver", help="the matching chromedriver")
    parser.add_argument("--wait", type=float, default=25.0, help="seconds to let a slideshow render")
    args = parser.parse_args()
    sizes = [tuple(map(int, s.split("x"))) for s in (args.size or ["1920x1080", "1280x720"])]

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [args.jupyter, "lab", "--no-browser", f"--port={port}", "--ServerApp.token=", "--ServerApp.password=",
         "--ServerApp.disable_check_xsrf=True", "--allow-root", f"--ServerApp.root_dir={ROOT}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    report = {}
    try:
        deadline = time.time() + 90
        while time.time() < deadline:  # wait until the server answers
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(1)
        time.sleep(3)
        for width, height in sizes:
            options = Options()
            for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
                options.add_argument(flag)
            options.binary_location = args.chromium
            driver = webdriver.Chrome(options=options, service=Service(args.chromedriver))
            # The slide area is the viewport: make it exactly the screen size asked for.
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
            try:
                for notebook in args.notebooks:
                    driver.get(f"http://127.0.0.1:{port}/rise/{notebook}")
                    deadline = time.time() + args.wait
                    slides = []
                    while time.time() < deadline:
                        time.sleep(2)
                        slides = driver.execute_script(MEASURE_JS)
                        if slides and driver.execute_script("return document.querySelectorAll('.jp-OutputArea').length") > 0:
                            time.sleep(3)
                            slides = driver.execute_script(MEASURE_JS)
                            break
                    window_h = driver.execute_script("return window.innerHeight")
                    over = [s for s in slides if s["height"] > window_h]
                    key = f"{Path(notebook).name} @ {width}x{height}"
                    report[key] = {"slides": len(slides), "over": len(over),
                                   "tallest": max((s["height"] for s in slides), default=0),
                                   "start_with_code": sum(s["starts_with_code"] for s in slides)}
                    print(f"{key}: {len(slides)} slides, {len(over)} taller than {window_h} px "
                          f"(tallest {report[key]['tallest']} px), {report[key]['start_with_code']} start with code")
                    for s in over:
                        print(f"    slide {s['index']:>3}: {s['height']:>5} px  {s['title'][:40]:<40}  {s['parts']}")
                    if args.shots:
                        Path(args.shots).mkdir(parents=True, exist_ok=True)
                        driver.save_screenshot(str(Path(args.shots) / f"{Path(notebook).stem}_{width}x{height}_first.png"))
                        for s in slides if args.every_slide else over:
                            driver.execute_script(SHOW_JS, s["index"])
                            time.sleep(0.5)
                            name = f"{Path(notebook).stem}_{width}x{height}_slide{s['index']:03d}.png"
                            driver.save_screenshot(str(Path(args.shots) / name))
            finally:
                driver.quit()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
