"""Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe): no websocket library,
the standard library only. Used by bench_report.py to time how soon a report page is ready in a real browser.

    with Browser() as b:            # chromium found on PATH (Debian: apt-get install chromium), or Browser(path)
        page = b.open("file:///tmp/report.html", timeout=120)   # navigates, waits for the load event
        page.evaluate("document.title")

Messages are JSON objects ended by a NUL byte, written to the browser's fd 3 and read from its fd 4.
"""
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

# the time a page is ready: the first frame after its load event (and after the script's own first render, which the
# load event waits for), in ms since navigation start, as the page's own clock says it
READY_JS = """new Promise(function (done) {
  function frame() { requestAnimationFrame(function () { setTimeout(function () {
    var nav = performance.getEntriesByType("navigation")[0] || {};
    done({ready_ms: performance.now(), dom_content_loaded_ms: nav.domContentLoadedEventEnd || null,
          load_ms: nav.loadEventEnd || null, dom_nodes: document.getElementsByTagName("*").length});
  }, 0); }); }
  if (document.readyState === "complete") { frame(); } else { addEventListener("load", frame); }
})"""


def chromium_binary(given=None):
    for name in [given] if given else ["chromium", "chromium-browser", "google-chrome"]:
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


class ProtocolError(RuntimeError):
    pass


class Browser(object):
    def __init__(self, path=None, width=1360, height=900):
        binary = chromium_binary(path)
        if not binary:
            raise OSError("no Chromium found: apt-get install chromium")
        self._profile = tempfile.mkdtemp(prefix="gpuprobe-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--user-data-dir=%s" % self._profile, "--window-size=%d,%d" % (width, height), "--remote-debugging-pipe",
                "about:blank"]
        # fd 3: what the browser reads, fd 4: what it writes (the pipe transport's convention)
        self._proc = subprocess.Popen(["sh", "-c", 'exec "$0" "$@" 3<&%d 4>&%d' % (to_browser_r, from_browser_w)] + args,
                                      pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=60):
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise ProtocolError("%s: %s" % (method, reply["error"]))
                return reply.get("result") or {}
            self.events.append(reply)

    def wait_event(self, method, session=None, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def _read(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium in time")
            ready, _w, _x = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise ProtocolError("Chromium closed the pipe (exit status %s)" % self._proc.poll())
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg.decode())

    def open(self, url, timeout=120):
        """A new tab showing ``url``, once its load event fired (TimeoutError after ``timeout`` s)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, target)
        self.send("Page.enable", session=session)
        page.wall_start = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=session, timeout=timeout)
        self.wait_event("Page.loadEventFired", session=session, timeout=timeout)
        page.wall_loaded = time.monotonic()
        return page

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # pylint: disable=broad-except
            pass
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page(object):
    def __init__(self, browser, session, target):
        self.browser, self.session, self.target = browser, session, target
        self.wall_start = self.wall_loaded = None

    def evaluate(self, expression, timeout=120):
        """The value of a JavaScript expression (a promise is awaited)."""
        got = self.browser.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                                session=self.session, timeout=timeout)
        if got.get("exceptionDetails"):
            raise ProtocolError("script error: %s" % json.dumps(got["exceptionDetails"])[:500])
        return (got.get("result") or {}).get("value")

    def ready(self, timeout=120):
        return self.evaluate(READY_JS, timeout=timeout)

    def close(self):
        self.browser.send("Target.closeTarget", {"targetId": self.target})
