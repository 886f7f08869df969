#!/usr/bin/env python3
"""Check a rendered dashboard in headless Chromium, at desktop and phone width.

    python3 browser_check.py out/index.html --expect cost_per_1k,eos_compliance,...

For each viewport (desktop 1280x900, phone 390x844) it starts a fresh Chromium
(own --user-data-dir, own process group) and drives it over the DevTools protocol
on --remote-debugging-pipe, with the Python standard library only. It fails
(exit 1, one line per problem) when:

  * the page logs a console error, throws, or Chromium logs an error;
  * the page requests anything that is not the file itself or a data: URL;
  * an expected chart (an <svg data-chart="ID">) is missing or not displayed;
  * the page is wider than the viewport (horizontal scrolling);
  * a chart's pixels are blank: its screenshot has too little ink or colour.

With --counts FILE it also writes, per viewport, each chart SVG's data marks as
the browser parsed them (the elements inside <g class="marks">: rects, circles,
filled circles, polylines and their points), for a test to compare with the
chart's table.

With --geometry FILE it writes, per viewport, where each displayed chart's
marks were laid out, in CSS pixels of the page as rendered (getBBox and the
points of each mark mapped through the SVG's getScreenCTM): every rect's edges,
fill and opacity, every polyline's points, every circle's centre and fill; the
anchor of every text outside the marks (axis ticks and category labels) with
its text-anchor; and the figure's facet and legend entries (label, swatch
colour and opacity), for a test to read each mark's value off the axes and
compare it with the exported job result.

It writes full-page screenshots NAME-desktop.png and NAME-phone.png to --out
(default: beside the page). Every wait has a deadline; Chromium's whole process
group is killed on the way out, so it never hangs.
"""

import argparse
import base64
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
VIEWPORTS = {"desktop": (1280, 900, False), "phone": (390, 844, True)}


class CheckFailed(Exception):
    pass


def find_chromium(explicit):
    for name in [explicit, "chromium", "chromium-browser", "google-chrome", "chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    raise CheckFailed("no Chromium found (apt-get install -y chromium, or pass --chromium PATH)")


class Browser:
    """One Chromium process spoken to over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, binary, width, height, deadline):
        self.deadline = deadline
        self.profile = tempfile.mkdtemp(prefix="dashboard-check-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Above fd 10 and close-on-exec: only the dup2 copies on 3 and 4 reach Chromium.
        to_chrome_r, from_chrome_w = _high_fd(to_chrome_r), _high_fd(from_chrome_w)

        def child_fds():  # runs in the child between fork and exec
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.log = tempfile.TemporaryFile()
        args = [binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
                f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"]
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            close_fds=False, preexec_fn=child_fds, start_new_session=True,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=3)
        for fd in (self.to_chrome, self.from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def stderr_tail(self):
        try:
            self.log.seek(0)
            return self.log.read().decode(errors="replace")[-2000:]
        except (OSError, ValueError):
            return ""

    def _read_message(self):
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed("timed out waiting for Chromium")
            ready, _, _ = select.select([self.from_chrome], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise CheckFailed("Chromium closed the DevTools pipe: " + self.stderr_tail()[-2000:])
                self.buffer += chunk
            elif self.process.poll() is not None:
                raise CheckFailed(f"Chromium exited with {self.process.returncode}: " + self.stderr_tail()[-2000:])
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.to_chrome, data):]
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise CheckFailed(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method):
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read_message()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def drain(self, seconds):
        """Collect events for a short while (late console messages, layout)."""
        end = min(time.monotonic() + seconds, self.deadline)
        while time.monotonic() < end:
            ready, _, _ = select.select([self.from_chrome], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                break
            self.buffer += chunk
            while b"\0" in self.buffer:
                message, self.buffer = self.buffer.split(b"\0", 1)
                self.events.append(json.loads(message))


def _high_fd(fd):
    """Move fd above 10 so dup2 onto 3 and 4 in the child cannot clobber it."""
    import fcntl
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


# --- PNG decoding (stdlib zlib) ------------------------------------------------

def decode_png(data):
    """(width, height, channels, rows) of an 8-bit RGB/RGBA non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise CheckFailed("screenshot is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise CheckFailed(f"unexpected PNG format (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, previous = [], bytes(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = rows[-1]
    return width, height, bpp, rows


def ink(png):
    """(share of non-white pixels, share of clearly coloured pixels)."""
    width, height, bpp, rows = decode_png(png)
    inked = coloured = 0
    for row in rows:
        for x in range(0, width * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if r < 235 or g < 235 or b < 235:
                inked += 1
                if max(r, g, b) - min(r, g, b) > 50:
                    coloured += 1
    total = max(1, width * height)
    return inked / total, coloured / total


# --- the check -----------------------------------------------------------------

# Per drawn chart SVG: its data marks (inside <g class="marks">, see the dashboard's
# chart/mod.rs), counted as the browser parsed them.
COUNT_MARKS = r"""
(() => JSON.stringify([...document.querySelectorAll('svg[data-chart]')].map(svg => {
  const marks = [...svg.querySelectorAll('g.marks')];
  const all = sel => marks.flatMap(g => [...g.querySelectorAll(sel)]);
  const fill = el => (el.getAttribute('fill') || '').toLowerCase();
  const polylines = all('polyline');
  return {id: svg.dataset.chart, layout: svg.dataset.layout || '', groups: marks.length,
          rects: all('rect').length, circles: all('circle').length,
          filled_circles: all('circle').filter(c => !['none', '#ffffff', '#fff', ''].includes(fill(c))).length,
          polylines: polylines.length,
          points: polylines.reduce((n, p) => n + p.points.numberOfItems, 0)};
})))()
"""

# Per displayed chart SVG: its marks, axis texts and legend in page pixels (see --geometry).
GEOMETRY = r"""
(() => JSON.stringify([...document.querySelectorAll('svg[data-chart]')].filter(svg => {
  const r = svg.getBoundingClientRect();
  return r.width > 0 && r.height > 0;
}).map(svg => {
  const ctm = svg.getScreenCTM();
  const at = (x, y) => { const p = new DOMPoint(x, y).matrixTransform(ctm); return [p.x, p.y]; };
  const marks = [...svg.querySelectorAll('g.marks')];
  const all = sel => marks.flatMap(g => [...g.querySelectorAll(sel)]);
  const opacity = el => parseFloat(el.getAttribute('opacity') || '1');
  const rects = all('rect').map(el => {
    const b = el.getBBox();
    const [left, top] = at(b.x, b.y), [right, bottom] = at(b.x + b.width, b.y + b.height);
    return {fill: (el.getAttribute('fill') || '').toLowerCase(), opacity: opacity(el), left, top, right, bottom};
  });
  const polylines = all('polyline').map(el => [...el.points].map(p => at(p.x, p.y)));
  const circles = all('circle').map(el => {
    const [cx, cy] = at(el.cx.baseVal.value, el.cy.baseVal.value);
    return {fill: (el.getAttribute('fill') || '').toLowerCase(), cx, cy};
  });
  const texts = [...svg.querySelectorAll('text')].filter(t => !t.closest('g.marks')).map(t => {
    const [x, y] = at(t.x.baseVal[0].value, t.y.baseVal[0].value);
    return {text: t.textContent.trim(), anchor: t.getAttribute('text-anchor') || 'start',
            rotated: t.hasAttribute('transform'), x, y};
  });
  const figure = svg.closest('figure');
  const facet = figure && figure.querySelector('.facet');
  const legend = figure ? [...figure.querySelectorAll('.legend li')].map(li => {
    const swatch = li.querySelector('svg > *');
    return {label: li.textContent.trim(), mark: swatch ? swatch.tagName : '',
            colour: ((swatch && (swatch.getAttribute('fill') !== 'none' && swatch.getAttribute('fill')
                      || swatch.getAttribute('stroke'))) || '').toLowerCase(),
            opacity: parseFloat(swatch && swatch.getAttribute('fill-opacity') || '1')};
  }) : [];
  return {id: svg.dataset.chart, layout: svg.dataset.layout || '', facet: facet ? facet.textContent.trim() : null,
          legend, rects, polylines, circles, texts};
})))()
"""

PROBE = r"""
(() => {
  const charts = [...document.querySelectorAll('svg[data-chart]')].map(svg => {
    const r = svg.getBoundingClientRect();
    return {id: svg.dataset.chart, layout: svg.dataset.layout || '', x: r.left + scrollX, y: r.top + scrollY,
            width: r.width, height: r.height, shown: r.width > 0 && r.height > 0};
  });
  return JSON.stringify({charts, scrollWidth: document.documentElement.scrollWidth, innerWidth,
    height: document.documentElement.scrollHeight, title: document.title});
})()
"""


def check_viewport(binary, page, name, width, height, mobile, expected, out, stem, min_ink, min_colour, deadline,
                   open_details=False, counts=None, geometry=None):
    problems = []
    browser = Browser(binary, width, height, deadline)
    try:
        targets = browser.send("Target.getTargets")["targetInfos"]
        page_target = next(t for t in targets if t["type"] == "page")
        browser.session = browser.send("Target.attachToTarget",
                                       {"targetId": page_target["targetId"], "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable")
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        browser.send("Page.navigate", {"url": page.as_uri()})
        browser.wait_for("Page.loadEventFired")
        browser.drain(0.5)

        for event in browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                problems.append(f"{name}: console {params['type']}: {text}")
            elif method == "Runtime.exceptionThrown":
                problems.append(f"{name}: uncaught exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                problems.append(f"{name}: browser error: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if url != page.as_uri() and not url.startswith(("data:", "about:")):
                    problems.append(f"{name}: the page loads {url}: it must be self-contained")

        probe = json.loads(browser.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True})
                           ["result"]["value"])
        if probe["scrollWidth"] > probe["innerWidth"] + 1:
            problems.append(f"{name}: page is {probe['scrollWidth']} px wide in a {probe['innerWidth']} px viewport")
        shown = [c for c in probe["charts"] if c["shown"]]
        for chart_id in expected:
            if not any(c["id"] == chart_id for c in probe["charts"]):
                problems.append(f"{name}: chart {chart_id!r} is missing (no <svg data-chart={chart_id!r}>)")
            elif not any(c["id"] == chart_id for c in shown):
                problems.append(f"{name}: chart {chart_id!r} is in the page but not displayed")

        for chart in shown:
            clip = {"x": chart["x"], "y": chart["y"], "width": chart["width"], "height": chart["height"], "scale": 0.5}
            shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                           "captureBeyondViewport": True, "optimizeForSpeed": True})
            inked, coloured = ink(base64.b64decode(shot["data"]))
            if inked < min_ink or coloured < min_colour:
                problems.append(f"{name}: chart {chart['id']!r} looks blank "
                                f"({inked:.1%} ink, {coloured:.2%} colour; need {min_ink:.0%} and {min_colour:.1%})")

        if counts is not None:
            marks = json.loads(browser.send("Runtime.evaluate", {"expression": COUNT_MARKS, "returnByValue": True})
                               ["result"]["value"])
            counts[name] = marks

        if geometry is not None:
            geometry[name] = json.loads(browser.send("Runtime.evaluate", {"expression": GEOMETRY,
                                                                          "returnByValue": True})["result"]["value"])

        if open_details:  # for a person looking at the screenshots: show every data table
            browser.send("Runtime.evaluate", {"expression": "document.querySelectorAll('details')"
                                                            ".forEach(d => d.open = true); document.documentElement"
                                                            ".scrollHeight", "returnByValue": True})
            probe["height"] = browser.send("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight",
                                                                "returnByValue": True})["result"]["value"]
        full = {"x": 0, "y": 0, "width": width, "height": probe["height"], "scale": 1}
        shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": full, "captureBeyondViewport": True})
        path = out / f"{stem}-{name}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        print(f"{name}: {len(shown)} charts shown, page {width}x{probe['height']} px, screenshot {path}")
    finally:
        browser.close()
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page", type=Path, help="the index.html to check")
    parser.add_argument("--expect", default="", help="comma-separated data-chart ids that must be drawn")
    parser.add_argument("--out", type=Path, help="where to write screenshots (default: beside the page)")
    parser.add_argument("--chromium", help="Chromium binary (default: chromium on PATH)")
    parser.add_argument("--min-ink", type=float, default=0.03, help="least share of non-white pixels per chart")
    parser.add_argument("--min-colour", type=float, default=0.005, help="least share of coloured pixels per chart")
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds for each viewport")
    parser.add_argument("--open-details", action="store_true", help="open every data table before the screenshots")
    parser.add_argument("--counts", type=Path, help="write each chart SVG's data marks (rects, circles, filled "
                                                     "circles, polyline points), per viewport, to this JSON file")
    parser.add_argument("--geometry", type=Path, help="write each displayed chart's marks, axis texts and legend "
                                                       "in page pixels, per viewport, to this JSON file")
    args = parser.parse_args()

    page = args.page.resolve()
    if not page.is_file():
        print(f"browser_check: {page} does not exist", file=sys.stderr)
        return 2
    out = (args.out or page.parent).resolve()
    out.mkdir(parents=True, exist_ok=True)
    expected = [e for e in args.expect.split(",") if e]
    problems = []
    counts = {} if args.counts else None
    geometry = {} if args.geometry else None
    try:
        binary = find_chromium(args.chromium)
        for name, (width, height, mobile) in VIEWPORTS.items():
            deadline = time.monotonic() + args.timeout
            try:
                problems += check_viewport(binary, page, name, width, height, mobile, expected, out, page.stem,
                                           args.min_ink, args.min_colour, deadline, args.open_details, counts, geometry)
            except CheckFailed as failure:
                problems.append(f"{name}: {failure}")
    except CheckFailed as failure:
        problems.append(str(failure))
    if counts is not None:
        args.counts.write_text(json.dumps(counts, indent=1))
    if geometry is not None:
        args.geometry.write_text(json.dumps(geometry))
    if problems:
        for problem in problems:
            print(f"FAIL {problem}", file=sys.stderr)
        return 1
    print(f"OK: {page} ({len(expected)} expected charts) at {', '.join(VIEWPORTS)} widths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
